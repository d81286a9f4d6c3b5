//! The waiting around the core's webhook pump ([`botspace::WebhookPump`],
//! which decides which delivery goes out when, and caps the server's
//! outgoing webhook connections at [`crate::host::webhook_connection_cap`]
//! of its budget). A server's event loop must never wait on the store, so
//! the store's part of the deliveries runs on a thread of its own
//! ([`Pump::wait_store_turn`] parks that thread until a turn is wanted) or
//! on an async runtime's blocking pool ([`Pump::begin_store_turn`] claims
//! a turn without waiting). [`Pump`] shares the core's pump between the
//! loop and that thread: its lock is held for microseconds, never across a
//! store call, and a condition variable wakes the thread.
//!
//! The host sends the requests, wakes its loop when a store turn ends, and
//! owns its clock: every call takes the time in the service clock's
//! milliseconds. A pump serves one [`Service`]; every method takes it, so
//! that a host may hold the service weakly and notice it is gone.

use botspace::webhook::Outcome;
use botspace::webhook::WebhookRequest;
use botspace::Service;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The core's pump and the store thread's stop flag.
#[derive(Debug, Default)]
struct State {
    core: botspace::WebhookPump,
    /// The store thread is to end ([`Pump::stop`]).
    stop: bool,
}

/// The core's webhook pump, shared by the loop, the deliveries and the
/// store thread, with the waiting for a store turn: see the module's
/// documentation.
#[derive(Debug, Default)]
pub struct Pump {
    state: Mutex<State>,
    /// Signalled when a turn is wanted, a turn ends, or the pump stops.
    changed: Condvar,
}

