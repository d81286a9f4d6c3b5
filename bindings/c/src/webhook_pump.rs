//! The C face of the core's webhook pump (`botspace::WebhookPump`, with
//! the store thread's waiting of `botspace_runtime::Pump`): when the
//! store's part of the deliveries runs, decided by the library, so that
//! a C host's loop only sends what it takes and its store thread only runs
//! the turns it is given.

use crate::boundary::Handle;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use crate::webhook::{
    botspace_service_webhook_report, botspace_service_webhook_report_failure, botspace_webhook_answer,
    botspace_webhook_request,
};
use crate::BOTSPACE_NO_DEADLINE;
use botspace::webhook::WebhookRequest;
use botspace_runtime::Pump;
use std::collections::VecDeque;
use std::ffi::c_char;
use std::mem::MaybeUninit;
use std::sync::Mutex;

/// The webhook schedule between a host's event loop and its store thread
/// (`botspace_webhook_pump_new`). The loop takes what is due
/// (`botspace_webhook_pump_take`), reports outcomes through the pump
/// (`botspace_webhook_pump_report`) and sleeps until
/// `botspace_webhook_pump_timeout`; the store thread runs
/// `while (wait_turn) { store_turn; wake the loop }`. None of the loop's
/// calls waits on the store. A pump serves one service: the calls that
/// take a service must always be given the same one. Thread-safe, except
/// `_free`.
pub struct botspace_webhook_pump {
    pub(crate) pump: Pump,
    /// What the current round of `botspace_webhook_pump_take` hands out,
    /// one per call; `None` between rounds.
    pub(crate) round: Mutex<Option<VecDeque<WebhookRequest>>>,
}

impl Handle for botspace_webhook_pump {}

impl botspace_webhook_pump {
    /// After a report: gives the request's connection slot back, and asks
    /// for a store turn when its `wanted` output is true. A refused report
    /// (a bad argument) keeps the slot: the request is still the host's to
    /// report.
    fn reported(
        &self,
        service: &botspace_service,
        status: botspace_status,
        wanted: bool,
        out_store_wanted: Option<&mut MaybeUninit<bool>>,
    ) -> botspace_status {
        if status != botspace_status::Ok {
            return status;
        }
        self.pump.release(&service.svc);
        if wanted {
            self.pump.want_store_turn();
        }
        if let Some(out) = out_store_wanted {
            out.write(wanted);
        }
        botspace_status::Ok
    }
}

/// Makes a webhook pump and writes it to `*out_pump`. It needs no service
/// yet (a host may start its store thread before it opens the service);
/// the calls that read or write deliveries name the service. Thread-safe.
///
/// # Safety
/// `out_pump` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_new(out_pump: *mut *mut botspace_webhook_pump) -> botspace_status {
    ffi_boundary!({
        let out_pump = arg!(out out_pump);
        out_pump.write(botspace_webhook_pump { pump: Pump::new(), round: Mutex::new(None) }.into_raw());
        botspace_status::Ok
    })
}

/// Releases a pump and sets `*pump` to NULL. Accepts NULL and a pointer to
/// NULL. Requests taken and not yet handed out are dropped unreported:
/// they are sent again after a restart, from the durable cursor. Stop the
/// store thread (`botspace_webhook_pump_stop`) and join it first; must not
/// run concurrently with any other call on the pump.
///
/// # Safety
/// `*pump` must be NULL or a handle from `botspace_webhook_pump_new` that
/// was not released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_free(pump: *mut *mut botspace_webhook_pump) {
    // SAFETY: the contract above.
    unsafe { Handle::free(pump) }
}

