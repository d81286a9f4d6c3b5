//! The C ABI of botspace: `include/botspace.h` is generated from this file
//! by cbindgen, so the doc comments here are the header's documentation.
//!
//! Conventions (in the manner of rustls-ffi):
//! - opaque handles (`botspace_service`, `botspace_gateway`), created by one
//!   function and released by one `_free` function;
//! - every function that can fail returns a `botspace_status`, 0 is OK;
//! - every body runs inside [`ffi_boundary!`], so no Rust panic unwinds into
//!   C: a panic becomes `BOTSPACE_STATUS_PANIC`;
//! - NULL pointers are checked and refused with `BOTSPACE_STATUS_NULL_ARGUMENT`,
//!   except that a NULL input pointer with length 0 is an empty input;
//! - output parameters are written only when the call returns OK;
//! - output bytes are a `botspace_bytes {ptr, len}` released by
//!   `botspace_bytes_free`, which accepts NULL and empty values.
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

use botspace::{CloseCode, Config, Framing, GatewayConnection, OpenError, Service};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// The result of every fallible call. The values are fixed and will never
/// change meaning; new values may be added. `botspace_status_message`
/// gives a static description and `botspace_last_error_message` the detail
/// of the last failure on the calling thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_status {
    /// Success; outputs were written.
    Ok = 0,
    /// A required pointer argument was NULL (an input pointer may be NULL
    /// only when its length is 0).
    NullArgument = 1,
    /// The configuration JSON was malformed or named an invalid value.
    InvalidConfig = 2,
    /// The database could not be opened, created or migrated; or, from
    /// `botspace_service_wait_store_notifications`, the connection that
    /// listens for other nodes' commits could not be opened or broke.
    StorageError = 3,
    /// An argument is out of range (e.g. a length above `PTRDIFF_MAX`).
    InvalidArgument = 4,
    /// An internal error (a Rust panic) was caught at the boundary; no
    /// output was written and the handle stays usable. Please report it.
    Panic = 5,
}

/// Borrowed input bytes, used for the requests of
/// `botspace_service_handle_batch`. `ptr` may be NULL when `len` is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_slice {
    pub ptr: *const u8,
    pub len: usize,
}

/// Bytes owned by the caller after a successful call. Release them with
/// `botspace_bytes_free` (exactly once, or any number of times on the same
/// variable, since it resets the value to `{NULL, 0}`). An empty output is
/// `{NULL, 0}`. The bytes are not NUL-terminated.
#[repr(C)]
#[derive(Debug)]
pub struct botspace_bytes {
    pub ptr: *mut u8,
    pub len: usize,
}

/// What `botspace_service_frame_request` found at the start of a buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_framing_kind {
    /// A whole request occupies the first `length` bytes: pass exactly those
    /// to `botspace_service_handle_request` (or `botspace_gateway_accept`)
    /// and keep the rest for the next request (pipelining).
    Complete = 0,
    /// Read more bytes and ask again.
    Incomplete = 1,
    /// The stream cannot carry a valid request: write `error_response`,
    /// then close the connection.
    Invalid = 2,
}

/// The result of `botspace_service_frame_request`. `error_response` is
/// `{NULL, 0}` unless `kind` is `BOTSPACE_FRAMING_KIND_INVALID`; releasing it
/// with `botspace_bytes_free` is always correct.
#[repr(C)]
#[derive(Debug)]
pub struct botspace_framing {
    pub kind: botspace_framing_kind,
    /// Length of the complete request (`COMPLETE` only, else 0).
    pub length: usize,
    /// The HTTP response to send before closing (`INVALID` only).
    pub error_response: botspace_bytes,
}

/// `botspace_gateway_poll_timeout` writes this when no timeout is due: the
/// connection is closed.
pub const BOTSPACE_NO_DEADLINE: u64 = u64::MAX;

/// The memory budget of one connection's answers (the core's
/// `MAX_UNSENT_BYTES_PER_CONNECTION`): a server takes no further request
/// from a connection (frames none from its buffer, reads none from its
/// socket) while it holds this many bytes or more of answers the client has
/// not read. `botspace_should_read` applies it.
pub const BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION: usize = 64 * 1024;
const _: () = assert!(BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION == botspace::MAX_UNSENT_BYTES_PER_CONNECTION);

/// Whether a server may take a connection's next request (frame it from its
/// buffer, or read its socket for one) while `unsent_bytes` of answers to
/// that connection still wait for the client to read them: true below
/// `BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION`. Cannot fail; any thread.
#[no_mangle]
pub extern "C" fn botspace_should_read(unsent_bytes: usize) -> bool {
    botspace::should_read(unsent_bytes)
}

/// The wake-up callback: botspace calls it with a bot id after a change
/// gave that bot new gateway events, or ended its gateway connections (token
/// rotated, bot suspended). The host then polls that bot's gateway
/// connections.
///
/// It is called synchronously, inside the `botspace_service_handle_request`
/// or `botspace_service_handle_batch` call that ran the commit, on the
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
    svc: Arc<Service>,
    /// Parked polls' answers taken from the core and not yet handed out
    /// (`botspace_service_poll_parked` gives one per call).
    ready: std::sync::Mutex<std::collections::VecDeque<(botspace::PollId, Vec<u8>)>>,
}

/// One gateway (WebSocket) connection after a successful upgrade. Not
/// thread-safe: use it from one thread at a time (it may move between
/// threads). Different gateways may be used in parallel.
pub struct botspace_gateway {
    conn: GatewayConnection,
    bot_id: CString,
}

/// A request framer for one connection: like
/// `botspace_service_frame_request`, but it resumes where its previous call
/// stopped, so a request that arrives a byte at a time costs time linear in
/// its bytes (the stateless function rescans the buffer on every call).
pub struct botspace_request_framer {
    framer: botspace::RequestFramer,
    /// What `botspace_request_framer_head` reports: the head of the last
    /// COMPLETE request, or of the one being framed.
    head: Option<botspace::RequestHead>,
}

/// What the framer read from a request's head, so the host need not parse
/// it again (`botspace_request_framer_head`). Offsets count from the first
/// byte of the request (the start of the buffer given to
/// `botspace_request_framer_frame`). Plain data: copy it freely.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct botspace_request_head {
    /// Bytes of the request line, the header lines and the empty line.
    pub head_len: usize,
    /// Where the line after the request line starts (past its LF): a host
    /// that adds a header inserts it here.
    pub request_line_end: usize,
    /// The method: `request[method_start .. method_start + method_len]`.
    pub method_start: usize,
    pub method_len: usize,
    /// The path without its query: `request[path_start .. path_start + path_len]`.
    pub path_start: usize,
    pub path_len: usize,
    /// Where the first `Expect` header's name starts (`has_expect` only).
    pub expect_offset: usize,
    /// 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub http_minor: u8,
    /// The connection stays open after the answer: HTTP/1.1 without a
    /// `Connection: close` token, or HTTP/1.0 with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// A `Connection: close` token is present.
    pub close_token: bool,
    /// `Upgrade: websocket` with a `Connection: upgrade` token.
    pub upgrade: bool,
    /// `Expect: 100-continue`: the client may wait for `100 Continue`.
    pub expect_continue: bool,
    /// An `Expect` header is present (`expect_offset` is valid).
    pub has_expect: bool,
}

impl From<&botspace::RequestHead> for botspace_request_head {
    fn from(h: &botspace::RequestHead) -> Self {
        botspace_request_head {
            head_len: h.len,
            request_line_end: h.request_line_end,
            method_start: h.method_start,
            method_len: h.method_len,
            path_start: h.path_start,
            path_len: h.path_len,
            expect_offset: h.expect_offset.unwrap_or(0),
            http_minor: h.http_minor,
            keep_alive: h.keep_alive,
            close_token: h.close_token,
            upgrade: h.upgrade,
            expect_continue: h.expect_continue,
            has_expect: h.expect_offset.is_some(),
        }
    }
}

fn framing(f: Framing) -> botspace_framing {
    match f {
        Framing::Complete { len, .. } => botspace_framing {
            kind: botspace_framing_kind::Complete,
            length: len,
            error_response: botspace_bytes::EMPTY,
        },
        Framing::Incomplete => botspace_framing {
            kind: botspace_framing_kind::Incomplete,
            length: 0,
            error_response: botspace_bytes::EMPTY,
        },
        Framing::Invalid(r) => botspace_framing {
            kind: botspace_framing_kind::Invalid,
            length: 0,
            error_response: botspace_bytes::from_vec(r),
        },
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(msg: impl Into<String>) {
    let msg = msg.into();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = msg);
}

fn fail(status: botspace_status, msg: impl Into<String>) -> botspace_status {
    set_last_error(msg);
    status
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown panic payload");
    format!("internal error (panic) caught at the C boundary: {what}")
}

/// Runs a function body so that no panic crosses into C. The one-argument
/// form is for functions returning a `botspace_status` (a panic gives
/// `Panic`); the `on_panic = value;` form is for the few that return
/// something else.
macro_rules! ffi_boundary {
    (on_panic = $default:expr; $body:block) => {{
        match catch_unwind(AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(p) => {
                set_last_error(panic_message(&*p));
                drop(catch_unwind(AssertUnwindSafe(move || drop(p))));
                $default
            }
        }
    }};
    ($body:block) => {
        ffi_boundary!(on_panic = botspace_status::Panic; $body)
    };
}

/// Returns early with `NullArgument` when a pointer is NULL.
macro_rules! non_null {
    ($p:expr, $name:literal) => {
        if $p.is_null() {
            return fail(botspace_status::NullArgument, concat!("argument `", $name, "` is NULL"));
        }
    };
}

/// Releases the handle `*handle` points at and sets `*handle` to NULL, so a
/// second free of the same variable does nothing; NULL, and a pointer to
/// NULL, are accepted. Every `_free` of a boxed handle ends in it.
///
/// # Safety
/// `handle` must be NULL or point at NULL or at a pointer from
/// `Box::into_raw` that was not released through another copy.
pub(crate) unsafe fn free_handle<T>(handle: *mut *mut T) {
    if handle.is_null() {
        return;
    }
    // SAFETY: non-NULL pointer to a handle pointer (the caller's contract).
    let p = unsafe { std::ptr::replace(handle, std::ptr::null_mut()) };
    if !p.is_null() {
        // SAFETY: p came from Box::into_raw and is released once (the caller's contract).
        drop(unsafe { Box::from_raw(p) });
    }
}

// After the macros above, which it uses: the admission of a server's
// connections and the notification loop (`admission.rs`).
pub mod admission;
// The operator output and the start-up lines (`output.rs`), after the macros too.
pub mod output;

/// The input bytes `ptr[0..len]`; NULL with length 0 is empty.
///
/// # Safety
/// When non-NULL, `ptr` must point at `len` readable bytes.
unsafe fn input<'a>(ptr: *const u8, len: usize, name: &str) -> Result<&'a [u8], botspace_status> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(fail(botspace_status::NullArgument, format!("argument `{name}` is NULL with a length of {len}")));
    }
    if len > isize::MAX as usize {
        return Err(fail(botspace_status::InvalidArgument, format!("length of `{name}` is larger than PTRDIFF_MAX")));
    }
    // SAFETY: the caller promises `len` readable bytes at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

impl botspace_bytes {
    const EMPTY: botspace_bytes = botspace_bytes { ptr: std::ptr::null_mut(), len: 0 };

    fn from_vec(v: Vec<u8>) -> botspace_bytes {
        if v.is_empty() {
            return botspace_bytes::EMPTY;
        }
        let b: Box<[u8]> = v.into_boxed_slice();
        let len = b.len();
        botspace_bytes { ptr: Box::into_raw(b) as *mut u8, len }
    }
}

/// The library version, e.g. `"0.1.0"`: a static NUL-terminated string
/// that is never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn botspace_version() -> *const c_char {
    static V: OnceLock<CString> = OnceLock::new();
    ffi_boundary!(on_panic = c"unknown".as_ptr(); {
        V.get_or_init(|| CString::new(botspace::VERSION).unwrap_or_default()).as_ptr()
    })
}

/// A static, NUL-terminated description of a status value (unknown values
/// give "unknown status"); never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn botspace_status_message(status: u32) -> *const c_char {
    let s: &'static std::ffi::CStr = match status {
        0 => c"ok",
        1 => c"a required pointer argument was NULL",
        2 => c"the configuration is invalid",
        3 => c"the database could not be opened or reached",
        4 => c"an argument is out of range",
        5 => c"internal error (panic) caught at the C boundary",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// Copies the message of the last failed call made on this thread (empty if
/// none failed) into `buf` as a NUL-terminated string, truncated to fit
/// `buf_len` bytes, and writes its full length (without the NUL) to
/// `*out_len`, so a caller can pass `buf = NULL, buf_len = 0` to ask for the
/// size. The message is per thread and is replaced by the next failure.
/// Thread-safe.
///
/// # Safety
/// `buf`, when not NULL, must have `buf_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn botspace_last_error_message(
    buf: *mut c_char,
    buf_len: usize,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_len, "out_len");
        if buf.is_null() && buf_len != 0 {
            return fail(botspace_status::NullArgument, "argument `buf` is NULL with a non-zero buf_len");
        }
        let msg = LAST_ERROR.try_with(|e| e.borrow().clone()).unwrap_or_default();
        if buf_len > 0 {
            let n = msg.len().min(buf_len - 1);
            // SAFETY: the caller gives `buf_len` writable bytes; n < buf_len.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        // SAFETY: checked non-NULL above.
        unsafe { *out_len = msg.len() };
        botspace_status::Ok
    })
}

/// Releases bytes returned by any botspace call and resets `*bytes` to
/// `{NULL, 0}`. Accepts NULL, and an already released or empty value, so
/// calling it twice on the same variable is harmless. Thread-safe (for
/// different values).
///
/// # Safety
/// `*bytes` must be an output of botspace (or `{NULL, 0}`), not a copy of
/// one that was already released.
#[no_mangle]
pub unsafe extern "C" fn botspace_bytes_free(bytes: *mut botspace_bytes) {
    ffi_boundary!(on_panic = (); {
        if bytes.is_null() {
            return;
        }
        // SAFETY: non-NULL, and the caller passes a botspace_bytes.
        let b = unsafe { &mut *bytes };
        let (ptr, len) = (b.ptr, b.len);
        *b = botspace_bytes::EMPTY;
        if !ptr.is_null() && len != 0 {
            // SAFETY: ptr/len came from Box<[u8]>::into_raw in from_vec.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        }
    })
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
        non_null!(out_service, "out_service");
        // SAFETY: as documented above.
        let cfg = match unsafe { input(config_json, config_len, "config_json") } {
            Ok(c) => c,
            Err(s) => return s,
        };
        let config = match Config::from_json(cfg) {
            Ok(c) => c,
            Err(e) => return fail(botspace_status::InvalidConfig, e.to_string()),
        };
        // Before opening: migrations may have something to say.
        output::install_record_logger();
        let svc = match Service::open(config) {
            Ok(s) => s,
            Err(e @ OpenError::Config(_)) => return fail(botspace_status::InvalidConfig, e.to_string()),
            Err(e) => return fail(botspace_status::StorageError, e.to_string()),
        };
        let handle = Box::new(botspace_service { svc: Arc::new(svc), ready: Default::default() });
        // SAFETY: checked non-NULL above.
        unsafe { *out_service = Box::into_raw(handle) };
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
    ffi_boundary!(on_panic = (); {
        if service.is_null() {
            return;
        }
        // SAFETY: non-NULL pointer to a handle pointer.
        let p = unsafe { std::ptr::replace(service, std::ptr::null_mut()) };
        if p.is_null() {
            return;
        }
        // SAFETY: p came from Box::into_raw in botspace_service_open.
        let handle = unsafe { Box::from_raw(p) };
        handle.svc.set_wake_hook(None);
        handle.svc.set_log_hook(None);
        drop(handle);
    })
}

/// Handles one complete HTTP/1.1 request (request line, headers and body)
/// and writes the complete HTTP/1.1 response to `*out_response` (free it
/// with `botspace_bytes_free`). Every HTTP outcome, including 4xx and 5xx,
/// is `BOTSPACE_STATUS_OK`. Thread-safe.
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
        non_null!(service, "service");
        non_null!(out_response, "out_response");
        // SAFETY: as documented above.
        let req = match unsafe { input(request, request_len, "request") } {
            Ok(r) => r,
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let resp = svc.handle_request(req);
        // SAFETY: checked non-NULL above.
        unsafe { out_response.write(botspace_bytes::from_vec(resp)) };
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
        non_null!(service, "service");
        non_null!(out_framing, "out_framing");
        // SAFETY: as documented above.
        let b = match unsafe { input(buf, buf_len, "buf") } {
            Ok(b) => b,
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let f = framing(svc.frame_request(b));
        // SAFETY: checked non-NULL above.
        unsafe { out_framing.write(f) };
        botspace_status::Ok
    })
}

