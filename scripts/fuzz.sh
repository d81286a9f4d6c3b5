#!/usr/bin/env bash
# Coverage-guided fuzzing: runs each cargo-fuzz target for SECONDS (default 20).
# Needs the nightly toolchain (installs cargo-fuzz 0.13.2 when missing). Without
# nightly it says so and fails, unless FUZZ_OPTIONAL=1.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_EACH="${1:-20}"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "nightly toolchain not found: fuzzing skipped"
    [ "${FUZZ_OPTIONAL:-0}" = 1 ] && exit 0
    exit 1
fi
# shellcheck source=lib/install.sh
source ../scripts/lib/install.sh
need_cargo_tool cargo-fuzz 0.13.2 || { echo "cannot install cargo-fuzz: fuzzing not run"; exit 1; }
for t in framing handle_request gateway_feed import_database; do
    echo "== fuzz $t for ${SECONDS_EACH}s"
    # Run in a scratch copy so new finds do not litter the committed corpus.
    work="$(mktemp -d)"
    cp -r "corpus/$t/." "$work/"
    find "$work" -mindepth 2 -type f -exec cp {} "$work/" \;
    cargo +nightly fuzz run "$t" "$work" -- -max_total_time="$SECONDS_EACH" -max_len=65536 -print_final_stats=1
    rm -rf "$work"
done
echo "fuzzing: no crash in any target"
