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
