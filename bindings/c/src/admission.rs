//! The C ABI of the core's admission (`botspace_runtime::admission`):
//! which accepted sockets a server serves, evicts room for or refuses, what
//! it does after a failed accept, the order in which its waiting
//! connections are evicted, and the loop that hears other nodes' commits.
//! The host keeps its sockets, its spare descriptor and the clock; the
//! policy and what is said about it are the library's.

use crate::boundary::Handle;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use botspace_runtime::admission::{AcceptError, Admission, Admit};
use std::ffi::c_void;

/// The admission of one server's connections (all its listeners): the
/// order in which its waiting connections are evicted (by an id of the
/// host's, a counter or a pointer), its lingering busy refusals and the
/// report of its accept errors. Made by `botspace_admission_new`, released
/// by `botspace_admission_free`. Not thread-safe: one thread at a time.
pub struct botspace_admission {
    pub(crate) adm: Admission,
}

impl Handle for botspace_admission {}

/// What a host does with a socket it accepted (`botspace_admission_admit`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_admit_kind {
    /// Below the connection limit: serve it.
    Serve = 0,
    /// At the limit: close the connection `evict_id` (it waited longest for
    /// a request; counted in `botspace_connection_evictions_total` and said
    /// through the log callback already), then serve the new one.
    ServeAfterEvicting = 1,
    /// Every connection busy: the busy refusal with its linger
    /// (`botspace_http_connection_refusing_busy`), not counted as a
    /// connection. Call `botspace_admission_refusal_ended` when it closes.
    RefuseLingering = 2,
    /// Every connection busy and 256 refusals lingering already: send
    /// `botspace_server_busy_response` best effort, never blocking, and
    /// close at once.
    RefuseNow = 3,
}

/// The decision of `botspace_admission_admit`. Plain data.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct botspace_admit {
    pub kind: botspace_admit_kind,
    /// The host's id of the connection to close (`SERVE_AFTER_EVICTING`
    /// only, else 0).
    pub evict_id: u64,
}

/// What failed an accept (`botspace_admission_accept_failed`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_accept_error {
    /// `EMFILE` or `ENFILE`: out of file descriptors.
    OutOfDescriptors = 0,
    /// Any other error.
    Other = 1,
}

/// What a host does after a failed accept
/// (`botspace_admission_accept_failed`). Plain data.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct botspace_accept_error_action {
    /// Close the connection `evict_id` now (it waited longest; counted and
    /// said as an eviction already): its descriptor makes room.
    pub evict: bool,
    /// The host's id of that connection (`evict` only, else 0).
    pub evict_id: u64,
    /// Close the spare descriptor, accept the waiting client on it and open
    /// the spare again: with `evict` serve that client, else refuse it at
    /// once (`botspace_server_busy_response`, best effort, no linger).
    pub use_spare: bool,
    /// Accept nothing before this (the host's clock, milliseconds).
    pub resume_at_ms: u64,
}

/// Asked by `botspace_service_run_store_notifications`, on its thread,
/// whether to stop: true ends the call. `user_data` is the pointer given
/// with it. It must be quick (read a flag).
pub type botspace_should_stop_callback = Option<unsafe extern "C" fn(user_data: *mut c_void) -> bool>;

/// Makes the admission of one server (one for all its listeners): no
/// waiting connection, no lingering refusal. Release it with
/// `botspace_admission_free`.
///
/// # Safety
/// `out_admission` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_new(out_admission: *mut *mut botspace_admission) -> botspace_status {
    ffi_boundary!({
        let out_admission = arg!(out out_admission);
        out_admission.write(botspace_admission { adm: Admission::new() }.into_raw());
        botspace_status::Ok
    })
}

/// Releases an admission and sets `*admission` to NULL; accepts NULL and a
/// pointer to NULL.
///
/// # Safety
/// `*admission` must be NULL or a handle from `botspace_admission_new` not
/// released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_free(admission: *mut *mut botspace_admission) {
    // SAFETY: the contract above.
    unsafe { Handle::free(admission) }
}

/// The host's connection `id` waits for a request from `now_ms` on (the
/// host's monotonic clock): a new connection, or one whose request was
/// taken. Touching it again moves it behind the others.
///
/// # Safety
/// `admission` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_touch(
    admission: *mut botspace_admission,
    id: u64,
    now_ms: u64,
) -> botspace_status {
    ffi_boundary!({
        arg!(mut admission).adm.touch(id, now_ms);
        botspace_status::Ok
    })
}

/// The host's connection `id` is not to be evicted (busy, upgraded to a
/// gateway, or closed). Nothing happens for an id that is not waiting.
///
/// # Safety
/// `admission` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_remove(admission: *mut botspace_admission, id: u64) -> botspace_status {
    ffi_boundary!({
        arg!(mut admission).adm.remove(id);
        botspace_status::Ok
    })
}

/// Writes the id of the connection that has waited longest to `*out_id`
/// and true to `*out_found`; false (and 0) when none waits.
///
/// # Safety
/// `admission` must be a live handle used by this thread only; both
/// outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_oldest(
    admission: *const botspace_admission,
    out_id: *mut u64,
    out_found: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let out_id = arg!(out out_id);
        let out_found = arg!(out out_found);
        let oldest = arg!(ref admission).adm.order().oldest();
        out_id.write(oldest.unwrap_or(0));
        out_found.write(oldest.is_some());
        botspace_status::Ok
    })
}

