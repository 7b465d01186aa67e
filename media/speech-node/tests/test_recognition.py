"""A stream's recognition options (node_stt.RecOptions): which languages a final is
decoded in and which hints Whisper gets. The choice among the candidates is tested on
given probabilities; one test runs the installed multilingual Whisper on German speech.
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True

from node_stt import RecOptions, pick_language, whisper_language  # noqa: E402


def test_language_tags_become_whisper_codes():
    assert whisper_language("de-DE") == "de"
    assert whisper_language("EN_us") == "en"
    assert whisper_language("fr") == "fr"
    assert whisper_language("multi") is None
    assert whisper_language("") is None
    assert whisper_language(None) is None


def test_options_take_the_candidates_primary_first_without_repeats():
    o = RecOptions.from_request("multi", ["de-DE", "en-US", "de-AT"], [" Callsmith ", "", 7])
    assert o.languages == ["de", "en"]
    assert o.hints == ["Callsmith"]
    # One language: the stream's `language`; none at all: no language named.
    assert RecOptions.from_request("es-ES", [], []).languages == ["es"]
    assert RecOptions.from_request(None).languages == []


def test_partials_use_the_last_finals_language_else_the_primary():
    o = RecOptions.from_request("multi", ["de-DE", "en-US"])
    assert o.current() == "de"
    o.detected = "en"
    assert o.current() == "en"
    assert RecOptions.from_request(None).current() is None


def test_the_most_probable_candidate_wins_and_others_never_do():
    probs = [("fr", 0.7), ("en", 0.2), ("de", 0.1)]
    # French is most probable overall, but only English and German are allowed.
    assert pick_language(probs, ["de", "en"]) == "en"
    assert pick_language(probs, ["de"]) == "de"
    # None of the candidates has a probability: the primary.
    assert pick_language(probs, ["es", "it"]) == "es"
    assert pick_language(probs, []) is None


def german_speech_16k():
    """A German sentence from SVOX Pico at 16 kHz, or fail when it is not installed."""
    from node_tts import PicoEngine, pico_languages

    if "de-DE" not in pico_languages():
        pytest.fail("the SVOX Pico voices (py-nanotts) are not installed in this venv")
    import soxr

    engine = PicoEngine("de-DE", "pico-de-DE")
    pcm = np.concatenate(list(engine.synthesize("Guten Tag, ich möchte einen Termin für nächste Woche.", 1.0)))
    return soxr.resample(pcm.astype(np.float32) / 32768.0, engine.sample_rate, 16000).astype(np.float32)


def test_whisper_identifies_the_spoken_language_among_the_candidates():
    import node_models
    from node_stt import Recognizer

    model_dir = node_models.assemble_whisper_base()
    if model_dir is None:
        pytest.fail("the multilingual Whisper base model is not installed in this venv")
    rec = Recognizer(model_dir, 1, "whisper-base")
    audio = german_speech_16k()
    opts = RecOptions.from_request("multi", ["en-US", "de-DE"])
    text, _words, _end, language = rec.transcribe(audio, 0.0, False, opts=opts, identify=True)
    assert language == "de"
    assert "termin" in text.lower()
    # Without identification the primary (English) is used, whatever was spoken.
    assert rec.transcribe(audio, 0.0, False, opts=opts)[3] == "en"
