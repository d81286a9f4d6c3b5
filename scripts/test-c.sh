#!/usr/bin/env bash
# Every C and C++ test of botspace, from a clean checkout on a fresh machine:
#
#   1. tools: gcc, g++, make, valgrind, pkg-config, libcurl4-openssl-dev
#      (apt, only when missing), standardwebhooks (pip)
#      and cbindgen 0.29.4 (cargo install, only when missing or another version);
#   2. include/botspace.h equals a fresh cbindgen run (fails when stale;
#      `scripts/test-c.sh --regen-header` rewrites it and exits);
#   3. the Rust unit tests of bindings/c (the FFI layer);
#   4. tests/c/test_c_api (test vectors, NULL arguments, configurations,
#      frees, gateway, webhook deliveries, 8 threads) linked statically, dynamically, with
#      AddressSanitizer+UBSan, and under valgrind (no leak, no error);
#   5. tests/cpp/test_cpp (the C++17 wrapper), plain and with ASan+UBSan;
#   6. pkg-config: `make install` from a CARGO_TARGET_DIR other than
#      target/ takes that directory's libraries; tests/c/example.c (open,
#      createBot, getMe) linked dynamically (found through botspace.pc's
#      rpath alone) and statically from that prefix, and the C++ host
#      bindings/cpp/example.cpp (the same through botspace.hpp);
#   7. examples/c-server built, then the over-the-wire scenarios
#      (tests/server_rest.rs, tests/server_gateway.rs) and the C server's
#      command-line option scenarios (the `c::` tests of
#      tests/server_options.rs, tests/server_reliability.rs,
#      tests/server_throttle.rs, tests/server_gateway_budget.rs,
#      tests/server_metrics.rs, tests/server_clean.rs: unclean requests,
#      exits, file modes, tests/server_poll.rs: long polling, and
#      tests/server_webhooks.rs: deliveries over libcurl, plain and HTTPS) against it, and
#      against its ASan+UBSan build.
#
# Runs everything even after a failure, exits non-zero if anything failed,
# and ends with `c-tests: N passed, M failed`. N counts the checks of the C
# and C++ programs, the Rust unit tests of bindings/c and one per script
# step; the wire scenarios are cargo tests and report in cargo's own
# `test result:` lines above it.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CBINDGEN_VERSION=0.29.4
OUT="$ROOT/test-output/c"
mkdir -p "$OUT"

PASSED=0
FAILED=0
FAILURES=()

pass() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); echo "FAIL - $1"; }

