// Helpers shared by the edge-worker tests on REAL workerd (npm `workerd`,
// pinned): start the committed workerd.capnp on a state folder, call the
// REST API with real fetch, and hold a gateway session with the `ws` client.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

export const HERE = fileURLToPath(new URL('.', import.meta.url));
export const SECRET = 'edge-admin-secret-000001';
// The platform package's binary itself, so a SIGKILL hits workerd and not a launcher.
export const BIN = [
  join(HERE, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd'),
  join(HERE, 'node_modules/@cloudflare/workerd-linux-arm64/bin/workerd'),
  join(HERE, 'node_modules/.bin/workerd'),
].find((p) => existsSync(p));

/**
 * A port the OS just handed out as free. Test files run in parallel
 * processes (node --test), each starting its own workerd: a port chosen by
 * the OS cannot collide with another file's, as ports derived from the pid
 * could.
 */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Resolves once `base` answers an HTTP request; throws `message()` when
 * `proc` exits first or after about 10 s.
 */
export async function untilServing(base, proc, message) {
  for (let i = 0; ; i++) {
    try {
      await fetch(base + '/bot/getMe', { method: 'POST' });
      return;
    } catch {
      if (proc.exitCode !== null || i > 200) throw new Error(message());
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Starts workerd on `stateDir`; resolves once it answers. `options.config`
 * is the configuration file (workerd.capnp by default;
 * workerd-local-receivers.capnp lets webhooks reach this machine),
 * `options.env` adds to the environment, `options.args` to workerd's
 * arguments.
 */
export async function startWorkerd(stateDir, port, options = {}) {
  port ??= await freePort();
  const args = ['serve', options.config ?? 'workerd.capnp', ...(options.args ?? [])];
  const proc = spawn(BIN, [...args, '--socket-addr', `http=127.0.0.1:${port}`, '--directory-path', `state=${stateDir}`], {
    cwd: HERE,
    env: { ...process.env, ADMIN_SECRET: SECRET, ...options.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const base = `http://127.0.0.1:${port}`;
  await untilServing(base, proc, () => `workerd did not start: ${stderr}`);
  const stop = async (signal = 'SIGTERM') => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    return exited;
  };
  return { proc, base, port, stop, stderr: () => stderr, exited };
}

/** A fresh folder for the Durable Object's storage. */
export function stateDir() {
  return mkdtempSync(join(tmpdir(), 'botspace-workerd-'));
}

/** POST `path` with a JSON body: the status and the parsed body. */
export async function call(base, path, body, auth = `Admin ${SECRET}`) {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** A call that must answer 200 `ok: true`: its result. */
export async function ok(base, path, body, auth) {
  const r = await call(base, path, body, auth);
  assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.ok, true);
  return r.body.result;
}

/** A `ws` client on the gateway, with its frames queued. */
export function gateway(base, token) {
  const ws = new WebSocket(base.replace('http', 'ws') + '/bot/gateway', { headers: { authorization: `Bot ${token}` } });
  const frames = [];
  const waiters = [];
  ws.on('message', (data) => {
    frames.push(JSON.parse(String(data)));
    for (const w of waiters.splice(0)) w();
  });
  const next = async (pred, ms = 5000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = frames.findIndex(pred);
      if (i >= 0) return frames.splice(i, 1)[0];
      if (Date.now() > deadline) throw new Error(`no matching gateway frame; got ${JSON.stringify(frames)}`);
      await new Promise((r) => {
        waiters.push(r);
        setTimeout(r, 100);
      });
    }
  };
  const opened = new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  // The close code and reason, whoever closes; registered at once so a
  // close that comes before the test looks is not missed.
  const closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
  return { ws, frames, next, opened, closed };
}
