// A Rust panic surfaces as a typed PanicError carrying its message, never
// as an opaque trap; afterwards the module refuses further calls clearly.
// (Own file: node --test runs each file in its own process.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, setup } from './helpers.mjs';

test('a panic is a PanicError with the panic message; the module is then unusable', () => {
  const { svc } = setup();
  assert.throws(() => bs.debugPanic('deliberate test panic'), (e) => {
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