/// Handles `count` complete requests in one transaction (group commit):
/// each gets exactly the response it would get alone, written to
/// `out_responses[i]` (an array of `count` elements that the caller
/// provides; free each element with `botspace_bytes_free`). A failing
/// request leaves no trace; if the final commit fails, every request that
/// had succeeded answers 500. `count` 0 is OK and writes nothing (then both
/// arrays may be NULL). Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `requests` must point at `count`
/// `botspace_slice` values, each valid as an input; `out_responses` must
/// have room for `count` values.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_handle_batch(
    service: *const botspace_service,
    requests: *const botspace_slice,
    count: usize,
    out_responses: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        if count == 0 {
            return botspace_status::Ok;
        }
        non_null!(requests, "requests");
        non_null!(out_responses, "out_responses");
        if count > isize::MAX as usize / std::mem::size_of::<botspace_slice>() {
            return fail(botspace_status::InvalidArgument, "count is too large");
        }
        // SAFETY: the caller gives `count` slices at `requests`.
        let slices = unsafe { std::slice::from_raw_parts(requests, count) };
        let mut reqs: Vec<&[u8]> = Vec::with_capacity(count);
        for (i, s) in slices.iter().enumerate() {
            // SAFETY: each slice is valid as an input, as documented.
            match unsafe { input(s.ptr, s.len, "requests[i].ptr") } {
                Ok(r) => reqs.push(r),
                Err(st) => {
                    return fail(
                        st,
                        format!("requests[{i}].ptr is NULL with a non-zero length, or its length is too large"),
                    )
                }
            }
        }
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let reqs: Vec<botspace::Incoming<'_>> = reqs.iter().map(|r| botspace::Incoming::bytes(r).at_once()).collect();
        let out: Vec<Vec<u8>> = svc
            .handle(&reqs, svc.now_ms())
            .into_iter()
            .map(|a| match a {
                botspace::Answer::Now(o) => o,
                botspace::Answer::Parked(_) => botspace::policy::answer_failed(),
            })
            .collect();
        if out.len() != count {
            return fail(botspace_status::Panic, "internal error: handle returned a wrong number of answers");
        }
        for (i, r) in out.into_iter().enumerate() {
            // SAFETY: room for `count` values, i < count.
            unsafe { out_responses.add(i).write(botspace_bytes::from_vec(r)) };
        }
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
    /// The host's pointer; the host promises it may be used from any thread.
    #[derive(Clone, Copy)]
    struct UserData(*mut c_void);
    unsafe impl Send for UserData {}
    unsafe impl Sync for UserData {}
    impl UserData {
        fn get(self) -> *mut c_void {
            self.0
        }
    }
    ffi_boundary!({
        non_null!(service, "service");
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
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
    /// The host's pointer; the host promises it may be used from any thread.
    #[derive(Clone, Copy)]
    struct UserData(*mut c_void);
    unsafe impl Send for UserData {}
    unsafe impl Sync for UserData {}
    impl UserData {
        fn get(self) -> *mut c_void {
            self.0
        }
    }
    ffi_boundary!({
        non_null!(service, "service");
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
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
        non_null!(service, "service");
        non_null!(out_ms, "out_ms");
        // SAFETY: a live handle; out_ms checked.
        unsafe { *out_ms = (*service).svc.now_ms() };
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
        non_null!(service, "service");
        // SAFETY: a live handle.
        unsafe { (*service).svc.begin_shutdown() };
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
        non_null!(service, "service");
        // SAFETY: a live handle.
        unsafe { (*service).svc.note_connection_evicted() };
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
        non_null!(service, "service");
        // SAFETY: a live handle.
        unsafe { (*service).svc.note_request_timeout() };
        botspace_status::Ok
    })
}

/// `botspace_service_handle_request` for a host that knows who sent the
/// request: `peer[0..peer_len]` is the IP address of the immediate peer (or
/// any stable key of the client, UTF-8). Admin logins are then throttled
/// per client: 10 attempts at once, then one every 6 s (and per /24 or
/// /64: 50, then one every 1.2 s); beyond that every admin request of that
/// client is answered 429 `rate_limited` (scope `admin_auth`), whatever its
/// credential. When `peer` is inside the configuration's `trusted_proxies`,
/// the client is the address those proxies forwarded (`X-Forwarded-For` or
/// `Forwarded`). Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `request` must point at `request_len`
/// readable bytes and `peer` at `peer_len` (either may be NULL with length
/// 0); `out_response` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_handle_request_from(
    service: *const botspace_service,
    request: *const u8,
    request_len: usize,
    peer: *const c_char,
    peer_len: usize,
    out_response: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_response, "out_response");
        // SAFETY: as documented above.
        let req = match unsafe { input(request, request_len, "request") } {
            Ok(r) => r,
            Err(s) => return s,
        };
        // SAFETY: as documented above.
        let peer = match unsafe { input(peer.cast::<u8>(), peer_len, "peer") } {
            Ok(p) => String::from_utf8_lossy(p),
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let one = [botspace::Incoming::bytes(req).from_peer(&peer).at_once()];
        let resp = match svc.handle(&one, svc.now_ms()).pop() {
            Some(botspace::Answer::Now(r)) => r,
            _ => botspace::policy::answer_failed(),
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_response.write(botspace_bytes::from_vec(resp)) };
        botspace_status::Ok
    })
}

/// Answers one complete HTTP/1.1 request, or parks it: a `getUpdates`
/// with a `timeout` that finds nothing to return waits for its bot's next
/// event or its deadline (`now_ms` + timeout, Unix ms of the clock the host
/// passes in, as for the gateway). Answered now: `*out_response` holds the
/// response and `*out_poll_id` is 0. Parked: `*out_response` is `{NULL, 0}`
/// and `*out_poll_id` names the poll (never 0); hold the connection and
/// send what `botspace_service_poll_parked` returns for it, or call
/// `botspace_service_cancel_parked` if the client goes away. Any other
/// request is answered as by `botspace_service_handle_request_from`
/// (`peer` likewise). `botspace_service_handle_request` never parks: there
/// a getUpdates is answered at once, as with timeout 0. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `request` must point at `request_len`
/// readable bytes and `peer` at `peer_len` (either may be NULL with length
/// 0); `out_response` and `out_poll_id` must be writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C call names each input and output
pub unsafe extern "C" fn botspace_service_answer_request(
    service: *const botspace_service,
    request: *const u8,
    request_len: usize,
    peer: *const c_char,
    peer_len: usize,
    now_ms: u64,
    out_response: *mut botspace_bytes,
    out_poll_id: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_response, "out_response");
        non_null!(out_poll_id, "out_poll_id");
        // SAFETY: as documented above.
        let req = match unsafe { input(request, request_len, "request") } {
            Ok(r) => r,
            Err(s) => return s,
        };
        // SAFETY: as documented above.
        let peer = match unsafe { input(peer.cast::<u8>(), peer_len, "peer") } {
            Ok(p) => String::from_utf8_lossy(p),
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let (resp, id) = match svc.handle(&[botspace::Incoming::bytes(req).from_peer(&peer)], now_ms).pop() {
            Some(botspace::Answer::Now(r)) => (botspace_bytes::from_vec(r), 0),
            Some(botspace::Answer::Parked(id)) => (botspace_bytes::EMPTY, id.0),
            None => (botspace_bytes::from_vec(botspace::policy::answer_failed()), 0),
        };
        // SAFETY: checked non-NULL above.
        unsafe {
            out_response.write(resp);
            out_poll_id.write(id);
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
        non_null!(service, "service");
        non_null!(out_poll_id, "out_poll_id");
        non_null!(out_response, "out_response");
        // SAFETY: a live handle.
        let service = unsafe { &*service };
        let mut ready = service.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.is_empty() {
            ready.extend(service.svc.poll_parked(now_ms));
        }
        let (id, resp) = match ready.pop_front() {
            Some((id, r)) => (id.0, botspace_bytes::from_vec(r)),
            None => (0, botspace_bytes::EMPTY),
        };
        // SAFETY: checked non-NULL above.
        unsafe {
            out_poll_id.write(id);
            out_response.write(resp);
        }
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
        non_null!(service, "service");
        non_null!(out_ms, "out_ms");
        // SAFETY: a live handle.
        let service = unsafe { &*service };
        let buffered = !service.ready.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        let at = if buffered { Some(0) } else { service.svc.parked_timeout() };
        // SAFETY: checked non-NULL above.
        unsafe { *out_ms = at.unwrap_or(BOTSPACE_NO_DEADLINE) };
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
        non_null!(service, "service");
        // SAFETY: a live handle.
        let service = unsafe { &*service };
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
        non_null!(service, "service");
        non_null!(out_lines, "out_lines");
        // SAFETY: as documented above.
        let base = match unsafe { input(base.cast::<u8>(), base_len, "base") } {
            Ok(b) => String::from_utf8_lossy(b),
            Err(s) => return s,
        };
        // SAFETY: as documented above.
        let admin_base = match unsafe { input(admin_base.cast::<u8>(), admin_base_len, "admin_base") } {
            Ok(b) => String::from_utf8_lossy(b),
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        match botspace_runtime::demo::start(svc, &base, &admin_base, rotate_token) {
            Ok(lines) => {
                // SAFETY: checked non-NULL above.
                unsafe { out_lines.write(botspace_bytes::from_vec(lines.into_bytes())) };
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
        non_null!(service, "service");
        non_null!(out_available, "out_available");
        // SAFETY: a live handle; out_available checked.
        unsafe { *out_available = (*service).svc.has_store_notifications() };
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
        non_null!(service, "service");
        non_null!(out_count, "out_count");
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        match svc.wait_store_notifications(timeout_ms) {
            Ok(n) => {
                // SAFETY: checked non-NULL above.
                unsafe { *out_count = n };
                botspace_status::Ok
            }
            Err(e) => fail(botspace_status::StorageError, e.to_string()),
        }
    })
}

/// Creates a request framer for one connection, with the service's
/// `max_body_bytes`. Give it the connection's unread bytes after every read
/// (`botspace_request_framer_frame`); release it with
/// `botspace_request_framer_free`. It does not keep the service alive.
///
/// # Safety
/// `service` must be a live handle; `out_framer` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_new(
    service: *const botspace_service,
    out_framer: *mut *mut botspace_request_framer,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_framer, "out_framer");
        // SAFETY: a live handle.
        let framer = unsafe { (*service).svc.request_framer() };
        // SAFETY: checked non-NULL above.
        unsafe { *out_framer = Box::into_raw(Box::new(botspace_request_framer { framer, head: None })) };
        botspace_status::Ok
    })
}

/// Where the first request in `buf[0..buf_len]` ends, as
/// `botspace_service_frame_request` says, resuming where the previous call
/// stopped. Until it answers COMPLETE or INVALID, each call's buffer must
/// begin with the previous call's bytes (the host only appends); after such
/// an answer it starts over for the request at the start of the next
/// buffer (the host drops the framed bytes first). Always free
/// `out_framing->error_response`. Not thread-safe: one connection, one
/// thread at a time.
///
/// # Safety
/// `framer` must be a live handle not used by another thread; `buf` must
/// point at `buf_len` readable bytes (or be NULL with length 0);
/// `out_framing` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_frame(
    framer: *mut botspace_request_framer,
    buf: *const u8,
    buf_len: usize,
    out_framing: *mut botspace_framing,
) -> botspace_status {
    ffi_boundary!({
        non_null!(framer, "framer");
        non_null!(out_framing, "out_framing");
        // SAFETY: as documented above.
        let b = match unsafe { input(buf, buf_len, "buf") } {
            Ok(b) => b,
            Err(s) => return s,
        };
        // SAFETY: a live handle used by this thread only.
        let fr = unsafe { &mut *framer };
        let f = fr.framer.frame(b);
        fr.head = match &f {
            Framing::Complete { head, .. } => Some(*head),
            Framing::Incomplete => fr.framer.pending_head().copied(),
            Framing::Invalid(_) => None,
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_framing.write(framing(f)) };
        botspace_status::Ok
    })
}

/// The head of the request the last `botspace_request_framer_frame` call
/// framed: after COMPLETE, that request's; after INCOMPLETE, the head of
/// the request being framed once the head is whole and only body bytes
/// are missing (answer `Expect: 100-continue` from it). `*out_present` is
/// false, and `*out_head` zeroed, when there is none (before the head is
/// whole, after INVALID). Not thread-safe: the framer's thread only.
///
/// # Safety
/// `framer` must be a live handle not used by another thread; `out_head`
/// and `out_present` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_head(
    framer: *const botspace_request_framer,
    out_head: *mut botspace_request_head,
    out_present: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        non_null!(framer, "framer");
        non_null!(out_head, "out_head");
        non_null!(out_present, "out_present");
        // SAFETY: a live handle used by this thread only.
        let head = unsafe { (*framer).head.as_ref() };
        // SAFETY: checked non-NULL above.
        unsafe {
            out_head.write(head.map(botspace_request_head::from).unwrap_or_default());
            out_present.write(head.is_some());
        }
        botspace_status::Ok
    })
}

/// The most bytes one request can take on the wire under the framer's
/// limits (the service's `max_body_bytes`): a buffer at least this long
/// always frames as COMPLETE or INVALID. A host that reads a connection's
/// socket only while fewer unframed bytes than this are buffered bounds its
/// input buffer by it and never stalls a request (229 636 bytes with the
/// default 64 KiB body limit).
///
/// # Safety
/// `framer` must be a live handle; `out_bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_max_request_bytes(
    framer: *const botspace_request_framer,
    out_bytes: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        non_null!(framer, "framer");
        non_null!(out_bytes, "out_bytes");
        // SAFETY: a live handle; checked non-NULL above.
        unsafe { *out_bytes = (*framer).framer.max_request_bytes() };
        botspace_status::Ok
    })
}

/// Releases a framer and sets `*framer` to NULL; accepts NULL and a pointer
/// to NULL.
///
/// # Safety
/// `*framer` must be NULL or a handle from `botspace_request_framer_new`
/// not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_request_framer_free(framer: *mut *mut botspace_request_framer) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(framer) }
    })
}

/// Checks a complete `GET /bot/gateway` WebSocket upgrade request (as framed
/// by `botspace_service_frame_request`), received at `now_ms` (the
/// connection's heartbeat clock starts there). Always writes `*out_response`: the
/// `101 Switching Protocols` response, or a JSON error response (401, 403,
/// 426, 429 ...). On success `*out_gateway` receives a new connection; when
/// the upgrade is refused it receives NULL and the host sends the response
/// and goes on with HTTP (or closes). Both outputs are written only when
/// the call returns OK. Write the response, then give the connection the
/// bytes that followed the request (`botspace_gateway_handle_input`) and
/// drain `botspace_gateway_poll_transmit`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `request` must point at `request_len`
/// readable bytes (or be NULL with length 0); both outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_accept(
    service: *const botspace_service,
    request: *const u8,
    request_len: usize,
    now_ms: u64,
    out_response: *mut botspace_bytes,
    out_gateway: *mut *mut botspace_gateway,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_response, "out_response");
        non_null!(out_gateway, "out_gateway");
        // SAFETY: as documented above.
        let req = match unsafe { input(request, request_len, "request") } {
            Ok(r) => r,
            Err(s) => return s,
        };
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let acc = svc.accept_gateway(req, now_ms);
        let gw = match acc.connection {
            None => std::ptr::null_mut(),
            Some(conn) => {
                let bot_id = CString::new(conn.bot_id()).unwrap_or_default();
                Box::into_raw(Box::new(botspace_gateway { conn, bot_id }))
            }
        };
        // SAFETY: both checked non-NULL above.
        unsafe {
            out_response.write(botspace_bytes::from_vec(acc.response));
            *out_gateway = gw;
        }
        botspace_status::Ok
    })
}

