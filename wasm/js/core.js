// The JavaScript layer of the botspace npm package, shared by every entry
// point (node.js, web.js, worker.js). It wraps the wasm-bindgen classes with
// typed errors, the fetch adapter and the gateway plumbing.
//
// Entry points initialise the module (synchronously in Node and workers,
// with `await init()` in browsers) before a Service can be constructed.

import * as glue from './botspace.js';
import {
  BotspaceError,
  ConfigError,
  InvalidImageError,
  GatewayRejectedError,
  PanicError,
  poison,
  poisonReason,
} from './errors.js';
import { toBytes, parseResponse } from './http.js';
import { POOLED_MAX, moduleBytes, copyOut } from './slab.js';

export { BotspaceError, ConfigError, DatabaseError, StorageError, InvalidImageError, GatewayRejectedError, PanicError } from './errors.js';
export { encodeRequest } from './http.js';
export {
  PAGE_BLOCK_BYTES,
  MemoryPageStorage,
  durableObjectPageStorage,
  filePageStorage,
  indexedDBPageStorage,
} from './storage.js';

/** Most bytes copied into the module in one call (wasm32 memory is 4 GiB). */
const MAX_COPY = 1 << 30;

// ---------------------------------------------------------------- errors

// The module throws botspace's error classes itself (see errors.js). What
// is left to map here comes from the engine, not from Rust: a trap, or a
// RangeError (stack or memory exhausted) raised in the middle of a module
// call. Either one skipped Rust frames, so the module is unusable after it.
function translate(e) {
  if (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) {
    return poison(`botspace trapped (${e.message}); the module is unusable now`, { cause: e });
  }
  if (e instanceof RangeError) {
    return poison(`botspace ran out of resources (${e.message}); the module is unusable now`, { cause: e });
  }
  return e;
}

function guard(fn) {
  if (poisonReason() !== null) {
    throw new PanicError(`the botspace module is unusable after an earlier panic: ${poisonReason()}`);
  }
  try {
    return fn();
  } catch (e) {
    throw translate(e);
  }
}

// ------------------------------------------------------------ init state

let ready = false;

/**
 * Sends one webhook delivery and resolves to its outcome. Node's entry
 * passes its own (webhook-node.js), which checks every resolved address;
 * elsewhere `fetch` sends, and the runtime resolves the name.
 */
let sendWebhook = fetchSendWebhook;

/**
 * Called by the entry points once the WebAssembly module is instantiated,
 * with what the platform brings (`sendWebhook`).
 */
