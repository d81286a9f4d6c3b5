// The JavaScript layer of the botspace npm package, shared by every entry
// point (node.js, web.js, worker.js). It wraps the wasm-bindgen classes with
// typed errors, the fetch adapter and the gateway plumbing.
//
// Entry points initialise the module (synchronously in Node and workers,
// with `await init()` in browsers) before a Service can be constructed.

import * as glue from './botspace.js';

/** Most bytes copied into the module in one call (wasm32 memory is 4 GiB). */
const MAX_COPY = 1 << 30;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------- errors

/** Base class of every error botspace throws. `code` is machine-readable. */
export class BotspaceError extends Error {
  constructor(message, options = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'BotspaceError';
    this.code = options.code ?? 'botspace_error';
  }
}

/** The configuration was refused (bad JSON, unknown field, bad value). */
export class ConfigError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'invalid_config', ...options });
    this.name = 'ConfigError';
  }
}

/** exportDatabase/importDatabase or opening the database failed. */
export class DatabaseError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'storage_error', ...options });
    this.name = 'DatabaseError';
    this.status = options.status ?? 500;
  }
}

/**
 * A gateway upgrade was refused (401, 403, 426, 429 …). `response` holds
 * the complete HTTP response to send back; `status`, `code` (the contract's
 * error code, e.g. `connection_limit`) and `description` are parsed from it.
 */
export class GatewayRejectedError extends BotspaceError {
  constructor(response) {
    const parsed = decodeResponse(response);
    let body = {};
    try {
      body = parsed.json();
    } catch {
      // not JSON: keep the defaults
    }
    super(body.description ?? `gateway upgrade refused with HTTP ${parsed.status}`, {
      code: body.error ?? 'gateway_rejected',
    });
    this.name = 'GatewayRejectedError';
    this.status = parsed.status;
    this.description = body.description ?? '';
    this.parameters = body.parameters;
    this.response = response;
  }

  /** The refusal as a fetch `Response`. */
  toResponse() {
    return toFetchResponse(this.response);
  }
}

/**
 * A bug inside botspace (a Rust panic or a WebAssembly trap). The message
 * carries the panic message. WebAssembly cannot unwind, so the module
 * instance is unusable afterwards: every later call throws this error too.
 */
export class PanicError extends BotspaceError {
  constructor(message, options = {}) {
    super(message, { code: 'panic', ...options });
    this.name = 'PanicError';
  }
}

let poisoned = null;

function translate(e) {
  if (e instanceof BotspaceError) return e;
  if (e && typeof e === 'object') {
    switch (e.name) {
      case 'BotspaceConfigError':
        return new ConfigError(e.message, { cause: e });
      case 'BotspaceDatabaseError':
        return new DatabaseError(e.message, { code: e.code, status: e.status, cause: e });
      case 'BotspaceGatewayRejected':
        return new GatewayRejectedError(e.response);
      case 'BotspacePanicError':
        poisoned = e.message;
        return new PanicError(e.message, { cause: e });
    }
    if (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) {
      const msg = `botspace trapped (${e.message}); the module is unusable now`;
      poisoned = poisoned ?? msg;
      return new PanicError(poisoned === msg ? msg : `${msg}; after: ${poisoned}`, { cause: e });
    }
    if (e instanceof RangeError && /memory|Maximum call stack/i.test(e.message)) {
      poisoned = poisoned ?? `botspace ran out of resources: ${e.message}`;
      return new PanicError(poisoned, { cause: e });
    }
    if (e instanceof Error && /null pointer passed to rust|recursive use of an object/i.test(e.message)) {
      return new BotspaceError(`this object was freed or is in use: ${e.message}`, { code: 'invalid_state', cause: e });
    }
  }
  return e;
}

function guard(fn) {
  if (poisoned !== null) {
    throw new PanicError(`the botspace module is unusable after an earlier panic: ${poisoned}`);
  }
  try {
    return fn();
  } catch (e) {
    throw translate(e);
  }
}

// ------------------------------------------------------ response memory

// Every response is copied out of module memory into memory JS owns. A
// fresh ArrayBuffer per response costs V8 about 0.8 µs (buffers over 64
// bytes live off the heap), more than a whole getMe inside the module, so
// small responses are carved out of shared 64 KiB slabs instead, as Node.js
// does for small Buffers. A response is therefore a view: read it through
// its own byteOffset/byteLength, never through `.buffer` as a whole.
const SLAB_BYTES = 64 * 1024;
const POOLED_MAX = 4 * 1024;
let slab = null;
let slabAt = 0;
let memory = null;
let memoryBuffer = null;
let memoryBytes = null;

