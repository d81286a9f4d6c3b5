//! Where a complete request goes on a listener (`botspace_route_request`)
//! and the answers the library words for a host: not here, `100 Continue`,
//! server busy, and what a response's status and error code are.

use crate::boundary::input;
use crate::bytes::botspace_bytes;
use crate::status::{botspace_status, fail};
use std::ffi::c_char;

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
    /// one `botspace_service_handle` call (one transaction, one fsync).
    Batch = 0,
    /// Answered as well alone as in a batch (getMe, health, metrics, the
    /// console, unknown paths): the host may batch it or not.
    Alone = 1,
    /// The host API: answered alone by `botspace_service_handle` with its
    /// `peer` (failed logins are throttled per peer).
    Admin = 2,
    /// getUpdates: answered alone by `botspace_service_handle` (it may
    /// park).
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
        c_route(botspace::connection::route(core_listener(listener), &String::from_utf8_lossy(path)))
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
        let out_response = arg!(out out_response);
        let path = arg!(text path, path_len);
        out_response.write(botspace_bytes::from_vec(botspace::connection::not_here(&path)));
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
        let out_response = arg!(out out_response);
        out_response.write(botspace_bytes::from_vec(botspace::connection::CONTINUE.to_vec()));
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
        let out_response = arg!(out out_response);
        out_response.write(botspace_bytes::from_vec(botspace::connection::server_busy()));
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
        let out_status = arg!(out out_status);
        let out_error = arg!(out out_error);
        let resp = arg!(bytes response, response_len);
        let Some((status, code)) = botspace::connection::response_error(resp) else {
            return fail(botspace_status::InvalidArgument, "not an HTTP/1.1 response");
        };
        out_status.write(status);
        out_error.write(code.map_or(std::ptr::null(), |c| c.as_c_str().as_ptr()));
        botspace_status::Ok
    })
}

pub(crate) fn core_listener(l: botspace_listener) -> botspace::connection::Listener {
    match l {
        botspace_listener::All => botspace::connection::Listener::All,
        botspace_listener::Public => botspace::connection::Listener::Public,
        botspace_listener::Admin => botspace::connection::Listener::Admin,
    }
}

pub(crate) fn c_route(r: botspace::connection::Lane) -> botspace_route {
    match r {
        botspace::connection::Lane::Batch => botspace_route::Batch,
        botspace::connection::Lane::Alone => botspace_route::Alone,
        botspace::connection::Lane::Admin => botspace_route::Admin,
        botspace::connection::Lane::Poll => botspace_route::Poll,
        botspace::connection::Lane::Gateway => botspace_route::Gateway,
        botspace::connection::Lane::NotHere => botspace_route::NotHere,
    }
}
