// The webhook sender of the Node.js entry. Unlike `fetch`, node:http and
// node:https let the caller resolve the name: every address the name
// resolves to is checked against the service's policy (the core's
// `webhookAddressAllowed`) before a connection is made, and only allowed
// addresses are connected to, so a name that resolves to loopback or to
// the cloud's metadata address is refused, as on the Rust server.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';

/** The error a refused address ends the attempt with; `outcome` is reported. */
class AddressRefused extends Error {
  constructor(outcome) {
    super(outcome.failed ?? outcome.failure);
    this.outcome = outcome;
  }
}

/**
 * Sends one delivery (`WebhookRequest` of the core) and resolves to its
 * outcome: `{status, retryAfter}`, `{failed: message}` or `{failure: kind,
 * detail}` (the core words it). `addressAllowed(ip)` gives `null` or the
 * outcome of a refused address. `signal` aborts it at the deadline (the
 * caller reports the time-out).
 */
export function nodeSendWebhook(req, { addressAllowed, signal }) {
  const t = req.target;
  if (t.literal !== null) {
    // No lookup happens for a literal: check it here.
    const refused = addressAllowed(t.literal);
    if (refused) return Promise.resolve(refused);
  }
  const lookup = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err);
      const allowed = addresses.filter((a) => addressAllowed(a.address) === null);
      if (allowed.length === 0) {
        const why = addresses.length ? addressAllowed(addresses[0].address) : { failure: 'no_address' };
        return callback(new AddressRefused(why));
      }
      if (options.all) callback(null, allowed);
      else callback(null, allowed[0].address, allowed[0].family);
    });
  };
  const body = Buffer.from(req.body, 'utf8');
  const options = {
    method: 'POST',
    host: t.host,
    port: t.port,
    path: t.path,
    headers: { ...req.headers, host: req.hostHeader, 'content-length': String(body.length), connection: 'close' },
    lookup,
    signal,
    // One connection per attempt: nothing of a receiver's connection
    // outlives its attempt.
    agent: false,
  };
  if (t.https && t.literal === null) options.servername = t.host;
  // Whether the TCP connection is up and its TLS handshake not yet done: an
  // error then is the handshake's (the certificate, most often), whatever
  // its code, as the Rust server counts it.
  let handshaking = false;
  return new Promise((resolve) => {
    const r = (t.https ? https : http).request(options, (res) => {
      // Only the status and Retry-After are used: the body is never read.
      const retryAfter = res.headers['retry-after'] ?? null;
      resolve({ status: res.statusCode, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter });
      res.destroy();
    });
    if (t.https) {
      r.once('socket', (s) => {
        s.once('connect', () => (handshaking = true));
        s.once('secureConnect', () => (handshaking = false));
      });
    }
    r.on('error', (e) => resolve(describe(e, handshaking)));
    r.end(body);
  });
}

/** The outcome of a request that failed with `e`: its kind, worded by the core. */
function describe(e, handshaking) {
  if (e instanceof AddressRefused) return e.outcome;
  // OpenSSL's verification codes (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
  // DEPTH_ZERO_SELF_SIGNED_CERT, ...) have no common prefix.
  if (handshaking) return { failure: 'tls', detail: `${e.message}` };
  if (e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN' || e?.code === 'ENODATA') {
    return { failure: 'resolve', detail: `${e.message}` };
  }
  if (e?.code === 'ECONNREFUSED' || e?.code === 'EHOSTUNREACH' || e?.code === 'ENETUNREACH' || e?.code === 'ETIMEDOUT') {
    return { failure: 'connect', detail: `${e.message}` };
  }
  if (typeof e?.code === 'string' && (e.code.startsWith('ERR_TLS') || e.code.startsWith('ERR_SSL') || /CERT|SELF_SIGNED/.test(e.code))) {
    return { failure: 'tls', detail: `${e.message}` };
  }
  return { failure: 'connection', detail: `${e?.message ?? e}` };
}