export function markReady(platform = {}) {
  if (typeof platform.sendWebhook === 'function') sendWebhook = platform.sendWebhook;
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

// ------------------------------------------------------------ HTTP bytes

/**
 * Decodes a complete HTTP/1.1 response from handleRequest: status, reason,
 * headers (lower-case names) and body, with `text()` and `json()` helpers.
 */
export function decodeResponse(bytes) {
  const r = parseResponse(bytes);
  if (typeof r === 'string') throw new BotspaceError(r, { code: 'invalid_response' });
  return r;
}

// ------------------------------------------------- the typed entry (fetch)
//
// A fetch `Request` is already parsed: its parts go to the module as they
// are (`handle`: method, path and query, header fields, body), and the
// core's answer comes back as `{status, statusText, headers, body}`. No
// HTTP/1.1 text is written or read here; what the core refuses in the
// parts (a method or header the `http` crate rejects, a body over the
// limit) gets the answer the bytes path gives.

const NO_BODY = new Uint8Array(0);

/**
 * A `Request`'s header fields flat (`[name, value, ...]`). The body was
 * read whole here (a chunked one decoded by the runtime), so its length,
 * when there is a body, replaces what the client's `Content-Length` or
 * `Transfer-Encoding` said; a body refused by its length alone is never
 * read, and only that length goes in.
 */
function headerList(request, contentLength) {
  const out = [];
  for (const [name, value] of request.headers) {
    // Headers iterates lower-case names.
    if (name === 'content-length' || name === 'transfer-encoding') continue;
    out.push(name, value);
  }
  if (contentLength !== null) out.push('content-length', String(contentLength));
  return out;
}

function requestTarget(url) {
  return `${url.pathname}${url.search}`;
}

/** An answer of the typed entry (`HttpAnswer`) as a fetch `Response`. */
function fetchResponse(answer) {
  const headers = new Headers();
  for (let i = 0; i < answer.headers.length; i += 2) headers.append(answer.headers[i], answer.headers[i + 1]);
  const body = answer.body.length ? answer.body : null;
  return new Response(body, { status: answer.status, statusText: answer.statusText, headers });
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

/**
 * The library's answer, as a `Response`, to what a host refuses on its own
 * (a host tool behind the service, a storage that failed after the
 * answer): `storage_error` and `invalid_request` with `detail` as the
 * description, `method_not_found` for the path `detail`,
 * `websocket_unavailable`, `invalid_token`. The envelope and status are the
 * core's, as for every other refusal.
 */
export function hostAnswer(code, detail = '') {
  ensureReady();
  return fetchResponse(guard(() => glue.hostAnswer(code, detail)));
}

// -------------------------------------------------------------- webhooks

/**
 * The `fetch` sender (browsers, edge workers, and any runtime with fetch).
 * The runtime resolves the name itself, so the address it connects to
 * cannot be checked here: a literal address was checked when the webhook
 * was set, and a name is left to the platform (workerd's network allow
 * list; a browser's own rules, CORS and private network access).
 */
async function fetchSendWebhook(req, { signal }) {
  let res;
  try {
    res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body, redirect: 'manual', signal });
  } catch (e) {
    if (signal.aborted) throw e;
    return { failure: 'request', detail: `${e?.message ?? e}` };
  }
  // Only the status and Retry-After are used: the body is never read. A
  // browser hides a redirect it did not follow (an opaque answer): the
  // core reads its status as that.
  res.body?.cancel().catch(() => {});
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
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
   * The host ends the session with close `code`: that of `slow_consumer`
   * (a bot that reads too slowly) or `server_shutdown` (see `closeCode`).
   * The next `pollTransmit` gives `{type: 'close', code, reason}`, ahead
   * of what was queued and not yet taken (dropped; the bot resumes from
   * its ack); `pollEvent` then reports it. Returns false when the session
   * had already ended. Throws a RangeError, changing nothing, for another
   * code (the core decides which codes a host may send).
   */
  close(code) {
    const closed = guard(() => this.#live().close(code));
    if (closed === undefined) {
      throw new RangeError(`close code ${code} is not one a host may send (slow_consumer, server_shutdown)`);
    }
    return closed;
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
      if (poisonReason() === null) raw.free();
    }
  }

  [Symbol.dispose]() {
    this.free();
  }
}

/**
 * The code of a gateway close word (`CloseReason`), from the core's words
 * table; `undefined` for `closed_by_bot` and any other word.
 */
export function closeCode(word) {
  ensureReady();
  return guard(() => glue.closeCode(String(word)));
}

/**
 * A close code a bot's WebSocket reported, when an endpoint may send it
 * (the core's rule); `undefined` for the codes a runtime makes up (no
 * code, an abnormal end, a TLS failure) and anything else.
 */
export function peerCloseCode(code) {
  ensureReady();
  return guard(() => glue.peerCloseCode(code));
}

/**
 * Which way a request for `path` goes, as the core routes it: `batch`,
 * `alone`, `admin`, `poll` or `gateway`.
 */
export function routeKind(path) {
  ensureReady();
  return guard(() => glue.routeKind(String(path)));
}

