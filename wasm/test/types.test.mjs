// The shipped TypeScript declarations cannot drift from the exports: the
// names index.d.ts declares as values are exactly what each entry point
// (node.js, web.js, worker.js) exports, checked at run time for node.js and
// web.js and by the TypeScript checker for all three, and every exported
// class declares exactly the public members its instances have.
// (usage.ts, compiled in package.test.mjs, checks that the types are usable.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PKG_DIR, ROOT, bs } from './helpers.mjs';

const ts = createRequire(import.meta.url)(resolve(ROOT, 'wasm/node_modules/typescript'));
const ENTRIES = ['node.js', 'web.js', 'worker.js'];
const program = ts.createProgram([resolve(PKG_DIR, 'index.d.ts'), ...ENTRIES.map((e) => resolve(PKG_DIR, e))], {
  strict: true,
  noEmit: true,
  allowJs: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts', 'lib.esnext.disposable.d.ts'],
  types: [],
});
const checker = program.getTypeChecker();

const exportsOf = (file) => {
  const sf = program.getSourceFile(resolve(PKG_DIR, file));
  assert.ok(sf, file);
  return checker.getExportsOfModule(checker.getSymbolAtLocation(sf)).map((s) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s));
};
const declared = exportsOf('index.d.ts');
const valueNames = declared.filter((s) => s.flags & ts.SymbolFlags.Value).map((s) => s.name).sort();

// Public members a declared class promises on its instances.
const NATIVE = new Set(['name', 'message', 'stack', 'cause']); // Error's own
const memberName = (s) => (s.name.startsWith('__@dispose') ? 'Symbol.dispose' : s.name);
const declaredMembers = (name) => {
  const sym = declared.find((s) => s.name === name);
  return checker
    .getPropertiesOfType(checker.getDeclaredTypeOfSymbol(sym))
    .filter((p) => !(ts.getCombinedModifierFlags(p.valueDeclaration ?? p.declarations[0]) & ts.ModifierFlags.Private))
    .map(memberName)
    .filter((n) => !NATIVE.has(n))
    .sort();
};
const runtimeMembers = (cls, instance) => {
  const names = new Set(Object.keys(instance ?? {}));
  for (let p = cls.prototype; p && p !== Object.prototype && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    for (const k of Reflect.ownKeys(p)) {
      if (k === 'constructor') continue;
      names.add(k === Symbol.dispose ? 'Symbol.dispose' : String(k));
    }
  }
  // `_name` members are the package's internal wiring (@internal in core.js).
  return [...names].filter((n) => !NATIVE.has(n) && !n.startsWith('_')).sort();
};

test('index.d.ts declares exactly the values each entry point exports (TypeScript checker)', () => {
  assert.ok(valueNames.includes('Service') && valueNames.includes('InvalidImageError'), valueNames.join(' '));
  for (const entry of ENTRIES) {
    assert.deepEqual(exportsOf(entry).map((s) => s.name).sort(), valueNames, entry);
  }
});

test('index.d.ts declares exactly the values node.js and web.js export at run time', async () => {
  assert.deepEqual(Object.keys(bs).sort(), valueNames, 'node.js');
  const web = await import(pathToFileURL(resolve(PKG_DIR, 'web.js')).href);
  assert.deepEqual(Object.keys(web).sort(), valueNames, 'web.js');
});

test('each exported class declares exactly the public members its instances have', () => {
  const svc = new bs.Service({ admin_secret: 'types-test-secret-0001' });
  const response = svc.handleRequest(bs.encodeRequest('GET', '/bot/gateway'));
  const samples = {
    Service: svc,
    GatewaySession: null, // no instance fields: #private state only
    BotspaceError: new bs.BotspaceError('m'),
    ConfigError: new bs.ConfigError('m'),
    DatabaseError: new bs.DatabaseError('m'),
    StorageError: new bs.StorageError('m'),
    InvalidImageError: new bs.InvalidImageError('m'),
    GatewayRejectedError: new bs.GatewayRejectedError(response),
    PanicError: new bs.PanicError('m'),
    MemoryPageStorage: new bs.MemoryPageStorage(),
  };
  const classes = declared.filter((s) => s.flags & ts.SymbolFlags.Class).map((s) => s.name).sort();
  assert.deepEqual(classes, Object.keys(samples).sort());
  for (const [name, instance] of Object.entries(samples)) {
    assert.deepEqual(runtimeMembers(bs[name], instance), declaredMembers(name), name);
  }
  svc.free();
});

test('the raw module types come from wasm-bindgen: botspace.d.ts declares every export of botspace.js', async () => {
  const glue = await import(pathToFileURL(resolve(PKG_DIR, 'botspace.js')).href);
  const sf = program.getSourceFile(resolve(PKG_DIR, 'botspace.d.ts'));
  assert.ok(sf, 'botspace.d.ts is part of the package and imported by index.d.ts');
  const names = checker.getExportsOfModule(checker.getSymbolAtLocation(sf)).filter((s) => s.flags & ts.SymbolFlags.Value).map((s) => s.name).sort();
  assert.deepEqual(names, Object.keys(glue).sort());
  // The typescript_custom_section of wasm/src/imp.rs, re-exported by index.d.ts.
  for (const alias of ['GatewayOutput', 'GatewayEvent', 'RequestHead', 'ErrorCode', 'CloseReason', 'EventKind', 'WebhookRequest', 'WebhookOutcome']) {
    assert.ok(declared.some((s) => s.name === alias && s.flags & ts.SymbolFlags.TypeAlias), alias);
  }
});
