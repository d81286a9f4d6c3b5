// sendMessage through WASM as the in-memory database grows: rounds of 64 000
// messages on one service, one per transaction and then in batches of 64,
// each round's rate printed. A rate that falls round after round points at a
// cost that grows with the database (it did: memory growth, see
// docs/benchmarks.md#wasm).
//
//   node wasm/bench/rounds.mjs            # 4 rounds of each
//   ROUNDS=8 node wasm/bench/rounds.mjs
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const PKG = process.env.BOTSPACE_PKG ? resolve(process.env.BOTSPACE_PKG) : fileURLToPath(new URL('../pkg/', import.meta.url));
const { Service, encodeRequest, decodeResponse } = await import(pathToFileURL(resolve(PKG, 'node.js')).href);
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const SECRET = 'bench-admin-secret-00001';
const ADMIN = { Authorization: `Admin ${SECRET}` };

for (const mode of ['1 per transaction', 'batches of 64']) {
  const svc = new Service({ admin_secret: SECRET });
  const ok = (path, body) => {
    const r = decodeResponse(svc.handleRequest(encodeRequest('POST', path, ADMIN, body)));
    if (r.status !== 200) throw new Error(`${path}: ${r.text()}`);
    return r.json().result;
  };
  const user = ok('/admin/createUser', { display_name: 'Bench user' });
  const { bot, token } = ok('/admin/createBot', { display_name: 'Bench', handle: 'bench_bot', quota_tier: 'official' });
  const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
  const send = encodeRequest('POST', '/bot/sendMessage', { Authorization: `Bot ${token}` }, { chat_id: chat.id, text: 'hello from the benchmark' });
  const batch = Array.from({ length: 64 }, () => ({ request: send, atOnce: true }));
  const check = (raw) => {
    if (raw[9] !== 50 || raw[10] !== 48 || raw[11] !== 48) throw new Error(new TextDecoder().decode(raw));
  };
  const rates = [];
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = process.hrtime.bigint();
    if (mode === 'batches of 64') for (let i = 0; i < 1000; i++) svc.handle(batch).forEach(check);
    else for (let i = 0; i < 64000; i++) check(svc.handleRequest(send));
    rates.push(Math.round(64000 / (Number(process.hrtime.bigint() - t0) / 1e9)));
  }
  console.log(`sendMessage, ${mode.padEnd(17)} req/s per round of 64 000: ${rates.join(' ')}`);
  svc.free();
}
