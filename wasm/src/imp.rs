//! The wasm-bindgen exports. Every fallible call throws an instance of one
//! of the JS error classes of `wasm/js/errors.js`, constructed here, so the
//! JavaScript layer never has to guess an error's kind from its message.

use botspace::{Clock, ClockKind, Config, Framing, GatewayEvent, GatewayOutput, GatewaySession, Service};
use js_sys::{Function, Object, Reflect, Uint8Array};
use std::cell::RefCell;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

// The wake hook below is a `js_sys::Function` marked `Send + Sync`. That is
// only sound while the module has a single thread, which is the case for
// wasm32-unknown-unknown built without the `atomics` target feature (no
// shared memory, no wasm threads). Refuse to build otherwise.
#[cfg(target_feature = "atomics")]
compile_error!("botspace-wasm assumes a single-threaded module: build without the `atomics` target feature");

// The error classes live in JS (they must be `instanceof`-comparable with
// what users import), in the package file next to the wasm-bindgen glue.
#[wasm_bindgen(raw_module = "./errors.js")]
extern "C" {
    /// `ConfigError`, code `invalid_config`.
    #[wasm_bindgen(extends = js_sys::Error)]
    pub type ConfigError;
    #[wasm_bindgen(constructor)]
    fn new(message: &str) -> ConfigError;

    /// `StorageError` (a `DatabaseError`), code `storage_error`, status 500.
    #[wasm_bindgen(extends = js_sys::Error)]
    pub type StorageError;
    #[wasm_bindgen(constructor)]
    fn new(message: &str) -> StorageError;

    /// `InvalidImageError` (a `DatabaseError`), code `invalid_request`, status 400.
    #[wasm_bindgen(extends = js_sys::Error)]
    pub type InvalidImageError;
    #[wasm_bindgen(constructor)]
    fn new(message: &str) -> InvalidImageError;

    /// `GatewayRejectedError`: status, code and description come from the
    /// HTTP error response it carries.
    #[wasm_bindgen(extends = js_sys::Error)]
    pub type GatewayRejectedError;
    #[wasm_bindgen(constructor)]
    fn new(response: Uint8Array) -> GatewayRejectedError;

    /// Builds the `PanicError` of a Rust panic and marks the module unusable.
    #[wasm_bindgen(js_name = modulePanicked)]
    fn module_panicked(message: &str) -> js_sys::Error;
}

fn api_error(e: botspace::ApiError) -> JsValue {
    // export/import answer 400 for a bad image and 500 for storage trouble.
    if e.code() == botspace::ErrorCode::InvalidRequest {
        InvalidImageError::new(e.description()).into()
    } else {
        StorageError::new(e.description()).into()
    }
}

// TypeScript of the shapes the Rust side produces. wasm-bindgen writes it
// into the generated `botspace.d.ts`, which the package's `index.d.ts`
// re-exports; `unchecked_return_type` below ties the raw methods to it.
#[wasm_bindgen(typescript_custom_section)]
const TS_SHAPES: &'static str = r#"
/** What a gateway session wants sent to the bot. */
export type GatewayOutput =
  | { type: 'text'; data: string }
  | { type: 'close'; code: number; reason: CloseReason };

/** How a gateway session ended (the close code sent, or the bot's own, and why), reported once by `pollEvent`. */
export type GatewayEvent = { type: 'closed'; code: number; reason: CloseReason };

/** One request of `handle`: its HTTP/1.1 bytes, or a fetch `Request`'s parts (header fields flat), with the client (`peer`), `atOnce` (never park) and `unordered` (arrived concurrently). */
export type RawIncoming = ({ bytes: Uint8Array } | { method: string; target: string; headers: string[]; body: Uint8Array }) & {
  peer?: string;
  atOnce?: boolean;
  unordered?: boolean;
};

/** An answer of the typed entry points (`handle` for parts, `pollParked`, `hostAnswer`): the core's status and its reason phrase, its header fields flat (`[name, value, name, value, ...]`, names lower case) and body. */
export type HttpAnswer = { status: number; statusText: string; headers: string[]; body: Uint8Array };

/** What the framer read from a complete request's head, so a host need not parse it again. */
export type RequestHead = {
  /** Bytes of the request line, the headers and the empty line. */
  length: number;
  method: string;
  /** The path without its query. */
  path: string;
  /** 1 for HTTP/1.1, 0 for HTTP/1.0. */
  httpMinor: number;
  /** The connection stays open after the answer (HTTP/1.1 without `Connection: close`, HTTP/1.0 with `keep-alive`). */
  keepAlive: boolean;
  /** A `Connection: close` token is present. */
  closeToken: boolean;
  /** `Upgrade: websocket` with a `Connection: upgrade` token. */
  upgrade: boolean;
  /** `Expect: 100-continue`. */
  expectContinue: boolean;
};

/** Which way a request goes (`routeKind`). */
export type RouteKind = 'batch' | 'alone' | 'admin' | 'poll' | 'gateway' | 'not_here';

/** Why a gateway session ended (`reason` of GatewayOutput and GatewayEvent). */
export type CloseReason =
  | 'invalid_payload'
  | 'authentication_failed'
  | 'slow_consumer'
  | 'session_timeout'
  | 'storage_unavailable'
  | 'protocol_error'
  | 'invalid_utf8'
  | 'message_too_big'
  | 'server_shutdown'
  | 'closed_by_bot';

