// Shared helpers of the WASM tests. The package under test is wasm/pkg
// (built by scripts/build-wasm.sh); BOTSPACE_PKG may point elsewhere.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PKG_DIR = process.env.BOTSPACE_PKG ? resolve(process.env.BOTSPACE_PKG) : resolve(ROOT, 'wasm/pkg');
export const bs = await import(pathToFileURL(resolve(PKG_DIR, 'node.js')).href);

export const SECRET = 'test-admin-secret-000001';
export const ADMIN = { Authorization: `Admin ${SECRET}` };

/** A service plus small helpers for host and bot calls. */
export function setup(extra = {}) {
  const svc = new bs.Service({ admin_secret: SECRET, clock: 'manual', ...extra });
  const call = (path, body, headers = ADMIN) => bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  const ok = (path, body, headers) => {
    const r = call(path, body, headers);
    if (r.status !== 200) throw new Error(`${path} -> ${r.status} ${r.text()}`);
    return r.json().result;
  };
  const bot = (token) => ({ Authorization: `Bot ${token}` });
  return { svc, call, ok, bot };
}

/** A user, a bot and their started private chat. */
export function world(extra = {}, botFields = {}) {
  const t = setup(extra);
  const user = t.ok('/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = t.ok('/admin/createBot', { display_name: 'Echo', handle: 'echo_bot', ...botFields });
  const chat = t.ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
  return { ...t, user, botInfo: bot, token, chat };
}

/** The bytes of a gateway upgrade request. */
export function upgradeRequest(token, query = '') {
  const headers = {
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version': '13',
  };
  if (token !== null) headers.Authorization = `Bot ${token}`;
  return bs.encodeRequest('GET', `/bot/gateway${query}`, headers);
}

export const texts = (outs) => outs.filter((o) => o.type === 'text').map((o) => JSON.parse(o.data));

/** A server-side WebSocket stand-in (send/close/EventTarget). */
export class FakeSocket extends EventTarget {
  sent = [];
  closedWith = null;
  readyState = 1;
  send(data) {
    if (this.closedWith) throw new Error('closed');
    this.sent.push(data);
  }
  close(code, reason) {
    this.closedWith = [code, reason];
    this.readyState = 3;
  }
  receive(data) {
    const ev = new Event('message');
    ev.data = data;
    this.dispatchEvent(ev);
  }
}

/** One host round: time passes to `nowMs`, then everything to send now. */
export function round(session, nowMs) {
  session.handleTimeout(nowMs);
  const outs = [];
  for (let o = session.pollTransmit(); o !== null; o = session.pollTransmit()) outs.push(o);
  return outs;
}

/** Rate limits off, for tests that write many messages. */
export const UNLIMITED = { limits: { free: {}, standard: {}, official: {} } };

/**
 * A valid botspace database image of at least `bytes` bytes: one user, one
 * bot, one chat, and 4000-character messages written in group commits
 * (seconds for 100 MB, where HTTP requests one by one would take minutes).
 * Built on a page storage, so the image has the page size a live service
 * uses and imports without conversion. Returns `{ image, token, chatId,
 * messages }`.
 */
export function bigImage(bytes) {
  const storage = new bs.MemoryPageStorage();
  const svc = new bs.Service({ admin_secret: SECRET, ...UNLIMITED }, { storage });
  const ok = (path, body, headers = ADMIN) => {
    const r = bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
    if (r.status !== 200) throw new Error(`${path} -> ${r.status} ${r.text()}`);
    return r.json().result;
  };
  const user = ok('/admin/createUser', { display_name: 'Ann' });
  const { bot, token } = ok('/admin/createBot', { display_name: 'Echo', handle: 'echo_bot' });
  const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
  const req = bs.encodeRequest('POST', '/bot/sendMessage', { Authorization: `Bot ${token}` }, { chat_id: chat.id, text: 'x'.repeat(4000) });
  // Small batches for small targets, so a 1 MB image is about 1 MB.
  const batch = Array.from({ length: bytes < 20e6 ? 20 : 250 }, () => req);
  let messages = 0;
  while (storage.size() < bytes) {
    for (const r of svc.handle(batch.map((request) => ({ request, atOnce: true })))) {
      const d = bs.decodeResponse(r);
      if (d.status !== 200) throw new Error(`sendMessage -> ${d.status} ${d.text()}`);
    }
    messages += batch.length;
  }
  const image = svc.exportDatabase();
  svc.free();
  return { image, token, chatId: chat.id, messages };
}
