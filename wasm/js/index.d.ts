// Types of the botspace npm package. Every entry point (node, web, worker)
// exports exactly this API: wasm/test/types.test.mjs compares the names
// declared here, and each class's members, with what the entry points
// export at run time. Shapes the Rust side produces come from the
// wasm-bindgen output (botspace.d.ts, typescript_custom_section in
// wasm/src/imp.rs).

import type { CloseReason, ErrorCode, RouteKind, EventKind, GatewayEvent, GatewayOutput, RequestHead, WebhookFailure, WebhookOutcome, WebhookRequest } from './botspace.js';
export type { CloseReason, ErrorCode, RouteKind, EventKind, GatewayEvent, GatewayOutput, RequestHead, WebhookFailure, WebhookOutcome, WebhookRequest };

/** Rate: `count` requests per `period_ms`, up to `burst` at once. */
export interface Rate {
  count: number;
  period_ms: number;
  burst: number;
}

/** Limits of one tier; `null` (or absent) means unlimited. */
export interface TierLimits {
  bot?: Rate | null;
  private_chat?: Rate | null;
  group?: Rate | null;
}

/** The service's configuration (the fields of Rust's `Config`). Unknown fields are refused. */
export interface ServiceConfig {
  /** Secret of `Authorization: Admin <secret>`; at least 16 characters. */
  admin_secret: string;
  /** `":memory:"` (the default): the database lives in module memory. Pass `{ storage }` to the Service instead to keep it in a page storage. */
  database?: string;
  /** 64 hex digits: encrypts the operational token copy of official bots. */
  operational_key?: string | null;
  synchronous?: 'full' | 'normal';
  /** `system` reads `Date.now()`; `manual` starts at 2026-01-01T00:00:00Z and moves only by /admin/advanceClock. */
  clock?: 'system' | 'manual';
  /** Largest request body, default 65536. */
  max_body_bytes?: number;
  /** Gateway heartbeat interval, default 41250 (1000–600000). */
  heartbeat_interval_ms?: number;
  /** How long gateway events are kept at least, default 86400. */
  event_retention_s?: number;
  limits?: { free?: TierLimits; standard?: TierLimits; official?: TierLimits };
  /** Webhook URLs may use `http` as well as `https` (default false). */
  webhook_allow_http?: boolean;
  /** Webhooks may reach loopback, private, link-local, multicast and unspecified addresses (default false). */
  webhook_allow_private_addresses?: boolean;
}

/** Base class of every error botspace throws. */
export class BotspaceError extends Error {
  /** Machine-readable: `invalid_config`, `storage_error`, `panic`, `not_initialized`, `invalid_state`, or an error code of the API (`ErrorCode`). */
  code: ErrorCode | 'invalid_config' | 'panic' | 'not_initialized' | 'invalid_state' | 'botspace_error' | 'gateway_rejected';
}
/** The configuration was refused. `code` is `invalid_config`. */
export class ConfigError extends BotspaceError {}
/** Opening, exporting or importing the database failed. */
export class DatabaseError extends BotspaceError {
  /** HTTP-like status: 400 for a bad image (`code` `invalid_request`), 500 for storage trouble. */
  status: number;
}
/** SQLite failed while opening, exporting or importing: `code` `storage_error`, `status` 500. */
export class StorageError extends DatabaseError {}
/** importDatabase was given bytes that are not a botspace database image: `code` `invalid_request`, `status` 400; nothing changed. */
export class InvalidImageError extends DatabaseError {}
/** A gateway upgrade was refused; `response` is the HTTP response to send. */
export class GatewayRejectedError extends BotspaceError {
  /** 401, 403, 404, 405, 426, 429 … */
  status: number;
  /** The API's error code, e.g. `invalid_token`, `upgrade_required`, `connection_limit` (`gateway_rejected` if the response had none). */
  code: ErrorCode | 'gateway_rejected';
  description: string;
  parameters?: Record<string, unknown>;
  /** The complete HTTP/1.1 error response. */
  response: Uint8Array;
  toResponse(): Response;
}
/** A bug inside botspace (Rust panic or WebAssembly trap); the module is unusable afterwards. */
export class PanicError extends BotspaceError {}

