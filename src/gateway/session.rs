//! The gateway protocol as a pure state machine: frames, heartbeat,
//! cursor, acks and close, with no storage handle and no clock. Inputs
//! (`handle_*`, with the host's `now`) go in; [`Session::poll`] hands out,
//! in order, the [`Effect`]s the session needs carried out and the
//! messages to send. What the effects find comes back through
//! `ack_written`, `events_read` and `bot_checked`, before the next `poll`.
//! The driver ([`super::driver`]) is the one place that carries effects
//! out; the tests below drive this machine alone, without a database.
//!
//! Durability stays with the effects: a read of the log answers
//! `events_read` only once what it read is durable, so no frame built here
//! can report a write that a crash could lose.

use super::registry::View;
use super::shared::Recency;
use super::{CloseCode, GatewayEvent, GatewayOutput, CLOSE_AUTHENTICATION_FAILED, CLOSE_INVALID_PAYLOAD};
use super::{CLOSE_SESSION_TIMEOUT, CLOSE_STORAGE_UNAVAILABLE, EVENTS_PER_POLL, READ_BYTES, STORAGE_CLOSE_AFTER_MS};
use crate::protocol::GatewayOp;
use crate::store::gateway::BotRow;
use std::collections::VecDeque;

/// Storage work the session asks for. Each effect that has a result is
/// answered before the next [`Session::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Move the bot's durable cursor to this seq; answer with
    /// [`Session::ack_written`].
    WriteAck(i64),
    /// Read the bot's events after `after` (at most `limit`, stopping once
    /// the frames hold `max_bytes`), make them durable, and answer with
    /// [`Session::events_read`].
    ReadEvents { after: i64, limit: usize, max_bytes: usize },
    /// Shared store: look at the bot's row (as recent as `recency` asks,
    /// at most `interval_ms` old), renewing this node's leases when due;
    /// answer with [`Session::bot_checked`].
    CheckBot { now_ms: u64, interval_ms: u64, recency: Recency },
    /// Shared store: delete the session's lease.
    FreeLease,
    /// Shared store: stop renewing the session's lease, without the
    /// database (it cannot be reached; the lease lapses by itself).
    ForgetLease,
    /// The session no longer counts against the bot's connection limit.
    FreeSlot,
}

/// What [`Session::poll`] has next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll {
    Effect(Effect),
    Send(GatewayOutput),
    /// Nothing now.
    Idle,
}

/// One read of the log, made durable: its frames in order, written one
/// after another into one buffer (`text`), each as `(seq, end)` where it
/// ends there; `full` when it stopped at the byte bound. One buffer, not a
/// `String` a frame: a replay's thousand frames held at once as separate
/// allocations cost the allocator more than framing them.
#[derive(Debug, Default)]
pub struct EventBatch {
    text: String,
    frames: Vec<(i64, usize)>,
    pub full: bool,
}

impl EventBatch {
    /// Appends the frame of one event; the bytes the batch's frames now hold.
    pub fn push_event(&mut self, seq: i64, kind: &str, data: &str) -> usize {
        crate::events::push_event(&mut self.text, EVENT_HEAD, seq, kind, data);
        self.frames.push((seq, self.text.len()));
        self.text.len()
    }

    /// Appends a whole frame (the tests' batches).
    #[cfg(test)]
    fn push_frame(&mut self, seq: i64, frame: &str) {
        self.text.push_str(frame);
        self.frames.push((seq, self.text.len()));
    }
}

/// What waits to be sent: a message, or the next frame of the event
/// batch being sent (`Session::sending`).
#[derive(Debug)]
enum Out {
    Message(GatewayOutput),
    Event,
}

/// Where a session starts, from the bot's log and the client's `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replay {
    pub from: i64,
    pub truncated: bool,
}

impl Replay {
    /// From the client's `after` (else the bot's durable ack), the last
    /// event ever written and the oldest one still kept.
    pub fn start(after: Option<i64>, acked: i64, last: i64, oldest: Option<i64>) -> Replay {
        let (from, truncated) = crate::events::read_from(after.unwrap_or(acked), last, oldest);
        Replay { from, truncated }
    }
}

/// On a shared store (PostgreSQL, several nodes): what the session checks
/// itself, since commits on other nodes wake nothing here.
#[derive(Debug)]
pub struct SharedCheck {
    pub poll_interval_ms: u64,
    pub next_check_ms: u64,
    /// SHA-256 of the token the session authenticated with.
    pub token_hash: [u8; 32],
    /// The lease row exists and must be deleted when the session ends.
    pub leased: bool,
    /// When the first of the checks failing in a row began.
    pub failing_since_ms: Option<u64>,
}

