// How responses leave module memory (copyOut in wasm/js/core.js) and how the
// module memory grows (wasm/src/alloc.rs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { bs, world, PKG_DIR } from './helpers.mjs';

const { encodeRequest, decodeResponse } = bs;
// The same module instance the package entry instantiated. The tests run in
// order: the memory-growth one first, before others grow the memory.
const glue = await import(pathToFileURL(resolve(PKG_DIR, 'botspace.js')).href);

test('module memory grows geometrically as the database grows', () => {
  const w = w0();
  const mem = glue.moduleMemory();
  const start = mem.buffer.byteLength;
  let buffer = mem.buffer;
  let grows = 0;
  const send = encodeRequest('POST', '/bot/sendMessage', w.bot(w.token), { chat_id: w.chat.id, text: 'y'.repeat(200) });
  for (let i = 0; i < 20000; i++) {
    assert.equal(w.svc.handleRequest(send)[9], 0x32); // '2' of 200
    if (mem.buffer !== buffer) {
      buffer = mem.buffer;
      grows++;
    }
  }
  const grown = mem.buffer.byteLength - start;
  assert.ok(grown > 4 << 20, `20k messages need memory (grew by ${grown} bytes)`);
  // 64 KiB at a time would take over 60 grows for this; an eighth of the
  // memory at a time takes a handful.
  assert.ok(grows <= Math.ceil(grown / (1 << 20)), `${grows} grows for ${grown} bytes`);
  assert.ok(grows <= 30, `${grows} grows`);
});

test('responses stay intact while many more requests are served', () => {
  const w = w0();
  const kept = [];
  for (let i = 0; i < 600; i++) {
    kept.push([i, w.svc.handleRequest(encodeRequest('POST', '/bot/sendMessage', w.bot(w.token), { chat_id: w.chat.id, text: `m${i}` }))]);
  }
  // Enough further traffic to fill several response slabs.
  for (let i = 0; i < 2000; i++) w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  for (const [i, raw] of kept) {
    const r = decodeResponse(raw);
    assert.equal(r.status, 200);
    const m = r.json().result;
    assert.equal(m.text, `m${i}`);
    assert.equal(m.message_id, String(i + 1));
  }
});

test('small responses share a slab; a large one gets a buffer of its own', () => {
  const w = w0();
  const a = w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  const b = w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  assert.ok(a.byteLength < 4096);
  assert.ok(a.buffer.byteLength > a.byteLength, 'a small response is a view into a larger slab');
  assert.deepEqual(a, b, 'same request, same bytes, different memory');
  assert.ok(a.buffer !== b.buffer || a.byteOffset + a.byteLength <= b.byteOffset, 'views do not overlap');
  const text = 'x'.repeat(4096);
  const big = w.svc.handleRequest(encodeRequest('POST', '/bot/sendMessage', w.bot(w.token), { chat_id: w.chat.id, text }));
  assert.ok(big.byteLength > 4096);
  assert.equal(big.byteOffset, 0);
  assert.equal(big.buffer.byteLength, big.byteLength, 'a large response owns its ArrayBuffer');
  assert.equal(decodeResponse(big).json().result.text, text);
});

test('a transferred response buffer does not break later calls', () => {
  const w = w0();
  const first = w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token)));
  // Transferring the slab (postMessage/structuredClone) detaches it here.
  const moved = structuredClone(first.buffer, { transfer: [first.buffer] });
  assert.equal(first.byteLength, 0);
  assert.ok(moved.byteLength > 0);
  const next = decodeResponse(w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token))));
  assert.equal(next.status, 200);
  assert.equal(next.json().result.id, w.botInfo.id);
});

test('a request larger than free module memory grows it, and the next call still works', () => {
  const w = w0();
  const before = glue.moduleMemory().buffer.byteLength;
  // 24 MiB body: more than the configured max_body_bytes, so 413, after
  // the module had to grow to hold it.
  const body = new Uint8Array(24 << 20).fill(0x61);
  const head = `POST /bot/sendMessage HTTP/1.1\r\nHost: x\r\nAuthorization: Bot ${w.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  const req = new Uint8Array(head.length + body.length);
  req.set(new TextEncoder().encode(head));
  req.set(body, head.length);
  const r = decodeResponse(w.svc.handleRequest(req));
  assert.equal(r.status, 413);
  assert.equal(r.json().error, 'payload_too_large');
  assert.ok(glue.moduleMemory().buffer.byteLength > before, 'the module memory grew');
  const me = decodeResponse(w.svc.handleRequest(encodeRequest('POST', '/bot/getMe', w.bot(w.token))));
  assert.equal(me.status, 200);
  assert.equal(me.json().result.id, w.botInfo.id);
});

/** An official (unlimited) bot, so tight loops are not rate limited. */
function w0() {
  return world({}, { quota_tier: 'official' });
}