/** The machine-readable code of a refused request (`error` in the JSON envelope, docs/errors.md). */
export type ErrorCode =
  | 'invalid_request'
  | 'invalid_json'
  | 'missing_field'
  | 'invalid_field'
  | 'invalid_webhook_url'
  | 'webhook_address_forbidden'
  | 'text_empty'
  | 'text_too_long'
  | 'unsupported_parse_mode'
  | 'reply_target_not_found'
  | 'duplicate_header'
  | 'callback_query_answered'
  | 'callback_query_expired'
  | 'missing_authorization'
  | 'invalid_token'
  | 'bot_suspended'
  | 'tier_forbidden'
  | 'bot_not_started'
  | 'blocked_by_user'
  | 'user_blocked_by_bot'
  | 'not_member'
  | 'chat_dissolved'
  | 'bots_cannot_send'
  | 'not_message_owner'
  | 'token_not_recoverable'
  | 'method_not_found'
  | 'token_in_path'
  | 'chat_not_found'
  | 'message_not_found'
  | 'user_not_found'
  | 'bot_not_found'
  | 'member_not_found'
  | 'button_not_found'
  | 'callback_query_not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'idempotency_key_reused'
  | 'handle_taken'
  | 'webhook_active'
  | 'poll_superseded'
  | 'length_required'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'upgrade_required'
  | 'rate_limited'
  | 'connection_limit'
  | 'headers_too_large'
  | 'internal_error'
  | 'storage_error'
  | 'answer_failed'
  | 'websocket_unavailable'
  | 'storage_unavailable'
  | 'commit_outcome_unknown'
  | 'storage_full'
  | 'shutting_down'
  | 'server_busy';

/** One webhook delivery to make (`pollWebhook`): send it, then report what came of it with `webhookOutcome(id, …)`. */
export type WebhookRequest = {
  /** Reported back with the outcome. */
  id: number;
  botId: string;
  /** The URL as the bot set it. */
  url: string;
  method: 'POST';
  /** The request's headers besides `Host` and `Content-Length`, lower-case names: content-type, user-agent and the Standard Webhooks headers. */
  headers: Record<string, string>;
  /** The `Host` header: the host (bracketed when IPv6), with the port when it is not the scheme's own. */
  hostHeader: string;
  /** The URL split for connecting. */
  target: { https: boolean; host: string; port: number; path: string; literal: string | null };
  /** The update, exactly as delivered (JSON text). */
  body: string;
  /** Unix ms: report `{ timedOut: true }` if no answer came by then. */
  deadline: number;
  /** Which attempt this is for the event, from 1. */
  attempt: number;
};

/** What became of a webhook delivery: the receiver's status (and its `Retry-After` header as received), no answer by the deadline, or no answer at all: the text says why, or the kind of failure does (the core words it, followed by `: ` and `detail` when given). */
export type WebhookOutcome =
  | { status: number; retryAfter?: string | null }
  | { timedOut: true }
  | { failed: string }
  | { failure: WebhookFailure; detail?: string };

/** Why a webhook delivery got no answer; the core has the words of each. */
export type WebhookFailure =
  | 'resolve'
  | 'no_address'
  | 'connect'
  | 'tls'
  | 'tls_name'
  | 'connection'
  | 'before_sending'
  | 'build'
  | 'request'
  | 'hidden_redirect'
  | 'address_check';

/** The `type` of an event in the logs (gateway events and getUpdates). */
export type EventKind =
  | 'message_created'
  | 'message_edited'
  | 'message_deleted'
  | 'bot_started'
  | 'blocked'
  | 'unblocked'
  | 'member_added'
  | 'member_removed'
  | 'chat_permissions_changed'
  | 'chat_dissolved'
  | 'chat_action'
  | 'updates_dropped'
  | 'callback_query'
  | 'callback_answered'
  | 'callback_expired';
"#;

/// Runs once when the module is instantiated: a Rust panic becomes a thrown
/// `PanicError` carrying the panic message instead of an opaque
/// `unreachable` trap. (wasm32 has no unwinding: the throw skips Rust's
/// frames, so the JS layer treats the module as unusable afterwards.)
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        let msg = format!("botspace panicked: {info}");
        wasm_bindgen::throw_val(module_panicked(&msg).into());
    }));
}

/// The module's `WebAssembly.Memory`, for the JS layer's copy-light request
/// path (`requestBuffer` / `handleBuffered`).
#[wasm_bindgen(js_name = moduleMemory, unchecked_return_type = "WebAssembly.Memory")]
pub fn module_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// The whole HTTP answer a host gives on its own (botspace::connection::host_answer):
/// `storage_error`, `invalid_request` (with `detail` as the description),
/// `method_not_found` (`detail`: the path), `websocket_unavailable`,
/// `invalid_token`, `request_timeout`, `server_busy` or `answer_failed`.
/// Throws a `TypeError` for any other code.
/// The answer is an `HttpAnswer`, as the fetch adapter's others.
#[wasm_bindgen(js_name = hostAnswer, unchecked_return_type = "HttpAnswer")]
pub fn host_answer(code: &str, detail: &str) -> Result<JsValue, JsValue> {
    botspace::ErrorCode::parse(code)
        .and_then(|c| botspace::connection::host_answer(c, detail))
        .map(|r| typed_answer(&botspace::into_http_response(r)))
        .ok_or_else(|| js_sys::TypeError::new(&format!("{code:?} is not an answer a host gives")).into())
}

/// Which way a request for `path` (without its query) goes
/// (`botspace::connection::route`, one listener serving every path): `batch`,
/// `alone`, `admin`, `poll` (getUpdates, which may park: `handle`) or
/// `gateway` (`acceptGateway` answers it, the upgrade or its refusal).
#[wasm_bindgen(js_name = routeKind, unchecked_return_type = "RouteKind")]
pub fn route_kind(path: &str) -> String {
    use botspace::connection::{route, Lane, Listener};
    match route(Listener::All, path) {
        Lane::Batch => "batch",
        Lane::Alone => "alone",
        Lane::Admin => "admin",
        Lane::Poll => "poll",
        Lane::Gateway => "gateway",
        Lane::NotHere => "not_here",
    }
    .to_string()
}

/// The status of an error code (`error` of the JSON envelope,
/// docs/errors.md), from the core's words table; `undefined` for a word
/// that is not an error code.
#[wasm_bindgen(js_name = errorStatus)]
pub fn error_status(code: &str) -> Option<u16> {
    botspace::ErrorCode::parse(code).map(|c| c.status())
}

/// The close code of a gateway close word (`CloseReason`); `undefined`
/// for `closed_by_bot` (the bot's own code) and any other word.
#[wasm_bindgen(js_name = closeCode)]
pub fn close_code(word: &str) -> Option<u16> {
    botspace::CloseCode::parse(word).and_then(|c| c.code())
}