impl SharedCheck {
    pub fn new(poll_interval_ms: u64, token_hash: [u8; 32], now_ms: u64) -> SharedCheck {
        SharedCheck {
            poll_interval_ms,
            next_check_ms: now_ms + poll_interval_ms,
            token_hash,
            leased: true,
            failing_since_ms: None,
        }
    }
}

/// What a session starts from.
pub struct Start {
    pub session_id: String,
    /// The bot's `User` object, as JSON, for `hello`.
    pub identity_json: String,
    pub heartbeat_interval_ms: u64,
    pub replay: Replay,
    /// The registry as the session opened.
    pub view: View,
    pub now_ms: u64,
    /// `Some` on a shared store.
    pub shared: Option<SharedCheck>,
}

/// What a heartbeat is answered with: [`GatewayOp::HeartbeatAck`]
/// (`tests::frames_carry_the_ops_of_the_table`).
pub const HEARTBEAT_ACK: &str = "{\"op\":\"heartbeat_ack\"}";

/// The gateway protocol of one session.
pub struct Session {
    heartbeat_interval_ms: u64,
    session_id: String,
    identity_json: String,
    epoch: (u64, u64),
    /// Highest seq sent on this session.
    cursor: i64,
    replay: Replay,
    hello_sent: bool,
    last_heartbeat_ms: u64,
    /// The bot has sent a heartbeat on this session.
    heard_heartbeat: bool,
    /// More events are waiting beyond the last read batch.
    backlog: bool,
    /// A read failed this round: the next `poll` says `Idle` once, so a
    /// host's poll loop ends and the read is tried at its next round.
    read_failed: bool,
    /// The bot's commit counter when the log was last read.
    notified: u64,
    /// The bot's hint counter when the session last checked the database.
    hinted: u64,
    /// The latest time a host passed in: a check prompted by a hint (in
    /// `poll`, which takes no time) runs at this time.
    seen_ms: u64,
    /// The highest ack received and not yet written.
    pending_ack: Option<i64>,
    effects: VecDeque<Effect>,
    out: VecDeque<Out>,
    /// The frames of the read batches whose `Out::Event`s are queued, in
    /// order, and where the next one starts.
    sending: EventBatch,
    sent_to: usize,
    next_frame: usize,
    /// Bytes of the heartbeat acks in `out`: what the bot's input queued,
    /// which the connection's reply budget counts (event frames are
    /// bounded by the reads of the log instead).
    reply_bytes: usize,
    events: VecDeque<GatewayEvent>,
    closed: bool,
    /// Why the session ended, once it has.
    ended_with: Option<CloseCode>,
    shared: Option<SharedCheck>,
}

impl Session {
    pub fn new(s: Start) -> Session {
        Session {
            heartbeat_interval_ms: s.heartbeat_interval_ms,
            session_id: s.session_id,
            identity_json: s.identity_json,
            epoch: s.view.epoch,
            cursor: s.replay.from - 1,
            replay: s.replay,
            hello_sent: false,
            last_heartbeat_ms: s.now_ms,
            heard_heartbeat: false,
            backlog: true,
            read_failed: false,
            notified: s.view.notified,
            hinted: s.view.hinted,
            seen_ms: s.now_ms,
            pending_ack: None,
            effects: VecDeque::new(),
            out: VecDeque::new(),
            sending: EventBatch::default(),
            sent_to: 0,
            next_frame: 0,
            reply_bytes: 0,
            events: VecDeque::new(),
            closed: false,
            ended_with: None,
            shared: s.shared,
        }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// True once the session has ended and everything it had to send was
    /// taken.
    /// Why the session ended, once it has (for the metrics).
    pub fn ended_with(&self) -> Option<CloseCode> {
        self.ended_with
    }

    pub fn is_closed(&self) -> bool {
        self.closed && self.out.is_empty()
    }

    /// True once the session has ended (its close may still be queued).
    pub fn has_ended(&self) -> bool {
        self.closed
    }

    /// Bytes of the replies to the bot's input (heartbeat acks) queued and
    /// not yet taken.
    pub fn reply_bytes(&self) -> usize {
        self.reply_bytes
    }

    /// When a silent bot is closed with 4009: two intervals after its last
    /// heartbeat (or the start); and whether it has sent one at all.
    pub fn heartbeat_deadline(&self) -> (u64, bool) {
        (self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms, self.heard_heartbeat)
    }

    /// How long a connection's unsent output may stay over its budget
    /// before it is closed with 4008 `slow_consumer`: two heartbeat
    /// intervals, the time a silent bot is allowed (4009).
    pub fn slow_consumer_ms(&self) -> u64 {
        2 * self.heartbeat_interval_ms
    }

    // ---- inputs ----

    /// A text message from the bot, received at `now_ms`.
    pub fn handle_text(&mut self, text: &str, now_ms: u64) {
        if self.closed {
            return;
        }
        self.seen_ms = self.seen_ms.max(now_ms);
        let v: serde_json::Value = match serde_json::from_slice(text.as_bytes()) {
            Ok(v) => v,
            Err(_) => return self.close(CLOSE_INVALID_PAYLOAD),
        };
        match v.get("op").and_then(|o| o.as_str()).and_then(GatewayOp::parse) {
            // The ops only the server sends are as unknown as any other.
            Some(GatewayOp::Heartbeat) => {
                self.last_heartbeat_ms = now_ms;
                self.heard_heartbeat = true;
                self.reply_bytes += HEARTBEAT_ACK.len();
                self.out.push_back(Out::Message(GatewayOutput::Text(HEARTBEAT_ACK.into())));
            }
            // Acks are coalesced: the highest one is written once, at the
            // next `poll`, so an ack flood costs one commit per round.
            Some(GatewayOp::Ack) => match v.get("seq").and_then(|s| s.as_i64()) {
                Some(seq) if seq >= 0 => self.pending_ack = self.pending_ack.max(Some(seq)),
                _ => self.close(CLOSE_INVALID_PAYLOAD),
            },
            _ => self.close(CLOSE_INVALID_PAYLOAD),
        }
    }

    /// A binary message: the gateway speaks JSON text only.
    pub fn handle_binary(&mut self) {
        self.close(CLOSE_INVALID_PAYLOAD);
    }

    /// The bot closed the connection (with its close code, if it sent one).
    pub fn handle_close(&mut self, code: Option<u16>) {
        self.end(code.unwrap_or(1005), CloseCode::ClosedByBot);
    }

    /// Time has reached `now_ms`: the heartbeat deadline is checked, and on
    /// a shared store the bot's row when its check is due.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.seen_ms = self.seen_ms.max(now_ms);
        if !self.closed && now_ms > self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms {
            self.close(CLOSE_SESSION_TIMEOUT);
        }
        if !self.closed && self.shared.as_ref().is_some_and(|s| now_ms >= s.next_check_ms) {
            self.check_bot(now_ms, Recency::Interval);
        }
    }

