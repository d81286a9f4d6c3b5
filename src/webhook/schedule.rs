//! One bot's webhook deliveries as a state machine: events from the bot's
//! log and the host's clock go in; attempts to make, cursor moves to write
//! and the next time to wake come out. It performs no I/O: its driver
//! reads the log, writes the cursor and hands each [`Attempt`] to the host,
//! which sends it and reports an [`Outcome`].
//!
//! The rules it keeps:
//! - **Per-chat order.** At most one attempt per chat is in flight, and a
//!   chat's next event waits until the one before it is delivered, so a
//!   receiver sees each chat's events in order, retries included. Chats
//!   go in parallel up to `max_connections` attempts.
//! - **Retries for as long as the event is kept**, after 1 s, 2 s, 4 s …
//!   up to 10 minutes between attempts, each wait drawn between half and
//!   all of that (jitter, so that many bots failing together do not retry
//!   together). A 429 or 503 with `Retry-After` waits at least that long,
//!   at most an hour.
//! - **The cursor moves only over delivered events.** Deliveries finish out
//!   of order across chats; the durable cursor moves to the end of the run
//!   of delivered events that starts at it. Events delivered beyond a gap
//!   are delivered again after a crash (same `webhook-id`), never lost.
//! - **A bounded window.** At most [`WINDOW`] events are held per bot, and
//!   at most [`DELIVERED_AHEAD_MAX`] delivered above the cursor are
//!   remembered (their seqs only), so a bot's memory is bounded whatever
//!   its backlog; a chat whose receiver keeps failing holds the others back
//!   only once either is full.
//! - **Read ahead in time.** A bot behind its log asks for more once half
//!   the window is no longer waiting to be sent ([`Schedule::should_read_ahead`]),
//!   counting what is in flight as used: the read then lands before the
//!   chats run dry, even with every connection busy.

use super::signature;
use crate::protocol::GapMarker;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Events held in memory per bot, read from its log ahead of delivery.
pub const WINDOW: usize = 256;

/// Events delivered above a bot's cursor (a lower one still on its way)
/// that are remembered, as seqs: deliveries finish out of order across
/// chats, and counting these against [`WINDOW`] left the chats with
/// nothing to send while one of them was a few events behind. Bounded so
/// that a chat whose receiver keeps failing cannot grow it for a day.
pub const DELIVERED_AHEAD_MAX: usize = 4 * WINDOW;

/// The most attempts of one webhook in flight at once (`max_connections`
/// may ask for 1 to this many). Also what a host keeps open to one
/// receiver: no more idle connections than a webhook may use.
pub const MAX_CONNECTIONS: u32 = 100;

/// How long the receiver has to answer an attempt.
pub const ATTEMPT_TIMEOUT_MS: u64 = 10_000;

/// The first wait after a failure; it doubles after each.
pub const FIRST_RETRY_MS: u64 = 1_000;

/// The longest wait between two attempts, `Retry-After` aside.
pub const MAX_RETRY_MS: u64 = 600_000;

/// The longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER_MS: u64 = 3_600_000;

/// The most bytes of an answer a host reads before it gives up on the rest
/// (the answer is not used beyond its status and `Retry-After`).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// One event of the bot's log, as the driver read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvent {
    pub seq: i64,
    /// The event's type; events of a type the bot did not ask for
    /// (`allowed_updates`) count as delivered without an attempt.
    pub kind: String,
    /// The chat the event is about: the key of its order. Events of no
    /// chat (the gap notice) take `""`.
    pub chat: String,
    /// The update exactly as delivered: `{"update_id","type","data"}`.
    pub body: String,
}

/// One HTTP request the host is to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub seq: i64,
    /// `webhook-id`: the same on every attempt of this event.
    pub webhook_id: String,
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp_s: u64,
    /// `webhook-signature`.
    pub signature: String,
    pub body: String,
    /// The host reports [`Outcome::TimedOut`] if no answer came by then.
    pub deadline_ms: u64,
    /// Which attempt this is for the event, from 1.
    pub attempt: u32,
}

impl Attempt {
    /// The attempt's own headers (its content type and signature), in
    /// order. A host sends [`super::WebhookRequest::header_lines`], which
    /// holds these after the user agent.
    pub fn headers(&self) -> [(&'static str, String); 4] {
        [
            ("content-type", "application/json".to_string()),
            ("webhook-id", self.webhook_id.clone()),
            ("webhook-timestamp", self.timestamp_s.to_string()),
            ("webhook-signature", self.signature.clone()),
        ]
    }
}

/// What became of an attempt, as the host saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered this status; `retry_after_s` is its
    /// `Retry-After` in seconds when it sent a valid one.
    Answered { status: u16, retry_after_s: Option<u64> },
    /// No answer by the attempt's deadline.
    TimedOut,
    /// No answer at all: the name did not resolve, the address was
    /// refused by the target rules, the connection was refused or reset,
    /// TLS failed. The text says which, for `last_error_message`.
    Failed(String),
}

