// The Service class: handleRequest, handle, frameRequest, the wake
// hook, configuration and typed errors, bad input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, setup, world, SECRET, ADMIN } from './helpers.mjs';

const { Service, encodeRequest, decodeResponse } = bs;

test('version matches the package.json version', async () => {
  const { readFileSync } = await import('node:fs');
  const { PKG_DIR } = await import('./helpers.mjs');
  const pkg = JSON.parse(readFileSync(`${PKG_DIR}/package.json`, 'utf8'));
  assert.equal(bs.version(), pkg.version);
  assert.equal(pkg.name, 'botspace');
});

test('handleRequest: getMe and sendMessage through raw HTTP bytes', () => {
  const w = world();
  const me = w.ok('/bot/getMe', undefined, w.bot(w.token));
  assert.equal(me.id, w.botInfo.id);
  assert.equal(me.is_bot, true);
  const msg = w.ok('/bot/sendMessage', { chat_id: w.chat.id, text: 'hello' }, w.bot(w.token));
  assert.equal(msg.message_id, '1');
  assert.equal(msg.text, 'hello');
  assert.equal(msg.date, 1767225600, 'the manual clock starts at 2026-01-01');
  const raw = w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  assert.ok(raw instanceof Uint8Array);
  assert.match(new TextDecoder().decode(raw), /^HTTP\/1\.1 200 OK\r\nContent-Type: application\/json\r\nContent-Length: \d+\r\n/);
});

test('handleRequest accepts a string, an ArrayBuffer and a DataView', () => {
  const { svc } = setup();
  const s = 'POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n';
  for (const input of [s, new TextEncoder().encode(s).buffer, new DataView(new TextEncoder().encode(s).buffer)]) {
    assert.equal(decodeResponse(svc.handleRequest(input)).status, 401);
  }
  assert.throws(() => svc.handleRequest(42), TypeError);
  assert.throws(() => svc.handleRequest({}), TypeError);
});

test('the system clock reads Date.now()', () => {
  const svc = new Service({ admin_secret: SECRET });
  const now = Date.now();
  assert.ok(Math.abs(svc.nowMs() - now) < 5000);
  const manual = new Service({ admin_secret: SECRET, clock: 'manual' });
  assert.equal(manual.nowMs(), 1767225600000);
  const r = decodeResponse(manual.handleRequest(encodeRequest('POST', '/admin/advanceClock', ADMIN, { seconds: 10 })));
  assert.equal(r.status, 200);
  assert.equal(manual.nowMs(), 1767225610000);
});