    /// Ends the session now with a close frame `code`: what was queued and
    /// not yet taken is dropped (the bot resumes from its ack). False when
    /// it had already ended.
    pub fn close_now(&mut self, reason: CloseCode) -> bool {
        if self.closed {
            return false;
        }
        self.out.clear();
        self.drop_events();
        self.reply_bytes = 0;
        self.close(reason);
        true
    }

    /// The session goes away without a close (its host dropped it): the
    /// ack it received is still written and its lease freed.
    pub fn abandon(&mut self) {
        if let Some(seq) = self.pending_ack.take() {
            self.effects.push_back(Effect::WriteAck(seq));
        }
        self.free_lease();
    }

    // ---- outputs ----

    /// The next effect to carry out or message to send. `view` is the
    /// registry as it is now (the bot's epoch and counters).
    pub fn poll(&mut self, view: View) -> Poll {
        if let Some(p) = self.next_queued() {
            return p;
        }
        if self.closed {
            return Poll::Idle;
        }
        if std::mem::take(&mut self.read_failed) {
            return Poll::Idle;
        }
        if view.hinted != self.hinted && self.shared.is_some() {
            // Another node said it committed something for this bot: look
            // at the bot's row now (a hint only; the database decides).
            self.hinted = view.hinted;
            self.check_bot(self.seen_ms, Recency::Hint);
            return self.poll(view);
        }
        if view.epoch != self.epoch {
            self.close(CLOSE_AUTHENTICATION_FAILED);
            return self.poll(view);
        }
        if let Some(seq) = self.pending_ack.take() {
            return Poll::Effect(Effect::WriteAck(seq));
        }
        if !self.hello_sent {
            self.hello_sent = true;
            let hello = format!(
                "{{\"op\":\"{}\",\"session_id\":\"{}\",\"heartbeat_interval_ms\":{},\"bot\":{},\"replay_from\":{},\"replay_truncated\":{}}}",
                GatewayOp::Hello,
                self.session_id,
                self.heartbeat_interval_ms, self.identity_json, self.replay.from, self.replay.truncated
            );
            return Poll::Send(GatewayOutput::Text(hello));
        }
        if self.backlog || view.notified != self.notified {
            // Take the counter before the read: an event committed meanwhile
            // bumps it again and is read on the next round.
            self.notified = view.notified;
            self.backlog = false;
            return Poll::Effect(Effect::ReadEvents {
                after: self.cursor,
                limit: EVENTS_PER_POLL,
                max_bytes: READ_BYTES,
            });
        }
        Poll::Idle
    }

