// Webhooks from the edge worker on REAL workerd (npm `workerd`, pinned):
// the Durable Object sends each delivery with `fetch` to a receiver in
// this process that verifies it with the Standard Webhooks project's own
// JavaScript library; a failed delivery is retried by the object's alarm
// (the service in the object keeps no timer of its own); workerd killed
// while a retry waits delivers from the durable cursor once started
// again, with the same ids; and under the
// default configuration workerd's network refuses a name that resolves to
// loopback; over https, only a receiver whose certificate chains to what
// the network service trusts gets anything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReceiver, delivered, testCa } from '../../wasm/test/webhook-receiver.mjs';
import { HERE, SECRET, call, ok, startWorkerd, stateDir } from './workerd-helpers.mjs';

const ALLOW_ENV = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' };

async function world(base) {
  const user = await ok(base, '/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = await ok(base, '/admin/createBot', { display_name: 'Edge', handle: 'edge_hook_bot' });
  const chat = await ok(base, '/admin/startBot', { user_id: user.id, bot_id: bot.id });
  return { user, bot, token, chat, auth: `Bot ${token}` };
}

async function until(what, f, ms = 15_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('workerd delivers webhooks verified by the standardwebhooks library; a failure is retried by the Durable Object alarm', async () => {
  const rx = await startReceiver();
  const w = await startWorkerd(stateDir(), undefined, { config: 'workerd-local-receivers.capnp', env: ALLOW_ENV });
  try {
    const { user, bot, chat, auth } = await world(w.base);
    // The first attempt (bot_started) is answered 500.
    rx.script = ['500'];
    const set = await ok(w.base, '/bot/setWebhook', { url: rx.url }, auth);
    assert.equal(set.url, rx.url);
    assert.match(set.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    rx.secret = set.secret;
    // Nothing else happens until the retry: only the alarm can send it.
    await rx.waitFor((s) => delivered(s).length >= 1, 'the retried bot_started', 15_000);
    assert.deepEqual(
      rx.seen.map((e) => [e.id, e.step, e.verified]),
      [
        [`msg_${bot.id}_1`, '500', true],
        [`msg_${bot.id}_1`, 'ok', true],
      ],
    );
    // The object's alarm fired for it.
    const stats = (await ok(w.base, '/admin/getStorageStats', {})).host;
    assert.ok(stats.alarms >= 1, JSON.stringify(stats));
    assert.deepEqual(rx.seen[1].body, { update_id: 1, type: 'bot_started', data: { chat: { id: chat.id, type: 'private' }, user } });
    assert.ok(Number(rx.seen[1].timestamp) >= Number(rx.seen[0].timestamp));
    const info = await until('the cursor to move', async () => {
      const i = await ok(w.base, '/bot/getWebhookInfo', {}, auth);
      return i.pending_update_count === 0 ? i : null;
    });
    assert.equal(info.last_error_message, 'the receiver answered 500');
    assert.equal(info.next_attempt_date, null);

    // A user's message arrives, verified, with its exact body.
    const m = await ok(w.base, '/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: 'hi webhook' });
    await rx.waitFor((s) => delivered(s).length >= 2, 'the message');
    const last = rx.seen.at(-1);
    assert.deepEqual([last.id, last.step, last.verified, last.contentType, last.path], [`msg_${bot.id}_2`, 'ok', true, 'application/json', '/hook']);
    assert.deepEqual(last.body, { update_id: 2, type: 'message_created', data: { message: m } });
    assert.equal(m.text, 'hi webhook');
    assert.deepEqual(await w.stop('SIGTERM'), { code: 0, signal: null });
  } finally {
    await w.stop('SIGKILL');
    await rx.close();
  }
});

test('workerd with the default configuration: literal private addresses are refused by setWebhook, and its network refuses a name that resolves to loopback', async () => {
  const rx = await startReceiver();
  const w = await startWorkerd(stateDir(), undefined, { env: { WEBHOOK_ALLOW_HTTP: 'true' } });
  try {
    const { auth } = await world(w.base);
    const r = await call(w.base, '/bot/setWebhook', { url: rx.url }, auth);
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'webhook_address_forbidden');
    await ok(w.base, '/bot/setWebhook', { url: `http://localhost:${rx.port}/hook` }, auth);
    const info = await until('a refused attempt', async () => {
      const i = await ok(w.base, '/bot/getWebhookInfo', {}, auth);
      return i.last_error_message ? i : null;
    });
    // workerd refuses the connection and tells the worker no more than an
    // internal error (its log says which address was denied).
    assert.match(info.last_error_message, /^the request failed: internal error; reference = \w+$/);
    assert.match(w.stderr(), new RegExp(`connecting to localhost:${rx.port} is not allowed`));
    assert.equal(info.pending_update_count, 1);
    assert.equal(typeof info.next_attempt_date, 'number');
    assert.deepEqual(rx.seen, []);
  } finally {
    await w.stop('SIGKILL');
    await rx.close();
  }
});

test('workerd killed while a retry waits: started again on the same storage, it delivers from the durable cursor with the same ids', async () => {
  const rx = await startReceiver();
  const dir = stateDir();
  let w = await startWorkerd(dir, undefined, { config: 'workerd-local-receivers.capnp', env: ALLOW_ENV });
  try {
    const { user, bot, chat, auth } = await world(w.base);
    // Every attempt fails until the receiver is told otherwise.
    rx.script = Array(50).fill('500');
    rx.secret = (await ok(w.base, '/bot/setWebhook', { url: rx.url }, auth)).secret;
    const m = await ok(w.base, '/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: 'survives' });
    await rx.waitFor((s) => s.length >= 1, 'a failed attempt');
    assert.deepEqual(await w.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    rx.script = [];
    const before = rx.seen.length;
    w = await startWorkerd(dir, undefined, { config: 'workerd-local-receivers.capnp', env: ALLOW_ENV });
    await rx.waitFor((s) => delivered(s).length >= 2, 'both events after the restart', 20_000);
    const after = rx.seen.slice(before).filter((e) => e.step === 'ok');
    assert.deepEqual(
      after.map((e) => [e.id, e.verified, e.body.update_id]),
      [
        [`msg_${bot.id}_1`, true, 1],
        [`msg_${bot.id}_2`, true, 2],
      ],
    );
    assert.deepEqual(after[1].body, { update_id: 2, type: 'message_created', data: { message: m } });
    // Every attempt before the kill carried the same ids.
    for (const e of rx.seen.slice(0, before)) assert.equal(e.id, `msg_${bot.id}_${e.body.update_id}`);
    await until('the cursor to move', async () => (await ok(w.base, '/bot/getWebhookInfo', {}, auth)).pending_update_count === 0);
  } finally {
    await w.stop('SIGKILL');
    await rx.close();
  }
});

test('workerd over https: a receiver whose certificate chains to the network service\'s trustedCertificates gets verified deliveries; one from an untrusted CA gets nothing and the event waits', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'botspace-workerd-https-'));
  const ca = testCa(dir, 'ca');
  const good = await startReceiver({ tls: ca.issue('localhost', 'DNS:localhost,IP:127.0.0.1') });
  // A CA workerd was not told about, for the very name it connects to.
  const untrusted = await startReceiver({ tls: testCa(dir, 'stranger').issue('localhost', 'DNS:localhost,IP:127.0.0.1') });
  // workerd-local-receivers.capnp with the test CA trusted besides the
  // browsers' roots: how an operator trusts an internal CA on workerd.
  const config = join(dir, 'workerd-https.capnp');
  writeFileSync(
    config,
    `using Workerd = import "/workerd/workerd.capnp";
using Example = import "/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = Example.botspaceWorker),
    (name = "state", disk = (path = ".state", writable = true)),
    (name = "internet", network = (allow = ["public", "private", "local"],
      tlsOptions = (trustBrowserCas = true, trustedCertificates = [embed "ca/ca.pem"]))),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "main")],
);
`,
  );
  // https only: no WEBHOOK_ALLOW_HTTP.
  const w = await startWorkerd(stateDir(), undefined, {
    config,
    args: ['--import-path', HERE],
    env: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' },
  });
  try {
    const { user, bot, chat, auth } = await world(w.base);
    const set = await ok(w.base, '/bot/setWebhook', { url: untrusted.url }, auth);
    assert.deepEqual(set, { url: untrusted.url, secret: set.secret });
    good.secret = untrusted.secret = set.secret;
    // fetch tells the worker no more than an internal error (not that it
    // was the certificate); nothing was sent.
    const info = await until('a failed attempt', async () => {
      const i = await ok(w.base, '/bot/getWebhookInfo', {}, auth);
      return i.last_error_message ? i : null;
    });
    assert.match(info.last_error_message, /^the request failed: internal error; reference = \w+$/);
    assert.equal(info.pending_update_count, 1);
    assert.equal(typeof info.next_attempt_date, 'number');
    assert.deepEqual(untrusted.seen, []);
    // The same event, once the URL points at a certificate workerd trusts.
    await ok(w.base, '/bot/setWebhook', { url: good.url }, auth);
    const m = await ok(w.base, '/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: 'over TLS' });
    await good.waitFor((s) => delivered(s).length >= 2, 'both events', 20_000);
    const seen = good.seen.filter((e) => e.step === 'ok');
    assert.deepEqual(
      seen.map((e) => [e.id, e.verified, e.path, e.contentType]),
      [1, 2].map((n) => [`msg_${bot.id}_${n}`, true, '/hook', 'application/json']),
    );
    assert.deepEqual(seen[0].body, { update_id: 1, type: 'bot_started', data: { chat: { id: chat.id, type: 'private' }, user } });
    assert.deepEqual(seen[1].body, { update_id: 2, type: 'message_created', data: { message: m } });
    await until('the cursor to move', async () => (await ok(w.base, '/bot/getWebhookInfo', {}, auth)).pending_update_count === 0);
    assert.deepEqual(untrusted.seen, []);
  } finally {
    await w.stop('SIGKILL');
    await good.close();
    await untrusted.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
