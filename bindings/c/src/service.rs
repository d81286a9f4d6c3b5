//! The service handle (`botspace_service`): opening and freeing it, the
//! HTTP requests it answers, parked long polls, its callbacks, the demo and
//! the other nodes' notifications.

use crate::boundary::{input, Handle, UserData};
use crate::bytes::botspace_bytes;
use crate::request_framer::{botspace_framing, framing};
use crate::status::{botspace_status, fail};
use crate::BOTSPACE_NO_DEADLINE;
use botspace::{Config, OpenError, Service};
use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

/// The wake-up callback: botspace calls it with a bot id after a change
/// gave that bot new gateway events, or ended its gateway connections (token
/// rotated, bot suspended). The host then polls that bot's gateway
/// connections.
///
/// It is called synchronously, inside the `botspace_service_handle_request`
/// or `botspace_service_handle` call that ran the commit, on the
/// thread that made that call (with group commit, concurrent
/// `handle_request` calls share a commit, and the callback runs on the
/// thread of one of them), after the answers are out and the service's
/// internal lock has been released; so several threads may run it at the
/// same time. It must not
/// block and should only record the bot id and wake the I/O thread (write
/// to a self-pipe or eventfd). It may call botspace functions, but not
/// `botspace_service_free` on this service nor any function on a gateway
/// another thread is using. `bot_id` is NUL-terminated, `bot_id_len` bytes
/// long without the NUL, and valid only during the call. `user_data` is the
/// pointer given to `botspace_service_set_wake_callback`.
pub type botspace_wake_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, bot_id: *const c_char, bot_id_len: usize)>;

/// Receives one of the library's operator lines (a connection evicted at
/// the connection limit, a request timed out, a gateway session closed
/// for a slow consumer, a bot token rotated): `level` (0 error, 1 warn,
/// 2 info, 3 debug), the text line and the JSON line (the shape of
/// `botspace_log_line`, its `ts` from the system's wall clock), each
/// NUL-terminated, its length without the NUL, valid only during the
/// call. Neither holds a token, a secret or message text. Called on the
/// thread whose botspace call caused the line, possibly several at once;
/// it must not block for long (one write) and must not call
/// `botspace_service_free` on this service.
pub type botspace_log_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: i32,
        text: *const c_char,
        text_len: usize,
        json: *const c_char,
        json_len: usize,
    ),
>;

/// A botspace service: one database and its bot, host and gateway
/// interfaces. Thread-safe: every function taking a `const botspace_service *`
/// may be called from any number of threads at once.
pub struct botspace_service {
    pub(crate) svc: Arc<Service>,
    /// Parked polls' answers taken from the core and not yet handed out
    /// (`botspace_service_poll_parked` gives one per call).
    pub(crate) ready: std::sync::Mutex<std::collections::VecDeque<(botspace::PollId, Vec<u8>)>>,
}

impl botspace_service {
    pub(crate) fn new(svc: Service) -> Self {
        botspace_service { svc: Arc::new(svc), ready: Default::default() }
    }
}

impl Handle for botspace_service {
    /// The callbacks go first, so the host may release their user data
    /// once `botspace_service_free` returns (gateways may keep the
    /// service itself alive).
    fn release(self: Box<Self>) {
        self.svc.set_wake_hook(None);
        self.svc.set_log_hook(None);
    }
}