    /// What is queued already (an effect, then a message), without the
    /// registry's view: a driver's poll loop takes this first, so a long
    /// replay does not look at the registry once per frame.
    pub fn next_queued(&mut self) -> Option<Poll> {
        if let Some(e) = self.effects.pop_front() {
            return Some(Poll::Effect(e));
        }
        let o = match self.out.pop_front()? {
            Out::Message(o) => o,
            Out::Event => {
                // A `String` of exactly the frame's length: tungstenite
                // takes it as its payload without another allocation.
                let (_, end) = self.sending.frames[self.next_frame];
                let frame = self.sending.text[self.sent_to..end].to_string();
                self.next_frame += 1;
                self.sent_to = end;
                if self.next_frame == self.sending.frames.len() {
                    self.drop_events();
                }
                return Some(Poll::Send(GatewayOutput::Text(frame)));
            }
        };
        if matches!(&o, GatewayOutput::Text(t) if t == HEARTBEAT_ACK) {
            self.reply_bytes -= HEARTBEAT_ACK.len();
        }
        Some(Poll::Send(o))
    }

    /// The next effect an input queued, without looking for messages:
    /// what a driver runs right after an input (an end's ack and frees).
    pub fn take_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When `handle_timeout` must be called at the latest (Unix ms): the
    /// first instant the heartbeat deadline has passed, or the next check
    /// of a shared store. `None` once closed.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        let heartbeat = self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms + 1;
        Some(self.shared.as_ref().map_or(heartbeat, |s| heartbeat.min(s.next_check_ms)))
    }

    /// What happened to the session: `Closed` once, when it ends.
    pub fn poll_event(&mut self) -> Option<GatewayEvent> {
        self.events.pop_front()
    }

    // ---- results of effects ----

    /// What [`Effect::WriteAck`] found: `Some(true)` written, `Some(false)`
    /// the seq is beyond the last event the bot was given (4001), `None`
    /// storage trouble (not recorded; the bot may ack again).
    pub fn ack_written(&mut self, applied: Option<bool>) {
        if applied == Some(false) {
            self.close(CLOSE_INVALID_PAYLOAD);
        }
    }

    /// What [`Effect::ReadEvents`] read, durable; `None` on storage
    /// trouble (the cursor stays; the read is tried again next round).
    pub fn events_read(&mut self, batch: Option<EventBatch>) {
        let Some(batch) = batch else {
            self.backlog = true;
            self.read_failed = true;
            return;
        };
        if self.closed {
            return;
        }
        let n = batch.frames.len();
        let more = batch.full || n == EVENTS_PER_POLL;
        if let Some(&(seq, _)) = batch.frames.last() {
            self.cursor = seq;
        }
        self.out.extend((0..n).map(|_| Out::Event));
        if self.sending.frames.is_empty() {
            // Nothing of an earlier batch waits: this one's buffer is taken as it is.
            self.sending = batch;
        } else {
            let base = self.sending.text.len();
            self.sending.text.push_str(&batch.text);
            self.sending.frames.extend(batch.frames.iter().map(|&(seq, end)| (seq, base + end)));
        }
        self.backlog = more;
    }

    /// What [`Effect::CheckBot`] found at `now_ms`: `None` on storage
    /// trouble, `Some(None)` when the bot is gone. Whether another node
    /// rotated the token or suspended the bot (4004), committed events for
    /// it (read at the next `poll`), or the database stayed out of reach
    /// too long (4010).
    pub fn bot_checked(&mut self, now_ms: u64, recency: Recency, row: Option<Option<BotRow>>) {
        let Some(sh) = self.shared.as_mut() else { return };
        if self.closed {
            return;
        }
        let token_hash = sh.token_hash;
        let revoked = |r: &Option<Option<BotRow>>| match r {
            Some(None) => true,
            Some(Some(b)) => b.token_hash[..] != token_hash[..] || !b.active,
            None => false,
        };
        if revoked(&row) && recency != Recency::Now {
            // The view may predate this session's token: look again first.
            let interval_ms = sh.poll_interval_ms;
            self.effects.push_back(Effect::CheckBot { now_ms, interval_ms, recency: Recency::Now });
            return;
        }
        sh.failing_since_ms = match row {
            None => Some(sh.failing_since_ms.unwrap_or(now_ms)),
            Some(_) => None,
        };
        if sh.failing_since_ms.is_some_and(|since| now_ms >= since + STORAGE_CLOSE_AFTER_MS) {
            // Closing must not wait on the database it cannot reach: the
            // lease lapses by itself, and an ack not recorded is sent
            // again by the bot after it reconnects.
            sh.leased = false;
            self.effects.push_back(Effect::ForgetLease);
            self.pending_ack = None;
            self.close(CLOSE_STORAGE_UNAVAILABLE);
            return;
        }
        match row {
            Some(_) if revoked(&row) => self.close(CLOSE_AUTHENTICATION_FAILED),
            Some(Some(b)) if b.last_seq > self.cursor => self.backlog = true,
            // Storage trouble (the database restarting, this node's
            // connection being reopened): look again within a second, not a
            // whole interval, so what other nodes commit once it is back
            // is not held up by a long poll interval.
            None => sh.next_check_ms = now_ms + sh.poll_interval_ms.min(1000),
            // Nothing new: the next check.
            _ => {}
        }
    }

    // ---- internals ----

    fn check_bot(&mut self, now_ms: u64, recency: Recency) {
        if let Some(sh) = self.shared.as_mut() {
            sh.next_check_ms = now_ms + sh.poll_interval_ms;
            let interval_ms = sh.poll_interval_ms;
            self.effects.push_back(Effect::CheckBot { now_ms, interval_ms, recency });
        }
    }

    /// Queues a close frame and ends the session.
    pub(super) fn close(&mut self, reason: CloseCode) {
        // Every reason the library closes with has its code; only the
        // bot's own close has none, and that one sends nothing back.
        let Some(code) = reason.code() else { return self.end(1005, reason) };
        if !self.closed {
            self.out.push_back(Out::Message(GatewayOutput::Close { code, reason }));
            self.end(code, reason);
        }
    }

    /// Ends the session without sending anything more: the ack received
    /// before still counts, the lease and the slot are freed, and why is
    /// reported.
    pub(super) fn end(&mut self, code: u16, reason: CloseCode) {
        if !self.closed {
            self.abandon();
            self.closed = true;
            self.effects.push_back(Effect::FreeSlot);
            self.events.push_back(GatewayEvent::Closed { code, reason });
            self.ended_with = Some(reason);
        }
    }

    /// Forgets the event frames not sent (their `Out::Event`s are gone).
    fn drop_events(&mut self) {
        self.sending = EventBatch::default();
        (self.sent_to, self.next_frame) = (0, 0);
    }

    fn free_lease(&mut self) {
        if let Some(sh) = self.shared.as_mut().filter(|s| s.leased) {
            sh.leased = false;
            self.effects.push_back(Effect::FreeLease);
        }
    }
}

