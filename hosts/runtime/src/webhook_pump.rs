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
//! The pump also caps the server's outgoing webhook connections, all bots
//! together ([`crate::host::webhook_connection_cap`], beside each bot's
//! own `max_connections`): a request is handed to the host only with a
//! free slot, which its report gives back. What is due past the cap waits
//! in the pump, in the order it came due, and is handed out as slots free;
//! waiting is not an attempt (its deadline starts when it is handed out),
//! so it fails nothing and uses no retry. The gauge
//! `botspace_webhook_waiting_for_connection` counts it.
//!
//! The host sends the requests, wakes its loop when a store turn ends, and
//! owns its clock: every call takes the time in the service clock's
//! milliseconds. A pump serves one [`Service`]; every method takes it, so
//! that a host may hold the service weakly and notice it is gone.

use botspace::webhook::Outcome;
use botspace::webhook::WebhookRequest;
use botspace::Service;
use botspace::WebhookPoll;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The store side's state and the connection slots, shared by the loop,
/// the deliveries and the store thread.
#[derive(Debug)]
struct State {
    /// A store turn is asked for and not yet begun.
    wanted: bool,
    /// A store turn runs: its end hands out what it found.
    running: bool,
    /// The store thread is to end ([`Pump::stop`]).
    stop: bool,
    /// What the library handed out (store turns, memory) and no slot was
    /// free for yet, oldest first, with when it was handed out.
    waiting: VecDeque<(WebhookRequest, u64)>,
    /// Requests handed to the host and not yet reported: each holds a slot.
    sending: usize,
    /// The most slots at once.
    cap: usize,
}

impl Default for State {
    fn default() -> State {
        State {
            wanted: false,
            running: false,
            stop: false,
            waiting: VecDeque::new(),
            sending: 0,
            // Until the host says its budget: the default one's under the
            // usual file limit.
            cap: crate::host::webhook_connection_cap(crate::host::default_max_connections(
                crate::host::FALLBACK_FILE_LIMIT,
            )),
        }
    }
}

impl State {
    /// The oldest waiting request, given a slot at `now_ms`, if one is
    /// free. Its deadline moves by how long it waited: the attempt starts
    /// now.
    fn grant(&mut self, now_ms: u64) -> Option<WebhookRequest> {
        if self.sending >= self.cap {
            return None;
        }
        let (mut r, since) = self.waiting.pop_front()?;
        r.attempt.deadline_ms = r.attempt.deadline_ms.saturating_add(now_ms.saturating_sub(since));
        self.sending += 1;
        Some(r)
    }
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
    /// store and that a connection slot is free for: what waits (the last
    /// store turns' and what found no slot before), then (when the
    /// library's timeout has come) what memory holds due. Asks for a store
    /// turn when the library says the store has work, and when the timeout
    /// had come but memory held nothing due: what is due is then the
    /// store's to find (the first load, a bot's log). Never blocks on the
    /// store.
    pub fn take(&self, svc: &Service, now_ms: u64) -> Vec<WebhookRequest> {
        let mut due = Vec::new();
        if svc.webhook_timeout().is_some_and(|t| t <= now_ms) {
            let needs_store = loop {
                match svc.poll_webhook_in_memory(now_ms) {
                    WebhookPoll::Request(r) => due.push(r),
                    WebhookPoll::Idle => break false,
                    WebhookPoll::NeedsStore => break true,
                }
            };
            if needs_store || due.is_empty() {
                self.want_store_turn();
            }
        }
        let mut s = self.lock();
        s.waiting.extend(due.into_iter().map(|r| (r, now_ms)));
        let mut out = Vec::new();
        while let Some(r) = s.grant(now_ms) {
            out.push(r);
        }
        self.publish(svc, &s);
        out
    }

