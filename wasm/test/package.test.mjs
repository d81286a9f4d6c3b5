// The npm package as a user gets it: `npm pack` wasm/pkg, install the
// tarball into an empty project, and use it through its `exports` from
// Node (node entry), the web entry (explicit init), the workerd entry (a
// .wasm import as a compiled module, as wrangler provides), and TypeScript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, copyFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PKG_DIR, ROOT } from './helpers.mjs';

let dir;
let app;
let packed;

const run = (args, opts = {}) => execFileSync(process.execPath, args, { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'botspace-pkg-'));
  const out = execFileSync('npm', ['pack', PKG_DIR, '--pack-destination', dir, '--json', '--loglevel=error'], { encoding: 'utf8' });
  packed = JSON.parse(out)[0];
  app = join(dir, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  execFileSync('npm', ['install', join(dir, packed.filename), '--offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app });
});

after(() => rmSync(dir, { recursive: true, force: true }));

test('the tarball holds the module, the JS layer, the types and the licences, nothing else', () => {
  const files = packed.files.map((f) => f.path).sort();
  assert.deepEqual(files, [
    'LICENSE-APACHE', 'LICENSE-MIT', 'README.md', 'botspace.d.ts', 'botspace.js', 'botspace_bg.wasm', 'core.js', 'errors.js', 'http.js',
    'index.d.ts', 'node.js', 'package.json', 'slab.js', 'storage.js', 'web.js', 'webhook-node.js', 'worker.js',
  ]);
  assert.equal(packed.name, 'botspace');
  const wasm = packed.files.find((f) => f.path === 'botspace_bg.wasm');
  // 1.49 MB before webhook delivery (schedule, HMAC-SHA256 signing, address rules) added 93 KB;
  // 1.64 MB before the fetch adapter's typed entry (the http crate's request and response types) added 63 KB;
  // 1.70 MB (1 783 076 bytes) before the core's exports for the JS faces (route kind, close words, body limit,
  // error statuses, the webhook schedule's pump) and the backup host methods added about 23 KB;
  // 1.81 MB (1 806 139 bytes) before commands and buttons (command lists, keyboards, presses and
  // their one outcome) and the webhook secret overlap added about 78 KB (1 884 312 bytes);
  // 1.90 MB (1 904 553 bytes) before SQLite features botspace never uses were omitted and the
  // Rust code went from opt-level 3 to 2 (same speed), which saved 58 KB (1 845 885 bytes);
  // 1.85 MB (1 847 466 bytes) before one JSON reader for stored JSON (no second parser for &str),
  // the idempotency hash over the already sorted body, body fields handed over by position, and
  // SQLite without API armor, test hooks, mmap and auto-vacuum saved 31 KB (1 816 337 bytes);
  // typed bodies read by one rule per field type instead of a serde visitor per body saved
  // 16 KB (1 800 645 bytes).
  assert.ok(wasm.size < 1.73 * 1024 * 1024, `botspace_bg.wasm is ${wasm.size} bytes`);
  const pkg = JSON.parse(readFileSync(join(PKG_DIR, 'package.json'), 'utf8'));
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.exports['.'].node, './node.js');
  assert.equal(pkg.exports['.'].workerd, './worker.js');
  assert.equal(pkg.exports['.'].browser, './web.js');
  assert.equal(pkg.exports['.'].default, './web.js');
  assert.equal(pkg.exports['.'].types, './index.d.ts');
});

test('the shipped module has no debugPanic (it exists only with the test-panic cargo feature)', () => {
  const wasm = new WebAssembly.Module(readFileSync(join(PKG_DIR, 'botspace_bg.wasm')));
  const names = WebAssembly.Module.exports(wasm).map((e) => e.name);
  assert.ok(names.includes('version'), names.join(' '));
  assert.deepEqual(names.filter((n) => /panic/i.test(n)), []);
  assert.doesNotMatch(readFileSync(join(PKG_DIR, 'botspace.js'), 'utf8'), /debugPanic/);
  assert.doesNotMatch(readFileSync(join(PKG_DIR, 'botspace.d.ts'), 'utf8'), /debugPanic/);
});

