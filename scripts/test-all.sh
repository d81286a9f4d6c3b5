#!/usr/bin/env bash
# Runs every test of botspace: Rust (core, vectors, example server over TCP),
# the vectors and rule tests again on PostgreSQL, C and C++ (ABI, sanitizers, valgrind, C server over TCP), WASM (Node) and
# the browser example and the admin console in headless Chromium, and schemathesis against the
# example server with docs/openapi.yaml, the docs' client snippets against the
# example server, and each cargo-fuzz target for a
# bounded time on the nightly toolchain. Installs what a fresh machine
# lacks first. Exits non-zero on the first failing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output

suite() {
  local name=$1; shift
  echo
  echo "=== $name: $* ==="
  local log="test-output/$name.log"
  if "$@" 2>&1 | tee "$log"; then
    echo "=== $name: ok"
  else
    echo "=== $name: FAILED (log: $log)"
    exit 1
  fi
}

suite rust scripts/test-rust.sh
suite c scripts/test-c.sh
suite postgres scripts/test-postgres.sh
suite wasm scripts/test-wasm.sh
suite console scripts/test-console.sh
suite openapi scripts/test-openapi.sh
suite docs scripts/test-docs.sh
suite fuzz scripts/fuzz.sh 15

# One closing line over every suite, counted from the runners' own summaries.
python3 - <<'PY'
import re, pathlib
passed = failed = 0
for name in ("rust", "postgres", "c", "wasm", "console", "openapi", "docs"):
    text = pathlib.Path(f"test-output/{name}.log").read_text(errors="replace")
    for p, f in re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed", text):
        passed += int(p); failed += int(f)
    for p in re.findall(r"^(?:#|ℹ) pass (\d+)$", text, re.M):
        passed += int(p)
    for f in re.findall(r"^(?:#|ℹ) fail (\d+)$", text, re.M):
        failed += int(f)
    for p, f in re.findall(r"^c-tests: (\d+) passed, (\d+) failed$", text, re.M):
        passed += int(p); failed += int(f)
    # schemathesis: "N generated, N passed" per API part
    for g, p in re.findall(r"(\d+) generated, (\d+) passed", text):
        passed += 1 if g == p else 0; failed += 0 if g == p else 1
print(f"total: {passed} passed, {failed} failed")
PY