/// Writes the next request to send at `now_ms` (the service clock's
/// milliseconds) to `*out_request`, or NULL: call until it writes NULL,
/// then send each (see `botspace_service_poll_webhook` for how) and report
/// it with `botspace_webhook_pump_report`. A request is handed out only
/// with one of the pump's connection slots free
/// (`botspace_webhook_pump_set_connection_budget`); its report through the
/// pump gives the slot back. The first call of a round takes
/// what the last store turns handed out and, when the library's timeout
/// has come, what memory holds due; it asks for a store turn when the store
/// has work, or when something was due that memory did not hold. Never
/// waits on the store. Call it from the loop's thread.
///
/// # Safety
/// `pump` and `service` must be live handles; `out_request` must be
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_take(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    now_ms: u64,
    out_request: *mut *mut botspace_webhook_request,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let service = arg!(ref service);
        let out_request = arg!(out out_request);
        let svc = &service.svc;
        let mut round = p.round.lock().unwrap_or_else(|e| e.into_inner());
        let batch = round.get_or_insert_with(|| p.pump.take(svc, now_ms).into());
        let req = match batch.pop_front() {
            Some(r) => Box::into_raw(botspace_webhook_request::new(r)),
            None => {
                // The round ends: the next call takes anew.
                *round = None;
                std::ptr::null_mut()
            }
        };
        out_request.write(req);
        botspace_status::Ok
    })
}

/// Writes when the loop is to take again if nothing wakes it first (the
/// service clock's milliseconds), or `BOTSPACE_NO_DEADLINE`: the library's
/// `botspace_service_webhook_timeout`, except that a time already past
/// while a store turn is asked for or runs gives `BOTSPACE_NO_DEADLINE`
/// (that work is the store's; the turn's end wakes the loop), so the loop
/// does not spin. Thread-safe.
///
/// # Safety
/// `pump` and `service` must be live handles; `out_ms` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_timeout(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    now_ms: u64,
    out_ms: *mut u64,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let service = arg!(ref service);
        let out_ms = arg!(out out_ms);
        let svc = &service.svc;
        let due = p.pump.timeout(svc, now_ms).unwrap_or(BOTSPACE_NO_DEADLINE);
        out_ms.write(due);
        botspace_status::Ok
    })
}

/// `botspace_service_webhook_report` through the pump: the same inputs,
/// checks and statuses, and when the store has work now a store turn is
/// asked for (a thread in `botspace_webhook_pump_wait_turn` wakes).
/// `*out_store_wanted` (when not NULL) says whether it was, written only on
/// `BOTSPACE_STATUS_OK`. Never waits on the store. Thread-safe.
///
/// # Safety
/// `pump` and `service` must be live handles; `retry_after` and
/// `failure_message` NULL or NUL-terminated; `out_store_wanted` NULL or
/// writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C call names each input and output
pub unsafe extern "C" fn botspace_webhook_pump_report(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    id: u64,
    status_code: u16,
    retry_after: *const c_char,
    failure_message: *const c_char,
    timed_out: bool,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let svc = arg!(ref service);
        let mut wanted = false;
        // SAFETY: `service` (checked there) and the strings as documented.
        let status = unsafe {
            botspace_service_webhook_report(
                service,
                id,
                status_code,
                retry_after,
                failure_message,
                timed_out,
                now_ms,
                &mut wanted,
            )
        };
        p.reported(svc, status, wanted, arg!(opt_out out_store_wanted))
    })
}

/// `botspace_service_webhook_report_failure` through the pump: the library
/// words the failure of kind `kind`, and a store turn is asked for as by
/// `botspace_webhook_pump_report`. Thread-safe.
///
/// # Safety
/// `pump` and `service` must be live handles; `detail` NULL or
/// NUL-terminated; `out_store_wanted` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_report_failure(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    id: u64,
    kind: u32,
    detail: *const c_char,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let svc = arg!(ref service);
        let mut wanted = false;
        // SAFETY: `service` (checked there) and `detail` as documented.
        let status = unsafe { botspace_service_webhook_report_failure(service, id, kind, detail, now_ms, &mut wanted) };
        p.reported(svc, status, wanted, arg!(opt_out out_store_wanted))
    })
}

