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
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-5}
CONNS=${2:-16}
ROUNDS=${3:-3}
DBKIND=${4:-memory}
SECRET=loadtest-admin-secret-0001

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v curl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; }

make -s -C examples/c-server >/dev/null 2>&1
cargo build -q --release --example server
C_BIN=examples/c-server/build/botspace-server
RUST_BIN=target/release/examples/server

TMP=$(mktemp -d)
PID=""
cleanup() {
  if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

cat > "$TMP/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Bot " .. os.getenv("TOKEN")
wrk.headers["Content-Type"] = "application/json"
local body = os.getenv("BODY")
if body ~= nil and body ~= "" then wrk.body = body end
LUA

admin() { # method body → result JSON
  curl -sf -X POST "http://127.0.0.1:$PORT/admin/$1" -H "Authorization: Admin $SECRET" \
    -H 'Content-Type: application/json' -d "$2"
}
field() { # first "key":"value" in stdin
  grep -o "\"$1\":\"[^\"]*\"" | head -n 1 | cut -d'"' -f4
}

start() { # binary
  local db=":memory:"
  if [[ $DBKIND == file ]]; then rm -f "$TMP"/load.db*; db="$TMP/load.db"; fi
  "$1" --addr 127.0.0.1:0 --db "$db" --admin-secret "$SECRET" > "$TMP/out" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    grep -q '^botspace ready' "$TMP/out" 2>/dev/null && break
    sleep 0.05
  done
  PORT=$(head -n 1 "$TMP/out" | sed 's/.*://')
  local user bot
  user=$(admin createUser '{"display_name":"Load"}' | field id)
  bot=$(admin createBot '{"display_name":"Load Bot","handle":"load_bot","quota_tier":"official"}')
  TOKEN=$(field token <<<"$bot")
  local bot_id
  bot_id=$(sed 's/.*"bot":{//' <<<"$bot" | field id)
  CHAT=$(admin startBot "{\"user_id\":\"$user\",\"bot_id\":\"$bot_id\"}" | field id)
}

stop() {
  kill -INT "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}

run() { # path body → "req/s p50 p99 errors"
  local out
  out=$(TOKEN=$TOKEN BODY=$2 wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$TMP/post.lua" "http://127.0.0.1:$PORT$1")
  local rps p50 p99 bad
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  bad=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  echo "$rps $p50 $p99 ${bad:-0}"
}

declare -A BEST
record() { # key "rps p50 p99 bad"
  local key=$1 rps=${2%% *}
  local prev=${BEST[$key]:-0}
  if awk -v a="$rps" -v b="${prev%% *}" 'BEGIN {exit !(a > b)}'; then BEST[$key]=$2; fi
}

for r in $(seq "$ROUNDS"); do
  for server in C Rust; do
    if [[ $server == C ]]; then start "$C_BIN"; else start "$RUST_BIN"; fi
    g=$(run /bot/getMe "")
    s=$(run /bot/sendMessage "{\"chat_id\":\"$CHAT\",\"text\":\"load test message\"}")
    stop
    echo "round $r $server: getMe $g | sendMessage $s" >&2
    record "$server getMe" "$g"
    record "$server sendMessage" "$s"
  done
done

echo "wrk -t1 -c$CONNS -d${SECS}s, keep-alive, $DBKIND database, official bot; best of $ROUNDS alternating rounds"
echo
echo "| call | server | requests/s | p50 | p99 | non-2xx |"
echo "|---|---|---:|---:|---:|---:|"
for call in getMe sendMessage; do
  for server in C Rust; do
    read -r rps p50 p99 bad <<<"${BEST[$server $call]}"
    echo "| $call | $server | $rps | $p50 | $p99 | $bad |"
  done
done