/// Opens a service from a JSON configuration (`config_json[0..config_len]`,
/// UTF-8, not NUL-terminated) and writes the new handle to `*out_service`.
/// Fields (all optional except `admin_secret`): `database` (a path,
/// `":memory:"`, the default, or a `postgres://` URL), `admin_secret` (at
/// least 16 characters), `operational_key` (64 hex digits), `synchronous`
/// (`"full"` | `"normal"`), `clock` (`"system"` | `"manual"`),
/// `max_body_bytes`, `heartbeat_interval_ms`, `event_retention_s`,
/// `gateway_poll_interval_ms` and `listen_notify` (PostgreSQL only; `false`
/// for engines without LISTEN/NOTIFY), `limits`. Unknown fields are refused. Returns `BOTSPACE_STATUS_INVALID_CONFIG` or
/// `BOTSPACE_STATUS_STORAGE_ERROR` with a message in
/// `botspace_last_error_message`. Thread-safe.
///
/// # Safety
/// `config_json` must point at `config_len` readable bytes (or be NULL with
/// length 0); `out_service` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_open(
    config_json: *const u8,
    config_len: usize,
    out_service: *mut *mut botspace_service,
) -> botspace_status {
    ffi_boundary!({
        let out_service = arg!(out out_service);
        let cfg = arg!(bytes config_json, config_len);
        let config = match Config::from_json(cfg) {
            Ok(c) => c,
            Err(e) => return fail(botspace_status::InvalidConfig, e.to_string()),
        };
        // Before opening: migrations may have something to say.
        crate::output::install_record_logger();
        let svc = match Service::open(config) {
            Ok(s) => s,
            Err(e @ OpenError::Config(_)) => return fail(botspace_status::InvalidConfig, e.to_string()),
            Err(e) => return fail(botspace_status::StorageError, e.to_string()),
        };
        out_service.write(botspace_service::new(svc).into_raw());
        botspace_status::Ok
    })
}

/// Releases a service handle and sets `*service` to NULL. Accepts NULL and a
/// pointer to NULL, so a second call on the same variable does nothing. The
/// wake-up callback is unregistered before this returns, so its user data
/// may be released afterwards. Gateways still open keep the underlying
/// service alive until they are freed. Must not run concurrently with any
/// other call on the same handle.
///
/// # Safety
/// `*service` must be NULL or a handle from `botspace_service_open` that was
/// not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_free(service: *mut *mut botspace_service) {
    // SAFETY: the contract above.
    unsafe { Handle::free(service) }
}

/// Handles one complete HTTP/1.1 request (request line, headers and body)
/// and writes the complete HTTP/1.1 response to `*out_response` (free it
/// with `botspace_bytes_free`). Every HTTP outcome, including 4xx and 5xx,
/// is `BOTSPACE_STATUS_OK`. The simple entry: it never parks (a getUpdates
/// with a `timeout` is answered at once, as with `timeout` 0) and names no
/// client; `botspace_service_handle` does both, for many requests at once.
/// A C host with one request at a time calls it (tests/c/example.c, the
/// C++ wrapper's `Service::handle_request`). Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `request` must point at `request_len`
/// readable bytes (or be NULL with length 0); `out_response` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_handle_request(
    service: *const botspace_service,
    request: *const u8,
    request_len: usize,
    out_response: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_response = arg!(out out_response);
        let req = arg!(bytes request, request_len);
        let resp = service.svc.handle_request(req);
        out_response.write(botspace_bytes::from_vec(resp));
        botspace_status::Ok
    })
}

/// Tells a host reading a TCP stream where the first request in
/// `buf[0..buf_len]` ends; see `botspace_framing_kind`. Bodies larger than
/// the configured `max_body_bytes` are refused from the headers alone.
/// Always free `out_framing->error_response`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `buf` must point at `buf_len` readable
/// bytes (or be NULL with length 0); `out_framing` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_frame_request(
    service: *const botspace_service,
    buf: *const u8,
    buf_len: usize,
    out_framing: *mut botspace_framing,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_framing = arg!(out out_framing);
        let b = arg!(bytes buf, buf_len);
        out_framing.write(framing(service.svc.frame_request(b)));
        botspace_status::Ok
    })
}

/// Registers the wake-up callback (see `botspace_wake_callback` for which
/// thread calls it and what it may do), replacing any earlier one; a NULL
/// `callback` removes it. `user_data` is passed back unchanged and must stay
/// valid until the callback is replaced or removed, or the service freed.
/// Thread-safe; a callback already running on another thread may finish
/// after this returns.
///
/// # Safety
/// `service` must be a live handle; `callback` must be safe to call from any
/// thread with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_set_wake_callback(
    service: *const botspace_service,
    callback: botspace_wake_callback,
    user_data: *mut c_void,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let svc = &service.svc;
        match callback {
            None => svc.set_wake_hook(None),
            Some(cb) => {
                let ud = UserData(user_data);
                svc.set_wake_hook(Some(Arc::new(move |bot_id: &str| {
                    let data = ud.get();
                    let mut stack = [0u8; 128];
                    let bytes = bot_id.as_bytes();
                    if bytes.len() < stack.len() && !bytes.contains(&0) {
                        stack[..bytes.len()].copy_from_slice(bytes);
                        // SAFETY: the host's callback, with a NUL-terminated id.
                        unsafe { cb(data, stack.as_ptr() as *const c_char, bytes.len()) };
                    } else if let Ok(c) = CString::new(bytes) {
                        // SAFETY: as above.
                        unsafe { cb(data, c.as_ptr(), bytes.len()) };
                    }
                })));
            }
        }
        botspace_status::Ok
    })
}

