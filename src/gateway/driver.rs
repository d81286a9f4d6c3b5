//! [`GatewaySession`]: the protocol state machine ([`super::session`]) and
//! the one place its effects are carried out — the bot's log read and made
//! durable, acks written, the bot's row checked, leases and slots taken and
//! freed — through `crate::store::gateway` and the registry. The results go
//! back into the machine before it is polled again.
//!
//! Calls here block on what their effects need: the database lock, a
//! query (a round trip on PostgreSQL), and before frames leave, the WAL
//! sync of the commits they carry (docs/architecture.md, "The I/O
//! boundary").

use super::registry::{Registry, Slot};
use super::session::{Effect, EventBatch, Poll, Replay, Session, SharedCheck, Start};
use super::{GatewayEvent, GatewayOutput, LEASE_TTL_MS};
use crate::error::{ApiError, ApiResult};
use crate::http::Request;
use crate::log::{Event, Level};
use crate::model::Bot;
use crate::protocol::CloseCode;
use crate::random::Random;
use crate::store::gateway::{self as store, Lease};
use crate::store::Conn;
use crate::txn::Db;
use std::sync::Arc;

/// A gateway session on whole messages: the protocol and its driver.
/// Dropping it frees its connection slot (and writes the ack it received).
pub struct GatewaySession {
    state: Session,
    bot_id: String,
    db: Arc<Db>,
    registry: Arc<Registry>,
    /// `None` once the session no longer counts against the limit.
    slot: Option<Slot>,
    /// The service's clock, the session's time: a host that keeps only its
    /// own monotonic clock ([`super::GatewayLink`]) reads the session's
    /// time here.
    clock: crate::clock::Clock,
}

/// Where a new session starts: the service has authenticated `bot` (with
/// the database lock held, passed as `conn`).
pub(crate) struct Opening<'a> {
    pub db: &'a Arc<Db>,
    pub registry: &'a Arc<Registry>,
    pub conn: &'a Conn,
    pub random: &'a Random,
    pub heartbeat_interval_ms: u64,
    /// How often a session on a shared store re-reads the bot's row.
    pub poll_interval_ms: u64,
    /// SHA-256 of the token the session authenticated with.
    pub token_hash: [u8; 32],
    pub now_ms: u64,
    pub clock: &'a crate::clock::Clock,
}

fn parse_after(query: &str) -> ApiResult<Option<i64>> {
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("after=") {
            return match v.parse::<i64>() {
                Ok(n) if n >= 0 => Ok(Some(n)),
                _ => Err(ApiError::invalid_field("after", "must be a non-negative integer")),
            };
        }
    }
    Ok(None)
}

impl GatewaySession {
    /// Runs the upgrade checks as it takes a slot (and on a shared store a
    /// lease) and reads where the replay starts. A failure after the slot
    /// was taken frees it (RAII).
    pub(crate) fn open(at: Opening<'_>, req: &Request<'_>, bot: &Bot) -> ApiResult<GatewaySession> {
        let slot = at.registry.admit(bot, crate::rules::gateway::is_websocket_upgrade(req))?;
        // Fields come after status, upgrade and limit (docs/errors.md, check order).
        let after = parse_after(req.query)?;
        let session_id = crate::auth::new_id(at.random, "gws_")?;
        let shared = if at.conn.is_shared() {
            let expires = at.now_ms + LEASE_TTL_MS;
            match store::take_lease(at.conn, &bot.id, &session_id, bot.connection_limit, at.now_ms, expires)? {
                Lease::Taken => {}
                Lease::Full { open } => return Err(ApiError::connection_limit(open, bot.connection_limit)),
            }
            at.registry.add_lease(&session_id, &bot.id, at.now_ms);
            // Leases are renewed by these checks: at least twice per TTL,
            // however long the configured interval.
            Some(SharedCheck::new(at.poll_interval_ms.min(LEASE_TTL_MS / 2), at.token_hash, at.now_ms))
        } else {
            None
        };
        let b = store::log_bounds(at.conn, &bot.id)?;
        let state = Session::new(Start {
            session_id,
            identity_json: bot.identity_json.clone(),
            heartbeat_interval_ms: at.heartbeat_interval_ms,
            replay: Replay::start(after, b.acked, b.last, b.oldest),
            view: at.registry.view(&bot.id),
            now_ms: at.now_ms,
            shared,
        });
        Ok(GatewaySession {
            state,
            bot_id: bot.id.clone(),
            db: at.db.clone(),
            registry: at.registry.clone(),
            slot: Some(slot),
            clock: at.clock.clone(),
        })
    }

    pub fn bot_id(&self) -> &str {
        &self.bot_id
    }

    pub fn session_id(&self) -> &str {
        self.state.session_id()
    }

    /// True once the session has ended: after the last `poll_transmit`
    /// output nothing more will be sent.
    pub fn is_closed(&self) -> bool {
        self.state.is_closed()
    }

    /// The service's clock, which the session's deadlines run on.
    pub(crate) fn clock(&self) -> &crate::clock::Clock {
        &self.clock
    }

    pub(super) fn has_ended(&self) -> bool {
        self.state.has_ended()
    }

    /// Bytes of heartbeat acks queued and not yet taken.
    pub(super) fn reply_bytes(&self) -> usize {
        self.state.reply_bytes()
    }

    /// The 4009 deadline, and whether the bot has heartbeated at all.
    pub(super) fn heartbeat_deadline(&self) -> (u64, bool) {
        self.state.heartbeat_deadline()
    }

    /// How long output may stay over the budget before 4008: two
    /// heartbeat intervals.
    pub fn slow_consumer_ms(&self) -> u64 {
        self.state.slow_consumer_ms()
    }

    // ---- inputs ----

