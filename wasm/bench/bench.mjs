// Requests per second through the WASM build (Node.js) next to the native
// build measured in the same run (`examples/req_rate.rs`, same shapes);
// target: WASM within 3× of native.
//
//   node wasm/bench/bench.mjs            # about 2 s per case and side
//   BENCH_SECONDS=5 node wasm/bench/bench.mjs
//
// Same shapes as the native bench: an official (unlimited) bot in a started
// private chat, a :memory: database, whole HTTP/1.1 requests in and out.
import { statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const PKG = process.env.BOTSPACE_PKG ? resolve(process.env.BOTSPACE_PKG) : fileURLToPath(new URL('../pkg/', import.meta.url));
const { Service, encodeRequest, decodeResponse, version } = await import(pathToFileURL(resolve(PKG, 'node.js')).href);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const SECRET = 'bench-admin-secret-00001';
const ADMIN = { Authorization: `Admin ${SECRET}` };

const svc = new Service({ admin_secret: SECRET });
const ok = (path, body, headers = ADMIN) => {
  const r = decodeResponse(svc.handleRequest(encodeRequest('POST', path, headers, body)));
  if (r.status !== 200) throw new Error(`${path}: ${r.text()}`);
  return r.json().result;
};
const user = ok('/admin/createUser', { display_name: 'Bench user' });
const { bot, token } = ok('/admin/createBot', { display_name: 'Bench', handle: 'bench_bot', quota_tier: 'official', official: true });
const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
const B = { Authorization: `Bot ${token}` };

function measure(name, fn, perCall = 1) {
  // Warm up for half a second: V8 first runs WebAssembly in its baseline
  // tier and optimises hot functions only after a while.
  const warmEnd = process.hrtime.bigint() + 500_000_000n;
  while (process.hrtime.bigint() < warmEnd) for (let i = 0; i < 100; i++) fn();
  let n = 0;
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(Math.round(SECONDS * 1e9));
  let now = t0;
  while (now < end) {
    for (let i = 0; i < 100; i++) fn();
    n += 100 * perCall;
    now = process.hrtime.bigint();
  }
  const secs = Number(now - t0) / 1e9;
  const rate = n / secs;
  console.log(`${name.padEnd(34)} ${Math.round(rate).toString().padStart(9)} req/s  (${n} requests in ${secs.toFixed(2)} s)`);
  return rate;
}

const getMe = encodeRequest('POST', '/bot/getMe', B);
const send = encodeRequest('POST', '/bot/sendMessage', B, { chat_id: chat.id, text: 'hello from the benchmark' });
const check = (raw) => {
  // 'HTTP/1.1 200' — byte 9..11
  if (raw[9] !== 50 || raw[10] !== 48 || raw[11] !== 48) throw new Error(new TextDecoder().decode(raw));
};
const batch = Array.from({ length: 64 }, () => ({ request: send, atOnce: true }));

const size = statSync(resolve(PKG, 'botspace_bg.wasm')).size;
console.log(`botspace ${version()} WASM on Node.js ${process.version}; botspace_bg.wasm ${size} bytes (${(size / 1048576).toFixed(2)} MiB; target < 1.5 MB)`);
// Native first, from the same checkout, so both figures come from this run.
const root = fileURLToPath(new URL('../../', import.meta.url));
console.log('native: cargo run --release --example req_rate');
const native = JSON.parse(
  execFileSync('cargo', ['run', '--quiet', '--release', '--example', 'req_rate', '--', String(SECONDS)], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
);
const wasm = {
  getMe: measure('wasm getMe', () => check(svc.handleRequest(getMe))),
  sendMessage: measure('wasm sendMessage (1 per transaction)', () => check(svc.handleRequest(send))),
  sendMessageBatch64: measure('wasm sendMessage (batch of 64)', () => svc.handle(batch).forEach(check), 64),
};
console.log('\n| case | WASM req/s | native req/s | native/WASM | target |');
console.log('|---|---:|---:|---:|---|');
let pass = true;
for (const k of Object.keys(wasm)) {
  const ratio = native[k] / wasm[k];
  const ok = ratio <= 3;
  pass &&= ok;
  console.log(`| ${k} | ${Math.round(wasm[k])} | ${Math.round(native[k])} | ${ratio.toFixed(2)}× | ≤ 3× ${ok ? 'PASS' : 'FAIL'} |`);
}
console.log(`| .wasm size | ${size} bytes | | | < 1.5 MB ${size < 1.5e6 ? 'PASS' : 'FAIL'} |`);
