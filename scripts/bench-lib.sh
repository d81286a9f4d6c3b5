# Shared by examples/c-server/loadtest.sh and scripts/bench-durable.sh:
# build and start the example servers, set up bots through the host API,
# run wrk and read its figures. Source it from the repository root with
# SECRET and TMP set; it defines C_BIN, RUST_BIN, PID and PORT.
# shellcheck shell=bash

C_BIN=examples/c-server/build/botspace-server
RUST_BIN=target/release/examples/server
PID=""
PORT=""

# shellcheck source=lib/install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/install.sh"

# wrk and curl from apt, only when missing.
bench_tools() {
  need_cmd wrk curl
  need_apt libcurl4-openssl-dev
}

# Both servers, release builds. The Rust server has the PostgreSQL store
# (feature `postgres`, not a default one) so that one binary serves both the
# file database and bench-durable.sh's Rust-on-PG; the C server links the
# default library (SQLite only).
bench_build() {
  make -s -C examples/c-server >/dev/null 2>&1 || { echo "cannot build the C server" >&2; return 1; }
  cargo build -q --release --features postgres --example server
}

# server_start BINARY DB [FLAG...]: starts it on 127.0.0.1:0; sets PID and
# PORT once it printed `botspace ready` (up to a minute: a loaded machine
# starts slowly, and a stop sent while the server starts is not what is
# measured).
server_start() {
  local bin=$1 db=$2
  shift 2
  "$bin" --addr 127.0.0.1:0 --db "$db" --admin-secret "$SECRET" --demo "$@" > "$TMP/server.out" 2>&1 &
  PID=$!
  local i
  for i in $(seq 1200); do
    grep -q '^botspace ready' "$TMP/server.out" 2>/dev/null && break
    sleep 0.05
  done
  grep -q '^botspace ready' "$TMP/server.out" || { echo "$bin did not start:" >&2; cat "$TMP/server.out" >&2; return 1; }
  PORT=$(head -n 1 "$TMP/server.out" | sed 's/.*://')
}

# SIGINT, then wait: the server closes its database cleanly.
server_stop() {
  if [[ -n "$PID" ]]; then
    kill -INT "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  PID=""
}

admin() { # method body → the response body
  curl -sf -X POST "http://127.0.0.1:$PORT/admin/$1" -H "Authorization: Admin $SECRET" \
    -H 'Content-Type: application/json' -d "$2"
}

field() { # first "key":"value" in stdin
  grep -o "\"$1\":\"[^\"]*\"" | head -n 1 | cut -d'"' -f4
}

# make_bots N FILE: one user, N official bots (no rate limits), each with
# its started private chat; writes "TOKEN CHAT" lines to FILE.
make_bots() {
  local n=$1 file=$2 user i bot token bot_id chat
  : > "$file"
  user=$(admin createUser '{"display_name":"Load"}' | field id)
  for i in $(seq "$n"); do
    bot=$(admin createBot "{\"display_name\":\"Load Bot $i\",\"handle\":\"load_bot_$i\",\"quota_tier\":\"official\"}")
    token=$(field token <<<"$bot")
    bot_id=$(sed 's/.*"bot":{//' <<<"$bot" | field id)
    chat=$(admin startBot "{\"user_id\":\"$user\",\"bot_id\":\"$bot_id\"}" | field id)
    [[ -n "$token" && -n "$chat" ]] || { echo "cannot create bot $i" >&2; return 1; }
    echo "$token $chat" >> "$file"
  done
}

# wrk's latency ("850.12us", "1.20ms", "1.01s") in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.2f", v * 1000 }
    else printf "?" }'
}

# wrk_figures < wrk --latency output → "requests/s p50_ms p99_ms non2xx"
wrk_figures() {
  local out rps p50 p99 bad
  out=$(cat)
  rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  bad=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  echo "${rps:-0} $(to_ms "$p50") $(to_ms "$p99") ${bad:-0}"
}

# record KEY "rps ..." keeps, per key, the figures of the fastest run in BEST.
declare -A BEST
record() {
  local key=$1 rps=${2%% *}
  local prev=${BEST[$key]:-0}
  if awk -v a="$rps" -v b="${prev%% *}" 'BEGIN {exit !(a > b)}'; then BEST[$key]=$2; fi
}
