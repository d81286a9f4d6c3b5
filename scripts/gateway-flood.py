#!/usr/bin/env python3
"""A gateway bot that sends masked 125-byte pings, then heartbeats, and
never reads; prints the server's VmRSS (/proc/PID/status) as it goes.

usage: scripts/gateway-flood.py SERVER_BIN PINGS HEARTBEATS
  e.g. scripts/gateway-flood.py target/release/examples/server 2400000 0

The server is started under `ulimit -n 1024` on :memory:; the bot is an
official-tier bot made through the host API. "blocked" means the server
stopped reading (a send waited 5 s)."""
import json, os, socket, subprocess, sys, time, base64
bin_, npings, nhb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SECRET = "flood-admin-secret-000001"
p = subprocess.Popen(["sh", "-c", f'ulimit -n 1024 && exec "$0" --addr 127.0.0.1:0 --db :memory: --admin-secret {SECRET}', bin_],
                     stdout=subprocess.PIPE, text=True)
addr = None
for line in p.stdout:
    if "listening on http://" in line and addr is None:
        addr = line.split("http://")[1].strip().rstrip("/")
    if "ready" in line:
        break
host, port = addr.rsplit(":", 1); port = int(port)
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"):
            return int(l.split()[1]) // 1024
def admin(method, body):
    s = socket.create_connection((host, port)); b = json.dumps(body).encode()
    s.sendall(f"POST /admin/{method} HTTP/1.1\r\nHost: x\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\nConnection: close\r\n\r\n".encode() + b)
    data = b""
    while True:
        c = s.recv(65536)
        if not c: break
        data += c
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["result"]
bot = admin("createBot", {"display_name": "Flood", "handle": "flood_bot", "quota_tier": "official"})
tok = bot["token"]
s = socket.create_connection((host, port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(f"GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {tok}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
time.sleep(0.3)
mask = b"\x01\x02\x03\x04"
def frame(op, payload):
    m = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | op, 0x80 | len(payload)]) + mask + m
ping = frame(0x9, b"p" * 125)
hb = frame(0x1, b'{"op":"heartbeat"}')
s.settimeout(5)
print(f"start rss {rss()} MB", flush=True)
t0 = time.time(); sent = 0; blocked = None
BLOCK = 8000
def flood(frame_bytes, n, label):
    global sent, blocked
    chunk = frame_bytes * BLOCK
    i = 0
    while i < n:
        try:
            s.sendall(chunk); sent += len(chunk); i += BLOCK
        except socket.timeout:
            blocked = (label, i, sent); return
        if (i // BLOCK) % 50 == 0:
            print(f"{label} {i}: {sent>>20} MB sent, rss {rss()} MB, {time.time()-t0:.1f}s", flush=True)
if npings: flood(ping, npings, "pings")
if nhb and not blocked: flood(hb, nhb, "heartbeats")
print(f"blocked: {blocked}" if blocked else "not blocked", flush=True)
print(f"end: {sent>>20} MB sent, rss {rss()} MB", flush=True)
time.sleep(1); print(f"after 1s: rss {rss()} MB", flush=True)
s.close(); time.sleep(1); print(f"after close: rss {rss()} MB", flush=True)
p.terminate(); p.wait()
