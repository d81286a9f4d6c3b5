// The admin console through the edge worker: the page is served by the
// library behind worker.fetch (so the worker needs no code for it), a token
// rotation works as on the native servers, and the audit log is in the
// saved state (it survives a restart of the Durable Object). The stand-in
// for the Durable Object runtime is the one of worker.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import worker, { BotspaceDurableObject } from './worker.js';

const SECRET = 'edge-console-secret-0001';
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

test('the console page, a rotation and the audit log through the edge worker', async () => {
  const rt = fakeEnv();
  const { env } = rt;
  const page = await worker.fetch(new Request(BASE + '/admin/console'), env);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(page.headers.get('content-security-policy'), /script-src 'self';.*frame-ancestors 'none'/);
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  assert.match(await page.text(), /<script src="console\/app.js" defer><\/script>/);
  const script = await worker.fetch(new Request(BASE + '/admin/console/app.js'), env);
  assert.equal(script.status, 200);
  assert.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');

  const { bot, token } = await ok(env, '/admin/createBot', { display_name: 'Edge', handle: 'edge_bot' });
  const { token: fresh } = await ok(env, '/admin/rotateBotToken', { bot_id: bot.id });
  const stale = await call(env, '/bot/getMe', undefined, `Bot ${token}`);
  assert.deepEqual([stale.status, stale.body.error], [401, 'invalid_token']);
  assert.equal((await call(env, '/bot/getMe', undefined, `Bot ${fresh}`)).status, 200);

  rt.restart();
  const log = await ok(env, '/admin/getAuditLog', {});
  assert.deepEqual(log.entries.map((e) => [e.method, e.target]), [['rotateBotToken', bot.id], ['createBot', bot.id]]);
  for (const secret of [token, fresh, SECRET]) assert.ok(!JSON.stringify(log).includes(secret));
  const listed = await ok(env, '/admin/listBots', { query: 'edge' });
  assert.deepEqual(listed.bots.map((b) => [b.id, b.live.gateway_sessions]), [[bot.id, 0]]);
});