/** What `frameRequest` found at the start of a buffer. */
export type Framing =
  | { kind: 'complete'; length: number; head: RequestHead }
  | { kind: 'incomplete' }
  | { kind: 'invalid'; response: Uint8Array };

/** A decoded HTTP/1.1 response. */
export interface DecodedResponse {
  status: number;
  statusText: string;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: Uint8Array;
  text(): string;
  json(): any;
}

/** The socket interface `attachWebSocket` drives (WHATWG WebSocket, server end). */
export interface ServerWebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: 'message', listener: (ev: { data: unknown }) => void): void;
  addEventListener(type: 'close' | 'error' | 'open', listener: (ev: unknown) => void, options?: unknown): void;
  readyState?: number;
}

export interface FetchOptions {
  /** Performs the WebSocket upgrade in runtimes without WebSocketPair / Deno.upgradeWebSocket. */
  upgradeWebSocket?: (request: Request) => { socket: ServerWebSocketLike; response: Response };
  /** The client's address (or any stable client key): host-API logins are then throttled per client. */
  peer?: string;
}

/** The close codes a host may end a gateway session with: 4008 `slow_consumer`, 1001 `server_shutdown`. */
export type HostCloseCode = 4008 | 1001;

/** A message-level gateway session (the host does the WebSocket framing). */
export class GatewaySession {
  private constructor();
  readonly botId: string;
  readonly sessionId: string;
  /** True once the session ended and everything was transmitted. */
  readonly closed: boolean;
  /** A text message from the bot; `nowMs` defaults to the service clock. */
  handleText(text: string, nowMs?: number): void;
  /** A binary message from the bot (the session closes with 4001). */
  handleBinary(): void;
  /** The bot closed the socket, with its close code if it sent one. */
  handleClose(code?: number): void;
  /** The time is `nowMs` (default: the service clock): checks the heartbeat deadline. */
  handleTimeout(nowMs?: number): void;
  /**
   * The host ends the session with close `code` (4008 `slow_consumer`, 1001
   * `server_shutdown`); the next `pollTransmit` gives the close. False when
   * it had already ended; a RangeError for another code.
   */
  close(code: HostCloseCode): boolean;
  /** The next message to send, or `null` when there is nothing now; call until `null`. */
  pollTransmit(): GatewayOutput | null;
  /** When to call `handleTimeout` at the latest (Unix ms), `null` once closed. */
  pollTimeout(): number | null;
  /** Why the session ended, reported once; `null` otherwise. */
  pollEvent(): GatewayEvent | null;
  /** Ends the session and frees its connection slot. */
  free(): void;
  [Symbol.dispose](): void;
}

/** A botspace service running inside the WebAssembly module. */
/**
 * Where a Service's database lives, in 2 KiB blocks (`PAGE_BLOCK_BYTES`):
 * `read` is called on demand, and `commit` once per SQLite commit with only
 * the changed blocks and the new size; it must write them all or none,
 * before returning, or return a promise the Service awaits before any
 * response or gateway frame of that commit leaves.
 */
export interface PageStorage {
  size(): number;
  read(index: number): Uint8Array | null | undefined;
  commit(pages: Array<[number, Uint8Array]>, size: number): void | Promise<void>;
}

/** Options of `new Service(config, options)`. */
export interface ServiceOptions {
  /** Keep the database in this page storage instead of module memory (`database` must not be set then). */
  storage?: PageStorage;
  /**
   * `true` (the default): the Service sends its bots' webhook deliveries
   * itself (Node: node:http with every resolved address checked; elsewhere
   * `fetch`). `false`: the host sends them with `pollWebhook` /
   * `webhookOutcome` / `webhookTimeout`.
   */
  webhooks?: boolean;
  /**
   * The host keeps the time of webhook retries instead of a timer in the
   * Service: called with when `deliverWebhooks()` is next due (Unix ms),
   * or `null` when nothing waits. A Durable Object sets its alarm with it.
   */
  webhookSchedule?: (atMs: number | null) => void;
  /** The host's own figures (names to whole numbers), reported under `host` by `POST /admin/getStorageStats`. */
  hostStats?: () => Record<string, number>;
}

