//! Which webhook delivery goes out when, for every host, as a state
//! machine with no I/O of its own, no thread and no wait: time is an input
//! (the service clock's milliseconds) and the host owns the clock, the
//! sockets and any waiting (a server's store thread parks in
//! `botspace_runtime::Pump`, built on this). A host's event loop must never
//! wait on the store (a bot's log read, the outcomes' write and its sync);
//! [`Pump`] keeps the loop's side and the store's side apart and says when
//! each runs:
//!
//! - the loop's side never touches the store: [`Pump::poll_requests`]
//!   hands out what memory holds due and what the last store turn handed
//!   out, [`Pump::poll_request`] chains a finished delivery to the next due
//!   one, and [`Pump::poll_timeout`] says when to poll again;
//! - the store's side runs turns: [`Pump::store_turn`] polls the store
//!   until nothing more is handed out and queues the results for the loop
//!   (a host with threads runs it off its loop, piece by piece with
//!   [`Pump::claim_store_turn`], [`Pump::handle_store_request`] and
//!   [`Pump::end_store_turn`]); [`Pump::begin_store_turn`] claims a wanted
//!   turn, one at a time;
//! - [`Pump::handle_outcome`] hands an outcome to the library and asks for
//!   a store turn when the library says the store has work.
//!
//! The pump also caps the server's outgoing webhook connections, all bots
//! together (beside each bot's own `max_connections`): a request is handed
//! to the host only with a free slot, which its report gives back. What is
//! due past the cap waits in the pump, in the order it came due, and is
//! handed out as slots free; waiting is not an attempt (its deadline
//! starts when it is handed out), so it fails nothing and uses no retry.
//! The gauge `botspace_webhook_waiting_for_connection` counts it.
//!
//! A pump serves one [`Service`]; every method that needs it takes it, so
//! that a host may hold the service weakly and notice it is gone.
//!
//! Its verbs are the other state machines' (`poll_*` out, `handle_*` in,
//! time last): what it gives is a delivery request, not bytes or an
//! event, hence `poll_request(s)` rather than `poll_transmit`; time is
//! the service clock's, as a delivery's deadlines are stored.

use crate::webhook::{Outcome, WebhookRequest};
use crate::{Service, WebhookPoll};
use std::collections::VecDeque;

/// The cap a pump starts with until the host says its connection budget
/// ([`Pump::set_cap`]): a quarter of the default budget under the usual
/// file limit of 1 024 descriptors (960 connections), as
/// `botspace_runtime::host::webhook_connection_cap` reckons it.
pub const DEFAULT_CONNECTION_CAP: usize = 240;

/// The webhook delivery schedule between memory and the store, and the
/// server-wide connection slots: see the module's documentation.
#[derive(Debug)]
pub struct Pump {
    /// A store turn is asked for and not yet begun.
    wanted: bool,
    /// A store turn runs: its end hands out what it found.
    running: bool,
    /// What the library handed out (store turns, memory) and no slot was
    /// free for yet, oldest first, with when it was handed out.
    waiting: VecDeque<(WebhookRequest, u64)>,
    /// Requests handed to the host and not yet reported: each holds a slot.
    sending: usize,
    /// The most slots at once.
    cap: usize,
}

impl Default for Pump {
    fn default() -> Pump {
        Pump::new(DEFAULT_CONNECTION_CAP)
    }
}

impl Pump {
    /// A pump handing out at most `cap` requests at once (at least one).
    pub fn new(cap: usize) -> Pump {
        Pump { wanted: false, running: false, waiting: VecDeque::new(), sending: 0, cap: cap.max(1) }
    }

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

    /// Every request due at `now_ms` that this side can have without the
    /// store and that a connection slot is free for: what waits (the last
    /// store turns' and what found no slot before), then (when the
    /// library's timeout has come) what memory holds due. Asks for a store
    /// turn when the library says the store has work, and when the timeout
    /// had come but memory held nothing due: what is due is then the
    /// store's to find (the first load, a bot's log). Never touches the
    /// store.
    pub fn poll_requests(&mut self, svc: &Service, now_ms: u64) -> Vec<WebhookRequest> {
        if svc.webhook_timeout().is_some_and(|t| t <= now_ms) {
            let mut due = 0;
            let needs_store = loop {
                match svc.poll_webhook_in_memory(now_ms) {
                    WebhookPoll::Request(r) => {
                        self.waiting.push_back((r, now_ms));
                        due += 1;
                    }
                    WebhookPoll::Idle => break false,
                    WebhookPoll::NeedsStore => break true,
                }
            };
            if needs_store || due == 0 {
                self.want_store_turn();
            }
        }
        let mut out = Vec::new();
        while let Some(r) = self.grant(now_ms) {
            out.push(r);
        }
        self.publish(svc);
        out
    }

