#!/usr/bin/env bash
# Builds the botspace npm package and runs every WASM test with Node's test
# runner: the shared test vectors through handleRequest, the fetch adapter,
# the gateway, export/import, page storages, bad input, panics, the packed
# package (node, web and workerd entries, TypeScript types), the edge-worker
# example on real workerd (npm `workerd`, pinned in its package-lock.json)
# and the browser example in headless Chromium (Debian's, never a
# downloaded one). Works from a clean checkout on a fresh machine: it installs what is
# missing (see scripts/build-wasm.sh) and is quick when all is in place.
#
#   scripts/test-wasm.sh            # build + all tests
#   scripts/test-wasm.sh --bench    # also print the WASM req/s figures
#
# Exits non-zero when anything fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    *) echo "usage: $0 [--bench]" >&2; exit 2 ;;
  esac
done
log() { printf '[test-wasm] %s\n' "$*" >&2; }

# 1. The package (installs clang, the wasm32 target, wasm-bindgen-cli, node),
#    and the same package with `debugPanic` (cargo feature test-panic) for
#    wasm/test/panic.test.mjs; the shipped one never has it.
export BOTSPACE_TEST_PANIC_PKG="$("$ROOT/scripts/build-wasm.sh" --test-panic)"
# The build writes the module's size into docs/wasm.md: the figure there
# must already be the build's.
size_line() { sed -n '/^<!-- wasm-size:/{n;p;}' "$ROOT/docs/wasm.md"; }
documented="$(size_line)"
"$ROOT/scripts/build-wasm.sh" >/dev/null
if [ "$(size_line)" != "$documented" ]; then
  echo "FAIL: docs/wasm.md said \"$documented\"; the build's module: \"$(size_line)\" (now written there: commit it)"
  exit 1
fi
log "docs/wasm.md gives the built module's size: $documented"

# 2. Headless Chromium from Debian for the browser example.
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  log "installing chromium (Debian package)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
fi
export CHROMIUM_PATH="$CHROMIUM"
# curl: the edge worker's README walk (workerd.test.mjs runs it as written).
if ! command -v curl >/dev/null; then
  log "installing curl (Debian package)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq curl >&2
fi
# openssl: wasm/test/webhooks.test.mjs makes a throwaway CA and certificates
# for its https receivers with the command-line tool.
if ! command -v openssl >/dev/null; then
  log "installing openssl (Debian package)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openssl >&2
fi

# 3. The examples' npm dependencies (pinned by their package-lock.json;
#    `botspace` itself is a link to wasm/pkg).
npm_ci() { # dir
  local dir="$1" stamp="$1/node_modules/.lock-stamp"
  local sum; sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ] || [ ! -e "$dir/node_modules/botspace/package.json" ]; then
    log "npm ci in ${dir#"$ROOT"/}"
    (cd "$dir" && { npm ci --no-audit --no-fund --loglevel=error >&2 || npm install --no-audit --no-fund --loglevel=error >&2; })
    echo "$sum" > "$stamp"
  fi
}
# Playwright must never fetch a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
npm_ci "$ROOT/examples/edge-worker"
npm_ci "$ROOT/examples/browser"

# 4. The tests.
mkdir -p "$ROOT/test-output"
cd "$ROOT"
log "node --test"
node --test \
  wasm/test/*.test.mjs \
  examples/edge-worker/*.test.mjs \
  examples/browser/*.test.mjs

if [ "$BENCH" -eq 1 ]; then
  log "benchmark"
  node wasm/bench/bench.mjs
  node wasm/bench/storage.mjs
fi
