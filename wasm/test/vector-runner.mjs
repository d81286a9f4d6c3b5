// A runner of the shared test vectors (tests/vectors/README.md) through the
// WASM service's handleRequest. Pure functions, so the runner itself is
// tested too (runner.test.mjs).

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ADMIN_SECRET = 'vector-admin-secret-0001';
export const BASE_CONFIG = Object.freeze({ database: ':memory:', admin_secret: ADMIN_SECRET, clock: 'manual' });

const WILDCARD = '{{*}}';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class RunnerError extends Error {}

function lookup(name, vars) {
  if (!vars.has(name)) throw new RunnerError(`runner error: placeholder {{${name}}} names no saved value`);
  return vars.get(name);
}

/** Replaces `{{name}}` placeholders in one string (README "Placeholders"). */
export function substString(s, vars) {
  if (s === WILDCARD) return s;
  const whole = /^\{\{([^{}]*)\}\}$/.exec(s);
  if (whole && whole[1] !== '*') return structuredClone(lookup(whole[1], vars));
  let out = '';
  let rest = s;
  for (;;) {
    const start = rest.indexOf('{{');
    if (start < 0) break;
    const len = rest.slice(start + 2).indexOf('}}');
    if (len < 0) break;
    const name = rest.slice(start + 2, start + 2 + len);
    out += rest.slice(0, start);
    if (name === '*') out += WILDCARD;
    else {
      const v = lookup(name, vars);
      out += typeof v === 'string' ? v : JSON.stringify(v);
    }
    rest = rest.slice(start + 2 + len + 2);
  }
  return out + rest;
}

/** Substitutes placeholders in every string of a JSON value. */
export function subst(v, vars) {
  if (typeof v === 'string') return substString(v, vars);
  if (Array.isArray(v)) return v.map((x) => subst(x, vars));
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = subst(x, vars);
    return o;
  }
  return v;
}

const short = (v) => {
  const s = JSON.stringify(v);
  return s !== undefined && s.length > 200 ? `${s.slice(0, 200)}… (${s.length} bytes)` : String(s);
};

/** Checks `actual` against `expected` ("{{*}}" matches anything; exact keys). Returns null or a message. */
export function mismatch(expected, actual, path = 'body') {
  if (expected === WILDCARD) return null;
  const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
  if (isObj(expected) && isObj(actual)) {
    for (const k of Object.keys(expected)) if (!(k in actual)) return `${path}.${k}: missing`;
    for (const k of Object.keys(actual)) if (!(k in expected)) return `${path}.${k}: unexpected key`;
    for (const k of Object.keys(expected)) {
      const m = mismatch(expected[k], actual[k], `${path}.${k}`);
      if (m) return m;
    }
    return null;
  }
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) return `${path}: array of ${actual.length} elements, expected ${expected.length}`;
    for (let i = 0; i < expected.length; i++) {
      const m = mismatch(expected[i], actual[i], `${path}.${i}`);
      if (m) return m;
    }
    return null;
  }
  if (expected === actual) return null;
  return `${path}: expected ${short(expected)}, got ${short(actual)}`;
}

/** The value at a dotted path (`result.0.update_id`), or undefined. */
export function atPath(v, path) {
  let cur = v;
  for (const seg of path.split('.')) {
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) return undefined;
      cur = cur[Number(seg)];
    } else if (cur !== null && typeof cur === 'object') {
      cur = Object.prototype.hasOwnProperty.call(cur, seg) ? cur[seg] : undefined;
    } else return undefined;
    if (cur === undefined) return undefined;
  }
  return cur;
}

/** Encodes a vector request exactly as README "Request" says. */
export function buildRequest(req) {
  if (req === null || typeof req !== 'object') throw new RunnerError('request is not an object');
  const method = req.method ?? 'POST';
  if (typeof req.path !== 'string') throw new RunnerError('request has no path');
  let head = `${method} ${req.path} HTTP/1.1\r\nHost: botspace\r\n`;
  let hasCt = false;
  if (req.headers !== undefined) {
    if (req.headers === null || typeof req.headers !== 'object') throw new RunnerError('headers is not an object');
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v !== 'string') throw new RunnerError(`header ${k} is not a string`);
      if (k.toLowerCase() === 'content-type') hasCt = true;
      head += `${k}: ${v}\r\n`;
    }
  }
  if (!hasCt && req.content_type !== false) head += 'Content-Type: application/json\r\n';
  let body = null;
  if ('raw_body' in req) {
    if (typeof req.raw_body !== 'string') throw new RunnerError('raw_body is not a string');
    body = encoder.encode(req.raw_body);
  } else if ('body' in req) {
    body = encoder.encode(JSON.stringify(req.body));
  }
  if (body === null) return encoder.encode(head + '\r\n');
  const h = encoder.encode(`${head}Content-Length: ${body.length}\r\n\r\n`);
  const out = new Uint8Array(h.length + body.length);
  out.set(h, 0);
  out.set(body, h.length);
  return out;
}

