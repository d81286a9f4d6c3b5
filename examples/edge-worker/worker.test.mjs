// Drives the edge-worker example with real Request objects through a
// stand-in for Cloudflare's Durable Object runtime (namespace, stub,
// blockConcurrencyWhile, storage with its 128 KiB value limit), including
// restarts that drop the in-memory service and restore it from storage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import worker, { BotspaceDurableObject, loadImage, saveImage } from './worker.js';

const SECRET = 'edge-admin-secret-000001';
const BASE = 'https://bots.example.workers.dev';

class FakeStorage {
  data = new Map();
  puts = 0;
  #check(k, v) {
    const size = v instanceof Uint8Array ? v.byteLength : JSON.stringify(v).length;
    if (size > 128 * 1024) throw new Error(`value for ${k} is ${size} bytes, over the 128 KiB limit`);
  }
  async get(key) {
    if (Array.isArray(key)) {
      if (key.length > 128) throw new Error('at most 128 keys per get');
      return new Map(key.filter((k) => this.data.has(k)).map((k) => [k, structuredClone(this.data.get(k))]));
    }
    return structuredClone(this.data.get(key));
  }
  async put(key, value) {
    this.puts++;
    const entries = typeof key === 'string' ? { [key]: value } : key;
    if (Object.keys(entries).length > 128) throw new Error('at most 128 keys per put');
    for (const [k, v] of Object.entries(entries)) {
      this.#check(k, v);
      this.data.set(k, structuredClone(v));
    }
  }
  async delete(keys) {
    for (const k of [].concat(keys)) this.data.delete(k);
  }
}

/** A Durable Object namespace with one shared storage per id. */
function fakeEnv() {
  const storages = new Map();
  const live = new Map();
  const env = { ADMIN_SECRET: SECRET };
  env.BOTSPACE = {
    idFromName: (name) => `id:${name}`,
    get: (id) => ({
      fetch: async (request) => {
        if (!storages.has(id)) storages.set(id, new FakeStorage());
        let entry = live.get(id);
        if (!entry) {
          let ready = Promise.resolve();
          const state = { storage: storages.get(id), blockConcurrencyWhile: (fn) => (ready = fn()) };
          entry = { obj: new BotspaceDurableObject(state, env), ready: () => ready };
          live.set(id, entry);
        }
        await entry.ready();
        return entry.obj.fetch(request);
      },
    }),
  };
  return {
    env,
    storage: () => storages.get('id:botspace'),
    restart: () => live.clear(),
  };
}

