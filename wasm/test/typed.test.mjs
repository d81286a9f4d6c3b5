// The fetch adapter's typed entry: a Request's method, path and query,
// header fields and body go to the core as they are (no HTTP/1.1 text
// written in JavaScript), and the core's status, headers and body come
// back as a Response (none parsed in JavaScript). Each answer is checked
// against the bytes path (handleRequest) for the same request: the way in
// must not change the answer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, world, upgradeRequest } from './helpers.mjs';

const BASE = 'http://127.0.0.1:8080';
const JSON_TYPE = { 'content-type': 'application/json' };
// A Response's headers and a decoded response's, as sorted pairs.
const fetchHeaders = (res) => [...res.headers.entries()];
const wireHeaders = (r) => Object.entries(r.headers).sort(([a], [b]) => (a < b ? -1 : 1));

test('getMe: the status, headers and body the core made', async () => {
  const w = world();
  const auth = { authorization: `Bot ${w.token}` };
  const wire = w.call('/bot/getMe', undefined, auth);
  const res = await w.svc.fetch(new Request(`${BASE}/bot/getMe`, { method: 'POST', headers: auth }));
  assert.equal(res.status, 200);
  assert.equal(res.statusText, 'OK');
  const text = await res.text();
  assert.equal(text, wire.text());
  assert.deepEqual(JSON.parse(text), {
    ok: true,
    result: {
      id: w.botInfo.id,
      is_bot: true,
      display_name: 'Echo',
      handle: 'echo_bot',
      avatar_key: null,
      status: 'active',
      verified: false,
      official: false,
      quota_tier: 'free',
      gateway_connection_limit: 1,
      capabilities: { edit_delete_messages: false },
    },
  });
  assert.deepEqual(fetchHeaders(res), [
    ['content-length', String(new TextEncoder().encode(text).length)],
    ['content-type', 'application/json'],
  ]);
  assert.deepEqual(fetchHeaders(res), wireHeaders(wire));
});

test('sendMessage: the rate-limit headers as the core made them, one send after the bytes path', async () => {
  const w = world();
  const auth = { authorization: `Bot ${w.token}`, ...JSON_TYPE };
  const wire = w.call('/bot/sendMessage', { chat_id: w.chat.id, text: 'bytes' }, auth);
  const res = await w.svc.fetch(
    new Request(`${BASE}/bot/sendMessage?ignored=1`, { method: 'POST', headers: auth, body: JSON.stringify({ chat_id: w.chat.id, text: 'typed ✓' }) }),
  );
  assert.equal(res.status, 200);
  const body = await res.json();
  const w1 = wire.json().result;
  assert.deepEqual(body, {
    ok: true,
    result: { ...w1, message_id: String(Number(w1.message_id) + 1), text: 'typed ✓' },
  });
  const expected = wireHeaders(wire).map(([k, v]) => {
    if (k === 'content-length') return [k, String(new TextEncoder().encode(JSON.stringify(body)).length)];
    if (k === 'x-ratelimit-remaining') return [k, String(Number(v) - 1)];
    return [k, v];
  });
  assert.deepEqual(fetchHeaders(res), expected);
  assert.deepEqual(
    fetchHeaders(res).map(([k]) => k),
    ['content-length', 'content-type', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset-after', 'x-ratelimit-scope'],
  );
});

test('a header value the http crate refuses: the bytes path\'s 400', async () => {
  const w = world();
  const auth = { authorization: `Bot ${w.token}` };
  // Fetch's Headers allow a control character other than NUL, CR and LF.
  const wire = bs.decodeResponse(w.svc.handleRequest(bs.encodeRequest('POST', '/bot/getMe', { ...auth, 'X-A': 'a\x01b' })));
  const res = await w.svc.fetch(new Request(`${BASE}/bot/getMe`, { method: 'POST', headers: { ...auth, 'x-a': 'a\x01b' } }));
  assert.equal(res.status, 400);
  const text = await res.text();
  assert.deepEqual(JSON.parse(text), {
    ok: false,
    error_code: 400,
    error: 'invalid_request',
    description: 'malformed HTTP request: invalid header value',
  });
  assert.equal(wire.status, 400);
  assert.equal(text, wire.text());
  assert.deepEqual(fetchHeaders(res), wireHeaders(wire));
});

test('a body over max_body_bytes, declared or streamed: the bytes path\'s 413', async () => {
  const w = world({ max_body_bytes: 1024 });
  const auth = { authorization: `Bot ${w.token}`, ...JSON_TYPE };
  const big = JSON.stringify({ chat_id: w.chat.id, text: 'x'.repeat(2000) });
  const wire = w.call('/bot/sendMessage', big, auth);
  assert.equal(wire.status, 413);
  assert.deepEqual(wire.json(), {
    ok: false,
    error_code: 413,
    error: 'payload_too_large',
    description: 'request body is larger than 1024 bytes',
  });
  const requests = [
    // Refused by its Content-Length: the body is never read.
    new Request(`${BASE}/bot/sendMessage`, { method: 'POST', headers: { ...auth, 'content-length': String(big.length) }, body: big }),
    // A stream of unknown length: refused once more than the limit came in.
    new Request(`${BASE}/bot/sendMessage`, {
      method: 'POST',
      headers: auth,
      duplex: 'half',
      body: new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(big));
          c.close();
        },
      }),
    }),
  ];
  for (const req of requests) {
    const res = await w.svc.fetch(req);
    assert.equal(res.status, 413);
    assert.equal(res.statusText, 'Content Too Large');
    assert.equal(await res.text(), wire.text());
    assert.deepEqual(fetchHeaders(res), wireHeaders(wire));
  }
  // Nothing was sent.
  const history = w.ok('/admin/getChatHistory', { chat_id: w.chat.id });
  assert.deepEqual(history, []);
});

