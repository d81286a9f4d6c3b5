// The vector runner itself, so a passing vector run means something.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bs } from './helpers.mjs';
import { substString, subst, mismatch, atPath, buildRequest, parseResponse, runCase, loadVectorFiles, RunnerError } from './vector-runner.mjs';

const dec = (b) => new TextDecoder().decode(b);
const make = (c) => new bs.Service(c);

test('placeholders', () => {
  const vars = new Map([['n', 7], ['s', 'spc_x'], ['o', { a: [1] }]]);
  assert.equal(substString('{{n}}', vars), 7);
  assert.deepEqual(substString('{{o}}', vars), { a: [1] });
  assert.equal(substString('id {{s}}/{{n}}', vars), 'id spc_x/7');
  assert.equal(substString('{{*}}', vars), '{{*}}');
  assert.equal(substString('x {{*}} {{s}}', vars), 'x {{*}} spc_x');
  assert.equal(substString('no {{ end', vars), 'no {{ end');
  assert.throws(() => substString('{{missing}}', vars), RunnerError);
  assert.deepEqual(subst({ a: ['{{s}}', 1, null, { b: '{{n}}' }] }, vars), { a: ['spc_x', 1, null, { b: 7 }] });
});

test('matching: wildcard, exact keys, arrays, scalars', () => {
  assert.equal(mismatch({ a: '{{*}}' }, { a: [1] }), null);
  assert.match(mismatch({ a: 1 }, { a: 1, b: 2 }), /body\.b: unexpected key/);
  assert.match(mismatch({ a: 1, b: 2 }, { a: 1 }), /body\.b: missing/);
  assert.match(mismatch([1, 2], [1]), /array of 1 elements, expected 2/);
  assert.match(mismatch({ a: [{ b: 'x' }] }, { a: [{ b: 'y' }] }), /body\.a\.0\.b: expected "x", got "y"/);
  assert.match(mismatch(1, '1'), /expected 1, got "1"/);
  assert.match(mismatch({}, null), /expected/);
  assert.equal(mismatch(null, null), null);
});

test('save paths', () => {
  const v = { result: [{ update_id: 3, bot: { id: 'bot_1' } }] };
  assert.equal(atPath(v, 'result.0.update_id'), 3);
  assert.equal(atPath(v, 'result.0.bot.id'), 'bot_1');
  assert.equal(atPath(v, 'result.1.update_id'), undefined);
  assert.equal(atPath(v, 'result.x'), undefined);
  assert.equal(atPath(v, 'result.0.update_id.deeper'), undefined);
});

test('request bytes follow the README exactly', () => {
  assert.equal(
    dec(buildRequest({ method: 'POST', path: '/admin/createUser', headers: { Authorization: 'Admin s' }, body: { display_name: 'Ann' } })),
    'POST /admin/createUser HTTP/1.1\r\nHost: botspace\r\nAuthorization: Admin s\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n{"display_name":"Ann"}',
  );
  assert.equal(dec(buildRequest({ method: 'GET', path: '/bot/getMe' })), 'GET /bot/getMe HTTP/1.1\r\nHost: botspace\r\nContent-Type: application/json\r\n\r\n');
  assert.equal(dec(buildRequest({ path: '/x', content_type: false })), 'POST /x HTTP/1.1\r\nHost: botspace\r\n\r\n');
  assert.equal(dec(buildRequest({ path: '/x', headers: { 'content-TYPE': 'text/plain' }, raw_body: 'é' })), 'POST /x HTTP/1.1\r\nHost: botspace\r\ncontent-TYPE: text/plain\r\nContent-Length: 2\r\n\r\né');
  assert.equal(dec(buildRequest({ path: '/x', raw_body: '' })), 'POST /x HTTP/1.1\r\nHost: botspace\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n');
  assert.equal(dec(buildRequest({ path: '/x', raw_body: 'r', body: { a: 1 } })).endsWith('Content-Length: 1\r\n\r\nr'), true, 'raw_body wins');
  assert.throws(() => buildRequest({ path: '/x', headers: { A: 1 } }), RunnerError);
  assert.throws(() => buildRequest({}), RunnerError);
});

test('responses: Content-Length must match the body', () => {
  const enc = (s) => new TextEncoder().encode(s);
  assert.equal(parseResponse(enc('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}')).status, 200);
  assert.throws(() => parseResponse(enc('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n{}')), /does not match/);
  assert.throws(() => parseResponse(enc('nonsense')), /no end of headers/);
});

test('a passing case, and a failing one reported with step, request and both bodies', () => {
  const good = {
    name: 'createUser then history of an unknown chat',
    config: { max_body_bytes: 4096 },
    steps: [
      {
        request: { method: 'POST', path: '/admin/createUser', headers: { Authorization: 'Admin {{admin_secret}}' }, body: { display_name: 'Ann' } },
        expect: { status: 200, body: { ok: true, result: { id: '{{*}}', display_name: 'Ann', handle: null } }, headers: { 'content-type': 'application/json' } },
        save: { user: 'result.id' },
      },
      {
        request: { path: '/admin/createPrivateChat', headers: { Authorization: 'Admin {{admin_secret}}' }, body: { user_id: '{{user}}', bot_id: 'bot_nope' } },
        expect: { status: 404 },
      },
    ],
  };
  runCase(good, make);
  const bad = structuredClone(good);
  bad.steps[1].expect = { status: 404, body: { ok: false } };
  assert.throws(() => runCase(bad, make), (e) => {
    assert.match(e.message, /^step 1: body mismatch at body\.\w+: unexpected key/);
    assert.match(e.message, /request: POST \/admin\/createPrivateChat HTTP\/1\.1/);
    assert.match(e.message, /response: \{.*"ok":false/);
    assert.match(e.message, /expected: \{"ok":false\}/);
    return true;
  });
  const unsaved = structuredClone(good);
  unsaved.steps[1].request.body.user_id = '{{nobody}}';
  assert.throws(() => runCase(unsaved, make), /runner error: placeholder \{\{nobody\}\}/);
  // A header expected as null must be absent.
  const absent = structuredClone(good);
  absent.steps[0].expect.headers = { 'x-ratelimit-limit': null };
  runCase(absent, make);
  const present = structuredClone(good);
  present.steps[0].expect.headers = { 'content-type': null };
  assert.throws(() => runCase(present, make), /step 0: header content-type: expected null, got application\/json/);
  const manual = { name: 'clock', steps: [{ request: { path: '/admin/advanceClock', headers: { Authorization: 'Admin {{admin_secret}}' }, body: { seconds: 1 } }, expect: { status: 200 } }] };
  runCase(manual, make); // the base config uses the manual clock
});

test('vector files: whatever exists is loaded; broken files are reported', () => {
  const d = mkdtempSync(join(tmpdir(), 'vectors-'));
  try {
    assert.deepEqual(loadVectorFiles(join(d, 'absent')), []);
    assert.deepEqual(loadVectorFiles(d), []);
    writeFileSync(join(d, 'a.json'), JSON.stringify({ version: 1, cases: [] }));
    writeFileSync(join(d, 'b.json'), '{"version": 1, "cases": [');
    writeFileSync(join(d, 'c.json'), JSON.stringify({ version: 2, cases: [] }));
    writeFileSync(join(d, 'notes.md'), '#');
    const got = loadVectorFiles(d);
    assert.deepEqual(got.map((f) => f.file), ['a.json', 'b.json', 'c.json']);
    assert.ok(got[0].doc && !got[0].error);
    assert.ok(got[1].error instanceof SyntaxError);
    assert.match(got[2].error.message, /version must be 1/);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
