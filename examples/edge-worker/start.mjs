// `npm start`: runs workerd on the committed workerd.capnp and says when it
// serves, as the example servers do: `botspace listening on
// http://127.0.0.1:PORT`, then `botspace ready`, once the worker (and its
// Durable Object) has answered a request. workerd itself prints nothing
// when it listens. SIGTERM and SIGINT go to workerd; this process exits
// with workerd's status.
//
//   PORT (default 8787), STATE_DIR (default .state/), ADMIN_SECRET (required
//   by the worker), BOTSPACE_CONFIG_JSON (optional JSON)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const port = process.env.PORT || '8787';
const stateDir = process.env.STATE_DIR || '.state';
mkdirSync(stateDir, { recursive: true });

// The platform package's binary itself, so a signal reaches workerd and not
// the npm launcher in front of it.
const bin = [
  join(HERE, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd'),
  join(HERE, 'node_modules/@cloudflare/workerd-linux-arm64/bin/workerd'),
  join(HERE, 'node_modules/.bin/workerd'),
].find((p) => existsSync(p));
if (!bin) {
  console.error('workerd is not installed: run `npm install` in examples/edge-worker');
  process.exit(1);
}

const workerd = spawn(bin, ['serve', 'workerd.capnp', '--socket-addr', `http=127.0.0.1:${port}`, '--directory-path', `state=${stateDir}`], {
  cwd: HERE,
  stdio: ['ignore', 'inherit', 'inherit'],
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => workerd.kill(sig));
workerd.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));

// Ready when the worker answers: an unauthenticated getMe is its 401.
const base = `http://127.0.0.1:${port}`;
for (let i = 0; workerd.exitCode === null; i++) {
  try {
    await fetch(base + '/bot/getMe', { method: 'POST' });
    console.log(`botspace listening on ${base}`);
    console.log('botspace ready');
    break;
  } catch {
    if (i === 600) {
      console.error(`workerd did not answer on ${base} within 30 s`);
      workerd.kill('SIGTERM');
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