/** A byte view of module memory, renewed after the memory grows. */
function moduleBytes() {
  // Growing detaches the old buffer (byteLength 0).
  if (memoryBytes === null || memoryBytes.byteLength === 0) {
    memory ??= glue.moduleMemory();
    memoryBuffer = memory.buffer;
    memoryBytes = new Uint8Array(memoryBuffer);
  }
  return memoryBytes;
}

/** Copies `len` bytes at `ptr` in module memory into a new Uint8Array. */
function copyOut(ptr, len) {
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

// ------------------------------------------------------------ init state

let ready = false;

/** Called by the entry points once the WebAssembly module is instantiated. */
export function markReady() {
  ready = true;
}

/** True once the WebAssembly module is instantiated. */
export function isReady() {
  return ready;
}

function ensureReady() {
  if (!ready) {
    throw new BotspaceError(
      "botspace is not initialised yet: call `await init()` (import from 'botspace/web') before creating a Service",
      { code: 'not_initialized' },
    );
  }
}

/** The botspace version (of the Rust core the module was built from). */
export function version() {
  ensureReady();
  return guard(() => glue.version());
}

/** Test aid: makes the module panic with `message`. Poisons the module. */
export function debugPanic(message) {
  ensureReady();
  return guard(() => glue.debugPanic(String(message)));
}

// ------------------------------------------------------------ HTTP bytes

function toBytes(input, what = 'request') {
  if (input instanceof Uint8Array) return input;
  if (typeof input === 'string') return encoder.encode(input);
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  throw new TypeError(`${what} must be a Uint8Array, ArrayBuffer or string`);
}

/**
 * Encodes one HTTP/1.1 request. `body` may be an object (sent as JSON),
 * a string or bytes. Adds `Host`, `Content-Type: application/json` (for a
 * body, unless given) and `Content-Length`.
 */
export function encodeRequest(method, path, headers = {}, body = undefined) {
  let bodyBytes = null;
  if (body !== undefined && body !== null) {
    bodyBytes = typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer || ArrayBuffer.isView(body)
      ? toBytes(body, 'body')
      : encoder.encode(JSON.stringify(body));
  }
  const entries = headers instanceof Headers || headers instanceof Map ? [...headers.entries()] : Object.entries(headers);
  const lower = new Set(entries.map(([k]) => k.toLowerCase()));
  let head = `${method} ${path} HTTP/1.1\r\n`;
  if (!lower.has('host')) head += 'Host: botspace\r\n';
  for (const [k, v] of entries) head += `${k}: ${v}\r\n`;
  if (bodyBytes) {
    if (!lower.has('content-type')) head += 'Content-Type: application/json\r\n';
    if (!lower.has('content-length')) head += `Content-Length: ${bodyBytes.length}\r\n`;
  }
  head += '\r\n';
  const headBytes = encoder.encode(head);
  if (!bodyBytes) return headBytes;
  const out = new Uint8Array(headBytes.length + bodyBytes.length);
  out.set(headBytes, 0);
  out.set(bodyBytes, headBytes.length);
  return out;
}

function indexOfHeadEnd(bytes) {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) return i;
  }
  return -1;
}

/**
 * Decodes a complete HTTP/1.1 response from handleRequest: status, reason,
 * headers (lower-case names) and body, with `text()` and `json()` helpers.
 */
export function decodeResponse(bytes) {
  bytes = toBytes(bytes, 'response');
  const end = indexOfHeadEnd(bytes);
  if (end < 0) throw new BotspaceError('not an HTTP response: no end of headers', { code: 'invalid_response' });
  const lines = decoder.decode(bytes.subarray(0, end)).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) ?(.*)$/.exec(lines[0]);
  if (!m) throw new BotspaceError(`not an HTTP response: ${lines[0]}`, { code: 'invalid_response' });
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = bytes.subarray(end + 4);
  return {
    status: Number(m[1]),
    statusText: m[2],
    headers,
    body,
    text: () => decoder.decode(body),
    json: () => JSON.parse(decoder.decode(body)),
  };
}

