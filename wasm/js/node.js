// Node.js entry of the botspace package: the module is read from disk and
// instantiated synchronously on import, so a Service can be created at once.
import { readFileSync } from 'node:fs';
import { initSync as instantiate } from './botspace.js';
import { markReady } from './core.js';
import { nodeSendWebhook } from './webhook-node.js';

instantiate({ module: readFileSync(new URL('./botspace_bg.wasm', import.meta.url)) });
// Node resolves webhook host names itself, so every address is checked.
markReady({ sendWebhook: nodeSendWebhook });

export * from './core.js';

/** Already initialised on import in Node; kept so portable code can always `await init()`. */
export async function init(_input) {}

/** Already initialised on import in Node. */
export function initSync(_input) {}