# Runs a test program; adds its `N passed, M failed` line to the totals.
run_counted() {
  local name=$1; shift
  local log="$OUT/$name.log"
  echo "=== $name: $*"
  "$@" > "$log" 2>&1
  local rc=$?
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  grep -E '^(FAIL|  )' "$log" | head -n 60
  if [[ -n "$line" ]]; then
    local p f=0
    p=${line%% passed*}
    f=${line#*passed, }; f=${f%% failed*}
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
    echo "    $name: $line"
  fi
  if [[ -z "$line" ]]; then
    fail "$name exited with $rc and printed no summary (log: $log)"
    tail -n 30 "$log"
  elif [[ $rc -ne 0 ]]; then
    FAILURES+=("$name exited with $rc (log: $log)")
    [[ $f -gt 0 ]] || FAILED=$((FAILED + 1))
    tail -n 30 "$log"
  fi
}

step() {
  local name=$1; shift
  local log="$OUT/$name.log"
  echo "=== $name: $*"
  if "$@" > "$log" 2>&1; then
    pass "$name"
  else
    fail "$name (log: $log)"
    tail -n 40 "$log"
  fi
}

# ---------------------------------------------------------------------------
# 1. Tools

# shellcheck source=lib/install.sh
source scripts/lib/install.sh
need_cmd cc:gcc c++:g++ make valgrind pkg-config curl || exit 1
# tests/server_metrics.rs: a real Prometheus scrapes the C server; promtool lints.
need_cmd prometheus promtool:prometheus || exit 1
# examples/c-server delivers webhooks with libcurl; tests/server_webhooks.rs
# verifies them with the Standard Webhooks library.
need_apt libcurl4-openssl-dev || exit 1
need_pip standardwebhooks==1.1.0 || exit 1
# ... over HTTPS too, with certificates made by the openssl command-line tool.
need_cmd openssl || exit 1
command -v cargo >/dev/null 2>&1 || { echo "cargo is required (rustup)"; exit 1; }
export PATH="$HOME/.cargo/bin:$PATH"
if [[ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]]; then
  need_cargo_tool cbindgen "$CBINDGEN_VERSION" || exit 1
fi

# ---------------------------------------------------------------------------
# 2. The committed header equals a fresh cbindgen run

gen_header() {
  cbindgen --quiet --config bindings/c/cbindgen.toml --output "$1" bindings/c
}
if [[ "${1:-}" == "--regen-header" ]]; then
  gen_header include/botspace.h && echo "include/botspace.h regenerated"
  exit $?
fi
check_header() {
  gen_header "$OUT/botspace.h.fresh" || return 1
  if ! diff -u include/botspace.h "$OUT/botspace.h.fresh"; then
    echo "include/botspace.h is stale: run scripts/test-c.sh --regen-header and commit it"
    return 1
  fi
}
step header-is-fresh check_header

# ---------------------------------------------------------------------------
# 3. Build the library; its Rust unit tests

if ! cargo build --release -p botspace-c 2>&1 | tail -n 3; then
  fail "cargo build --release -p botspace-c"
fi
echo "=== bindings/c unit tests"
cargo test -q -p botspace-c > "$OUT/ffi-unit.log" 2>&1
ffi_rc=$?
ffi_line=$(grep -E 'test result: \w+\. [0-9]+ passed; [0-9]+ failed' "$OUT/ffi-unit.log" | head -n 1)
if [[ $ffi_rc -eq 0 && -n "$ffi_line" ]]; then
  n=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$ffi_line")
  PASSED=$((PASSED + n)); echo "    bindings/c unit tests: $n passed"
else
  fail "bindings/c unit tests (log: $OUT/ffi-unit.log)"; tail -n 30 "$OUT/ffi-unit.log"
fi

# ---------------------------------------------------------------------------
# 4. C tests

step build-c-tests make -C tests/c CARGO=: all
VECTORS="$ROOT/tests/vectors"
run_counted c-static tests/c/build/test_c_api "$VECTORS"
run_counted c-dynamic tests/c/build/test_c_api_dyn "$VECTORS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_counted c-asan-ubsan tests/c/build/test_c_api_asan "$VECTORS"
run_counted c-valgrind valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect tests/c/build/test_c_api "$VECTORS"

# ---------------------------------------------------------------------------
# 5. C++ wrapper

step build-cpp-tests make -C tests/cpp CARGO=: all
run_counted cpp tests/cpp/build/test_cpp
ASAN_OPTIONS=detect_leaks=1 run_counted cpp-asan-ubsan tests/cpp/build/test_cpp_asan

# ---------------------------------------------------------------------------
# 6. pkg-config: install into a prefix, link the docs' example both ways

PREFIX="$OUT/prefix"
rm -rf "$PREFIX"
# Installed from a CARGO_TARGET_DIR other than target/: a copy of the
# libraries built above, the shared one marked with bytes of its own at its
# end (the loader reads an ELF file by its headers, so it still loads), to
# tell it from target/release's after the install.
ALT_TARGET="$OUT/other-target"
rm -rf "$ALT_TARGET" && mkdir -p "$ALT_TARGET/release"
cp target/release/libbotspace.a target/release/libbotspace.so "$ALT_TARGET/release/"
printf 'installed from CARGO_TARGET_DIR\n' >>"$ALT_TARGET/release/libbotspace.so"
step make-install env CARGO_TARGET_DIR="$ALT_TARGET" make -C bindings/c install CARGO=: PREFIX="$PREFIX"
installed_from_target_dir() {
  cmp "$ALT_TARGET/release/libbotspace.so" "$PREFIX/lib/libbotspace.so" &&
    cmp "$ALT_TARGET/release/libbotspace.a" "$PREFIX/lib/libbotspace.a"
}
step make-install-honours-cargo-target-dir installed_from_target_dir
pc() { PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config "$@"; }
# grep reads all its input (not -q): with pipefail, a writer cut off by an
# early exit would fail the pipeline now and then (SIGPIPE).
# Only what pkg-config says: its rpath finds the installed library, with
# no LD_LIBRARY_PATH and no ldconfig.
link_dynamic() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror tests/c/example.c $(pc --cflags --libs botspace) \
    -o "$OUT/example-dynamic" &&
    env -u LD_LIBRARY_PATH ldd "$OUT/example-dynamic" | grep "$PREFIX/lib/libbotspace.so" >/dev/null &&
    env -u LD_LIBRARY_PATH "$OUT/example-dynamic" | grep '"handle":"c_bot"' >/dev/null
}
link_static() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror tests/c/example.c $(pc --cflags --libs --static botspace-static) \
    -o "$OUT/example-static" &&
    ! ldd "$OUT/example-static" | grep libbotspace >/dev/null &&
    "$OUT/example-static" | grep '"handle":"c_bot"' >/dev/null
}
# The C++ host (bindings/cpp/example.cpp): open, createBot, getMe through
# botspace.hpp, which the prefix installs beside botspace.h.
cpp_host() {
  # shellcheck disable=SC2046
  c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror bindings/cpp/example.cpp $(pc --cflags --libs --static botspace-static) \
    -o "$OUT/example-cpp" &&
    "$OUT/example-cpp" | grep '^getMe answered for @cpp_bot$' >/dev/null
}
step pkg-config-dynamic link_dynamic
step pkg-config-static link_static
step pkg-config-cpp-host cpp_host

