#!/usr/bin/env bash
# The docs' code, run as a reader pastes it:
#
#   1. the first-day snippets against the example server: docs/coming-from.md
#      (grammY's bot.api through client.fetch, a `ws` gateway client, a svix
#      webhook receiver) and the client that opens docs/gateway.md. The npm
#      packages are pinned by tests/coming-from/package-lock.json. The server
#      runs on loopback on a fresh temp database with the system clock
#      (webhook timestamps must be real for svix) and delivers to http on
#      loopback; it is stopped after.
#   2. every code block of README.md, docs/c-api.md, docs/server.md and
#      docs/wasm.md by tests/docs/blocks.py (its header says how each
#      language is compiled, run or checked): Rust against the workspace
#      crates, C and C++ against include/botspace.h, JavaScript against the
#      npm package (scripts/build-wasm.sh), shell commands checked or run.
#
# Runs both parts even after a failure; exits non-zero if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/install.sh
source scripts/lib/install.sh
command -v npm >/dev/null || need_apt nodejs npm
need_cmd cc:gcc c++:g++ make pkg-config
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
tmp=$(mktemp -d)
secret="docs-admin-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
./target/release/examples/server --addr 127.0.0.1:0 --db "$tmp/botspace.db" --admin-secret "$secret" \
    --webhook-allow-http --webhook-allow-private-addresses >"$tmp/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q '^botspace ready' "$tmp/server.log" && break; sleep 0.1; done
grep -q '^botspace ready' "$tmp/server.log" || { echo "FAIL: the example server did not start:"; cat "$tmp/server.log"; exit 1; }
base=$(sed -n 's/^botspace listening on //p' "$tmp/server.log")
status=0
BOTSPACE_URL="$base" BOTSPACE_ADMIN="$secret" node --test "$dir/snippets.test.mjs" || status=1
kill -0 "$pid" 2>/dev/null || { echo "FAIL: the example server died"; cat "$tmp/server.log"; status=1; }
python3 tests/docs/blocks.py || status=1
exit "$status"