/// Registers the operator-line callback (see `botspace_log_callback`),
/// replacing any earlier one; a NULL `callback` removes it. `user_data`
/// is passed back unchanged and must stay valid until the callback is
/// replaced or removed, or the service freed. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `callback` must be safe to call from any
/// thread with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_set_log_callback(
    service: *const botspace_service,
    callback: botspace_log_callback,
    user_data: *mut c_void,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let svc = &service.svc;
        match callback {
            None => svc.set_log_hook(None),
            Some(cb) => {
                let ud = UserData(user_data);
                svc.set_log_hook(Some(Arc::new(move |ev: &botspace::log::Event| {
                    let unix_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64);
                    let (text, json) = (ev.text(), ev.json(unix_ms));
                    if let (Ok(t), Ok(j)) = (CString::new(text), CString::new(json)) {
                        let (tl, jl) = (t.as_bytes().len(), j.as_bytes().len());
                        // SAFETY: the host's callback, with NUL-terminated lines.
                        unsafe { cb(ud.get(), ev.level as i32, t.as_ptr(), tl, j.as_ptr(), jl) };
                    }
                })));
            }
        }
        botspace_status::Ok
    })
}

/// Writes the service clock's current time (Unix milliseconds) to `*out_ms`.
/// Pass it to the gateway functions so a manual clock (configuration
/// `"clock": "manual"`, moved by `/admin/advanceClock`) drives heartbeats
/// too. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_ms` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_now_ms(
    service: *const botspace_service,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_ms = arg!(out out_ms);
        out_ms.write(service.svc.now_ms());
        botspace_status::Ok
    })
}

/// The host begins a graceful stop (call it first thing on SIGTERM): from
/// now on `GET /readyz` answers 503 `shutting_down`, while every other
/// request is answered as before. It cannot be undone. Thread-safe.
///
/// # Safety
/// `service` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_begin_shutdown(service: *const botspace_service) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        service.svc.begin_shutdown();
        botspace_status::Ok
    })
}

/// The host closed a waiting connection to admit a new one at its
/// connection limit: counted in `botspace_connection_evictions_total`
/// (`GET /admin/metrics`). Thread-safe.
///
/// # Safety
/// `service` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_note_connection_evicted(service: *const botspace_service) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        service.svc.note_connection_evicted();
        botspace_status::Ok
    })
}

/// The host answered 408 to a request that did not arrive whole in time:
/// counted in `botspace_request_timeouts_total`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_note_request_timeout(service: *const botspace_service) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        service.svc.note_request_timeout();
        botspace_status::Ok
    })
}

/// `botspace_incoming.flags`: answer now, never park. A getUpdates with a
/// `timeout` that finds nothing answers `[]` at once, as with `timeout` 0
/// (for a host that cannot hold a connection open).
pub const BOTSPACE_INCOMING_AT_ONCE: u32 = 1;

/// `botspace_incoming.flags`: the request arrived concurrently with the
/// others of its array (each from a connection of its own, as a batch
/// queue's take). No order among them is the client's, so on a database
/// several nodes share a run of such requests commits in the one lock
/// order every node uses, and two nodes never deadlock. Without it the
/// array's order is kept.
pub const BOTSPACE_INCOMING_UNORDERED: u32 = 2;