/// Hands the connection the bytes read from the socket (`bytes[0..len]`),
/// received at `now_ms` (Unix milliseconds; the gateway reads no clock of
/// its own: pass `botspace_service_now_ms` for the service's clock).
/// Complete frames are handled at once; partial frames wait for more bytes.
/// Then drain `botspace_gateway_poll_transmit`. Not thread-safe: one thread
/// at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `bytes`
/// must point at `len` readable bytes (or be NULL with length 0).
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_handle_input(
    gateway: *mut botspace_gateway,
    bytes: *const u8,
    len: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        // SAFETY: as documented above.
        let b = match unsafe { input(bytes, len, "bytes") } {
            Ok(b) => b,
            Err(s) => return s,
        };
        // SAFETY: a live handle used by this thread only.
        unsafe { (*gateway).conn.handle_input(b, now_ms) };
        botspace_status::Ok
    })
}

/// Tells the connection the time is `now_ms`: the heartbeat deadline is
/// checked (a bot silent for two intervals is closed with 4009). Call it
/// when `botspace_gateway_poll_timeout`'s time is reached, or on every
/// loop turn. Not thread-safe: one thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_handle_timeout(
    gateway: *mut botspace_gateway,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        // SAFETY: a live handle used by this thread only.
        unsafe { (*gateway).conn.handle_timeout(now_ms) };
        botspace_status::Ok
    })
}

/// Bytes of unsent output a gateway connection may give its host (see
/// `botspace_gateway_handle_unsent`): past them
/// `botspace_gateway_poll_transmit` gives nothing more, and a bot that
/// leaves them unread for two heartbeat intervals is closed with 4008
/// `slow_consumer`.
pub const BOTSPACE_GATEWAY_OUTPUT_BUDGET: usize = 256 * 1024;
// A literal for cbindgen, held to the core's figure here.
const _: () = assert!(BOTSPACE_GATEWAY_OUTPUT_BUDGET == botspace::gateway::OUTPUT_BUDGET);

/// Bytes of replies to the bot's own input (pongs, heartbeat acks) a
/// gateway connection holds while its output waits, before it stops taking
/// input (`botspace_gateway_wants_input`).
pub const BOTSPACE_GATEWAY_REPLY_BUDGET: usize = 64 * 1024;
const _: () = assert!(BOTSPACE_GATEWAY_REPLY_BUDGET == botspace::gateway::REPLY_BUDGET);

/// The host holds `unsent` bytes of what `botspace_gateway_poll_transmit`
/// gave, not yet taken by the socket, at `now_ms`: call it after writing
/// and before each `botspace_gateway_handle_timeout` /
/// `botspace_gateway_poll_transmit`. From the first call on the connection
/// keeps count: `poll_transmit` gives nothing more while the host holds
/// `BOTSPACE_GATEWAY_OUTPUT_BUDGET`, and if it holds that much for two
/// heartbeat intervals the next `botspace_gateway_handle_timeout` closes
/// the session with 4008 `slow_consumer` (its close frame is the next
/// thing `poll_transmit` gives; `poll_event` reports it). Not thread-safe:
/// one thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_handle_unsent(
    gateway: *mut botspace_gateway,
    unsent: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        // SAFETY: a live handle used by this thread only.
        unsafe { (*gateway).conn.handle_unsent(unsent, now_ms) };
        botspace_status::Ok
    })
}

/// Writes whether the host should read the socket now: false while the
/// replies the bot's input queued fill `BOTSPACE_GATEWAY_REPLY_BUDGET`
/// (the bot is not reading them), while bytes handed in still wait, and
/// once the bot's side is gone. A host that reads anyway gets its bytes
/// kept unread until the bot has read. Not thread-safe: one thread at a
/// time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out` must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_wants_input(
    gateway: *const botspace_gateway,
    out: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out, "out");
        // SAFETY: a live handle; out checked.
        unsafe { *out = (*gateway).conn.wants_input() };
        botspace_status::Ok
    })
}

/// Writes whether `botspace_gateway_poll_transmit` has output it held back
/// at the budget (or input waiting for its replies to leave) and the host,
/// as last reported, now has room: call it. Not thread-safe: one thread
/// at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out` must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_wants_transmit(
    gateway: *const botspace_gateway,
    out: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out, "out");
        // SAFETY: a live handle; out checked.
        unsafe { *out = (*gateway).conn.wants_transmit() };
        botspace_status::Ok
    })
}

/// Close code for `botspace_gateway_close`, and the one the library closes
/// with itself for a host that reports its unsent bytes: the bot read too
/// slowly (its unsent output stayed over the budget for two heartbeat
/// intervals); reason `slow_consumer`.
pub const BOTSPACE_CLOSE_SLOW_CONSUMER: u16 = 4008;

/// Close code for `botspace_gateway_close`: the server is shutting down;
/// reason `server_shutdown`.
pub const BOTSPACE_CLOSE_SERVER_SHUTDOWN: u16 = 1001;

/// The host ends the connection with close `code`, so that it need not
/// encode a close frame itself: `BOTSPACE_CLOSE_SLOW_CONSUMER` (4008
/// `slow_consumer`, a bot that reads too slowly) or
/// `BOTSPACE_CLOSE_SERVER_SHUTDOWN` (1001 `server_shutdown`). The next
/// `botspace_gateway_poll_transmit` gives the close frame, after the bytes
/// it gave before; what the session had queued and not yet given is
/// dropped (the bot resumes from its last ack). The acks the bot sent are
/// written and its connection slot is freed during this call (it takes
/// the database lock; on PostgreSQL one round trip to delete the lease);
/// `botspace_gateway_poll_event` then reports `CLOSED` with the code and
/// its reason. On a connection that has already ended it changes nothing
/// and returns `BOTSPACE_STATUS_OK`. Another code gives
/// `BOTSPACE_STATUS_INVALID_ARGUMENT` and changes nothing. Not
/// thread-safe: one thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_close(gateway: *mut botspace_gateway, code: u16) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        let Some(code) = botspace::gateway::host_close_reason(code) else {
            return fail(
                botspace_status::InvalidArgument,
                format!("close code {code} is not one a host may send (4008 slow_consumer, 1001 server_shutdown)"),
            );
        };
        // SAFETY: a live handle used by this thread only.
        unsafe { (*gateway).conn.close(code) };
        botspace_status::Ok
    })
}

/// Writes the next bytes to send to the socket to `*out_bytes`: the hello,
/// replayed and new events, heartbeat acks, a close frame. `{NULL, 0}`
/// means nothing now. Each call gives at most about 256 KiB: write them,
/// then call again until it gives nothing, so a bot far behind costs one
/// chunk of memory, not its whole backlog. Call it after
/// `botspace_gateway_handle_input`, after `botspace_gateway_handle_timeout`,
/// and after a wake-up for this connection's bot. Not thread-safe: one
/// thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out_bytes`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_poll_transmit(
    gateway: *mut botspace_gateway,
    out_bytes: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out_bytes, "out_bytes");
        let mut bytes = Vec::new();
        // SAFETY: a live handle used by this thread only.
        unsafe { (*gateway).conn.poll_transmit(&mut bytes) };
        // SAFETY: checked non-NULL above.
        unsafe { out_bytes.write(botspace_bytes::from_vec(bytes)) };
        botspace_status::Ok
    })
}

/// Writes when `botspace_gateway_handle_timeout` must be called at the
/// latest (the heartbeat deadline, the slow-consumer one while output
/// waits), in Unix milliseconds of the clock the host passes in, or
/// `BOTSPACE_NO_DEADLINE` once the connection is closed. Wake-ups come in
/// addition to this time. Not thread-safe: one thread at a time per
/// gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out_ms`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_poll_timeout(
    gateway: *const botspace_gateway,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out_ms, "out_ms");
        // SAFETY: a live handle; out_ms checked.
        unsafe { *out_ms = (*gateway).conn.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE) };
        botspace_status::Ok
    })
}

/// What `botspace_gateway_poll_event` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_gateway_event_kind {
    /// Nothing happened since the last call.
    None = 0,
    /// The session ended (reported once): `close_code` and `reason` say why.
    Closed = 1,
}

/// An event of a gateway connection. `reason` is a static NUL-terminated
/// string (never freed), NULL for `BOTSPACE_GATEWAY_EVENT_KIND_NONE`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_gateway_event {
    pub kind: botspace_gateway_event_kind,
    /// The close code sent to the bot (4001 `invalid_payload`, 4004
    /// `authentication_failed`, 4009 `session_timeout`, 4010
    /// `storage_unavailable` (PostgreSQL unreachable), 1007
    /// `invalid_utf8`, 1009 `message_too_big`), the bot's own code when it
    /// closed first (`closed_by_bot`; 1005 when its frame had none), or
    /// 1002 `protocol_error`.
    pub close_code: u16,
    pub reason: *const c_char,
}

/// The C string of each reason, from the same table as the core's
/// `CloseCode` (`words.rs`), so no reason can lack its C name.
fn static_reason(reason: CloseCode) -> *const c_char {
    reason.as_c_str().as_ptr()
}

/// Writes the connection's next event to `*out_event` (kind
/// `BOTSPACE_GATEWAY_EVENT_KIND_NONE` when there is none): how a host
/// learns why a session ended without parsing frames. Not thread-safe: one
/// thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out_event`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_poll_event(
    gateway: *mut botspace_gateway,
    out_event: *mut botspace_gateway_event,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out_event, "out_event");
        // SAFETY: a live handle used by this thread only.
        let ev = match unsafe { (*gateway).conn.poll_event() } {
            Some(botspace::GatewayEvent::Closed { code, reason }) => botspace_gateway_event {
                kind: botspace_gateway_event_kind::Closed,
                close_code: code,
                reason: static_reason(reason),
            },
            None => botspace_gateway_event {
                kind: botspace_gateway_event_kind::None,
                close_code: 0,
                reason: std::ptr::null(),
            },
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_event.write(ev) };
        botspace_status::Ok
    })
}

/// Writes whether the connection is over: once true, write the bytes of
/// the last poll, close the socket and free the gateway. Not thread-safe:
/// one thread at a time per gateway.
///
/// # Safety
/// `gateway` must be a live handle not used by another thread; `out_closed`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_is_closed(
    gateway: *const botspace_gateway,
    out_closed: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out_closed, "out_closed");
        // SAFETY: a live handle; out_closed checked.
        unsafe { *out_closed = (*gateway).conn.is_closed() };
        botspace_status::Ok
    })
}

/// Writes the id of the connection's bot to `*out_bot_id`: a NUL-terminated
/// string owned by the gateway, valid until it is freed (do not free it);
/// once obtained it may be read from any thread. Compare it with the id
/// given to the wake-up callback. Not thread-safe: call it while no other
/// thread uses the gateway.
///
/// # Safety
/// `gateway` must be a live handle; `out_bot_id` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_bot_id(
    gateway: *const botspace_gateway,
    out_bot_id: *mut *const c_char,
) -> botspace_status {
    ffi_boundary!({
        non_null!(gateway, "gateway");
        non_null!(out_bot_id, "out_bot_id");
        // SAFETY: a live handle; out checked.
        unsafe { *out_bot_id = (*gateway).bot_id.as_ptr() };
        botspace_status::Ok
    })
}

/// Releases a gateway (its connection slot is given back to the bot's
/// `gateway_connection_limit`) and sets `*gateway` to NULL. Accepts NULL and
/// a pointer to NULL, so a second call on the same variable does nothing.
/// Not thread-safe for the same gateway.
///
/// # Safety
/// `*gateway` must be NULL or a handle from `botspace_gateway_accept` that
/// was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_free(gateway: *mut *mut botspace_gateway) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(gateway) }
    })
}

// ---------------------------------------------------------------------------
// Gateway links: a gateway connection with its unsent output and its
// closing rules, for a host that only moves bytes

/// A gateway connection as a host with a raw socket drives it, from the
/// `101` to the socket's close: the session, the output the socket has not
/// taken, and the rules of its end (a close the server decides goes right
/// after the frame being written; the last writes; the lingering close).
/// Made from a `botspace_gateway` (`botspace_gateway_link_new`). Not
/// thread-safe: use it from one thread at a time.
pub struct botspace_gateway_link {
    link: botspace::gateway::GatewayLink,
    bot_id: CString,
}

/// Where a gateway link stands, for the host's poll loop. Plain data.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_gateway_link_info {
    /// OPEN while the session runs; CLOSING while its last bytes go out;
    /// LINGERING once they have (shut the write side, keep reading);
    /// CLOSED: close the socket and free the link.
    pub state: botspace_connection_state,
    /// Wait for the socket to be readable.
    pub wants_read: bool,
    /// Bytes `botspace_gateway_link_transmit` holds.
    pub unsent: usize,
    /// When to call `botspace_gateway_link_poll` at the latest, on the
    /// host's monotonic clock (the `mono_ms` passed in);
    /// `BOTSPACE_NO_DEADLINE` once closed.
    pub timeout_ms: u64,
    /// The close code the session ended with (sent or received), 0 while
    /// it runs: for the host's logs.
    pub close_code: u16,
}

/// The link of a gateway just accepted: takes `*gateway` (set to NULL) and
/// writes the link to `*out_link`. `head[0..head_len]` is written ahead of
/// the gateway's frames: the `101` from `botspace_gateway_accept`, after
/// any answers the connection had not sent (NULL with length 0 when the
/// host wrote them itself). `service` says which clock the session runs
/// on. Then call `botspace_gateway_link_poll` (or
/// `botspace_gateway_link_handle_input` with the bytes that followed the
/// request).
///
/// # Safety
/// `service` must be a live handle; `gateway` must point at a live gateway
/// handle not used by another thread; `head` must point at `head_len`
/// readable bytes (or be NULL with length 0); `out_link` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_new(
    service: *const botspace_service,
    gateway: *mut *mut botspace_gateway,
    head: *const u8,
    head_len: usize,
    out_link: *mut *mut botspace_gateway_link,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(gateway, "gateway");
        non_null!(out_link, "out_link");
        // SAFETY: as documented above.
        let head = match unsafe { input(head, head_len, "head") } {
            Ok(h) => h.to_vec(),
            Err(s) => return s,
        };
        // SAFETY: checked non-NULL; a live handle.
        let manual = unsafe { (*service).svc.config().clock == botspace::ClockKind::Manual };
        // SAFETY: a pointer to a handle pointer, checked non-NULL.
        let p = unsafe { std::ptr::replace(gateway, std::ptr::null_mut()) };
        if p.is_null() {
            return fail(botspace_status::NullArgument, "argument `*gateway` is NULL");
        }
        // SAFETY: p came from Box::into_raw in botspace_gateway_accept.
        let gw = unsafe { Box::from_raw(p) };
        let gw = *gw;
        let link = botspace::gateway::GatewayLink::new(gw.conn, manual, head);
        // SAFETY: checked non-NULL above.
        unsafe { *out_link = Box::into_raw(Box::new(botspace_gateway_link { link, bot_id: gw.bot_id })) };
        botspace_status::Ok
    })
}

macro_rules! live_link {
    (ref $l:expr) => {
        // SAFETY: the caller passes a live handle used by this thread only.
        match unsafe { $l.as_ref() } {
            Some(l) => &l.link,
            None => return fail(botspace_status::NullArgument, "argument `link` is NULL"),
        }
    };
    ($l:expr) => {
        // SAFETY: the caller passes a live handle used by this thread only.
        match unsafe { $l.as_mut() } {
            Some(l) => &mut l.link,
            None => return fail(botspace_status::NullArgument, "argument `link` is NULL"),
        }
    };
}

