#!/usr/bin/env bash
# getMe over loopback against nginx's fixed-body rate, in one run, and
# 10 000 idle keep-alive connections held by the Rust server (its resident
# memory before and after).
#
#   scripts/bench-getme.sh [SECONDS] [CONNECTIONS] [IDLE_CONNECTIONS]
#   scripts/bench-getme.sh 5 64 10000        # the defaults
#
# nginx (apt, when missing) answers `return 200` with a body of getMe's
# size from one worker process and from two (the machine's cores); the
# botspace servers answer getMe for the demo bot (a token lookup through
# the library's cache, no write). wrk -t2, keep-alive; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
CONNS=${2:-64}
IDLE=${3:-10000}
SECRET=bench-getme-admin-secret-0001
WORK="$(pwd)/target/bench-getme"
rm -rf "$WORK"
TMP="$WORK/run"
mkdir -p "$TMP"
# shellcheck source=bench-lib.sh
source scripts/bench-lib.sh
NGINX_PID=""
cleanup() {
  server_stop
  if [[ -n "$NGINX_PID" ]]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

bench_tools
command -v nginx >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
bench_build

rps() { # wrk output → requests/s
  awk '/^Requests\/sec:/ {printf "%d", $2}'
}

# The demo bot's getMe body, for nginx's fixed answer of the same size.
server_start "$RUST_BIN" :memory:
TOKEN=$(sed -n 's/^demo bot token: //p' "$TMP/server.out")
BODY=$(curl -sf -X POST "http://127.0.0.1:$PORT/bot/getMe" -H "Authorization: Bot $TOKEN")
server_stop
printf '%s' "$BODY" > "$TMP/body.json"

nginx_rate() { # workers → requests/s
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$TMP/nginx.conf" <<CONF
worker_processes $1;
daemon off;
master_process on;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; root $TMP; try_files /body.json =404; }
  }
}
CONF
  nginx -c "$TMP/nginx.conf" -p "$TMP" &
  NGINX_PID=$!
  sleep 0.5
  curl -sf "http://127.0.0.1:$port/x" >/dev/null || { echo "nginx did not start" >&2; cat "$TMP/nginx-error.log" >&2; return 1; }
  wrk -t2 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$port/x" | rps
  kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true
  NGINX_PID=""
}

getme_rate() { # binary → requests/s
  server_start "$1" :memory:
  local token
  token=$(sed -n 's/^demo bot token: //p' "$TMP/server.out")
  cat > "$TMP/getme.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bot $token"
LUA
  wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$TMP/getme.lua" "http://127.0.0.1:$PORT/bot/getMe" | rps
  server_stop
}

declare -A RATE
RATE[nginx1]=$(nginx_rate 1)
RATE[rust]=$(getme_rate "$RUST_BIN")
RATE[c]=$(getme_rate "$C_BIN")
RATE[nginx2]=$(nginx_rate 2)

echo "getMe over loopback: wrk -t2 -c$CONNS -d${SECS}s, keep-alive; nginx $(nginx -v 2>&1 | sed 's/.*\///') serves a file of the same ${#BODY} bytes"
echo
echo "| server | requests/s | vs nginx, 1 worker | vs nginx, 2 workers |"
echo "|---|---:|---:|---:|"
for k in nginx1 nginx2 rust c; do
  case $k in nginx1) name="nginx, 1 worker" ;; nginx2) name="nginx, 2 workers" ;; rust) name="Rust server (getMe)" ;; c) name="C server (getMe)" ;; esac
  echo "| $name | ${RATE[$k]} | $(awk -v a="${RATE[$k]}" -v b="${RATE[nginx1]}" 'BEGIN {printf "%.2f", a / b}') | $(awk -v a="${RATE[$k]}" -v b="${RATE[nginx2]}" 'BEGIN {printf "%.2f", a / b}') |"
done

# Idle keep-alive connections: each answers one getMe, then stays open.
server_start "$RUST_BIN" :memory:
TOKEN=$(sed -n 's/^demo bot token: //p' "$TMP/server.out")
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$PID/status"; }
before=$(rss)
python3 - "$PORT" "$TOKEN" "$IDLE" "$PID" <<'PY'
import resource, socket, sys, time
port, token, n, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
req = f"POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\n\r\n".encode()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    socks.append(s)
ok = 0
for s in socks:
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    ok += data.startswith(b"HTTP/1.1 200")
time.sleep(1)
status = open(f"/proc/{pid}/status").read()
rss = [l for l in status.splitlines() if l.startswith("VmRSS")][0].split()[1]
thr = [l for l in status.splitlines() if l.startswith("Threads")][0].split()[1]
print(f"{ok} {rss} {thr}")
# A last getMe on a fresh connection while all are held.
t0 = time.perf_counter()
s = socket.create_connection(("127.0.0.1", port)); s.sendall(req)
d = s.recv(4096)
print(f"{(time.perf_counter() - t0) * 1000:.2f} {d[:12].decode()}")
PY
echo "Rust server RSS before: ${before} kB (limit: $(awk '/^Max open files/ {print $4, $5}' "/proc/$PID/limits"))"
