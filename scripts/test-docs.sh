#!/usr/bin/env bash
# The first-day snippets of the docs, run as a reader pastes them against
# the example server: docs/coming-from.md (grammY's bot.api through
# client.fetch, a `ws` gateway client, a svix webhook receiver) and the
# client that opens docs/gateway.md; and the menu bots of
# docs/commands-and-buttons.md (Python, standard library) against the Rust
# server and then the C server. The npm packages are pinned by
# tests/coming-from/package-lock.json. Each server runs on loopback on a
# fresh temp database with the system clock (webhook timestamps must be
# real for svix) and delivers to http on loopback; it is stopped after.
# Then every code block of README.md, docs/c-api.md, docs/server.md and
# docs/wasm.md, by tests/docs/blocks.py (its header says how each language
# is compiled, run or checked): Rust against the workspace crates, C and
# C++ against include/botspace.h, JavaScript against the npm package
# (scripts/build-wasm.sh), shell commands checked or run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/install.sh
source scripts/lib/install.sh
command -v npm >/dev/null || need_apt nodejs npm
need_cmd c++:g++ pkg-config
dir=tests/coming-from
stamp="$dir/node_modules/.lock-stamp"
sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$sum" >"$stamp"
fi
cargo build --release --example server
# The npm package the JavaScript blocks import (quick when up to date).
scripts/build-wasm.sh >/dev/null
need_cmd cc:gcc make python3
need_apt libcurl4-openssl-dev
make -s -C examples/c-server >/dev/null
tmp=$(mktemp -d)
secret="docs-admin-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
pid=""
trap 'stop; rm -rf "$tmp"' EXIT
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; pid=""; }
# start BINARY: a fresh database; sets pid and base.
start() {
    rm -f "$tmp"/botspace.db*
    "$1" --addr 127.0.0.1:0 --db "$tmp/botspace.db" --admin-secret "$secret" \
        --webhook-allow-http --webhook-allow-private-addresses >"$tmp/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q '^botspace ready' "$tmp/server.log" && break; sleep 0.1; done
    grep -q '^botspace ready' "$tmp/server.log" || { echo "FAIL: $1 did not start:"; cat "$tmp/server.log"; exit 1; }
    base=$(sed -n 's/^botspace listening on //p' "$tmp/server.log")
}
alive() { kill -0 "$pid" 2>/dev/null || { echo "FAIL: the $1 server died"; cat "$tmp/server.log"; exit 1; }; }

start ./target/release/examples/server
BOTSPACE_URL="$base" BOTSPACE_ADMIN="$secret" node --test "$dir/snippets.test.mjs"
BOTSPACE_URL="$base" BOTSPACE_ADMIN="$secret" python3 tests/guides/commands_and_buttons.py
alive Rust
stop
start examples/c-server/build/botspace-server
BOTSPACE_URL="$base" BOTSPACE_ADMIN="$secret" python3 tests/guides/commands_and_buttons.py
alive C
stop
python3 tests/docs/blocks.py