fn link_clock(now_ms: u64, mono_ms: u64) -> botspace::gateway::LinkClock {
    botspace::gateway::LinkClock { service_ms: now_ms, host_ms: mono_ms }
}

/// Bytes read from the socket: the session's input while it runs (then
/// the link runs it, as `botspace_gateway_link_poll`), discarded once it
/// is over. `now_ms` is the service's clock (`botspace_service_now_ms`),
/// `mono_ms` the host's monotonic one. May write acks and read the event
/// log (it blocks on the database).
///
/// # Safety
/// `link` must be a live handle used by this thread only; `bytes` must
/// point at `len` readable bytes (or be NULL with length 0).
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_handle_input(
    link: *mut botspace_gateway_link,
    bytes: *const u8,
    len: usize,
    now_ms: u64,
    mono_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        // SAFETY: as documented above.
        let b = match unsafe { input(bytes, len, "bytes") } {
            Ok(b) => b,
            Err(s) => return s,
        };
        live_link!(link).handle_input(b, link_clock(now_ms, mono_ms));
        botspace_status::Ok
    })
}

/// The bot closed its side: a running session ends (its last output still
/// goes, with no linger); a lingering link closes. May write acks.
///
/// # Safety
/// `link` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_handle_eof(
    link: *mut botspace_gateway_link,
    now_ms: u64,
    mono_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        live_link!(link).handle_eof(link_clock(now_ms, mono_ms));
        botspace_status::Ok
    })
}

/// Runs the link: the session's deadlines, its output up to the budget,
/// the end rules; a closing or lingering link whose time is up closes.
/// Call it when the info's `timeout_ms` comes and when the wake-up
/// callback names the link's bot. May write acks and read the event log
/// (it blocks on the database).
///
/// # Safety
/// `link` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_poll(
    link: *mut botspace_gateway_link,
    now_ms: u64,
    mono_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        live_link!(link).poll(link_clock(now_ms, mono_ms));
        botspace_status::Ok
    })
}

/// The host ends the session with close `code` (1001 `server_shutdown`
/// at a stop, 4008 `slow_consumer`): its close frame goes right after the
/// frame being written and the frames not begun are dropped. Writes false
/// to `*out_closed` (changing nothing) once the session is over. May write
/// acks. `BOTSPACE_STATUS_INVALID_ARGUMENT` for a code that is not a
/// host's.
///
/// # Safety
/// `link` must be a live handle used by this thread only; `out_closed`
/// must be writable or NULL.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_close(
    link: *mut botspace_gateway_link,
    code: u16,
    now_ms: u64,
    mono_ms: u64,
    out_closed: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let Some(code) = botspace::gateway::host_close_reason(code) else {
            return fail(botspace_status::InvalidArgument, format!("close code {code} is not one a host may send"));
        };
        let closed = live_link!(link).close(code, link_clock(now_ms, mono_ms));
        if !out_closed.is_null() {
            // SAFETY: non-NULL, writable as documented.
            unsafe { out_closed.write(closed) };
        }
        botspace_status::Ok
    })
}

/// The bytes to write to the socket, borrowed from the link: valid until
/// the next call that changes it. Say how many went with
/// `botspace_gateway_link_sent`.
///
/// # Safety
/// `link` must be a live handle used by this thread only; `out_ptr` and
/// `out_len` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_transmit(
    link: *const botspace_gateway_link,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_ptr, "out_ptr");
        non_null!(out_len, "out_len");
        let t = live_link!(ref link).transmit();
        // SAFETY: checked non-NULL above.
        unsafe { write_borrowed(t, out_ptr, out_len) };
        botspace_status::Ok
    })
}

/// The socket took the first `n` bytes of `transmit`. Touches no storage.
///
/// # Safety
/// `link` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_sent(
    link: *mut botspace_gateway_link,
    n: usize,
    now_ms: u64,
    mono_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        let l = live_link!(link);
        if n > l.transmit().len() {
            return fail(botspace_status::InvalidArgument, format!("sent {n} bytes of {} to send", l.transmit().len()));
        }
        l.sent(n, link_clock(now_ms, mono_ms));
        botspace_status::Ok
    })
}

/// Where the link stands (state, reading, deadline, close code).
///
/// # Safety
/// `link` must be a live handle used by this thread only; `out_info` must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_get_info(
    link: *const botspace_gateway_link,
    out_info: *mut botspace_gateway_link_info,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_info, "out_info");
        let l = live_link!(ref link);
        let state = botspace_connection_state::from(l.state());
        let info = botspace_gateway_link_info {
            state,
            wants_read: l.wants_read(),
            unsent: l.unsent(),
            timeout_ms: l.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE),
            close_code: l.close_reason().map_or(0, |(code, _)| code),
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_info.write(info) };
        botspace_status::Ok
    })
}

/// Writes the id of the link's bot to `*out_bot_id`: a NUL-terminated
/// string owned by the link, valid until it is freed (do not free it).
/// Compare it with the id given to the wake-up callback.
///
/// # Safety
/// `link` must be a live handle; `out_bot_id` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_bot_id(
    link: *const botspace_gateway_link,
    out_bot_id: *mut *const c_char,
) -> botspace_status {
    ffi_boundary!({
        non_null!(link, "link");
        non_null!(out_bot_id, "out_bot_id");
        // SAFETY: a live handle; out checked.
        unsafe { *out_bot_id = (*link).bot_id.as_ptr() };
        botspace_status::Ok
    })
}

/// Releases a link (a session still running writes its pending ack and
/// gives its connection slot back: it may block on the database) and sets
/// `*link` to NULL. Accepts NULL and a pointer to NULL.
///
/// # Safety
/// `*link` must be NULL or a handle from `botspace_gateway_link_new` that
/// was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_free(link: *mut *mut botspace_gateway_link) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(link) }
    })
}

// ---------------------------------------------------------------------------
// Webhook deliveries

/// The most of a webhook answer's body a host reads (the core's
/// `MAX_ANSWER_BYTES`): the body is not used, so a host stops the transfer
/// past this and reports the status it got.
pub const BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES: usize = 64 * 1024;
const _: () = assert!(BOTSPACE_WEBHOOK_MAX_ANSWER_BYTES == botspace::webhook::schedule::MAX_ANSWER_BYTES);

/// One webhook request the host is to send (`botspace_service_poll_webhook`),
/// then report with `botspace_service_webhook_outcome`. Release it with
/// `botspace_webhook_request_free` (before or after reporting). Not
/// thread-safe: use it from one thread at a time (it may move between
/// threads).
pub struct botspace_webhook_request {
    parts: botspace_webhook_request_parts,
    /// What the pointers in `parts` borrow.
    _host: CString,
    _path_and_query: CString,
    _host_header: CString,
    _url: CString,
    _header_lines: Vec<CString>,
    _header_ptrs: Vec<*const c_char>,
    _body: Vec<u8>,
    _http_bytes: Vec<u8>,
}

/// What a webhook request is, as borrowed views into its
/// `botspace_webhook_request` (valid until it is freed). Strings are
/// NUL-terminated. Plain data: copy it freely.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_webhook_request_parts {
    /// Pass it back to `botspace_service_webhook_outcome`.
    pub id: u64,
    /// `https` (TLS, verify the server's certificate against the system's
    /// roots) rather than `http`.
    pub https: bool,
    /// The host as the URL names it, without brackets for IPv6.
    pub host: *const c_char,
    pub port: u16,
    /// The request target, at least `/`.
    pub path_and_query: *const c_char,
    /// The `Host` header's value: the host (bracketed when IPv6), with the
    /// port when it is not the scheme's own.
    pub host_header: *const c_char,
    /// The URL to send to, rebuilt from the checked parts:
    /// `scheme://host_header/path_and_query`.
    pub url: *const c_char,
    /// The headers to send besides `Host` and `Content-Length`, each a
    /// `"Name: value"` line without CRLF, in order: `header_count` of them.
    pub headers: *const *const c_char,
    pub header_count: usize,
    /// The JSON body, `body_len` bytes (not NUL-terminated).
    pub body: *const u8,
    pub body_len: usize,
    /// The whole HTTP/1.1 request (request line, headers with `Host`,
    /// `Content-Length` and `Connection: close`, body), for a host that
    /// writes to a socket itself.
    pub http_bytes: *const u8,
    pub http_bytes_len: usize,
    /// Unix milliseconds (service clock) by which an answer must have
    /// come; report `timed_out` when none did.
    pub deadline_ms: u64,
    /// Which attempt this is for its event, from 1.
    pub attempt: u32,
}

fn c_string(s: impl Into<Vec<u8>>) -> CString {
    // The core's strings hold no NUL (checked URLs, base64, JSON).
    CString::new(s).unwrap_or_default()
}

impl botspace_webhook_request {
    fn new(mut r: botspace::webhook::WebhookRequest) -> Box<botspace_webhook_request> {
        let host = c_string(r.target.host.clone());
        let path_and_query = c_string(r.target.path_and_query.clone());
        let host_header = c_string(r.host_header());
        let url = c_string(r.request_url());
        let header_lines: Vec<CString> =
            r.header_lines().into_iter().map(|(n, v)| c_string(format!("{n}: {v}"))).collect();
        let header_ptrs: Vec<*const c_char> = header_lines.iter().map(|c| c.as_ptr()).collect();
        let http_bytes = r.http_bytes();
        // The request's own body, moved (not copied) now that the whole
        // request was written out from it.
        let body = std::mem::take(&mut r.attempt.body).into_bytes();
        let parts = botspace_webhook_request_parts {
            id: r.id,
            https: r.target.https,
            host: host.as_ptr(),
            port: r.target.port,
            path_and_query: path_and_query.as_ptr(),
            host_header: host_header.as_ptr(),
            url: url.as_ptr(),
            headers: header_ptrs.as_ptr(),
            header_count: header_ptrs.len(),
            body: body.as_ptr(),
            body_len: body.len(),
            http_bytes: http_bytes.as_ptr(),
            http_bytes_len: http_bytes.len(),
            deadline_ms: r.attempt.deadline_ms,
            attempt: r.attempt.attempt,
        };
        // The pointers stay valid: moving a CString or Vec into the box
        // does not move their heap buffers.
        Box::new(botspace_webhook_request {
            parts,
            _host: host,
            _path_and_query: path_and_query,
            _host_header: host_header,
            _url: url,
            _header_lines: header_lines,
            _header_ptrs: header_ptrs,
            _body: body,
            _http_bytes: http_bytes,
        })
    }
}

/// Writes the next webhook request due at `now_ms` (Unix milliseconds of
/// the service clock, `botspace_service_now_ms`) to `*out_request`, or NULL
/// when none is due; call until it writes NULL. Call it when the wake-up
/// callback fired (new events), when an outcome was reported, and at
/// `botspace_service_webhook_timeout`. Send each request to its `url`,
/// checking every address the name resolves to with
/// `botspace_service_webhook_address_allowed` before connecting to it,
/// within `deadline_ms`, without following redirects, reading at most 64
/// KiB of the answer; then report it with `botspace_service_webhook_outcome`.
/// Reads the database. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_request` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_poll_webhook(
    service: *const botspace_service,
    now_ms: u64,
    out_request: *mut *mut botspace_webhook_request,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_request, "out_request");
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let req =
            svc.poll_webhook(now_ms).map_or(std::ptr::null_mut(), |r| Box::into_raw(botspace_webhook_request::new(r)));
        // SAFETY: checked non-NULL above.
        unsafe { *out_request = req };
        botspace_status::Ok
    })
}

/// `botspace_service_poll_webhook` for a thread that must not wait on the
/// store (an event loop): writes the next request due at `now_ms` to
/// `*out_request`, or NULL, taking only a lock held for microseconds. With
/// NULL, `*out_needs_store` says whether the store has work (a bot's log to
/// read, outcomes to write, the first load): then call
/// `botspace_service_poll_webhook` where blocking is allowed (another
/// thread) until it writes NULL, and send what it hands out. Due requests
/// come first, so `*out_needs_store` is false whenever a request is
/// written. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_request` and `out_needs_store`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_poll_webhook_in_memory(
    service: *const botspace_service,
    now_ms: u64,
    out_request: *mut *mut botspace_webhook_request,
    out_needs_store: *mut bool,
) -> botspace_status {
    use botspace::WebhookPoll;
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_request, "out_request");
        non_null!(out_needs_store, "out_needs_store");
        // SAFETY: a live handle.
        let svc = unsafe { &(*service).svc };
        let (req, needs_store) = match svc.poll_webhook_in_memory(now_ms) {
            WebhookPoll::Request(r) => (Box::into_raw(botspace_webhook_request::new(r)), false),
            WebhookPoll::Idle => (std::ptr::null_mut(), false),
            WebhookPoll::NeedsStore => (std::ptr::null_mut(), true),
        };
        // SAFETY: both checked non-NULL above.
        unsafe {
            *out_request = req;
            *out_needs_store = needs_store;
        }
        botspace_status::Ok
    })
}

/// Writes the request's parts to `*out_parts`: pointers into the request,
/// valid until `botspace_webhook_request_free`.
///
/// # Safety
/// `request` must be a live handle; `out_parts` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_request_parts_get(
    request: *const botspace_webhook_request,
    out_parts: *mut botspace_webhook_request_parts,
) -> botspace_status {
    ffi_boundary!({
        non_null!(request, "request");
        non_null!(out_parts, "out_parts");
        // SAFETY: a live handle; out checked.
        unsafe { out_parts.write((*request).parts) };
        botspace_status::Ok
    })
}

/// Releases a webhook request and sets `*request` to NULL. Accepts NULL and
/// a pointer to NULL. Freeing it does not report an outcome.
///
/// # Safety
/// `*request` must be NULL or a handle from `botspace_service_poll_webhook`
/// that was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_request_free(request: *mut *mut botspace_webhook_request) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(request) }
    })
}

/// An optional NUL-terminated input string.
///
/// # Safety
/// When non-NULL, `p` must point at a NUL-terminated string.
unsafe fn opt_c_str<'a>(p: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: as documented above.
    (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
}

/// Reports what became of webhook request `id` at `now_ms`; exactly one of:
/// - `timed_out` true: no answer by its `deadline_ms`;
/// - `status_code` 100..=999: the receiver answered it; `retry_after` is
///   its `Retry-After` header's value exactly as received (NULL when
///   absent), parsed by the library;
/// - `status_code` 0: no answer (the name did not resolve, the address was
///   refused, the connection failed, TLS failed): `failure_message` says
///   why, recorded for `getWebhookInfo` (UTF-8; invalid bytes are
///   replaced).
///
/// A 2xx moves the bot's durable cursor; anything else is retried later.
/// An unknown id (the webhook was deleted meanwhile, or the id was reported
/// already) is ignored. Returns `BOTSPACE_STATUS_INVALID_ARGUMENT` for a
/// status outside 100..=999 and `BOTSPACE_STATUS_NULL_ARGUMENT` for a
/// failure without a message. Writes the database. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `retry_after` and `failure_message`
/// must each be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_outcome(
    service: *const botspace_service,
    id: u64,
    status_code: u16,
    retry_after: *const c_char,
    failure_message: *const c_char,
    timed_out: bool,
    now_ms: u64,
) -> botspace_status {
    // SAFETY: the same contract.
    unsafe {
        botspace_service_webhook_report(
            service,
            id,
            status_code,
            retry_after,
            failure_message,
            timed_out,
            now_ms,
            std::ptr::null_mut(),
        )
    }
}