/// Why an attempt got no answer, as a host's HTTP client tells it: each
/// kind has the words its `last_error_message` begins with, the same from
/// every host (the Rust server, the C server, the WASM builds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The host name did not resolve.
    Resolve,
    /// The host name resolved to no address at all.
    NoAddress,
    /// No connection was made to any address.
    Connect,
    /// The TLS handshake failed (the certificate, most often).
    Tls,
    /// The host cannot be a TLS server name.
    TlsName,
    /// The connection failed once made (reset, closed, a malformed answer).
    Connection,
    /// A kept connection failed and a new one did too, before the request
    /// left.
    BeforeSending,
    /// The host's client could not build the request.
    Build,
    /// The request failed and the client does not say at which step
    /// (`fetch`).
    Request,
    /// The receiver answered a redirect the client hid (a browser's opaque
    /// answer).
    HiddenRedirect,
    /// The address could not be checked against the policy.
    AddressCheck,
}

impl Failure {
    /// Every kind, in the C ABI's order (`botspace_webhook_failure`).
    pub const ALL: [Failure; 11] = [
        Failure::Resolve,
        Failure::NoAddress,
        Failure::Connect,
        Failure::Tls,
        Failure::TlsName,
        Failure::Connection,
        Failure::BeforeSending,
        Failure::Build,
        Failure::Request,
        Failure::HiddenRedirect,
        Failure::AddressCheck,
    ];

    /// The words of the kind: the whole message without a detail; with
    /// one, what precedes `": "` and the detail.
    pub fn words(self) -> &'static str {
        match self {
            Failure::Resolve => "the host name did not resolve",
            Failure::NoAddress => "the host name has no address",
            Failure::Connect => "could not connect",
            Failure::Tls => "TLS failed",
            Failure::TlsName => "the host is not a valid TLS server name",
            Failure::Connection => "the connection failed",
            Failure::BeforeSending => "the connection failed before the request was sent",
            Failure::Build => "could not build the request",
            Failure::Request => "the request failed",
            Failure::HiddenRedirect => "the receiver answered a redirect, which is not followed",
            Failure::AddressCheck => "the address could not be checked",
        }
    }

    /// The kind's name in the WASM API (`webhookFailure`).
    pub fn name(self) -> &'static str {
        match self {
            Failure::Resolve => "resolve",
            Failure::NoAddress => "no_address",
            Failure::Connect => "connect",
            Failure::Tls => "tls",
            Failure::TlsName => "tls_name",
            Failure::Connection => "connection",
            Failure::BeforeSending => "before_sending",
            Failure::Build => "build",
            Failure::Request => "request",
            Failure::HiddenRedirect => "hidden_redirect",
            Failure::AddressCheck => "address_check",
        }
    }

    /// The kind named `name` ([`Failure::name`]).
    pub fn from_name(name: &str) -> Option<Failure> {
        Failure::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The message recorded for `getWebhookInfo`: the words, then
    /// `": "` and `detail` (what the host's client said) when there is one.
    pub fn message(self, detail: Option<&str>) -> String {
        match detail {
            Some(d) => format!("{}: {d}", self.words()),
            None => self.words().to_string(),
        }
    }
}

impl Outcome {
    /// No answer, for `kind`'s reason, with what the host's client said.
    pub fn failed(kind: Failure, detail: impl std::fmt::Display) -> Outcome {
        Outcome::Failed(kind.message(Some(&detail.to_string())))
    }

    /// No answer, for `kind`'s reason, with nothing more to say.
    pub fn failed_plainly(kind: Failure) -> Outcome {
        Outcome::Failed(kind.message(None))
    }

    /// The status a host's HTTP client reported, with the `Retry-After`
    /// header's text if any, at `now_ms`. A fetch that hides a redirect it
    /// did not follow reports status 0 (an opaque answer): that is
    /// [`Failure::HiddenRedirect`]. `None` for any other number that is
    /// not a status (outside 100–999).
    pub fn of_status(status: u16, retry_after: Option<&str>, now_ms: u64) -> Option<Outcome> {
        match status {
            0 => Some(Outcome::failed_plainly(Failure::HiddenRedirect)),
            100..=999 => {
                Some(Outcome::Answered { status, retry_after_s: retry_after.and_then(|v| retry_after_s(v, now_ms)) })
            }
            _ => None,
        }
    }
}

/// What the host reports of the bot's webhook (`getWebhookInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// Unix seconds of the last failed attempt.
    pub last_error_date: Option<u64>,
    pub last_error_message: Option<String>,
    /// Unix seconds of the next retry, when one is waiting.
    pub next_attempt_date: Option<u64>,
}