/// The head of an event frame: [`GatewayOp::Event`].
const EVENT_HEAD: &str = "{\"op\":\"event\",\"seq\":";

/// The frame of one event, built straight from the row's text (the data is
/// stored as JSON already), as [`EventBatch::push_event`] writes it.
#[cfg(test)]
pub fn event_frame(seq: i64, kind: &str, data: &str) -> String {
    let mut frame = String::with_capacity(40 + kind.len() + data.len());
    crate::events::push_event(&mut frame, EVENT_HEAD, seq, kind, data);
    frame
}

/// The protocol alone: inputs and `now` in, effects and messages out, no
/// database anywhere.
#[cfg(test)]
mod tests {
    use super::*;

    const HB: u64 = 1000;

    #[test]
    fn frames_carry_the_ops_of_the_table() {
        let op =
            |frame: &str| serde_json::from_str::<serde_json::Value>(frame).unwrap()["op"].as_str().map(str::to_string);
        assert_eq!(op(HEARTBEAT_ACK).as_deref(), Some(GatewayOp::HeartbeatAck.as_str()));
        assert_eq!(op(&event_frame(1, "blocked", "{}")).as_deref(), Some(GatewayOp::Event.as_str()));
    }

    fn start(shared: Option<SharedCheck>) -> Session {
        Session::new(Start {
            session_id: "gws_1".into(),
            identity_json: "{\"id\":\"b1\"}".into(),
            heartbeat_interval_ms: HB,
            replay: Replay { from: 5, truncated: false },
            view: View::default(),
            now_ms: 0,
            shared,
        })
    }

    fn text(s: &str) -> Poll {
        Poll::Send(GatewayOutput::Text(s.into()))
    }

    fn close(code: u16, reason: CloseCode) -> Poll {
        Poll::Send(GatewayOutput::Close { code, reason })
    }

    fn read_after(after: i64) -> Poll {
        Poll::Effect(Effect::ReadEvents { after, limit: EVENTS_PER_POLL, max_bytes: READ_BYTES })
    }

    fn batch(seqs: &[i64]) -> Option<EventBatch> {
        let mut b = EventBatch::default();
        for &s in seqs {
            b.push_event(s, "message", "{}");
        }
        Some(b)
    }

    /// Past the hello and the first (empty) read.
    fn opened(shared: Option<SharedCheck>) -> Session {
        let mut s = start(shared);
        assert!(matches!(s.poll(View::default()), Poll::Send(GatewayOutput::Text(_))));
        assert_eq!(s.poll(View::default()), read_after(4));
        s.events_read(batch(&[]));
        assert_eq!(s.poll(View::default()), Poll::Idle);
        s
    }

