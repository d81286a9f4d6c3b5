// A webhook receiver for the WASM tests (Node and workerd): every delivery
// to /hook is verified by the Standard Webhooks project's own JavaScript
// library (npm `standardwebhooks`, pinned in wasm/package-lock.json), not
// by botspace's code, and recorded.
//
//   const rx = await startReceiver();
//   rx.url                        http://127.0.0.1:PORT/hook
//   rx.secret = 'whsec_...'       verify with this secret from now on
//   rx.script = ['500', '302']    the answers to the next deliveries, one
//                                 each, then 200 again (302 adds
//                                 `Location: /redirected`; hang:N answers
//                                 200 after N seconds)
//   rx.seen                       every request: {path, id, timestamp,
//                                 verified, step, contentType, userAgent, body}
//   await rx.waitFor(pred, what)  until pred(rx.seen) holds (10 s at most)
//   rx.preflights                 CORS preflights (OPTIONS) received
//
// startReceiver({ cors: true }) also answers CORS for any origin, as a
// receiver must for deliveries from a browser page.
// startReceiver({ tls: { cert, key } }) serves over TLS with those PEM
// files; rx.url is then https://localhost:PORT/hook (see testCa below).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST',
  'access-control-allow-headers': 'content-type, user-agent, webhook-id, webhook-timestamp, webhook-signature',
};

export async function startReceiver({ cors = false, tls = null } = {}) {
  const rx = {
    secret: null,
    script: [],
    seen: [],
    preflights: 0,
    url: '',
    port: 0,
    close: null,
    async waitFor(pred, what, ms = 10_000) {
      const until = Date.now() + ms;
      while (!pred(rx.seen)) {
        if (Date.now() > until) throw new Error(`timed out waiting for ${what}; seen: ${JSON.stringify(rx.seen, null, 1)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return rx.seen;
    },
  };
  const handler = (req, res) => {
    if (req.method === 'OPTIONS') {
      rx.preflights++;
      res.writeHead(204, cors ? CORS : {});
      res.end();
      return;
    }
    if (cors) for (const [k, v] of Object.entries(CORS)) res.setHeader(k, v);
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let verified = false;
      if (rx.secret) {
        try {
          new Webhook(rx.secret).verify(raw, req.headers);
          verified = true;
        } catch {
          verified = false;
        }
      }
      let body = null;
      try {
        body = JSON.parse(raw);
      } catch {}
      const step = req.url === '/hook' ? (rx.secret ? (rx.script.shift() ?? 'ok') : 'no secret') : 'other';
      rx.seen.push({
        path: req.url,
        id: req.headers['webhook-id'] ?? null,
        timestamp: req.headers['webhook-timestamp'] ?? null,
        verified,
        step,
        contentType: req.headers['content-type'] ?? null,
        userAgent: req.headers['user-agent'] ?? null,
        body,
      });
      if (step === 'ok' || step === 'other') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      } else if (step === 'no secret') {
        res.writeHead(503);
        res.end();
      } else if (step.startsWith('hang:')) {
        // Answers 200 only after N seconds: past the sender's deadline.
        setTimeout(() => {
          if (!res.destroyed) {
            res.writeHead(200);
            res.end();
          }
        }, Number(step.slice(5)) * 1000);
      } else if (step === '302') {
        res.writeHead(302, { location: '/redirected' });
        res.end();
      } else {
        res.writeHead(Number(step));
        res.end();
      }
    });
  };
  const server = tls
    ? createTlsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handler)
    : createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  rx.port = server.address().port;
  rx.url = tls ? `https://localhost:${rx.port}/hook` : `http://127.0.0.1:${rx.port}/hook`;
  rx.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
  return rx;
}

/** Whether the receiver answered this request 2xx. */
export const answeredOk = (e) => e.step === 'ok';

/** The update_ids answered 2xx, in arrival order. */
export const delivered = (seen) => seen.filter(answeredOk).map((e) => e.body.update_id);

/** The chat of an update (`data.chat`, or `data.message.chat`). */
export function chatOf(update) {
  const d = update.data;
  return (d.chat ?? d.message.chat).id;
}

/**
 * A throwaway certificate authority made with the `openssl` command-line
 * tool in `dir/name`: `cert` is its PEM file (what a sender is told to
 * trust); `issue(file, san)` signs a server certificate for the names in
 * `san` (`DNS:localhost,IP:127.0.0.1`) and returns `{ cert, key }` paths.
 */
export function testCa(dir, name) {
  const home = join(dir, name);
  mkdirSync(home, { recursive: true });
  const openssl = (...args) => execFileSync('openssl', args, { cwd: home, stdio: ['ignore', 'pipe', 'pipe'] });
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ecKey, '-days', '2', '-subj', `/CN=botspace test CA ${name}`, '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  let serial = 1;
  return {
    cert: join(home, 'ca.pem'),
    issue(file, san) {
      openssl('req', '-new', ...ecKey, '-subj', '/CN=botspace test receiver', '-keyout', `${file}.key`, '-out', `${file}.csr`);
      writeFileSync(
        join(home, `${file}.ext`),
        `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
      );
      serial += 1;
      openssl('x509', '-req', '-in', `${file}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', String(serial),
        '-days', '2', '-out', `${file}.pem`, '-extfile', `${file}.ext`);
      return { cert: join(home, `${file}.pem`), key: join(home, `${file}.key`) };
    },
  };
}
