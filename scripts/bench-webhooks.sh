#!/usr/bin/env bash
# Webhook deliveries per second, from the example servers to a local
# receiver, against the rate at which wrk posts the same bodies to the same
# receiver, in one run.
#
#   scripts/bench-webhooks.sh [SECONDS_OF_EVENTS] [CHATS]
#   scripts/bench-webhooks.sh 8 64            # the defaults
#   PROFILE=1 scripts/bench-webhooks.sh       # also perf record each server's deliveries
#                                             # (target/bench-webhooks/NAME.perf.data)
#   EXTRA="Rust-before:/tmp/server" scripts/bench-webhooks.sh   # more binaries, same run
#
# The receiver is hosts/hyper/examples/webhook_sink.rs: it answers every
# POST 200 at once and counts it, so the figure is the sender's. Baseline:
# wrk (CHATS connections, keep-alive) posts an update of the same size
# with the three Standard Webhooks headers. Then, for each server: one bot
# (official), CHATS users with started private chats; wrk sends human
# messages through the host API for SECONDS_OF_EVENTS while no webhook is
# set, so they wait in the bot's log; setWebhook (max_connections 100)
# then starts the clock, and the run ends when the receiver has counted
# every pending event. Database: a file with `synchronous = full`, as in
# production. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-8}
CHATS=${2:-64}
SECRET=bench-webhooks-admin-secret-01
WORK="$(pwd)/target/bench-webhooks"
rm -rf "$WORK"
TMP="$WORK/run"
mkdir -p "$TMP"
# shellcheck source=bench-lib.sh
source scripts/bench-lib.sh
bench_tools
cargo build -q --release --example server
cargo build -q --release -p botspace-hyper --example webhook_sink
BINS=("Rust:target/release/examples/server")
if make -s -C examples/c-server >/dev/null 2>&1; then BINS+=("C:$C_BIN"); fi
# More servers in the same run, e.g. builds from before a change:
# EXTRA="Rust-before:/tmp/server C-before:/tmp/botspace-server".
read -ra extra <<<"${EXTRA:-}"
BINS+=("${extra[@]}")

SINK_PID=""
cleanup() {
  server_stop
  [[ -n "$SINK_PID" ]] && kill "$SINK_PID" 2>/dev/null || true
}
trap cleanup EXIT

target/release/examples/webhook_sink 127.0.0.1:0 > "$TMP/sink.out" &
SINK_PID=$!
for _ in $(seq 100); do grep -q 'sink listening' "$TMP/sink.out" 2>/dev/null && break; sleep 0.05; done
SINK_PORT=$(sed -n 's/.*127.0.0.1://p' "$TMP/sink.out")
sink_count() { curl -sf "http://127.0.0.1:$SINK_PORT/count"; }
# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
per_delivery_us() { awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}'; }

# An update as the servers deliver it (a message in a private chat).
BODY='{"update_id":12345,"type":"message_created","data":{"message":{"message_id":"17","chat":{"id":"spc_AAAAAAAAAAAAAAAAAAAAAA","type":"private"},"date":1767225600,"text":"load 1234","from":{"id":"usr_AAAAAAAAAAAAAAAAAAAAAA","is_bot":false}}}}'
cat > "$TMP/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["webhook-id"] = "msg_bot_AAAAAAAAAAAAAAAAAAAAAA_12345"
wrk.headers["webhook-timestamp"] = "1767225600"
wrk.headers["webhook-signature"] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
LUA
sink0=$(cpu_ticks "$SINK_PID")
wrk -t2 -c"$CHATS" -d5s -s "$TMP/post.lua" "http://127.0.0.1:$SINK_PORT/hook" > "$TMP/wrk-baseline.out"
sink1=$(cpu_ticks "$SINK_PID")
BASE=$(awk '/Requests\/sec/ {print $2}' "$TMP/wrk-baseline.out")
echo "baseline: wrk posting the same bodies to the receiver, $CHATS connections: $BASE requests/s"
echo "baseline: the receiver's CPU per request $(per_delivery_us $((sink1 - sink0)) "$(awk '/requests in/ {print $1}' "$TMP/wrk-baseline.out")") us"