const post = (path, body, auth) =>
  new Request(BASE + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function call(env, path, body, auth = `Admin ${SECRET}`) {
  const res = await worker.fetch(post(path, body, auth), env);
  assert.ok(res instanceof Response);
  return { status: res.status, body: await res.json(), headers: res.headers };
}

async function ok(env, path, body, auth) {
  const r = await call(env, path, body, auth);
  assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
  return r.body.result;
}

test('the worker serves the bot API and its state survives restarts', async () => {
  const rt = fakeEnv();
  const { env } = rt;
  const user = await ok(env, '/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = await ok(env, '/admin/createBot', { display_name: 'Edge', handle: 'edge_bot' });
  const chat = await ok(env, '/admin/startBot', { user_id: user.id, bot_id: bot.id });
  const me = await ok(env, '/bot/getMe', undefined, `Bot ${token}`);
  assert.equal(me.id, bot.id);
  const m1 = await ok(env, '/bot/sendMessage', { chat_id: chat.id, text: 'from the edge' }, `Bot ${token}`);
  assert.equal(m1.message_id, '1');
  await ok(env, '/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: 'hi edge' });

  rt.restart(); // the isolate is gone; a new object restores from storage
  assert.deepEqual(await ok(env, '/bot/getMe', undefined, `Bot ${token}`), me);
  const hist = await ok(env, '/admin/getChatHistory', { chat_id: chat.id });
  assert.deepEqual(hist.map((m) => m.text), ['from the edge', 'hi edge']);
  const m3 = await ok(env, '/bot/sendMessage', { chat_id: chat.id, text: 'after restart' }, `Bot ${token}`);
  assert.equal(m3.message_id, '3');

  const { token: fresh } = await ok(env, '/admin/rotateBotToken', { bot_id: bot.id });
  rt.restart();
  assert.equal((await call(env, '/bot/getMe', undefined, `Bot ${token}`)).body.error, 'invalid_token');
  assert.equal((await ok(env, '/bot/getMe', undefined, `Bot ${fresh}`)).id, bot.id);
  const updates = await ok(env, '/admin/getUpdates', {});
  assert.ok(updates.length >= 4);
});

test('only successful writes save; reads and refusals do not', async () => {
  const rt = fakeEnv();
  const { env } = rt;
  await ok(env, '/admin/createUser', { display_name: 'Ann' });
  const puts = rt.storage().puts;
  assert.ok(puts >= 2, 'a write saved chunks and meta');
  await ok(env, '/admin/getUpdates', {});
  assert.equal((await call(env, '/admin/createUser', {})).status, 400);
  assert.equal((await call(env, '/admin/createUser', { display_name: 'x' }, 'Admin wrong-secret-0000000')).status, 401);
  const res = await worker.fetch(new Request(`${BASE}/bot/getMe`), env);
  assert.equal(res.status, 405);
  assert.equal(rt.storage().puts, puts);
});

test('contract errors come back as JSON Responses through the worker', async () => {
  const { env } = fakeEnv();
  let r = await call(env, '/bot/getMe', undefined, undefined);
  assert.equal(r.status, 401);
  assert.equal(r.body.error, 'missing_authorization');
  r = await call(env, '/bot/getMe', undefined, 'Bot bot_nope');
  assert.equal(r.body.error, 'invalid_token');
  const big = await worker.fetch(new Request(`${BASE}/admin/createUser`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Admin ${SECRET}` }, body: JSON.stringify({ display_name: 'x'.repeat(70000) }) }), env);
  assert.equal(big.status, 413);
  const gw = await worker.fetch(new Request(`${BASE}/bot/gateway`, { headers: { authorization: 'Bot bot_nope' } }), env);
  assert.equal(gw.status, 401);
  const noBinding = await worker.fetch(new Request(`${BASE}/bot/getMe`, { method: 'POST' }), {});
  assert.equal(noBinding.status, 500);
});

test('a state larger than one storage value is chunked and restored whole', async () => {
  const rt = fakeEnv();
  const { env } = rt;
  const user = await ok(env, '/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = await ok(env, '/admin/createBot', { display_name: 'Big', handle: 'big_bot', quota_tier: 'official', official: true });
  const chat = await ok(env, '/admin/startBot', { user_id: user.id, bot_id: bot.id });
  for (let i = 0; i < 120; i++) {
    await ok(env, '/bot/sendMessage', { chat_id: chat.id, text: `${i} ${'y'.repeat(4000)}` }, `Bot ${token}`);
  }
  const meta = await rt.storage().get('botspace/meta');
  assert.ok(meta.chunks > 2, `${meta.chunks} chunks for ${meta.length} bytes`);
  rt.restart();
  let all = [];
  for (let after = 0; ; ) {
    const page = await ok(env, '/admin/getChatHistory', { chat_id: chat.id, after_message_id: String(after), limit: 100 });
    if (!page.length) break;
    all = all.concat(page);
    after = Number(page.at(-1).message_id);
  }
  assert.equal(all.length, 120);
  assert.ok(all.every((m, i) => m.text.startsWith(`${i} `)));
});

test('saveImage replaces stale chunks and loadImage detects gaps', async () => {
  const storage = new FakeStorage();
  const big = new Uint8Array(200 * 1024).map((_, i) => i % 251);
  let chunks = await saveImage(storage, big);
  assert.equal(chunks, 4);
  assert.deepEqual(await loadImage(storage), big);
  const small = new Uint8Array(10).fill(7);
  chunks = await saveImage(storage, small, chunks);
  assert.equal(chunks, 1);
  assert.deepEqual(await loadImage(storage), small);
  assert.equal([...storage.data.keys()].filter((k) => k.includes('chunk')).length, 1);
  assert.equal(await loadImage(new FakeStorage()), null);
  await saveImage(storage, big, 1);
  await storage.delete('botspace/chunk/2');
  await assert.rejects(loadImage(storage), /incomplete/);
});
