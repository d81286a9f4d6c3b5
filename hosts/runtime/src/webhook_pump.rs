//! When the store's part of the webhook deliveries runs, decided once for
//! every host. A host's event loop must never wait on the store (a bot's
//! log read, the outcomes' write and its sync), yet something must do that
//! work soon after the library says there is some. [`Pump`] keeps the two
//! sides apart and says when each runs:
//!
//! - the loop's side never touches the store: [`Pump::take`] hands out
//!   what memory holds due and what the last store turn handed out,
//!   [`Pump::next`] chains a finished delivery to the next due one, and
//!   [`Pump::timeout`] says when to take again;
//! - the store side runs turns: [`Pump::store_turn`] polls the store until
//!   nothing more is handed out and queues the results for the loop. It
//!   blocks on the disk (or, on PostgreSQL, the network), so it runs on a
//!   thread of its own ([`Pump::wait_store_turn`] parks that thread until
//!   a turn is wanted) or on an async runtime's blocking pool
//!   ([`Pump::begin_store_turn`] claims a turn without waiting);
//! - [`Pump::report`] hands an outcome to the library and asks for a store
//!   turn when the library says the store has work.
//!
//! The host sends the requests, wakes its loop when a store turn ends, and
//! owns its clock: every call takes the time in the service clock's
//! milliseconds. A pump serves one [`Service`]; every method takes it, so
//! that a host may hold the service weakly and notice it is gone.

use botspace::webhook::Outcome;
use botspace::webhook::WebhookRequest;
use botspace::Service;
use botspace::WebhookPoll;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The store side's state, shared by the loop and the store thread.
#[derive(Debug, Default)]
struct State {
    /// A store turn is asked for and not yet begun.
    wanted: bool,
    /// A store turn runs: its end hands out what it found.
    running: bool,
    /// The store thread is to end ([`Pump::stop`]).
    stop: bool,
    /// What store turns handed out, for the loop's next [`Pump::take`].
    queue: Vec<WebhookRequest>,
}