    /// The next request to send at `now_ms`, for a host that sends it
    /// right after a delivery ended and was reported (the slot it freed
    /// goes on: to the oldest waiting request, else to what is due in
    /// memory, the chat's next event, say) rather than through its loop.
    /// `None` when nothing is, or no slot is free; when the store has
    /// work, a store turn is asked for: the host's loop then begins it.
    /// Never blocks on the store.
    pub fn next(&self, svc: &Service, now_ms: u64) -> Option<WebhookRequest> {
        let polled = svc.poll_webhook_in_memory(now_ms);
        let mut s = self.lock();
        match polled {
            WebhookPoll::Request(r) => s.waiting.push_back((r, now_ms)),
            WebhookPoll::Idle => {}
            WebhookPoll::NeedsStore => {
                drop(s);
                self.want_store_turn();
                s = self.lock();
            }
        }
        let next = s.grant(now_ms);
        self.publish(svc, &s);
        next
    }

    /// Reports what became of request `id` ([`Service::webhook_outcome`]),
    /// gives its connection slot back, and asks for a store turn when the store has work now (what the
    /// outcome changed is written by a turn). Whether it asked: a host
    /// that begins turns from its loop wakes the loop then. Never blocks
    /// on the store.
    pub fn report(&self, svc: &Service, id: u64, outcome: Outcome, now_ms: u64) -> bool {
        let wanted = svc.webhook_outcome(id, outcome, now_ms);
        self.release(svc);
        if wanted {
            self.want_store_turn();
        }
        wanted
    }

    /// Gives back the connection slot of a request the host took from the
    /// pump and reported itself through [`Service::webhook_outcome`]
    /// ([`Pump::report`] does it). Once per request taken.
    pub fn release(&self, svc: &Service) {
        let mut s = self.lock();
        s.sending = s.sending.saturating_sub(1);
        self.publish(svc, &s);
    }

    /// Sets the connection budget the cap is a share of: the server's
    /// `--max-connections` ([`crate::host::webhook_connection_cap`]).
    /// Before it, the default budget under the usual file limit counts.
    pub fn set_connection_budget(&self, max_connections: usize) {
        self.lock().cap = crate::host::webhook_connection_cap(max_connections);
    }

    /// The most requests handed out at once.
    pub fn cap(&self) -> usize {
        self.lock().cap
    }

    /// Requests due and waiting for a free slot.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Tells the service's metrics what waits and the cap.
    fn publish(&self, svc: &Service, s: &State) {
        svc.note_webhook_slots(s.waiting.len(), s.cap);
    }

