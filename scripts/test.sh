#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what it needs
# (idempotently), starts PostgreSQL, then lints and runs every test.
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh -p callsmith-sip   # extra args go to cargo nextest
set -euo pipefail
cd "$(dirname "$0")/.."

eval "$(bash scripts/test-deps.sh)"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo nextest"
# The binary under test is built first so end-to-end tests can start it.
cargo build --locked -p callsmith-engine --bin callsmith
cargo nextest run --workspace --locked --no-fail-fast "$@"
