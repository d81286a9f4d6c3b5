// Page storages (wasm/js/storage.js and the module's botspace-pages VFS):
// incremental commits, atomicity, crash safety of the Node file storage,
// and the order of effects with an asynchronous storage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bs, SECRET, ADMIN, UNLIMITED, bigImage, FakeSocket, upgradeRequest } from './helpers.mjs';

function open(storage, extra = {}) {
  const svc = new bs.Service({ admin_secret: SECRET, clock: 'manual', ...UNLIMITED, ...extra }, { storage });
  const call = (path, body, headers = ADMIN) => bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  const ok = (path, body, headers) => {
    const r = call(path, body, headers);
    assert.equal(r.status, 200, `${path}: ${r.text()}`);
    return r.json().result;
  };
  return { svc, call, ok };
}

function world(t) {
  const user = t.ok('/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = t.ok('/admin/createBot', { display_name: 'Echo', handle: 'echo_bot' });
  const chat = t.ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
  return { user, bot, token, chat, auth: { Authorization: `Bot ${token}` } };
}

const tmp = () => mkdtempSync(join(tmpdir(), 'botspace-pages-'));

test('importDatabase takes an image over 8.4 MB (no thread::sleep on wasm32), in memory and into a page storage', () => {
  const { image, token } = bigImage(9 * 1024 * 1024);
  assert.ok(image.length > 8_462_336, `${image.length} bytes`);
  const mem = open(undefined);
  mem.svc.importDatabase(image);
  assert.equal(mem.ok('/bot/getMe', undefined, { Authorization: `Bot ${token}` }).handle, 'echo_bot');
  mem.svc.free();
  const storage = new bs.MemoryPageStorage();
  const paged = open(storage);
  paged.svc.importDatabase(image);
  assert.equal(paged.ok('/bot/getMe', undefined, { Authorization: `Bot ${token}` }).handle, 'echo_bot');
  // One import is one commit.
  assert.equal(paged.svc.storageStats().commits >= 1, true);
  assert.equal(storage.size(), image.length);
  paged.svc.free();
});

test('a commit hands the storage only the blocks it changed, and later reads come from the storage', () => {
  const { image, token, chatId } = bigImage(10 * 1024 * 1024);
  const storage = new bs.MemoryPageStorage();
  let t = open(storage);
  t.svc.importDatabase(image);
  t.svc.free();
  t = open(storage);
  const before = t.svc.storageStats();
  // Opening reads the header and schema, writes nothing.
  assert.equal(before.commits, 0);
  assert.ok(before.reads < 20, `${before.reads} blocks read at open`);
  t.ok('/bot/sendMessage', { chat_id: chatId, text: 'small' }, { Authorization: `Bot ${token}` });
  const after = t.svc.storageStats();
  assert.equal(after.commits, 1);
  assert.ok(after.reads > before.reads, 'blocks were read on demand');
  assert.ok(after.bytes <= 64 * 1024, `${after.bytes} bytes for one sendMessage on 10 MB`);
  assert.ok(after.reads < 200, `${after.reads} blocks read`);
  // A read-only request commits nothing.
  t.ok('/bot/getMe', undefined, { Authorization: `Bot ${token}` });
  assert.equal(t.svc.storageStats().commits, 1);
  t.svc.free();
});

test('a storage that fails a commit fails the request with 500 and leaves the state as it was', () => {
  const inner = new bs.MemoryPageStorage();
  let fail = false;
  const storage = {
    size: () => inner.size(),
    read: (i) => inner.read(i),
    commit: (pages, size) => {
      if (fail) throw new Error('disk full');
      inner.commit(pages, size);
    },
  };
  const t = open(storage);
  const w = world(t);
  t.ok('/bot/sendMessage', { chat_id: w.chat.id, text: 'kept' }, w.auth);
  fail = true;
  const r = t.call('/bot/sendMessage', { chat_id: w.chat.id, text: 'lost' }, w.auth);
  assert.equal(r.status, 500);
  fail = false;
  const hist = t.ok('/admin/getChatHistory', { chat_id: w.chat.id });
  assert.deepEqual(hist.map((m) => m.text), ['kept']);
  t.svc.free();
  // What the storage holds opens as the same state.
  const again = open(inner);
  assert.deepEqual(again.ok('/admin/getChatHistory', { chat_id: w.chat.id }).map((m) => m.text), ['kept']);
  again.svc.free();
});

test('with an asynchronous storage, no response and no gateway frame leaves before the commit is durable', async () => {
  const inner = new bs.MemoryPageStorage();
  const pending = [];
  const storage = {
    size: () => inner.size(),
    read: (i) => inner.read(i),
    commit: (pages, size) => {
      inner.commit(pages, size);
      return new Promise((resolve) => pending.push(resolve));
    },
  };
  const t = open(storage, { clock: 'system' });
  const w = world(t);
  for (const r of pending.splice(0)) r();
  await t.svc.durable();

  const ws = new FakeSocket();
  const session = t.svc.acceptGateway(upgradeRequest(w.token));
  t.svc.attachWebSocket(session, ws);
  await new Promise((r) => setTimeout(r, 10));
  const hello = ws.sent.length;
  assert.equal(JSON.parse(ws.sent[0]).op, 'hello');

  let answered = false;
  const res = t.svc
    .fetch(new Request('http://bots.local/admin/sendUserMessage', {
      method: 'POST',
      headers: { ...ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: w.user.id, chat_id: w.chat.id, text: 'hello bot' }),
    }))
    .then((r) => {
      answered = true;
      return r;
    });
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(pending.length > 0, true, 'the commit is waiting on the storage');
  assert.equal(answered, false, 'no response before the storage is durable');
  assert.equal(ws.sent.length, hello, 'no gateway frame before the storage is durable');
  for (const r of pending.splice(0)) r();
  const response = await res;
  assert.equal(response.status, 200);
  await new Promise((r) => setTimeout(r, 10));
  const frames = ws.sent.slice(hello).map((d) => JSON.parse(d));
  assert.ok(frames.some((f) => f.op === 'event' && f.type === 'message_created'), JSON.stringify(frames));
  session.free();
  t.svc.free();
});

