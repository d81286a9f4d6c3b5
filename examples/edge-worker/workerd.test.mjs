// The edge-worker example on REAL workerd (npm `workerd`, pinned), with the
// committed workerd.capnp and Durable Object storage on local disk: the
// bot REST API, the host API and the gateway through real fetch and a real
// WebSocket client (`ws`), restarts, SIGKILL during a stream of writes, a
// 100 MB database, and a client-initiated close.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { bigImage } from '../../wasm/test/helpers.mjs';
import { HERE, SECRET, call, freePort, gateway, ok, startWorkerd, stateDir } from './workerd-helpers.mjs';

// What the page storage was given and the module's memory: the host's
// figures of POST /admin/getStorageStats.
async function stats(base) {
  const res = await fetch(base + '/admin/getStorageStats', { method: 'POST', headers: { authorization: `Admin ${SECRET}` } });
  assert.equal(res.status, 200);
  return (await res.json()).result.host;
}

/** POST /admin/importDatabase of `image` with `auth` (and more headers). */
function importImage(base, image, auth = `Admin ${SECRET}`, headers = {}) {
  return fetch(base + '/admin/importDatabase', {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/vnd.sqlite3', ...headers },
    body: image,
  });
}

async function setupWorld(base) {
  const user = await ok(base, '/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = await ok(base, '/admin/createBot', { display_name: 'Edge', handle: 'edge_bot', quota_tier: 'official', official: true });
  const chat = await ok(base, '/admin/startBot', { user_id: user.id, bot_id: bot.id });
  return { user, bot, token, chat };
}

test('the host tools refuse with the library\'s envelopes, error code included', async () => {
  const dir = stateDir();
  const w = await startWorkerd(dir);
  try {
    let res = await fetch(w.base + '/admin/getStorageStats', { method: 'POST', headers: { authorization: 'Admin not-the-secret-0000' } });
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), {
      ok: false,
      error_code: 401,
      error: 'invalid_token',
      description: 'the credential is unknown, rotated away or of the wrong kind',
    });
    res = await fetch(w.base + '/_botspace/nothing', { headers: { authorization: `Admin ${SECRET}` } });
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), {
      ok: false,
      error_code: 404,
      error: 'method_not_found',
      description: 'no method at this path (method names are case-sensitive)',
    });
    res = await importImage(w.base, 'not an image');
    assert.equal(res.status, 400);
    const refused = await res.json();
    assert.equal(refused.error, 'invalid_request');
    assert.equal(refused.error_code, 400);
    // The export is the core's too: the image, with its media type.
    res = await fetch(w.base + '/admin/exportDatabase', { method: 'POST', headers: { authorization: `Admin ${SECRET}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/vnd.sqlite3');
    assert.equal(new TextDecoder().decode((await res.arrayBuffer()).slice(0, 15)), 'SQLite format 3');
    // The login throttle holds for them as for every host method, per
    // client as Cloudflare names it: ten wrong secrets are answered 401,
    // the eleventh 429; another client is still served.
    const client = { 'cf-connecting-ip': '203.0.113.7' };
    for (let i = 0; i < 10; i++) {
      res = await importImage(w.base, 'x', 'Admin not-the-secret-0000', client);
      assert.equal(res.status, 401, `attempt ${i + 1}`);
      await res.body?.cancel();
    }
    res = await fetch(w.base + '/admin/getStorageStats', { method: 'POST', headers: { authorization: `Admin ${SECRET}`, 'cf-connecting-ip': '198.51.100.9' } });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    res = await importImage(w.base, 'x', 'Admin not-the-secret-0000', client);
    assert.equal(res.status, 429);
    const limited = await res.json();
    assert.equal(limited.error, 'rate_limited');
    assert.equal(limited.parameters.scope, 'admin_auth');
  } finally {
    await w.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('workerd serves the bot REST API, the host API and the gateway; the state survives a restart', async () => {
  const dir = stateDir();
  let w = await startWorkerd(dir);
  try {
    const { user, bot, token, chat } = await setupWorld(w.base);
    const me = await ok(w.base, '/bot/getMe', undefined, `Bot ${token}`);
    assert.equal(me.id, bot.id);
    assert.equal((await call(w.base, '/bot/getMe', undefined, 'Bot bot_nope')).body.error, 'invalid_token');
    assert.equal((await call(w.base, '/admin/createUser', {}, 'Admin wrong-secret-000000')).status, 401);

    const gw = gateway(w.base, token);
    await gw.opened;
    const hello = await gw.next((f) => f.op === 'hello');
    assert.equal(hello.bot.id, bot.id);
    await ok(w.base, '/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: 'hi edge' });
    const ev = await gw.next((f) => f.op === 'event' && f.type === 'message_created');
    assert.equal(ev.data.message.text, 'hi edge');
    const sent = await call(w.base, '/bot/sendMessage', { chat_id: chat.id, text: 'from the edge' }, `Bot ${token}`);
    assert.equal(sent.body.result.message_id, '2');
    // An official bot has no limits: no X-RateLimit-* headers.
    assert.equal(sent.headers.get('x-ratelimit-limit'), null);
    // A free bot's counted send carries them through the worker.
    const free = await ok(w.base, '/admin/createBot', { display_name: 'Free', handle: 'free_bot' });
    const freeChat = await ok(w.base, '/admin/startBot', { user_id: user.id, bot_id: free.bot.id });
    const limited = await call(w.base, '/bot/sendMessage', { chat_id: freeChat.id, text: 'counted' }, `Bot ${free.token}`);
    assert.equal(limited.status, 200);
    assert.deepEqual(
      ['limit', 'remaining', 'reset-after', 'scope'].map((h) => limited.headers.get(`x-ratelimit-${h}`)),
      ['5', '4', '1', 'chat'],
    );

    // Only the changed blocks went to storage: one sendMessage is a few pages.
    const before = await stats(w.base);
    await ok(w.base, '/bot/sendMessage', { chat_id: chat.id, text: 'one more' }, `Bot ${token}`);
    const after = await stats(w.base);
    assert.equal(after.commits - before.commits, 1);
    assert.ok(after.bytes - before.bytes <= 64 * 1024, `${after.bytes - before.bytes} bytes for one sendMessage`);

    // A client-initiated close is answered (the close frame echoed).
    const closed = new Promise((resolve) => gw.ws.once('close', (code) => resolve(code)));
    gw.ws.close(4000, 'bye');
    const code = await Promise.race([closed, new Promise((r) => setTimeout(() => r('timeout'), 3000))]);
    assert.equal(code, 4000);

    assert.deepEqual(await w.stop('SIGTERM'), { code: 0, signal: null });
    w = await startWorkerd(dir);
    assert.deepEqual(await ok(w.base, '/bot/getMe', undefined, `Bot ${token}`), me);
    const hist = await ok(w.base, '/admin/getChatHistory', { chat_id: chat.id });
    assert.deepEqual(hist.map((x) => x.text), ['hi edge', 'from the edge', 'one more']);
  } finally {
    await w.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('BOTSPACE_CONFIG_JSON from the environment adds configuration (a 1 KiB body limit); unset, the default holds', async () => {
  const body = { text: 'x'.repeat(2000) };
  const refused = await startWorkerd(stateDir(), undefined, { env: { BOTSPACE_CONFIG_JSON: JSON.stringify({ max_body_bytes: 1024 }) } });
  try {
    const r = await call(refused.base, '/admin/createUser', body);
    assert.equal(r.status, 413, JSON.stringify(r.body));
    assert.equal(r.body.error, 'payload_too_large');
  } finally {
    await refused.stop();
  }
  const plain = await startWorkerd(stateDir());
  try {
    const r = await call(plain.base, '/admin/createUser', body);
    // Read and parsed: refused for what it lacks, not for its size.
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error, 'missing_field');
  } finally {
    await plain.stop();
  }
});

test('SIGKILL of workerd during a stream of sendMessage loses no acknowledged message', async () => {
  const dir = stateDir();
  let w = await startWorkerd(dir);
  try {
    const { token, chat } = await setupWorld(w.base);
    const acked = new Set();
    let stop = false;
    // Four concurrent writers until the kill.
    const writer = async (k) => {
      for (let i = 0; !stop; i++) {
        const text = `w${k}-${i}`;
        try {
          const r = await call(w.base, '/bot/sendMessage', { chat_id: chat.id, text }, `Bot ${token}`);
          if (r.status === 200) acked.add(text);
        } catch {
          return; // the connection died with workerd
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    await new Promise((r) => setTimeout(r, 1500));
    await w.stop('SIGKILL');
    stop = true;
    await Promise.all(writers);
    assert.ok(acked.size > 20, `only ${acked.size} messages were acknowledged before the kill`);

    w = await startWorkerd(dir);
    const seen = new Set();
    for (let after = 0; ; ) {
      const page = await ok(w.base, '/admin/getChatHistory', { chat_id: chat.id, after_message_id: String(after), limit: 100 });
      if (!page.length) break;
      for (const m of page) seen.add(m.text);
      after = Number(page.at(-1).message_id);
    }
    const lost = [...acked].filter((t) => !seen.has(t));
    assert.deepEqual(lost, []);
    // The database opens and takes writes.
    await ok(w.base, '/bot/sendMessage', { chat_id: chat.id, text: 'after the kill' }, `Bot ${token}`);
  } finally {
    await w.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a 100 MB database restarts on workerd and keeps serving, in bounded memory', async () => {
  const dir = stateDir();
  let t = Date.now();
  const { image, token, chatId, messages } = bigImage(100e6);
  console.log(`# image of ${image.length} bytes built in ${Date.now() - t} ms`);
  t = Date.now();
  let w = await startWorkerd(dir);
  try {
    const res = await importImage(w.base, image);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { ok: true, result: true });
    console.log(`# imported in ${Date.now() - t} ms`);
    t = Date.now();
    await w.stop('SIGTERM');

    w = await startWorkerd(dir);
    console.log(`# restarted in ${Date.now() - t} ms`);
    const stats0 = await stats(w.base);
    const me = await ok(w.base, '/bot/getMe', undefined, `Bot ${token}`);
    assert.equal(me.handle, 'echo_bot');
    const sent = await ok(w.base, '/bot/sendMessage', { chat_id: chatId, text: 'after 100 MB' }, `Bot ${token}`);
    assert.equal(sent.message_id, String(messages + 1));
    const st = await stats(w.base);
    assert.equal(st.commits - stats0.commits, 1);
    assert.ok(st.bytes - stats0.bytes <= 64 * 1024, `${st.bytes - stats0.bytes} bytes for one sendMessage`);
    assert.ok(st.memoryBytes < 64 * 1024 * 1024, `module memory ${st.memoryBytes} bytes`);
  } finally {
    await w.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm start prints its ready lines, serves on $PORT with $STATE_DIR, the README walk works as written, SIGTERM stops it', async () => {
  const dir = stateDir();
  const port = await freePort();
  // The README's secret: its walk is run below exactly as written.
  const readmeSecret = 'change-me-0123456789';
  const proc = spawn('npm', ['start', '--silent'], {
    cwd: HERE,
    env: { ...process.env, ADMIN_SECRET: readmeSecret, PORT: String(port), STATE_DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; !out.includes('botspace ready\n'); i++) {
      assert.ok(i < 600 && proc.exitCode === null, `npm start printed no ready line: ${JSON.stringify(out)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(out, `botspace listening on ${base}\nbotspace ready\n`);
    // Ready means serving: no retry needed.
    const stats = await ok(base, '/admin/getStats', {}, `Admin ${readmeSecret}`);
    assert.equal(stats.bots, 0);

    // README.md, "From a bot to a message": the sh block, run as it is.
    const readme = readFileSync(join(HERE, 'README.md'), 'utf8');
    const blocks = readme.split('## From a bot to a message')[1].split('```sh\n');
    const walk = blocks[1].split('```')[0];
    // Then the backup block (export, import back), in a directory of its own.
    const backup = blocks[2].split('```')[0];
    const run = spawnSync('sh', ['-eu', '-c', walk + backup], { cwd: dir, env: { ...process.env, PORT: String(port) }, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const [me, sent, restored] = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(restored, { ok: true, result: true });
    assert.equal(readFileSync(join(dir, 'backup.sqlite3')).subarray(0, 15).toString(), 'SQLite format 3');
    assert.equal(me.result.handle, 'echo_bot');
    assert.equal(sent.ok, true, JSON.stringify(sent));
    assert.deepEqual([sent.result.message_id, sent.result.chat.type, sent.result.text], ['1', 'private', 'Hello from the edge']);
    assert.equal(sent.result.from.id, me.result.id);

    proc.kill('SIGTERM');
    const end = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 5000))]);
    assert.notEqual(end, 'timeout');
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