/// `botspace_service_webhook_outcome` that also says, in
/// `*out_store_wanted` (when not NULL), whether the store has work now
/// (outcomes to write, a bot's log to read): a host that hands out requests
/// with `botspace_service_poll_webhook_in_memory` then has
/// `botspace_service_poll_webhook` called soon where blocking is allowed.
/// Never waits on the store. `*out_store_wanted` is written only on
/// `BOTSPACE_STATUS_OK`. Thread-safe.
///
/// # Safety
/// As `botspace_service_webhook_outcome`; `out_store_wanted` must be NULL
/// or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C call names each input and output
pub unsafe extern "C" fn botspace_service_webhook_report(
    service: *const botspace_service,
    id: u64,
    status_code: u16,
    retry_after: *const c_char,
    failure_message: *const c_char,
    timed_out: bool,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    use botspace::webhook::Outcome;
    ffi_boundary!({
        non_null!(service, "service");
        let outcome = if timed_out {
            Outcome::TimedOut
        } else if status_code != 0 {
            if !(100..=999).contains(&status_code) {
                return fail(
                    botspace_status::InvalidArgument,
                    format!("status_code {status_code} is not an HTTP status (100..=999, or 0 for no answer)"),
                );
            }
            // SAFETY: as documented above.
            let ra = unsafe { opt_c_str(retry_after) };
            let retry_after_s =
                ra.and_then(|v| std::str::from_utf8(v).ok()).and_then(|v| botspace::webhook::retry_after_s(v, now_ms));
            Outcome::Answered { status: status_code, retry_after_s }
        } else {
            // SAFETY: as documented above.
            match unsafe { opt_c_str(failure_message) } {
                Some(m) => Outcome::Failed(String::from_utf8_lossy(m).into_owned()),
                None => {
                    return fail(
                        botspace_status::NullArgument,
                        "argument `failure_message` is NULL with status_code 0 and timed_out false",
                    )
                }
            }
        };
        // SAFETY: a live handle; `out_store_wanted` as documented.
        unsafe { record_outcome(service, id, outcome, now_ms, out_store_wanted) }
    })
}

/// Hands `outcome` to the service and writes `*out_store_wanted` when it
/// is not NULL.
///
/// # Safety
/// `service` must be a live handle; `out_store_wanted` NULL or writable.
unsafe fn record_outcome(
    service: *const botspace_service,
    id: u64,
    outcome: botspace::webhook::Outcome,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    // SAFETY: a live handle.
    let wanted = unsafe { (*service).svc.webhook_outcome(id, outcome, now_ms) };
    if !out_store_wanted.is_null() {
        // SAFETY: non-NULL, writable as documented.
        unsafe { *out_store_wanted = wanted };
    }
    botspace_status::Ok
}

/// Why a webhook attempt got no answer
/// (`botspace_service_webhook_report_failure`): the library words the
/// message, the same as every other host's.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_webhook_failure {
    /// The host name did not resolve.
    Resolve = 0,
    /// The host name resolved to no address at all.
    NoAddress = 1,
    /// No connection was made to any address.
    Connect = 2,
    /// The TLS handshake failed (the certificate, most often).
    Tls = 3,
    /// The host cannot be a TLS server name.
    TlsName = 4,
    /// The connection failed once made (reset, closed, a malformed answer).
    Connection = 5,
    /// A kept connection failed and a new one did too, before the request
    /// left.
    BeforeSending = 6,
    /// The host's client could not build the request.
    Build = 7,
    /// The request failed and the client does not say at which step.
    Request = 8,
    /// The receiver answered a redirect the client hid.
    HiddenRedirect = 9,
    /// The address could not be checked against the policy.
    AddressCheck = 10,
}

/// Reports that webhook request `id` got no answer, at `now_ms`, for the
/// reason `kind` (a `botspace_webhook_failure` value): the library records
/// the kind's words for `getWebhookInfo`, followed by ": " and `detail`
/// (what the host's HTTP client said; UTF-8, invalid bytes are replaced)
/// when `detail` is not NULL. E.g. `BOTSPACE_WEBHOOK_FAILURE_TLS` with
/// "certificate expired" records "TLS failed: certificate expired". Returns
/// `BOTSPACE_STATUS_INVALID_ARGUMENT` for an unknown `kind`; otherwise as
/// `botspace_service_webhook_report`. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `detail` NULL or a NUL-terminated
/// string; `out_store_wanted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_report_failure(
    service: *const botspace_service,
    id: u64,
    kind: u32,
    detail: *const c_char,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    use botspace::webhook::{Failure, Outcome};
    ffi_boundary!({
        non_null!(service, "service");
        let Some(kind) = Failure::ALL.get(kind as usize).copied() else {
            return fail(
                botspace_status::InvalidArgument,
                format!("kind {kind} is not a botspace_webhook_failure (0..={})", Failure::ALL.len() - 1),
            );
        };
        // SAFETY: as documented above.
        let outcome = match unsafe { opt_c_str(detail) } {
            Some(d) => Outcome::failed(kind, String::from_utf8_lossy(d)),
            None => Outcome::failed_plainly(kind),
        };
        // SAFETY: a live handle; `out_store_wanted` as documented.
        unsafe { record_outcome(service, id, outcome, now_ms, out_store_wanted) }
    })
}

/// Writes when to call `botspace_service_poll_webhook` next if no wake-up
/// comes first (Unix milliseconds of the service clock: the earliest retry
/// that waits), or `BOTSPACE_NO_DEADLINE` when nothing waits. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `out_ms` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_timeout(
    service: *const botspace_service,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_ms, "out_ms");
        // SAFETY: a live handle; out_ms checked.
        unsafe { *out_ms = (*service).svc.webhook_timeout().unwrap_or(BOTSPACE_NO_DEADLINE) };
        botspace_status::Ok
    })
}

/// The refusal messages, one per address class, as static C strings.
fn refusal_c_str(class: botspace::webhook::AddressClass) -> *const c_char {
    use botspace::webhook::AddressClass as A;
    const ALL: [A; 6] = [A::Loopback, A::Private, A::LinkLocal, A::Multicast, A::Unspecified, A::Reserved];
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    let table = TABLE.get_or_init(|| ALL.iter().map(|c| c_string(c.delivery_refusal())).collect());
    let i = ALL.iter().position(|c| *c == class).unwrap_or(0);
    table[i].as_ptr()
}

/// Whether a webhook delivery may connect to the address `ip` (IPv4 dotted
/// or IPv6 text, NUL-terminated) under the service's policy
/// (`webhook_allow_private_addresses`). Writes NULL to `*out_refusal` when
/// it may; else a static NUL-terminated message (never freed), e.g. "the
/// host name resolves to a loopback address, which this server does not
/// deliver to": skip that address, and when no address is left report the
/// message as the attempt's `failure_message`. Returns
/// `BOTSPACE_STATUS_INVALID_ARGUMENT` when `ip` is not an IP address.
/// Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `ip` a NUL-terminated string;
/// `out_refusal` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_webhook_address_allowed(
    service: *const botspace_service,
    ip: *const c_char,
    out_refusal: *mut *const c_char,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(ip, "ip");
        non_null!(out_refusal, "out_refusal");
        // SAFETY: non-NULL and NUL-terminated, as documented.
        let text = unsafe { std::ffi::CStr::from_ptr(ip) }.to_bytes();
        let Some(addr) = std::str::from_utf8(text).ok().and_then(|t| t.parse::<std::net::IpAddr>().ok()) else {
            return fail(
                botspace_status::InvalidArgument,
                format!("argument `ip` is not an IP address: {:?}", String::from_utf8_lossy(text)),
            );
        };
        // SAFETY: a live handle.
        let refusal = match unsafe { (*service).svc.webhook_address_allowed(addr) } {
            Ok(()) => std::ptr::null(),
            Err(class) => refusal_c_str(class),
        };
        // SAFETY: checked non-NULL above.
        unsafe { *out_refusal = refusal };
        botspace_status::Ok
    })
}

mod webhook_pump;

/// The log level a setting names (the value of `BOTSPACE_LOG`; `setting`
/// may be NULL for unset): 0 error, 1 warn, 2 info, 3 debug. A plain level
/// name, any case (`trace` counts as debug); anything else gives 2 (info),
/// the default. A line of level `n` is printed when `n` <= the result.
/// Thread-safe.
///
/// # Safety
/// When non-NULL, `setting` must point at `setting_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn botspace_log_level(setting: *const c_char, setting_len: usize) -> i32 {
    ffi_boundary!(on_panic = botspace::log::Level::Info as i32; {
        if setting.is_null() {
            return botspace::log::Level::Info as i32;
        }
        // SAFETY: as documented above.
        match unsafe { input(setting.cast::<u8>(), setting_len, "setting") } {
            Ok(b) => botspace::log::Level::from_setting(Some(&String::from_utf8_lossy(b))) as i32,
            Err(_) => botspace::log::Level::Info as i32,
        }
    })
}

/// Writes one JSON log line (no newline) to `out_line`:
/// `{"ts":"…Z","level":"…","msg":"…"}`, the same shape the Rust server
/// prints. `level` is 0 error, 1 warn, 2 info, 3 debug; `unix_ms` is the
/// host's wall clock in milliseconds since 1970. With `block_len` > 0,
/// `block`'s text lines go, unchanged, into a `lines` array (the demo's
/// start-up block). Free `out_line` with `botspace_bytes_free`.
/// `InvalidArgument` for another level. Thread-safe.
///
/// # Safety
/// `msg` and `block` must point at `msg_len` and `block_len` readable bytes
/// (NULL with a length of 0 is empty); `out_line` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_log_line(
    level: i32,
    msg: *const c_char,
    msg_len: usize,
    block: *const c_char,
    block_len: usize,
    unix_ms: u64,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_line, "out_line");
        let Some(level) = botspace::log::Level::from_number(level) else {
            return fail(botspace_status::InvalidArgument, format!("log level {level} is not 0 to 3"));
        };
        // SAFETY: as documented above.
        let msg = match unsafe { input(msg.cast::<u8>(), msg_len, "msg") } {
            Ok(b) => String::from_utf8_lossy(b),
            Err(s) => return s,
        };
        // SAFETY: as documented above.
        let block = match unsafe { input(block.cast::<u8>(), block_len, "block") } {
            Ok(b) => String::from_utf8_lossy(b),
            Err(s) => return s,
        };
        let line = if block.is_empty() {
            botspace::log::log_line(level, &msg, &[], unix_ms)
        } else {
            botspace_runtime::output::log_block(level, &msg, &block, unix_ms)
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_line.write(botspace_bytes::from_vec(line.into_bytes())) };
        botspace_status::Ok
    })
}

// ---------------------------------------------------------------- policy

/// Which paths a listener serves (`botspace_route_request`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_listener {
    /// Every path: bot methods, the gateway and the host API.
    All = 0,
    /// Everything but the host API (paths under `/admin/`): the public address when
    /// the host API has an address of its own.
    Public = 1,
    /// Only the host API (paths under `/admin/`).
    Admin = 2,
}

/// What a host does with a complete request (`botspace_route_request`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_route {
    /// A bot method worth answering with other connections' requests in
    /// one `botspace_service_handle_batch` (one transaction, one fsync).
    Batch = 0,
    /// Answered as well alone as in a batch (getMe, health, metrics, the
    /// console, unknown paths): the host may batch it or not.
    Alone = 1,
    /// The host API: answered alone with `botspace_service_handle_request_from`
    /// (failed logins are throttled per peer).
    Admin = 2,
    /// getUpdates: answered alone with `botspace_service_answer_request`
    /// (it may park).
    Poll = 3,
    /// `/bot/gateway`: `botspace_gateway_accept` answers it.
    Gateway = 4,
    /// A path this listener does not serve: send
    /// `botspace_not_here_response`.
    NotHere = 5,
}

/// The route of a request whose path (without its query) is
/// `path[0..path_len]` (`botspace_request_head`'s `path_start`/`path_len`)
/// on `listener`. Cannot fail; any thread. A NULL `path` is the empty path.
///
/// # Safety
/// `path` must point at `path_len` readable bytes (or be NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn botspace_route_request(
    listener: botspace_listener,
    path: *const u8,
    path_len: usize,
) -> botspace_route {
    ffi_boundary!(on_panic = botspace_route::Alone; {
        // SAFETY: as documented above.
        let path = unsafe { input(path, path_len, "path") }.unwrap_or(&[]);
        c_route(botspace::policy::route(core_listener(listener), &String::from_utf8_lossy(path)))
    })
}

/// The answer to a request for `path[0..path_len]` on a listener that does
/// not serve it (`BOTSPACE_ROUTE_NOT_HERE`): 404 `method_not_found`, as a
/// path with no method gets. The connection stays open.
///
/// # Safety
/// `path` must point at `path_len` readable bytes (or be NULL with 0);
/// `out_response` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_not_here_response(
    path: *const u8,
    path_len: usize,
    out_response: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_response, "out_response");
        // SAFETY: as documented above.
        let path = match unsafe { input(path, path_len, "path") } {
            Ok(p) => String::from_utf8_lossy(p),
            Err(s) => return s,
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_response.write(botspace_bytes::from_vec(botspace::policy::not_here(&path))) };
        botspace_status::Ok
    })
}

/// The interim `100 Continue` to send for a request whose head asked
/// `Expect: 100-continue` (`botspace_request_head`'s `expect_continue`)
/// once the framer found the head acceptable (INCOMPLETE with a head).
///
/// # Safety
/// `out_response` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_continue_response(out_response: *mut botspace_bytes) -> botspace_status {
    ffi_boundary!({
        non_null!(out_response, "out_response");
        // SAFETY: checked non-NULL above.
        unsafe { out_response.write(botspace_bytes::from_vec(botspace::policy::CONTINUE.to_vec())) };
        botspace_status::Ok
    })
}

/// The answer to a connection refused at the connection limit with every
/// connection busy: 503 `server_busy` with `Retry-After: 1` and
/// `Connection: close`. Send it (best effort), then close.
///
/// # Safety
/// `out_response` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_busy_response(out_response: *mut botspace_bytes) -> botspace_status {
    ffi_boundary!({
        non_null!(out_response, "out_response");
        // SAFETY: checked non-NULL above.
        unsafe { out_response.write(botspace_bytes::from_vec(botspace::policy::server_busy())) };
        botspace_status::Ok
    })
}

/// What a response the library produced says, for a host's logs and
/// metrics: its status in `*out_status` and, for a refusal, its error code
/// (the envelope's `error`, a static NUL-terminated string) in
/// `*out_error`, else NULL. `BOTSPACE_STATUS_INVALID_ARGUMENT` for bytes
/// that do not start with an HTTP/1.1 status line.
///
/// # Safety
/// `response` must point at `response_len` readable bytes (or be NULL with
/// 0); `out_status` and `out_error` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_response_error(
    response: *const u8,
    response_len: usize,
    out_status: *mut u16,
    out_error: *mut *const c_char,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_status, "out_status");
        non_null!(out_error, "out_error");
        // SAFETY: as documented above.
        let resp = match unsafe { input(response, response_len, "response") } {
            Ok(r) => r,
            Err(s) => return s,
        };
        let Some((status, code)) = botspace::policy::response_error(resp) else {
            return fail(botspace_status::InvalidArgument, "not an HTTP/1.1 response");
        };
        // SAFETY: checked non-NULL above.
        unsafe {
            out_status.write(status);
            out_error.write(code.map_or(std::ptr::null(), |c| c.as_c_str().as_ptr()));
        }
        botspace_status::Ok
    })
}

/// The numbers of a server's connection handling, the same in every host
/// (`botspace_host_policy_default`; docs/reliability.md).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct botspace_host_policy {
    /// Default `--request-timeout`: a request arrives whole within this
    /// long of its first byte, else the connection's timeout answers 408
    /// (`botspace_http_connection_handle_timeout`).
    pub request_timeout_ms: u64,
    /// Default `--idle-timeout`: an idle keep-alive connection is closed.
    pub idle_timeout_ms: u64,
    /// A peer that takes none of our bytes for this long is dropped.
    pub write_timeout_ms: u64,
    /// A lingering close discards input for at most this long...
    pub linger_ms: u64,
    /// ...or this many bytes.
    pub linger_bytes: usize,
    /// How long a stop waits for connections to finish.
    pub drain_ms: u64,
    /// A gateway closed with 4008 `slow_consumer`: its close frame gets
    /// this long before the socket is dropped, sent or not.
    pub slow_consumer_drop_ms: u64,
    /// Most requests in one `botspace_service_handle_batch`.
    pub max_batch: usize,
    /// After an accept error the listener rests this long.
    pub accept_backoff_ms: u64,
    /// The longest sleep of a host's loop: how late it notices a stop or a
    /// move of the manual clock.
    pub tick_ms: u64,
    /// The longest `botspace_service_wait_store_notifications` wait.
    pub notify_wait_ms: u64,
    /// After that wait failed, the next attempt this much later...
    pub notify_retry_ms: u64,
    /// ...and the failure logged at most this often.
    pub notify_error_report_ms: u64,
    /// Accept errors logged at most this often, with their count.
    pub accept_error_report_ms: u64,
    /// While waiting out `notify_retry_ms`, the notification thread looks
    /// for a stop this often.
    pub notify_retry_step_ms: u64,
    /// The most a loop that serves every connection reads from a socket
    /// at once (the size of its one read buffer)...
    pub read_chunk_bytes: usize,
    /// ...and from one connection in one turn (fairness between
    /// connections).
    pub read_per_turn_bytes: usize,
    /// Finished webhook transfers kept (with their configured handle) for
    /// the next deliveries; past it they are freed.
    pub webhook_spare_transfers: usize,
    /// The file limit assumed when `getrlimit` fails (for
    /// `botspace_server_options_settings`'s default connection cap).
    pub fallback_file_limit: u64,
}