/** Parses a response and checks that Content-Length matches the body. */
export function parseResponse(raw) {
  let end = -1;
  for (let i = 0; i + 3 < raw.length; i++) {
    if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new Error('response has no end of headers');
  const lines = decoder.decode(raw.subarray(0, end)).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`bad status line ${JSON.stringify(lines[0])}`);
  const headers = [];
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i < 0) throw new Error(`bad header line ${JSON.stringify(l)}`);
    headers.push([l.slice(0, i).trim(), l.slice(i + 1).trim()]);
  }
  const body = raw.subarray(end + 4);
  const cl = headers.find(([n]) => n.toLowerCase() === 'content-length')?.[1];
  if (cl !== String(body.length)) throw new Error(`Content-Length ${cl} does not match body of ${body.length} bytes`);
  return { status: Number(m[1]), headers, body };
}

const shortBytes = (b) => {
  const s = decoder.decode(b);
  return s.length > 600 ? `${s.slice(0, 600)}… (${b.length} bytes)` : s;
};

/**
 * Runs one case against a fresh service made by `makeService(config)`.
 * Throws an Error naming the step, the request and both bodies on failure.
 */
export function runCase(testCase, makeService) {
  const config = { ...BASE_CONFIG };
  if (testCase.config !== undefined) {
    if (testCase.config === null || typeof testCase.config !== 'object' || Array.isArray(testCase.config)) {
      throw new RunnerError('config is not an object');
    }
    Object.assign(config, testCase.config);
  }
  const svc = makeService(config);
  const conns = new Map();
  try {
    const vars = new Map([['admin_secret', ADMIN_SECRET]]);
    if (!Array.isArray(testCase.steps)) throw new RunnerError('case has no steps');
    testCase.steps.forEach((step, i) => {
      const fail = (msg, req, body) =>
        new Error(`step ${i}: ${msg}\n      request: ${shortBytes(req)}\n      response: ${shortBytes(body)}`);
      if (step.gateway !== undefined) {
        gatewayStep(svc, conns, step, i, vars);
        return;
      }
      if (!step.request) throw new RunnerError(`step ${i}: no request`);
      const reqBytes = buildRequest(subst(step.request, vars));
      // `peer`: the client the host names (the login throttle is per client).
      const peer = step.request.peer;
      const raw = peer === undefined ? svc.handleRequest(reqBytes) : svc.handle([{ request: reqBytes, peer, atOnce: true }])[0];
      let resp;
      try {
        resp = parseResponse(raw);
      } catch (e) {
        throw fail(e.message, reqBytes, raw);
      }
      const expect = subst(step.expect ?? {}, vars);
      if (expect.status !== undefined && expect.status !== resp.status) {
        throw fail(`status ${resp.status} (expected ${expect.status})`, reqBytes, resp.body);
      }
      let parsed;
      let parseError = null;
      try {
        parsed = JSON.parse(decoder.decode(resp.body));
      } catch (e) {
        parseError = e;
      }
      if (expect.body !== undefined) {
        if (parseError) throw fail(`response body is not JSON: ${parseError.message}`, reqBytes, resp.body);
        const m = mismatch(expect.body, parsed);
        if (m) throw fail(`body mismatch at ${m}\n      expected: ${short(expect.body)}`, reqBytes, resp.body);
      }
      if (expect.headers !== undefined) {
        for (const [name, want] of Object.entries(expect.headers)) {
          const got = resp.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
          // null: the header must be absent.
          if (want !== null && typeof want !== 'string') throw new RunnerError(`runner error: expect.headers.${name} is neither a string nor null`);
          if (got !== (want ?? undefined)) throw fail(`header ${name}: expected ${want}, got ${got}`, reqBytes, resp.body);
        }
      }
      if (step.save !== undefined) {
        if (parseError) throw fail(`cannot save from a non-JSON body: ${parseError.message}`, reqBytes, resp.body);
        for (const [name, path] of Object.entries(step.save)) {
          const v = atPath(parsed, path);
          if (v === undefined) throw fail(`save ${name}: nothing at ${path}`, reqBytes, resp.body);
          vars.set(name, v);
        }
      }
    });
  } finally {
    for (const c of conns.values()) c.free();
    svc.free?.();
  }
}