function toFetchResponse(bytes) {
  const r = decodeResponse(bytes);
  const headers = new Headers();
  for (const [k, v] of Object.entries(r.headers)) headers.set(k, v);
  // Copy the body out of wasm memory's view (it is already a copy, but the
  // Response must own a plain ArrayBuffer-backed array).
  return new Response(r.body.length ? r.body.slice() : null, { status: r.status, statusText: r.statusText, headers });
}

function isUpgradeRequest(request) {
  const up = request.headers.get('upgrade');
  return up !== null && up.split(',').some((t) => t.trim().toLowerCase() === 'websocket');
}

function requestHead(request, url, contentLength) {
  let head = `${request.method} ${url.pathname}${url.search} HTTP/1.1\r\n`;
  let hasHost = false;
  for (const [k, v] of request.headers) {
    const name = k.toLowerCase();
    if (name === 'content-length' || name === 'transfer-encoding') continue;
    if (name === 'host') hasHost = true;
    if (/[\r\n]/.test(v)) continue;
    head += `${k}: ${v}\r\n`;
  }
  if (!hasHost) head += `Host: ${url.host || 'botspace'}\r\n`;
  if (contentLength !== null) head += `Content-Length: ${contentLength}\r\n`;
  return head + '\r\n';
}

/**
 * Reads a body stream, but never more than `max + 1` bytes: returns the
 * bytes, or `{ tooLarge: n }` once the body is known to exceed `max`.
 */