#[derive(Debug)]
struct Held {
    chat: String,
    body: String,
    /// Attempts made so far.
    attempts: u32,
    /// No attempt before this time.
    not_before_ms: u64,
    in_flight: bool,
}

/// One bot's deliveries.
#[derive(Debug)]
pub struct Schedule {
    bot_id: String,
    keys: signature::SigningKeys,
    max_connections: usize,
    /// The durable cursor as this schedule knows it: every event up to it
    /// is acknowledged.
    cursor: i64,
    /// The last event read from the log.
    read_through: i64,
    /// Events read and not yet delivered, by seq.
    held: BTreeMap<i64, Held>,
    /// Events delivered above the cursor (a lower one is still on its way).
    delivered: BTreeSet<i64>,
    /// Runs of seqs with no event (dropped from the log before they were
    /// read; the gap notice that follows says so): first → last.
    gaps: BTreeMap<i64, i64>,
    /// The event types to deliver; `None`: all.
    allowed: Option<Vec<String>>,
    in_flight: usize,
    /// Each chat's held events in seq order: only the first may be
    /// attempted (later ones wait behind it, retries included).
    queues: HashMap<String, VecDeque<i64>>,
    /// The first held event of every chat whose first event is not in
    /// flight: what may be attempted, due now or at its `not_before_ms`.
    heads: BTreeSet<i64>,
    /// A cursor move the driver has not yet taken.
    cursor_to_write: Option<i64>,
    /// The log held more than the window took at the last read.
    behind: bool,
    status: Status,
    /// Held events that failed and wait for their retry (attempted, not
    /// in flight): while none does, [`Schedule::next_retry`] looks at
    /// nothing (it runs at every outcome).
    retries_waiting: usize,
}

impl Schedule {
    /// A schedule for a bot whose durable cursor stands at `cursor`,
    /// signing with `keys` (the secret's key bytes, and the replaced
    /// secret's during a rotation's overlap).
    pub fn new(bot_id: &str, keys: impl Into<signature::SigningKeys>, max_connections: u32, cursor: i64) -> Schedule {
        Schedule {
            bot_id: bot_id.to_string(),
            keys: keys.into(),
            max_connections: max_connections.clamp(1, MAX_CONNECTIONS) as usize,
            cursor,
            read_through: cursor,
            held: BTreeMap::new(),
            delivered: BTreeSet::new(),
            gaps: BTreeMap::new(),
            allowed: None,
            in_flight: 0,
            queues: HashMap::new(),
            heads: BTreeSet::new(),
            cursor_to_write: None,
            behind: false,
            status: Status::default(),
            retries_waiting: 0,
        }
    }

    pub fn bot_id(&self) -> &str {
        &self.bot_id
    }

    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The last event read from the log.
    pub fn read_through(&self) -> i64 {
        self.read_through
    }

    /// Whether the log held more than the last read took (the driver
    /// says so): an outcome that makes room is then a reason to read.
    pub fn set_behind(&mut self, behind: bool) {
        self.behind = behind;
    }

    pub fn is_behind(&self) -> bool {
        self.behind
    }

    /// The keys this schedule signs with.
    pub fn keys(&self) -> &signature::SigningKeys {
        &self.keys
    }

    /// New limits (a later `setWebhook` with the same URL).
    pub fn set_max_connections(&mut self, n: u32) {
        self.max_connections = n.clamp(1, MAX_CONNECTIONS) as usize;
    }

    /// The event types to deliver from now on (`None`: all). A gap notice
    /// is always delivered.
    pub fn set_allowed_updates(&mut self, allowed: Option<Vec<String>>) {
        self.allowed = allowed;
    }

    /// The log read the driver should make: events after the first value,
    /// at most the second. `None` while the window is full.
    pub fn wants_events(&self) -> Option<(i64, usize)> {
        let room = self.room();
        (room > 0).then_some((self.read_through, room))
    }

    /// How many events may be read now: room for their bodies in the
    /// window, and for their seqs once delivered above the cursor (every
    /// held event may end there).
    fn room(&self) -> usize {
        let held = self.held.len();
        WINDOW.saturating_sub(held).min(DELIVERED_AHEAD_MAX.saturating_sub(self.delivered.len() + held))
    }

    /// Whether the driver should read the bot's log again now: it is
    /// behind its log, at most half the window waits to be sent (what is
    /// in flight does not), and a quarter of the window or more can be
    /// read (one read for many deliveries, not one each).
    pub fn should_read_ahead(&self) -> bool {
        let waiting = self.held.len().saturating_sub(self.in_flight);
        self.behind && waiting <= WINDOW / 2 && self.room() >= WINDOW / 4
    }

