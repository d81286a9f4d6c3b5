// Edge-worker entry (Cloudflare Workers / workerd and bundlers that import a
// .wasm file as a compiled WebAssembly.Module). Runtimes like these forbid
// compiling WebAssembly from bytes at run time, so the module is imported and
// instantiated synchronously here; a Service can be created at once.
import wasmModule from './botspace_bg.wasm';
import { initSync as instantiate } from './botspace.js';
import { markReady } from './core.js';

instantiate({ module: wasmModule });
markReady();

export * from './core.js';

/** Already initialised on import; kept so portable code can always `await init()`. */
export async function init(_input) {}

/** Already initialised on import. */
export function initSync(_input) {}