/** The upgrade request of a gateway `open` step (tests/vectors/README.md). */
function upgradeBytes(token, query) {
  return encoder.encode(
    `GET /bot/gateway${query ?? ''} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot ${token}\r\n` +
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
      'Sec-WebSocket-Version: 13\r\n\r\n',
  );
}

/** One gateway step, through the message-level GatewaySession, at the service's time. */
function gatewayStep(svc, conns, rawStep, i, vars) {
  const step = subst(rawStep, vars);
  const fail = (msg) => new Error(`step ${i} (gateway ${step.gateway} ${step.conn}): ${msg}`);
  const now = svc.nowMs();
  const conn = () => {
    const c = conns.get(step.conn);
    if (!c) throw new RunnerError(`step ${i}: no open connection named ${step.conn}`);
    return c;
  };
  switch (step.gateway) {
    case 'open': {
      if (conns.has(step.conn)) throw new RunnerError(`step ${i}: ${step.conn} is still open`);
      const expect = step.expect ?? {};
      let session = null;
      let refusal = null;
      try {
        session = svc.acceptGateway(upgradeBytes(step.token, step.query), now);
      } catch (e) {
        if (!e.response) throw e;
        refusal = parseResponse(e.response);
      }
      if (session) {
        if (expect.status !== 101) {
          session.free();
          throw fail(`opened (expected ${expect.status})`);
        }
        conns.set(step.conn, session);
        return;
      }
      if (expect.status !== refusal.status) throw fail(`status ${refusal.status} (expected ${expect.status})`);
      if (expect.body !== undefined) {
        const m = mismatch(expect.body, JSON.parse(decoder.decode(refusal.body)));
        if (m) throw fail(`body mismatch at ${m}: ${decoder.decode(refusal.body)}`);
      }
      for (const [name, want] of Object.entries(expect.headers ?? {})) {
        const got = refusal.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
        if (got !== want) throw fail(`header ${name}: expected ${want}, got ${got}`);
      }
      return;
    }
    case 'text':
      conn().handleText(step.text, now);
      return;
    case 'binary':
      conn().handleBinary();
      return;
    case 'drop':
      conn().free();
      conns.delete(step.conn);
      return;
    case 'poll': {
      const s = conn();
      s.handleTimeout(now);
      const frames = [];
      let close = null;
      for (let o = s.pollTransmit(); o !== null; o = s.pollTransmit()) {
        if (close) throw fail(`a message after the close frame: ${JSON.stringify(o)}`);
        if (o.type === 'text') frames.push(JSON.parse(o.data));
        else close = { code: o.code, reason: o.reason };
      }
      const expect = step.expect ?? {};
      const want = expect.frames ?? [];
      if (frames.length !== want.length) {
        throw fail(`${frames.length} messages (expected ${want.length}): ${short(frames)}`);
      }
      want.forEach((w, k) => {
        const m = mismatch(w, frames[k], `frames[${k}]`);
        if (m) throw fail(`mismatch at ${m}\n      expected: ${short(w)}\n      got: ${short(frames[k])}`);
      });
      const m = mismatch(expect.close ?? null, close, 'close');
      if (m) throw fail(`close: expected ${short(expect.close ?? null)}, got ${short(close)}`);
      const ev = s.pollEvent();
      const got = ev === null ? null : { code: ev.code, reason: ev.reason };
      if (mismatch(expect.closed_event ?? null, got, 'closed_event')) {
        throw fail(`closed_event: expected ${short(expect.closed_event ?? null)}, got ${short(got)}`);
      }
      return;
    }
    default:
      throw new RunnerError(`step ${i}: unknown gateway step ${step.gateway}`);
  }
}

/** The vector files present now: [{file, doc | error}]. */
export function loadVectorFiles(dir) {
  let names;
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json')).sort();
  } catch {
    return [];
  }
  return names.map((file) => {
    try {
      const doc = JSON.parse(readFileSync(join(dir, file), 'utf8'));
      if (doc.version !== 1) return { file, error: new Error(`${file}: version must be 1`) };
      if (!Array.isArray(doc.cases)) return { file, error: new Error(`${file}: no cases`) };
      return { file, doc };
    } catch (error) {
      return { file, error };
    }
  });
}
