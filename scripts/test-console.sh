#!/usr/bin/env bash
# The admin console in a real browser: starts the example server (debug
# build, fresh temp database, loopback) and runs tests/console with Node's
# test runner, driving Debian's headless Chromium through playwright-core
# (never a downloaded browser). Installs what a fresh machine lacks:
# chromium (apt), node/npm (apt), the pinned npm packages (npm ci).
# Screenshots go to test-output/console-*.png (C server: console-c-*.png).
#
#   scripts/test-console.sh                 # against the Rust example server, then the C server
#   scripts/test-console.sh --server BIN    # against one server binary only (the example
#                                           # servers' flags; e.g. examples/c-server/build/botspace-server)
set -euo pipefail
SERVER=""
case "${1:-}" in
  --server) SERVER="${2:?--server needs a server binary}" ;;
  "") ;;
  *) echo "usage: $0 [--server BIN]" >&2; exit 2 ;;
esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[test-console] %s\n' "$*" >&2; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
need_apt=()
command -v node >/dev/null || need_apt+=(nodejs npm)
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || need_apt+=(chromium)
# The C server it builds delivers webhooks with libcurl.
dpkg-query -W -f='${Status}' libcurl4-openssl-dev 2>/dev/null | grep -q 'install ok installed' || need_apt+=(libcurl4-openssl-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]} (Debian packages)"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >&2
fi
export CHROMIUM_PATH="$CHROMIUM"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
dir="$ROOT/tests/console"
stamp="$dir/node_modules/.lock-stamp"
sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
  log "npm ci in tests/console"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$sum" > "$stamp"
fi

# run_against BIN: starts that server on a fresh database and runs the test.
run_against() {
  local bin=$1 tmp pid base secret
  tmp=$(mktemp -d)
  secret="console-admin-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  "$bin" --addr 127.0.0.1:0 --db "$tmp/botspace.db" --admin-secret "$secret" --demo >"$tmp/server.log" 2>&1 &
  pid=$!
  # shellcheck disable=SC2064
  trap "kill $pid 2>/dev/null; rm -rf '$tmp'" EXIT
  for _ in $(seq 100); do grep -q '^botspace ready' "$tmp/server.log" && break; sleep 0.1; done
  grep -q '^botspace ready' "$tmp/server.log" || { echo "FAIL: $bin did not start:"; cat "$tmp/server.log"; exit 1; }
  base=$(sed -n 's/^botspace listening on //p' "$tmp/server.log")
  log "the console against $bin ($base)"
  (cd "$dir" && BOTSPACE_URL="$base" BOTSPACE_ADMIN_SECRET="$secret" SHOT_PREFIX="$2" \
    TEST_OUTPUT_DIR="$ROOT/test-output/" node --test console.test.mjs)
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
  trap - EXIT
}

mkdir -p "$ROOT/test-output"
if [ -n "$SERVER" ]; then
  run_against "$SERVER" console-one
  exit 0
fi
# The Rust example server, then the C one (built by scripts/test-c.sh,
# which runs first in scripts/test-all.sh; built here when missing): the
# console is the library's, so it must work the same behind both.
cargo build --example server
run_against ./target/debug/examples/server console
c_server=examples/c-server/build/botspace-server
[ -x "$c_server" ] || make -C examples/c-server >&2
run_against "$c_server" console-c