    /// The next request to send at `now_ms`, for a host that sends it
    /// right after a delivery ended and was reported (the slot it freed
    /// goes on: to the oldest waiting request, else to what is due in
    /// memory, the chat's next event, say) rather than through its loop.
    /// `None` when nothing is, or no slot is free; when the store has
    /// work, a store turn is asked for. Never touches the store.
    pub fn poll_request(&mut self, svc: &Service, now_ms: u64) -> Option<WebhookRequest> {
        match svc.poll_webhook_in_memory(now_ms) {
            WebhookPoll::Request(r) => self.waiting.push_back((r, now_ms)),
            WebhookPoll::Idle => {}
            WebhookPoll::NeedsStore => {
                self.want_store_turn();
            }
        }
        let next = self.grant(now_ms);
        self.publish(svc);
        next
    }

    /// Reports what became of request `id` ([`Service::webhook_outcome`]),
    /// gives its connection slot back, and asks for a store turn when the
    /// store has work now (what the outcome changed is written by a turn).
    /// Whether it asked: a host that begins turns from its loop wakes the
    /// loop then. Never touches the store.
    pub fn handle_outcome(&mut self, svc: &Service, id: u64, outcome: Outcome, now_ms: u64) -> bool {
        let wanted = svc.webhook_outcome(id, outcome, now_ms);
        self.release(svc);
        if wanted {
            self.want_store_turn();
        }
        wanted
    }

    /// Gives back the connection slot of a request the host took from the
    /// pump and reported itself through [`Service::webhook_outcome`]
    /// ([`Pump::handle_outcome`] does it). Once per request taken.
    pub fn release(&mut self, svc: &Service) {
        self.sending = self.sending.saturating_sub(1);
        self.publish(svc);
    }

