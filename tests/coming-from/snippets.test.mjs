// Runs the snippets of docs/coming-from.md and docs/gateway.md, as a reader
// pastes them, against the example server scripts/test-docs.sh started
// (BOTSPACE_URL, BOTSPACE_ADMIN): grammY's bot.api through client.fetch, a
// `ws` gateway client, a svix webhook receiver. Each test makes its own bot,
// user and chat, so what each snippet prints is known exactly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const BASE = process.env.BOTSPACE_URL;
const ADMIN = process.env.BOTSPACE_ADMIN;
assert.ok(BASE && ADMIN, 'BOTSPACE_URL and BOTSPACE_ADMIN are set by scripts/test-docs.sh');

/** The code block after `<!-- NAME: run by ... -->` in a doc, written beside
 * this file's node_modules so its imports resolve as in a reader's project. */
function snippet(doc, name) {
  const text = readFileSync(join(ROOT, 'docs', doc), 'utf8');
  const marker = text.indexOf(`<!-- ${name}: run by`);
  assert.ok(marker >= 0, `no ${name} snippet in docs/${doc}`);
  const start = text.indexOf('```js\n', marker) + 6;
  const end = text.indexOf('\n```\n', start);
  const out = join(HERE, 'gen', `${doc.replace('.md', '')}-${name}`);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, text.slice(start, end) + '\n');
  return out;
}

async function call(path, auth, body = {}) {
  const r = await fetch(BASE + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: auth },
    body: JSON.stringify(body),
  });
  const v = await r.json();
  assert.equal(r.status, 200, `${path}: ${JSON.stringify(v)}`);
  return v.result;
}
const admin = (method, body) => call(`/admin/${method}`, `Admin ${ADMIN}`, body);
const bot = (token, method, body) => call(`/bot/${method}`, `Bot ${token}`, body);

let n = 0;
/** A standard-tier bot, a user who started it, and their private chat. */
async function world() {
  n += 1;
  const { bot: b, token } = await admin('createBot', { display_name: 'Snippet', handle: `snippet_${n}_bot`, quota_tier: 'standard' });
  const user = await admin('createUser', { display_name: 'Ada' });
  const chat = await admin('startBot', { user_id: user.id, bot_id: b.id });
  return { bot: b, token, user, chat };
}

/** Runs `file` with node; resolves with its output once `until(stdout)` holds
 * (or it exits), and returns the child for the caller to end. */
function run(file, env, until = () => false) {
  const child = spawn(process.execPath, [file], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  const seen = new Promise((resolve) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      if (until(stdout)) resolve();
    });
  });
  return {
    child,
    exited,
    out: () => stdout,
    err: () => stderr,
    wait: (ms) => Promise.race([seen, exited, new Promise((_, no) => setTimeout(() => no(new Error(`timed out; stdout: ${stdout}; stderr: ${stderr}`)), ms))]),
  };
}

const lines = (s) => s.trim().split('\n');

test('docs/coming-from.md: grammY drives botspace through client.fetch (getMe, getUpdates, sendMessage, a GrammyError)', async () => {
  const w = await world();
  await admin('sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi' });
  const p = run(snippet('coming-from.md', 'grammy.mjs'), { BOTSPACE_URL: BASE, BOTSPACE_TOKEN: w.token });
  assert.equal(await p.exited, 0, p.err());
  assert.deepEqual(lines(p.out()), [
    `I am @${w.bot.handle}`,
    `answered in ${w.chat.id} with message 2`,
    'refused: 404 no chat with this id is visible to the caller',
  ]);
  const history = await admin('getChatHistory', { chat_id: w.chat.id });
  assert.deepEqual(history.map((m) => m.text), ['hi', 'you said: hi']);
});

for (const doc of ['coming-from.md', 'gateway.md']) {
  test(`docs/${doc}: the ws gateway client prints and acknowledges events, and ends on a 4004`, async () => {
    const w = await world();
    await admin('sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi' });
    const p = run(snippet(doc, 'gateway.mjs'), { BOTSPACE_URL: BASE, BOTSPACE_TOKEN: w.token }, (s) =>
      s.includes('event 2: message_created'));
    await p.wait(10_000);
    // The acks are durable: nothing is left unacknowledged.
    for (let i = 0; (await admin('getBot', { bot_id: w.bot.id })).live.unacked_events !== 0; i++) {
      assert.ok(i < 100, 'the acks did not reach the cursor');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Rotating the token closes the connection with 4004; the client ends.
    await admin('rotateBotToken', { bot_id: w.bot.id });
    assert.equal(await Promise.race([p.exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))]), 0, p.err());
    assert.deepEqual(lines(p.out()), ['event 1: bot_started', 'event 2: message_created', 'closed 4004 authentication_failed']);
  });
}

/** A port free on loopback now. */
function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

test('docs/coming-from.md: the svix receiver verifies real deliveries, acknowledges them, and refuses a forged one', async () => {
  const w = await world();
  const port = await freePort();
  const set = await bot(w.token, 'setWebhook', { url: `http://127.0.0.1:${port}/hook` });
  assert.match(set.secret, /^whsec_/);
  const p = run(snippet('coming-from.md', 'receiver.mjs'), { PORT: String(port), BOTSPACE_WEBHOOK_SECRET: set.secret }, (s) =>
    s.includes('update 2: message_created'));
  try {
    await admin('sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi' });
    await p.wait(15_000);
    for (let i = 0; (await bot(w.token, 'getWebhookInfo')).pending_update_count !== 0; i++) {
      assert.ok(i < 100, 'the 2xx did not move the cursor');
      await new Promise((r) => setTimeout(r, 50));
    }
    // A delivery signed with another secret is refused.
    const forged = await fetch(`http://127.0.0.1:${port}/hook`, {
      method: 'POST',
      headers: { 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' },
      body: '{"update_id":9}',
    });
    assert.equal(forged.status, 401);
    // The line it printed may still be in the pipe.
    for (let i = 0; !p.out().includes('refused: '); i++) {
      assert.ok(i < 100, `no refusal printed: ${p.out()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const out = lines(p.out());
    // Delivered at least once: a retry (the receiver was still starting)
    // may show an update twice, in order.
    assert.deepEqual([...new Set(out.filter((l) => l.startsWith('update ')))], ['update 1: bot_started', 'update 2: message_created']);
    assert.match(out.at(-1), /^refused: /);
  } finally {
    p.child.kill();
    await p.exited;
  }
});
