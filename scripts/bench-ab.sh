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
#   scripts/bench-ab.sh 5 16 3 "PostgreSQL=-:pgbench:pg Rust=-:target/release/examples/server:pg"
#
# ENV is `-` or VAR=VALUE[,VAR=VALUE...] set for that server; BINARY `C`
# is the C server, `pgbench` PostgreSQL itself writing the same rows
# (bench-durable.sh's script, DB `pg`); DB `file` is a fresh database
# file (synchronous = full), `pg` a fresh database on a throwaway
# PostgreSQL cluster (synchronous_commit = on; PostgreSQL's own CPU per
# request is shown too), else passed to --db. PROFILE=1: `perf record`
# samples each server during its run and prints where its CPU went, by
# layer (scripts/lib/perf_breakdown.py). MODE=send (default): durable sendMessage,
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
# shellcheck source=bench-pg.sh
source scripts/bench-pg.sh
trap 'server_stop; pg_stop' EXIT
bench_tools
if [[ " $SYSTEMS " == *:pg\ * ]]; then
  pg_find && pg_start || { echo "PostgreSQL is not available" >&2; exit 1; }
fi
# Context switches of every thread of process $1.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
sed -n '/^cat > "\$TMP\/per-conn.lua"/,/^LUA$/p' scripts/bench-durable.sh | sed '1d;$d' > "$TMP/per-conn.lua"
cat > "$TMP/getme.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Bot " .. os.getenv("TOKEN")
LUA
# profile_start NAME: with PROFILE=1, samples the server ($PID) into
# $WORK/NAME.perf until the run's figures are read.
PERF_PID=""
profile_start() {
  [[ ${PROFILE:-0} == 1 ]] || return 0
  need_cmd perf:linux-perf
  perf record -q -F 999 -p "$PID" -o "$WORK/$1.perf" >/dev/null 2>&1 &
  PERF_PID=$!
}
profile_show() { # NAME
  [[ -f $WORK/$1.perf ]] || return 0
  echo "where $1's CPU went (perf, self time):"
  perf report -i "$WORK/$1.perf" --no-children --sort dso,sym --stdio -q 2>/dev/null | python3 scripts/lib/perf_breakdown.py
}
for r in $(seq "$ROUNDS"); do
  for s in $SYSTEMS; do
    name=${s%%=*} rest=${s#*=}
    envs=${rest%%:*} rest=${rest#*:}
    bin=${rest%%:*} db=${rest#*:}
    [[ $db == file ]] && db=$TMP/durable.db
    [[ $bin == C ]] && bin=$C_BIN
    if [[ $bin == pgbench ]]; then
      f=$(run_pg "$N")
      echo "round $r, $name: $f (transactions/s p50 p99 failed), load $(cut -d' ' -f1 /proc/loadavg)"
      continue
    fi
    if [[ $db == pg ]]; then
      PGOPTIONS="-c client_min_messages=warning" psql_ -d postgres -c "DROP DATABASE IF EXISTS botspace_bench" -c "CREATE DATABASE botspace_bench" >/dev/null
      db="postgres://postgres@127.0.0.1:$PG_PORT/botspace_bench"
    fi
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
      profile_start "$name-$r"
      f=$(TOKEN=$TOKEN wrk -t2 -c"$N" -d"${SECS}s" --latency -s "$TMP/getme.lua" "http://127.0.0.1:$PORT/bot/getMe" | wrk_figures)
    else
      make_bots "$N" "$TMP/bots"
      cpu0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
      sw0=$(switches "$PID") pg0=$(pg_cpu_ticks)
      profile_start "$name-$r"
      f=$(BOTS="$TMP/bots" THREADS=2 wrk -t2 -c"$N" -d"${SECS}s" --latency -s "$TMP/per-conn.lua" \
        "http://127.0.0.1:$PORT/bot/sendMessage" | wrk_figures)
    fi
    cpu1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    if [[ -n ${PERF_PID:-} ]]; then
      kill -INT "$PERF_PID" 2>/dev/null; wait "$PERF_PID" 2>/dev/null || true
      PERF_PID=""
    fi
    sw1=$(switches "$PID") pg1=$(pg_cpu_ticks)
    server_stop
    # Clock ticks → µs of server CPU per request.
    us=$(awk -v c=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v r="${f%% *}" -v s="$SECS" \
      'BEGIN { if (r > 0 && c > 0) printf "%.1f", c * 1e6 / hz / (r * s); else print "?" }')
    more=""
    if [[ ${MODE:-send} != getme && $db == postgres://* ]]; then
      more=$(awk -v c=$((pg1 - pg0)) -v w=$((sw1 - sw0)) -v hz="$(getconf CLK_TCK)" -v r="${f%% *}" -v s="$SECS" \
        'BEGIN { if (r > 0) printf ", PostgreSQL %.1f µs CPU/request, %.2f server context switches/request", c * 1e6 / hz / (r * s), w / (r * s) }')
    fi
    echo "round $r, $name: $f (requests/s p50 p99 non-2xx), ${us} µs CPU/request${more}, load $(cut -d' ' -f1 /proc/loadavg)"
    profile_show "$name-$r"
  done
done
