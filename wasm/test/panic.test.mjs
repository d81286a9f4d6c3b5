// A Rust panic surfaces as a typed PanicError carrying its message, never
// as an opaque trap; afterwards the module refuses further calls clearly.
// (Own file: node --test runs each file in its own process.)
//
// `debugPanic` is not in the npm package: this test loads the build with
// the `test-panic` cargo feature (scripts/build-wasm.sh --test-panic, which
// scripts/test-wasm.sh runs), the same package plus that one export.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, SECRET } from './helpers.mjs';

const dir = resolve(process.env.BOTSPACE_TEST_PANIC_PKG ?? resolve(ROOT, 'target/wasm-pkg-test-panic'));
const bs = await import(pathToFileURL(resolve(dir, 'node.js')).href);
const glue = await import(pathToFileURL(resolve(dir, 'botspace.js')).href);

test('a panic is a PanicError with the panic message; the module is then unusable', () => {
  const svc = new bs.Service({ admin_secret: SECRET, clock: 'manual' });
  assert.equal(bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', '/bot/getMe'))).status, 401);
  // Straight into the module: the error is the one Rust's panic hook built.
  assert.throws(() => glue.debugPanic('deliberate test panic'), (e) => {
    assert.ok(e instanceof bs.PanicError, `${e?.constructor?.name}: ${e}`);
    assert.ok(e instanceof bs.BotspaceError);
    assert.equal(e.name, 'PanicError');
    assert.equal(e.code, 'panic');
    assert.match(e.message, /botspace panicked/);
    assert.match(e.message, /deliberate test panic/);
    assert.match(e.message, /src[\\/]imp\.rs/, 'the location is part of the message');
    return true;
  });
  for (const call of [() => svc.handleRequest('x'), () => new bs.Service({ admin_secret: 'x'.repeat(20) }), () => svc.exportDatabase(), () => bs.version()]) {
    assert.throws(call, (e) => {
      assert.ok(e instanceof bs.PanicError);
      assert.match(e.message, /unusable after an earlier panic: botspace panicked.*deliberate test panic/s);
      return true;
    });
  }
  // Freeing is still safe (a no-op on a poisoned module).
  svc.free();
});