    /// Sets the most requests handed out at once (at least one).
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
    }

    /// The most requests handed out at once.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Requests due and waiting for a free slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Tells the service's metrics what waits and the cap.
    fn publish(&self, svc: &Service) {
        svc.note_webhook_slots(self.waiting.len(), self.cap);
    }

    /// Asks for a store turn (nothing more when one is asked for already).
    pub fn want_store_turn(&mut self) {
        self.wanted = true;
    }

    /// Whether a store turn should begin now: one is asked for and none
    /// runs (a turn asked for while one runs begins after it).
    pub fn store_turn_wanted(&self) -> bool {
        self.wanted && !self.running
    }

    /// Whether a store turn is asked for or runs.
    pub fn store_turn_pending(&self) -> bool {
        self.wanted || self.running
    }

    /// Claims the store turn that is wanted: true when the caller is to run
    /// it now (once), false when no turn is wanted or one runs, which keeps
    /// it to one turn at a time.
    pub fn begin_store_turn(&mut self) -> bool {
        if self.store_turn_wanted() {
            self.claim_store_turn();
            true
        } else {
            false
        }
    }

    /// Marks a store turn as running, wanted or not: what asked for one is
    /// served by it.
    pub fn claim_store_turn(&mut self) {
        self.wanted = false;
        self.running = true;
    }

    /// Queues a request a store turn handed out ([`Service::poll_webhook`])
    /// for the loop's next poll, handed out at `now_ms`.
    pub fn handle_store_request(&mut self, svc: &Service, r: WebhookRequest, now_ms: u64) {
        self.waiting.push_back((r, now_ms));
        self.publish(svc);
    }

    /// Ends the store turn: the next can begin and the library's timeout
    /// counts again. Also after the store's part panicked.
    pub fn end_store_turn(&mut self) {
        self.running = false;
    }

    /// Runs a whole store turn at `now_ms`, for a host with no thread to
    /// give it: polls the store ([`Service::poll_webhook`]) until it hands
    /// out nothing more, which loads the webhooks, claims leases, writes
    /// what outcomes changed and reads the bots' logs (waiting for what it
    /// read to be durable, so that no webhook leaves before the write it
    /// reports). What it hands out is queued for the next
    /// [`Pump::poll_requests`]; how many. Runs on the store as
    /// [`Service::poll_webhook`] does (on a server's disk: never on its
    /// event loop). Ends the turn (claiming one first) even when the
    /// store's part panics.
    pub fn store_turn(&mut self, svc: &Service, now_ms: u64) -> usize {
        struct End<'a>(&'a mut Pump);
        impl Drop for End<'_> {
            fn drop(&mut self) {
                self.0.end_store_turn();
            }
        }
        self.claim_store_turn();
        let end = End(self);
        let mut handed = 0;
        while let Some(r) = svc.poll_webhook(now_ms) {
            end.0.handle_store_request(svc, r, now_ms);
            handed += 1;
        }
        handed
    }

    /// When the loop polls again if nothing wakes it first, in the service
    /// clock's milliseconds; `None` for no deadline. The library's timeout
    /// ([`Service::webhook_timeout`]), except that while a store turn is
    /// asked for or runs a timeout already past means the store's part,
    /// which memory cannot do: no deadline then (the turn's end wakes the
    /// loop), so that the loop does not spin. A request that waits with a
    /// slot free is due now; one that waits for a slot needs no deadline
    /// (a report frees the slot, and the host polls or chains then).
    pub fn poll_timeout(&self, svc: &Service, now_ms: u64) -> Option<u64> {
        if !self.waiting.is_empty() && self.sending < self.cap {
            return Some(now_ms);
        }
        let due = svc.webhook_timeout()?;
        if due <= now_ms && self.store_turn_pending() {
            return None;
        }
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::{Pump, DEFAULT_CONNECTION_CAP};
    use crate::Service;

    fn service() -> Service {
        crate::service::manual_clock_service(|_| {})
    }

    #[test]
    fn the_first_load_is_a_store_turn_and_a_wanted_turn_stops_the_deadline() {
        let svc = service();
        let mut pump = Pump::default();
        let now = svc.now_ms();
        // Not loaded: due now, and memory holds nothing.
        assert_eq!(pump.poll_timeout(&svc, now), Some(now));
        assert!(!pump.store_turn_wanted());
        assert!(pump.poll_requests(&svc, now).is_empty());
        assert!(pump.store_turn_wanted());
        // Past due, but the store's: no deadline until the turn ends.
        assert_eq!(pump.poll_timeout(&svc, now), None);
        assert!(pump.begin_store_turn());
        assert!(!pump.begin_store_turn(), "one turn at a time");
        assert!(!pump.store_turn_wanted());
        assert_eq!(pump.poll_timeout(&svc, now), None, "a turn runs");
        assert_eq!(pump.store_turn(&svc, now), 0);
        // Loaded, no webhook: nothing waits, nothing is wanted.
        assert_eq!(pump.poll_timeout(&svc, now), None);
        assert!(!pump.store_turn_wanted());
        assert!(pump.poll_requests(&svc, now).is_empty());
        assert!(!pump.store_turn_wanted());
    }

    #[test]
    fn a_turn_asked_for_while_one_runs_begins_after_it() {
        let mut pump = Pump::default();
        pump.want_store_turn();
        assert!(pump.begin_store_turn());
        pump.want_store_turn();
        assert!(!pump.store_turn_wanted());
        assert!(!pump.begin_store_turn());
        // The turn ends (here: its end without a store call).
        pump.end_store_turn();
        assert!(pump.store_turn_wanted());
        assert!(pump.begin_store_turn());
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
        use crate::webhook::schedule::ATTEMPT_TIMEOUT_MS;
        use crate::webhook::Outcome;
        let svc = crate::service::manual_clock_service(|c| {
            c.webhook_allow_http = true;
            c.webhook_allow_private_addresses = true;
        });
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
        let mut pump = Pump::default();
        assert_eq!(pump.cap(), 240, "the default budget's quarter");
        assert_eq!(DEFAULT_CONNECTION_CAP, 240);
        pump.set_cap(2);
        assert_eq!(pump.cap(), 2);
        let now = svc.now_ms();
        assert_eq!(pump.store_turn(&svc, now), 5);
        // Two slots: two go, three wait, and the gauge says so.
        let sent = pump.poll_requests(&svc, now);
        assert_eq!(sent.len(), 2);
        assert_eq!(pump.waiting(), 3);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 3);
        assert_eq!(metric(&svc, "botspace_webhook_connection_cap"), 2);
        assert_eq!(metric(&svc, "botspace_webhook_attempts_in_flight"), 2, "only what was sent");
        // Nothing to do until a slot frees: no deadline of the pump's.
        assert_ne!(pump.poll_timeout(&svc, now), Some(now));
        assert!(pump.poll_requests(&svc, now).is_empty());
        assert!(pump.poll_request(&svc, now).is_none());
        // 30 s later (three attempts' deadlines), the first is answered: its
        // slot goes to the oldest waiting one, a first attempt whose deadline
        // starts now.
        let later = now + 30_000;
        pump.handle_outcome(&svc, sent[0].id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        let third = pump.poll_request(&svc, later).expect("the oldest waiting one");
        assert_eq!((third.attempt.attempt, third.attempt.deadline_ms), (1, later + ATTEMPT_TIMEOUT_MS));
        assert_eq!(pump.waiting(), 2);
        assert!(pump.poll_requests(&svc, later).is_empty(), "both slots in use");
        // A host that reported through the service gives the slot back itself.
        svc.webhook_outcome(sent[1].id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        pump.release(&svc);
        assert_eq!(pump.poll_timeout(&svc, later), Some(later), "a slot is free for a waiting one");
        let fourth = pump.poll_requests(&svc, later);
        assert_eq!(fourth.len(), 1);
        assert_eq!(fourth[0].attempt.attempt, 1);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 1);
        for r in [third, fourth.into_iter().next().unwrap()] {
            pump.handle_outcome(&svc, r.id, Outcome::Answered { status: 200, retry_after_s: None }, later);
        }
        let last = pump.poll_requests(&svc, later);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].attempt.attempt, 1);
        assert_eq!(pump.waiting(), 0);
        assert_eq!(metric(&svc, "botspace_webhook_waiting_for_connection"), 0);
        assert_eq!(metric(&svc, "botspace_webhook_retries_total"), 0, "no wait used a retry");
        assert_eq!(metric(&svc, r#"botspace_webhook_attempts_total{result="timed_out"}"#), 0);
    }
}
