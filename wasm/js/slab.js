// Copying responses out of module memory. A fresh ArrayBuffer per response
// costs V8 about 0.8 µs (buffers over 64 bytes live off the heap), more than
// a whole getMe inside the module, so small responses are carved out of
// shared 64 KiB slabs instead, as Node.js does for small Buffers. A response
// is therefore a view: read it through its own byteOffset/byteLength, never
// through `.buffer` as a whole.

import { moduleMemory } from './botspace.js';

/** Responses longer than this get an ArrayBuffer of their own. */
export const POOLED_MAX = 4 * 1024;
const SLAB_BYTES = 64 * 1024;

let slab = null;
let slabAt = 0;
let memory = null;
let memoryBuffer = null;
let memoryBytes = null;

/** A byte view of module memory, renewed after the memory grows. */
export function moduleBytes() {
  // Growing detaches the old buffer (byteLength 0).
  if (memoryBytes === null || memoryBytes.byteLength === 0) {
    memory ??= moduleMemory();
    memoryBuffer = memory.buffer;
    memoryBytes = new Uint8Array(memoryBuffer);
  }
  return memoryBytes;
}

/** Copies `len` bytes at `ptr` in module memory into memory JS owns. */
export function copyOut(ptr, len) {
  moduleBytes();
  const src = new Uint8Array(memoryBuffer, ptr, len);
  if (len > POOLED_MAX) return src.slice();
  // byteLength 0: the host transferred the slab (postMessage) and it is detached.
  if (slab === null || slabAt + len > SLAB_BYTES || slab.byteLength === 0) {
    slab = new ArrayBuffer(SLAB_BYTES);
    slabAt = 0;
  }
  const out = new Uint8Array(slab, slabAt, len);
  out.set(src);
  slabAt = (slabAt + len + 7) & ~7;
  return out;
}