/// Decides for a socket accepted while `open` connections are open (what
/// `max` counts: HTTP and gateway connections, not busy refusals): serve
/// it; at the limit, evict the connection that has waited longest (it
/// leaves the order; the eviction is counted and said through `service`);
/// with every connection busy, refuse it with a linger while fewer than
/// 256 refusals linger, else at once.
///
/// # Safety
/// `admission` must be a live handle used by this thread only; `service`
/// a live handle; `out_admit` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_admit(
    admission: *mut botspace_admission,
    service: *const botspace_service,
    open: usize,
    max: usize,
    out_admit: *mut botspace_admit,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_admit = arg!(out out_admit);
        let adm = &mut arg!(mut admission).adm;
        let svc = &service.svc;
        let admit = match botspace_runtime::admission::admit(svc, adm, open, max) {
            Admit::Serve => botspace_admit { kind: botspace_admit_kind::Serve, evict_id: 0 },
            Admit::ServeAfterEvicting(id) => {
                botspace_admit { kind: botspace_admit_kind::ServeAfterEvicting, evict_id: id }
            }
            Admit::RefuseLingering => botspace_admit { kind: botspace_admit_kind::RefuseLingering, evict_id: 0 },
            Admit::RefuseNow => botspace_admit { kind: botspace_admit_kind::RefuseNow, evict_id: 0 },
        };
        out_admit.write(admit);
        botspace_status::Ok
    })
}

/// A refusal `botspace_admission_admit` let linger is closed.
///
/// # Safety
/// `admission` must be a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_refusal_ended(admission: *mut botspace_admission) -> botspace_status {
    ffi_boundary!({
        arg!(mut admission).adm.refusal_ended();
        botspace_status::Ok
    })
}

/// Writes how many busy refusals linger now to `*out_count`.
///
/// # Safety
/// `admission` must be a live handle used by this thread only;
/// `out_count` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_lingering_refusals(
    admission: *const botspace_admission,
    out_count: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let out_count = arg!(out out_count);
        let n = arg!(ref admission).adm.lingering_refusals();
        out_count.write(n);
        botspace_status::Ok
    })
}

/// Decides after an accept that failed at `now_ms` with `error`
/// (`error_len` bytes of its text, such as `strerror(errno)`; not
/// NUL-terminated): out of descriptors, evict the connection that has
/// waited longest and serve the waiting client on the spare descriptor;
/// with nobody to evict, or for another error, back off 50 ms (out of
/// descriptors, the waiting client is refused on the spare first). The
/// error is said through `service`'s log callback (level error, `accept
/// failed: ERROR (N in the last second)`) at most once a second, with how
/// many there were.
///
/// # Safety
/// `admission` must be a live handle used by this thread only; `service`
/// a live handle; `error` `error_len` readable bytes (NULL when 0);
/// `out_action` writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_admission_accept_failed(
    admission: *mut botspace_admission,
    service: *const botspace_service,
    kind: botspace_accept_error,
    error: *const u8,
    error_len: usize,
    now_ms: u64,
    out_action: *mut botspace_accept_error_action,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let out_action = arg!(out out_action);
        let error = arg!(text error, error_len);
        let adm = &mut arg!(mut admission).adm;
        let svc = &service.svc;
        let kind = match kind {
            botspace_accept_error::OutOfDescriptors => AcceptError::OutOfDescriptors,
            botspace_accept_error::Other => AcceptError::Other,
        };
        let after = botspace_runtime::admission::accept_failed(svc, adm, kind, &error, now_ms);
        let action = botspace_accept_error_action {
            evict: after.evict.is_some(),
            evict_id: after.evict.unwrap_or(0),
            use_spare: after.use_spare,
            resume_at_ms: after.resume_at,
        };
        out_action.write(action);
        botspace_status::Ok
    })
}

/// Hears other nodes' commits until `should_stop(user_data)` returns true:
/// `botspace_service_wait_store_notifications` in a loop, 250 ms at a
/// time. **Blocks the calling thread on the network**: run it on a thread
/// of its own, and end it (make `should_stop` true, join the thread) before
/// `botspace_service_free`. `should_stop` runs on that thread at least
/// every 250 ms, and every 50 ms while a broken listening connection waits
/// out its one-second retry; the failure is said through the log callback
/// (level warn, `listening for notifications failed: ERROR; retrying every
/// second`) at most every 10 s. Returns at once when the service cannot
/// hear other nodes (`botspace_service_has_store_notifications` false).
///
/// # Safety
/// `service` must be a live handle for the whole call; `should_stop` must
/// be safe to call on this thread with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_run_store_notifications(
    service: *const botspace_service,
    should_stop: botspace_should_stop_callback,
    user_data: *mut c_void,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let Some(cb) = should_stop else {
            return fail(botspace_status::NullArgument, "argument `should_stop` is NULL");
        };
        let svc = &service.svc;
        // SAFETY: the host's callback, on this thread, with its pointer.
        botspace_runtime::admission::run_store_notifications(svc, &|| unsafe { cb(user_data) });
        botspace_status::Ok
    })
}