/// One request for `botspace_service_handle`, borrowed for the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_incoming {
    /// One complete HTTP/1.1 request (request line, headers and body), as
    /// `botspace_service_frame_request` delimits it; NULL when
    /// `request_len` is 0.
    pub request: *const u8,
    pub request_len: usize,
    /// Who sent it (UTF-8, not NUL-terminated): the IP address of the
    /// immediate peer, or any stable key of the client; NULL with
    /// `peer_len` 0 when unknown. With it admin logins are throttled per
    /// client: 10 attempts at once, then one every 6 s (and per /24 or
    /// /64: 50, then one every 1.2 s); beyond that every admin request of
    /// that client is answered 429 `rate_limited` (scope `admin_auth`),
    /// whatever its credential. When `peer` is inside the configuration's
    /// `trusted_proxies`, the client is the address those proxies forwarded
    /// (`X-Forwarded-For` or `Forwarded`); a host-API change is audited
    /// with the client.
    pub peer: *const c_char,
    pub peer_len: usize,
    /// `BOTSPACE_INCOMING_AT_ONCE`, `BOTSPACE_INCOMING_UNORDERED`, or'ed;
    /// 0 for neither. Other bits are refused.
    pub flags: u32,
}

/// What `botspace_service_handle` did with one request: answered now
/// (`response` holds the whole HTTP/1.1 response, free it with
/// `botspace_bytes_free`; `poll_id` is 0), or parked (`response` is
/// `{NULL, 0}` and `poll_id` names the poll, never 0: hold the connection
/// and send what `botspace_service_poll_parked` returns for it, or call
/// `botspace_service_cancel_parked` if the client goes away).
#[repr(C)]
#[derive(Debug)]
pub struct botspace_handled {
    pub response: botspace_bytes,
    pub poll_id: u64,
}

/// The one typed way in: answers `count` requests (`requests[0..count]`),
/// in order, one `botspace_handled` each in `out_handled[i]` (an array of
/// `count` elements the caller provides). `now_ms` is the host's clock
/// (Unix ms, as for the gateway; `botspace_service_now_ms` under a manual
/// clock).
/// - A run of requests next to each other (bot writes such as
///   `sendMessage`, getMe, host calls without a peer) commits as one group:
///   one transaction and one fsync, each request answered exactly as if it
///   ran alone; a failing request leaves no trace; if the final commit
///   fails, every request that had succeeded answers 500.
/// - A getUpdates with a `timeout` that finds nothing to return parks
///   (unless `BOTSPACE_INCOMING_AT_ONCE`): it waits for its bot's next
///   event or its deadline (`now_ms` + timeout); past the cap on parked
///   polls it is answered at once, as with `timeout` 0.
/// - A host call with its `peer` is answered alone, behind the login
///   throttle of that client, and audited with it.
///
/// Every answer is durable before this returns; every HTTP outcome,
/// including 4xx and 5xx, is `BOTSPACE_STATUS_OK`. A request that is not
/// valid as an input (NULL with a length) or unknown flags fail the whole
/// call (`BOTSPACE_STATUS_NULL_ARGUMENT`, `BOTSPACE_STATUS_INVALID_ARGUMENT`,
/// the element named in `botspace_last_error_message`) and nothing is
/// written. `count` 0 is OK and writes nothing (then both arrays may be
/// NULL). A C host that reads its own sockets calls it, and the C++
/// wrapper's `Service::handle` (the C server's loop answers through
/// `botspace_http_round_serve`, which drives the same core entry).
/// Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `requests` must point at `count`
/// `botspace_incoming` values whose `request` and `peer` point at
/// `request_len` and `peer_len` readable bytes; `out_handled` must have
/// room for `count` values.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_handle(
    service: *const botspace_service,
    requests: *const botspace_incoming,
    count: usize,
    now_ms: u64,
    out_handled: *mut botspace_handled,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        if count == 0 {
            return botspace_status::Ok;
        }
        let requests = arg!(ptr requests);
        let out_handled = arg!(ptr out_handled);
        if count > isize::MAX as usize / std::mem::size_of::<botspace_incoming>() {
            return fail(botspace_status::InvalidArgument, "count is too large");
        }
        // SAFETY: the caller gives `count` values at `requests`.
        let given = unsafe { std::slice::from_raw_parts(requests, count) };
        let mut peers: Vec<Option<String>> = Vec::with_capacity(count);
        let mut bytes: Vec<(&[u8], u32)> = Vec::with_capacity(count);
        for (i, r) in given.iter().enumerate() {
            if r.flags & !(BOTSPACE_INCOMING_AT_ONCE | BOTSPACE_INCOMING_UNORDERED) != 0 {
                return fail(botspace_status::InvalidArgument, format!("requests[{i}].flags has unknown bits"));
            }
            // SAFETY: each element's pointers are valid inputs, as documented.
            let (req, peer) =
                match unsafe { (input(r.request, r.request_len, ""), input(r.peer.cast(), r.peer_len, "")) } {
                    (Ok(req), Ok(peer)) => (req, peer),
                    (Err(st), _) => {
                        return fail(
                            st,
                            format!("requests[{i}].request is NULL with a non-zero length, or its length is too large"),
                        )
                    }
                    (_, Err(st)) => {
                        return fail(
                            st,
                            format!("requests[{i}].peer is NULL with a non-zero length, or its length is too large"),
                        )
                    }
                };
            bytes.push((req, r.flags));
            peers.push((!peer.is_empty()).then(|| String::from_utf8_lossy(peer).into_owned()));
        }
        let incoming: Vec<botspace::Incoming<'_>> = bytes
            .iter()
            .zip(&peers)
            .map(|(&(req, flags), peer)| {
                let mut one = botspace::Incoming::bytes(req);
                if let Some(p) = peer {
                    one = one.from_peer(p);
                }
                if flags & BOTSPACE_INCOMING_AT_ONCE != 0 {
                    one = one.at_once();
                }
                if flags & BOTSPACE_INCOMING_UNORDERED != 0 {
                    one = one.unordered();
                }
                one
            })
            .collect();
        let svc = &service.svc;
        let handled = svc.handle(&incoming, now_ms);
        if handled.len() != count {
            return fail(botspace_status::Panic, "internal error: handle returned a wrong number of answers");
        }
        for (i, h) in handled.into_iter().enumerate() {
            let out = match h {
                botspace::Handled::Now(r) => botspace_handled { response: botspace_bytes::from_vec(r), poll_id: 0 },
                botspace::Handled::Parked(id) => botspace_handled { response: botspace_bytes::EMPTY, poll_id: id.0 },
            };
            // SAFETY: room for `count` values, i < count.
            unsafe { out_handled.add(i).write(out) };
        }
        botspace_status::Ok
    })
}

