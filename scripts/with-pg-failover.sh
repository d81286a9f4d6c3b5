#!/usr/bin/env bash
# Runs a command with a throwaway pg_auto_failover formation on loopback:
# Debian's `postgresql` and `postgresql-15-auto-failover` (installed with
# apt when missing), a monitor and three PostgreSQL nodes with
# number_sync_standbys = 1, each on a free port, everything under the
# build folder, stopped and deleted afterwards whatever the command does.
# The command sees
#
#   BOTSPACE_FAILOVER_URL=postgres://postgres@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/botspace?sslmode=disable&target_session_attrs=read-write
#   BOTSPACE_FAILOVER_NODES="P1:DATA1 P2:DATA2 P3:DATA3"   (port:PGDATA of each node)
#   BOTSPACE_FAILOVER_MONITOR=<the monitor's PGDATA>
#   BOTSPACE_FAILOVER_CTL=<a command running pg_autoctl as the right user and environment>
#
#   scripts/with-pg-failover.sh cargo test --features pg-tests --test pg_failover
#
# Failover is made faster than pg_auto_failover's defaults (see
# docs/scale-out.md, "Failover", for each setting and its trade-off).
# Fails, never skips, when the formation cannot be had.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[with-pg-failover] %s\n' "$*" >&2; }
[[ $# -gt 0 ]] || { echo "usage: $0 command [args...]" >&2; exit 2; }

PG_BIN=/usr/lib/postgresql/15/bin
if [[ ! -x "$PG_BIN/initdb" || ! -x /usr/bin/pg_autoctl ]]; then
  log "installing postgresql and postgresql-15-auto-failover (apt)"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql-15 postgresql-15-auto-failover >&2 || true
fi
if [[ ! -x "$PG_BIN/initdb" || ! -x /usr/bin/pg_autoctl ]]; then
  log "FAILED: pg_auto_failover is not installed and could not be installed (Debian packages postgresql-15, postgresql-15-auto-failover)"
  exit 1
fi

mkdir -p "$ROOT/target"
WORK=$(mktemp -d "$ROOT/target/pgaf.XXXXXX")
chmod 755 "$WORK" "$ROOT/target"
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"
# pg_autoctl keeps its configuration and state under XDG folders: ours.
CTL_ENV=(env "PATH=$PG_BIN:/usr/bin:/bin" "XDG_CONFIG_HOME=$WORK/xdg/config" "XDG_DATA_HOME=$WORK/xdg/data"
  "XDG_RUNTIME_DIR=$WORK/xdg/run" "PGHOST=127.0.0.1")
ctl() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "${CTL_ENV[@]}" pg_autoctl "$@"; else "${CTL_ENV[@]}" pg_autoctl "$@"; fi
}
# A wrapper the command can run (`$BOTSPACE_FAILOVER_CTL perform failover`).
cat > "$WORK/ctl" <<EOF
#!/usr/bin/env bash
if [[ \$(id -u) -eq 0 ]]; then exec runuser -u postgres -- ${CTL_ENV[*]} pg_autoctl "\$@"; else exec ${CTL_ENV[*]} pg_autoctl "\$@"; fi
EOF
chmod 755 "$WORK/ctl"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PIDS=()
stop() {
  set +e
  # Thaw whatever a test froze, then stop every process of the formation.
  for pid in "${PIDS[@]}"; do
    pkill -CONT -g "$pid" 2>/dev/null
    kill -CONT "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  # Postgres servers a killed keeper left behind.
  for d in "$WORK"/monitor "$WORK"/n*; do
    [[ -f "$d/postmaster.pid" ]] && kill -KILL "$(head -1 "$d/postmaster.pid")" 2>/dev/null
  done
  [[ -n "${KEEP_PGAF:-}" ]] || rm -rf "$WORK"
}
trap stop EXIT

t0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f} s')" "$t0" "$(date +%s.%N)"; }

PM=$(free_port)
MONITOR_URL="postgres://autoctl_node@127.0.0.1:$PM/pg_auto_failover?sslmode=disable"
ctl create monitor --pgdata "$WORK/monitor" --pgport "$PM" --hostname 127.0.0.1 --auth trust --no-ssl \
  >"$WORK/monitor.log" 2>&1 || { cat "$WORK/monitor.log" >&2; log "FAILED: pg_autoctl create monitor"; exit 1; }
# Setsid: each keeper a process group of its own, so a test can freeze or
# kill a whole node (keeper and PostgreSQL) at once.
if [[ $(id -u) -eq 0 ]]; then
  setsid runuser -u postgres -- "${CTL_ENV[@]}" pg_autoctl run --pgdata "$WORK/monitor" >>"$WORK/monitor.log" 2>&1 &
else
  setsid "${CTL_ENV[@]}" pg_autoctl run --pgdata "$WORK/monitor" >>"$WORK/monitor.log" 2>&1 &
fi
PIDS+=($!)
disown
for _ in $(seq 100); do
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PM" && break
  sleep 0.2
done
# Faster failover, for the test (docs/scale-out.md explains each).
"$PG_BIN/psql" -q -h 127.0.0.1 -p "$PM" -U postgres -d pg_auto_failover -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000;
ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1;
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 4000;
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000;
SELECT pg_reload_conf();
SQL
log "monitor on 127.0.0.1:$PM ($(elapsed))"