test("Node: import 'botspace' is ready to use", () => {
  writeFileSync(
    join(app, 'node.mjs'),
    `import { Service, encodeRequest, decodeResponse, version } from 'botspace';
     const svc = new Service({ admin_secret: 'pkg-test-secret-0000001' });
     const r = decodeResponse(svc.handleRequest(encodeRequest('POST', '/admin/createUser', { Authorization: 'Admin pkg-test-secret-0000001' }, { display_name: 'Ann' })));
     console.log(JSON.stringify({ resolved: import.meta.resolve('botspace'), status: r.status, version: version() }));`,
  );
  const out = JSON.parse(run(['node.mjs']));
  assert.match(out.resolved, /node_modules\/botspace\/node\.js$/);
  assert.equal(out.status, 200);
});

test('web entry: a Service before init() is a not_initialized error; init(bytes) and init(Module) work', () => {
  writeFileSync(
    join(app, 'web.mjs'),
    `import { readFileSync } from 'node:fs';
     import { fileURLToPath } from 'node:url';
     import { init, initSync, isReady, Service, BotspaceError } from 'botspace/web';
     const out = { readyBefore: isReady() };
     try { new Service({ admin_secret: 'pkg-test-secret-0000001' }); } catch (e) { out.before = [e instanceof BotspaceError, e.code, e.message]; }
     const bytes = readFileSync(fileURLToPath(import.meta.resolve('botspace/botspace_bg.wasm')));
     const mode = process.argv[2];
     if (mode === 'bytes') await init(bytes);
     else if (mode === 'module') await init(new WebAssembly.Module(bytes));
     else if (mode === 'response') await init(new Response(bytes, { headers: { 'content-type': 'application/wasm' } }));
     else initSync(bytes);
     await init(); // a second init is a no-op
     out.readyAfter = isReady();
     out.ok = new Service({ admin_secret: 'pkg-test-secret-0000001' }).nowMs() > 0;
     console.log(JSON.stringify(out));`,
  );
  for (const mode of ['bytes', 'module', 'response', 'sync']) {
    const out = JSON.parse(run(['web.mjs', mode]));
    assert.equal(out.readyBefore, false);
    assert.deepEqual(out.before.slice(0, 2), [true, 'not_initialized']);
    assert.match(out.before[2], /await init\(\)/);
    assert.equal(out.readyAfter, true);
    assert.equal(out.ok, true, mode);
  }
});

test('workerd entry: the .wasm file is imported as a compiled module', () => {
  // What wrangler/workerd do with `import m from './x.wasm'`: a WebAssembly.Module.
  writeFileSync(
    join(app, 'wasm-loader.mjs'),
    `export async function load(url, context, next) {
       if (url.endsWith('.wasm')) {
         return { format: 'module', shortCircuit: true,
           source: 'import { readFileSync } from "node:fs"; export default new WebAssembly.Module(readFileSync(new URL(' + JSON.stringify(url) + ')));' };
       }
       return next(url, context);
     }`,
  );
  writeFileSync(join(app, 'register.mjs'), `import { register } from 'node:module'; register('./wasm-loader.mjs', import.meta.url);`);
  writeFileSync(
    join(app, 'worker.mjs'),
    `import { Service } from 'botspace';
     const svc = new Service({ admin_secret: 'pkg-test-secret-0000001' });
     const worker = { fetch: (req) => svc.fetch(req) };
     const res = await worker.fetch(new Request('http://127.0.0.1:8080/bot/getMe', { method: 'POST' }));
     console.log(JSON.stringify({ resolved: import.meta.resolve('botspace'), status: res.status, body: await res.json() }));`,
  );
  const out = JSON.parse(run(['--import', './register.mjs', '--conditions=workerd', 'worker.mjs']));
  assert.match(out.resolved, /node_modules\/botspace\/worker\.js$/);
  assert.equal(out.status, 401);
  assert.equal(out.body.error, 'missing_authorization');
});

test('TypeScript: the declarations type-check a use of every export (tsc --strict)', () => {
  copyFileSync(join(ROOT, 'wasm/test/types/usage.ts'), join(app, 'usage.ts'));
  copyFileSync(join(ROOT, 'wasm/test/types/tsconfig.json'), join(app, 'tsconfig.json'));
  const tsc = join(ROOT, 'wasm/node_modules/typescript/bin/tsc');
  try {
    run([tsc, '-p', 'tsconfig.json']);
  } catch (e) {
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
  }
});