test('handle answers each request as it would alone, in one commit', () => {
  const w = world({}, { quota_tier: 'official' });
  const reqs = [];
  for (let i = 0; i < 5; i++) reqs.push(encodeRequest('POST', '/bot/sendMessage', w.bot(w.token), { chat_id: w.chat.id, text: `m${i}` }));
  reqs.push(encodeRequest('POST', '/bot/sendMessage', w.bot(w.token), { chat_id: w.chat.id, text: '' }));
  reqs.push('garbage');
  reqs.push(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  const out = w.svc.handle(reqs.map((request) => ({ request, atOnce: true }))).map(decodeResponse);
  assert.equal(out.length, 8);
  assert.deepEqual(out.map((r) => r.status), [200, 200, 200, 200, 200, 400, 400, 200]);
  assert.deepEqual(out.slice(0, 5).map((r) => r.json().result.message_id), ['1', '2', '3', '4', '5']);
  assert.equal(out[5].json().error, 'text_empty');
  assert.equal(out[6].json().error, 'invalid_request');
  assert.deepEqual(w.svc.handle([]), []);
  assert.throws(() => w.svc.handle('x'), TypeError);
  assert.throws(() => w.svc.handle(['x']), TypeError);
  const hist = w.ok('/admin/getChatHistory', { chat_id: w.chat.id });
  assert.equal(hist.length, 5);
});

test('frameRequest finds where a request ends in a stream buffer, with its parsed head', () => {
  const { svc } = setup({ max_body_bytes: 100 });
  const one = encodeRequest('POST', '/bot/getMe', { Authorization: 'Bot x' }, { a: 1 });
  const two = new Uint8Array(one.length * 2);
  two.set(one, 0);
  two.set(one, one.length);
  const headLength = new TextDecoder().decode(one).indexOf('\r\n\r\n') + 4;
  assert.deepEqual(svc.frameRequest(two), {
    kind: 'complete',
    length: one.length,
    head: {
      length: headLength,
      method: 'POST',
      path: '/bot/getMe',
      httpMinor: 1,
      keepAlive: true,
      closeToken: false,
      upgrade: false,
      expectContinue: false,
    },
  });
  const upgrade = 'GET /bot/gateway?after=3 HTTP/1.0\r\nUpgrade: websocket\r\nConnection: Upgrade, close\r\nExpect: 100-continue\r\n\r\n';
  assert.deepEqual(svc.frameRequest(upgrade), {
    kind: 'complete',
    length: upgrade.length,
    head: {
      length: upgrade.length,
      method: 'GET',
      path: '/bot/gateway',
      httpMinor: 0,
      keepAlive: false,
      closeToken: true,
      upgrade: true,
      expectContinue: true,
    },
  });
  assert.deepEqual(svc.frameRequest(one.subarray(0, one.length - 1)), { kind: 'incomplete' });
  const big = svc.frameRequest('POST /bot/getMe HTTP/1.1\r\nContent-Length: 101\r\n\r\n');
  assert.equal(big.kind, 'invalid');
  assert.equal(decodeResponse(big.response).status, 413);
  const bad = svc.frameRequest('\x00\x01garbage\r\n\r\n');
  assert.equal(bad.kind, 'invalid');
  assert.equal(decodeResponse(bad.response).json().error, 'invalid_request');
});

test('configuration errors are ConfigError with a message', () => {
  const cases = [
    [{ admin_secret: 'short' }, /at least 16/],
    [{ admin_secret: SECRET, nonsense: 1 }, /unknown field/],
    [{ admin_secret: SECRET, clock: 'sundial' }, /unknown variant/],
    [{ admin_secret: SECRET, max_body_bytes: 0 }, /max_body_bytes/],
    [{ admin_secret: SECRET, heartbeat_interval_ms: 5 }, /heartbeat_interval_ms/],
    [{ admin_secret: SECRET, operational_key: 'abc' }, /operational_key/],
    ['{not json', /invalid configuration JSON/],
    [{}, /at least 16/],
  ];
  for (const [cfg, re] of cases) {
    assert.throws(() => new Service(cfg), (e) => {
      assert.ok(e instanceof bs.ConfigError, `${e}`);
      assert.ok(e instanceof bs.BotspaceError);
      assert.ok(e instanceof Error);
      assert.equal(e.name, 'ConfigError');
      assert.equal(e.code, 'invalid_config');
      assert.match(e.message, re);
      return true;
    });
  }
  assert.throws(() => new Service(42), bs.ConfigError);
  assert.throws(() => new Service(null), bs.ConfigError);
  // a JSON string works as well as an object
  const svc = new Service(JSON.stringify({ admin_secret: SECRET, max_body_bytes: 1234 }));
  assert.equal(svc.maxBodyBytes, 1234);
  assert.equal(svc.heartbeatIntervalMs, 41250);
});

test('garbage bytes are answered with the documented errors, never a throw', () => {
  const { svc } = setup();
  const inputs = [
    new Uint8Array(0),
    new Uint8Array([0, 1, 2, 3, 255, 254]),
    'GET',
    '\r\n\r\n',
    'POST /bot/getMe HTTP/1.1\r\n',
    'POST /bot/getMe HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc',
    'POST /bot/getMe HTTP/1.1\r\nContent-Length: x\r\n\r\n',
    'POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc',
    `POST /${'a'.repeat(20000)} HTTP/1.1\r\n\r\n`,
    'POST /bot/getMe HTTP/1.1\r\n' + 'X-A: b\r\n'.repeat(100) + '\r\n',
  ];
  // Deterministic pseudo-random garbage too.
  let seed = 12345;
  for (let i = 0; i < 200; i++) {
    const n = (seed = (seed * 1103515245 + 12345) >>> 0) % 300;
    const b = new Uint8Array(n);
    for (let j = 0; j < n; j++) b[j] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
    inputs.push(b);
  }
  for (const input of inputs) {
    const r = decodeResponse(svc.handleRequest(input));
    assert.ok(r.status >= 400 && r.status < 500, `status ${r.status}`);
    const body = r.json();
    assert.equal(body.ok, false);
    assert.equal(body.error_code, r.status);
    assert.equal(typeof body.error, 'string');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(Number(r.headers['content-length']), r.body.length);
  }
  // still healthy
  assert.equal(decodeResponse(svc.handleRequest(encodeRequest('POST', '/admin/createUser', ADMIN, { display_name: 'x' }))).status, 200);
});

test('bodies: invalid JSON, non-objects, wrong media type, oversized', () => {
  const w = world({ max_body_bytes: 1024 });
  const B = w.bot(w.token);
  const send = (body, headers = {}) => decodeResponse(w.svc.handleRequest(encodeRequest('POST', '/bot/sendMessage', { ...B, ...headers }, body)));
  assert.equal(send('{"chat_id":').json().error, 'invalid_json');
  assert.equal(send(new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])).json().error, 'invalid_json');
  assert.equal(send('[1,2]').json().error, 'invalid_request');
  assert.equal(send('{}', { 'Content-Type': 'text/plain' }).status, 415);
  const big = send({ chat_id: w.chat.id, text: 'x'.repeat(2000) });
  assert.equal(big.status, 413);
  assert.equal(big.json().error, 'payload_too_large');
  // A huge Content-Length is refused from the header alone.
  const huge = decodeResponse(w.svc.handleRequest(`POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot ${w.token}\r\nContent-Type: application/json\r\nContent-Length: 4000000000\r\n\r\n`));
  assert.equal(huge.status, 413);
  // A 4 MB garbage request is handled and refused too.
  const four = new Uint8Array(4 << 20).fill(0x61);
  assert.equal(decodeResponse(w.svc.handleRequest(four)).status, 400);
});

