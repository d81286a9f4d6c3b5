#!/usr/bin/env python3
"""A webhook receiver for the tests: every delivery to /hook is verified by
the Standard Webhooks project's own Python library (`standardwebhooks`),
not by botspace's code, and recorded as one JSON line in the log file.

    receiver.py PORT LOG [SECRET] [--tls CERT KEY]

Port 0 picks a free port; the first line on stdout is `listening PORT`.
With `--tls`, /hook is served over TLS with the PEM certificate chain CERT
and its key KEY (Python's `ssl` module, the handshake in the request's
thread), and /control moves to a plain-HTTP port of its own, announced by
a second line `control PORT`: the test drives the receiver without trusting
its certificate. A handshake that fails records nothing.
POST /control with JSON changes what it does:
  {"secret": "whsec_..."}                 verify with this secret from now on
  {"others": ["whsec_...", ...]}          also verify each delivery with each of
      these, as other receivers holding them would (recorded as
      "others_verified", one entry per secret: true or why not)
  {"script": ["500", "429:2", "hang:12", "302", "ok"]}
      the answers to the next deliveries, one each, then 200 again:
      a status; 429:N and 503:N add `Retry-After: N`; hang:N sleeps N
      seconds before answering 200 (past the sender's deadline); 302 adds
      `Location: /redirected`; big answers 200 with a 1 MiB body (more than a
      sender reads).
Any request to /redirected is recorded with "redirected": true.
"""

import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
STATE = {"secret": None, "script": [], "others": []}


def record(log, entry):
    with LOCK:
        with open(log, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path == "/control":
            c = json.loads(body)
            with LOCK:
                if "secret" in c:
                    STATE["secret"] = c["secret"]
                if "script" in c:
                    STATE["script"] = list(c["script"])
                if "others" in c:
                    STATE["others"] = list(c["others"])
            return self.answer(200, body=b"{}")
        if self.path == "/redirected":
            record(self.server.log, {"redirected": True})
            return self.answer(200)
        with LOCK:
            secret = STATE["secret"]
            others = list(STATE["others"])
            # Until the test hands over the secret setWebhook returned, a
            # delivery cannot be verified: answered 503, as a receiver that
            # is still starting would (the sender retries it).
            step = "no secret" if secret is None else STATE["script"].pop(0) if STATE["script"] else "ok"
        headers = {k.lower(): v for k, v in self.headers.items()}

        def verify(with_secret):
            try:
                Webhook(with_secret).verify(body, headers)
                return True
            except (WebhookVerificationError, Exception) as e:  # noqa: BLE001
                return str(e) or type(e).__name__

        verified = verify(secret) if secret is not None else "no secret"
        entry = {
            "path": self.path,
            "id": headers.get("webhook-id"),
            "timestamp": headers.get("webhook-timestamp"),
            "content_type": headers.get("content-type"),
            "user_agent": headers.get("user-agent"),
            # Every header name as sent, in lower case and sorted: what a
            # sender adds of its own shows here.
            "header_names": sorted(k.lower() for k in self.headers.keys()),
            "verified": verified,
            "others_verified": [verify(o) for o in others],
            "signature": headers.get("webhook-signature"),
            "body": json.loads(body) if body else None,
            "step": step,
            "at": time.time(),
        }
        record(self.server.log, entry)
        if step == "ok":
            return self.answer(200, body=b"ok")
        if step == "no secret":
            return self.answer(503)
        if step.startswith("hang:"):
            time.sleep(float(step.split(":")[1]))
            try:
                return self.answer(200)
            except OSError:
                return None
        if step == "big":
            try:
                return self.answer(200, body=b"x" * (1 << 20))
            except OSError:
                return None
        if step == "302":
            return self.answer(302, [("Location", "/redirected")])
        if ":" in step:
            status, after = step.split(":")
            return self.answer(int(status), [("Retry-After", after)])
        return self.answer(int(step))


class TLSServer(ThreadingHTTPServer):
    """Serves over TLS; each connection's handshake runs in its own thread,
    so a client that stalls or refuses the certificate holds up no other."""

    def __init__(self, addr, handler, cert, key):
        super().__init__(addr, handler)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert, key)

    def finish_request(self, request, client_address):
        try:
            request = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            # The sender refused the certificate (or went away): no request.
            return
        try:
            super().finish_request(request, client_address)
        finally:
            request.close()


def main():
    args = sys.argv[1:]
    tls = None
    if "--tls" in args:
        i = args.index("--tls")
        tls = args[i + 1 : i + 3]
        del args[i : i + 3]
    port, log = int(args[0]), args[1]
    if len(args) > 2:
        STATE["secret"] = args[2]
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    if tls:
        srv = TLSServer(("127.0.0.1", port), Handler, *tls)
        control = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        control.log = log
        threading.Thread(target=control.serve_forever, daemon=True).start()
    else:
        srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.log = log
    print(f"listening {srv.server_address[1]}", flush=True)
    if tls:
        print(f"control {control.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