    /// Events the driver read after [`Schedule::wants_events`]'s cursor,
    /// in seq order. Events the schedule already holds are ignored. Seqs
    /// skipped over (events dropped before they were read) need no
    /// delivery: the driver puts the gap notice at the last of them.
    pub fn events_read(&mut self, events: Vec<LogEvent>, now_ms: u64) {
        for e in events {
            if e.seq <= self.read_through {
                continue;
            }
            if e.seq > self.read_through + 1 {
                self.gaps.insert(self.read_through + 1, e.seq - 1);
            }
            self.read_through = e.seq;
            let wanted = e.kind == GapMarker::EventsDropped.as_str()
                || self.allowed.as_ref().is_none_or(|a| a.contains(&e.kind));
            if wanted {
                let queue = self.queues.entry(e.chat.clone()).or_default();
                if queue.is_empty() {
                    self.heads.insert(e.seq);
                }
                queue.push_back(e.seq);
                self.held.insert(
                    e.seq,
                    Held { chat: e.chat, body: e.body, attempts: 0, not_before_ms: now_ms, in_flight: false },
                );
            } else {
                self.delivered.insert(e.seq);
            }
        }
        self.advance_cursor();
    }

    /// The bot's cursor moved by another path (`drop_pending_updates`, or
    /// the host's own acknowledgement): what is now below it is dropped.
    pub fn cursor_moved(&mut self, cursor: i64) {
        if cursor <= self.cursor {
            return;
        }
        self.cursor = cursor;
        self.read_through = self.read_through.max(cursor);
        let keep = self.held.split_off(&(cursor + 1));
        for h in std::mem::replace(&mut self.held, keep).into_values() {
            if h.in_flight {
                // Its outcome, when it comes, finds nothing held.
                self.in_flight -= 1;
            }
        }
        self.delivered = self.delivered.split_off(&(cursor + 1));
        self.gaps.retain(|_, last| *last > cursor);
        // Rare (another reader moved the cursor): the queues are rebuilt.
        self.queues.clear();
        self.heads.clear();
        self.retries_waiting = self.held.values().filter(|h| h.attempts > 0 && !h.in_flight).count();
        for (&seq, h) in &self.held {
            let queue = self.queues.entry(h.chat.clone()).or_default();
            if queue.is_empty() && !h.in_flight {
                self.heads.insert(seq);
            }
            queue.push_back(seq);
        }
    }

    /// The next attempt to make now, if any: call until `None`.
    pub fn poll_attempt(&mut self, now_ms: u64) -> Option<Attempt> {
        if self.in_flight >= self.max_connections {
            return None;
        }
        // The lowest seq of a chat with nothing ahead of it, due now.
        let seq = *self.heads.iter().find(|s| self.held.get(s).is_some_and(|h| h.not_before_ms <= now_ms))?;
        self.heads.remove(&seq);
        let h = self.held.get_mut(&seq).expect("a head is held");
        if h.attempts > 0 {
            self.retries_waiting -= 1;
        }
        h.in_flight = true;
        h.attempts += 1;
        self.in_flight += 1;
        let timestamp_s = now_ms / 1000;
        let webhook_id = signature::webhook_id(&self.bot_id, seq);
        let signature = self.keys.sign(&webhook_id, timestamp_s, h.body.as_bytes(), now_ms);
        Some(Attempt {
            seq,
            webhook_id,
            timestamp_s,
            signature,
            body: h.body.clone(),
            deadline_ms: now_ms + ATTEMPT_TIMEOUT_MS,
            attempt: h.attempts,
        })
    }

    /// The host's report of an attempt. `random` is a fresh random number
    /// from the host's source, for the retry's jitter.
    pub fn handle_outcome(&mut self, seq: i64, outcome: Outcome, now_ms: u64, random: u64) {
        let Some(h) = self.held.get_mut(&seq) else { return };
        if !h.in_flight {
            return;
        }
        h.in_flight = false;
        self.in_flight -= 1;
        let (status, retry_after_s) = match &outcome {
            Outcome::Answered { status, retry_after_s } => (Some(*status), *retry_after_s),
            _ => (None, None),
        };
        if matches!(status, Some(200..=299)) {
            let h = self.held.remove(&seq).expect("held");
            if let Some(queue) = self.queues.get_mut(&h.chat) {
                queue.retain(|s| *s != seq);
                match queue.front() {
                    Some(&next) => {
                        self.heads.insert(next);
                    }
                    None => {
                        self.queues.remove(&h.chat);
                    }
                }
            }
            self.delivered.insert(seq);
            self.advance_cursor();
            return;
        }
        let wait = retry_wait_ms(h.attempts, status, retry_after_s, random);
        h.not_before_ms = now_ms + wait;
        self.retries_waiting += 1;
        self.heads.insert(seq);
        self.status.last_error_date = Some(now_ms / 1000);
        self.status.last_error_message = Some(match outcome {
            Outcome::Answered { status, .. } => format!("the receiver answered {status}"),
            Outcome::TimedOut => format!("no answer within {} s", ATTEMPT_TIMEOUT_MS / 1000),
            Outcome::Failed(why) => why,
        });
    }