async function readLimited(request, max) {
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      return { tooLarge: total };
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let pos = 0;
  for (const c of chunks) {
    out.set(c, pos);
    pos += c.byteLength;
  }
  return out;
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function jsonErrorResponse(status, error, description) {
  const body = JSON.stringify({ ok: false, error_code: status, error, description });
  return new Response(body, { status, headers: { 'content-type': 'application/json' } });
}

// --------------------------------------------------------------- gateway

/**
 * A gateway session at the level edge runtimes use: the host does the
 * WebSocket handshake and framing, and passes whole text messages.
 */
export class GatewaySession {
  #raw;
  #service;

  /** @internal */
  constructor(raw, service) {
    this.#raw = raw;
    this.#service = service;
  }

  #live() {
    if (!this.#raw) throw new BotspaceError('this GatewaySession was freed', { code: 'invalid_state' });
    return this.#raw;
  }

  get botId() {
    return guard(() => this.#live().botId);
  }

  get sessionId() {
    return guard(() => this.#live().sessionId);
  }

  /** True once the session ended and everything was transmitted; true after free(). */
  get closed() {
    return this.#raw ? guard(() => this.#raw.closed) : true;
  }

  /** A text message from the bot, received at `nowMs`. Then drain `pollTransmit`. */
  handleText(text, nowMs = this.#service.nowMs()) {
    if (typeof text !== 'string') throw new TypeError('handleText takes a string');
    guard(() => this.#live().handleText(text, nowMs));
  }

  /** A binary message from the bot: the gateway closes with 4001. */
  handleBinary() {
    guard(() => this.#live().handleBinary());
  }

  /** The bot closed the socket (with its close code, if any). */
  handleClose(code) {
    guard(() => this.#live().handleClose(code ?? undefined));
  }

  /** The time is `nowMs`: checks the heartbeat deadline (4009 when missed). */
  handleTimeout(nowMs = this.#service.nowMs()) {
    guard(() => this.#live().handleTimeout(nowMs));
  }

  /**
   * The next message to send: `{type: 'text', data}` or
   * `{type: 'close', code, reason}`; `null` when there is nothing now.
   * Call it until `null` after every input and wake-up.
   */
  pollTransmit() {
    if (!this.#raw) return null;
    return guard(() => this.#raw.pollTransmit()) ?? null;
  }

  /** When to call `handleTimeout` at the latest (Unix ms), `null` once closed. */
  pollTimeout() {
    if (!this.#raw) return null;
    return guard(() => this.#raw.pollTimeout()) ?? null;
  }

  /** `{type: 'closed', code, reason}` once when the session ended, else `null`. */
  pollEvent() {
    if (!this.#raw) return null;
    return guard(() => this.#raw.pollEvent()) ?? null;
  }

  /** Ends the session and frees its connection slot. Idempotent. */
  free() {
    if (this.#raw) {
      const raw = this.#raw;
      this.#raw = null;
      this.#service._forget(this);
      if (poisoned === null) raw.free();
    }
  }

  [Symbol.dispose]() {
    this.free();
  }
}

// Closes the socket and frees the session once, whatever ended it.
function attach(service, session, ws) {
  let timer = null;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    if (timer !== null) clearTimeout(timer);
    session.free();
  };
  const pump = () => {
    if (done) return;
    timer !== null && clearTimeout(timer);
    timer = null;
    try {
      session.handleTimeout();
      for (let o = session.pollTransmit(); o !== null; o = session.pollTransmit()) {
        if (o.type === 'text') ws.send(o.data);
        else ws.close(o.code, o.reason);
      }
    } catch (e) {
      try {
        ws.close(1011, 'internal_error');
      } catch {}
      finish();
      return;
    }
    if (session.closed) {
      finish();
      return;
    }
    const deadline = session.pollTimeout();
    if (deadline !== null) {
      const delay = Math.max(0, Math.min(deadline - service.nowMs(), 2 ** 31 - 1));
      timer = setTimeout(pump, delay);
      // In Node, a pending heartbeat check alone does not keep the process up.
      timer?.unref?.();
    }
  };
  ws.addEventListener('message', (ev) => {
    if (done) return;
    try {
      if (typeof ev.data === 'string') session.handleText(ev.data);
      else session.handleBinary();
    } catch {
      try {
        ws.close(1011, 'internal_error');
      } catch {}
      finish();
      return;
    }
    pump();
  });
  ws.addEventListener('close', finish);
  ws.addEventListener('error', finish);
  service._watch(session, pump);
  return pump;
}

// --------------------------------------------------------------- service

/**
 * A botspace service: the bot REST API, the host API, SQLite storage and
 * the gateway, all inside this WebAssembly module.
 */
export class Service {
  #raw;
  #maxBody = 0;
  #capBytes = 0;
  #hook = null;
  #pending = new Set();
  #flushQueued = false;
  #watchers = new Map(); // botId -> Map<GatewaySession, pump>
  #sessions = new Set();

  /**
   * @param config the configuration object of contract section 10 (or its
   *   JSON text). `admin_secret` (16+ characters) is required.
   */
  constructor(config = {}) {
    ensureReady();
    let json;
    if (typeof config === 'string') json = config;
    else if (config && typeof config === 'object') json = JSON.stringify(config);
    else throw new ConfigError('the configuration must be an object or a JSON string');
    this.#raw = guard(() => new glue.RawService(json));
    this.#maxBody = this.#raw.maxBodyBytes;
    this.#capBytes = this.#cap();
    // The hook lives inside the module; a WeakRef keeps it from holding this
    // Service alive, so an unreferenced Service is still garbage-collected.
    const self = new WeakRef(this);
    this.#raw.setWakeHook((botId) => self.deref()?.#onWake(botId));
  }

  #live() {
    if (!this.#raw) throw new BotspaceError('this Service was freed', { code: 'invalid_state' });
    return this.#raw;
  }

  /** `max_body_bytes` of the configuration. */
  get maxBodyBytes() {
    return guard(() => this.#live().maxBodyBytes);
  }

  /** `heartbeat_interval_ms` of the configuration. */
  get heartbeatIntervalMs() {
    return guard(() => this.#live().heartbeatIntervalMs);
  }

  /** The service clock (Unix ms): `Date.now()`, or the manual clock. */
  nowMs() {
    return guard(() => this.#live().nowMs());
  }

  /**
   * How many bytes of one request are copied into the module. A request
   * longer than that can never be valid (head ≤ 16 KiB, body ≤
   * max_body_bytes, chunk framing), so its first bytes decide the answer;
   * the rest is never copied, which keeps the module's memory bounded.
   */
  #cap() {
    return Math.max(64 << 20, 16384 + 4 * this.#maxBody + (1 << 20));
  }

  /** One complete HTTP/1.1 request in, one complete HTTP/1.1 response out. */
  handleRequest(request) {
    // The hot path: no closure, no extra wasm call.
    let bytes = request instanceof Uint8Array ? request : toBytes(request);
    if (bytes.length > this.#capBytes) bytes = bytes.subarray(0, this.#capBytes);
    if (poisoned !== null || !this.#raw) return guard(() => this.#live().handleRequest(bytes));
    try {
      const raw = this.#raw;
      const n = bytes.length;
      const at = raw.requestBuffer(n);
      moduleBytes().set(bytes, at);
      const len = raw.handleBuffered(n);
      const out = copyOut(raw.responsePtr(), len);
      if (len > POOLED_MAX) raw.releaseResponse();
      return out;
    } catch (e) {
      throw translate(e);
    }
  }

  /**
   * Many requests committed in one transaction (group commit); each gets
   * the response it would get alone.
   */
  handleBatch(requests) {
    if (!Array.isArray(requests)) throw new TypeError('handleBatch takes an array of requests');
    const cap = this.#cap();
    const parts = requests.map((r) => {
      const b = toBytes(r);
      return b.length > cap ? b.subarray(0, cap) : b;
    });
    if (parts.reduce((n, p) => n + p.length, 0) > MAX_COPY) {
      throw new RangeError('handleBatch: the requests add up to more than 1 GiB; split the batch');
    }
    return guard(() => this.#live().handleBatch(parts));
  }

  /**
   * For hosts reading a byte stream: where the first request in `buffer`
   * ends. `{kind: 'complete', length}`, `{kind: 'incomplete'}`, or
   * `{kind: 'invalid', response}` (send it and close the connection).
   */
  frameRequest(buffer) {
    const bytes = toBytes(buffer, 'buffer');
    const r = guard(() => this.#live().frameRequest(bytes));
    if (r === null) return { kind: 'incomplete' };
    if (typeof r === 'number') return { kind: 'complete', length: r };
    return { kind: 'invalid', response: r };
  }

  /**
   * Registers `hook(botId)`, called when a bot got new events or its
   * gateway sessions must close (or removes it with `null`). It runs in a
   * microtask after the call that committed the change, so it may call
   * back into the service.
   */
  setWakeHook(hook) {
    if (hook !== null && typeof hook !== 'function') throw new TypeError('the wake hook must be a function or null');
    this.#hook = hook;
  }

  #onWake(botId) {
    // Called synchronously from inside the wasm call that committed: only
    // record it, and act once that call has returned.
    this.#pending.add(botId);
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(() => this.#flush());
    }
  }

  #flush() {
    this.#flushQueued = false;
    const bots = [...this.#pending];
    this.#pending.clear();
    for (const bot of bots) {
      const pumps = this.#watchers.get(bot);
      if (pumps) for (const pump of [...pumps.values()]) pump();
      if (this.#hook) {
        try {
          this.#hook(bot);
        } catch (e) {
          // A failing hook must not take the host down nor skip other bots.
          console.error('botspace: the wake hook threw', e);
        }
      }
    }
  }

  /** @internal used by attached sockets */
  _watch(session, pump) {
    let m = this.#watchers.get(session.botId);
    if (!m) this.#watchers.set(session.botId, (m = new Map()));
    m.set(session, pump);
  }

  /** @internal */
  _forget(session) {
    this.#sessions.delete(session);
    for (const [bot, m] of this.#watchers) {
      if (m.delete(session) && m.size === 0) this.#watchers.delete(bot);
    }
  }

  /**
   * Checks a `GET /bot/gateway` upgrade request (raw bytes, or a fetch
   * `Request`) and opens a message-level session. Throws
   * `GatewayRejectedError` (with the HTTP error response) when refused.
   * The host completes the WebSocket handshake itself.
   */
  acceptGateway(request, nowMs = this.nowMs()) {
    let bytes;
    if (typeof Request !== 'undefined' && request instanceof Request) {
      const url = new URL(request.url);
      bytes = encoder.encode(requestHead(request, url, null));
    } else {
      bytes = toBytes(request);
    }
    const raw = guard(() => this.#live().acceptGateway(bytes, nowMs));
    const s = new GatewaySession(raw, this);
    this.#sessions.add(s);
    return s;
  }

  /**
   * Runs a gateway session over a server-side WebSocket with the standard
   * interface (`send`, `close`, `addEventListener('message' | 'close')`),
   * e.g. Cloudflare's `WebSocketPair` server end after `accept()`, Deno's
   * `upgradeWebSocket` socket or the `ws` package: text in, text out,
   * wake-ups and heartbeat timers. Returns the session.
   */
  attachWebSocket(session, ws) {
    if (!(session instanceof GatewaySession)) throw new TypeError('attachWebSocket takes a GatewaySession');
    const pump = attach(this, session, ws);
    pump();
    return session;
  }

  /**
   * The fetch adapter: `export default { fetch: (req) => service.fetch(req) }`.
   * Bot and host methods go through handleRequest; a gateway upgrade is
   * served with `WebSocketPair` (Cloudflare), `Deno.upgradeWebSocket`, or
   * `options.upgradeWebSocket(request) -> {socket, response}`.
   */
  async fetch(request, options = {}) {
    if (!(typeof Request !== 'undefined' && request instanceof Request)) {
      request = new Request(request);
    }
    const url = new URL(request.url);
    if (url.pathname === '/bot/gateway' && request.method === 'GET' && isUpgradeRequest(request)) {
      return this.#upgrade(request, options);
    }
    const max = this.maxBodyBytes;
    let body = null;
    let length = null;
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      const declared = request.headers.get('content-length');
      if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > max) {
        // Refused from the header alone; the body is never read.
        length = Number(declared);
        if (request.body) request.body.cancel().catch(() => {});
      } else {
        const read = await readLimited(request, max);
        if (read.tooLarge !== undefined) {
          length = read.tooLarge;
        } else if (read.length > 0 || request.headers.has('content-length')) {
          body = read;
          length = read.length;
        }
      }
    }
    const head = encoder.encode(requestHead(request, url, length));
    const bytes = body && body.length ? concat(head, body) : head;
    return toFetchResponse(this.handleRequest(bytes));
  }

  #upgrade(request, options) {
    let session;
    try {
      session = this.acceptGateway(request);
    } catch (e) {
      if (e instanceof GatewayRejectedError) return e.toResponse();
      throw e;
    }
    try {
      if (typeof options.upgradeWebSocket === 'function') {
        const { socket, response } = options.upgradeWebSocket(request);
        this.#attachWhenOpen(session, socket);
        return response;
      }
      if (typeof globalThis.WebSocketPair === 'function') {
        const pair = new globalThis.WebSocketPair();
        const [client, server] = Object.values(pair);
        server.accept();
        this.attachWebSocket(session, server);
        return new Response(null, { status: 101, webSocket: client });
      }
      if (globalThis.Deno && typeof globalThis.Deno.upgradeWebSocket === 'function') {
        const { socket, response } = globalThis.Deno.upgradeWebSocket(request);
        this.#attachWhenOpen(session, socket);
        return response;
      }
    } catch (e) {
      session.free();
      throw e;
    }
    session.free();
    return jsonErrorResponse(
      501,
      'websocket_unavailable',
      'this runtime offers no server-side WebSocket upgrade: pass options.upgradeWebSocket, or use acceptGateway with your own socket',
    );
  }

  #attachWhenOpen(session, socket) {
    // Sockets from an upgrade are usable once open (readyState 1).
    if (socket.readyState === 1 || socket.readyState === undefined) {
      this.attachWebSocket(session, socket);
    } else {
      socket.addEventListener('open', () => this.attachWebSocket(session, socket), { once: true });
      socket.addEventListener('close', () => session.free(), { once: true });
    }
  }

  /** The whole database as an SQLite image (persist it anywhere). */
  exportDatabase() {
    return guard(() => this.#live().exportDatabase());
  }

  /**
   * Replaces the whole database with an image from exportDatabase (checked
   * and migrated first; on error nothing changes and a DatabaseError with
   * code `invalid_request` is thrown).
   */
  importDatabase(bytes) {
    if (typeof bytes === 'string') throw new TypeError('a database image must be bytes (Uint8Array or ArrayBuffer), not a string');
    const b = toBytes(bytes, 'database image');
    if (b.length > MAX_COPY) {
      throw new DatabaseError('the image is larger than 1 GiB, more than the WebAssembly build can hold', { code: 'invalid_request', status: 400 });
    }
    guard(() => this.#live().importDatabase(b));
  }

  /** Open gateway sessions of a bot. */
  gatewayConnections(botId) {
    return guard(() => this.#live().gatewayConnections(String(botId)));
  }

  /** Frees the service's memory; its sessions end too. Idempotent. */
  free() {
    if (this.#raw) {
      for (const s of [...this.#sessions]) s.free();
      const raw = this.#raw;
      this.#raw = null;
      if (poisoned === null) raw.free();
    }
  }

  [Symbol.dispose]() {
    this.free();
  }
}
