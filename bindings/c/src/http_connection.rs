//! One HTTP/1.1 server connection, sans-IO (`botspace_http_connection`):
//! the library's rules for it, the host's socket and clock.

use crate::boundary::Handle;
use crate::bytes::{botspace_bytes, write_borrowed};
use crate::request_framer::botspace_request_head;
use crate::route::{botspace_listener, botspace_route, c_route, core_listener};
use crate::service::botspace_service;
use crate::status::botspace_status;
use crate::BOTSPACE_NO_DEADLINE;

/// One HTTP/1.1 server connection, sans-IO: the library's rules for it
/// (framing and the input bound, answers in order, the budget of unsent
/// answers, `100 Continue`, the `Connection` header of each answer, the
/// refusal and its lingering close, the request, idle and write deadlines,
/// half close). The host owns the socket and the clock: it reads up to
/// `read_limit` bytes into `botspace_http_connection_handle_input`, takes
/// requests with `botspace_http_connection_poll_request`, answers them with
/// `botspace_http_connection_answer`, writes `botspace_http_connection_poll_transmit`,
/// calls `botspace_http_connection_handle_timeout` at `poll_timeout`, and
/// does with the socket what `state` says. Not thread-safe: one thread at
/// a time.
pub struct botspace_http_connection {
    pub(crate) conn: botspace::connection::http::HttpConnection,
}

impl Handle for botspace_http_connection {}

/// What the host does with a connection's socket.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_connection_state {
    /// Reading requests and sending answers.
    Open = 0,
    /// Send what `poll_transmit` holds; input is read and discarded.
    Closing = 1,
    /// Everything is sent: shut the write side (`shutdown(SHUT_WR)`) and
    /// keep reading into `handle_input` (discarded) until the state is
    /// CLOSED.
    Lingering = 2,
    /// Close the socket (and cancel a poll parked for the connection).
    Closed = 3,
}

impl From<botspace::connection::http::ConnectionState> for botspace_connection_state {
    fn from(s: botspace::connection::http::ConnectionState) -> Self {
        use botspace::connection::http::ConnectionState as S;
        match s {
            S::Open => botspace_connection_state::Open,
            S::Closing => botspace_connection_state::Closing,
            S::Lingering => botspace_connection_state::Lingering,
            S::Closed => botspace_connection_state::Closed,
        }
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
    /// Output was pending and the peer took none of it for the write
    /// timeout (30 s): the connection is CLOSED, what it held dropped.
    Write = 4,
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
    /// Bytes `poll_transmit` holds.
    pub unsent: usize,
    /// When `handle_timeout` next has something to do, in the host's
    /// clock; `BOTSPACE_NO_DEADLINE` for none. Every deadline of the
    /// connection is here, the write timeout's too: the host keeps no
    /// timer of its own.
    pub timeout_ms: u64,
    /// Since when it waits for a request with nothing taken and nothing to
    /// send, or since its getUpdates parked (the round's PARKED step; its
    /// client holds the connection and gives no work): at a connection
    /// limit the longest waiting is evicted (a parked poll is cancelled
    /// with it); `BOTSPACE_NO_DEADLINE` when it is busy and is not to be
    /// evicted.
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
        let service = arg!(ref service);
        let out_conn = arg!(out out_conn);
        let framer = service.svc.request_framer();
        let opts = botspace::connection::http::ConnectionOptions { request_timeout_ms, idle_timeout_ms };
        let conn = botspace::connection::http::HttpConnection::new(core_listener(listener), opts, framer, now_ms);
        out_conn.write(botspace_http_connection { conn }.into_raw());
        botspace_status::Ok
    })
}

/// A connection accepted at `now_ms` and refused at once: the host is at
/// its connection limit with every connection busy. It takes no request:
/// `poll_transmit` holds the 503 `server_busy` (as
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
        let out_conn = arg!(out out_conn);
        let conn = botspace::connection::http::HttpConnection::refusing_busy(now_ms);
        out_conn.write(botspace_http_connection { conn }.into_raw());
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
    ffi_boundary!(on_panic = false; { botspace::connection::limits::refusal_may_linger(lingering) })
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
        let out_info = arg!(out out_info);
        let c = &arg!(ref conn).conn;
        let state = botspace_connection_state::from(c.state());
        let info = botspace_http_connection_info {
            state,
            wants_read: c.wants_read(),
            read_limit: c.read_limit(),
            has_request: c.has_request(),
            idle: c.is_idle(),
            unsent: c.poll_transmit().len(),
            timeout_ms: c.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE),
            waiting_since_ms: c.waiting_since().unwrap_or(BOTSPACE_NO_DEADLINE),
        };
        out_info.write(info);
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
        let c = &mut arg!(mut conn).conn;
        c.handle_input(arg!(bytes bytes, len), now_ms);
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
        arg!(mut conn).conn.handle_eof(now_ms);
        botspace_status::Ok
    })
}

/// The next complete request to answer (`present` false: none now). After a
/// plain request (routes BATCH and ALONE, keeping the connection) the next
/// may be taken before it is answered, to answer many in one commit; after
/// any other, only once it is answered. On the way the connection queues
/// `100 Continue` or a refusal by itself (see `poll_transmit`).
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
        let out_request = arg!(out out_request);
        let c = &mut arg!(mut conn).conn;
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
        out_request.write(out);
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
        let c = &mut arg!(mut conn).conn;
        c.answer(arg!(bytes response, len), now_ms);
        botspace_status::Ok
    })
}

/// Ends the connection once what `poll_transmit` holds is sent, without
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
        arg!(mut conn).conn.close(false, now_ms);
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
        let out_input = arg!(out out_input);
        let out_output = arg!(out out_output);
        let (input, output) = arg!(mut conn).conn.upgrade();
        out_input.write(botspace_bytes::from_vec(input));
        out_output.write(botspace_bytes::from_vec(output));
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
pub unsafe extern "C" fn botspace_http_connection_poll_transmit(
    conn: *const botspace_http_connection,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let out_ptr = arg!(out out_ptr);
        let out_len = arg!(out out_len);
        let t = arg!(ref conn).conn.poll_transmit();
        write_borrowed(t, out_ptr, out_len);
        botspace_status::Ok
    })
}

/// The host wrote the first `n` bytes of `poll_transmit` at `now_ms`
/// (a write that took some restarts the peer's write timeout).
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
        arg!(mut conn).conn.sent(n, now_ms);
        botspace_status::Ok
    })
}

/// Acts on the deadlines passed by `now_ms` (`info.timeout_ms`): queues
/// the 408 of a request that did not arrive in time (counted in the
/// metrics and logged when `service` is not NULL), closes an idle
/// connection or one whose peer took nothing for the write timeout, or
/// ends a lingering close. `*out_expired` says which.
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
        let out_expired = arg!(out out_expired);
        let c = &mut arg!(mut conn).conn;
        use botspace::connection::http::Expired;
        let expired = match arg!(opt service) {
            Some(s) => s.svc.handle_connection_timeout(c, now_ms),
            None => c.handle_timeout(now_ms),
        };
        let e = match expired {
            Expired::Nothing => botspace_expired::Nothing,
            Expired::Request => botspace_expired::Request,
            Expired::Idle => botspace_expired::Idle,
            Expired::Linger => botspace_expired::Linger,
            Expired::Write => botspace_expired::Write,
        };
        out_expired.write(e);
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
    // SAFETY: the contract above.
    unsafe { Handle::free(conn) }
}
