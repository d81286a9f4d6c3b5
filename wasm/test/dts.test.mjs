// The shipped index.d.ts names exactly what the package exports: every
// exported value, and every public method and accessor of the exported
// classes, is declared, and nothing declared is missing from the module.
// (TypeScript checks usage.ts against the declarations; this checks the
// declarations against the code, so the two cannot drift apart.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { bs, PKG_DIR } from './helpers.mjs';

const dts = readFileSync(resolve(PKG_DIR, 'index.d.ts'), 'utf8');

/** `export class|function|const` names of the declaration file. */
function declaredValues() {
  return new Set([...dts.matchAll(/^export (?:declare )?(?:class|function|const) (\w+)/gm)].map((m) => m[1]));
}

/** The members declared in the body of `export class Name`. */
function declaredMembers(name) {
  const start = dts.search(new RegExp(`^export class ${name}\\b`, 'm'));
  const open = dts.indexOf('{', start);
  let depth = 0;
  let end = open;
  for (; end < dts.length; end++) {
    if (dts[end] === '{') depth++;
    else if (dts[end] === '}' && --depth === 0) break;
  }
  const body = dts.slice(open + 1, end);
  const names = new Set();
  for (const line of body.split('\n')) {
    // Top-level members only: `name(`, `readonly name:`, `get name()`, `static name(`.
    const m = /^ {2}(?:static )?(?:readonly )?(?:get )?(\w+)\??[(:<]/.exec(line);
    if (m && m[1] !== 'constructor' && m[1] !== 'private') names.add(m[1]);
  }
  return names;
}

/** Public own methods and accessors of a class prototype (and statics). */
function actualMembers(cls) {
  const names = new Set();
  for (const target of [cls.prototype, cls]) {
    for (const n of Object.getOwnPropertyNames(target)) {
      if (['constructor', 'prototype', 'length', 'name'].includes(n) || n.startsWith('_')) continue;
      names.add(n);
    }
  }
  return names;
}

test('index.d.ts declares every export of the package, and only those', () => {
  const exported = new Set(Object.keys(bs).filter((k) => k !== 'default'));
  assert.deepEqual([...declaredValues()].sort(), [...exported].sort());
});

for (const name of ['Service', 'GatewaySession']) {
  test(`index.d.ts declares exactly the public members of ${name}`, () => {
    assert.deepEqual([...declaredMembers(name)].sort(), [...actualMembers(bs[name])].sort());
  });
}

test('index.d.ts declares the fields a real GatewayRejectedError carries', () => {
  const svc = new bs.Service({ admin_secret: 'dts-admin-secret-0001', clock: 'manual' });
  let err;
  try {
    svc.acceptGateway('GET /bot/gateway HTTP/1.1\r\nAuthorization: Bot nope\r\n\r\n');
  } catch (e) {
    err = e;
  }
  svc.free();
  assert.ok(err instanceof bs.GatewayRejectedError);
  const own = new Set(Object.keys(err));
  for (const field of [...declaredMembers('GatewayRejectedError'), ...declaredMembers('BotspaceError')]) {
    if (typeof bs.GatewayRejectedError.prototype[field] === 'function') continue; // methods
    assert.ok(own.has(field), `declared field ${field} is missing on a real error`);
  }
});
