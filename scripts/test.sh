#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what it needs
# (idempotently), starts PostgreSQL, then lints and runs every test, and last a
# one-minute soak of the real binary under SIPp calls (bench/src/bin/soak.rs).
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh -p callsmith-sip   # extra args go to cargo nextest (no soak)
set -euo pipefail
cd "$(dirname "$0")/.."

eval "$(bash scripts/test-deps.sh)"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== console: JS unit tests and type check"
# The console's pure modules under node's test runner, and tsc --checkJs over every module
# (tests/console-unit/); both run before nextest so its summary stays the last output.
node --experimental-detect-module --test --test-reporter=dot tests/console-unit/
node "$CALLSMITH_TSC" -p tests/console-unit/tsconfig.json
echo "== speech node: Python unit tests"
# The recognition stream's endpointing, on generated audio (media/speech-node/tests).
"$CALLSMITH_STT_PYTHON" -m pytest -q -p no:cacheprovider media/speech-node/tests
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo nextest"
# The binary under test is built first so end-to-end tests can start it.
cargo build --locked -p callsmith-cli --bin callsmith -p callsmith-bench --bin soak
cargo nextest run --workspace --locked --no-fail-fast "$@"
if [ $# -eq 0 ]; then
  echo "== soak (60 s, about 20 live calls)"
  "${CARGO_TARGET_DIR:-target}/debug/soak" --seconds 60 --live 20
fi