/// Takes one parked poll's answer that is ready at `now_ms`: a poll a
/// commit gave events (read now, durable before it is returned), or one
/// past its deadline (`[]`). `*out_poll_id` names it and `*out_response`
/// holds the whole HTTP response; `*out_poll_id` 0 (and `{NULL, 0}`) when
/// none is ready. Call it until it gives 0 after the wake-up callback has
/// run and when the time from `botspace_service_parked_timeout` comes.
/// Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_poll_id` and `out_response` must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_poll_parked(
    service: *const botspace_service,
    now_ms: u64,
    out_poll_id: *mut u64,
    out_response: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_poll_id = arg!(out out_poll_id);
        let out_response = arg!(out out_response);
        let mut ready = service.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.is_empty() {
            ready.extend(service.svc.poll_parked(now_ms));
        }
        let (id, resp) = match ready.pop_front() {
            Some((id, r)) => (id.0, botspace_bytes::from_vec(r)),
            None => (0, botspace_bytes::EMPTY),
        };
        out_poll_id.write(id);
        out_response.write(resp);
        botspace_status::Ok
    })
}

/// Writes when `botspace_service_poll_parked` must be called at the latest
/// (Unix ms): 0 when an answer is ready now, the earliest deadline of the
/// parked polls otherwise, `BOTSPACE_NO_DEADLINE` with none parked.
/// Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_ms` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_parked_timeout(
    service: *const botspace_service,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_ms = arg!(out out_ms);
        let buffered = !service.ready.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        let at = if buffered { Some(0) } else { service.svc.parked_timeout() };
        out_ms.write(at.unwrap_or(BOTSPACE_NO_DEADLINE));
        botspace_status::Ok
    })
}

/// Forgets a parked poll whose client went away (its answer, if already
/// taken from the core, is dropped). Unknown ids are ignored. Thread-safe.
///
/// # Safety
/// `service` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_cancel_parked(
    service: *const botspace_service,
    poll_id: u64,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let id = botspace::PollId(poll_id);
        service.svc.cancel_parked(id);
        service.ready.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
        botspace_status::Ok
    })
}

