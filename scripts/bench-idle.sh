#!/usr/bin/env bash
# getMe latency while a server holds 10 000 idle keep-alive connections,
# on both servers (release builds, :memory:).
#
#   scripts/bench-idle.sh [IDLE_CONNECTIONS] [SAMPLES]
#   scripts/bench-idle.sh 10000 2000        # the defaults
#
# Each idle connection answers one getMe, then stays open and silent. Then
# one more connection sends SAMPLES getMe one after another (keep-alive,
# one in flight), then SAMPLES/4 fresh connections one getMe each; the
# script prints their p50 and p99, and the server's resident memory. Needs `ulimit -n` of IDLE + 100 for this shell
# (the servers raise their own soft limit to the hard one).
set -euo pipefail
cd "$(dirname "$0")/.."
IDLE=${1:-10000}
SAMPLES=${2:-2000}
SECRET=bench-idle-admin-secret-0001
WORK="$(pwd)/target/bench-idle"
rm -rf "$WORK"
TMP="$WORK/run"
mkdir -p "$TMP"
ulimit -n $((IDLE + 100)) 2>/dev/null || { echo "needs ulimit -n $((IDLE + 100)) (hard limit $(ulimit -Hn))" >&2; exit 1; }
# shellcheck source=bench-lib.sh
source scripts/bench-lib.sh
trap server_stop EXIT
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
need_apt libcurl4-openssl-dev
bench_build

idle_run() { # name binary
  server_start "$2" :memory:
  local token
  token=$(sed -n 's/^demo bot token: //p' "$TMP/server.out")
  python3 - "$1" "$PORT" "$token" "$IDLE" "$SAMPLES" "$PID" <<'PY'
import socket, sys, time
name, port, token, n, samples, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
req = f"POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\n\r\n".encode()

def answer(s):
    data = b""
    while True:
        data += s.recv(65536)
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
            while len(body) < length:
                body += s.recv(65536)
            assert head.startswith(b"HTTP/1.1 200"), head
            return

idle = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    answer(s)
    idle.append(s)
time.sleep(1)
rss = [l for l in open(f"/proc/{pid}/status").read().splitlines() if l.startswith("VmRSS")][0].split()[1]
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
took = []
for i in range(samples):
    t0 = time.perf_counter()
    s.sendall(req)
    answer(s)
    took.append((time.perf_counter() - t0) * 1000)
s.close()
# The same on a fresh connection each (connect, getMe, close).
fresh = []
for i in range(samples // 4):
    t0 = time.perf_counter()
    f = socket.create_connection(("127.0.0.1", port))
    f.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f.sendall(req)
    answer(f)
    fresh.append((time.perf_counter() - t0) * 1000)
    f.close()
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, len(xs) * p // 100)]
print(f"| {name} | {n} | {pct(took, 50):.3f} | {pct(took, 99):.3f} | {pct(fresh, 50):.3f} | {pct(fresh, 99):.3f} | {int(rss) // 1024} |")
PY
  server_stop
}

echo "getMe on a keep-alive connection while $IDLE idle keep-alive connections are held (loopback)"
echo
echo "| server | idle connections | keep-alive p50 ms | p99 ms | fresh connection p50 ms | p99 ms | RSS MB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
idle_run "C server" "$C_BIN"
idle_run "Rust server" "$RUST_BIN"
