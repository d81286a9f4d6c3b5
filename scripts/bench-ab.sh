#!/usr/bin/env bash
# Short alternating A/B runs of server builds and settings, with each
# server's CPU time per request (user + system, from /proc): on a shared,
# loaded machine requests/s swing with the neighbours, CPU per request
# much less.
#
#   scripts/bench-ab.sh SECONDS CONNECTIONS ROUNDS "NAME=ENV:BINARY:DB ..."
#   MODE=getme scripts/bench-ab.sh 3 64 2 "C=-:C::memory: Rust=-:target/release/examples/server::memory:"
#   scripts/bench-ab.sh 3 64 2 "C=-:C:file Rust=-:target/release/examples/server:file one-core=BOTSPACE_CORE_THREADS=1:target/release/examples/server:file"
#
# ENV is `-` or VAR=VALUE[,VAR=VALUE...] set for that server; BINARY `C`
# is the C server; DB `file` is a fresh database file (synchronous =
# full), else passed to --db. MODE=send (default): durable sendMessage,
# each connection its own bot (bench-durable.sh's Lua); MODE=getme: the
# demo bot's getMe. Build first (scripts/bench-lib.sh's bench_build).
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=$1 N=$2 ROUNDS=$3 SYSTEMS=$4
SECRET=bench-durable-admin-secret-01
WORK="$(pwd)/target/bench-ab"
TMP="$WORK/run"
rm -rf "$WORK" && mkdir -p "$TMP"
# shellcheck source=bench-lib.sh
source scripts/bench-lib.sh
trap server_stop EXIT
bench_tools
sed -n '/^cat > "\$TMP\/per-conn.lua"/,/^LUA$/p' scripts/bench-durable.sh | sed '1d;$d' > "$TMP/per-conn.lua"
cat > "$TMP/getme.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Bot " .. os.getenv("TOKEN")
LUA
for r in $(seq "$ROUNDS"); do
  for s in $SYSTEMS; do
    name=${s%%=*} rest=${s#*=}
    envs=${rest%%:*} rest=${rest#*:}
    bin=${rest%%:*} db=${rest#*:}
    [[ $db == file ]] && db=$TMP/durable.db
    [[ $bin == C ]] && bin=$C_BIN
    rm -f "$TMP"/durable.db*
    kv=()
    [[ $envs != - ]] && IFS=, read -ra kv <<<"$envs"
    for x in "${kv[@]}"; do export "${x?}"; done
    started=1
    server_start "$bin" "$db" || started=0
    for x in "${kv[@]}"; do unset "${x%%=*}"; done
    if [[ $started == 0 ]]; then
      echo "round $r, $name: did not start" && server_stop && continue
    fi
    if [[ ${MODE:-send} == getme ]]; then
      TOKEN=$(sed -n 's/^demo bot token: //p' "$TMP/server.out")
      cpu0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
      f=$(TOKEN=$TOKEN wrk -t2 -c"$N" -d"${SECS}s" --latency -s "$TMP/getme.lua" "http://127.0.0.1:$PORT/bot/getMe" | wrk_figures)
    else
      make_bots "$N" "$TMP/bots"
      cpu0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
      f=$(BOTS="$TMP/bots" THREADS=2 wrk -t2 -c"$N" -d"${SECS}s" --latency -s "$TMP/per-conn.lua" \
        "http://127.0.0.1:$PORT/bot/sendMessage" | wrk_figures)
    fi
    cpu1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    server_stop
    # Clock ticks → µs of server CPU per request.
    us=$(awk -v c=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v r="${f%% *}" -v s="$SECS" \
      'BEGIN { if (r > 0 && c > 0) printf "%.1f", c * 1e6 / hz / (r * s); else print "?" }')
    echo "round $r, $name: $f (requests/s p50 p99 non-2xx), ${us} µs CPU/request, load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