    fn advance_cursor(&mut self) {
        let mut c = self.cursor;
        loop {
            if self.delivered.remove(&(c + 1)) {
                c += 1;
            } else if let Some(last) = self.gaps.remove(&(c + 1)) {
                c = last;
            } else {
                break;
            }
        }
        if c > self.cursor {
            self.cursor = c;
            self.cursor_to_write = Some(c);
        }
    }

    /// A cursor move to make durable (`store::gateway::write_ack`), once.
    pub fn take_cursor_write(&mut self) -> Option<i64> {
        self.cursor_to_write.take()
    }

    /// When the driver should next call [`Schedule::poll_attempt`]: the
    /// earliest retry that waits, if nothing is due now.
    /// `None` while every connection is in flight (an outcome comes first)
    /// or nothing is held; a time at or before now when an event is due.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.in_flight >= self.max_connections {
            return None;
        }
        self.heads.iter().filter_map(|s| self.held.get(s)).map(|h| h.not_before_ms).min()
    }

    /// When the earliest retry that waits is due (`getWebhookInfo`'s
    /// `next_attempt_date`): a failed event's next attempt.
    pub fn next_retry(&self) -> Option<u64> {
        if self.retries_waiting == 0 {
            return None;
        }
        self.heads.iter().filter_map(|s| self.held.get(s)).filter(|h| h.attempts > 0).map(|h| h.not_before_ms).min()
    }

    pub fn status(&self) -> Status {
        Status { next_attempt_date: self.next_retry().map(|t| t.div_ceil(1000)), ..self.status.clone() }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Events read and not yet delivered.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }
}

