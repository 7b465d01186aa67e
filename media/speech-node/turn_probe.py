#!/usr/bin/env python3
"""The node's end-of-turn decision, measured without the engine (run with the node's venv
python; flite and sox on PATH):

    $VENV/bin/python media/speech-node/turn_probe.py [--conc 5] [--reps 2] \
        [--sets plain,paused] [--node-args "--threads 1 --turn-lead-ms 0"] [--server PATH]

Starts server.py on a free loopback port with `--node-args`, speaks the `voice_turn`
bench's phrases with flite (bench/src/voice.rs: the plain set, and the paused set with
its pauses), through 8 kHz µ-law and back to 16-bit PCM, and sends each at real-time pace
(20 ms frames) over its own Deepgram-style stream (`interim_results=true`,
`endpointing=1000`, `patience=short`, as the bench's question asks), `--conc` streams at
a time. Per phrase it prints when each event arrived, in ms after the end of the phrase's
last voiced frame (RMS ≥ 150, as the bench counts it): EagerEndOfTurn, TurnResumed,
EndOfTurn and the finals. The decision is the first of EagerEndOfTurn, EndOfTurn or a
final with text; one that came before the phrase's end is a cut-off (on the paused set,
inside the pause). The summary gives the decision's p50/p95 per set over the phrases not
cut off. The engine adds its reply (a cached prompt: 10-15 ms) and the wire; the bench
measures that whole. With --log-level DEBUG the node's log (turn checks, Smart Turn and
Whisper timings) goes to --node-log, on the same clock as this script's own stderr lines
("T <monotonic> end=<monotonic> <phrase>").
"""

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import aiohttp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# bench/src/voice.rs: PHRASES and PAUSED_PHRASES
PLAIN = ["yes please", "no thanks", "sure, call me back", "not today", "yeah that works", "no, too busy",
         "maybe tomorrow", "what is this about", "yes, in the afternoon", "never call again", "I already paid",
         "sure thing"]
PAUSED = [("I'd like to", 500, "maybe next week"), ("my number is", 700, "five five five, one two"),
          ("yes", 400, "but only in the afternoon"), ("well", 600, "not today thanks"),
          ("sure", 300, "call me back tomorrow"), ("hmm", 800, "what is this about"),
          ("no", 450, "I am not interested"), ("yeah", 650, "that would be fine")]
VOICED_RMS = 150.0
FRAME = 160  # 20 ms at 8 kHz