    /// A text message from the bot, received at `now_ms`.
    pub fn handle_text(&mut self, text: &str, now_ms: u64) {
        self.state.handle_text(text, now_ms);
        self.run_effects();
    }

    /// A binary message: the gateway speaks JSON text only.
    pub fn handle_binary(&mut self) {
        self.state.handle_binary();
        self.run_effects();
    }

    /// The bot closed the connection (with its close code, if it sent one).
    pub fn handle_close(&mut self, code: Option<u16>) {
        self.state.handle_close(code);
        self.run_effects();
    }

    /// Time has reached `now_ms`: the heartbeat deadline is checked (and on
    /// a shared store, when due, the bot's row).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.state.handle_timeout(now_ms);
        self.run_effects();
    }

    /// The host ends the session with `code`, one of
    /// [`super::HOST_CLOSE_CODES`] (4008 `slow_consumer` for a bot that
    /// reads too slowly): the next `poll_transmit` returns the close,
    /// ahead of anything queued and not yet taken, which is dropped (the
    /// bot resumes from its ack). The ack it received is written, its slot
    /// freed, and `poll_event` reports `Closed` with the code's reason.
    /// False, changing nothing, when the code is not a host's or the
    /// session has already ended.
    pub fn close(&mut self, code: super::CloseCode) -> bool {
        if !super::HOST_CLOSE_CODES.contains(&code) {
            return false;
        }
        let closed = self.state.close_now(code);
        self.run_effects();
        closed
    }

    /// The library closes with one of its own codes (a connection's
    /// framing errors).
    pub(super) fn close_with(&mut self, reason: super::CloseCode) {
        self.state.close(reason);
        self.run_effects();
    }

    /// Ends without a close frame (the connection's bytes broke the
    /// protocol).
    pub(super) fn end(&mut self, code: u16, reason: super::CloseCode) {
        self.state.end(code, reason);
        self.run_effects();
    }

    // ---- outputs ----

    /// The next message to send, or `None` when there is nothing now. Call
    /// it after every input, after a wake-up for this bot, and until it
    /// returns `None`. It writes the pending ack and reads the bot's event
    /// log when new events were committed (at most `EVENTS_PER_POLL` rows
    /// or `READ_BYTES` of frames per read), so memory stays bounded however
    /// far behind the bot is.
    pub fn poll_transmit(&mut self) -> Option<GatewayOutput> {
        loop {
            let next = match self.state.next_queued() {
                Some(p) => p,
                None => self.state.poll(self.registry.view(&self.bot_id)),
            };
            match next {
                Poll::Send(o) => return Some(o),
                Poll::Idle => return None,
                Poll::Effect(e) => self.carry_out(e),
            }
        }
    }

    /// When `handle_timeout` must be called at the latest (Unix ms): the
    /// first instant the heartbeat deadline has passed. `None` once closed.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.state.poll_timeout()
    }

    /// What happened to the session: `Closed` once, when it ends.
    pub fn poll_event(&mut self) -> Option<GatewayEvent> {
        self.state.poll_event()
    }

    // ---- the effects ----

    /// Carries out the effects an input queued (an end's ack and frees, a
    /// due check). Messages stay queued for `poll_transmit`.
    fn run_effects(&mut self) {
        while let Some(e) = self.state.take_effect() {
            self.carry_out(e);
        }
    }

    fn carry_out(&mut self, e: Effect) {
        match e {
            Effect::WriteAck(seq) => {
                let written = store::write_ack(&self.db.lock().conn, &self.bot_id, seq).ok();
                self.state.ack_written(written);
            }
            Effect::ReadEvents { after, limit, max_bytes } => {
                let batch = self.read_events(after, limit, max_bytes);
                self.state.events_read(batch);
            }
            Effect::CheckBot { now_ms, interval_ms, recency } => {
                let row = self.registry.shared_row(&self.db, &self.bot_id, now_ms, interval_ms, recency);
                self.state.bot_checked(now_ms, recency, row);
            }
            Effect::FreeLease => {
                self.registry.remove_lease(self.state.session_id());
                let _ = store::free_lease(&self.db.lock().conn, self.state.session_id());
            }
            Effect::ForgetLease => self.registry.remove_lease(self.state.session_id()),
            Effect::FreeSlot => {
                // A session ends once: its one FreeSlot counts the reason.
                if let (Some(_), Some(reason)) = (&self.slot, self.state.ended_with()) {
                    self.registry.note_close(reason);
                    if reason == CloseCode::SlowConsumer {
                        self.registry.log.emit(
                            Event::new(Level::Warn, "gateway_slow_consumer", "gateway session closed: slow consumer")
                                .with("bot_id", self.bot_id.as_str())
                                .with("close_code", 4008),
                        );
                    }
                }
                self.slot = None;
            }
        }
    }

    /// One read of the log, returned only once durable: frames leave only
    /// once the commits they carry are on disk (crate::store::wal). `None`
    /// on storage trouble or a failed sync; the cursor then stays.
    fn read_events(&self, after: i64, limit: usize, max_bytes: usize) -> Option<EventBatch> {
        let inner = self.db.lock();
        let mut batch = EventBatch::default();
        let read = store::read_events_after(&inner.conn, &self.bot_id, after, limit, |seq, kind, data| {
            batch.full = batch.push_event(seq, kind, data) >= max_bytes;
            !batch.full
        });
        let seen = self.db.wal.as_ref().map(|w| (w, w.seen()));
        drop(inner);
        read.ok()?;
        if let Some((wal, seen)) = seen {
            wal.sync_to(seen).ok()?;
        }
        Some(batch)
    }
}

impl Drop for GatewaySession {
    /// A host may drop a session right after its last input: the acks in
    /// that input are still written, and its lease freed.
    fn drop(&mut self) {
        self.state.abandon();
        self.run_effects();
    }
}