/// The example servers' demo: the start-up lines to print as they are
/// (UTF-8, each ending in a newline) in `*out_lines` (free it with
/// `botspace_bytes_free`). On a database with no bot it creates a demo
/// user, a demo bot (handle `demo_bot`) and their started private chat and
/// prints the bot's token and an `export BOTSPACE_TOKEN=... BOTSPACE_CHAT=...
/// BOTSPACE_USER=...` line. On a later start the demo bot is found again:
/// with `rotate_token` its token is rotated (the previous one stops
/// working) and printed the same way; without, the lines say how to get a
/// working token (`--demo-token`, the example servers' flag for
/// `rotate_token`, or a `rotateBotToken` call). `base[0..base_len]` is the
/// server's URL for bots (`http://127.0.0.1:8080`), `admin_base` the one
/// serving `/admin/` (the same unless the host API has an address of its
/// own). A failed host call is `BOTSPACE_STATUS_STORAGE_ERROR` with the
/// call and its error in `botspace_last_error_message`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `base` and `admin_base` must point at
/// `base_len` and `admin_base_len` readable bytes; `out_lines` must be
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_demo_start(
    service: *const botspace_service,
    base: *const c_char,
    base_len: usize,
    admin_base: *const c_char,
    admin_base_len: usize,
    rotate_token: bool,
    out_lines: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_lines = arg!(out out_lines);
        let base = arg!(text base, base_len);
        let admin_base = arg!(text admin_base, admin_base_len);
        let svc = &service.svc;
        match botspace_runtime::demo::start(svc, &base, &admin_base, rotate_token) {
            Ok(lines) => {
                out_lines.write(botspace_bytes::from_vec(lines.into_bytes()));
                botspace_status::Ok
            }
            Err(e) => fail(botspace_status::StorageError, format!("cannot create the demo data: {e}")),
        }
    })
}

/// Writes whether the service can hear other nodes' commits: true when its
/// database is PostgreSQL and `listen_notify` (configuration, default
/// true) is on. Only then run `botspace_service_wait_store_notifications`
/// in a loop; otherwise that call returns at once. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_available` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_has_store_notifications(
    service: *const botspace_service,
    out_available: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_available = arg!(out out_available);
        out_available.write(service.svc.has_store_notifications());
        botspace_status::Ok
    })
}

/// Blocks the calling thread at most `timeout_ms` milliseconds for
/// notifications from other nodes sharing the PostgreSQL database, handles
/// them and writes how many arrived to `*out_count`. Run it in a loop on a
/// thread of its own (it never takes the lock requests take), when
/// `botspace_service_has_store_notifications` says so; otherwise it returns
/// at once with a count of 0.
///
/// A commit on another node that gave bots events, or ended their gateway
/// connections (token rotated, bot suspended), names those bots. The wake-up
/// callback is then called, on this thread, for each of them that has a
/// gateway connection here, and their connections look at the database at
/// the next `botspace_gateway_poll_transmit` (a notification is only a
/// hint: what they send, or a 4004 close, comes from what they read). So
/// other nodes' events arrive in milliseconds instead of at the next
/// `gateway_poll_interval_ms` poll, which remains the fallback.
///
/// It listens on a second database connection, opened by the first call; a
/// call that opens it returns at once and wakes every bot with a connection
/// here (what was sent before it listened is lost). When that connection
/// breaks it returns `BOTSPACE_STATUS_STORAGE_ERROR` (details in
/// `botspace_last_error_message`) and the next call reconnects: loop,
/// pausing about a second after an error. Thread-safe; concurrent calls take
/// turns. Stop the loop (and join its thread) before
/// `botspace_service_free`.
///
/// # Safety
/// `service` must be a live handle; `out_count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_wait_store_notifications(
    service: *const botspace_service,
    timeout_ms: u64,
    out_count: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_count = arg!(out out_count);
        let svc = &service.svc;
        match svc.wait_store_notifications(timeout_ms) {
            Ok(n) => {
                out_count.write(n);
                botspace_status::Ok
            }
            Err(e) => fail(botspace_status::StorageError, e.to_string()),
        }
    })
}
