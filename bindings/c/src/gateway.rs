//! One gateway (WebSocket) connection after its upgrade
//! (`botspace_gateway`): input, timeouts, output budgets, events, close.

use crate::boundary::Handle;
use crate::bytes::botspace_bytes;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use crate::BOTSPACE_NO_DEADLINE;
use botspace::{CloseCode, GatewayConnection};
use std::ffi::{c_char, CString};

/// One gateway (WebSocket) connection after a successful upgrade. Not
/// thread-safe: use it from one thread at a time (it may move between
/// threads). Different gateways may be used in parallel.
pub struct botspace_gateway {
    pub(crate) conn: GatewayConnection,
    pub(crate) bot_id: CString,
}

impl Handle for botspace_gateway {}

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
        let service = arg!(ref service);
        let out_response = arg!(out out_response);
        let out_gateway = arg!(out out_gateway);
        let req = arg!(bytes request, request_len);
        let svc = &service.svc;
        let acc = svc.accept_gateway(req, now_ms);
        let gw = match acc.connection {
            None => std::ptr::null_mut(),
            Some(conn) => {
                let bot_id = CString::new(conn.bot_id()).unwrap_or_default();
                botspace_gateway { conn, bot_id }.into_raw()
            }
        };
        out_response.write(botspace_bytes::from_vec(acc.response));
        out_gateway.write(gw);
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
        let gateway = arg!(mut gateway);
        let b = arg!(bytes bytes, len);
        gateway.conn.handle_input(b, now_ms);
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
        let gateway = arg!(mut gateway);
        gateway.conn.handle_timeout(now_ms);
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
        let gateway = arg!(mut gateway);
        gateway.conn.handle_unsent(unsent, now_ms);
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
        let gateway = arg!(ref gateway);
        let out = arg!(out out);
        out.write(gateway.conn.wants_input());
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
        let gateway = arg!(ref gateway);
        let out = arg!(out out);
        out.write(gateway.conn.wants_transmit());
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
        let gateway = arg!(mut gateway);
        let Some(code) = botspace::gateway::host_close_reason(code) else {
            return fail(
                botspace_status::InvalidArgument,
                format!("close code {code} is not one a host may send (4008 slow_consumer, 1001 server_shutdown)"),
            );
        };
        gateway.conn.close(code);
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
        let gateway = arg!(mut gateway);
        let out_bytes = arg!(out out_bytes);
        let mut bytes = Vec::new();
        gateway.conn.poll_transmit(&mut bytes);
        out_bytes.write(botspace_bytes::from_vec(bytes));
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
        let gateway = arg!(ref gateway);
        let out_ms = arg!(out out_ms);
        out_ms.write(gateway.conn.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE));
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
pub(crate) fn static_reason(reason: CloseCode) -> *const c_char {
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
        let gateway = arg!(mut gateway);
        let out_event = arg!(out out_event);
        let ev = match gateway.conn.poll_event() {
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
        out_event.write(ev);
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
        let gateway = arg!(ref gateway);
        let out_closed = arg!(out out_closed);
        out_closed.write(gateway.conn.is_closed());
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
        let gateway = arg!(ref gateway);
        let out_bot_id = arg!(out out_bot_id);
        out_bot_id.write(gateway.bot_id.as_ptr());
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
    // SAFETY: the contract above.
    unsafe { Handle::free(gateway) }
}