/// Reports request `id`'s answer as `answer` read it (once
/// `botspace_webhook_answer_feed` wrote a step other than
/// `BOTSPACE_WEBHOOK_ANSWER_STEP_MORE`: the status and `Retry-After`, or
/// the failure the library words), through the pump as
/// `botspace_webhook_pump_report` does. `BOTSPACE_STATUS_INVALID_ARGUMENT`
/// while the answer is not whole. Thread-safe (the answer aside).
///
/// # Safety
/// `pump`, `service` and `answer` must be live handles; `out_store_wanted`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_report_answer(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    id: u64,
    answer: *const botspace_webhook_answer,
    now_ms: u64,
    out_store_wanted: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let svc = arg!(ref service);
        let answer = arg!(ref answer);
        let Some(outcome) = answer.outcome() else {
            return fail(botspace_status::InvalidArgument, "the answer is not whole yet");
        };
        let wanted = svc.svc.webhook_outcome(id, outcome, now_ms);
        p.reported(svc, botspace_status::Ok, wanted, arg!(opt_out out_store_wanted))
    })
}

/// Sets the server's connection budget (its `--max-connections`,
/// `botspace_server_settings.max_connections`): the pump hands out at most
/// the runtime's share of it at once (a quarter, at least one), all bots
/// together; each report through the pump gives a slot back, and what is
/// due past the cap waits in the pump (its deadline starts when it is
/// handed out; `botspace_webhook_waiting_for_connection` counts it). Until
/// it is called, the default budget under 1 024 descriptors counts.
/// Thread-safe.
///
/// # Safety
/// `pump` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_set_connection_budget(
    pump: *const botspace_webhook_pump,
    max_connections: usize,
) -> botspace_status {
    ffi_boundary!({
        let pump = arg!(ref pump);
        pump.pump.set_connection_budget(max_connections);
        botspace_status::Ok
    })
}

/// Writes to `*out_wanted` whether a store turn should begin now: one is
/// asked for and none runs. Thread-safe.
///
/// # Safety
/// `pump` must be a live handle; `out_wanted` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_store_turn_wanted(
    pump: *const botspace_webhook_pump,
    out_wanted: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let pump = arg!(ref pump);
        let out_wanted = arg!(out out_wanted);
        out_wanted.write(pump.pump.store_turn_wanted());
        botspace_status::Ok
    })
}

/// BLOCKS the calling thread (the host's store thread) until a store turn
/// is asked for and none runs, claims it and writes true to `*out_turn`:
/// then call `botspace_webhook_pump_store_turn`. Writes false once
/// `botspace_webhook_pump_stop` was called: the thread ends. The wait is a
/// condition variable inside the library.
///
/// # Safety
/// `pump` must be a live handle; `out_turn` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_wait_turn(
    pump: *const botspace_webhook_pump,
    out_turn: *mut bool,
) -> botspace_status {
    ffi_boundary!({
        let pump = arg!(ref pump);
        let out_turn = arg!(out out_turn);
        let turn = pump.pump.wait_store_turn();
        out_turn.write(turn);
        botspace_status::Ok
    })
}

/// Runs a store turn at `now_ms`: polls the store until it hands out
/// nothing more (the first load, the bots' logs read and waited durable:
/// a webhook leaves only after the write it reports is; what outcomes
/// changed written) and queues what it handed out for the loop's next
/// `botspace_webhook_pump_take`. Writes how many to `*out_handed` when it
/// is not NULL. BLOCKS on the disk or the database's network: call it on
/// the store thread, never on the loop's, then wake the loop (its wake
/// pipe). Ends the turn `botspace_webhook_pump_wait_turn` claimed.
///
/// # Safety
/// `pump` and `service` must be live handles; `out_handed` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_store_turn(
    pump: *const botspace_webhook_pump,
    service: *const botspace_service,
    now_ms: u64,
    out_handed: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let p = arg!(ref pump);
        let service = arg!(ref service);
        let svc = &service.svc;
        let handed = p.pump.store_turn(svc, now_ms);
        if let Some(out_handed) = arg!(opt_out out_handed) {
            out_handed.write(handed);
        }
        botspace_status::Ok
    })
}

/// Ends the store thread's waits: `botspace_webhook_pump_wait_turn` writes
/// false from now on (a turn under way finishes first; join the thread
/// before freeing the pump). Thread-safe.
///
/// # Safety
/// `pump` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn botspace_webhook_pump_stop(pump: *const botspace_webhook_pump) -> botspace_status {
    ffi_boundary!({
        let pump = arg!(ref pump);
        pump.pump.stop();
        botspace_status::Ok
    })
}