NODES=""
HOSTS=""
start_node() { # name port
  local name=$1 port=$2
  if [[ $(id -u) -eq 0 ]]; then
    setsid runuser -u postgres -- "${CTL_ENV[@]}" pg_autoctl create postgres --pgdata "$WORK/$name" --pgport "$port" \
      --hostname 127.0.0.1 --name "$name" --monitor "$MONITOR_URL" --auth trust --no-ssl --dbname botspace \
      --pgctl "$PG_BIN/pg_ctl" --run >"$WORK/$name.log" 2>&1 &
  else
    setsid "${CTL_ENV[@]}" pg_autoctl create postgres --pgdata "$WORK/$name" --pgport "$port" \
      --hostname 127.0.0.1 --name "$name" --monitor "$MONITOR_URL" --auth trust --no-ssl --dbname botspace \
      --pgctl "$PG_BIN/pg_ctl" --run >"$WORK/$name.log" 2>&1 &
  fi
  PIDS+=($!)
  disown # a test kills a node: no "Killed" notice from this shell
}
# The first node alone (it becomes the primary), then the two standbys.
P1=$(free_port); start_node n1 "$P1"
state() { "$PG_BIN/psql" -qAt -h 127.0.0.1 -p "$PM" -U postgres -d pg_auto_failover \
  -c "SELECT string_agg(reportedstate::text || '/' || goalstate::text, ' ' ORDER BY nodeid) FROM pgautofailover.node" 2>/dev/null || true; }
wait_state() { # expected seconds
  for _ in $(seq $(( $2 * 5 ))); do
    [[ "$(state)" == "$1" ]] && return 0
    sleep 0.2
  done
  log "FAILED: the formation did not reach '$1' within $2 s (it is '$(state)')"
  tail -n 20 "$WORK"/n*.log >&2
  exit 1
}
wait_state "single/single" 60
log "first node ($(elapsed))"
# pg_basebackup, which makes each standby, waits for a spread checkpoint
# (minutes): checkpoints here are not spread. The standbys copy the setting.
"$PG_BIN/psql" -q -h 127.0.0.1 -p "$P1" -U postgres -d botspace -v ON_ERROR_STOP=1 >/dev/null \
  -c "ALTER SYSTEM SET checkpoint_completion_target = 0" -c "SELECT pg_reload_conf()" ||
  { log "FAILED: configuring the first node"; exit 1; }
P2=$(free_port); start_node n2 "$P2"
P3=$(free_port); start_node n3 "$P3"
wait_state "primary/primary secondary/secondary secondary/secondary" 120
log "three nodes ($(elapsed))"
# (`pg_autoctl set formation number-sync-standbys 1` refuses "1" in
# version 2.0: the monitor's function does the same.)
"$PG_BIN/psql" -qAt -h 127.0.0.1 -p "$PM" -U postgres -d pg_auto_failover -v ON_ERROR_STOP=1 \
  -c "SELECT pgautofailover.set_formation_number_sync_standbys('default', 1)" >"$WORK/set.log" 2>&1 ||
  { cat "$WORK/set.log" >&2; log "FAILED: number_sync_standbys = 1"; exit 1; }
# The nodes apply the new setting (the primary passes through
# apply_settings); wait until the formation is settled again.
wait_state "primary/primary secondary/secondary secondary/secondary" 60
# The keepers' own timeouts (seconds): a primary cut off from the monitor
# and its standbys stops taking writes after network_partition_timeout.
# A running keeper rewrites its configuration file in place, and a `config
# set` that reads it at that moment finds it empty ("Failed to find section
# pg_autoctl"): try again.
config_set() { # node key value
  for _ in $(seq 20); do
    ctl config set --pgdata "$WORK/$1" "$2" "$3" >"$WORK/config-set.log" 2>&1 && return 0
    sleep 0.25
  done
  cat "$WORK/config-set.log" >&2
  log "FAILED: pg_autoctl config set $2 $3 on $1"
  exit 1
}
for n in n1 n2 n3; do
  config_set "$n" timeout.network_partition_timeout 5
  config_set "$n" timeout.prepare_promotion_catchup 5
  config_set "$n" timeout.prepare_promotion_walreceiver 1
done
log "primary 127.0.0.1:$P1, standbys :$P2 :$P3, number_sync_standbys=1 ($(elapsed))"

export BOTSPACE_FAILOVER_URL="postgres://postgres@127.0.0.1:$P1,127.0.0.1:$P2,127.0.0.1:$P3/botspace?sslmode=disable&target_session_attrs=read-write"
export BOTSPACE_FAILOVER_NODES="$P1:$WORK/n1 $P2:$WORK/n2 $P3:$WORK/n3"
export BOTSPACE_FAILOVER_MONITOR="$WORK/monitor"
export BOTSPACE_FAILOVER_MONITOR_PORT="$PM"
export BOTSPACE_FAILOVER_CTL="$WORK/ctl"
export BOTSPACE_PG_BIN="$PG_BIN"
set +e
"$@"
rc=$?
set -e
exit $rc