/** What a Service handed its page storage since it was created. */
export interface StorageStats {
  commits: number;
  pages: number;
  bytes: number;
  reads: number;
}

/** Bytes per block of a page storage (2048). */
export const PAGE_BLOCK_BYTES: number;

/** Blocks in a Map: not durable, for tests and throwaway services. */
export class MemoryPageStorage implements PageStorage {
  constructor();
  blocks: Map<number, Uint8Array>;
  bytes: number;
  size(): number;
  read(index: number): Uint8Array | undefined;
  commit(pages: Array<[number, Uint8Array]>, size: number): void;
}

/** A SQLite-backed Durable Object's `ctx.storage`: blocks in a table, each commit one `transactionSync`. */
export function durableObjectPageStorage(storage: unknown, table?: string): PageStorage;

/** Node.js: a file at `path` written through a redo log (`path + '.log'`). */
export function filePageStorage(path: string): PageStorage & { close(): void };

/** Browsers: an IndexedDB database, loaded into memory at open; commits are awaited transactions. */
export function indexedDBPageStorage(name?: string): Promise<PageStorage & { close(): void }>;

/** One request for `Service.handle`. */
export interface Incoming {
  /** One complete HTTP/1.1 request. */
  request: Uint8Array | ArrayBuffer | ArrayBufferView | string;
  /** The client (its address, or any stable key): failed host-API logins are throttled per client. */
  peer?: string;
  /** Answered now, never parked: a getUpdates with a `timeout` that finds nothing answers `[]`. */
  atOnce?: boolean;
  /** Arrived concurrently with the others (as a queue's take): a shared store commits the run in its lock order. */
  unordered?: boolean;
}

export class Service {
  constructor(config: ServiceConfig | string, options?: ServiceOptions);
  readonly maxBodyBytes: number;
  readonly heartbeatIntervalMs: number;
  /** The service clock, Unix milliseconds. */
  nowMs(): number;
  /** A graceful stop begins: `GET /readyz` answers 503 `shutting_down` from now on. */
  beginShutdown(): void;
  /**
   * One complete HTTP/1.1 request in, one complete HTTP/1.1 response out.
   * Responses up to 4 KiB are views into a shared 64 KiB ArrayBuffer (as
   * Node.js pools small Buffers): read them through `byteOffset` and
   * `byteLength`, and copy (`.slice()`) before transferring `.buffer`.
   */
  handleRequest(request: Uint8Array | ArrayBuffer | ArrayBufferView | string): Uint8Array;
  /**
   * The one typed way in: a run of requests commits in one transaction,
   * each answered as if alone; one answer each, in order: the response
   * bytes, or, for a getUpdates that parked (a `timeout` and nothing to
   * return, unless `atOnce`), a Promise of its Response. `nowMs` (default:
   * the service clock) starts a parked poll's timeout.
   */
  handle(requests: Incoming[], nowMs?: number): Array<Uint8Array | Promise<Response>>;
  /** Where the first request in a stream buffer ends. */
  frameRequest(buffer: Uint8Array | ArrayBuffer | ArrayBufferView | string): Framing;
  /** `hook(botId)` after a change gave a bot events or revoked its sessions; runs in a microtask. */
  setWakeHook(hook: ((botId: string) => void) | null): void;
  /** Checks a `GET /bot/gateway` upgrade; throws GatewayRejectedError when refused. */
  /** `nowMs` (default: the service clock) starts the session's heartbeat clock. */
  acceptGateway(request: Request | Uint8Array | ArrayBuffer | string, nowMs?: number): GatewaySession;
  /** Drives a session over a server-side WebSocket (send/close/events), with wake-ups and timers. */
  attachWebSocket(session: GatewaySession, ws: ServerWebSocketLike): GatewaySession;
  /**
   * The fetch adapter: `export default { fetch: (req) => service.fetch(req) }`.
   * A `getUpdates` with a `timeout` and nothing to return waits (no timer
   * per request) until a commit gives the bot an event or the deadline
   * passes; an aborted request's poll is cancelled (and answered the core's
   * `request_timeout`, which nobody reads).
   */
  fetch(request: Request | string | URL, options?: FetchOptions): Promise<Response>;
  /** Resolves once every commit so far is durable in the page storage; rejects if one failed. */
  durable(): Promise<void>;
  /** What the page storage was given since the service was created. */
  storageStats(): StorageStats;
  /** Bytes of WebAssembly memory the module holds now. */
  memoryBytes(): number;
  /** The whole database as an SQLite image. */
  exportDatabase(): Uint8Array;
  /** Replaces the whole database with an image from exportDatabase; throws DatabaseError and changes nothing when the image is bad. */
  importDatabase(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): void;
  /** Open gateway sessions of a bot. */
  gatewayConnections(botId: string): number;
  /** The next webhook delivery due at `nowMs` (default: the service clock), or `null`; call until `null`. */
  pollWebhook(nowMs?: number): WebhookRequest | null;
  /** What became of webhook delivery `id`; a TypeError for an outcome of another shape. */
  webhookOutcome(id: number, outcome: WebhookOutcome, nowMs?: number): void;
  /** When `pollWebhook` is due next (Unix ms) if no wake-up comes first; `null` when nothing waits. */
  webhookTimeout(): number | null;
  /** `null` when a delivery may connect to the IP address `ip`, else why not; a TypeError when `ip` is not an IP address. */
  webhookAddressAllowed(ip: string): string | null;
  /** Sends what is due and resolves once every delivery in flight has been reported (a Durable Object's alarm awaits it). */
  deliverWebhooks(): Promise<void>;
  /** Frees the service (and its sessions). */
  free(): void;
  [Symbol.dispose](): void;
}