// Closes a bot's socket when this host cannot serve its session any more,
// with the close the core says a host uses then.
function closeForFailure(ws) {
  try {
    const { code, reason } = glue.hostFailureClose();
    ws.close(code, reason);
  } catch {}
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
  let waiting = false;
  const pump = () => {
    if (done || waiting) return;
    // No frame leaves before the commit it reports is durable.
    const pending = service._pendingDurable();
    if (pending) {
      waiting = true;
      pending.then(
        () => {
          waiting = false;
          pump();
        },
        () => {
          waiting = false;
          closeForFailure(ws);
          finish();
        },
      );
      return;
    }
    timer !== null && clearTimeout(timer);
    timer = null;
    try {
      session.handleTimeout();
      for (let o = session.pollTransmit(); o !== null; o = session.pollTransmit()) {
        if (o.type === 'text') ws.send(o.data);
        else ws.close(o.code, o.reason);
      }
    } catch (e) {
      closeForFailure(ws);
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
      closeForFailure(ws);
      finish();
      return;
    }
    pump();
  });
  ws.addEventListener('close', (ev) => {
    if (!done) {
      try {
        session.handleClose(glue.peerCloseCode(ev.code));
      } catch {}
    }
    // Answer the bot's close frame: workerd does not echo it by itself, and
    // a close left unanswered keeps the bot (and workerd's shutdown) waiting.
    try {
      ws.close(glue.echoCloseCode(ev.code), '');
    } catch {}
    finish();
  });
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
  #capBytes = 0;
  #hook = null;
  #pending = new Set();
  #flushQueued = false;
  #watchers = new Map(); // botId -> Map<GatewaySession, pump>
  #sessions = new Set();
  #stats = { commits: 0, pages: 0, bytes: 0, reads: 0 };
  // Commits of an asynchronous storage not yet durable, and the first
  // failure of one (after which nothing more is let out).
  #inflight = 0;
  #durable = null;
  #storageFailure = null;
  // Long polling (fetch only): parked getUpdates by poll id -> resolve.
  #parked = new Map();
  #parkedTimer = null;
  // Webhook deliveries (see #pumpWebhooks): whether this Service sends
  // them, the host's scheduler if it keeps the timer, the attempts in
  // flight (id -> {promise, deadline}), the retry timer.
  #webhooks = true;
  #webhookSchedule = null;
  #whInflight = new Map();
  #whQueued = false;
  #whTimer = null;
  #whScheduled = undefined;

  /**
   * @param config the configuration object (`ServiceConfig`; or its
   *   JSON text). `admin_secret` (16+ characters) is required.
   * @param options `{ storage }`: a page storage (storage.js) that holds
   *   the database; without it the database lives in the module's memory.
   */
  constructor(config = {}, options = {}) {
    ensureReady();
    let json;
    if (typeof config === 'string') json = config;
    else if (config && typeof config === 'object') json = JSON.stringify(config);
    else throw new ConfigError('the configuration must be an object or a JSON string');
    const storage = options?.storage ?? null;
    if (storage !== null && !['size', 'read', 'commit'].every((m) => typeof storage[m] === 'function')) {
      throw new ConfigError('options.storage must have size(), read(index) and commit(pages, size)');
    }
    const raw = storage === null ? undefined : this.#wrapStorage(storage);
    this.#raw = guard(() => new glue.RawService(json, raw));
    this.#capBytes = this.#raw.requestCap;
    // The hook lives inside the module; a WeakRef keeps it from holding this
    // Service alive, so an unreferenced Service is still garbage-collected.
    const self = new WeakRef(this);
    this.#raw.setWakeHook((botId) => self.deref()?.#onWake(botId));
    // POST /admin/getStorageStats reports what the page storage was given,
    // the module's memory and the host's own figures (`options.hostStats`).
    if (options?.hostStats != null && typeof options.hostStats !== 'function') {
      throw new ConfigError('options.hostStats must be a function');
    }
    const hostStats = options?.hostStats ?? null;
    this.#raw.setHostStats(() => {
      const me = self.deref();
      if (!me) return {};
      // The host's own figures win: it knows its storage best.
      return { ...me.storageStats(), memoryBytes: me.memoryBytes(), ...(hostStats ? hostStats() : {}) };
    });
    if (options?.webhooks === false) this.#webhooks = false;
    else if (options?.webhooks !== undefined && options.webhooks !== true) {
      throw new ConfigError('options.webhooks must be true or false');
    }
    if (options?.webhookSchedule != null) {
      if (typeof options.webhookSchedule !== 'function') throw new ConfigError('options.webhookSchedule must be a function');
      this.#webhookSchedule = options.webhookSchedule;
    }
    // Webhooks set before this Service opened the database are due now.
    this.#kickWebhooks();
  }

  #live() {
    if (!this.#raw) throw new BotspaceError('this Service was freed', { code: 'invalid_state' });
    return this.#raw;
  }

  // The object the module's VFS calls: counts what goes to storage and
  // keeps track of commits that return a promise.
  #wrapStorage(storage) {
    const stats = this.#stats;
    return {
      size: () => Number(storage.size()),
      read: (index) => {
        stats.reads++;
        return storage.read(index);
      },
      commit: (pages, size) => {
        if (this.#storageFailure) throw this.#storageFailure;
        stats.commits++;
        stats.pages += pages.length;
        for (const [, data] of pages) stats.bytes += data.byteLength;
        const r = storage.commit(pages, size);
        if (r && typeof r.then === 'function') this.#track(r);
      },
    };
  }

  #track(promise) {
    this.#inflight++;
    const previous = this.#durable ?? Promise.resolve();
    const mine = previous.then(() => promise).then(
      () => {
        this.#inflight--;
        if (this.#durable === mine && this.#inflight === 0) this.#durable = null;
      },
      (e) => {
        this.#inflight--;
        this.#storageFailure ??= new BotspaceError(`the page storage failed to commit: ${e?.message ?? e}`, {
          code: 'storage_error',
        });
        throw this.#storageFailure;
      },
    );
    mine.catch(() => {});
    this.#durable = mine;
  }

  /**
   * Resolves once every commit so far is durable in the page storage
   * (at once for synchronous storages); rejects if one failed. Hosts that
   * use handleRequest with an asynchronous storage await it before sending
   * the response; `fetch` and attached sockets do so themselves.
   */
  durable() {
    if (this.#storageFailure) return Promise.reject(this.#storageFailure);
    return this.#durable ?? Promise.resolve();
  }

  /** @internal null when nothing is waiting to become durable. */
  _pendingDurable() {
    return this.#storageFailure ? this.durable() : this.#durable;
  }

  /**
   * What the page storage was given: `{commits, pages, bytes, reads}`
   * since the service was created (zeros without a storage).
   */
  storageStats() {
    return { ...this.#stats };
  }

  /** Bytes of WebAssembly memory the module holds now (all services together). */
  memoryBytes() {
    return glue.moduleMemory().buffer.byteLength;
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

  /** A graceful stop begins: `GET /readyz` answers 503 `shutting_down` from now on. */
  beginShutdown() {
    guard(() => this.#live().beginShutdown());
  }

  /** One complete HTTP/1.1 request in, one complete HTTP/1.1 response out. */
  handleRequest(request) {
    // The hot path: no closure, no extra wasm call.
    let bytes = request instanceof Uint8Array ? request : toBytes(request);
    if (bytes.length > this.#capBytes) bytes = bytes.subarray(0, this.#capBytes);
    if (poisonReason() !== null || !this.#raw) return guard(() => this.#live().handleRequest(bytes));
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
   * The one typed way in (the core's `Service::handle`), for a host that
   * names the client or reads several requests at once: `requests` are
   * `{request, peer?, atOnce?, unordered?}` (`request`: one complete
   * HTTP/1.1 request; `peer`: the client's address or any stable key, so
   * failed host-API logins are throttled per client; `atOnce`: never park;
   * `unordered`: arrived concurrently, as a queue's take). A run of
   * requests commits in one transaction, each answered as if alone. One
   * answer each, in order: the response bytes, or, for a getUpdates with
   * a `timeout` that finds nothing (unless `atOnce`), a Promise of its
   * `Response`, settled on the wake-up after the commit or at the deadline.
   * `nowMs` (default: the service clock) starts a parked poll's timeout.
   */
  handle(requests, nowMs = undefined) {
    if (!Array.isArray(requests)) throw new TypeError('handle takes an array of requests');
    // How many bytes of one request are copied in: the core's cap (the
    // first bytes of a longer request decide its answer).
    const cap = this.#capBytes;
    let total = 0;
    const given = requests.map((r) => {
      if (r === null || typeof r !== 'object' || r.request === undefined) {
        throw new TypeError('handle: each request is {request, peer?, atOnce?, unordered?}');
      }
      let bytes = toBytes(r.request);
      if (bytes.length > cap) bytes = bytes.subarray(0, cap);
      total += bytes.length;
      const peer = r.peer === undefined || r.peer === null ? undefined : String(r.peer);
      return { bytes, peer, atOnce: Boolean(r.atOnce), unordered: Boolean(r.unordered) };
    });
    if (total > MAX_COPY) throw new RangeError('handle: the requests add up to more than 1 GiB; split them');
    const now = nowMs ?? this.nowMs();
    // Each response is a Uint8Array of its own: a call of many is for
    // throughput of commits, where one ArrayBuffer per response does not show.
    const answers = guard(() => this.#live().handle(given, now));
    return answers.map((a) => (typeof a === 'number' ? this.#parkedAnswer(a).then(fetchResponse) : a));
  }

  /**
   * For hosts reading a byte stream: where the first request in `buffer`
   * ends. `{kind: 'complete', length, head}` (`head`: keep-alive, upgrade,
   * expect-continue, method and path, as the framer read them),
   * `{kind: 'incomplete'}`, or `{kind: 'invalid', response}` (send it and
   * close the connection).
   */
  frameRequest(buffer) {
    const bytes = toBytes(buffer, 'buffer');
    const r = guard(() => this.#live().frameRequest(bytes));
    if (r === null) return { kind: 'incomplete' };
    if (r instanceof Uint8Array) return { kind: 'invalid', response: r };
    return { kind: 'complete', length: r.length, head: r.head };
  }

  /**
   * Registers `hook(botId)`, called when a bot got new events or its
   * gateway sessions must close (or removes it with `null`). It runs in a
   * microtask after the call that committed the change (with an
   * asynchronous page storage, once that commit is durable), so it may
   * call back into the service.
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

  // ------------------------------------------------------------ webhooks

  /**
   * The next webhook delivery due at `nowMs` (a `WebhookRequest`), or
   * `null`. For hosts that send deliveries themselves (`webhooks: false`):
   * call until `null`, send each within its deadline without following
   * redirects, and report it with `webhookOutcome`.
   */
  pollWebhook(nowMs = this.nowMs()) {
    return guard(() => this.#live().pollWebhook(nowMs)) ?? null;
  }

  /**
   * What became of webhook delivery `id`: `{status, retryAfter}` (the
   * `Retry-After` header as received, or null), `{timedOut: true}`,
   * `{failed: message}` or `{failure: kind, detail}` (the core words the
   * message: `WebhookFailure`). Throws a TypeError for anything else.
   */
  webhookOutcome(id, outcome, nowMs = this.nowMs()) {
    if (!guard(() => this.#live().webhookOutcome(id, outcome, nowMs))) {
      throw new TypeError(
        'webhookOutcome takes a delivery id and {status, retryAfter}, {timedOut: true}, {failed: message} or {failure: kind, detail}',
      );
    }
  }

  /** When `pollWebhook` is due next (Unix ms) if no wake-up comes first; `null` when nothing waits. */
  webhookTimeout() {
    return guard(() => this.#live().webhookTimeout()) ?? null;
  }

  /**
   * Whether a delivery may connect to the IP address `ip` under this
   * service's policy: `null`, or why not (the text recorded as the
   * delivery's failure). A TypeError when `ip` is not an IP address.
   */
  webhookAddressAllowed(ip) {
    const r = guard(() => this.#live().webhookAddressAllowed(String(ip)));
    if (r === undefined) throw new TypeError(`${ip} is not an IP address`);
    return r;
  }

  /**
   * Sends every webhook delivery that is due now and resolves once every
   * delivery in flight (these and those they make due) has been reported.
   * A host with `webhookSchedule` calls it at the time it was given (a
   * Durable Object from its alarm); awaiting it keeps the host's request
   * context alive for the deliveries.
   */
  async deliverWebhooks() {
    if (!this.#webhooks) throw new BotspaceError('this Service was created with webhooks: false', { code: 'invalid_state' });
    const pending = this._pendingDurable();
    if (pending) await pending;
    // The host's timer fired (an alarm is used up when it fires): tell it
    // the next time again, even if it is the same.
    this.#whScheduled = undefined;
    this.#pumpWebhooks();
    while (this.#whInflight.size > 0) {
      await Promise.all([...this.#whInflight.values()].map((f) => f.promise));
      // Outcomes pump in a microtask: let that run before looking again.
      await Promise.resolve();
    }
  }

  #kickWebhooks() {
    if (!this.#webhooks || this.#whQueued) return;
    this.#whQueued = true;
    queueMicrotask(() => {
      this.#whQueued = false;
      this.#pumpWebhooks();
    });
  }

  #pumpWebhooks() {
    if (!this.#raw || poisonReason() !== null) return;
    // Nothing leaves before the commits it reports are durable.
    const pending = this._pendingDurable();
    if (pending) {
      pending.then(
        () => this.#kickWebhooks(),
        () => {},
      );
      return;
    }
    if (this.#whTimer !== null) clearTimeout(this.#whTimer);
    this.#whTimer = null;
    // The core's schedule, as every host follows it: what is due now
    // (the store's part runs inside when the schedule asks for it).
    try {
      for (const req of guard(() => this.#raw.webhookTake(this.nowMs()))) this.#sendWebhook(req);
    } catch (e) {
      console.error('botspace: webhook deliveries stopped', e);
      return;
    }
    this.#armWebhooks();
  }

  #sendWebhook(req) {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), Math.max(0, Math.min(req.deadline - this.nowMs(), 2 ** 31 - 1)));
    // Called from the sender's resolver callback: it must not throw (a
    // freed Service, a poisoned module). `null`, or the outcome to report.
    const addressAllowed = (ip) => {
      try {
        const refusal = this.webhookAddressAllowed(ip);
        return refusal === null ? null : { failed: refusal };
      } catch (e) {
        return { failure: 'address_check', detail: `${e?.message ?? e}` };
      }
    };
    const promise = Promise.resolve()
      .then(() => sendWebhook(req, { signal: ctrl.signal, addressAllowed }))
      .catch((e) => ({ failure: 'request', detail: `${e?.message ?? e}` }))
      .then((outcome) => {
        clearTimeout(timer);
        // An answer that came in time counts; anything cut by the deadline is a time-out.
        if (ctrl.signal.aborted && outcome?.status === undefined) outcome = { timedOut: true };
        this.#whInflight.delete(req.id);
        if (!this.#raw || poisonReason() !== null) return;
        let next = null;
        try {
          const now = this.nowMs();
          const reported = guard(() => this.#raw.webhookReport(req.id, outcome, now));
          if (reported === undefined) throw new TypeError(`the sender's outcome ${JSON.stringify(outcome)} is none the core takes`);
          // The chat's next event goes out at once, as from every host;
          // anything else (the store's part) through the loop.
          next = guard(() => this.#raw.webhookNext(now)) ?? null;
        } catch (e) {
          console.error('botspace: a webhook outcome was not recorded', e);
        }
        if (next === null) {
          this.#kickWebhooks();
          return;
        }
        // Nothing leaves before the commits it reports are durable; if
        // one failed, the attempt is reported as never sent.
        const pending = this._pendingDurable();
        if (!pending) {
          this.#sendWebhook(next);
          this.#armWebhooks();
          return;
        }
        pending.then(
          () => {
            if (!this.#raw || poisonReason() !== null) return;
            this.#sendWebhook(next);
            this.#armWebhooks();
          },
          (e) => {
            if (!this.#raw || poisonReason() !== null) return;
            try {
              guard(() => this.#raw.webhookReport(next.id, { failure: 'before_sending', detail: `${e?.message ?? e}` }, this.nowMs()));
            } catch {}
          },
        );
      });
    this.#whInflight.set(req.id, { promise, deadline: req.deadline, ctrl });
  }

  #armWebhooks() {
    if (!this.#raw || poisonReason() !== null) return;
    if (this.#whTimer !== null) clearTimeout(this.#whTimer);
    this.#whTimer = null;
    const next = guard(() => this.#raw.webhookWait(this.nowMs())) ?? null;
    if (this.#webhookSchedule) {
      // The host keeps the time: the next retry, or the first deadline of
      // an attempt in flight (should the host sleep before it is reported).
      let at = next;
      for (const f of this.#whInflight.values()) at = at === null ? f.deadline : Math.min(at, f.deadline);
      if (at !== this.#whScheduled) {
        this.#whScheduled = at;
        try {
          this.#webhookSchedule(at);
        } catch (e) {
          console.error('botspace: webhookSchedule threw', e);
        }
      }
      return;
    }
    if (next === null) return;
    const delay = Math.max(0, Math.min(next - this.nowMs(), 2 ** 31 - 1));
    this.#whTimer = setTimeout(() => {
      this.#whTimer = null;
      this.#pumpWebhooks();
    }, delay);
    // In Node, a waiting retry alone does not keep the process up.
    this.#whTimer?.unref?.();
  }

  #flush() {
    // Wake nobody before the commit that woke them is durable.
    const pending = this._pendingDurable();
    if (pending) {
      pending.then(
        () => this.#flush(),
        () => {
          this.#flushQueued = false;
          this.#pending.clear();
        },
      );
      return;
    }
    this.#flushQueued = false;
    const bots = [...this.#pending];
    this.#pending.clear();
    // Parked polls the commit made due (the library marked them before
    // calling the hook): answered now that the commit is durable.
    if (this.#parked.size > 0) this.#serveParked();
    // New events (or a webhook set or changed): deliveries may be due.
    if (bots.length) this.#kickWebhooks();
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
    let raw;
    if (typeof Request !== 'undefined' && request instanceof Request) {
      const target = requestTarget(new URL(request.url));
      const headers = headerList(request, null);
      raw = guard(() => this.#live().acceptGatewayHttp(request.method, target, headers, nowMs));
    } else {
      const bytes = toBytes(request);
      raw = guard(() => this.#live().acceptGateway(bytes, nowMs));
    }
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
   * Bot and host methods go to the core as parsed parts (`handle`, no
   * HTTP/1.1 text in between); a gateway upgrade is
   * served with `WebSocketPair` (Cloudflare), `Deno.upgradeWebSocket`, or
   * `options.upgradeWebSocket(request) -> {socket, response}`.
   */
  async fetch(request, options = {}) {
    if (!(typeof Request !== 'undefined' && request instanceof Request)) {
      request = new Request(request);
    }
    const url = new URL(request.url);
    // The core says which way the request goes: the gateway's answer (the
    // upgrade, or its refusal) comes from acceptGateway.
    const kind = guard(() => glue.routeKind(url.pathname));
    if (kind === 'gateway') return this.#upgrade(request, options);
    // The core's limit for this request's body: max_body_bytes, or an
    // image's for importDatabase with the host credential.
    const max = guard(() => this.#live().bodyLimit(url.pathname, request.headers.get('authorization') ?? undefined));
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
    const method = request.method;
    const target = requestTarget(url);
    const headers = headerList(request, length);
    const payload = body ?? NO_BODY;
    // The host API, from a known client: failed logins are throttled per
    // client. Long polling: a getUpdates with a timeout and nothing to
    // return parks in the library and is answered by #serveParked (on a
    // wake-up or at its deadline); no timer runs per poll, one for all.
    const peer = options.peer === undefined ? undefined : String(options.peer);
    const one = { method, target, headers, body: payload, peer };
    const [answer] = guard(() => this.#live().handle([one], this.nowMs()));
    const out = typeof answer === 'number' ? await this.#parkedAnswer(answer, request.signal) : answer;
    // A poll whose client went away is answered nothing: the core's answer
    // to a request that did not complete stands in (nobody reads it).
    const response = out === null ? hostAnswer('request_timeout') : fetchResponse(out);
    // A 200 means durable: with an asynchronous storage, wait for it.
    const pending = this._pendingDurable();
    if (pending) {
      try {
        await pending;
      } catch (e) {
        return hostAnswer('storage_error', e.message);
      }
    }
    return response;
  }

  // The answer of parked poll `id`, once the library has it; null when the
  // client aborted (the poll is cancelled; nobody reads the answer).
  #parkedAnswer(id, signal) {
    return new Promise((resolve) => {
      this.#parked.set(id, resolve);
      signal?.addEventListener(
        'abort',
        () => {
          if (!this.#parked.delete(id)) return;
          if (this.#raw && poisonReason() === null) guard(() => this.#raw.cancelParked(id));
          this.#armParked();
          resolve(null);
        },
        { once: true },
      );
      this.#armParked();
    });
  }

  // Hands every ready answer to its waiting fetch, then sets the one timer
  // for the next deadline.
  #serveParked() {
    if (!this.#raw || poisonReason() !== null) return;
    const ready = guard(() => this.#raw.pollParked(this.nowMs()));
    for (let i = 0; i < ready.length; i += 2) {
      const resolve = this.#parked.get(ready[i]);
      if (resolve) {
        this.#parked.delete(ready[i]);
        resolve(ready[i + 1]);
      }
    }
    this.#armParked();
  }

  #armParked() {
    if (this.#parkedTimer !== null) clearTimeout(this.#parkedTimer);
    this.#parkedTimer = null;
    if (this.#parked.size === 0 || !this.#raw || poisonReason() !== null) return;
    const at = this.#raw.parkedTimeout();
    if (at === undefined || at === null) return;
    // With the manual clock a deadline passes when the clock is moved: the
    // timer then looks again after the same wait.
    const wait = Math.min(Math.max(0, at - this.nowMs()), 2 ** 31 - 1);
    this.#parkedTimer = setTimeout(() => {
      this.#parkedTimer = null;
      this.#serveParked();
    }, wait);
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
        return new Response(null, { status: glue.upgradeStatus(), webSocket: client });
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
    return hostAnswer('websocket_unavailable');
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
   * and migrated first; on error nothing changes and an InvalidImageError,
   * a DatabaseError with code `invalid_request`, is thrown).
   */
  importDatabase(bytes) {
    if (typeof bytes === 'string') throw new TypeError('a database image must be bytes (Uint8Array or ArrayBuffer), not a string');
    const b = toBytes(bytes, 'database image');
    if (b.length > MAX_COPY) {
      throw new InvalidImageError('the image is larger than 1 GiB, more than the WebAssembly build can hold');
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
      if (this.#whTimer !== null) clearTimeout(this.#whTimer);
      this.#whTimer = null;
      // Deliveries in flight are cut; nothing is reported any more.
      for (const f of this.#whInflight.values()) f.ctrl.abort();
      for (const s of [...this.#sessions]) s.free();
      // Parked fetches are answered at once, as at their deadline.
      if (this.#parked.size > 0 && poisonReason() === null) {
        const ready = guard(() => this.#raw.pollParked(Number.MAX_SAFE_INTEGER));
        for (let i = 0; i < ready.length; i += 2) this.#parked.get(ready[i])?.(ready[i + 1]);
      }
      this.#parked.clear();
      if (this.#parkedTimer !== null) clearTimeout(this.#parkedTimer);
      this.#parkedTimer = null;
      const raw = this.#raw;
      this.#raw = null;
      if (poisonReason() === null) raw.free();
    }
  }

  [Symbol.dispose]() {
    this.free();
  }
}