test('the wake hook runs after the call, once per bot, and may re-enter the service', async () => {
  const w = world();
  const seen = [];
  w.svc.setWakeHook((botId) => {
    seen.push(botId);
    // re-entering the service from the hook is allowed
    w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  });
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'one' });
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'two' });
  assert.deepEqual(seen, [], 'the hook is deferred to a microtask');
  await null;
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(seen, [w.botInfo.id]);
  // batches wake too
  w.svc.handle([{ request: encodeRequest('POST', '/admin/sendUserMessage', ADMIN, { user_id: w.user.id, chat_id: w.chat.id, text: 'three' }) }]);
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(seen, [w.botInfo.id, w.botInfo.id]);
  // a throwing hook does not break the service
  w.svc.setWakeHook(() => {
    throw new Error('hook failure');
  });
  const errors = [];
  const orig = console.error;
  console.error = (...args) => errors.push(args);
  try {
    w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'four' });
    await new Promise((r) => setTimeout(r, 10));
  } finally {
    console.error = orig;
  }
  assert.equal(errors.length, 1);
  assert.equal(errors[0][1].message, 'hook failure');
  w.svc.setWakeHook(null);
  assert.throws(() => w.svc.setWakeHook('nope'), TypeError);
  assert.equal(w.ok('/bot/getMe', undefined, w.bot(w.token)).id, w.botInfo.id);
});

test('a freed service throws BotspaceError invalid_state', () => {
  const { svc } = setup();
  svc.free();
  svc.free();
  assert.throws(() => svc.handleRequest('x'), (e) => e instanceof bs.BotspaceError && e.code === 'invalid_state');
});

test('encodeRequest and decodeResponse', () => {
  const req = new TextDecoder().decode(encodeRequest('POST', '/a', { 'X-Y': 'z' }, { k: 'ü' }));
  assert.equal(req, 'POST /a HTTP/1.1\r\nHost: botspace\r\nX-Y: z\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"k":"ü"}');
  assert.equal(new TextDecoder().decode(encodeRequest('GET', '/b')), 'GET /b HTTP/1.1\r\nHost: botspace\r\n\r\n');
  const r = decodeResponse('HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}');
  assert.equal(r.status, 429);
  assert.equal(r.statusText, 'Too Many Requests');
  assert.equal(r.headers['retry-after'], '2');
  assert.deepEqual(r.json(), {});
  assert.throws(() => decodeResponse('nope'), bs.BotspaceError);
});

test('a Content-Length beyond 32 bits is 413 too', () => {
  const { svc } = setup();
  const r = decodeResponse(svc.handleRequest('POST /bot/getMe HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n'));
  assert.equal(r.status, 413);
});

test('a request far larger than any valid one is judged on its first bytes, never trapping', () => {
  const w = world();
  const big = new Uint8Array(2_200_000_000); // more than wasm32 can take in one piece
  const head = new TextEncoder().encode(`POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot ${w.token}\r\nContent-Type: application/json\r\nContent-Length: 2199999000\r\n\r\n`);
  big.set(head, 0);
  const r = decodeResponse(w.svc.handleRequest(big));
  assert.equal(r.status, 413);
  const g = decodeResponse(w.svc.handleRequest(new Uint8Array(300_000_000).fill(0x41)));
  assert.equal(g.status, 400);
  assert.equal(w.ok('/bot/getMe', undefined, w.bot(w.token)).id, w.botInfo.id, 'still healthy');
});

test('the operations paths: /healthz, /readyz and the stop, /admin/metrics', () => {
  const w = world();
  const get = (path, headers = {}) => decodeResponse(w.svc.handleRequest(encodeRequest('GET', path, headers)));
  assert.deepEqual([get('/healthz').status, get('/healthz').json()], [200, { ok: true }]);
  assert.deepEqual([get('/readyz').status, get('/readyz').json()], [200, { ok: true }]);
  assert.equal(get('/admin/metrics').status, 401);
  w.ok('/bot/sendMessage', { chat_id: w.chat.id, text: 'counted' }, w.bot(w.token));
  const m = get('/admin/metrics', ADMIN);
  assert.equal(m.status, 200);
  assert.equal(m.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
  assert.match(m.text(), /\nbotspace_requests_total\{method="sendMessage",status="200",error="none"\} 1\n/);
  // No monotonic clock in WebAssembly: the latency histogram stays empty.
  assert.doesNotMatch(m.text(), /botspace_request_duration_seconds_count/);
  w.svc.beginShutdown();
  assert.deepEqual(get('/readyz').json().error, 'shutting_down');
  assert.equal(get('/healthz').status, 200);
});
