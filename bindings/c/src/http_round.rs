//! The round of a host's HTTP connections (`botspace_http_round`): the
//! library's group commit across connections.

use crate::boundary::{input, Handle};
use crate::http_connection::{botspace_http_connection, botspace_http_request};
use crate::request_framer::botspace_request_head;
use crate::route::{botspace_route, c_route};
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use std::ffi::c_char;

/// The round of a host's HTTP connections (the library's group commit
/// across connections): between rounds it keeps where the backlog's round
/// robin starts and its buffers. Serve one round after each wait for the
/// sockets with `botspace_http_round_serve`. Not thread-safe: one thread
/// at a time.
pub struct botspace_http_round {
    pub(crate) round: botspace::HttpRound,
}

impl Handle for botspace_http_round {}

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
    fn connection(&self, i: usize) -> Option<&botspace::connection::http::HttpConnection> {
        // SAFETY: each non-NULL `conn` is a live handle used by this thread
        // only, as `botspace_http_round_serve` requires.
        unsafe { self.0[i].conn.as_ref() }.map(|c| &c.conn)
    }
    fn connection_mut(&mut self, i: usize) -> Option<&mut botspace::connection::http::HttpConnection> {
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
        let out_round = arg!(out out_round);
        out_round.write(botspace_http_round { round: botspace::HttpRound::new() }.into_raw());
        botspace_status::Ok
    })
}

/// Serves one round over `conns[0..count]` at `now_ms` (the host's
/// monotonic clock, the clock of its connections): every complete request
/// buffered on them is answered, in batches of up to the policy's
/// `max_batch`, one group commit (one transaction, one
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
        let round = arg!(mut round);
        let service = arg!(ref service);
        let out_steps_len = arg!(out out_steps_len);
        if count > 0 {
            arg!(ptr conns);
            arg!(ptr out_steps);
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
        let (round, svc) = (&mut round.round, &service.svc);
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
        out_steps_len.write(steps.len());
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
    // SAFETY: the contract above.
    unsafe { Handle::free(round) }
}