/// The webhook delivery schedule between memory and the store: see the
/// module's documentation. Thread-safe: the loop and the store thread
/// share one (its lock is held for microseconds, never across a store
/// call).
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

    /// Every request due at `now_ms` that this side can have without the
    /// store: what the last store turns handed out, then (when the
    /// library's timeout has come) what memory holds due. Asks for a store
    /// turn when the library says the store has work, and when the timeout
    /// had come but memory held nothing due: what is due is then the
    /// store's to find (the first load, a bot's log). Never blocks on the
    /// store.
    pub fn take(&self, svc: &Service, now_ms: u64) -> Vec<WebhookRequest> {
        let mut out = std::mem::take(&mut self.lock().queue);
        if svc.webhook_timeout().is_some_and(|due| due <= now_ms) {
            let mut found = false;
            let needs_store = loop {
                match svc.poll_webhook_in_memory(now_ms) {
                    WebhookPoll::Request(r) => {
                        out.push(r);
                        found = true;
                    }
                    WebhookPoll::Idle => break false,
                    WebhookPoll::NeedsStore => break true,
                }
            };
            if needs_store || !found {
                self.want_store_turn();
            }
        }
        out
    }

    /// The next request due in memory at `now_ms`, for a host that sends
    /// it right after a delivery ended (the chat's next event, say) rather
    /// than through its loop. `None` when nothing is; when the store has
    /// work, a store turn is asked for: the host's loop then begins it.
    /// Never blocks on the store.
    pub fn next(&self, svc: &Service, now_ms: u64) -> Option<WebhookRequest> {
        match svc.poll_webhook_in_memory(now_ms) {
            WebhookPoll::Request(r) => Some(r),
            WebhookPoll::Idle => None,
            WebhookPoll::NeedsStore => {
                self.want_store_turn();
                None
            }
        }
    }

    /// Reports what became of request `id` ([`Service::webhook_outcome`])
    /// and asks for a store turn when the store has work now (what the
    /// outcome changed is written by a turn). Whether it asked: a host
    /// that begins turns from its loop wakes the loop then. Never blocks
    /// on the store.
    pub fn report(&self, svc: &Service, id: u64, outcome: Outcome, now_ms: u64) -> bool {
        let wanted = svc.webhook_outcome(id, outcome, now_ms);
        if wanted {
            self.want_store_turn();
        }
        wanted
    }

    /// Asks for a store turn (nothing more when one is asked for already),
    /// and wakes a thread parked in [`Pump::wait_store_turn`]. For a host
    /// that reports outcomes through [`Service::webhook_outcome`] itself.
    pub fn want_store_turn(&self) {
        let mut s = self.lock();
        if !s.wanted {
            s.wanted = true;
            drop(s);
            self.changed.notify_all();
        }
    }

    /// Whether a store turn should begin now: one is asked for and none
    /// runs (a turn asked for while one runs begins after it).
    pub fn store_turn_wanted(&self) -> bool {
        let s = self.lock();
        s.wanted && !s.running
    }

    /// Claims the store turn that is wanted, without waiting: true when
    /// the caller is to run [`Pump::store_turn`] now (once), false when no
    /// turn is wanted or one runs. For a host that runs turns on a pool
    /// rather than a thread of its own: claiming first keeps it to one
    /// turn at a time.
    pub fn begin_store_turn(&self) -> bool {
        let mut s = self.lock();
        if s.wanted && !s.running && !s.stop {
            s.wanted = false;
            s.running = true;
            true
        } else {
            false
        }
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
            if s.wanted && !s.running {
                s.wanted = false;
                s.running = true;
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Runs a store turn at `now_ms`: polls the store
    /// ([`Service::poll_webhook`]) until it hands out nothing more, which
    /// loads the webhooks, claims leases, writes what outcomes changed and
    /// reads the bots' logs (waiting for what it read to be durable, so
    /// that no webhook leaves before the write it reports). What it hands
    /// out is queued for the loop's next [`Pump::take`]; how many. BLOCKS
    /// on the disk or the database's network: never call it on an event
    /// loop. Ends a turn claimed with [`Pump::begin_store_turn`] or
    /// [`Pump::wait_store_turn`] (or claims one itself), even when the
    /// store's part panics; the host wakes its loop after it returns.
    pub fn store_turn(&self, svc: &Service, now_ms: u64) -> usize {
        {
            let mut s = self.lock();
            s.wanted = false;
            s.running = true;
        }
        let end = EndTurn(self);
        let mut handed = 0;
        while let Some(r) = svc.poll_webhook(now_ms) {
            // Queued as it comes: a loop woken meanwhile sends it at once.
            self.lock().queue.push(r);
            handed += 1;
        }
        drop(end);
        handed
    }

    /// When the loop takes again if nothing wakes it first, in the service
    /// clock's milliseconds; `None` for no deadline. The library's timeout
    /// ([`Service::webhook_timeout`]), except that while a store turn is
    /// asked for or runs a timeout already past means the store's part,
    /// which memory cannot do: no deadline then (the turn's end wakes the
    /// loop), so that the loop does not spin.
    pub fn timeout(&self, svc: &Service, now_ms: u64) -> Option<u64> {
        let due = svc.webhook_timeout()?;
        if due <= now_ms {
            let s = self.lock();
            if s.wanted || s.running {
                return None;
            }
        }
        Some(due)
    }

    /// Ends the store thread: [`Pump::wait_store_turn`] returns false from
    /// now on (a turn under way finishes first). What was queued and not
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
        self.0.lock().running = false;
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
    fn the_first_load_is_a_store_turn_and_a_wanted_turn_stops_the_deadline() {
        let svc = service();
        let pump = Pump::new();
        let now = svc.now_ms();
        // Not loaded: due now, and memory holds nothing.
        assert_eq!(pump.timeout(&svc, now), Some(now));
        assert!(!pump.store_turn_wanted());
        assert!(pump.take(&svc, now).is_empty());
        assert!(pump.store_turn_wanted());
        // Past due, but the store's: no deadline until the turn ends.
        assert_eq!(pump.timeout(&svc, now), None);
        assert!(pump.begin_store_turn());
        assert!(!pump.begin_store_turn(), "one turn at a time");
        assert!(!pump.store_turn_wanted());
        assert_eq!(pump.timeout(&svc, now), None, "a turn runs");
        assert_eq!(pump.store_turn(&svc, now), 0);
        // Loaded, no webhook: nothing waits, nothing is wanted.
        assert_eq!(pump.timeout(&svc, now), None);
        assert!(!pump.store_turn_wanted());
        assert!(pump.take(&svc, now).is_empty());
        assert!(!pump.store_turn_wanted());
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
        while pump.timeout(&svc, now).is_some() || pump.lock().wanted || pump.lock().running {
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