/// What a host closes a bot's socket with when it cannot serve the
/// session any more (`botspace::gateway::CLOSE_HOST_FAILURE`):
/// `{code, reason}`.
#[wasm_bindgen(js_name = hostFailureClose, unchecked_return_type = "{ code: number; reason: CloseReason }")]
pub fn host_failure_close() -> JsValue {
    let c = botspace::gateway::CLOSE_HOST_FAILURE;
    let out = Object::new();
    let _ = Reflect::set(&out, &"code".into(), &JsValue::from(c.code().unwrap_or_default()));
    let _ = Reflect::set(&out, &"reason".into(), &JsValue::from_str(c.as_str()));
    out.into()
}

/// A close code a bot's WebSocket reported, when an endpoint may send it
/// (`botspace::gateway::peer_close_code`): pass it to `handleClose`;
/// `undefined` for the codes a runtime makes up (1005, 1006, 1015) and
/// anything that is not a close code.
#[wasm_bindgen(js_name = peerCloseCode)]
pub fn peer_close_code(code: JsValue) -> Option<u16> {
    whole_u32(&code).and_then(botspace::gateway::peer_close_code)
}

/// The code to answer a bot's close frame with: its own when it may be
/// sent, else a normal closure (`botspace::gateway::echo_close_code`).
#[wasm_bindgen(js_name = echoCloseCode)]
pub fn echo_close_code(code: JsValue) -> u16 {
    botspace::gateway::echo_close_code(whole_u32(&code).unwrap_or(u32::MAX))
}

/// The status of a successful WebSocket upgrade, for runtimes whose
/// upgrade answer the host builds itself (workerd's `WebSocketPair`).
#[wasm_bindgen(js_name = upgradeStatus)]
pub fn upgrade_status() -> u16 {
    http::StatusCode::SWITCHING_PROTOCOLS.as_u16()
}

/// A JS number that is a whole number in `u32`'s range; `None` otherwise.
fn whole_u32(v: &JsValue) -> Option<u32> {
    let n = v.as_f64()?;
    (n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n)).then_some(n as u32)
}

/// The library version (the Rust crate's).
#[wasm_bindgen]
pub fn version() -> String {
    botspace::VERSION.to_string()
}

/// Test aid, only in builds with the `test-panic` feature (never in the
/// npm package): panics with `message` so tests can check how a panic
/// surfaces.
#[cfg(feature = "test-panic")]
#[wasm_bindgen(js_name = debugPanic)]
pub fn debug_panic(message: &str) {
    panic!("{message}");
}

/// A JS function called from the core's wake hook.
struct JsHook(Function);

// SAFETY: the module is single-threaded (see the compile_error! above): the
// function is created, called and dropped on the one JS thread there is.
// `Send + Sync` are needed only because the core's `WakeHook` type is shared
// between threads on native targets.
unsafe impl Send for JsHook {}
unsafe impl Sync for JsHook {}

/// A request for the core, or the core's refusal of its parts.
type Parts<'b> = Result<http::Request<&'b [u8]>, http::Response<Vec<u8>>>;

/// A fetch `Request`'s parts (header fields flat: `[name, value, ...]`) as
/// the core's `http::Request`, borrowing the body; `Err` is the core's
/// answer to parts the `http` crate refuses (bytes, read back by
/// `into_http_response`), the same as the bytes path gives them.
fn typed_request<'b>(method: &str, target: &str, headers: &'b [String], body: &'b [u8]) -> Result<Parts<'b>, JsValue> {
    if !headers.len().is_multiple_of(2) {
        return Err(js_sys::TypeError::new("headers must be flat name, value pairs").into());
    }
    let pairs = headers.chunks_exact(2).map(|p| (p[0].as_str(), p[1].as_str()));
    Ok(botspace::http_request_from_parts(method, target, pairs, body).map_err(botspace::into_http_response))
}

/// An answer of the core as `HttpAnswer`: `{status, statusText, headers, body}`.
fn typed_answer(resp: &http::Response<Vec<u8>>) -> JsValue {
    let headers = js_sys::Array::new_with_length(2 * resp.headers().len() as u32);
    for (i, (name, value)) in resp.headers().iter().enumerate() {
        headers.set(2 * i as u32, JsValue::from_str(name.as_str()));
        headers.set(2 * i as u32 + 1, JsValue::from_str(&String::from_utf8_lossy(value.as_bytes())));
    }
    let out = Object::new();
    // Setting a property on a plain new object cannot fail.
    let status = resp.status().as_u16();
    let _ = Reflect::set(&out, &JsValue::from_str("status"), &JsValue::from(status));
    let _ = Reflect::set(&out, &JsValue::from_str("statusText"), &JsValue::from_str(botspace::reason_phrase(status)));
    let _ = Reflect::set(&out, &JsValue::from_str("headers"), &headers);
    let _ = Reflect::set(&out, &JsValue::from_str("body"), &Uint8Array::from(&resp.body()[..]));
    out.into()
}

/// One request of `handle`, read out of its JS object.
struct Given {
    request: GivenRequest,
    peer: Option<String>,
    at_once: bool,
    unordered: bool,
}

