#!/usr/bin/env bash
# Rust tests of the whole workspace: unit tests, the shared test vectors,
# rule tests, concurrency, and the example server over real TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (rustup)"; exit 1; }
# The C compiler builds the bundled SQLite.
command -v cc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc; }
cargo build --example server
cargo test --workspace