/** Input accepted by `init` in the web entry. */
export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

/**
 * Instantiates the WebAssembly module. Required once in the web entry
 * before `new Service`; a no-op in the node and worker entries.
 */
export function init(input?: InitInput | Promise<InitInput>): Promise<void>;
/** Instantiates from bytes or a compiled module synchronously (web entry); a no-op elsewhere. */
export function initSync(input?: BufferSource | WebAssembly.Module): void;
/** True once the WebAssembly module is instantiated. */
export function isReady(): boolean;
/** The botspace version. */
export function version(): string;
/** Encodes an HTTP/1.1 request; an object body is sent as JSON. */
export function encodeRequest(
  method: string,
  path: string,
  headers?: Record<string, string> | Headers | Map<string, string>,
  body?: unknown,
): Uint8Array;
/** Decodes a complete HTTP/1.1 response. */
export function decodeResponse(bytes: Uint8Array | ArrayBuffer | string): DecodedResponse;
/**
 * The library's answer to what a host refuses on its own: `storage_error` and `invalid_request` (with `detail` as
 * the description), `method_not_found` (for the path `detail`), `websocket_unavailable`, `invalid_token`,
 * `request_timeout`, `server_busy`, `answer_failed` (the host could not get the library's answer). Throws a
 * `TypeError` for any other code.
 */
export function hostAnswer(
  code:
    | 'storage_error'
    | 'invalid_request'
    | 'method_not_found'
    | 'websocket_unavailable'
    | 'invalid_token'
    | 'request_timeout'
    | 'server_busy'
    | 'answer_failed',
  detail?: string,
): Response;
/** The close code of a gateway close word, from the core's words table; `undefined` for `closed_by_bot`. */
export function closeCode(word: CloseReason): number | undefined;
/** A close code a bot's WebSocket reported, when an endpoint may send it (the core's rule); else `undefined`. */
export function peerCloseCode(code: number): number | undefined;
/** Which way a request for `path` (no query) goes, as the core routes it. */
export function routeKind(path: string): RouteKind;
/** @internal */
export function markReady(): void;
