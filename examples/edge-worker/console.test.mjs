// The admin console through the edge worker on REAL workerd (the committed
// workerd.capnp, SQLite-backed Durable Object storage on local disk), over
// real fetch and a real WebSocket client (`ws`): the page is served by the
// library behind worker.fetch (the worker has no code for it), a token
// rotation works as on the native servers (old token 401, its open gateway
// session closed with 4004, new token 200), and the audit log is in the
// Durable Object's storage: it survives workerd being killed and started
// again on the same folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { HERE, SECRET, call, gateway, ok, startWorkerd, stateDir } from './workerd-helpers.mjs';

/** The status and body of `call`'s answer (its headers are other tests' concern). */
const statusAndBody = ({ status, body }) => ({ status, body });

// The files the library compiles in: what the worker must serve, byte for byte.
const CONSOLE_DIR = join(HERE, '../../src/console');
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const INVALID_TOKEN = {
  ok: false,
  error_code: 401,
  error: 'invalid_token',
  description: 'the credential is unknown, rotated away or of the wrong kind',
};

/** A gateway upgrade the worker must refuse: its HTTP status and JSON body. */
function refusedGateway(base, token) {
  const ws = new WebSocket(base.replace('http', 'ws') + '/bot/gateway', { headers: { authorization: `Bot ${token}` } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => reject(new Error('the gateway accepted the token')));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        resolve({ status: res.statusCode, body: JSON.parse(text) });
        ws.terminate();
      });
    });
  });
}

test('the console page, a token rotation that closes the gateway with 4004, and the audit log across a restart, on workerd', async () => {
  const dir = stateDir();
  let w = await startWorkerd(dir);
  try {
    // The page and its script, with no secret, from the library's own files.
    const page = await fetch(w.base + '/admin/console');
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(page.headers.get('content-security-policy'), CSP);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.equal(await page.text(), readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8'));
    const script = await fetch(w.base + '/admin/console/app.js');
    assert.equal(script.status, 200);
    assert.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(script.headers.get('content-security-policy'), CSP);
    assert.equal(await script.text(), readFileSync(join(CONSOLE_DIR, 'app.js'), 'utf8'));

    const t0 = Date.now();
    const { bot, token } = await ok(w.base, '/admin/createBot', { display_name: 'Edge', handle: 'edge_bot' });
    assert.equal(bot.handle, 'edge_bot');
    assert.match(token, /^\S{20,}$/);
    const me = await ok(w.base, '/bot/getMe', undefined, `Bot ${token}`);
    assert.equal(me.id, bot.id);
    assert.equal(me.handle, 'edge_bot');

    const gw = gateway(w.base, token);
    await gw.opened;
    assert.equal((await gw.next((f) => f.op === 'hello')).bot.id, bot.id);

    const rotated = await ok(w.base, '/admin/rotateBotToken', { bot_id: bot.id });
    assert.deepEqual(Object.keys(rotated), ['token']);
    const fresh = rotated.token;
    assert.notEqual(fresh, token);
    const t1 = Date.now();

    // The old token: refused at once, on REST and on a new gateway upgrade.
    assert.deepEqual(statusAndBody(await call(w.base, '/bot/getMe', undefined, `Bot ${token}`)), { status: 401, body: INVALID_TOKEN });
    assert.deepEqual(await refusedGateway(w.base, token), { status: 401, body: INVALID_TOKEN });
    // Its open session is closed with 4004 by the rotation's wake-up, well
    // before any heartbeat would notice.
    let timer;
    const closed = await Promise.race([gw.closed, new Promise((r) => (timer = setTimeout(() => r('timeout'), 5000)))]);
    clearTimeout(timer);
    assert.deepEqual(closed, { code: 4004, reason: 'authentication_failed' });
    // The new token works.
    assert.deepEqual(statusAndBody(await call(w.base, '/bot/getMe', undefined, `Bot ${fresh}`)), { status: 200, body: { ok: true, result: me } });

    // The audit log: both changes, newest first, with no peer (fetch names
    // none) and no token or secret anywhere.
    const log = await ok(w.base, '/admin/getAuditLog', {});
    const [rot, create] = log.entries;
    for (const e of log.entries) {
      assert.ok(e.at_ms >= t0 - 1000 && e.at_ms <= t1 + 1000, `at_ms ${e.at_ms} outside [${t0}, ${t1}]`);
    }
    assert.ok(rot.at_ms >= create.at_ms);
    const entry = (id, at_ms, method, detail) => ({
      id,
      date: Math.floor(at_ms / 1000),
      at_ms,
      method,
      target: bot.id,
      actor: 'admin',
      peer: null,
      detail,
    });
    assert.deepEqual(log, {
      entries: [
        entry(2, rot.at_ms, 'rotateBotToken', { bot_id: bot.id }),
        entry(1, create.at_ms, 'createBot', { display_name: 'Edge', handle: 'edge_bot' }),
      ],
      next_before: null,
    });
    const text = JSON.stringify(log);
    for (const secret of [token, fresh, SECRET]) assert.ok(!text.includes(secret));

    // Killed, not stopped: what answered 200 is on disk.
    assert.deepEqual(await w.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    w = await startWorkerd(dir);
    assert.deepEqual(await ok(w.base, '/admin/getAuditLog', {}), log);
    assert.deepEqual(statusAndBody(await call(w.base, '/bot/getMe', undefined, `Bot ${token}`)), { status: 401, body: INVALID_TOKEN });
    assert.deepEqual(await ok(w.base, '/bot/getMe', undefined, `Bot ${fresh}`), me);
    const listed = await ok(w.base, '/admin/listBots', { query: 'edge' });
    assert.deepEqual(listed.bots.map((b) => [b.id, b.live.gateway_sessions]), [[bot.id, 0]]);
  } finally {
    await w.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