# ---------------------------------------------------------------------------
# 7. The C server over the wire

step build-c-server make -C examples/c-server CARGO=:
step build-c-server-asan make -C examples/c-server CARGO=: SANITIZE=1
# ASan's quarantine keeps freed blocks resident (256 MB by default), and its
# allocator keeps freed blocks of every size class a buffer grew through:
# both would count against the server in the memory-bound scenarios
# (gateway readers that never read, clients that pipeline and never read).
# A small quarantine still catches use-after-free of recent blocks; free
# memory goes back to the OS every 100 ms.
ASAN_SERVER_OPTIONS=quarantine_size_mb=8:detect_leaks=1:allocator_release_to_os_interval_ms=100
wire() {
  local bin=$1
  if [[ ! -f tests/server_rest.rs || ! -f tests/server_gateway.rs ]]; then
    echo "tests/server_rest.rs or tests/server_gateway.rs missing"; return 1
  fi
  ASAN_OPTIONS=$ASAN_SERVER_OPTIONS \
  BOTSPACE_SERVER_CMD="$bin --addr {addr} --db {db} --admin-secret {secret} --manual-clock --demo" \
    cargo test --test server_rest --test server_gateway 2>&1 | tee "$OUT/wire-$(basename "$bin").log" |
    awk '/^(test |test result|failures|---- )/ || /panicked at/ {print; if (/panicked at/) n=3; next} n>0 {print; n--}'
  local rc=${PIPESTATUS[0]}
  if grep -q "ERROR: AddressSanitizer\|runtime error:" "$OUT/wire-$(basename "$bin").log"; then
    echo "sanitizer report in the server's output"; return 1
  fi
  return "$rc"
}
# The option scenarios (connection cap, request deadline, idle close,
# --admin-addr, slow gateway readers, EMFILE), tests/server_reliability.rs
# (a flood under `ulimit -n 1024`, a stop, a full disk),
# tests/server_throttle.rs (the admin-login throttle under a spray, behind a
# trusted proxy), tests/server_gateway_budget.rs (a gateway bot that
# floods pings and heartbeats and reads nothing, one that pauses reading
# for 45 s) tests/server_metrics.rs
# (Prometheus scraping, /readyz at a stop), tests/server_clean.rs (unclean
# requests, exits, file modes), tests/server_poll.rs (long polling:
# parked getUpdates answered on a commit or at the deadline, 900 parked,
# 1 008 parked at the cap, parked clients that close)
# and tests/server_webhooks.rs (deliveries over libcurl to a verifying
# receiver) against one C server binary.
options() {
  local bin=$1
  local log="$OUT/options-$(basename "$bin").log"
  ASAN_OPTIONS=$ASAN_SERVER_OPTIONS BOTSPACE_C_SERVER="$bin" \
    cargo test --test server_options --test server_reliability --test server_throttle --test server_gateway_budget --test server_metrics --test server_clean --test server_poll --test server_webhooks -- c:: --nocapture 2>&1 | tee "$log" |
    awk '/^(test |test result|failures|---- )/ || /panicked at/ || /^(getMe past|1 000 clients|slow consumer|gateway flood|paused reader|idle keep-alive|out of files|SKIPPED|parked polls|900 parked|1008 parked|16 parked|timeout 1)/ {print; if (/panicked at/) n=3; next} n>0 {print; n--}'
  local rc=${PIPESTATUS[0]}
  if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log"; then
    echo "sanitizer report in the server's output"; return 1
  fi
  return "$rc"
}

echo "=== wire scenarios against examples/c-server/build/botspace-server"
if wire examples/c-server/build/botspace-server; then pass "wire scenarios (C server)"; else fail "wire scenarios (C server)"; fi
echo "=== wire scenarios against examples/c-server/build/botspace-server-asan"
if wire examples/c-server/build/botspace-server-asan; then
  pass "wire scenarios (C server, ASan+UBSan)"
else
  fail "wire scenarios (C server, ASan+UBSan)"
fi
echo "=== option scenarios against examples/c-server/build/botspace-server"
if options examples/c-server/build/botspace-server; then pass "option scenarios (C server)"; else fail "option scenarios (C server)"; fi
echo "=== option scenarios against examples/c-server/build/botspace-server-asan"
if options examples/c-server/build/botspace-server-asan; then
  pass "option scenarios (C server, ASan+UBSan)"
else
  fail "option scenarios (C server, ASan+UBSan)"
fi

# ---------------------------------------------------------------------------
echo
if [[ $FAILED -gt 0 || ${#FAILURES[@]} -gt 0 ]]; then
  echo "failed:"
  printf '  %s\n' "${FAILURES[@]}"
fi
echo "c-tests: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 && ${#FAILURES[@]} -eq 0 ]]