    #[test]
    fn hello_comes_first_then_the_log_is_read_after_the_replay_point() {
        let mut s = start(None);
        assert_eq!(
            s.poll(View::default()),
            text("{\"op\":\"hello\",\"session_id\":\"gws_1\",\"heartbeat_interval_ms\":1000,\"bot\":{\"id\":\"b1\"},\"replay_from\":5,\"replay_truncated\":false}")
        );
        assert_eq!(s.poll(View::default()), read_after(4));
        s.events_read(batch(&[5, 6]));
        assert_eq!(s.poll(View::default()), text("{\"op\":\"event\",\"seq\":5,\"type\":\"message\",\"data\":{}}"));
        assert_eq!(s.poll(View::default()), text("{\"op\":\"event\",\"seq\":6,\"type\":\"message\",\"data\":{}}"));
        assert_eq!(s.poll(View::default()), Poll::Idle);
        // A commit for the bot moves its counter: the next read starts after 6.
        let woken = View { notified: 1, ..View::default() };
        assert_eq!(s.poll(woken), read_after(6));
        s.events_read(batch(&[]));
        assert_eq!(s.poll(woken), Poll::Idle);
    }

    #[test]
    fn a_full_read_reads_again_without_a_wake_up() {
        let mut s = opened(None);
        let woken = View { notified: 1, ..View::default() };
        assert_eq!(s.poll(woken), read_after(4));
        let mut full = EventBatch { full: true, ..EventBatch::default() };
        full.push_frame(5, "f5");
        s.events_read(Some(full));
        assert_eq!(s.poll(woken), text("f5"));
        assert_eq!(s.poll(woken), read_after(5));
    }

    #[test]
    fn a_failed_read_keeps_the_cursor_and_is_tried_at_the_next_round() {
        let mut s = opened(None);
        let woken = View { notified: 1, ..View::default() };
        assert_eq!(s.poll(woken), read_after(4));
        s.events_read(None);
        // This round ends; nothing was sent.
        assert_eq!(s.poll(woken), Poll::Idle);
        assert_eq!(s.poll(woken), read_after(4));
    }

    #[test]
    fn acks_are_coalesced_into_one_write_before_the_next_read() {
        let mut s = opened(None);
        s.handle_text("{\"op\":\"ack\",\"seq\":3}", 10);
        s.handle_text("{\"op\":\"ack\",\"seq\":7}", 10);
        s.handle_text("{\"op\":\"ack\",\"seq\":5}", 10);
        assert_eq!(s.poll(View::default()), Poll::Effect(Effect::WriteAck(7)));
        s.ack_written(Some(true));
        assert_eq!(s.poll(View::default()), Poll::Idle);
    }

    #[test]
    fn an_ack_beyond_the_last_event_closes_with_4001() {
        let mut s = opened(None);
        s.handle_text("{\"op\":\"ack\",\"seq\":99}", 10);
        assert_eq!(s.poll(View::default()), Poll::Effect(Effect::WriteAck(99)));
        s.ack_written(Some(false));
        assert_eq!(s.poll(View::default()), Poll::Effect(Effect::FreeSlot));
        assert_eq!(s.poll(View::default()), close(4001, CloseCode::InvalidPayload));
        assert_eq!(s.poll_event(), Some(GatewayEvent::Closed { code: 4001, reason: CloseCode::InvalidPayload }));
        assert!(s.is_closed());
        assert_eq!(s.poll(View::default()), Poll::Idle);
    }

    #[test]
    fn an_ack_that_storage_did_not_take_changes_nothing() {
        let mut s = opened(None);
        s.handle_text("{\"op\":\"ack\",\"seq\":4}", 10);
        assert_eq!(s.poll(View::default()), Poll::Effect(Effect::WriteAck(4)));
        s.ack_written(None);
        assert_eq!(s.poll(View::default()), Poll::Idle);
        assert!(!s.has_ended());
    }

    #[test]
    fn bad_payloads_close_with_4001() {
        for input in ["not json", "{\"op\":\"dance\"}", "{\"op\":\"ack\",\"seq\":-1}", "{\"op\":\"ack\"}"] {
            let mut s = opened(None);
            s.handle_text(input, 10);
            assert_eq!(s.take_effect(), Some(Effect::FreeSlot), "{input}");
            assert_eq!(s.poll(View::default()), close(4001, CloseCode::InvalidPayload), "{input}");
        }
        let mut s = opened(None);
        s.handle_binary();
        assert_eq!(s.take_effect(), Some(Effect::FreeSlot));
        assert_eq!(s.poll(View::default()), close(4001, CloseCode::InvalidPayload));
    }

