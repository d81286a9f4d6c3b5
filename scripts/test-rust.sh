#!/usr/bin/env bash
# Rust tests of the whole workspace: unit tests, the shared test vectors,
# rule tests, concurrency, and the example server over real TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (rustup)"; exit 1; }
# The C compiler builds the bundled SQLite.
command -v cc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc; }
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
# Style and lints first: they are the cheapest to fail on.
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The committed vectors are exactly what their generator makes.
python3 tests/vectors/gen.py --check
# Every vector response fits docs/openapi.yaml (and the checker rejects mutants).
python3 -c 'import jsonschema, yaml' 2>/dev/null || pip install -q jsonschema pyyaml
python3 tests/openapi_vectors.py
cargo build --example server
cargo test --workspace