test('filePageStorage: a restart loses nothing; a torn redo log is dropped, a complete one replayed', () => {
  const dir = tmp();
  try {
    const path = join(dir, 'bots.pages');
    let st = bs.filePageStorage(path);
    let t = open(st);
    const w = world(t);
    t.ok('/bot/sendMessage', { chat_id: w.chat.id, text: 'one' }, w.auth);
    t.svc.free();
    st.close();

    // A torn log (a crash while it was written): the commit never happened.
    writeFileSync(`${path}.log`, Buffer.from([1, 0, 0, 0, 9, 9]));
    st = bs.filePageStorage(path);
    assert.equal(existsSync(`${path}.log`), false);
    t = open(st);
    assert.deepEqual(t.ok('/admin/getChatHistory', { chat_id: w.chat.id }).map((m) => m.text), ['one']);
    t.ok('/bot/sendMessage', { chat_id: w.chat.id, text: 'two' }, w.auth);
    t.svc.free();
    st.close();
    st = bs.filePageStorage(path);
    t = open(st);
    assert.deepEqual(t.ok('/admin/getChatHistory', { chat_id: w.chat.id }).map((m) => m.text), ['one', 'two']);
    t.svc.free();
    st.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('filePageStorage: SIGKILL during a stream of writes keeps every acknowledged message and the database opens', async () => {
  const dir = tmp();
  try {
    const path = join(dir, 'bots.pages');
    const script = join(dir, 'writer.mjs');
    writeFileSync(
      script,
      `import * as bs from ${JSON.stringify(new URL('../pkg/node.js', import.meta.url).href)};
const secret = ${JSON.stringify(SECRET)};
const st = bs.filePageStorage(${JSON.stringify(path)});
const svc = new bs.Service({ admin_secret: secret, ...${JSON.stringify(UNLIMITED)} }, { storage: st });
const ok = (p, b, h = { Authorization: 'Admin ' + secret }) => {
  const r = bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', p, h, b)));
  if (r.status !== 200) throw new Error(p + ' ' + r.text());
  return r.json().result;
};
const user = ok('/admin/createUser', { display_name: 'Ann' });
const { bot, token } = ok('/admin/createBot', { display_name: 'Echo', handle: 'echo_bot' });
const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
process.stdout.write(JSON.stringify({ chat: chat.id }) + '\\n');
for (let i = 0; ; i++) {
  ok('/bot/sendMessage', { chat_id: chat.id, text: 'm' + i + ' ' + 'z'.repeat(i % 3000) }, { Authorization: 'Bot ' + token });
  process.stdout.write('m' + i + '\\n');
}
`,
    );
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => child.on('exit', r));
    while (out.split('\n').length < 300) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await exited;
    // Only whole lines: a line cut by the kill was never fully reported.
    const lines = out.slice(0, out.lastIndexOf('\n')).split('\n').filter(Boolean);
    const chat = JSON.parse(lines[0]).chat;
    const acked = lines.slice(1);
    const st = bs.filePageStorage(path);
    const t = open(st);
    const seen = new Set();
    for (let after = 0; ; ) {
      const page = t.ok('/admin/getChatHistory', { chat_id: chat, after_message_id: String(after), limit: 100 });
      if (!page.length) break;
      for (const m of page) seen.add(m.text.split(' ')[0]);
      after = Number(page.at(-1).message_id);
    }
    assert.deepEqual(acked.filter((m) => !seen.has(m)), []);
    assert.ok(acked.length >= 250, `${acked.length} acknowledged`);
    // Still a sound database: an export passes the import checks (integrity_check).
    const image = t.svc.exportDatabase();
    const check = open(undefined);
    check.svc.importDatabase(image);
    check.svc.free();
    t.svc.free();
    st.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a page storage and `database` together are refused; a storage without its methods too', () => {
  assert.throws(() => new bs.Service({ admin_secret: SECRET, database: 'x.db' }, { storage: new bs.MemoryPageStorage() }), bs.ConfigError);
  assert.throws(() => new bs.Service({ admin_secret: SECRET }, { storage: { size: () => 0 } }), bs.ConfigError);
});