/// Writes the library's host policy to `*out`.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_host_policy_default(out: *mut botspace_host_policy) -> botspace_status {
    ffi_boundary!({
        non_null!(out, "out");
        use botspace::policy::host as h;
        use botspace_runtime::host as rh;
        let p = botspace_host_policy {
            request_timeout_ms: h::REQUEST_TIMEOUT_MS,
            idle_timeout_ms: h::IDLE_TIMEOUT_MS,
            write_timeout_ms: h::WRITE_TIMEOUT_MS,
            linger_ms: h::LINGER_MS,
            linger_bytes: h::LINGER_BYTES,
            drain_ms: rh::DRAIN_MS,
            slow_consumer_drop_ms: h::SLOW_CONSUMER_DROP_MS,
            max_batch: h::MAX_BATCH,
            accept_backoff_ms: rh::ACCEPT_BACKOFF_MS,
            tick_ms: h::TICK_MS,
            notify_wait_ms: rh::NOTIFY_WAIT_MS,
            notify_retry_ms: rh::NOTIFY_RETRY_MS,
            notify_error_report_ms: rh::NOTIFY_ERROR_REPORT_MS,
            accept_error_report_ms: rh::ACCEPT_ERROR_REPORT_MS,
            notify_retry_step_ms: rh::NOTIFY_RETRY_STEP_MS,
            read_chunk_bytes: rh::LOOP_READ_CHUNK_BYTES,
            read_per_turn_bytes: rh::LOOP_READ_PER_TURN_BYTES,
            webhook_spare_transfers: rh::WEBHOOK_SPARE_TRANSFERS,
            fallback_file_limit: rh::FALLBACK_FILE_LIMIT,
        };
        // SAFETY: checked non-NULL above.
        unsafe { out.write(p) };
        botspace_status::Ok
    })
}

/// The default `--max-connections` under a file limit of `file_limit`
/// descriptors (`RLIM_INFINITY` as `UINT64_MAX`): one per connection after
/// the server's own 64, at least 1, at most 2^20. Cannot fail.
#[no_mangle]
pub extern "C" fn botspace_default_max_connections(file_limit: u64) -> usize {
    ffi_boundary!(on_panic = 1; { botspace_runtime::host::default_max_connections(file_limit) })
}

/// A server's options as `botspace_server_options_parse` read them (the
/// flags, `BOTSPACE_*` variables and config file the Rust example server
/// takes, with the same defaults and messages). Opaque; released by
/// `botspace_server_options_free`.
pub struct botspace_server_options {
    opts: botspace_runtime::options::ServerOptions,
    addr: CString,
    admin_addr: Option<CString>,
    db: CString,
}

/// What a server needs of its options, borrowed from the
/// `botspace_server_options` handle (valid until it is freed).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_server_settings {
    /// `--addr` (HOST:PORT).
    pub addr: *const c_char,
    /// `--admin-addr`, or NULL: the host API then shares `addr`.
    pub admin_addr: *const c_char,
    /// `--db`, for messages (the service is opened with
    /// `botspace_server_options_open_service`).
    pub db: *const c_char,
    /// `--max-connections`, else the default under the file limit given.
    pub max_connections: usize,
    /// `--request-timeout` in ms (at least 1).
    pub request_timeout_ms: u64,
    /// `--idle-timeout` in ms (at least 1).
    pub idle_timeout_ms: u64,
    pub manual_clock: bool,
    /// Whether to make the tour's demo data (`--demo` or `--demo-token`);
    /// otherwise the server creates nothing and prints no token.
    pub demo: bool,
    pub demo_token: bool,
    /// `--log-format json`.
    pub log_json: bool,
}

fn read_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// Lossless for the UTF-8 the options are; a NUL inside a value (which
/// no C string can hold) ends it.
fn option_string(s: &str) -> CString {
    CString::new(s.split('\0').next().unwrap_or("")).unwrap_or_default()
}

/// Reads a server's options from `argv[0..argc)` (the arguments after the
/// program name), the process environment and the config file they name.
/// On OK, either `*out_options` is the options to run with, or it is NULL
/// and `*out_text` holds what to print before exiting with `*out_exit`: the
/// usage on stdout with 0 (`--help`), or the error line and the usage on
/// stderr with 2. `program` names the server in the usage.
///
/// # Safety
/// `program` must be a NUL-terminated string; `argv` must point at `argc`
/// NUL-terminated strings (or be NULL with 0); the outputs must be
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_parse(
    program: *const c_char,
    argv: *const *const c_char,
    argc: usize,
    out_options: *mut *mut botspace_server_options,
    out_text: *mut botspace_bytes,
    out_exit: *mut i32,
) -> botspace_status {
    ffi_boundary!({
        non_null!(program, "program");
        non_null!(out_options, "out_options");
        non_null!(out_text, "out_text");
        non_null!(out_exit, "out_exit");
        if argc > 0 && argv.is_null() {
            return fail(botspace_status::NullArgument, "argument `argv` is NULL with a count above 0");
        }
        // SAFETY: as documented above.
        let program = unsafe { std::ffi::CStr::from_ptr(program) }.to_string_lossy().into_owned();
        let mut args = Vec::with_capacity(argc);
        for i in 0..argc {
            // SAFETY: `argv` holds `argc` pointers.
            let a = unsafe { *argv.add(i) };
            if a.is_null() {
                return fail(botspace_status::NullArgument, format!("argv[{i}] is NULL"));
            }
            // SAFETY: a NUL-terminated string.
            args.push(unsafe { std::ffi::CStr::from_ptr(a) }.to_string_lossy().into_owned());
        }
        use botspace_runtime::options::{parse, usage, Parsed};
        // Where the level comes from is the library's rule
        // (`botspace_output_from_env`), the Rust server's too.
        let usage = usage(&program, botspace_runtime::output::LEVEL_SOURCE);
        let (options, text, exit) = match parse(args, &|k| std::env::var(k).ok(), &read_file) {
            Ok(Parsed::Run(o)) => {
                let handle = botspace_server_options {
                    addr: option_string(&o.addr),
                    admin_addr: o.admin_addr.as_deref().map(option_string),
                    db: option_string(&o.db),
                    opts: *o,
                };
                (Box::into_raw(Box::new(handle)), String::new(), 0)
            }
            Ok(Parsed::Help) => (std::ptr::null_mut(), format!("{usage}\n"), 0),
            Err(e) => (std::ptr::null_mut(), format!("{e}\n{usage}\n"), 2),
        };
        // SAFETY: checked non-NULL above.
        unsafe {
            out_options.write(options);
            out_text.write(botspace_bytes::from_vec(text.into_bytes()));
            out_exit.write(exit);
        }
        botspace_status::Ok
    })
}

/// What a server needs of `options`, the connection cap resolved under a
/// file limit of `file_limit` descriptors (`UINT64_MAX`: unlimited).
///
/// # Safety
/// `options` must be a live handle; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_settings(
    options: *const botspace_server_options,
    file_limit: u64,
    out: *mut botspace_server_settings,
) -> botspace_status {
    ffi_boundary!({
        non_null!(options, "options");
        non_null!(out, "out");
        // SAFETY: a live handle.
        let h = unsafe { &*options };
        let ms = |d: std::time::Duration| (d.as_millis().min(u128::from(u64::MAX)) as u64).max(1);
        let s = botspace_server_settings {
            addr: h.addr.as_ptr(),
            admin_addr: h.admin_addr.as_ref().map_or(std::ptr::null(), |a| a.as_ptr()),
            db: h.db.as_ptr(),
            max_connections: h.opts.max_connections(file_limit),
            request_timeout_ms: ms(h.opts.request_timeout),
            idle_timeout_ms: ms(h.opts.idle_timeout),
            manual_clock: h.opts.manual_clock,
            demo: h.opts.wants_demo(),
            demo_token: h.opts.demo_token,
            log_json: h.opts.log_json,
        };
        // SAFETY: checked non-NULL above.
        unsafe { out.write(s) };
        botspace_status::Ok
    })
}

/// Opens the service the options describe: the admin secret given (or read
/// from its file), else a new one, which `*out_generated_secret` then holds
/// for the host to print once (`{NULL, 0}` when one was given); the
/// operational key; the database and the rest. On failure the message
/// (`botspace_last_error_message`) is the line to log:
/// `BOTSPACE_STATUS_INVALID_CONFIG` for options that cannot be used
/// together or a value the service refuses, `BOTSPACE_STATUS_STORAGE_ERROR`
/// when the database cannot be opened.
///
/// # Safety
/// `options` must be a live handle; the outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_open_service(
    options: *const botspace_server_options,
    out_service: *mut *mut botspace_service,
    out_generated_secret: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(options, "options");
        non_null!(out_service, "out_service");
        non_null!(out_generated_secret, "out_generated_secret");
        // SAFETY: a live handle.
        let o = unsafe { &(*options).opts };
        let (secret, generated) = match o.admin_secret(&read_file) {
            Ok(Some(s)) => (s, false),
            Ok(None) => match botspace_runtime::options::generate_secret() {
                Ok(s) => (s, true),
                Err(e) => return fail(botspace_status::StorageError, e),
            },
            Err(e) => return fail(botspace_status::InvalidConfig, e),
        };
        let config = match o.config(&secret, &read_file) {
            Ok(c) => c,
            Err(e) => return fail(botspace_status::InvalidConfig, e),
        };
        // The URL's password, if any, never reaches the log.
        let shown = config.database_for_logs();
        let svc = match Service::open(config) {
            Ok(s) => s,
            Err(e @ OpenError::Config(_)) => {
                return fail(botspace_status::InvalidConfig, format!("cannot open the service on {shown}: {e}"))
            }
            Err(e) => return fail(botspace_status::StorageError, format!("cannot open the service on {shown}: {e}")),
        };
        let handle = Box::new(botspace_service { svc: Arc::new(svc), ready: Default::default() });
        // SAFETY: checked non-NULL above.
        unsafe {
            out_service.write(Box::into_raw(handle));
            out_generated_secret.write(if generated {
                botspace_bytes::from_vec(secret.into_bytes())
            } else {
                botspace_bytes::EMPTY
            });
        }
        botspace_status::Ok
    })
}

/// Releases options and sets `*options` to NULL; accepts NULL and a
/// pointer to NULL.
///
/// # Safety
/// `*options` must be NULL or a handle from `botspace_server_options_parse`
/// not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_server_options_free(options: *mut *mut botspace_server_options) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(options) }
    })
}

#[cfg(test)]
mod options_tests {
    use super::*;

    fn parse(args: &[&str]) -> (*mut botspace_server_options, String, i32) {
        let owned: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
        let ptrs: Vec<*const c_char> = owned.iter().map(|a| a.as_ptr()).collect();
        let (mut o, mut text, mut exit) = (std::ptr::null_mut(), botspace_bytes::EMPTY, -1);
        let st = unsafe {
            botspace_server_options_parse(c"srv".as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut o, &mut text, &mut exit)
        };
        assert_eq!(st, botspace_status::Ok);
        let t = if text.len == 0 {
            String::new()
        } else {
            String::from_utf8(unsafe { std::slice::from_raw_parts(text.ptr, text.len) }.to_vec()).unwrap()
        };
        unsafe { botspace_bytes_free(&mut text) };
        (o, t, exit)
    }