def speak(d, name, text):
    """`text` by flite, at 8 kHz through µ-law, as 20 ms frames trimmed to the voiced ones."""
    raw = os.path.join(d, name + ".raw")
    wav, ul = os.path.join(d, name + ".wav"), os.path.join(d, name + ".ul")
    subprocess.run(["flite", "-t", text, "-o", wav], check=True)
    subprocess.run(["sox", wav, "-r", "8000", "-c", "1", "-e", "u-law", "-t", "raw", ul], check=True)
    subprocess.run(["sox", "-r", "8000", "-c", "1", "-e", "u-law", "-t", "raw", ul, "-b", "16", "-e",
                    "signed-integer", "-t", "raw", raw], check=True)
    x = np.fromfile(raw, dtype="<i2")
    frames = [x[i:i + FRAME] for i in range(0, len(x) // FRAME * FRAME, FRAME)]
    voiced = [i for i, f in enumerate(frames) if np.sqrt(np.mean(f.astype(float) ** 2)) >= VOICED_RMS]
    return frames[voiced[0]:voiced[-1] + 1]


def phrases(sets, d):
    out = []
    if "plain" in sets:
        for i, t in enumerate(PLAIN):
            out.append(("plain", t, speak(d, f"p{i}", t)))
    if "paused" in sets:
        for i, (a, ms, b) in enumerate(PAUSED):
            pause = [np.zeros(FRAME, dtype="<i2")] * (ms // 20)
            out.append(("paused", f"{a} … {b}", speak(d, f"q{i}a", a) + pause + speak(d, f"q{i}b", b)))
    return out


async def one(session, url, phrase, results):
    kind, text, frames = phrase
    silence = np.zeros(FRAME, dtype="<i2")
    seq = [silence] * 25 + frames + [silence] * 100
    last_voiced = 25 + len(frames) - 1
    events, sent_at = [], {}
    got_final = asyncio.Event()
    async with session.ws_connect(url) as ws:
        async def reader():
            async for m in ws:
                if m.type != aiohttp.WSMsgType.TEXT:
                    continue
                o, now = json.loads(m.data), time.monotonic()
                kind_ = o.get("type")
                if kind_ == "Results":
                    tr = o["channel"]["alternatives"][0]["transcript"]
                    events.append((now, "final" if o["is_final"] else "interim", tr))
                    if o["is_final"] and tr:
                        got_final.set()
                elif kind_ in ("EndOfTurn", "EagerEndOfTurn", "TurnResumed"):
                    events.append((now, kind_, o.get("transcript", "")))

        task = asyncio.create_task(reader())
        t0 = time.monotonic()
        for i, f in enumerate(seq):
            wait = t0 + i * 0.02 - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await ws.send_bytes(f.tobytes())
            sent_at[i] = time.monotonic()
            if got_final.is_set() and i > last_voiced + 5:
                break
        try:
            await asyncio.wait_for(got_final.wait(), 3)
        except asyncio.TimeoutError:
            pass
        await ws.send_str(json.dumps({"type": "CloseStream"}))
        try:
            await asyncio.wait_for(task, 3)
        except Exception:
            task.cancel()
    end = sent_at[last_voiced] + 0.02
    print(f"T {time.monotonic():.3f} end={end:.3f} {text}", file=sys.stderr)
    results.append((kind, text, end, events))


async def run(a):
    proc = subprocess.Popen([a.python, a.server, "--port", "0", "--log-level", a.log_level]
                            + a.node_args.split(), stderr=subprocess.PIPE, text=True)
    try:
        port = None
        while port is None:
            line = proc.stderr.readline()
            if not line:
                raise SystemExit("the node exited before listening")
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            port = int(m.group(1)) if m else None
        log = open(a.node_log, "w")

        def pump():
            for line in proc.stderr:
                log.write(f"{time.monotonic():.3f} {line}")
                log.flush()

        threading.Thread(target=pump, daemon=True).start()
        with tempfile.TemporaryDirectory() as d:
            phs = phrases(a.sets.split(","), d)
        url = (f"ws://127.0.0.1:{port}/v1/listen?encoding=linear16&sample_rate=8000&channels=1&language=en-US"
               f"&interim_results=true&endpointing=1000&patience=short&words=false")
        async with aiohttp.ClientSession() as s:
            deadline = time.monotonic() + 120
            while True:
                try:
                    async with s.get(f"http://127.0.0.1:{port}/ready") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the node is not ready after 120 s")
                await asyncio.sleep(0.2)
            await one(s, url, phs[0], [])  # warm-up
            results, gate = [], asyncio.Semaphore(a.conc)

            async def staggered(ph, k):
                await asyncio.sleep(k * 0.37)
                async with gate:
                    await one(s, url, ph, results)

            await asyncio.gather(*(staggered(ph, k) for k, ph in enumerate(phs * a.reps)))
    finally:
        proc.terminate()
    report(results)


def report(results):
    decided, cut, count = {}, {}, {}
    for kind, text, end, events in sorted(results, key=lambda r: (r[0], r[1])):
        count[kind] = count.get(kind, 0) + 1
        decisions = [e for e in events if e[1] in ("EagerEndOfTurn", "EndOfTurn", "final") and e[2]]
        first = decisions[0] if decisions else None
        is_cut = first is not None and first[0] < end
        if is_cut:
            cut[kind] = cut.get(kind, 0) + 1
        elif first is not None:
            decided.setdefault(kind, []).append((first[0] - end) * 1000)
        line = " ".join(f"{e[1]}@{(e[0] - end) * 1000:.0f}:{e[2][:24]!r}" for e in events if e[1] != "interim")
        print(f"{kind:6} {text[:34]:34} {'CUT' if is_cut else '   '} {line}")
    for kind in count:
        v = sorted(decided.get(kind, []))
        p50 = float(np.median(v)) if v else float("nan")
        p95 = v[min(len(v) - 1, int(0.95 * len(v)))] if v else float("nan")
        print(f"SUMMARY {kind}: phrases {count[kind]}, cut off {cut.get(kind, 0)}, "
              f"decision p50 {p50:.0f} ms, p95 {p95:.0f} ms (of {len(v)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="the node venv's python")
    ap.add_argument("--server", default=os.path.join(HERE, "server.py"),
                    help="the node's server.py (a previous commit's checkout, to compare)")
    ap.add_argument("--node-args", default="--threads 1", help="server.py's arguments, space-separated")
    ap.add_argument("--sets", default="plain,paused")
    ap.add_argument("--conc", type=int, default=5, help="streams at a time")
    ap.add_argument("--reps", type=int, default=1, help="times each phrase is sent")
    ap.add_argument("--log-level", default="INFO", help="the node's")
    ap.add_argument("--node-log", default=os.path.join(tempfile.gettempdir(), "turn_probe_node.log"))
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
