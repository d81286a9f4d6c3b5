// Webhook deliveries from the WASM build in Node: the Service sends them
// itself (node:http, every resolved address checked against the policy)
// to a real receiver that verifies each with the Standard Webhooks
// project's own JavaScript library. Deliveries arrive verified with stable
// ids and exact bodies; failures (a 500, a 429, a redirect, which is not
// followed, a time-out, a receiver that is down) are retried, in order
// per chat; a name that resolves to loopback is refused; with an
// asynchronous page storage nothing leaves before its commit is durable;
// and over https, only a receiver whose certificate the sender trusts
// (NODE_EXTRA_CA_CERTS) for the URL's name gets anything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, SECRET, ADMIN } from './helpers.mjs';
import { startReceiver, delivered, answeredOk, chatOf, testCa } from './webhook-receiver.mjs';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const ALLOW = { webhook_allow_http: true, webhook_allow_private_addresses: true };

/** A service on the system clock (receivers check the timestamp) and a bot with a started chat. */
function world(config = ALLOW, options = {}) {
  const svc = new bs.Service({ admin_secret: SECRET, clock: 'system', ...config }, options);
  const call = (path, body, headers = ADMIN) => bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  const ok = (path, body, headers) => {
    const r = call(path, body, headers);
    assert.equal(r.status, 200, `${path} -> ${r.status} ${r.text()}`);
    return r.json().result;
  };
  const user = ok('/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = ok('/admin/createBot', { display_name: 'Hook', handle: 'hook_bot' });
  const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
  const asBot = { Authorization: `Bot ${token}` };
  const info = () => ok('/bot/getWebhookInfo', {}, asBot);
  const say = (userId, chatId, text) => ok('/admin/sendUserMessage', { user_id: userId, chat_id: chatId, text });
  return { svc, call, ok, user, bot, token, chat, asBot, info, say };
}

async function until(what, f, ms = 10_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('deliveries arrive signed, verified by the standardwebhooks library, with stable ids and exact bodies; the cursor moves', async () => {
  const rx = await startReceiver();
  const w = world();
  try {
    const set = w.ok('/bot/setWebhook', { url: rx.url }, w.asBot);
    assert.deepEqual(set, { url: rx.url, secret: set.secret });
    assert.match(set.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    rx.secret = set.secret;
    const m1 = w.say(w.user.id, w.chat.id, 'one');
    const m2 = w.say(w.user.id, w.chat.id, 'two');
    await rx.waitFor((s) => delivered(s).length >= 3, '3 deliveries');
    const seen = rx.seen.filter(answeredOk);
    assert.deepEqual(delivered(rx.seen), [1, 2, 3]);
    assert.deepEqual(seen.map((e) => e.id), [1, 2, 3].map((n) => `msg_${w.bot.id}_${n}`));
    for (const e of seen) {
      assert.equal(e.verified, true);
      assert.equal(e.path, '/hook');
      assert.equal(e.contentType, 'application/json');
      assert.equal(e.userAgent, 'botspace-webhooks');
    }
    assert.deepEqual(seen[0].body, {
      update_id: 1,
      type: 'bot_started',
      data: { chat: { id: w.chat.id, type: 'private' }, user: w.user },
    });
    assert.deepEqual(seen[1].body, { update_id: 2, type: 'message_created', data: { message: m1 } });
    assert.deepEqual(seen[2].body, { update_id: 3, type: 'message_created', data: { message: m2 } });
    await until('the cursor to move', () => w.info().pending_update_count === 0);
    assert.deepEqual(w.info(), {
      url: rx.url,
      pending_update_count: 0,
      max_connections: 40,
      allowed_updates: null,
      last_error_date: null,
      last_error_message: null,
      next_attempt_date: null,
    });
    // deleteWebhook: nothing more is sent.
    assert.equal(w.ok('/bot/deleteWebhook', {}, w.asBot), true);
    const before = rx.seen.length;
    w.say(w.user.id, w.chat.id, 'three');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(rx.seen.length, before);
    assert.equal(w.info().pending_update_count, 1);
  } finally {
    w.svc.free();
    await rx.close();
  }
});

test('a 500, a 429 and a redirect are retried; every event arrives in order per chat; the redirect is not followed', async () => {
  const rx = await startReceiver();
  const w = world();
  try {
    const bob = w.ok('/admin/createUser', { display_name: 'Bob' });
    const chatB = w.ok('/admin/startBot', { user_id: bob.id, bot_id: w.bot.id });
    rx.script = ['500', '302', '429'];
    rx.secret = w.ok('/bot/setWebhook', { url: rx.url }, w.asBot).secret;
    for (let i = 0; i < 3; i++) {
      w.say(w.user.id, w.chat.id, `a${i}`);
      w.say(bob.id, chatB.id, `b${i}`);
    }
    // 1, 2: bot_started of chat A and B; 3..8: a0 b0 a1 b1 a2 b2.
    await rx.waitFor((s) => delivered(s).length >= 8, '8 deliveries', 20_000);
    assert.deepEqual([...delivered(rx.seen)].sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8]);
    // The three failures came first, and each was tried again.
    assert.deepEqual(rx.seen.slice(0, 3).map((e) => e.step).sort(), ['302', '429', '500']);
    const failedIds = rx.seen.slice(0, 3).map((e) => e.id);
    for (const id of failedIds) assert.ok(rx.seen.some((e) => e.id === id && answeredOk(e)), `${id} retried`);
    // Per chat, every request (failed or not) is in seq order, and an
    // event is sent again only while it is the chat's oldest undelivered.
    const perChat = new Map();
    for (const e of rx.seen) {
      const c = chatOf(e.body);
      const list = perChat.get(c) ?? [];
      const last = list.at(-1);
      if (last) assert.ok(e.body.update_id >= last.body.update_id, `chat ${c}: ${e.body.update_id} after ${last.body.update_id}`);
      if (last && last.body.update_id === e.body.update_id) assert.notEqual(last.step, 'ok', 'nothing delivered twice');
      list.push(e);
      perChat.set(c, list);
    }
    assert.deepEqual(perChat.get(w.chat.id).filter(answeredOk).map((e) => e.body.update_id), [1, 3, 5, 7]);
    assert.deepEqual(perChat.get(chatB.id).filter(answeredOk).map((e) => e.body.update_id), [2, 4, 6, 8]);
    for (const e of rx.seen) {
      assert.equal(e.verified, true);
      assert.equal(e.id, `msg_${w.bot.id}_${e.body.update_id}`);
    }
    assert.ok(!rx.seen.some((e) => e.path === '/redirected'), 'the redirect was not followed');
    await until('the cursor to move', () => w.info().pending_update_count === 0);
    const info = w.info();
    // The last failure is kept for getWebhookInfo.
    assert.equal(typeof info.last_error_date, 'number');
    assert.match(info.last_error_message, /^the receiver answered (500|302|429)$/);
    assert.equal(info.next_attempt_date, null);
  } finally {
    w.svc.free();
    await rx.close();
  }
});

test('an answer later than the deadline is a time-out, retried with the same id; a receiver that is down is a connection failure', async () => {
  const rx = await startReceiver();
  const w = world();
  try {
    rx.script = ['hang:12'];
    rx.secret = w.ok('/bot/setWebhook', { url: rx.url }, w.asBot).secret;
    await rx.waitFor((s) => delivered(s).length >= 1, 'the retry after the time-out', 20_000);
    assert.deepEqual(rx.seen.map((e) => [e.id, e.step]), [
      [`msg_${w.bot.id}_1`, 'hang:12'],
      [`msg_${w.bot.id}_1`, 'ok'],
    ]);
    await until('the cursor to move', () => w.info().pending_update_count === 0);
    assert.equal(w.info().last_error_message, 'no answer within 10 s');
  } finally {
    w.svc.free();
    await rx.close();
  }
  // Nobody listens on the port any more.
  const w2 = world();
  try {
    w2.ok('/bot/setWebhook', { url: rx.url }, w2.asBot);
    const info = await until('a failed attempt', () => {
      const i = w2.info();
      return i.last_error_message ? i : null;
    });
    assert.equal(info.last_error_message, `could not connect: connect ECONNREFUSED 127.0.0.1:${rx.port}`);
    assert.equal(info.pending_update_count, 1);
  } finally {
    w2.svc.free();
  }
});

test('Node checks the address a name resolves to: localhost is refused unless private addresses are allowed', async () => {
  const rx = await startReceiver();
  const w = world({ webhook_allow_http: true });
  try {
    assert.equal(w.svc.webhookAddressAllowed('127.0.0.1'), 'the host name resolves to a loopback address, which this server does not deliver to');
    assert.equal(w.svc.webhookAddressAllowed('::ffff:169.254.169.254'), 'the host name resolves to a link-local address, which this server does not deliver to');
    assert.equal(w.svc.webhookAddressAllowed('93.184.215.14'), null);
    assert.throws(() => w.svc.webhookAddressAllowed('localhost'), TypeError);
    // A literal loopback address is refused by setWebhook itself.
    const r = w.call('/bot/setWebhook', { url: rx.url }, w.asBot);
    assert.equal(r.status, 400);
    assert.equal(r.json().error, 'webhook_address_forbidden');
    // A name is checked where it resolves, at every attempt.
    const url = `http://localhost:${rx.port}/hook`;
    rx.secret = w.ok('/bot/setWebhook', { url }, w.asBot).secret;
    const info = await until('a refused attempt', () => {
      const i = w.info();
      return i.last_error_message ? i : null;
    });
    assert.equal(info.last_error_message, 'the host name resolves to a loopback address, which this server does not deliver to');
    assert.equal(info.pending_update_count, 1);
    assert.equal(typeof info.next_attempt_date, 'number');
    assert.deepEqual(rx.seen, []);
  } finally {
    w.svc.free();
    await rx.close();
  }

  // Allowed, the same name is delivered to.
  const rx2 = await startReceiver();
  const w2 = world();
  try {
    rx2.secret = w2.ok('/bot/setWebhook', { url: `http://localhost:${rx2.port}/hook` }, w2.asBot).secret;
    await rx2.waitFor((s) => delivered(s).length >= 1, 'the delivery to localhost');
    assert.deepEqual(delivered(rx2.seen), [1]);
    assert.equal(rx2.seen[0].verified, true);
  } finally {
    w2.svc.free();
    await rx2.close();
  }
});

test('with an asynchronous page storage, no delivery leaves before the commit of its event is durable', async () => {
  const rx = await startReceiver();
  // Commits are held until the test lets them through.
  const inner = new bs.MemoryPageStorage();
  let hold = false;
  const held = [];
  const storage = {
    size: () => inner.size(),
    read: (i) => inner.read(i),
    commit(pages, size) {
      inner.commit(pages, size);
      if (!hold) return Promise.resolve();
      return new Promise((resolve) => held.push(resolve));
    },
  };
  const w = world(ALLOW, { storage });
  try {
    rx.secret = w.ok('/bot/setWebhook', { url: rx.url }, w.asBot).secret;
    await rx.waitFor((s) => delivered(s).length >= 1, 'bot_started');
    await until('the cursor to move', () => w.info().pending_update_count === 0);
    hold = true;
    const m = w.say(w.user.id, w.chat.id, 'held');
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(delivered(rx.seen), [1], 'nothing sent while the commit is not durable');
    hold = false;
    for (const resolve of held.splice(0)) resolve();
    await rx.waitFor((s) => delivered(s).length >= 2, 'the held event');
    assert.deepEqual(rx.seen.filter(answeredOk)[1].body, { update_id: 2, type: 'message_created', data: { message: m } });
  } finally {
    w.svc.free();
    await rx.close();
  }
});

test('the four calls for hosts that send deliveries themselves (webhooks: false)', async () => {
  const w = world(ALLOW, { webhooks: false });
  try {
    // Nothing is due: the webhook is not set.
    assert.equal(w.svc.pollWebhook(), null);
    assert.equal(w.svc.webhookTimeout(), null);
    w.ok('/bot/setWebhook', { url: 'http://127.0.0.1:9/hook' }, w.asBot);
    const now = w.svc.nowMs();
    const req = w.svc.pollWebhook(now);
    assert.deepEqual(Object.keys(req), ['id', 'botId', 'url', 'method', 'headers', 'hostHeader', 'target', 'body', 'deadline', 'attempt']);
    assert.equal(req.botId, w.bot.id);
    assert.equal(req.url, 'http://127.0.0.1:9/hook');
    assert.equal(req.method, 'POST');
    assert.equal(req.hostHeader, '127.0.0.1:9');
    assert.deepEqual(req.target, { https: false, host: '127.0.0.1', port: 9, path: '/hook', literal: '127.0.0.1' });
    assert.deepEqual(Object.keys(req.headers), ['user-agent', 'content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature']);
    assert.equal(req.headers['webhook-id'], `msg_${w.bot.id}_1`);
    assert.equal(req.headers['webhook-timestamp'], String(Math.floor(now / 1000)));
    assert.equal(req.deadline, now + 10_000);
    assert.equal(req.attempt, 1);
    assert.deepEqual(JSON.parse(req.body), { update_id: 1, type: 'bot_started', data: { chat: { id: w.chat.id, type: 'private' }, user: w.user } });
    // One chat: nothing more until this one is reported.
    assert.equal(w.svc.pollWebhook(now), null);
    assert.throws(() => w.svc.webhookOutcome(req.id, { nope: 1 }), TypeError);
    assert.throws(() => w.svc.webhookOutcome(req.id, { status: 99 }), TypeError);
    // A 503 with Retry-After: 30 waits 30 s.
    w.svc.webhookOutcome(req.id, { status: 503, retryAfter: '30' }, now + 5);
    assert.equal(w.svc.pollWebhook(now + 29_000), null);
    const info = w.info();
    assert.equal(info.last_error_message, 'the receiver answered 503');
    assert.equal(info.next_attempt_date, Math.ceil((now + 5 + 30_000) / 1000));
    const again = w.svc.pollWebhook(now + 30_005);
    assert.equal(again.headers['webhook-id'], `msg_${w.bot.id}_1`);
    assert.equal(again.attempt, 2);
    w.svc.webhookOutcome(again.id, { timedOut: true }, now + 31_000);
    // What outcomes change is written by a poll, at most every 50 ms.
    assert.equal(w.svc.pollWebhook(now + 31_100), null);
    assert.equal(w.info().last_error_message, 'no answer within 10 s');
    const third = w.svc.pollWebhook(now + 40_000);
    w.svc.webhookOutcome(third.id, { failed: 'could not connect: refused' }, now + 40_001);
    assert.equal(w.svc.pollWebhook(now + 40_100), null);
    assert.equal(w.info().last_error_message, 'could not connect: refused');
    // A failure of a kind: the core words it, then the detail if any.
    const fourth = w.svc.pollWebhook(now + 100_000);
    assert.throws(() => w.svc.webhookOutcome(fourth.id, { failure: 'nope', detail: 'x' }), TypeError);
    w.svc.webhookOutcome(fourth.id, { failure: 'tls', detail: 'certificate expired' }, now + 100_001);
    assert.equal(w.svc.pollWebhook(now + 100_100), null);
    assert.equal(w.info().last_error_message, 'TLS failed: certificate expired');
    const fifth = w.svc.pollWebhook(now + 200_000);
    w.svc.webhookOutcome(fifth.id, { failure: 'no_address' }, now + 200_001);
    assert.equal(w.svc.pollWebhook(now + 200_100), null);
    assert.equal(w.info().last_error_message, 'the host name has no address');
    const sixth = w.svc.pollWebhook(now + 300_000);
    w.svc.webhookOutcome(sixth.id, { status: 204, retryAfter: null }, now + 300_001);
    assert.equal(w.svc.pollWebhook(now + 300_100), null);
    assert.equal(w.info().pending_update_count, 0);
    await assert.rejects(w.svc.deliverWebhooks(), (e) => e.code === 'invalid_state');
  } finally {
    w.svc.free();
  }
});

test('over https: a receiver whose certificate chains to NODE_EXTRA_CA_CERTS gets verified deliveries; one from an untrusted CA or for another name gets nothing, and the event waits', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'botspace-webhooks-https-'));
  const ca = testCa(dir, 'ca');
  const good = await startReceiver({ tls: ca.issue('localhost', 'DNS:localhost,IP:127.0.0.1') });
  const otherName = await startReceiver({ tls: ca.issue('elsewhere', 'DNS:elsewhere.example') });
  // A CA the sender was not told about, for the very name it connects to.
  const untrusted = await startReceiver({ tls: testCa(dir, 'stranger').issue('localhost', 'DNS:localhost,IP:127.0.0.1') });
  const sender = new URL('./webhook-https-sender.mjs', import.meta.url);
  const child = spawn(process.execPath, [sender.pathname], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: ca.cert },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ask = async (command) => {
    child.stdin.write(`${JSON.stringify(command)}\n`);
    const { value, done } = await answers.next();
    assert.ok(!done, 'the sender exited');
    return JSON.parse(value);
  };
  const waitInfo = async (what, f) => {
    const end = Date.now() + 10_000;
    for (;;) {
      const i = await ask({ info: true });
      if (f(i)) return i;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(i)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  try {
    const first = await ask({ set: untrusted.url });
    const { bot, chat, user } = first;
    assert.deepEqual(first.result, { url: untrusted.url, secret: first.result.secret });
    for (const rx of [good, otherName, untrusted]) rx.secret = first.result.secret;
    // Refused in the handshake, retried, nothing sent: "TLS failed: " and
    // Node's (OpenSSL's) words.
    let last = null;
    for (const rx of [untrusted, otherName]) {
      if (rx !== untrusted) await ask({ set: rx.url });
      const i = await waitInfo(`a TLS failure from ${rx.url}`, (i) =>
        i.url === rx.url && i.last_error_message?.startsWith('TLS failed: ') && i.last_error_message !== last,
      );
      last = i.last_error_message;
      assert.equal(i.pending_update_count, 1, JSON.stringify(i));
      assert.equal(typeof i.last_error_date, 'number');
      assert.equal(typeof i.next_attempt_date, 'number');
    }
    // The same event, once the URL points at a certificate the sender trusts.
    await ask({ set: good.url });
    const m1 = await ask({ say: 'over TLS' });
    await good.waitFor((s) => delivered(s).length >= 2, '2 deliveries');
    const seen = good.seen.filter(answeredOk);
    assert.deepEqual(delivered(good.seen), [1, 2]);
    assert.deepEqual(seen.map((e) => e.id), [1, 2].map((n) => `msg_${bot.id}_${n}`));
    for (const e of seen) {
      assert.equal(e.verified, true);
      assert.equal(e.path, '/hook');
      assert.equal(e.contentType, 'application/json');
    }
    assert.deepEqual(seen[0].body, {
      update_id: 1,
      type: 'bot_started',
      data: { chat: { id: chat.id, type: 'private' }, user },
    });
    assert.deepEqual(seen[1].body, { update_id: 2, type: 'message_created', data: { message: m1 } });
    await waitInfo('the cursor to move', (i) => i.pending_update_count === 0);
    assert.deepEqual(untrusted.seen, []);
    assert.deepEqual(otherName.seen, []);
  } finally {
    child.stdin.end();
    child.kill();
    for (const rx of [good, otherName, untrusted]) await rx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
