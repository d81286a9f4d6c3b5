// The fetch adapter with real Request and Response objects.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, world, SECRET, FakeSocket } from './helpers.mjs';

const BASE = 'http://127.0.0.1:8080';
const post = (path, body, headers = {}) =>
  new Request(BASE + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });

test('bot and host methods through fetch', async () => {
  const w = world();
  let res = await w.svc.fetch(post('/bot/getMe', undefined, { authorization: `Bot ${w.token}` }));
  assert.ok(res instanceof Response);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/json');
  const me = await res.json();
  assert.equal(me.ok, true);
  assert.equal(me.result.id, w.botInfo.id);

  res = await w.svc.fetch(post('/bot/sendMessage', { chat_id: w.chat.id, text: 'via fetch ✓' }, { authorization: `Bot ${w.token}` }));
  assert.equal(res.status, 200);
  assert.equal((await res.json()).result.text, 'via fetch ✓');

  res = await w.svc.fetch(post('/admin/getChatHistory', { chat_id: w.chat.id }, { authorization: `Admin ${SECRET}` }));
  assert.deepEqual((await res.json()).result.map((m) => m.text), ['via fetch ✓']);

  // A plain URL string is a GET: 405 with Allow.
  res = await w.svc.fetch(`${BASE}/bot/getMe`);
  assert.equal(res.status, 405);
  assert.equal(res.headers.get('allow'), 'POST');
  assert.equal((await res.json()).error, 'method_not_allowed');
});

test('documented errors through fetch: 401, 404, 400, 415, rate limit 429', async () => {
  const w = world();
  const B = { authorization: `Bot ${w.token}` };
  let res = await w.svc.fetch(post('/bot/getMe'));
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error, 'missing_authorization');
  res = await w.svc.fetch(post('/bot/nope', {}, B));
  assert.equal((await res.json()).error, 'method_not_found');
  res = await w.svc.fetch(post('/bot/sendMessage', '{"chat_id":', B));
  assert.equal((await res.json()).error, 'invalid_json');
  res = await w.svc.fetch(post('/bot/sendMessage', '[]', B));
  assert.equal((await res.json()).error, 'invalid_request');
  res = await w.svc.fetch(post('/bot/sendMessage', '{}', { ...B, 'content-type': 'text/plain' }));
  assert.equal(res.status, 415);
  // Free tier private chat: burst 5, then 429 with Retry-After.
  // Every counted answer carries X-RateLimit-* through the fetch Response.
  const statuses = [];
  const remaining = [];
  for (let i = 0; i < 6; i++) {
    res = await w.svc.fetch(post('/bot/sendMessage', { chat_id: w.chat.id, text: `m${i}` }, B));
    statuses.push(res.status);
    remaining.push(res.headers.get('x-ratelimit-remaining'));
    assert.equal(res.headers.get('x-ratelimit-limit'), '5');
    assert.equal(res.headers.get('x-ratelimit-scope'), 'chat');
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
  assert.deepEqual(remaining, ['4', '3', '2', '1', '0', '0']);
  assert.equal(res.headers.get('retry-after'), '1');
  const body = await res.json();
  assert.equal(body.error, 'rate_limited');
  assert.equal(body.parameters.scope, 'chat');
  // The 429's headers are its parameters' figures.
  assert.equal(Number(res.headers.get('x-ratelimit-reset-after')), body.parameters.retry_after_ms / 1000);
  // getMe does not count: none.
  res = await w.svc.fetch(post('/bot/getMe', undefined, B));
  assert.equal(res.headers.get('x-ratelimit-remaining'), null);
});

test('an empty body is {} and a query string does not change routing', async () => {
  const w = world();
  const res = await w.svc.fetch(new Request(`${BASE}/bot/getMe?x=1`, { method: 'POST', headers: { authorization: `Bot ${w.token}` } }));
  assert.equal(res.status, 200);
});