    #[test]
    fn options_parse_settle_and_open_a_service() {
        let (o, text, _) = parse(&["--help"]);
        assert!(o.is_null() && text.starts_with("usage: srv [--config PATH]"));
        let (o, text, exit) = parse(&["--max-connections", "0"]);
        assert!(o.is_null());
        assert_eq!(exit, 2);
        assert!(text.starts_with("--max-connections needs a positive number\nusage: srv "), "{text}");
        let (mut o, text, _) =
            parse(&["--db", ":memory:", "--addr=127.0.0.1:0", "--request-timeout", "0.0001", "--manual-clock"]);
        assert!(!o.is_null() && text.is_empty());
        let mut s = botspace_server_settings {
            addr: std::ptr::null(),
            admin_addr: std::ptr::dangling(),
            db: std::ptr::null(),
            max_connections: 0,
            request_timeout_ms: 0,
            idle_timeout_ms: 0,
            manual_clock: false,
            demo: true,
            demo_token: true,
            log_json: true,
        };
        assert_eq!(unsafe { botspace_server_options_settings(o, 1024, &mut s) }, botspace_status::Ok);
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(s.addr) }.to_str(), Ok("127.0.0.1:0"));
        assert!(s.admin_addr.is_null());
        assert_eq!((s.max_connections, s.request_timeout_ms, s.idle_timeout_ms), (960, 1, 120_000));
        assert!(s.manual_clock && !s.demo && !s.demo_token && !s.log_json, "no demo unless asked");
        let (mut svc, mut secret) = (std::ptr::null_mut(), botspace_bytes::EMPTY);
        assert_eq!(unsafe { botspace_server_options_open_service(o, &mut svc, &mut secret) }, botspace_status::Ok);
        assert_eq!(secret.len, 64, "none given: one generated, for the host to print");
        unsafe {
            botspace_bytes_free(&mut secret);
            botspace_service_free(&mut svc);
            botspace_server_options_free(&mut o);
            botspace_server_options_free(&mut o);
        }
        assert!(o.is_null());
        let (mut o, _, _) =
            parse(&["--db", ":memory:", "--gateway-poll-interval-ms", "9", "--admin-secret", "a-secret-given-0001"]);
        assert_eq!(
            unsafe { botspace_server_options_open_service(o, &mut svc, &mut secret) },
            botspace_status::InvalidConfig
        );
        let mut buf = [0 as c_char; 256];
        let mut n = 0;
        assert_eq!(unsafe { botspace_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n) }, botspace_status::Ok);
        assert_eq!(
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str(),
            Ok("cannot open the service on :memory:: gateway_poll_interval_ms must be between 10 and 60000")
        );
        unsafe { botspace_server_options_free(&mut o) };
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    #[test]
    fn routes_and_answers_come_from_the_core() {
        let p = b"/admin/createUser";
        assert_eq!(
            unsafe { botspace_route_request(botspace_listener::Public, p.as_ptr(), p.len()) },
            botspace_route::NotHere
        );
        assert_eq!(
            unsafe { botspace_route_request(botspace_listener::All, p.as_ptr(), p.len()) },
            botspace_route::Admin
        );
        assert_eq!(
            unsafe { botspace_route_request(botspace_listener::All, std::ptr::null(), 0) },
            botspace_route::Alone
        );
        let mut out = botspace_bytes::EMPTY;
        assert_eq!(unsafe { botspace_server_busy_response(&mut out) }, botspace_status::Ok);
        let (mut status, mut error) = (0u16, std::ptr::null());
        assert_eq!(unsafe { botspace_response_error(out.ptr, out.len, &mut status, &mut error) }, botspace_status::Ok);
        assert_eq!(status, 503);
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(error) }.to_str(), Ok("server_busy"));
        unsafe { botspace_bytes_free(&mut out) };
        assert_eq!(
            unsafe { botspace_response_error(b"nope".as_ptr(), 4, &mut status, &mut error) },
            botspace_status::InvalidArgument
        );
        assert_eq!(
            unsafe { botspace_not_here_response(p.as_ptr(), p.len(), std::ptr::null_mut()) },
            botspace_status::NullArgument
        );
        let mut hp = botspace_host_policy::default();
        assert_eq!(unsafe { botspace_host_policy_default(&mut hp) }, botspace_status::Ok);
        assert_eq!((hp.request_timeout_ms, hp.max_batch), (30_000, 64));
        assert_eq!(botspace_default_max_connections(1024), 960);
        assert_eq!(unsafe { botspace_continue_response(&mut out) }, botspace_status::Ok);
        assert_eq!(unsafe { std::slice::from_raw_parts(out.ptr, out.len) }, b"HTTP/1.1 100 Continue\r\n\r\n");
        unsafe { botspace_bytes_free(&mut out) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &[u8] = br#"{"admin_secret":"test-admin-secret-0001","clock":"manual"}"#;

    /// Each `botspace_webhook_failure` value is the index of the same kind
    /// in the core's `Failure::ALL`, which the C call reads.
    #[test]
    fn webhook_failure_values_are_the_core_order() {
        use botspace::webhook::Failure;
        use botspace_webhook_failure as C;
        let pairs = [
            (C::Resolve, Failure::Resolve),
            (C::NoAddress, Failure::NoAddress),
            (C::Connect, Failure::Connect),
            (C::Tls, Failure::Tls),
            (C::TlsName, Failure::TlsName),
            (C::Connection, Failure::Connection),
            (C::BeforeSending, Failure::BeforeSending),
            (C::Build, Failure::Build),
            (C::Request, Failure::Request),
            (C::HiddenRedirect, Failure::HiddenRedirect),
            (C::AddressCheck, Failure::AddressCheck),
        ];
        assert_eq!(pairs.len(), Failure::ALL.len());
        for (c, core) in pairs {
            assert_eq!(Failure::ALL[c as usize], core);
        }
    }

    /// The C calls give the library's line and level; a level outside 0..=3
    /// is InvalidArgument with nothing written.
    #[test]
    fn log_line_and_level() {
        let mut out = botspace_bytes::EMPTY;
        let (msg, block) = ("a \"b\"", "x: 1\ny\n");
        // SAFETY: valid pointers and lengths.
        let st = unsafe { botspace_log_line(1, msg.as_ptr().cast(), msg.len(), std::ptr::null(), 0, 1_000, &mut out) };
        assert_eq!(st, botspace_status::Ok);
        // SAFETY: written by botspace_log_line.
        let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
        assert_eq!(line, br#"{"ts":"1970-01-01T00:00:01.000Z","level":"warn","msg":"a \"b\""}"#);
        // SAFETY: from botspace_log_line.
        unsafe { botspace_bytes_free(&mut out) };
        // SAFETY: valid pointers and lengths.
        let st = unsafe { botspace_log_line(2, c"demo".as_ptr(), 4, block.as_ptr().cast(), block.len(), 0, &mut out) };
        assert_eq!(st, botspace_status::Ok);
        // SAFETY: written by botspace_log_line.
        let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
        assert_eq!(line, br#"{"ts":"1970-01-01T00:00:00.000Z","level":"info","msg":"demo","lines":["x: 1","y"]}"#);
        // SAFETY: from botspace_log_line.
        unsafe { botspace_bytes_free(&mut out) };
        // SAFETY: valid pointers.
        let st = unsafe { botspace_log_line(4, std::ptr::null(), 0, std::ptr::null(), 0, 0, &mut out) };
        assert_eq!((st, out.len), (botspace_status::InvalidArgument, 0));
        // SAFETY: NULL is unset; the others point at their bytes.
        unsafe {
            assert_eq!(botspace_log_level(std::ptr::null(), 0), 2);
            assert_eq!(botspace_log_level(c"Error".as_ptr(), 5), 0);
            assert_eq!(botspace_log_level(c"debug".as_ptr(), 5), 3);
        }
    }

    /// Every reason the core ends a session with reaches C as its own
    /// wire name (there is no catch-all).
    #[test]
    fn every_close_reason_of_the_core_keeps_its_name_in_c() {
        assert!(CloseCode::ALL.contains(&CloseCode::StorageUnavailable));
        for reason in CloseCode::ALL {
            let got = unsafe { std::ffi::CStr::from_ptr(static_reason(*reason)) }.to_str().unwrap();
            assert_eq!(got, reason.as_str());
        }
    }

    fn open() -> *mut botspace_service {
        let mut s = std::ptr::null_mut();
        assert_eq!(unsafe { botspace_service_open(CFG.as_ptr(), CFG.len(), &mut s) }, botspace_status::Ok);
        s
    }

    fn last_error() -> String {
        let mut buf = [0 as c_char; 256];
        let mut n = 0;
        assert_eq!(unsafe { botspace_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n) }, botspace_status::Ok);
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn panic_is_caught() {
        let r: botspace_status = ffi_boundary!({
            if std::hint::black_box(true) {
                panic!("boom");
            }
            botspace_status::Ok
        });
        assert_eq!(r, botspace_status::Panic);
        assert!(last_error().contains("boom"));
    }

    #[test]
    fn open_request_free() {
        let mut s = open();
        let req = b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut out = botspace_bytes::EMPTY;
        assert_eq!(
            unsafe { botspace_service_handle_request(s, req.as_ptr(), req.len(), &mut out) },
            botspace_status::Ok
        );
        let resp = unsafe { std::slice::from_raw_parts(out.ptr, out.len) };
        assert!(resp.starts_with(b"HTTP/1.1 401 "));
        unsafe { botspace_bytes_free(&mut out) };
        assert!(out.ptr.is_null());
        unsafe { botspace_bytes_free(&mut out) };
        unsafe { botspace_service_free(&mut s) };
        assert!(s.is_null());
        unsafe { botspace_service_free(&mut s) };
    }

    #[test]
    fn store_notifications_on_sqlite_return_at_once() {
        let mut s = open();
        let mut available = true;
        assert_eq!(unsafe { botspace_service_has_store_notifications(s, &mut available) }, botspace_status::Ok);
        assert!(!available, "SQLite has no other nodes");
        let mut n = usize::MAX;
        let t = std::time::Instant::now();
        assert_eq!(unsafe { botspace_service_wait_store_notifications(s, 10_000, &mut n) }, botspace_status::Ok);
        assert_eq!(n, 0);
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        let none = std::ptr::null_mut();
        assert_eq!(unsafe { botspace_service_wait_store_notifications(s, 0, none) }, botspace_status::NullArgument);
        assert_eq!(
            unsafe { botspace_service_wait_store_notifications(std::ptr::null(), 0, &mut n) },
            botspace_status::NullArgument
        );
        assert_eq!(
            unsafe { botspace_service_has_store_notifications(s, std::ptr::null_mut()) },
            botspace_status::NullArgument
        );
        unsafe { botspace_service_free(&mut s) };
    }

    #[test]
    fn invalid_config_sets_message() {
        let mut s: *mut botspace_service = std::ptr::dangling_mut();
        let bad = br#"{"admin_secret":"short"}"#;
        assert_eq!(unsafe { botspace_service_open(bad.as_ptr(), bad.len(), &mut s) }, botspace_status::InvalidConfig);
        assert_eq!(s, std::ptr::dangling_mut(), "output untouched on failure");
        assert!(last_error().contains("admin_secret"));
    }

    /// The default library has no PostgreSQL store (feature `postgres`): a
    /// `postgres://` database is refused with a storage error that names the
    /// switch, not opened as a file called "postgres:".
    #[cfg(not(feature = "postgres"))]
    #[test]
    fn postgres_url_without_the_feature_is_refused_by_name() {
        let mut s: *mut botspace_service = std::ptr::dangling_mut();
        let cfg = br#"{"database":"postgres://postgres@127.0.0.1:1/x","admin_secret":"test-admin-secret-0001"}"#;
        assert_eq!(unsafe { botspace_service_open(cfg.as_ptr(), cfg.len(), &mut s) }, botspace_status::StorageError);
        assert_eq!(s, std::ptr::dangling_mut(), "output untouched on failure");
        assert_eq!(
            last_error(),
            "database is a PostgreSQL URL, but this build has no PostgreSQL store (cargo feature `postgres`)"
        );
    }
}

// ---------------------------------------------------------------- HTTP connection

fn core_listener(l: botspace_listener) -> botspace::policy::Listener {
    match l {
        botspace_listener::All => botspace::policy::Listener::All,
        botspace_listener::Public => botspace::policy::Listener::Public,
        botspace_listener::Admin => botspace::policy::Listener::Admin,
    }
}

fn c_route(r: botspace::policy::Route) -> botspace_route {
    match r {
        botspace::policy::Route::Batch => botspace_route::Batch,
        botspace::policy::Route::Alone => botspace_route::Alone,
        botspace::policy::Route::Admin => botspace_route::Admin,
        botspace::policy::Route::Poll => botspace_route::Poll,
        botspace::policy::Route::Gateway => botspace_route::Gateway,
        botspace::policy::Route::NotHere => botspace_route::NotHere,
    }
}

/// One HTTP/1.1 server connection, sans-IO: the library's rules for it
/// (framing and the input bound, answers in order, the budget of unsent
/// answers, `100 Continue`, the `Connection` header of each answer, the
/// refusal and its lingering close, the request and idle deadlines, half
/// close). The host owns the socket and the clock: it reads up to
/// `read_limit` bytes into `botspace_http_connection_handle_input`, takes
/// requests with `botspace_http_connection_poll_request`, answers them with
/// `botspace_http_connection_answer`, writes `botspace_http_connection_transmit`,
/// calls `botspace_http_connection_handle_timeout` at `poll_timeout`, and
/// does with the socket what `state` says. Not thread-safe: one thread at
/// a time.
pub struct botspace_http_connection {
    conn: botspace::policy::connection::HttpConnection,
}

/// What the host does with a connection's socket.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_connection_state {
    /// Reading requests and sending answers.
    Open = 0,
    /// Send what `transmit` holds; input is read and discarded.
    Closing = 1,
    /// Everything is sent: shut the write side (`shutdown(SHUT_WR)`) and
    /// keep reading into `handle_input` (discarded) until the state is
    /// CLOSED.
    Lingering = 2,
    /// Close the socket (and cancel a poll parked for the connection).
    Closed = 3,
}

impl From<botspace::policy::connection::ConnectionState> for botspace_connection_state {
    fn from(s: botspace::policy::connection::ConnectionState) -> Self {
        use botspace::policy::connection::ConnectionState as S;
        match s {
            S::Open => botspace_connection_state::Open,
            S::Closing => botspace_connection_state::Closing,
            S::Lingering => botspace_connection_state::Lingering,
            S::Closed => botspace_connection_state::Closed,
        }
    }
}

/// Lends `t` to the caller as a pointer and a length (NULL for nothing):
/// the `_transmit` functions' bytes, borrowed from their handle.
///
/// # Safety
/// Both outputs must be writable.
unsafe fn write_borrowed(t: &[u8], out_ptr: *mut *const u8, out_len: *mut usize) {
    // SAFETY: as documented above.
    unsafe {
        out_ptr.write(if t.is_empty() { std::ptr::null() } else { t.as_ptr() });
        out_len.write(t.len());
    }
}

/// What `botspace_http_connection_handle_timeout` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_expired {
    /// No deadline had passed.
    Nothing = 0,
    /// A request did not arrive whole within the request timeout: its 408
    /// is queued (and counted, when a service was given); the connection
    /// closes once it is sent.
    Request = 1,
    /// Nothing happened for the idle timeout: the connection is CLOSED.
    Idle = 2,
    /// The lingering close ended: the connection is CLOSED.
    Linger = 3,
}

/// Where a connection stands, for the host's poll loop. Plain data.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_http_connection_info {
    pub state: botspace_connection_state,
    /// Wait for the socket to be readable (poll for input).
    pub wants_read: bool,
    /// The most bytes to read from the socket now (a read that goes on
    /// after the first); 0: do not read it.
    pub read_limit: usize,
    /// `botspace_http_connection_poll_request` may have a request to give
    /// (a host that cannot take it this turn polls again without sleeping).
    pub has_request: bool,
    /// Open, nothing taken, buffered or to send: a stopping host closes it
    /// when no byte waits in its socket.
    pub idle: bool,
    /// Bytes `transmit` holds.
    pub unsent: usize,
    /// When `handle_timeout` next has something to do, in the host's
    /// clock; `BOTSPACE_NO_DEADLINE` for none.
    pub timeout_ms: u64,
    /// Since when it waits for a request with nothing taken and nothing to
    /// send (at a connection limit the longest waiting is evicted);
    /// `BOTSPACE_NO_DEADLINE` when it is busy and is not to be evicted.
    pub waiting_since_ms: u64,
}

/// A complete request taken from a connection, in order.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_http_request {
    /// False: nothing to take now (the other fields are zero).
    pub present: bool,
    /// Which way it goes (the connection's listener decides first).
    pub route: botspace_route,
    /// The request's bytes, inside the connection: valid until the next
    /// `handle_input` or `free` of the connection.
    pub ptr: *const u8,
    pub len: usize,
    /// What the library read from its head (offsets from `ptr`).
    pub head: botspace_request_head,
}

/// Borrows a live handle for one call.
///
/// # Safety
/// `c` must be NULL or a live handle used by this thread only.
unsafe fn http_conn<'a>(
    c: *mut botspace_http_connection,
) -> Option<&'a mut botspace::policy::connection::HttpConnection> {
    // SAFETY: as documented above.
    unsafe { c.as_mut() }.map(|c| &mut c.conn)
}

macro_rules! live_conn {
    (ref $c:expr) => {
        // SAFETY: the caller passes a live handle used by this thread only.
        match unsafe { $c.as_ref() } {
            Some(c) => &c.conn,
            None => return fail(botspace_status::NullArgument, "argument `conn` is NULL"),
        }
    };
    ($c:expr) => {
        // SAFETY: the caller passes a live handle used by this thread only.
        match unsafe { http_conn($c) } {
            Some(c) => c,
            None => return fail(botspace_status::NullArgument, "argument `conn` is NULL"),
        }
    };
}

/// A connection accepted at `now_ms` (the host's monotonic clock, in
/// milliseconds, the clock of every later call) on `listener`, with the
/// service's body limit and the given deadlines (`--request-timeout`,
/// `--idle-timeout`; `botspace_server_settings` has both). Release it with
/// `botspace_http_connection_free`. It does not keep the service alive.
///
/// # Safety
/// `service` must be a live handle; `out_conn` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_new(
    service: *const botspace_service,
    listener: botspace_listener,
    request_timeout_ms: u64,
    idle_timeout_ms: u64,
    now_ms: u64,
    out_conn: *mut *mut botspace_http_connection,
) -> botspace_status {
    ffi_boundary!({
        non_null!(service, "service");
        non_null!(out_conn, "out_conn");
        // SAFETY: a live handle.
        let framer = unsafe { (*service).svc.request_framer() };
        let opts = botspace::policy::connection::ConnectionOptions { request_timeout_ms, idle_timeout_ms };
        let conn = botspace::policy::connection::HttpConnection::new(core_listener(listener), opts, framer, now_ms);
        // SAFETY: checked non-NULL above.
        unsafe { *out_conn = Box::into_raw(Box::new(botspace_http_connection { conn })) };
        botspace_status::Ok
    })
}

