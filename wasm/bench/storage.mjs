// Persistence benchmark: what one sendMessage costs in storage and time at
// 1, 10 and 100 MB databases, page storage (this package) against the old
// export-per-write (the whole image saved after every write), both measured
// in this same run:
//   - Node.js: filePageStorage (each case in a fresh process, so the module
//     memory is that case's alone) vs. exportDatabase() + writeFileSync +
//     fsync per write;
//   - workerd (examples/edge-worker, bench.capnp): the example's Durable
//     Object (durableObjectPageStorage) vs. bench-export-worker.js (64 KiB
//     chunks put after every write), each restarted after the import.
//
//   node wasm/bench/storage.mjs [sizesMB=1,10,100] [writes=30]
//
// Prints a markdown table (docs/wasm.md, "Persistence: measured").
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, openSync, fsyncSync, closeSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const ROOT = join(HERE, '../..');
const EDGE = join(ROOT, 'examples/edge-worker');
const SECRET = 'bench-admin-secret-0001';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// ------------------------------------------------ Node.js child measurement
if (process.argv[2] === '--child') {
  const [, , , mode, path, writes, token, chatId] = process.argv;
  const bs = await import(join(ROOT, 'wasm/pkg/node.js'));
  const cfg = { admin_secret: SECRET, limits: { free: {}, standard: {}, official: {} } };
  let svc;
  let st;
  let fd;
  if (mode === 'pages') {
    st = bs.filePageStorage(path);
    svc = new bs.Service(cfg, { storage: st });
  } else {
    const { readFileSync } = await import('node:fs');
    svc = new bs.Service(cfg);
    svc.importDatabase(readFileSync(path));
  }
  const req = (i) => bs.encodeRequest('POST', '/bot/sendMessage', { Authorization: `Bot ${token}` }, { chat_id: chatId, text: `bench ${i}` });
  const times = [];
  let bytes = 0;
  let calls = 0;
  const before = svc.storageStats();
  for (let i = 0; i < Number(writes); i++) {
    const t = performance.now();
    const r = bs.decodeResponse(svc.handleRequest(req(i)));
    if (r.status !== 200) throw new Error(r.text());
    if (mode === 'export') {
      const image = svc.exportDatabase();
      fd = openSync(`${path}.out`, 'w');
      writeSync(fd, image);
      fsyncSync(fd);
      closeSync(fd);
      bytes += image.length;
      calls += 1;
    }
    times.push(performance.now() - t);
  }
  if (mode === 'pages') {
    const after = svc.storageStats();
    bytes = after.bytes - before.bytes;
    calls = after.commits - before.commits + (after.reads - before.reads);
  }
  console.log(JSON.stringify({ median: median(times), bytes: bytes / Number(writes), calls: calls / Number(writes), memory: svc.memoryBytes() }));
  process.exit(0);
}

// ---------------------------------------------------------------- driver
const sizes = (process.argv[2] ?? '1,10,100').split(',').map(Number);
const writes = Number(process.argv[3] ?? 30);
const { bigImage } = await import(join(ROOT, 'wasm/test/helpers.mjs'));
const bs = await import(join(ROOT, 'wasm/pkg/node.js'));
const BIN = [join(EDGE, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd'), join(EDGE, 'node_modules/.bin/workerd')].find(existsSync);

function child(mode, path, token, chatId) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, path, String(writes), token, chatId], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

async function workerd(dir) {
  mkdirSync(dir, { recursive: true });
  const proc = spawn(BIN, ['serve', 'bench.capnp', '--directory-path', `state=${dir}`], { cwd: EDGE, env: { ...process.env, ADMIN_SECRET: SECRET }, stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; i < 400; i++) {
    try {
      await fetch('http://127.0.0.1:8788/bot/getMe', { method: 'POST' });
      await fetch('http://127.0.0.1:8789/bot/getMe', { method: 'POST' });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    stop: () =>
      new Promise((r) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return r();
        proc.on('exit', r);
        proc.kill('SIGTERM');
      }),
  };
}

async function edge(port, image, token, chatId, dir) {
  const admin = { authorization: `Admin ${SECRET}` };
  const stats = async () =>
    (await (await fetch(`http://127.0.0.1:${port}/admin/getStorageStats`, { method: 'POST', headers: admin })).json()).result.host;
  let w = await workerd(dir);
  try {
    return await measure();
  } finally {
    await w.stop();
  }
  async function measure() {
  const imp = await fetch(`http://127.0.0.1:${port}/admin/importDatabase`, {
    method: 'POST',
    headers: { ...admin, 'content-type': 'application/vnd.sqlite3' },
    body: image,
  });
  if (imp.status !== 200) throw new Error(await imp.text());
  await w.stop();
  w = await workerd(dir);
  const times = [];
  const s0 = await stats();
  for (let i = 0; i < writes; i++) {
    const t = performance.now();
    const r = await fetch(`http://127.0.0.1:${port}/bot/sendMessage`, {
      method: 'POST',
      headers: { authorization: `Bot ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: chatId, text: `bench ${i}` }),
    });
    if (r.status !== 200) throw new Error(await r.text());
    await r.arrayBuffer();
    times.push(performance.now() - t);
  }
  const s1 = await stats();
  return {
    median: median(times),
    bytes: (s1.bytes - s0.bytes) / writes,
    calls: (s1.commits - s0.commits + (s1.reads - s0.reads)) / writes,
    memory: s1.memoryBytes,
  };
  }
}

const rows = [];
for (const mb of sizes) {
  const { image, token, chatId } = bigImage(mb * 1e6);
  const dir = mkdtempSync(join(tmpdir(), 'botspace-bench-'));
  try {
    // Node: the page file, filled once by an import.
    const pagesPath = join(dir, 'db.pages');
    const st = bs.filePageStorage(pagesPath);
    const svc = new bs.Service({ admin_secret: SECRET }, { storage: st });
    svc.importDatabase(image);
    svc.free();
    st.close();
    writeFileSync(join(dir, 'db.image'), image);
    const nodePages = child('pages', pagesPath, token, chatId);
    const nodeExport = child('export', join(dir, 'db.image'), token, chatId);
    const edgePages = await edge(8788, image, token, chatId, join(dir, 'edge-pages'));
    const edgeExport = await edge(8789, image, token, chatId, join(dir, 'edge-export'));
    rows.push({ mb: (image.length / 1e6).toFixed(1), nodePages, nodeExport, edgePages, edgeExport });
    console.error(`# ${mb} MB done`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const kb = (b) => (b / 1024).toFixed(1);
const mib = (b) => (b / 1048576).toFixed(1);
console.log(`sendMessage, ${writes} writes per case, median latency\n`);
console.log('| host | database MB | persistence | KiB written / write | storage calls / write | median ms | vs. export-per-write | wasm memory MiB |');
console.log('|---|---:|---|---:|---:|---:|---:|---:|');
for (const r of rows) {
  for (const [host, pages, exp] of [['Node.js', r.nodePages, r.nodeExport], ['workerd', r.edgePages, r.edgeExport]]) {
    console.log(`| ${host} | ${r.mb} | page storage | ${kb(pages.bytes)} | ${pages.calls.toFixed(1)} | ${pages.median.toFixed(2)} | ${(pages.median / exp.median).toFixed(3)}× | ${mib(pages.memory)} |`);
    console.log(`| ${host} | ${r.mb} | export-per-write | ${kb(exp.bytes)} | ${exp.calls.toFixed(1)} | ${exp.median.toFixed(2)} | 1× | ${mib(exp.memory)} |`);
  }
}