for entry in "${BINS[@]}"; do
  name=${entry%%:*}
  bin=${entry#*:}
  rm -f "$TMP"/bench.db*
  server_start "$bin" "$TMP/bench.db" --webhook-allow-http --webhook-allow-private-addresses
  bot=$(admin createBot '{"display_name":"Hook","handle":"hook_bot","quota_tier":"official"}')
  token=$(field token <<<"$bot")
  bot_id=$(sed 's/.*"bot":{//' <<<"$bot" | field id)
  : > "$TMP/pairs.lua"
  echo "chats = {" > "$TMP/pairs.lua"
  for i in $(seq "$CHATS"); do
    user=$(admin createUser "{\"display_name\":\"U$i\"}" | field id)
    chat=$(admin startBot "{\"user_id\":\"$user\",\"bot_id\":\"$bot_id\"}" | field id)
    echo "  {\"$user\", \"$chat\"}," >> "$TMP/pairs.lua"
  done
  echo "}" >> "$TMP/pairs.lua"
  cat "$TMP/pairs.lua" - > "$TMP/say.lua" <<LUA
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Admin $SECRET"
request = function()
  n = n + 1
  local p = chats[(n % #chats) + 1]
  return wrk.format(nil, "/admin/sendUserMessage", nil,
    '{"user_id":"' .. p[1] .. '","chat_id":"' .. p[2] .. '","text":"load ' .. n .. '"}')
end
LUA
  wrk -t2 -c"$CHATS" -d"${SECS}s" -s "$TMP/say.lua" "http://127.0.0.1:$PORT" > "$TMP/wrk-say.out"
  pending=$(curl -sf -X POST "http://127.0.0.1:$PORT/bot/getWebhookInfo" -H "Authorization: Bot $token" \
    -H 'Content-Type: application/json' -d '{}' | grep -o '"pending_update_count":[0-9]*' | cut -d: -f2)
  start_count=$(sink_count)
  if [[ -n "${PROFILE:-}" ]]; then
    perf record -q -F 999 ${PERF_CALLGRAPH:--g} -p "$PID" -o "$WORK/$name.perf.data" 2>/dev/null &
    PERF_PID=$!
    sleep 0.5
  fi
  t0=$(date +%s.%N)
  curl -sf -X POST "http://127.0.0.1:$PORT/bot/setWebhook" -H "Authorization: Bot $token" \
    -H 'Content-Type: application/json' -d "{\"url\":\"http://127.0.0.1:$SINK_PORT/hook\",\"max_connections\":100}" > /dev/null
  want=$((start_count + pending))
  # CPU time (user + system, all threads) of the server and the receiver
  # over the deliveries: a per-delivery cost that other load on the
  # machine moves far less than the rate.
  cpu0=$(cpu_ticks "$PID"); sink0=$(cpu_ticks "$SINK_PID")
  deadline=$(( $(date +%s) + 300 ))
  while (( $(sink_count) < want )); do
    (( $(date +%s) < deadline )) || { echo "$name: only $(( $(sink_count) - start_count )) of $pending delivered in 300 s" >&2; exit 1; }
    sleep 0.02
  done
  t1=$(date +%s.%N)
  cpu1=$(cpu_ticks "$PID"); sink1=$(cpu_ticks "$SINK_PID")
  if [[ -n "${PERF_PID:-}" ]]; then kill -INT "$PERF_PID"; wait "$PERF_PID" || true; PERF_PID=""; fi
  server_stop
  rate=$(awk -v n="$pending" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  ratio=$(awk -v r="$rate" -v b="$BASE" 'BEGIN {printf "%.2f", r / b}')
  echo "$name server: $pending pending events delivered in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s: $rate deliveries/s, ${ratio}x the baseline"
  echo "$name server: CPU per delivery $(per_delivery_us $((cpu1 - cpu0)) "$pending") us (the receiver's: $(per_delivery_us $((sink1 - sink0)) "$pending") us)"
done