test('a refused gateway upgrade from a Request: the bytes path\'s refusal, byte for byte', () => {
  const w = world();
  const wire = (() => {
    try {
      w.svc.acceptGateway(upgradeRequest('0:wrong'));
    } catch (e) {
      assert.ok(e instanceof bs.GatewayRejectedError);
      return e.response;
    }
    assert.fail('accepted');
  })();
  const req = new Request(`${BASE}/bot/gateway`, {
    headers: {
      upgrade: 'websocket',
      connection: 'Upgrade',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-version': '13',
      authorization: 'Bot 0:wrong',
    },
  });
  assert.throws(
    () => w.svc.acceptGateway(req),
    (e) => {
      assert.ok(e instanceof bs.GatewayRejectedError);
      assert.deepEqual([...e.response], [...wire]);
      const r = bs.decodeResponse(e.response);
      assert.equal(r.status, 401);
      assert.equal(r.json().error, 'invalid_token');
      return true;
    },
  );
});

test('a parked getUpdates: its answer arrives with the status, headers and body the core made', async () => {
  const w = world({ clock: 'system' });
  const auth = { authorization: `Bot ${w.token}`, ...JSON_TYPE };
  const parked = w.svc.fetch(
    new Request(`${BASE}/bot/getUpdates`, { method: 'POST', headers: auth, body: JSON.stringify({ offset: 2, timeout: 30 }) }),
  );
  await new Promise((r) => setTimeout(r, 20));
  const m = w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi' });
  const res = await parked;
  // The same poll as bytes now finds the same update at once.
  const wire = w.call('/bot/getUpdates', { offset: 2, timeout: 0 }, auth);
  assert.equal(res.status, 200);
  assert.equal(res.statusText, 'OK');
  const text = await res.text();
  assert.deepEqual(JSON.parse(text), { ok: true, result: [{ update_id: 2, type: 'message_created', data: { message: m } }] });
  assert.equal(text, wire.text());
  assert.deepEqual(fetchHeaders(res), wireHeaders(wire));
});