/// A connection accepted at `now_ms` and refused at once: the host is at
/// its connection limit with every connection busy. It takes no request:
/// `transmit` holds the 503 `server_busy` (as
/// `botspace_server_busy_response`) and its state is CLOSING; input is read
/// and discarded. Once the answer is sent it is LINGERING (shut the write
/// side) for 500 ms or 64 KiB of input, then CLOSED
/// (`botspace_http_connection_handle_timeout` at `timeout_ms` ends it);
/// the peer's EOF ends it sooner. Drive it as any connection, but count it
/// apart from the connection limit (it is never waiting:
/// `waiting_since_ms` is `BOTSPACE_NO_DEADLINE`), and keep at most as many
/// at once as `botspace_refusal_may_linger` allows. Release it with
/// `botspace_http_connection_free`.
///
/// # Safety
/// `out_conn` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_refusing_busy(
    now_ms: u64,
    out_conn: *mut *mut botspace_http_connection,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_conn, "out_conn");
        let conn = botspace::policy::connection::HttpConnection::refusing_busy(now_ms);
        // SAFETY: checked non-NULL above.
        unsafe { *out_conn = Box::into_raw(Box::new(botspace_http_connection { conn })) };
        botspace_status::Ok
    })
}

/// Whether one more busy refusal may linger
/// (`botspace_http_connection_refusing_busy`) while `lingering` of the
/// host's refusals linger already (at most 256 at once). When not, send
/// `botspace_server_busy_response` best effort, never blocking, and close
/// at once. Cannot fail.
#[no_mangle]
pub extern "C" fn botspace_refusal_may_linger(lingering: usize) -> bool {
    ffi_boundary!(on_panic = false; { botspace::policy::host::refusal_may_linger(lingering) })
}

/// Where the connection stands (see `botspace_http_connection_info`).
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `out_info` must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_get_info(
    conn: *const botspace_http_connection,
    out_info: *mut botspace_http_connection_info,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_info, "out_info");
        let c = live_conn!(ref conn);
        let state = botspace_connection_state::from(c.state());
        let info = botspace_http_connection_info {
            state,
            wants_read: c.wants_read(),
            read_limit: c.read_limit(),
            has_request: c.has_request(),
            idle: c.is_idle(),
            unsent: c.transmit().len(),
            timeout_ms: c.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE),
            waiting_since_ms: c.waiting_since().unwrap_or(BOTSPACE_NO_DEADLINE),
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_info.write(info) };
        botspace_status::Ok
    })
}

/// Bytes read from the socket at `now_ms` (at most `read_limit` of them
/// while OPEN). Ends the validity of requests taken before.
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `bytes` must
/// point at `len` readable bytes (or be NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_handle_input(
    conn: *mut botspace_http_connection,
    bytes: *const u8,
    len: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        let c = live_conn!(conn);
        // SAFETY: as documented above.
        match unsafe { input(bytes, len, "bytes") } {
            Ok(b) => c.handle_input(b, now_ms),
            Err(s) => return s,
        }
        botspace_status::Ok
    })
}

/// The peer closed its side (a read returned 0) at `now_ms`: the requests
/// it sent whole are still given and answered, then the connection closes;
/// with a poll taken and not answered it is CLOSED at once.
///
/// # Safety
/// `conn` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_handle_eof(
    conn: *mut botspace_http_connection,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        live_conn!(conn).handle_eof(now_ms);
        botspace_status::Ok
    })
}

/// The next complete request to answer (`present` false: none now). After a
/// plain request (routes BATCH and ALONE, keeping the connection) the next
/// may be taken before it is answered, to answer many in one commit; after
/// any other, only once it is answered. On the way the connection queues
/// `100 Continue` or a refusal by itself (see `transmit`).
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `out_request`
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_poll_request(
    conn: *mut botspace_http_connection,
    now_ms: u64,
    out_request: *mut botspace_http_request,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_request, "out_request");
        let c = live_conn!(conn);
        let out = match c.poll_request(now_ms) {
            Some(t) => {
                let bytes = c.request(&t);
                botspace_http_request {
                    present: true,
                    route: c_route(t.route),
                    ptr: bytes.as_ptr(),
                    len: bytes.len(),
                    head: botspace_request_head::from(&t.head),
                }
            }
            None => botspace_http_request {
                present: false,
                route: botspace_route::Batch,
                ptr: std::ptr::null(),
                len: 0,
                head: botspace_request_head::default(),
            },
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_request.write(out) };
        botspace_status::Ok
    })
}

/// The answer to the oldest request taken and not answered, at `now_ms`:
/// queued with the `Connection` header its request calls for (`close`,
/// or `keep-alive` to HTTP/1.0); after a request that ends the connection
/// it closes once the answer is sent. An empty answer (NULL, 0) says the
/// host could not get one (the call failed): the request gets the
/// library's 500 `answer_failed` in its turn.
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `response` must
/// point at `len` readable bytes (or be NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_answer(
    conn: *mut botspace_http_connection,
    response: *const u8,
    len: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        let c = live_conn!(conn);
        // SAFETY: as documented above.
        match unsafe { input(response, len, "response") } {
            Ok(r) => c.answer(r, now_ms),
            Err(s) => return s,
        }
        botspace_status::Ok
    })
}

/// Ends the connection once what `transmit` holds is sent, without
/// lingering (the host could not go on with it).
///
/// # Safety
/// `conn` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_close(
    conn: *mut botspace_http_connection,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        live_conn!(conn).close(false, now_ms);
        botspace_status::Ok
    })
}

/// The `GET /bot/gateway` request taken last was upgraded (the host sends
/// the `101` after `*out_output`): the socket is the gateway's from here.
/// `*out_input` gets what the bot sent after its request (the gateway's
/// first input), `*out_output` the answers not yet sent. The connection is
/// CLOSED afterwards; free it. Free both outputs.
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `out_input` and
/// `out_output` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_upgrade(
    conn: *mut botspace_http_connection,
    out_input: *mut botspace_bytes,
    out_output: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_input, "out_input");
        non_null!(out_output, "out_output");
        let (input, output) = live_conn!(conn).upgrade();
        // SAFETY: checked non-NULL above.
        unsafe {
            out_input.write(botspace_bytes::from_vec(input));
            out_output.write(botspace_bytes::from_vec(output));
        }
        botspace_status::Ok
    })
}

/// The bytes to write to the socket, borrowed from the connection: valid
/// until the next call that changes it. Say how many went with
/// `botspace_http_connection_sent`.
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `out_ptr` and
/// `out_len` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_transmit(
    conn: *const botspace_http_connection,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_ptr, "out_ptr");
        non_null!(out_len, "out_len");
        let t = live_conn!(ref conn).transmit();
        // SAFETY: checked non-NULL above.
        unsafe { write_borrowed(t, out_ptr, out_len) };
        botspace_status::Ok
    })
}

/// The host wrote the first `n` bytes of `transmit` at `now_ms`.
///
/// # Safety
/// `conn` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_sent(
    conn: *mut botspace_http_connection,
    n: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        live_conn!(conn).sent(n, now_ms);
        botspace_status::Ok
    })
}

/// Acts on the deadlines passed by `now_ms` (`info.timeout_ms`): queues
/// the 408 of a request that did not arrive in time (counted in the
/// metrics and logged when `service` is not NULL), closes an idle
/// connection or ends a lingering close. `*out_expired` says which.
///
/// # Safety
/// `conn` must be a live handle used by this thread only; `service` must
/// be NULL or a live handle; `out_expired` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_handle_timeout(
    conn: *mut botspace_http_connection,
    service: *const botspace_service,
    now_ms: u64,
    out_expired: *mut botspace_expired,
) -> botspace_status {
    ffi_boundary!({
        non_null!(out_expired, "out_expired");
        let c = live_conn!(conn);
        use botspace::policy::connection::Expired;
        // SAFETY: NULL or a live handle.
        let expired = match unsafe { service.as_ref() } {
            Some(s) => s.svc.handle_connection_timeout(c, now_ms),
            None => c.handle_timeout(now_ms),
        };
        let e = match expired {
            Expired::Nothing => botspace_expired::Nothing,
            Expired::Request => botspace_expired::Request,
            Expired::Idle => botspace_expired::Idle,
            Expired::Linger => botspace_expired::Linger,
        };
        // SAFETY: checked non-NULL above.
        unsafe { out_expired.write(e) };
        botspace_status::Ok
    })
}

/// Releases a connection and sets `*conn` to NULL; accepts NULL and a
/// pointer to NULL.
///
/// # Safety
/// `*conn` must be NULL or a handle from `botspace_http_connection_new` or
/// `botspace_http_connection_refusing_busy` not released through another
/// copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_connection_free(conn: *mut *mut botspace_http_connection) {
    ffi_boundary!(on_panic = (); {
        if conn.is_null() {
            return;
        }
        // SAFETY: non-NULL pointer to a handle pointer.
        let p = unsafe { std::ptr::replace(conn, std::ptr::null_mut()) };
        if !p.is_null() {
            // SAFETY: p came from Box::into_raw in botspace_http_connection_new
            // or botspace_http_connection_refusing_busy.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

// ---------------------------------------------------------------- round

/// The round of a host's HTTP connections (the library's group commit
/// across connections): between rounds it keeps where the backlog's round
/// robin starts and its buffers. Serve one round after each wait for the
/// sockets with `botspace_http_round_serve`. Not thread-safe: one thread
/// at a time.
pub struct botspace_http_round {
    round: botspace::HttpRound,
}

/// One connection given to `botspace_http_round_serve`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_round_connection {
    /// The connection; NULL when this entry is not an HTTP connection now
    /// (a gateway, a closed socket): skipped, and still counted in the
    /// round robin.
    pub conn: *mut botspace_http_connection,
    /// It read bytes this turn: served ahead of the backlog.
    pub fresh: bool,
    /// Its peer's IP address, `peer_len` bytes (NULL with 0: none), for
    /// the host API's login throttle.
    pub peer: *const c_char,
    pub peer_len: usize,
}

/// What a round leaves to the host (`botspace_round_step`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_round_step_kind {
    /// `GET /bot/gateway`: call `botspace_gateway_accept` with `request`;
    /// upgraded, `botspace_http_connection_upgrade` and the socket is the
    /// gateway's; refused, answer the refusal on the connection.
    Gateway = 0,
    /// The connection's getUpdates is parked under `poll_id`: send what
    /// `botspace_service_poll_parked` returns for it, or cancel it when
    /// the client goes away.
    Parked = 1,
}

/// One step of a round, for connection `connection` (an index into the
/// array given to `botspace_http_round_serve`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct botspace_round_step {
    pub connection: usize,
    pub kind: botspace_round_step_kind,
    /// GATEWAY: the request, inside the connection (valid until its next
    /// `handle_input` or `free`); else not present.
    pub request: botspace_http_request,
    /// PARKED: the poll's id (never 0); else 0.
    pub poll_id: u64,
}

/// The host's array, as the core's round sees it.
struct CRoundConnections<'a>(&'a [botspace_round_connection]);

impl botspace::RoundConnections for CRoundConnections<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn connection(&self, i: usize) -> Option<&botspace::policy::connection::HttpConnection> {
        // SAFETY: each non-NULL `conn` is a live handle used by this thread
        // only, as `botspace_http_round_serve` requires.
        unsafe { self.0[i].conn.as_ref() }.map(|c| &c.conn)
    }
    fn connection_mut(&mut self, i: usize) -> Option<&mut botspace::policy::connection::HttpConnection> {
        // SAFETY: as above, and no two entries name the same handle.
        unsafe { self.0[i].conn.as_mut() }.map(|c| &mut c.conn)
    }
    fn fresh(&self, i: usize) -> bool {
        self.0[i].fresh
    }
    fn peer(&self, i: usize) -> std::borrow::Cow<'_, str> {
        let p = self.0[i];
        // SAFETY: `peer` points at `peer_len` readable bytes, as required.
        String::from_utf8_lossy(unsafe { input(p.peer.cast::<u8>(), p.peer_len, "peer") }.unwrap_or(&[]))
    }
}

/// A new round; release it with `botspace_http_round_free`.
///
/// # Safety
/// `out_round` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_round_new(out_round: *mut *mut botspace_http_round) -> botspace_status {
    ffi_boundary!({
        non_null!(out_round, "out_round");
        let round = Box::new(botspace_http_round { round: botspace::HttpRound::new() });
        // SAFETY: checked non-NULL above.
        unsafe { out_round.write(Box::into_raw(round)) };
        botspace_status::Ok
    })
}

/// Serves one round over `conns[0..count]` at `now_ms` (the host's
/// monotonic clock, the clock of its connections): every complete request
/// buffered on them is answered, in batches of up to the policy's
/// `max_batch`, one `botspace_service_handle_batch` (one transaction, one
/// fsync) each; connections marked `fresh` first, each up to its budget,
/// then the others round robin, up to `max_batch` of theirs a round. The
/// host API (with the entry's peer), getUpdates and another listener's
/// paths are answered alone after the batch before them; each ends its
/// connection's share of the batch. A connection that still has requests
/// says so (`has_request`): poll again without sleeping.
///
/// What is left to the host is written to `out_steps` (room for `count`
/// values: at most one per connection) and their number to
/// `*out_steps_len`: gateway upgrades and parked polls, in the order of
/// the connections. Clear the `fresh` marks afterwards. `count` 0 is OK
/// (then `conns` and `out_steps` may be NULL).
///
/// # Safety
/// `round` must be a live handle and `service` a live service; `conns`
/// must point at `count` values, each `conn` NULL or a live connection
/// used by this thread only and named by no other entry, each `peer`
/// valid as an input; `out_steps` must have room for `count` values and
/// `out_steps_len` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_round_serve(
    round: *mut botspace_http_round,
    service: *const botspace_service,
    conns: *const botspace_round_connection,
    count: usize,
    now_ms: u64,
    out_steps: *mut botspace_round_step,
    out_steps_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        non_null!(round, "round");
        non_null!(service, "service");
        non_null!(out_steps_len, "out_steps_len");
        if count > 0 {
            non_null!(conns, "conns");
            non_null!(out_steps, "out_steps");
        }
        if count > isize::MAX as usize / std::mem::size_of::<botspace_round_step>() {
            return fail(botspace_status::InvalidArgument, "count is too large");
        }
        let entries: &[botspace_round_connection] = if count == 0 {
            &[]
        } else {
            // SAFETY: the caller gives `count` values at `conns`.
            unsafe { std::slice::from_raw_parts(conns, count) }
        };
        // SAFETY: live handles.
        let (round, svc) = unsafe { (&mut (*round).round, &(*service).svc) };
        let mut cs = CRoundConnections(entries);
        let steps = round.serve(svc, &mut cs, now_ms);
        if steps.len() > count {
            return fail(botspace_status::Panic, "internal error: a round gave more steps than connections");
        }
        for (k, s) in steps.iter().enumerate() {
            let out = match *s {
                botspace::RoundStep::Gateway { conn, request } => {
                    // SAFETY: as above; the step names a live entry.
                    let c = unsafe { entries[conn].conn.as_ref() }.map(|c| &c.conn);
                    let bytes = c.map_or(&[][..], |c| c.request(&request));
                    botspace_round_step {
                        connection: conn,
                        kind: botspace_round_step_kind::Gateway,
                        request: botspace_http_request {
                            present: true,
                            route: c_route(request.route),
                            ptr: bytes.as_ptr(),
                            len: bytes.len(),
                            head: botspace_request_head::from(&request.head),
                        },
                        poll_id: 0,
                    }
                }
                botspace::RoundStep::Parked { conn, poll } => botspace_round_step {
                    connection: conn,
                    kind: botspace_round_step_kind::Parked,
                    request: botspace_http_request {
                        present: false,
                        route: botspace_route::Poll,
                        ptr: std::ptr::null(),
                        len: 0,
                        head: botspace_request_head::default(),
                    },
                    poll_id: poll.0,
                },
            };
            // SAFETY: room for `count` values; a round gives at most one
            // step per connection, so k < count.
            unsafe { out_steps.add(k).write(out) };
        }
        // SAFETY: checked non-NULL above.
        unsafe { out_steps_len.write(steps.len()) };
        botspace_status::Ok
    })
}

/// Releases a round and sets `*round` to NULL; accepts NULL and a pointer
/// to NULL.
///
/// # Safety
/// `*round` must be NULL or a handle from `botspace_http_round_new` not
/// released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_http_round_free(round: *mut *mut botspace_http_round) {
    ffi_boundary!(on_panic = (); {
        // SAFETY: as the function's contract says: NULL, or the address of NULL or
        // of a handle from its `_new`, released once.
        unsafe { free_handle(round) }
    })
}