    /// Asks for a store turn (nothing more when one is asked for already),
    /// and wakes a thread parked in [`Pump::wait_store_turn`]. For a host
    /// that reports outcomes through [`Service::webhook_outcome`] itself
    /// (it gives the slot back with [`Pump::release`]).
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
            let mut s = self.lock();
            s.waiting.push_back((r, now_ms));
            self.publish(svc, &s);
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
    /// loop), so that the loop does not spin. A request that waits with a
    /// slot free is due now; one that waits for a slot needs no deadline
    /// (a report frees the slot, and the host takes or chains then).
    pub fn timeout(&self, svc: &Service, now_ms: u64) -> Option<u64> {
        {
            let s = self.lock();
            if !s.waiting.is_empty() && s.sending < s.cap {
                return Some(now_ms);
            }
        }
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

    /// A raw request to the service, its status and JSON body.
    fn call(svc: &Service, path: &str, auth: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let body = body.to_string();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let resp = svc.handle_request(req.as_bytes());
        let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let status = std::str::from_utf8(&resp[9..12]).unwrap().parse().unwrap();
        (status, serde_json::from_slice(&resp[at..]).unwrap())
    }

    fn metric(svc: &Service, series: &str) -> u64 {
        let req = "GET /admin/metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Admin an-admin-secret-0123\r\n\r\n";
        let resp = String::from_utf8(svc.handle_request(req.as_bytes())).unwrap();
        let line = resp.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')));
        line.unwrap_or_else(|| panic!("{series} not in {resp}")).parse().unwrap()
    }

    #[test]
    fn past_the_cap_deliveries_wait_for_a_slot_without_failing_or_using_a_retry() {
        use botspace::webhook::schedule::ATTEMPT_TIMEOUT_MS;
        use botspace::webhook::Outcome;
        let cfg = Config::default().with(|c| {
            c.admin_secret = "an-admin-secret-0123".into();
            c.clock = ClockKind::Manual;
            c.webhook_allow_http = true;
            c.webhook_allow_private_addresses = true;
        });
        let svc = Service::open(cfg).unwrap();
        let admin = "Admin an-admin-secret-0123";
        let (_, b) = call(&svc, "/admin/createBot", admin, serde_json::json!({"display_name": "B", "handle": "b_bot"}));
        let (bot_id, token) = (b["result"]["bot"]["id"].clone(), b["result"]["token"].as_str().unwrap().to_string());
        // Five chats, each with its bot_started event: five deliveries may
        // go at once as far as the bot's own max_connections goes.
        for i in 0..5 {
            let (_, u) = call(&svc, "/admin/createUser", admin, serde_json::json!({"display_name": format!("U{i}")}));
            let (st, _) = call(
                &svc,
                "/admin/startBot",
                admin,
                serde_json::json!({"user_id": u["result"]["id"], "bot_id": bot_id}),
            );
            assert_eq!(st, 200);
        }
        let auth = format!("Bot {token}");
        let (st, _) = call(
            &svc,
            "/bot/setWebhook",
            &auth,
            serde_json::json!({"url": "http://127.0.0.1:9/h", "max_connections": 10}),
        );
        assert_eq!(st, 200);
        let pump = Pump::new();
        assert_eq!(pump.cap(), 240, "the default budget's quarter");
        pump.set_connection_budget(8);
        assert_eq!(pump.cap(), 2);
        let now = svc.now_ms();
        assert_eq!(pump.store_turn(&svc, now), 5);
        // Two slots: two go, three wait, and the gauge says so.
        let sent = pump.take(&svc, now);
        assert_eq!(sent.len(), 2);
        assert_eq!(pump.waiting(), 3);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 3);
        assert_eq!(metric(&svc, "botspace_webhook_connection_cap"), 2);
        assert_eq!(metric(&svc, "botspace_webhook_attempts_in_flight"), 2, "only what was sent");
        // Nothing to do until a slot frees: no deadline of the pump's.
        assert_ne!(pump.timeout(&svc, now), Some(now));
        assert!(pump.take(&svc, now).is_empty());
        assert!(pump.next(&svc, now).is_none());
        // 30 s later (three attempts' deadlines), the first is answered: its
        // slot goes to the oldest waiting one, a first attempt whose deadline
        // starts now.
        let later = now + 30_000;
        pump.report(&svc, sent[0].id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        let third = pump.next(&svc, later).expect("the oldest waiting one");
        assert_eq!((third.attempt.attempt, third.attempt.deadline_ms), (1, later + ATTEMPT_TIMEOUT_MS));
        assert_eq!(pump.waiting(), 2);
        assert!(pump.take(&svc, later).is_empty(), "both slots in use");
        // A host that reported through the service gives the slot back itself.
        svc.webhook_outcome(sent[1].id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        pump.release(&svc);
        assert_eq!(pump.timeout(&svc, later), Some(later), "a slot is free for a waiting one");
        let fourth = pump.take(&svc, later);
        assert_eq!(fourth.len(), 1);
        assert_eq!(fourth[0].attempt.attempt, 1);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 1);
        for r in [third, fourth.into_iter().next().unwrap()] {
            pump.report(&svc, r.id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        }
        let last = pump.take(&svc, later);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].attempt.attempt, 1);
        assert_eq!(pump.waiting(), 0);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 0);
        assert_eq!(metric(&svc, "botspace_webhook_retries_total"), 0, "no wait used a retry");
        assert_eq!(metric(&svc, r#"botspace_webhook_attempts_total{result="timed_out"}"#), 0);
    }
}