test('oversized bodies are 413 without buffering them', async () => {
  const w = world({ max_body_bytes: 1000 });
  const B = { authorization: `Bot ${w.token}` };
  // Known length.
  let res = await w.svc.fetch(post('/bot/sendMessage', { chat_id: w.chat.id, text: 'x'.repeat(5000) }, B));
  assert.equal(res.status, 413);
  assert.equal((await res.json()).error, 'payload_too_large');
  // A declared Content-Length over the limit: the body is never read.
  let pulled = 0;
  const stream = () =>
    new ReadableStream({
      pull(controller) {
        pulled++;
        if (pulled > 100) controller.close();
        else controller.enqueue(new Uint8Array(512).fill(0x20));
      },
    });
  res = await w.svc.fetch(new Request(`${BASE}/bot/sendMessage`, { method: 'POST', body: stream(), duplex: 'half', headers: { ...B, 'content-type': 'application/json', 'content-length': '51200' } }));
  assert.equal(res.status, 413);
  assert.ok(pulled <= 2, `pulled ${pulled} chunks`);
  // A streamed body of unknown length: reading stops just past the limit.
  pulled = 0;
  res = await w.svc.fetch(new Request(`${BASE}/bot/sendMessage`, { method: 'POST', body: stream(), duplex: 'half', headers: { ...B, 'content-type': 'application/json' } }));
  assert.equal(res.status, 413);
  assert.ok(pulled <= 5, `pulled ${pulled} chunks of 512 bytes for a 1000-byte limit`);
  // The transport order holds: 405 before 413.
  res = await w.svc.fetch(new Request(`${BASE}/bot/getMe`, { method: 'PUT', body: 'x'.repeat(5000), headers: B }));
  assert.equal(res.status, 405);
  // A streamed body under the limit works.
  const small = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(`{"chat_id":"${w.chat.id}",`));
      c.enqueue(new TextEncoder().encode('"text":"streamed"}'));
      c.close();
    },
  });
  res = await w.svc.fetch(new Request(`${BASE}/bot/sendMessage`, { method: 'POST', body: small, duplex: 'half', headers: { ...B, 'content-type': 'application/json' } }));
  assert.equal(res.status, 200);
  assert.equal((await res.json()).result.text, 'streamed');
});

const upgradeHeaders = (token) => ({
  upgrade: 'websocket',
  connection: 'Upgrade',
  'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
  'sec-websocket-version': '13',
  ...(token ? { authorization: `Bot ${token}` } : {}),
});

test('gateway upgrade through fetch: refusals are JSON responses', async () => {
  const w = world();
  let res = await w.svc.fetch(new Request(`${BASE}/bot/gateway`, { headers: upgradeHeaders('bot_wrong') }));
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error, 'invalid_token');
  res = await w.svc.fetch(new Request(`${BASE}/bot/gateway`, { headers: { authorization: `Bot ${w.token}` } }));
  assert.equal(res.status, 426);
  assert.equal((await res.json()).error, 'upgrade_required');
  // Node has no server-side WebSocket in fetch: 501, and the slot is given back.
  res = await w.svc.fetch(new Request(`${BASE}/bot/gateway`, { headers: upgradeHeaders(w.token) }));
  assert.equal(res.status, 501);
  assert.equal((await res.json()).error, 'websocket_unavailable');
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
});

test('hostAnswer: the answers a host gives on its own are the core\'s, envelope and status', async () => {
  let res = bs.hostAnswer('storage_error', 'the page storage failed to commit: disk gone');
  assert.equal(res.status, 500);
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.deepEqual(await res.json(), {
    ok: false,
    error_code: 500,
    error: 'storage_error',
    description: 'the page storage failed to commit: disk gone',
  });
  res = bs.hostAnswer('method_not_found', '/_botspace/nothing');
  assert.equal(res.status, 404);
  assert.deepEqual(await res.json(), {
    ok: false,
    error_code: 404,
    error: 'method_not_found',
    description: 'no method at this path (method names are case-sensitive)',
  });
  res = bs.hostAnswer('invalid_token');
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error, 'invalid_token');
  res = bs.hostAnswer('server_busy');
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('retry-after'), '1');
  assert.deepEqual(await res.json(), {
    ok: false,
    error_code: 503,
    error: 'server_busy',
    description: 'too many connections; retry later',
  });
  // A request whose answer a host could not get from the library.
  res = bs.hostAnswer('answer_failed');
  assert.equal(res.status, 500);
  assert.deepEqual(await res.json(), {
    ok: false,
    error_code: 500,
    error: 'answer_failed',
    description:
      'the server failed while answering: the request may or may not have been carried out; retry with the same Idempotency-Key',
  });
  // A request handler's code is not a host's to give.
  assert.throws(() => bs.hostAnswer('rate_limited'), TypeError);
});

test('gateway upgrade through fetch with options.upgradeWebSocket', async () => {
  const w = world();
  const socket = new FakeSocket();
  const res = await w.svc.fetch(new Request(`${BASE}/bot/gateway`, { headers: upgradeHeaders(w.token) }), {
    upgradeWebSocket: (req) => {
      assert.ok(req instanceof Request);
      return { socket, response: new Response(null, { status: 200, headers: { 'x-upgraded': '1' } }) };
    },
  });
  assert.equal(res.headers.get('x-upgraded'), '1');
  assert.deepEqual(socket.sent.map((m) => JSON.parse(m).op), ['hello', 'event']);
  socket.dispatchEvent(new Event('close'));
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
});

