// Browser (and generic ESM runtime) entry of the botspace package. Call
// `await init()` once before creating a Service: it fetches and compiles
// botspace_bg.wasm next to this file, or whatever you pass (a URL, a
// Response, bytes or a compiled WebAssembly.Module).
import instantiate, { initSync as instantiateSync } from './botspace.js';
import { markReady, isReady } from './core.js';

export * from './core.js';

/** Instantiates the WebAssembly module (once; later calls return at once). */
export async function init(input) {
  if (isReady()) return;
  await instantiate(input === undefined ? undefined : { module_or_path: input });
  markReady();
}

/** Instantiates synchronously from bytes or a compiled WebAssembly.Module. */
export function initSync(input) {
  if (isReady()) return;
  instantiateSync({ module: input });
  markReady();
}