/// A `Retry-After` header's value in seconds from `now_ms`: a number of
/// seconds, or an HTTP date (RFC 9110, IMF-fixdate). `None` when it is
/// neither.
pub fn retry_after_s(value: &str, now_ms: u64) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return Some(v.parse::<u64>().unwrap_or(u64::MAX));
    }
    let at = http_date_s(v)?;
    Some(at.saturating_sub(now_ms / 1000))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` as Unix seconds.
fn http_date_s(v: &str) -> Option<u64> {
    let (_, rest) = v.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == month_name)? as u64 + 1;
    let year: u64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|x| x.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || parts.next().is_some() || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days from 1970-01-01 to the date (the civil-from-days inverse).
    let (y, mo) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// How long to wait after the `attempts`-th failed attempt: 1 s doubled
/// per attempt up to 10 minutes, drawn between half and all of it; at least
/// a 429's or 503's `Retry-After` (at most an hour).
pub fn retry_wait_ms(attempts: u32, status: Option<u16>, retry_after_s: Option<u64>, random: u64) -> u64 {
    let ceiling = FIRST_RETRY_MS.saturating_mul(1u64 << attempts.saturating_sub(1).min(20)).min(MAX_RETRY_MS);
    let half = ceiling / 2;
    let wait = half + random % (ceiling - half + 1);
    match (status, retry_after_s) {
        (Some(429 | 503), Some(s)) => wait.max(s.saturating_mul(1000).min(MAX_RETRY_AFTER_MS)),
        _ => wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_status_is_an_answer_and_zero_is_a_hidden_redirect() {
        assert_eq!(
            Outcome::of_status(503, Some("7"), 0),
            Some(Outcome::Answered { status: 503, retry_after_s: Some(7) })
        );
        assert_eq!(Outcome::of_status(200, None, 0), Some(Outcome::Answered { status: 200, retry_after_s: None }));
        assert_eq!(Outcome::of_status(0, Some("7"), 0), Some(Outcome::failed_plainly(Failure::HiddenRedirect)));
        for bad in [1, 99, 1000, u16::MAX] {
            assert_eq!(Outcome::of_status(bad, None, 0), None, "{bad}");
        }
    }

    fn ev(seq: i64, chat: &str) -> LogEvent {
        typed(seq, chat, "message_created")
    }

    fn typed(seq: i64, chat: &str, kind: &str) -> LogEvent {
        LogEvent { seq, kind: kind.into(), chat: chat.into(), body: format!("{{\"update_id\":{seq}}}") }
    }

    fn ok() -> Outcome {
        Outcome::Answered { status: 200, retry_after_s: None }
    }

    fn schedule(max: u32) -> Schedule {
        Schedule::new("b_1", vec![1; 32], max, 0)
    }

    fn drain(s: &mut Schedule, now: u64) -> Vec<i64> {
        std::iter::from_fn(|| s.poll_attempt(now)).map(|a| a.seq).collect()
    }

    /// Sends everything due at 0 and reports `outcome(seq)`, until nothing
    /// more is due.
    fn settle(s: &mut Schedule, outcome: impl Fn(i64) -> Outcome) {
        loop {
            let due = drain(s, 0);
            if due.is_empty() {
                return;
            }
            for seq in due {
                s.handle_outcome(seq, outcome(seq), 0, 0);
            }
        }
    }

    #[test]
    fn one_attempt_per_chat_in_order_and_chats_in_parallel() {
        let mut s = schedule(40);
        assert_eq!(s.wants_events(), Some((0, WINDOW)));
        s.events_read(vec![ev(1, "a"), ev(2, "a"), ev(3, "b"), ev(4, "c"), ev(5, "b")], 0);
        assert_eq!(drain(&mut s, 0), vec![1, 3, 4]);
        s.handle_outcome(3, ok(), 10, 0);
        assert_eq!(s.take_cursor_write(), None, "1 and 2 are not delivered yet");
        assert_eq!(drain(&mut s, 10), vec![5]);
        s.handle_outcome(1, ok(), 20, 0);
        assert_eq!(s.take_cursor_write(), Some(1));
        assert_eq!(drain(&mut s, 20), vec![2]);
        s.handle_outcome(2, ok(), 30, 0);
        assert_eq!(s.take_cursor_write(), Some(3), "3 was delivered already");
        s.handle_outcome(4, ok(), 30, 0);
        s.handle_outcome(5, ok(), 30, 0);
        assert_eq!(s.take_cursor_write(), Some(5));
        assert_eq!(s.take_cursor_write(), None);
        assert_eq!(s.wants_events(), Some((5, WINDOW)));
    }

    #[test]
    fn max_connections_caps_attempts_in_flight() {
        let mut s = schedule(2);
        s.events_read((1..=5).map(|i| ev(i, &format!("c{i}"))).collect(), 0);
        assert_eq!(drain(&mut s, 0), vec![1, 2]);
        assert_eq!(s.poll_timeout(), None, "an outcome comes first");
        s.handle_outcome(2, ok(), 1, 0);
        assert_eq!(s.poll_timeout(), Some(0), "3, read at 0, is due at once");
        assert_eq!(drain(&mut s, 1), vec![3]);
        assert_eq!(s.in_flight(), 2);
    }

    #[test]
    fn a_failed_event_holds_its_chat_back_and_is_retried_with_the_same_id() {
        let mut s = schedule(40);
        s.events_read(vec![ev(1, "a"), ev(2, "a"), ev(3, "b")], 0);
        let first = s.poll_attempt(0).unwrap();
        assert_eq!((first.seq, first.attempt, first.webhook_id.as_str()), (1, 1, "msg_b_1_1"));
        assert_eq!(drain(&mut s, 0), vec![3]);
        s.handle_outcome(1, Outcome::Answered { status: 500, retry_after_s: None }, 100, 0);
        assert_eq!(drain(&mut s, 100), Vec::<i64>::new(), "2 waits behind 1; 1 waits 500 ms");
        assert_eq!(s.poll_timeout(), Some(600));
        assert_eq!(
            s.status(),
            Status {
                last_error_date: Some(0),
                last_error_message: Some("the receiver answered 500".into()),
                next_attempt_date: Some(1)
            }
        );
        let again = s.poll_attempt(600).unwrap();
        assert_eq!((again.seq, again.attempt, again.webhook_id), (1, 2, first.webhook_id));
        assert_eq!(again.timestamp_s, 0);
        assert_ne!(again.deadline_ms, first.deadline_ms);
    }

    #[test]
    fn waits_double_up_to_ten_minutes_with_jitter() {
        // random 0 gives the lower half, u64::MAX-ish the top.
        assert_eq!(retry_wait_ms(1, None, None, 0), 500);
        assert_eq!(retry_wait_ms(1, None, None, 500), 1000);
        assert_eq!(retry_wait_ms(2, None, None, 0), 1000);
        assert_eq!(retry_wait_ms(3, Some(500), None, 0), 2000);
        assert_eq!(retry_wait_ms(11, None, None, 0), 300_000);
        assert_eq!(retry_wait_ms(40, None, None, 0), 300_000);
        assert_eq!(retry_wait_ms(40, None, None, 300_000), 600_000);
        for r in [1u64, 7, 12345, u64::MAX] {
            let w = retry_wait_ms(4, None, None, r);
            assert!((4000..=8000).contains(&w), "{w}");
        }
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = 784_111_777_000; // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after_s("120", now), Some(120));
        assert_eq!(retry_after_s(" 7 ", now), Some(7));
        assert_eq!(retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(0));
        assert_eq!(retry_after_s("Sun, 06 Nov 1994 08:51:37 GMT", now), Some(120));
        assert_eq!(retry_after_s("Thu, 01 Jan 1970 00:00:00 GMT", now), Some(0));
        assert_eq!(retry_after_s("Sat, 29 Feb 2020 23:59:59 GMT", 0), Some(1_583_020_799));
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 32 Nov 1994 08:49:37 GMT"] {
            assert_eq!(retry_after_s(bad, now), None, "{bad}");
        }
    }

    #[test]
    fn retry_after_is_honoured_on_429_and_503_up_to_an_hour() {
        assert_eq!(retry_wait_ms(1, Some(429), Some(30), 0), 30_000);
        assert_eq!(retry_wait_ms(1, Some(503), Some(30), 0), 30_000);
        assert_eq!(retry_wait_ms(1, Some(500), Some(30), 0), 500, "only 429 and 503");
        assert_eq!(retry_wait_ms(1, Some(429), Some(86_400), 0), 3_600_000);
        assert_eq!(retry_wait_ms(12, Some(429), Some(1), 0), 300_000, "the backoff when longer");
    }

    #[test]
    fn timeouts_and_failures_are_reported_in_words() {
        let mut s = schedule(40);
        s.events_read(vec![ev(1, "a"), ev(2, "b")], 0);
        drain(&mut s, 0);
        s.handle_outcome(1, Outcome::TimedOut, 10_000, 0);
        assert_eq!(s.status().last_error_message.as_deref(), Some("no answer within 10 s"));
        s.handle_outcome(2, Outcome::Failed("connection refused".into()), 10_000, 0);
        assert_eq!(s.status().last_error_message.as_deref(), Some("connection refused"));
        assert_eq!(s.status().last_error_date, Some(10));
    }

    #[test]
    fn events_delivered_above_the_cursor_do_not_take_the_windows_room() {
        let mut s = schedule(100);
        // Chat "a" holds the cursor back (its event 1 keeps failing); 2..=101
        // in chat "b" are delivered one after another.
        s.events_read((1..=101).map(|i| ev(i, if i == 1 { "a" } else { "b" })).collect(), 0);
        settle(&mut s, |seq| if seq == 1 { Outcome::Answered { status: 500, retry_after_s: None } } else { ok() });
        assert_eq!(s.delivered.len(), 100, "2..=101 delivered above the cursor at 0");
        // Only event 1 is held: the window's room is for bodies.
        assert_eq!(s.held.len(), 1);
        assert_eq!(s.wants_events(), Some((101, WINDOW - 1)));
    }

    #[test]
    fn what_is_delivered_above_the_cursor_is_bounded() {
        let mut s = schedule(100);
        s.events_read(vec![ev(1, "a")], 0);
        assert_eq!(drain(&mut s, 0), vec![1]);
        // 1 is in flight (stuck); everything after it is delivered.
        let mut seq = 1;
        while let Some((after, room)) = s.wants_events() {
            assert_eq!(after, seq);
            s.events_read((seq + 1..=seq + room as i64).map(|i| ev(i, "b")).collect(), 0);
            seq += room as i64;
            settle(&mut s, |_| ok());
        }
        assert_eq!(s.delivered.len() + s.held.len(), DELIVERED_AHEAD_MAX, "never more than the bound");
        assert!(!s.should_read_ahead());
        // Event 1 delivered: the cursor runs over all of them, and reading goes on.
        s.handle_outcome(1, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), Some(seq));
        assert_eq!(s.wants_events(), Some((seq, WINDOW)));
    }

    #[test]
    fn a_read_is_asked_for_once_half_the_window_no_longer_waits_to_be_sent() {
        let mut s = schedule(100);
        s.behind = true;
        s.events_read((1..=WINDOW as i64).map(|i| ev(i, &format!("c{}", i % 64))).collect(), 0);
        assert!(!s.should_read_ahead(), "the window is full");
        // 64 in flight (one a chat): 192 wait, and nothing can be read yet.
        assert_eq!(drain(&mut s, 0).len(), 64);
        assert!(!s.should_read_ahead());
        // Deliver until at most half the window waits while 64 stay in
        // flight: a read is asked for with a quarter of the window free.
        let mut delivered = 0;
        while !s.should_read_ahead() {
            let a = s.poll_attempt(0);
            assert!(a.is_none(), "every chat has one in flight");
            let seq = *s.held.iter().find(|(_, h)| h.in_flight).map(|(k, _)| k).unwrap();
            s.handle_outcome(seq, ok(), 0, 0);
            drain(&mut s, 0);
            delivered += 1;
        }
        assert_eq!(delivered, WINDOW / 4, "read when 64 are free, with 64 more still waiting");
        assert_eq!(s.held.len() - s.in_flight, WINDOW / 2);
    }

    #[test]
    fn the_window_bounds_what_is_held() {
        let mut s = schedule(1);
        s.events_read((1..=WINDOW as i64).map(|i| ev(i, "a")).collect(), 0);
        assert_eq!(s.wants_events(), None);
        let a = s.poll_attempt(0).unwrap();
        s.handle_outcome(a.seq, ok(), 0, 0);
        assert_eq!(s.wants_events(), Some((WINDOW as i64, 1)));
    }

    #[test]
    fn outcomes_for_unknown_or_settled_attempts_change_nothing() {
        let mut s = schedule(40);
        s.events_read(vec![ev(1, "a")], 0);
        s.handle_outcome(1, ok(), 0, 0);
        let a = s.poll_attempt(0).unwrap();
        s.handle_outcome(a.seq, ok(), 0, 0);
        s.handle_outcome(a.seq, Outcome::TimedOut, 0, 0);
        s.handle_outcome(99, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), Some(1));
        assert_eq!(s.status(), Status::default());
    }

    #[test]
    fn a_cursor_moved_elsewhere_drops_what_it_passed() {
        let mut s = schedule(40);
        s.events_read(vec![ev(1, "a"), ev(2, "a"), ev(3, "b")], 0);
        assert_eq!(drain(&mut s, 0), vec![1, 3]);
        s.cursor_moved(2);
        assert_eq!(s.in_flight(), 1);
        assert_eq!(drain(&mut s, 0), Vec::<i64>::new(), "3 is in flight");
        s.handle_outcome(1, ok(), 0, 0);
        s.handle_outcome(3, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), Some(3));
    }

    #[test]
    fn attempts_are_signed_over_id_timestamp_and_body() {
        let mut s = schedule(40);
        s.events_read(vec![ev(7, "a")], 1_614_265_330_500);
        let a = s.poll_attempt(1_614_265_330_500).unwrap();
        assert_eq!(a.timestamp_s, 1_614_265_330);
        assert_eq!(a.signature, signature::sign(&[1; 32], "msg_b_1_7", 1_614_265_330, b"{\"update_id\":7}"));
        assert_eq!(a.deadline_ms, 1_614_265_330_500 + ATTEMPT_TIMEOUT_MS);
        let h = a.headers();
        assert_eq!(h[0], ("content-type", "application/json".to_string()));
        assert_eq!(h[1], ("webhook-id", "msg_b_1_7".to_string()));
        assert_eq!(h[2], ("webhook-timestamp", "1614265330".to_string()));
    }

    #[test]
    fn events_of_types_not_asked_for_are_acknowledged_without_an_attempt() {
        let mut s = schedule(40);
        s.set_allowed_updates(Some(vec!["message_created".into()]));
        s.events_read(vec![typed(1, "a", "blocked"), ev(2, "a"), typed(3, "b", "member_added")], 0);
        assert_eq!(s.take_cursor_write(), Some(1));
        assert_eq!(drain(&mut s, 0), vec![2]);
        s.handle_outcome(2, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), Some(3));
    }

    #[test]
    fn a_gap_is_crossed_once_its_notice_is_delivered() {
        let mut s = schedule(40);
        s.set_allowed_updates(Some(vec!["message_created".into()]));
        // Events 1..=9 were dropped: the notice sits at 9, then 10 follows.
        s.events_read(vec![typed(9, "", GapMarker::EventsDropped.as_str()), ev(10, "a")], 0);
        // 1..=8 are gone; the notice at 9 stays to be delivered.
        assert_eq!(s.take_cursor_write(), Some(8));
        assert_eq!(drain(&mut s, 0), vec![9, 10]);
        s.handle_outcome(10, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), None, "the notice is not delivered yet");
        s.handle_outcome(9, ok(), 0, 0);
        assert_eq!(s.take_cursor_write(), Some(10));
    }

    #[test]
    fn a_failure_is_its_words_then_the_detail() {
        assert_eq!(Outcome::failed(Failure::Tls, "bad cert"), Outcome::Failed("TLS failed: bad cert".into()));
        assert_eq!(Outcome::failed(Failure::Connect, ""), Outcome::Failed("could not connect: ".into()));
        assert_eq!(Outcome::failed_plainly(Failure::NoAddress), Outcome::Failed("the host name has no address".into()));
        for kind in Failure::ALL {
            assert_eq!(Failure::from_name(kind.name()), Some(kind));
        }
        assert_eq!(Failure::from_name("TLS"), None);
    }
}