/// A [`GivenRequest`] as the core takes it, or refused before it.
enum Parsed<'a> {
    Bytes(&'a [u8]),
    Typed(http::Request<&'a [u8]>),
    Refused(http::Response<Vec<u8>>),
}

enum GivenRequest {
    /// `{bytes}`: one complete HTTP/1.1 request.
    Bytes(Vec<u8>),
    /// `{method, target, headers, body}`: a fetch `Request`'s parts.
    Parts { method: String, target: String, headers: Vec<String>, body: Vec<u8> },
}

impl Given {
    fn read(r: &JsValue) -> Result<Given, JsValue> {
        let get = |name: &str| Reflect::get(r, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED);
        let bad = |what: &str| JsValue::from(js_sys::TypeError::new(&format!("handle: {what}")));
        if !r.is_object() {
            return Err(bad("each request must be an object"));
        }
        let bytes = get("bytes");
        let request = if bytes.is_undefined() {
            let text = |name: &str| get(name).as_string().ok_or_else(|| bad(&format!("`{name}` must be a string")));
            let headers = get("headers")
                .dyn_into::<js_sys::Array>()
                .map_err(|_| bad("`headers` must be an array"))?
                .iter()
                .map(|h| h.as_string().ok_or_else(|| bad("`headers` must hold strings")))
                .collect::<Result<Vec<_>, _>>()?;
            let body = get("body").dyn_into::<Uint8Array>().map_err(|_| bad("`body` must be a Uint8Array"))?;
            GivenRequest::Parts { method: text("method")?, target: text("target")?, headers, body: body.to_vec() }
        } else {
            GivenRequest::Bytes(
                bytes.dyn_into::<Uint8Array>().map_err(|_| bad("`bytes` must be a Uint8Array"))?.to_vec(),
            )
        };
        let peer = get("peer");
        let peer = if peer.is_undefined() || peer.is_null() { None } else { peer.as_string() };
        Ok(Given { request, peer, at_once: get("atOnce").is_truthy(), unordered: get("unordered").is_truthy() })
    }
}

fn to_ms(now: f64) -> u64 {
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

/// Request and response bytes of the copy-light path. wasm-bindgen's own
/// `&[u8]` / `Vec<u8>` passing costs a malloc and free per argument, a JS
/// array for the two return values and a fresh `ArrayBuffer` per response,
/// which together took about half of a getMe; here JS copies the request into
/// a buffer that lives on, and copies the response out of `output` into
/// memory it manages (see `copyOut` in `wasm/js/core.js`).
#[derive(Default)]
struct Io {
    input: Vec<u8>,
    output: Vec<u8>,
}

/// Buffers above this size are given back once the request that needed
/// them is served, so one large request does not pin memory.
const KEEP_BUFFER_BYTES: usize = 1 << 20;

/// A botspace service. Wrapped by the JS class `Service`.
#[wasm_bindgen]
pub struct RawService {
    svc: Arc<Service>,
    io: RefCell<Io>,
    /// The page storage's database name, when the database lives in one.
    pages: Option<String>,
    /// The webhook schedule of the package's own sender (`webhookTake`).
    pump: RefCell<botspace::WebhookPump>,
}

impl Drop for RawService {
    fn drop(&mut self) {
        if let Some(name) = &self.pages {
            crate::pages::detach(name);
        }
    }
}

#[wasm_bindgen]
impl RawService {
    /// Opens a service from a JSON configuration (the fields of `Config`,
    /// README's "Configuration").
    /// With `storage`, the database lives in the host's page storage (the
    /// `botspace-pages` VFS, see pages.rs) and `database` must not be set.
    #[wasm_bindgen(constructor)]
    pub fn new(config_json: &str, storage: Option<crate::pages::PageStorage>) -> Result<RawService, JsValue> {
        let mut config =
            Config::from_json(config_json.as_bytes()).map_err(|e| JsValue::from(ConfigError::new(&e.to_string())))?;
        let mut pages = None;
        if let Some(storage) = storage {
            if config.database != Config::default().database {
                return Err(ConfigError::new("`database` and a page storage cannot both be given").into());
            }
            let (name, uri) = crate::pages::attach(storage).map_err(|e| JsValue::from(StorageError::new(&e)))?;
            config.database = uri;
            pages = Some(name);
        }
        // std's SystemTime panics on wasm32-unknown-unknown: read Date.now().
        let clock = match config.clock {
            ClockKind::Manual => Clock::manual(),
            ClockKind::System => Clock::custom(|| js_sys::Date::now() as u64),
        };
        let opened = Service::open_with_clock(config, clock).map_err(|e| match e {
            botspace::OpenError::Config(c) => JsValue::from(ConfigError::new(&c.to_string())),
            botspace::OpenError::Storage(s) => JsValue::from(StorageError::new(&s.to_string())),
        });
        let svc = match opened {
            Ok(svc) => svc,
            Err(e) => {
                if let Some(name) = &pages {
                    crate::pages::detach(name);
                }
                return Err(e);
            }
        };
        Ok(RawService { svc: Arc::new(svc), io: RefCell::default(), pages, pump: RefCell::default() })
    }

    /// A buffer of `len` bytes in module memory for the next request; JS
    /// writes the request there and calls `handleBuffered(len)`.
    #[wasm_bindgen(js_name = requestBuffer)]
    pub fn request_buffer(&self, len: usize) -> *mut u8 {
        let mut io = self.io.borrow_mut();
        io.output = Vec::new();
        io.input.clear();
        io.input.resize(len, 0);
        io.input.as_mut_ptr()
    }

    /// Serves the request written into `requestBuffer(len)`; returns the
    /// response's length. The response stays at `responsePtr()` until the
    /// next call on this service.
    #[wasm_bindgen(js_name = handleBuffered)]
    pub fn handle_buffered(&self, len: usize) -> usize {
        // Taken out of the cell for the call: the wake hook may re-enter JS,
        // and JS may serve another request from inside it.
        let input = std::mem::take(&mut self.io.borrow_mut().input);
        let response = self.svc.handle_request(&input[..len.min(input.len())]);
        let mut io = self.io.borrow_mut();
        if io.input.capacity() == 0 && input.capacity() <= KEEP_BUFFER_BYTES {
            io.input = input;
        }
        io.output = response;
        io.output.len()
    }

    /// Where the last response of `handleBuffered` starts in module memory.
    #[wasm_bindgen(js_name = responsePtr)]
    pub fn response_ptr(&self) -> *const u8 {
        self.io.borrow().output.as_ptr()
    }

    /// Frees the last response once JS has copied it (for large ones).
    #[wasm_bindgen(js_name = releaseResponse)]
    pub fn release_response(&self) {
        self.io.borrow_mut().output = Vec::new();
    }

    /// One complete HTTP/1.1 request in, one complete HTTP/1.1 response out.
    #[wasm_bindgen(js_name = handleRequest)]
    pub fn handle_request(&self, request: &[u8]) -> Vec<u8> {
        self.svc.handle_request(request)
    }

    /// The one typed way in (`Service::handle`), for the package's
    /// `Service.handle` and its fetch adapter: `requests` are objects,
    /// each either `{bytes}` (one complete HTTP/1.1 request) or a fetch
    /// `Request`'s parts `{method, target, headers, body}` (header fields
    /// flat, `[name, value, ...]`; parts the `http` crate refuses get the
    /// answer the bytes path gives them), with `peer` (the client's address
    /// or any stable key: the host API's failed logins are throttled per
    /// client), `atOnce` (never park) and `unordered` (arrived
    /// concurrently). One answer each, in order: a number (a parked poll's
    /// id; its answer comes from `pollParked`), or the answer, as
    /// `Uint8Array` for `{bytes}` and as `HttpAnswer` for parts. A run of
    /// requests commits as one transaction, each answered as if alone.
    #[wasm_bindgen(js_name = handle, unchecked_return_type = "Array<Uint8Array | HttpAnswer | number>")]
    pub fn handle(
        &self,
        #[wasm_bindgen(unchecked_param_type = "RawIncoming[]")] requests: js_sys::Array,
        now_ms: f64,
    ) -> Result<js_sys::Array, JsValue> {
        let mut given = Vec::with_capacity(requests.length() as usize);
        for r in requests.iter() {
            given.push(Given::read(&r)?);
        }
        // Parts the `http` crate refuses are answered here, in their place.
        let mut parsed = Vec::with_capacity(given.len());
        for g in &given {
            parsed.push(match &g.request {
                GivenRequest::Bytes(b) => Parsed::Bytes(b),
                GivenRequest::Parts { method, target, headers, body } => {
                    match typed_request(method, target, headers, body)? {
                        Ok(req) => Parsed::Typed(req),
                        Err(refused) => Parsed::Refused(refused),
                    }
                }
            });
        }
        let mut incoming = Vec::with_capacity(given.len());
        for (g, p) in given.iter().zip(&parsed) {
            let one = match p {
                Parsed::Bytes(bytes) => botspace::Incoming::bytes(bytes),
                Parsed::Typed(req) => botspace::Incoming::http(req),
                Parsed::Refused(_) => continue,
            };
            let one = match &g.peer {
                Some(peer) => one.from_peer(peer),
                None => one,
            };
            let one = if g.at_once { one.at_once() } else { one };
            incoming.push(if g.unordered { one.unordered() } else { one });
        }
        let mut handled = self.svc.handle(&incoming, to_ms(now_ms)).into_iter();
        let out = js_sys::Array::new_with_length(parsed.len() as u32);
        for (i, p) in parsed.into_iter().enumerate() {
            let core = if matches!(p, Parsed::Refused(_)) { None } else { handled.next() };
            let answer = match (p, core) {
                (Parsed::Refused(refused), _) => typed_answer(&refused),
                (_, Some(botspace::Handled::Parked(id))) => JsValue::from(id.0 as f64),
                (Parsed::Bytes(_), Some(botspace::Handled::Now(raw))) => Uint8Array::from(&raw[..]).into(),
                (_, Some(botspace::Handled::Now(raw))) => typed_answer(&botspace::into_http_response(raw)),
                (_, None) => typed_answer(&botspace::into_http_response(botspace::connection::answer_failed())),
            };
            out.set(i as u32, answer);
        }
        Ok(out)
    }

    /// The most body bytes to read of a request for `path` with this
    /// `Authorization` header (`Service::body_limit`): `max_body_bytes`,
    /// or `max_import_bytes` for an `importDatabase` with the host
    /// credential.
    #[wasm_bindgen(js_name = bodyLimit)]
    pub fn body_limit(&self, path: &str, authorization: Option<String>) -> f64 {
        self.svc.body_limit(path, authorization.as_deref().map(str::as_bytes)) as f64
    }

    /// Registers `stats()` (or removes it with `null`): the host's own
    /// storage figures, an object of names to whole numbers, reported
    /// under `host` by `POST /admin/getStorageStats`. Values that are not
    /// whole non-negative numbers are left out.
    #[wasm_bindgen(js_name = setHostStats)]
    pub fn set_host_stats(
        &self,
        #[wasm_bindgen(unchecked_param_type = "(() => Record<string, number>) | null")] stats: Option<Function>,
    ) {
        match stats {
            None => self.svc.set_host_stats(None),
            Some(f) => {
                let f = JsHook(f);
                self.svc.set_host_stats(Some(Arc::new(move || {
                    let Ok(obj) = f.0.call0(&JsValue::NULL) else { return Vec::new() };
                    if !obj.is_object() {
                        return Vec::new();
                    }
                    let mut out = Vec::new();
                    for entry in Object::entries(&Object::from(obj)).iter() {
                        let pair = js_sys::Array::from(&entry);
                        let (Some(name), Some(n)) = (pair.get(0).as_string(), pair.get(1).as_f64()) else { continue };
                        if n.is_finite() && n >= 0.0 && n.fract() == 0.0 {
                            out.push((name, n as u64));
                        }
                    }
                    out
                })));
            }
        }
    }

    /// The parked polls' answers ready at `now_ms`, flat: `[id, answer,
    /// id, answer, ...]`.
    #[wasm_bindgen(js_name = pollParked, unchecked_return_type = "Array<number | HttpAnswer>")]
    pub fn poll_parked(&self, now_ms: f64) -> js_sys::Array {
        let out = js_sys::Array::new();
        for (id, resp) in self.svc.poll_parked(to_ms(now_ms)) {
            out.push(&JsValue::from(id.0 as f64));
            out.push(&typed_answer(&botspace::into_http_response(resp)));
        }
        out
    }

    /// When `pollParked` must run next at the latest (Unix ms; 0 when an
    /// answer is ready); `undefined` with nothing parked.
    #[wasm_bindgen(js_name = parkedTimeout)]
    pub fn parked_timeout(&self) -> Option<f64> {
        self.svc.parked_timeout().map(|at| at as f64)
    }

    /// Forgets a parked poll whose client went away.
    #[wasm_bindgen(js_name = cancelParked)]
    pub fn cancel_parked(&self, id: f64) -> bool {
        self.svc.cancel_parked(botspace::PollId(id as u64))
    }

    /// Where the next request in `buf` ends: `{length, head}` when it is
    /// complete (`head` is what the framer read from the request's head),
    /// `null` when more bytes are needed, or a `Uint8Array` holding the
    /// error response when the bytes can never be a request.
    #[wasm_bindgen(js_name = frameRequest, unchecked_return_type = "{ length: number; head: RequestHead } | null | Uint8Array")]
    pub fn frame_request(&self, buf: &[u8]) -> JsValue {
        match self.svc.frame_request(buf) {
            Framing::Complete { len, head } => {
                let h = Object::new();
                let set = |o: &Object, k: &str, v: JsValue| {
                    let _ = Reflect::set(o, &k.into(), &v);
                };
                set(&h, "length", JsValue::from(head.len as f64));
                set(&h, "method", JsValue::from_str(head.method(buf)));
                set(&h, "path", JsValue::from_str(head.path(buf)));
                set(&h, "httpMinor", JsValue::from(head.http_minor));
                set(&h, "keepAlive", JsValue::from(head.keep_alive));
                set(&h, "closeToken", JsValue::from(head.close_token));
                set(&h, "upgrade", JsValue::from(head.upgrade));
                set(&h, "expectContinue", JsValue::from(head.expect_continue));
                let obj = Object::new();
                set(&obj, "length", JsValue::from(len as f64));
                set(&obj, "head", h.into());
                obj.into()
            }
            Framing::Incomplete => JsValue::NULL,
            Framing::Invalid(resp) => Uint8Array::from(&resp[..]).into(),
        }
    }

    /// Registers `hook(botId)` (or removes it with `null`). It is called
    /// synchronously, after the commit, from inside the call that made the
    /// change; exceptions it throws are swallowed.
    #[wasm_bindgen(js_name = setWakeHook)]
    pub fn set_wake_hook(
        &self,
        #[wasm_bindgen(unchecked_param_type = "((botId: string) => void) | null")] hook: Option<Function>,
    ) {
        match hook {
            None => self.svc.set_wake_hook(None),
            Some(f) => {
                let f = JsHook(f);
                self.svc.set_wake_hook(Some(Arc::new(move |bot: &str| {
                    let _ = f.0.call1(&JsValue::NULL, &JsValue::from_str(bot));
                })));
            }
        }
    }

    /// Checks a `GET /bot/gateway` upgrade request received at `now_ms`.
    /// Throws a `GatewayRejectedError` whose `response` is the HTTP error
    /// response to send when the upgrade is refused.
    #[wasm_bindgen(js_name = acceptGateway)]
    pub fn accept_gateway(&self, request: &[u8], now_ms: f64) -> Result<RawGatewaySession, JsValue> {
        match self.svc.accept_gateway_session(request, to_ms(now_ms)) {
            Ok(s) => Ok(RawGatewaySession { s }),
            Err(resp) => Err(GatewayRejectedError::new(Uint8Array::from(&resp[..])).into()),
        }
    }

    /// `acceptGateway` of a fetch `Request`'s head (method, target, header
    /// fields flat), as `handle` takes its parts.
    #[wasm_bindgen(js_name = acceptGatewayHttp)]
    pub fn accept_gateway_http(
        &self,
        method: &str,
        target: &str,
        headers: Vec<String>,
        now_ms: f64,
    ) -> Result<RawGatewaySession, JsValue> {
        let refused = match typed_request(method, target, &headers, &[])? {
            Ok(req) => match self.svc.accept_gateway_session_http(&req, to_ms(now_ms)) {
                Ok(s) => return Ok(RawGatewaySession { s }),
                Err(resp) => resp,
            },
            Err(refused) => botspace::http_response_bytes(&refused, None),
        };
        Err(GatewayRejectedError::new(Uint8Array::from(&refused[..])).into())
    }

    /// The whole database as an SQLite image.
    #[wasm_bindgen(js_name = exportDatabase)]
    pub fn export_database(&self) -> Result<Vec<u8>, JsValue> {
        self.svc.export_database().map_err(api_error)
    }

    /// Replaces the whole database with an image from `exportDatabase`.
    #[wasm_bindgen(js_name = importDatabase)]
    pub fn import_database(&self, bytes: &[u8]) -> Result<(), JsValue> {
        self.svc.import_database(bytes).map_err(api_error)
    }

    /// The service clock, Unix milliseconds.
    #[wasm_bindgen(js_name = nowMs)]
    pub fn now_ms(&self) -> f64 {
        self.svc.now_ms() as f64
    }

    /// A graceful stop begins: `GET /readyz` answers 503 `shutting_down`
    /// from now on (docs/operations.md).
    #[wasm_bindgen(js_name = beginShutdown)]
    pub fn begin_shutdown(&self) {
        self.svc.begin_shutdown();
    }

    /// `max_body_bytes` of the configuration.
    #[wasm_bindgen(getter, js_name = maxBodyBytes)]
    pub fn max_body_bytes(&self) -> f64 {
        self.svc.config().max_body_bytes as f64
    }

    /// How many bytes of one whole request `handleRequest` and
    /// `handle` copy in (`botspace::connection::limits::request_copy_cap`):
    /// the first bytes of a longer request decide its answer.
    #[wasm_bindgen(getter, js_name = requestCap)]
    pub fn request_cap(&self) -> f64 {
        botspace::connection::limits::request_copy_cap(self.svc.request_framer().max_request_bytes()) as f64
    }

    /// `heartbeat_interval_ms` of the configuration.
    #[wasm_bindgen(getter, js_name = heartbeatIntervalMs)]
    pub fn heartbeat_interval_ms(&self) -> f64 {
        self.svc.config().heartbeat_interval_ms as f64
    }

    /// True when the service reads the manual clock.
    #[wasm_bindgen(getter, js_name = manualClock)]
    pub fn manual_clock(&self) -> bool {
        self.svc.config().clock == ClockKind::Manual
    }

    /// The next webhook delivery due at `now_ms` (a `WebhookRequest`), or
    /// `undefined`. Call until `undefined`; send each within its deadline,
    /// without following redirects, and report it with `webhookOutcome`.
    #[wasm_bindgen(js_name = pollWebhook, unchecked_return_type = "WebhookRequest | undefined")]
    pub fn poll_webhook(&self, now_ms: f64) -> JsValue {
        self.svc.poll_webhook(to_ms(now_ms)).map_or(JsValue::UNDEFINED, |r| webhook_request(&r))
    }

    /// What became of webhook delivery `id`, at `now_ms`: `{status,
    /// retryAfter}` (the header's text, read by the core), `{timedOut:
    /// true}`, `{failed: message}` or `{failure: kind, detail}` (the core
    /// words the message). Returns false, changing nothing, for anything
    /// else (the JS class throws a TypeError then).
    #[wasm_bindgen(js_name = webhookOutcome)]
    pub fn webhook_outcome(
        &self,
        id: f64,
        #[wasm_bindgen(unchecked_param_type = "WebhookOutcome")] outcome: JsValue,
        now_ms: f64,
    ) -> bool {
        let now = to_ms(now_ms);
        let Some((id, o)) = webhook_outcome_of(id, &outcome, now) else { return false };
        self.svc.webhook_outcome(id, o, now);
        true
    }

    /// The package's own webhook sender, on the schedule every host
    /// follows (`botspace::WebhookPump`, as the C server and the hyper
    /// host): every delivery due at `now_ms`. The store's part (loading
    /// webhooks, reading the bots' logs, writing outcomes) runs here when
    /// the pump asks for it: a module has no thread to give it, and its
    /// store is in memory or a page storage.
    #[wasm_bindgen(js_name = webhookTake, unchecked_return_type = "WebhookRequest[]")]
    pub fn webhook_take(&self, now_ms: f64) -> js_sys::Array {
        let now = to_ms(now_ms);
        let mut pump = self.pump.borrow_mut();
        let mut due = pump.poll_requests(&self.svc, now);
        if pump.begin_store_turn() {
            pump.store_turn(&self.svc, now);
            due.extend(pump.poll_requests(&self.svc, now));
        }
        due.iter().map(webhook_request).collect()
    }

    /// Reports what became of delivery `id` to the pump (`Pump::handle_outcome`,
    /// the outcome as `webhookOutcome` takes it). `undefined` for an
    /// outcome that is none, changing nothing; else whether the store has
    /// work now (call `webhookTake` then).
    #[wasm_bindgen(js_name = webhookReport)]
    pub fn webhook_report(
        &self,
        id: f64,
        #[wasm_bindgen(unchecked_param_type = "WebhookOutcome")] outcome: JsValue,
        now_ms: f64,
    ) -> Option<bool> {
        let now = to_ms(now_ms);
        let (id, o) = webhook_outcome_of(id, &outcome, now)?;
        Some(self.pump.borrow_mut().handle_outcome(&self.svc, id, o, now))
    }

    /// The next delivery due in memory at `now_ms` right after one ended
    /// (the chat's next event), or `undefined` (`Pump::poll_request`).
    #[wasm_bindgen(js_name = webhookNext, unchecked_return_type = "WebhookRequest | undefined")]
    pub fn webhook_next(&self, now_ms: f64) -> JsValue {
        self.pump
            .borrow_mut()
            .poll_request(&self.svc, to_ms(now_ms))
            .map_or(JsValue::UNDEFINED, |r| webhook_request(&r))
    }

    /// When to call `webhookTake` again if nothing wakes the sender first
    /// (`Pump::poll_timeout`), or `undefined` for no deadline.
    #[wasm_bindgen(js_name = webhookWait)]
    pub fn webhook_wait(&self, now_ms: f64) -> Option<f64> {
        let now = to_ms(now_ms);
        let pump = self.pump.borrow();
        if pump.store_turn_wanted() {
            // The store has work: take again at once.
            return Some(now as f64);
        }
        pump.poll_timeout(&self.svc, now).map(|t| t as f64)
    }

    /// When to call `pollWebhook` next (Unix ms) if no wake-up comes
    /// first, or `undefined` when nothing waits.
    #[wasm_bindgen(js_name = webhookTimeout)]
    pub fn webhook_timeout(&self) -> Option<f64> {
        self.svc.webhook_timeout().map(|t| t as f64)
    }

    /// Whether a delivery may connect to the address `ip`: `null`, or the
    /// refusal (the text the core records as the delivery's failure).
    /// `undefined` when `ip` is not an IP address.
    #[wasm_bindgen(js_name = webhookAddressAllowed, unchecked_return_type = "string | null | undefined")]
    pub fn webhook_address_allowed(&self, ip: &str) -> JsValue {
        let Ok(addr) = ip.parse::<std::net::IpAddr>() else { return JsValue::UNDEFINED };
        match self.svc.webhook_address_allowed(addr) {
            Ok(()) => JsValue::NULL,
            Err(class) => JsValue::from_str(&class.delivery_refusal()),
        }
    }

    /// Open gateway sessions of a bot.
    #[wasm_bindgen(js_name = gatewayConnections)]
    pub fn gateway_connections(&self, bot_id: &str) -> u32 {
        self.svc.gateway_connections(bot_id)
    }
}

/// A `WebhookRequest` for JS.
fn webhook_request(req: &botspace::webhook::WebhookRequest) -> JsValue {
    let set = |o: &Object, k: &str, v: JsValue| {
        let _ = Reflect::set(o, &k.into(), &v);
    };
    // Every header is the core's (`header_lines`), names in lower case
    // as fetch's `Headers` gives them.
    let headers = Object::new();
    for (name, value) in req.header_lines() {
        set(&headers, &name.to_ascii_lowercase(), JsValue::from_str(&value));
    }
    let t = &req.target;
    let target = Object::new();
    set(&target, "https", t.https.into());
    set(&target, "host", JsValue::from_str(&t.host));
    set(&target, "port", JsValue::from(t.port));
    set(&target, "path", JsValue::from_str(&t.path_and_query));
    set(&target, "literal", t.literal.map_or(JsValue::NULL, |ip| JsValue::from_str(&ip.to_string())));
    let obj = Object::new();
    set(&obj, "id", JsValue::from(req.id as f64));
    set(&obj, "botId", JsValue::from_str(&req.bot_id));
    set(&obj, "url", JsValue::from_str(&req.url));
    set(&obj, "method", "POST".into());
    set(&obj, "headers", headers.into());
    set(&obj, "hostHeader", JsValue::from_str(&req.host_header()));
    set(&obj, "target", target.into());
    set(&obj, "body", JsValue::from_str(&req.attempt.body));
    set(&obj, "deadline", JsValue::from(req.attempt.deadline_ms as f64));
    set(&obj, "attempt", JsValue::from(req.attempt.attempt));
    obj.into()
}

/// A delivery id and its `WebhookOutcome` from JS: `{status,
/// retryAfter}` (the header's text, read by the core), `{timedOut:
/// true}`, `{failed: message}` or `{failure: kind, detail}` (the core
/// words the message). `None` for anything else.
fn webhook_outcome_of(id: f64, outcome: &JsValue, now: u64) -> Option<(u64, botspace::webhook::Outcome)> {
    let get = |k: &str| Reflect::get(outcome, &k.into()).unwrap_or(JsValue::UNDEFINED);
    if !outcome.is_object() || !id.is_finite() || id < 0.0 || id.fract() != 0.0 {
        return None;
    }
    let status = get("status");
    let o = if status.as_f64().is_some() {
        let retry_after = get("retryAfter").as_string();
        let n = u16::try_from(whole_u32(&status)?).ok()?;
        botspace::webhook::Outcome::of_status(n, retry_after.as_deref(), now)?
    } else if get("timedOut").is_truthy() {
        botspace::webhook::Outcome::TimedOut
    } else if let Some(m) = get("failed").as_string() {
        botspace::webhook::Outcome::Failed(m)
    } else if let Some(kind) = get("failure").as_string() {
        let kind = botspace::webhook::Failure::from_name(&kind)?;
        match get("detail").as_string() {
            Some(d) => botspace::webhook::Outcome::failed(kind, d),
            None => botspace::webhook::Outcome::failed_plainly(kind),
        }
    } else {
        return None;
    };
    Some((id as u64, o))
}

/// A message-level gateway session. Wrapped by the JS class `GatewaySession`.
#[wasm_bindgen]
pub struct RawGatewaySession {
    s: GatewaySession,
}

#[wasm_bindgen]
impl RawGatewaySession {
    #[wasm_bindgen(getter, js_name = botId)]
    pub fn bot_id(&self) -> String {
        self.s.bot_id().to_string()
    }

    #[wasm_bindgen(getter, js_name = sessionId)]
    pub fn session_id(&self) -> String {
        self.s.session_id().to_string()
    }

    #[wasm_bindgen(getter, js_name = closed)]
    pub fn is_closed(&self) -> bool {
        self.s.is_closed()
    }

    /// A text message from the bot, received at `now_ms`.
    #[wasm_bindgen(js_name = handleText)]
    pub fn handle_text(&mut self, text: &str, now_ms: f64) {
        self.s.handle_text(text, to_ms(now_ms));
    }

    /// A binary message from the bot (closes with 4001).
    #[wasm_bindgen(js_name = handleBinary)]
    pub fn handle_binary(&mut self) {
        self.s.handle_binary();
    }

    /// The bot closed the socket, with its close code if it sent one.
    #[wasm_bindgen(js_name = handleClose)]
    pub fn handle_close(&mut self, code: Option<u16>) {
        self.s.handle_close(code);
    }

    /// The time is `now_ms`: the heartbeat deadline is checked.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) {
        self.s.handle_timeout(to_ms(now_ms));
    }

    /// The host ends the session with close `code` (4008 `slow_consumer`,
    /// 1001 `server_shutdown`): the next `pollTransmit` gives the close,
    /// ahead of what was queued and not yet taken (dropped; the bot resumes
    /// from its ack). False when the session had already ended;
    /// `undefined`, changing nothing, for any other code (the JS class
    /// throws a RangeError then: a RangeError from here would read as
    /// the module running out of memory).
    pub fn close(&mut self, code: JsValue) -> Option<bool> {
        let code = u16::try_from(whole_u32(&code)?).ok()?;
        Some(self.s.close(botspace::gateway::host_close_reason(code)?))
    }

    /// The next message to send, `{type:"text", data}` or
    /// `{type:"close", code, reason}`, or `undefined` when there is nothing
    /// now. Call until `undefined`.
    #[wasm_bindgen(js_name = pollTransmit, unchecked_return_type = "GatewayOutput | undefined")]
    pub fn poll_transmit(&mut self) -> JsValue {
        let Some(o) = self.s.poll_transmit() else { return JsValue::UNDEFINED };
        let obj = Object::new();
        match o {
            GatewayOutput::Text(t) => {
                let _ = Reflect::set(&obj, &"type".into(), &"text".into());
                let _ = Reflect::set(&obj, &"data".into(), &JsValue::from_str(&t));
            }
            GatewayOutput::Close { code, reason } => {
                let _ = Reflect::set(&obj, &"type".into(), &"close".into());
                let _ = Reflect::set(&obj, &"code".into(), &JsValue::from(code));
                let _ = Reflect::set(&obj, &"reason".into(), &JsValue::from_str(reason.as_str()));
            }
        }
        obj.into()
    }

    /// When `handleTimeout` must be called at the latest (Unix ms), or
    /// `undefined` once closed.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.s.poll_timeout().map(|d| d as f64)
    }

    /// `{type:"closed", code, reason}` once when the session ended, else
    /// `undefined`.
    #[wasm_bindgen(js_name = pollEvent, unchecked_return_type = "GatewayEvent | undefined")]
    pub fn poll_event(&mut self) -> JsValue {
        match self.s.poll_event() {
            Some(GatewayEvent::Closed { code, reason }) => {
                let obj = Object::new();
                let _ = Reflect::set(&obj, &"type".into(), &"closed".into());
                let _ = Reflect::set(&obj, &"code".into(), &JsValue::from(code));
                let _ = Reflect::set(&obj, &"reason".into(), &JsValue::from_str(reason.as_str()));
                obj.into()
            }
            None => JsValue::UNDEFINED,
        }
    }
}