impl Pump {
    pub fn new() -> Pump {
        Pump::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves the flags as they were: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the core's pump, then wakes a thread parked in
    /// [`Pump::wait_store_turn`] if `f` asked for a store turn.
    fn with<T>(&self, f: impl FnOnce(&mut botspace::WebhookPump) -> T) -> T {
        let mut s = self.lock();
        let before = s.core.store_turn_wanted();
        let out = f(&mut s.core);
        let wake = !before && s.core.store_turn_wanted();
        drop(s);
        if wake {
            self.changed.notify_all();
        }
        out
    }

    /// Every request due at `now_ms` that a connection slot is free for
    /// ([`botspace::WebhookPump::poll_requests`]). Never blocks on the
    /// store.
    pub fn take(&self, svc: &Service, now_ms: u64) -> Vec<WebhookRequest> {
        self.with(|p| p.poll_requests(svc, now_ms))
    }

    /// The next request to send at `now_ms` right after a delivery ended
    /// and was reported ([`botspace::WebhookPump::poll_request`]). Never
    /// blocks on the store.
    pub fn next(&self, svc: &Service, now_ms: u64) -> Option<WebhookRequest> {
        self.with(|p| p.poll_request(svc, now_ms))
    }

    /// Reports what became of request `id`, gives its slot back, and asks
    /// for a store turn when the store has work now; whether it asked
    /// ([`botspace::WebhookPump::handle_outcome`]). Never blocks on the
    /// store.
    pub fn report(&self, svc: &Service, id: u64, outcome: Outcome, now_ms: u64) -> bool {
        self.with(|p| p.handle_outcome(svc, id, outcome, now_ms))
    }

    /// [`Pump::report`], then [`Pump::next`], under one lock: what a
    /// delivery that goes on with the next request calls after each
    /// answer. Whether the report asked for a store turn, and the next
    /// request.
    pub fn report_next(&self, svc: &Service, id: u64, outcome: Outcome, now_ms: u64) -> (bool, Option<WebhookRequest>) {
        self.with(|p| {
            let wanted = p.handle_outcome(svc, id, outcome, now_ms);
            (wanted, p.poll_request(svc, now_ms))
        })
    }

    /// Gives back the connection slot of a request the host took from the
    /// pump and reported itself through [`Service::webhook_outcome`]
    /// ([`Pump::report`] does it). Once per request taken.
    pub fn release(&self, svc: &Service) {
        self.with(|p| p.release(svc))
    }

    /// Sets the connection budget the cap is a share of: the server's
    /// `--max-connections` ([`crate::host::webhook_connection_cap`]).
    /// Before it, the default budget under the usual file limit counts.
    pub fn set_connection_budget(&self, max_connections: usize) {
        self.with(|p| p.set_cap(crate::host::webhook_connection_cap(max_connections)))
    }

    /// The most requests handed out at once.
    pub fn cap(&self) -> usize {
        self.lock().core.cap()
    }

    /// Requests due and waiting for a free slot.
    pub fn waiting(&self) -> usize {
        self.lock().core.waiting()
    }

    /// Asks for a store turn (nothing more when one is asked for already),
    /// and wakes a thread parked in [`Pump::wait_store_turn`]. For a host
    /// that reports outcomes through [`Service::webhook_outcome`] itself
    /// (it gives the slot back with [`Pump::release`]).
    pub fn want_store_turn(&self) {
        self.with(|p| p.want_store_turn())
    }

    /// Whether a store turn should begin now: one is asked for and none
    /// runs (a turn asked for while one runs begins after it).
    pub fn store_turn_wanted(&self) -> bool {
        self.lock().core.store_turn_wanted()
    }

    /// Claims the store turn that is wanted, without waiting: true when
    /// the caller is to run [`Pump::store_turn`] now (once), false when no
    /// turn is wanted, one runs, or the pump stopped. For a host that runs
    /// turns on a pool rather than a thread of its own: claiming first
    /// keeps it to one turn at a time.
    pub fn begin_store_turn(&self) -> bool {
        let mut s = self.lock();
        !s.stop && s.core.begin_store_turn()
    }

    /// Blocks the calling thread (a store thread) until a store turn is
    /// wanted and none runs, claims it and returns true; or returns false
    /// once [`Pump::stop`] was called (then the thread ends). A store
    /// thread is `while pump.wait_store_turn() { pump.store_turn(..); wake
    /// the loop }`.
    pub fn wait_store_turn(&self) -> bool {
        let mut s = self.lock();
        loop {
            if s.stop {
                return false;
            }
            if s.core.begin_store_turn() {
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Runs a store turn at `now_ms` ([`botspace::WebhookPump::store_turn`]),
    /// with the lock taken only to queue each request as the store hands
    /// it out (a loop woken meanwhile sends it at once); how many. BLOCKS
    /// on the disk or the database's network: never call it on an event
    /// loop. Ends a turn claimed with [`Pump::begin_store_turn`] or
    /// [`Pump::wait_store_turn`] (or claims one itself), even when the
    /// store's part panics; the host wakes its loop after it returns.
    pub fn store_turn(&self, svc: &Service, now_ms: u64) -> usize {
        self.lock().core.claim_store_turn();
        let end = EndTurn(self);
        let mut handed = 0;
        while let Some(r) = svc.poll_webhook(now_ms) {
            self.lock().core.handle_store_request(svc, r, now_ms);
            handed += 1;
        }
        drop(end);
        handed
    }

    /// When the loop takes again if nothing wakes it first, in the service
    /// clock's milliseconds; `None` for no deadline
    /// ([`botspace::WebhookPump::poll_timeout`]).
    pub fn timeout(&self, svc: &Service, now_ms: u64) -> Option<u64> {
        self.lock().core.poll_timeout(svc, now_ms)
    }

    /// Ends the store thread: [`Pump::wait_store_turn`] returns false from
    /// now on (a turn under way finishes first). What waits and was not
    /// taken is dropped with the pump: sent again after a restart, from
    /// the durable cursor.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
}

/// Ends a store turn when dropped, also when the store's part panicked, so
/// that the next turn can begin and the loop's timeout counts again.
struct EndTurn<'a>(&'a Pump);

impl Drop for EndTurn<'_> {
    fn drop(&mut self) {
        self.0.lock().core.end_store_turn();
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::Pump;
    use botspace::{ClockKind, Config, Service};

    fn service() -> Service {
        let cfg = Config::default().with(|c| {
            c.admin_secret = "an-admin-secret-0123".into();
            c.clock = ClockKind::Manual;
        });
        Service::open(cfg).unwrap()
    }

    #[test]
    fn a_turn_asked_for_while_one_runs_begins_after_it() {
        let pump = Pump::new();
        pump.want_store_turn();
        assert!(pump.begin_store_turn());
        pump.want_store_turn();
        assert!(!pump.store_turn_wanted());
        assert!(!pump.begin_store_turn());
        // The turn ends (here: its end without a store call).
        drop(super::EndTurn(&pump));
        assert!(pump.store_turn_wanted());
        assert!(pump.begin_store_turn());
    }

    #[test]
    fn the_cap_is_the_budgets_share() {
        let pump = Pump::new();
        assert_eq!(pump.cap(), 240, "the default budget's quarter");
        assert_eq!(
            botspace::WEBHOOK_CONNECTION_CAP,
            crate::host::webhook_connection_cap(crate::host::default_max_connections(crate::host::FALLBACK_FILE_LIMIT)),
            "the core's default is the runtime's reckoning"
        );
        pump.set_connection_budget(8);
        assert_eq!(pump.cap(), 2);
    }

    #[test]
    fn the_store_thread_waits_for_a_turn_and_ends_on_stop() {
        let svc = std::sync::Arc::new(service());
        let pump = std::sync::Arc::new(Pump::new());
        let (p, s) = (pump.clone(), svc.clone());
        let thread = std::thread::spawn(move || {
            let mut turns = 0;
            while p.wait_store_turn() {
                p.store_turn(&s, s.now_ms());
                turns += 1;
            }
            turns
        });
        let now = svc.now_ms();
        assert!(pump.take(&svc, now).is_empty());
        // The thread takes the turn (the first load) and ends it.
        let start = std::time::Instant::now();
        while pump.timeout(&svc, now).is_some() || pump.lock().core.store_turn_pending() {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "the store thread ran no turn");
            std::thread::yield_now();
        }
        pump.stop();
        assert_eq!(thread.join().unwrap(), 1);
        // Stopped: no turn is claimed any more.
        pump.want_store_turn();
        assert!(!pump.wait_store_turn());
        assert!(!pump.begin_store_turn());
    }
}
