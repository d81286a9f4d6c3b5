#!/usr/bin/env bash
# The C server and the Rust example server under the same load, in one run.
#
#   examples/c-server/loadtest.sh [SECONDS_PER_RUN] [CONNECTIONS] [ROUNDS] [memory|file]
#
# Builds both servers (release), then for each round starts each server on
# 127.0.0.1:0 with an in-memory database (or a fresh database file,
# synchronous=full, with `file`), creates an `official` bot (no
# rate limits) and its started private chat through the host API, and runs
# wrk (one thread, keep-alive, CONNECTIONS connections) against getMe and
# sendMessage for SECONDS_PER_RUN each. Servers alternate within a round;
# the table shows each server's best round. Loopback only; every run is
# bounded by its duration. Prints a markdown table.
# scripts/bench-durable.sh is the durable-write benchmark (one bot per
# connection, PostgreSQL as the baseline); both share scripts/bench-lib.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-5}
CONNS=${2:-16}
ROUNDS=${3:-3}
DBKIND=${4:-memory}
SECRET=loadtest-admin-secret-0001
TMP=$(mktemp -d)
# shellcheck source=../../scripts/bench-lib.sh
source scripts/bench-lib.sh

cleanup() {
  server_stop
  rm -rf "$TMP"
}
trap cleanup EXIT

bench_tools
bench_build

cat > "$TMP/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Bot " .. os.getenv("TOKEN")
wrk.headers["Content-Type"] = "application/json"
local body = os.getenv("BODY")
if body ~= nil and body ~= "" then wrk.body = body end
LUA

start() { # binary: a server with one official bot; sets TOKEN and CHAT
  local db=":memory:"
  if [[ $DBKIND == file ]]; then rm -f "$TMP"/load.db*; db="$TMP/load.db"; fi
  server_start "$1" "$db"
  make_bots 1 "$TMP/bots"
  read -r TOKEN CHAT < "$TMP/bots"
}

run() { # path body → "req/s p50_ms p99_ms non2xx"
  TOKEN=$TOKEN BODY=$2 wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$TMP/post.lua" "http://127.0.0.1:$PORT$1" | wrk_figures
}

for r in $(seq "$ROUNDS"); do
  for server in C Rust; do
    if [[ $server == C ]]; then start "$C_BIN"; else start "$RUST_BIN"; fi
    g=$(run /bot/getMe "")
    s=$(run /bot/sendMessage "{\"chat_id\":\"$CHAT\",\"text\":\"load test message\"}")
    server_stop
    echo "round $r $server: getMe $g | sendMessage $s" >&2
    record "$server getMe" "$g"
    record "$server sendMessage" "$s"
  done
done

echo "wrk -t1 -c$CONNS -d${SECS}s, keep-alive, $DBKIND database, official bot; best of $ROUNDS alternating rounds"
echo
echo "| call | server | requests/s | p50 ms | p99 ms | non-2xx |"
echo "|---|---|---:|---:|---:|---:|"
for call in getMe sendMessage; do
  for server in C Rust; do
    read -r rps p50 p99 bad <<<"${BEST[$server $call]}"
    echo "| $call | $server | $rps | $p50 | $p99 | $bad |"
  done
done