    #[test]
    fn heartbeats_are_answered_and_their_absence_closes_with_4009() {
        let mut s = opened(None);
        assert_eq!(s.poll_timeout(), Some(2 * HB + 1));
        s.handle_text("{\"op\":\"heartbeat\"}", 500);
        assert_eq!(s.poll(View::default()), text("{\"op\":\"heartbeat_ack\"}"));
        assert_eq!(s.poll_timeout(), Some(500 + 2 * HB + 1));
        s.handle_timeout(500 + 2 * HB);
        assert!(!s.has_ended());
        s.handle_timeout(500 + 2 * HB + 1);
        assert_eq!(s.take_effect(), Some(Effect::FreeSlot));
        assert_eq!(s.poll(View::default()), close(4009, CloseCode::SessionTimeout));
        assert_eq!(s.poll_event(), Some(GatewayEvent::Closed { code: 4009, reason: CloseCode::SessionTimeout }));
        assert_eq!(s.poll_event(), None);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn heartbeat_acks_count_as_replies_until_taken_or_dropped_by_a_host_close() {
        let mut s = opened(None);
        assert_eq!(s.slow_consumer_ms(), 2 * HB);
        for _ in 0..3 {
            s.handle_text("{\"op\":\"heartbeat\"}", 10);
        }
        assert_eq!(s.reply_bytes(), 3 * HEARTBEAT_ACK.len());
        assert_eq!(s.poll(View::default()), text(HEARTBEAT_ACK));
        assert_eq!(s.reply_bytes(), 2 * HEARTBEAT_ACK.len());
        // Event frames are not replies: they are bounded by the log reads.
        let woken = View { notified: 1, ..View::default() };
        assert_eq!(s.poll(woken), text(HEARTBEAT_ACK));
        assert_eq!(s.poll(woken), text(HEARTBEAT_ACK));
        assert_eq!(s.poll(woken), read_after(4));
        s.events_read(batch(&[5]));
        s.handle_text("{\"op\":\"heartbeat\"}", 10);
        assert_eq!(s.reply_bytes(), HEARTBEAT_ACK.len());
        assert!(s.close_now(CloseCode::SlowConsumer));
        assert_eq!(s.reply_bytes(), 0);
    }

    #[test]
    fn a_bot_close_writes_the_ack_it_sent_before_and_frees_the_slot() {
        let mut s = opened(None);
        s.handle_text("{\"op\":\"ack\",\"seq\":4}", 10);
        s.handle_close(Some(1000));
        assert_eq!(s.take_effect(), Some(Effect::WriteAck(4)));
        assert_eq!(s.take_effect(), Some(Effect::FreeSlot));
        assert_eq!(s.take_effect(), None);
        assert_eq!(s.poll_event(), Some(GatewayEvent::Closed { code: 1000, reason: CloseCode::ClosedByBot }));
        // No close frame answers the bot's (tungstenite replies itself).
        assert_eq!(s.poll(View::default()), Poll::Idle);
        assert!(s.is_closed());
    }

    #[test]
    fn a_revoked_epoch_closes_with_4004() {
        let mut s = opened(None);
        let revoked = View { epoch: (0, 1), ..View::default() };
        assert_eq!(s.poll(revoked), Poll::Effect(Effect::FreeSlot));
        assert_eq!(s.poll(revoked), close(4004, CloseCode::AuthenticationFailed));
    }

    #[test]
    fn a_host_close_goes_ahead_of_queued_frames_and_once() {
        let mut s = opened(None);
        let woken = View { notified: 1, ..View::default() };
        assert_eq!(s.poll(woken), read_after(4));
        s.events_read(batch(&[5, 6]));
        s.handle_text("{\"op\":\"ack\",\"seq\":4}", 10);
        assert!(s.close_now(CloseCode::SlowConsumer));
        assert!(!s.close_now(CloseCode::SlowConsumer));
        assert_eq!(s.poll(woken), Poll::Effect(Effect::WriteAck(4)));
        assert_eq!(s.poll(woken), Poll::Effect(Effect::FreeSlot));
        assert_eq!(s.poll(woken), close(4008, CloseCode::SlowConsumer));
        assert_eq!(s.poll(woken), Poll::Idle);
        assert_eq!(s.poll_event(), Some(GatewayEvent::Closed { code: 4008, reason: CloseCode::SlowConsumer }));
    }

    #[test]
    fn replay_starts_at_the_oldest_kept_event_when_older_ones_are_gone() {
        assert_eq!(Replay::start(None, 3, 10, Some(1)), Replay { from: 4, truncated: false });
        assert_eq!(Replay::start(Some(7), 3, 10, Some(1)), Replay { from: 8, truncated: false });
        assert_eq!(Replay::start(None, 3, 10, Some(6)), Replay { from: 6, truncated: true });
        // Every event pruned: the replay starts after the last one.
        assert_eq!(Replay::start(None, 3, 10, None), Replay { from: 11, truncated: true });
        // An `after` past the last event starts after the last one.
        assert_eq!(Replay::start(Some(50), 3, 10, Some(1)), Replay { from: 11, truncated: false });
        assert_eq!(Replay::start(None, 10, 10, None), Replay { from: 11, truncated: false });
    }

    fn row(last_seq: i64, hash: [u8; 32], active: bool) -> Option<Option<BotRow>> {
        Some(Some(BotRow { last_seq, token_hash: hash.to_vec(), active }))
    }

    #[test]
    fn shared_store_checks_are_due_by_the_interval_and_find_other_nodes_events() {
        let mut s = opened(Some(SharedCheck::new(50, [7; 32], 0)));
        assert_eq!(s.poll_timeout(), Some(50));
        s.handle_timeout(49);
        assert_eq!(s.take_effect(), None);
        s.handle_timeout(50);
        let check = Effect::CheckBot { now_ms: 50, interval_ms: 50, recency: Recency::Interval };
        assert_eq!(s.take_effect(), Some(check));
        assert_eq!(s.poll_timeout(), Some(100));
        s.bot_checked(50, Recency::Interval, row(9, [7; 32], true));
        assert_eq!(s.poll(View::default()), read_after(4));
    }

    #[test]
    fn shared_store_revocation_is_read_again_then_closes_with_4004_and_frees_the_lease() {
        let mut s = opened(Some(SharedCheck::new(50, [7; 32], 0)));
        s.handle_timeout(50);
        s.take_effect();
        s.bot_checked(50, Recency::Interval, row(4, [8; 32], true));
        let again = Effect::CheckBot { now_ms: 50, interval_ms: 50, recency: Recency::Now };
        assert_eq!(s.take_effect(), Some(again));
        assert!(!s.has_ended());
        s.bot_checked(50, Recency::Now, row(4, [8; 32], true));
        assert_eq!(s.take_effect(), Some(Effect::FreeLease));
        assert_eq!(s.take_effect(), Some(Effect::FreeSlot));
        assert_eq!(s.poll(View::default()), close(4004, CloseCode::AuthenticationFailed));
    }

    #[test]
    fn a_hint_checks_the_bot_at_the_last_time_seen() {
        let mut s = opened(Some(SharedCheck::new(50, [7; 32], 0)));
        s.handle_text("{\"op\":\"heartbeat\"}", 30);
        assert_eq!(s.poll(View::default()), text("{\"op\":\"heartbeat_ack\"}"));
        let hinted = View { hinted: 1, ..View::default() };
        let check = Effect::CheckBot { now_ms: 30, interval_ms: 50, recency: Recency::Hint };
        assert_eq!(s.poll(hinted), Poll::Effect(check));
        s.bot_checked(30, Recency::Hint, row(4, [7; 32], true));
        assert_eq!(s.poll(hinted), Poll::Idle);
    }

    #[test]
    fn shared_store_unreachable_for_half_a_lease_closes_with_4010_without_the_database() {
        let mut s = opened(Some(SharedCheck::new(50, [7; 32], 0)));
        s.handle_text("{\"op\":\"ack\",\"seq\":4}", 10);
        s.bot_checked(100, Recency::Interval, None);
        // Storage trouble: the next look comes within a second (here the 50 ms interval).
        assert_eq!(s.poll_timeout(), Some(150));
        s.bot_checked(100 + STORAGE_CLOSE_AFTER_MS - 1, Recency::Interval, None);
        assert!(!s.has_ended());
        s.bot_checked(100 + STORAGE_CLOSE_AFTER_MS, Recency::Interval, None);
        // The lease is forgotten, not deleted, and the ack is not written.
        assert_eq!(s.take_effect(), Some(Effect::ForgetLease));
        assert_eq!(s.take_effect(), Some(Effect::FreeSlot));
        assert_eq!(s.take_effect(), None);
        assert_eq!(s.poll(View::default()), close(4010, CloseCode::StorageUnavailable));
        // Dropping it afterwards frees nothing twice.
        s.abandon();
        assert_eq!(s.take_effect(), None);
    }

    #[test]
    fn abandoning_writes_the_pending_ack_and_frees_the_lease_once() {
        let mut s = opened(Some(SharedCheck::new(50, [7; 32], 0)));
        s.handle_text("{\"op\":\"ack\",\"seq\":4}", 10);
        s.abandon();
        assert_eq!(s.take_effect(), Some(Effect::WriteAck(4)));
        assert_eq!(s.take_effect(), Some(Effect::FreeLease));
        s.abandon();
        assert_eq!(s.take_effect(), None);
    }
}