test('gateway upgrade through fetch with a Cloudflare-style WebSocketPair', async () => {
  const w = world();
  const OrigResponse = globalThis.Response;
  const pairs = [];
  globalThis.WebSocketPair = class {
    constructor() {
      this[0] = new FakeSocket();
      this[1] = new FakeSocket();
      this[1].accept = () => (this[1].accepted = true);
      pairs.push(this);
    }
  };
  // workerd's Response accepts status 101 with a webSocket; Node's does not.
  globalThis.Response = class extends OrigResponse {
    constructor(body, init = {}) {
      super(body, init.status === 101 ? { ...init, status: 200 } : init);
      if (init.status === 101) {
        Object.defineProperty(this, 'status', { value: 101 });
        this.webSocket = init.webSocket;
      }
    }
  };
  try {
    const res = await w.svc.fetch(new Request(`${BASE}/bot/gateway`, { headers: upgradeHeaders(w.token) }));
    assert.equal(res.status, 101);
    const [client, server] = [pairs[0][0], pairs[0][1]];
    assert.equal(res.webSocket, client);
    assert.equal(server.accepted, true);
    assert.deepEqual(server.sent.map((m) => JSON.parse(m).op), ['hello', 'event']);
    w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'to the worker' });
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(JSON.parse(server.sent.at(-1)).data.message.text, 'to the worker');
    server.receive('{"op":"ack","seq":2}');
    server.receive('bogus');
    assert.deepEqual(server.closedWith, [4001, 'invalid_payload']);
    assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
  } finally {
    delete globalThis.WebSocketPair;
    globalThis.Response = OrigResponse;
  }
});

test('getUpdates through fetch parks until a commit gives the bot an event, and answers [] at its deadline', async () => {
  const w = world({ clock: 'system' });
  const B = { authorization: `Bot ${w.token}` };
  const parked = w.svc.fetch(post('/bot/getUpdates', { offset: 2, timeout: 30 }, B));
  let settled = false;
  parked.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(settled, false, 'a poll with nothing to return waits');
  const m = w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi' });
  const res = await parked;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { ok: true, result: [{ update_id: 2, type: 'message_created', data: { message: m } }] });

  const t0 = Date.now();
  const empty = await w.svc.fetch(post('/bot/getUpdates', { offset: 3, timeout: 1 }, B));
  const took = Date.now() - t0;
  assert.deepEqual(await empty.json(), { ok: true, result: [] });
  assert.ok(took >= 950 && took < 1500, `timeout 1 answered after ${took} ms`);

  // An aborted request's poll is cancelled and the fetch settles at once.
  const ac = new AbortController();
  const aborted = w.svc.fetch(
    new Request(BASE + '/bot/getUpdates', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...B },
      body: JSON.stringify({ offset: 3, timeout: 30 }),
      signal: ac.signal,
    }),
  );
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  // Nobody reads its answer: the core's request_timeout stands in (no
  // status of the layer's own).
  const gone = await aborted;
  assert.equal(gone.status, 408);
  assert.equal((await gone.json()).error, 'request_timeout');

  // handleRequest never parks: timeout is answered as 0.
  const r = w.call('/bot/getUpdates', { offset: 3, timeout: 30 }, { Authorization: `Bot ${w.token}` });
  assert.deepEqual(r.json(), { ok: true, result: [] });

  // handle parks as fetch does (a Promise of the Response, settled by the
  // commit that gives the bot an event), unless atOnce.
  const poll = bs.encodeRequest('POST', '/bot/getUpdates', B, { offset: 3, timeout: 30 });
  const [now] = w.svc.handle([{ request: poll, atOnce: true }]);
  assert.deepEqual(bs.decodeResponse(now).json(), { ok: true, result: [] });
  const [later, me] = w.svc.handle([{ request: poll }, { request: bs.encodeRequest('POST', '/bot/getMe', B) }]);
  assert.ok(later instanceof Promise);
  assert.equal(bs.decodeResponse(me).status, 200);
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'for handle' });
  const woken = await later;
  assert.equal(woken.status, 200);
  const got = await woken.json();
  assert.equal(got.result.length, 1);
  assert.equal(got.result[0].update_id, 3);
  w.svc.free();
});
