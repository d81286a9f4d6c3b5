//! Gateway links (`botspace_gateway_link`): a gateway connection with its
//! unsent output and its closing rules, for a host that only moves bytes.

use crate::boundary::Handle;
use crate::bytes::write_borrowed;
use crate::gateway::botspace_gateway;
use crate::http_connection::botspace_connection_state;
use crate::status::{botspace_status, fail};
use crate::BOTSPACE_NO_DEADLINE;
use std::ffi::{c_char, CString};

/// A gateway connection as a host with a raw socket drives it, from the
/// `101` to the socket's close: the session, the output the socket has not
/// taken, and the rules of its end (a close the server decides goes right
/// after the frame being written; the last writes; the lingering close).
/// Made from a `botspace_gateway` (`botspace_gateway_link_new`). Not
/// thread-safe: use it from one thread at a time.
pub struct botspace_gateway_link {
    pub(crate) link: botspace::gateway::GatewayLink,
    pub(crate) bot_id: CString,
}

impl Handle for botspace_gateway_link {}

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
    /// Bytes `botspace_gateway_link_poll_transmit` holds.
    pub unsent: usize,
    /// When to call `botspace_gateway_link_handle_timeout` at the latest,
    /// on the host's monotonic clock (the `now_ms` passed in);
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
/// host wrote them itself). The session runs on the clock of the service
/// that accepted it, which the link reads itself: every later call takes
/// only the host's monotonic clock. Then call
/// `botspace_gateway_link_handle_timeout` (or
/// `botspace_gateway_link_handle_input` with the bytes that followed the
/// request).
///
/// # Safety
/// `gateway` must point at a live gateway handle not used by another
/// thread; `head` must point at `head_len` readable bytes (or be NULL with
/// length 0); `out_link` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_new(
    gateway: *mut *mut botspace_gateway,
    head: *const u8,
    head_len: usize,
    out_link: *mut *mut botspace_gateway_link,
) -> botspace_status {
    ffi_boundary!({
        let gateway = arg!(ptr gateway);
        let out_link = arg!(out out_link);
        let head = arg!(bytes head, head_len).to_vec();
        // SAFETY: the address of a live gateway handle, taken here.
        let Some(gw) = (unsafe { Handle::take(gateway) }) else {
            return fail(botspace_status::NullArgument, "argument `*gateway` is NULL");
        };
        let gw: botspace_gateway = *gw;
        let link = botspace::gateway::GatewayLink::new(gw.conn, head);
        out_link.write(botspace_gateway_link { link, bot_id: gw.bot_id }.into_raw());
        botspace_status::Ok
    })
}

/// Bytes read from the socket at `now_ms` (the host's monotonic clock, as
/// in every call of the link): the session's input while it runs (then
/// the link runs it, as `botspace_gateway_link_handle_timeout`), discarded
/// once it is over. May write acks and read the event log (it blocks on
/// the database).
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
) -> botspace_status {
    ffi_boundary!({
        let b = arg!(bytes bytes, len);
        arg!(mut link).link.handle_input(b, now_ms);
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
) -> botspace_status {
    ffi_boundary!({
        arg!(mut link).link.handle_eof(now_ms);
        botspace_status::Ok
    })
}

/// Runs the link: the session's deadlines, its output up to the budget,
/// the end rules; a closing or lingering link whose time is up closes.
/// Call it when the info's `timeout_ms` comes and when the wake-up
/// callback names the link's bot (new events are a deadline of now). May
/// write acks and read the event log (it blocks on the database).
///
/// # Safety
/// `link` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_handle_timeout(
    link: *mut botspace_gateway_link,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        arg!(mut link).link.handle_timeout(now_ms);
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
    out_closed: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let Some(code) = botspace::gateway::host_close_reason(code) else {
            return fail(botspace_status::InvalidArgument, format!("close code {code} is not one a host may send"));
        };
        let closed = arg!(mut link).link.close(code, now_ms);
        if let Some(out_closed) = arg!(opt_out out_closed) {
            out_closed.write(closed);
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
pub unsafe extern "C" fn botspace_gateway_link_poll_transmit(
    link: *const botspace_gateway_link,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let out_ptr = arg!(out out_ptr);
        let out_len = arg!(out out_len);
        let t = arg!(ref link).link.poll_transmit();
        write_borrowed(t, out_ptr, out_len);
        botspace_status::Ok
    })
}

/// The socket took the first `n` bytes of `poll_transmit` at `now_ms`.
/// Touches no storage.
///
/// # Safety
/// `link` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_gateway_link_sent(
    link: *mut botspace_gateway_link,
    n: usize,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        let l = &mut arg!(mut link).link;
        if n > l.poll_transmit().len() {
            return fail(
                botspace_status::InvalidArgument,
                format!("sent {n} bytes of {} to send", l.poll_transmit().len()),
            );
        }
        l.sent(n, now_ms);
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
        let out_info = arg!(out out_info);
        let l = &arg!(ref link).link;
        let state = botspace_connection_state::from(l.state());
        let info = botspace_gateway_link_info {
            state,
            wants_read: l.wants_read(),
            unsent: l.unsent(),
            timeout_ms: l.poll_timeout().unwrap_or(BOTSPACE_NO_DEADLINE),
            close_code: l.close_reason().map_or(0, |(code, _)| code),
        };
        out_info.write(info);
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
        let link = arg!(ref link);
        let out_bot_id = arg!(out out_bot_id);
        out_bot_id.write(link.bot_id.as_ptr());
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
    // SAFETY: the contract above.
    unsafe { Handle::free(link) }
}
