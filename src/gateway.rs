//! The bot gateway (docs/gateway.md). The host owns the socket and the
//! clock; the session reads and writes the database (docs/architecture.md,
//! "The I/O boundary").
//!
//! [`GatewaySession`] is the protocol on whole text messages — what an edge
//! runtime that does its own WebSocket framing needs. [`GatewayConnection`]
//! wraps a session in tungstenite's `WebSocketContext` over in-memory
//! buffers for hosts that own a raw TCP socket: feed it what you read, write
//! what `poll` returns.

use crate::error::{ApiError, ApiResult};
use crate::http::Request;
use crate::model::Bot;
use crate::params;
use crate::random::Random;
use crate::store::{Conn, Dialect, Optional, StoreResult};
use crate::txn::Db;
use crate::CloseCode;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use tungstenite::protocol::frame::coding::CloseCode as WsCloseCode;
use tungstenite::protocol::WebSocketContext;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::Message;

/// Close codes of the gateway.
pub const CLOSE_INVALID_PAYLOAD: CloseCode = CloseCode::InvalidPayload;
pub const CLOSE_AUTHENTICATION_FAILED: CloseCode = CloseCode::AuthenticationFailed;
/// Sent by hosts, not by the library: the bot read too slowly, its unsent
/// output stayed over the host's budget for two heartbeat intervals.
pub const CLOSE_SLOW_CONSUMER: CloseCode = CloseCode::SlowConsumer;
pub const CLOSE_SESSION_TIMEOUT: CloseCode = CloseCode::SessionTimeout;
/// On a shared store (PostgreSQL): this node has not reached the database
/// for [`STORAGE_CLOSE_AFTER_MS`]. The bot should reconnect, through the
/// load balancer to another node if this one stays cut off; it resumes
/// from its last recorded ack.
pub const CLOSE_STORAGE_UNAVAILABLE: CloseCode = CloseCode::StorageUnavailable;
/// How long a session's checks of the database may fail in a row before it
/// closes with 4010: half a lease, so the session ends before its lease
/// (which it can no longer renew) lapses and other nodes stop counting it.
/// A short failover (a second or two) closes nothing.
pub const STORAGE_CLOSE_AFTER_MS: u64 = LEASE_TTL_MS / 2;

/// Largest message a bot may send; its frames are small JSON.
pub const MAX_INBOUND_MESSAGE: usize = 64 * 1024;
/// Events read from the log per read, bounding memory per connection.
pub const EVENTS_PER_POLL: usize = 1024;
/// Bytes of frames one read of the log may hold (one event may go past
/// it): with large events, the byte bound comes first.
pub const READ_BYTES: usize = 256 * 1024;

/// What a session reports to its host, besides what to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayEvent {
    /// The session ended; it reports this once. `code` is the close code
    /// sent to the bot (4001, 4004, 4009, 4010, 1007, 1009), or the bot's own when
    /// it closed first (`reason` "closed_by_bot"; 1005 when it sent none),
    /// or 1002 "protocol_error" when its bytes broke the WebSocket protocol.
    Closed { code: u16, reason: crate::CloseCode },
}

/// Something the session wants sent to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayOutput {
    /// One JSON text message.
    Text(String),
    /// Close with this code and reason; nothing follows.
    Close { code: u16, reason: crate::CloseCode },
}

/// The gateway's shared state: open connections per bot (the connection
/// limit) and the epochs that tell a connection it must close. It needs no
/// database lock.
#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<RegistryState>,
    /// On a shared store: what this node last read of its sessions' bots.
    shared: Mutex<SharedView>,
}

/// One read of the shared store for every bot with a session on this node
/// per poll interval, and one lease renewal for all of them: the cost of
/// watching other nodes does not grow with the number of sessions.
#[derive(Default)]
struct SharedView {
    /// When the rows were read (the hosts' `now`).
    taken_ms: Option<u64>,
    /// Bot id → (last_seq, token hash, active).
    bots: HashMap<String, (i64, Vec<u8>, bool)>,
    /// This node's leased sessions: session id → bot id.
    sessions: HashMap<String, String>,
    renewed_ms: u64,
    /// Bumped by each notification from another node; `bots` is as recent
    /// as the `hint_gen` its read started under (`read_gen`). A read that
    /// began before a notification does not count as after it.
    hint_gen: u64,
    read_gen: u64,
}

/// How recent the shared view must be for a check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recency {
    /// The poll: read if older than the interval or than the last hint.
    Interval,
    /// After a hint: read unless a read began after it (whatever the
    /// clock says; sessions' clocks differ by when they last ran).
    Hint,
    /// Read now.
    Now,
}

/// A bot's row as the shared view holds it.
type BotRow = (i64, Vec<u8>, bool);

impl Registry {
    fn shared(&self) -> MutexGuard<'_, SharedView> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bot's row as of at most `interval_ms` ago (read now when older,
    /// when the bot is not in it yet, or when `fresh`). `None` on storage
    /// trouble; `Some(None)` when the bot is gone.
    fn shared_row(
        &self,
        db: &Db,
        bot_id: &str,
        now_ms: u64,
        interval_ms: u64,
        want: Recency,
    ) -> Option<Option<BotRow>> {
        // The view's lock is never held with the database's: a session
        // opens (and registers its lease) with the database lock held.
        let (renew, gen) = {
            let view = self.shared();
            let hinted = view.read_gen < view.hint_gen;
            let stale = match want {
                Recency::Interval => hinted || view.taken_ms.is_none_or(|t| now_ms >= t + interval_ms || now_ms < t),
                Recency::Hint => hinted || view.taken_ms.is_none(),
                Recency::Now => true,
            };
            if !stale {
                if let Some(row) = view.bots.get(bot_id) {
                    return Some(Some(row.clone()));
                }
            }
            let due = now_ms >= view.renewed_ms + LEASE_TTL_MS / 2 && !view.sessions.is_empty();
            let renew = due.then(|| {
                let (sids, bids): (Vec<&str>, Vec<&str>) =
                    view.sessions.iter().map(|(s, b)| (s.as_str(), b.as_str())).unzip();
                (sids.join(","), bids.join(","))
            });
            (renew, view.hint_gen)
        };
        let mut ids: Vec<String> = self.lock().open.keys().cloned().collect();
        if !ids.iter().any(|b| b == bot_id) {
            ids.push(bot_id.to_string());
        }
        let inner = db.lock();
        let mut bots = HashMap::with_capacity(ids.len());
        let read = inner
            .conn
            .prepare_cached(
                "SELECT id, last_seq, token_hash, status FROM bots WHERE id = ANY(string_to_array(?1, ','))",
            )
            .and_then(|mut st| {
                st.query_each([ids.join(",")], |r| {
                    let active = r.get_str(3)? == "active";
                    bots.insert(r.get::<String>(0)?, (r.get::<i64>(1)?, r.get::<Vec<u8>>(2)?, active));
                    Ok(true)
                })
            });
        // One statement renews every lease of this node; a lease that
        // lapsed (the node stalled) is taken again, since its connection is
        // open and counts.
        let renewed = renew.map(|(sids, bids)| {
            inner
                .conn
                .prepare_cached(
                    "INSERT INTO gateway_leases (session_id, bot_id, expires_at_ms) \
                     SELECT s, b, ?3 FROM unnest(string_to_array(?1, ','), string_to_array(?2, ',')) AS t(s, b) \
                     ON CONFLICT (session_id) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
                )
                .and_then(|mut st| st.execute(params![sids, bids, (now_ms + LEASE_TTL_MS) as i64]))
                .is_ok()
        });
        drop(inner);
        let mut view = self.shared();
        if renewed == Some(true) {
            view.renewed_ms = now_ms;
        }
        read.ok()?;
        let row = bots.get(bot_id).cloned();
        view.bots = bots;
        view.taken_ms = Some(now_ms);
        view.read_gen = view.read_gen.max(gen);
        Some(row)
    }

    /// Another node committed something for `bots` (every bot, when
    /// `all`): the shared view is stale, and the sessions of those bots
    /// check the database at their next `poll_transmit`. Returns the bots
    /// named that have a session here, to wake their hosts.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn hint(&self, all: bool, bots: &[String]) -> Vec<String> {
        // The view first: a session that sees its counter move must find
        // the view stale.
        self.shared().hint_gen += 1;
        let mut st = self.lock();
        let here: Vec<String> = if all {
            st.hinted.keys().cloned().collect()
        } else {
            bots.iter().filter(|b| st.hinted.contains_key(*b)).cloned().collect()
        };
        for bot in &here {
            if let Some(n) = st.hinted.get_mut(bot) {
                *n += 1;
            }
        }
        here
    }

    fn add_lease(&self, session_id: &str, bot_id: &str, now_ms: u64) {
        let mut view = self.shared();
        if view.sessions.is_empty() {
            view.renewed_ms = now_ms;
        }
        view.sessions.insert(session_id.to_string(), bot_id.to_string());
    }

    fn remove_lease(&self, session_id: &str) {
        self.shared().sessions.remove(session_id);
    }
}

#[derive(Default)]
struct RegistryState {
    /// Open connections per bot.
    open: HashMap<String, u32>,
    /// Bumped when a bot's token rotates or it is suspended; connections
    /// opened under an older epoch close with 4004.
    epoch: HashMap<String, u64>,
    /// Bumped when the whole database is replaced: every connection closes.
    generation: u64,
    /// Bumped by each commit that gave the bot events: a session reads the
    /// log only when this moved, so polling an idle session costs no query.
    notified: HashMap<String, u64>,
    /// Bumped by each notification from another node naming the bot (shared
    /// store): its sessions then check the bot's row at once.
    hinted: HashMap<String, u64>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, RegistryState> {
        // The state stays consistent at every step: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a connection must still see to stay open (its epoch), the
    /// bot's commit counter and its hint counter.
    fn view(&self, bot_id: &str) -> ((u64, u64), u64, u64) {
        let st = self.lock();
        (
            (st.generation, st.epoch.get(bot_id).copied().unwrap_or(0)),
            st.notified.get(bot_id).copied().unwrap_or(0),
            st.hinted.get(bot_id).copied().unwrap_or(0),
        )
    }

    /// After a commit: `woken` bots have new events; `revoked` bots' sessions
    /// close (4004) at their next `poll_transmit`.
    pub fn after_commit(&self, woken: &[String], revoked: &[String]) {
        let mut st = self.lock();
        for bot in woken {
            // Only bots with a session need a counter.
            if let Some(n) = st.notified.get_mut(bot) {
                *n += 1;
            }
        }
        for bot in revoked {
            *st.epoch.entry(bot.clone()).or_insert(0) += 1;
        }
    }

    /// Closes every connection (the database was replaced); returns the bots
    /// that had connections open, to wake their hosts.
    pub fn reset(&self) -> Vec<String> {
        let mut st = self.lock();
        st.generation += 1;
        st.open.keys().cloned().collect()
    }

    /// Open gateway connections of a bot.
    pub fn open_count(&self, bot_id: &str) -> u32 {
        self.lock().open.get(bot_id).copied().unwrap_or(0)
    }

    /// Takes one of the bot's connection slots, or refuses with 429.
    fn reserve(self: &Arc<Self>, bot: &Bot) -> ApiResult<Slot> {
        let mut st = self.lock();
        let open = st.open.get(&bot.id).copied().unwrap_or(0);
        if open >= bot.connection_limit {
            return Err(ApiError::connection_limit(open, bot.connection_limit));
        }
        *st.open.entry(bot.id.clone()).or_insert(0) += 1;
        st.notified.entry(bot.id.clone()).or_insert(0);
        st.hinted.entry(bot.id.clone()).or_insert(0);
        Ok(Slot { registry: self.clone(), bot_id: bot.id.clone() })
    }
}

/// A held connection slot; dropping it frees the slot.
pub(crate) struct Slot {
    registry: Arc<Registry>,
    bot_id: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.registry.lock();
        if let Some(n) = st.open.get_mut(&self.bot_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.open.remove(&self.bot_id);
                st.notified.remove(&self.bot_id);
                st.hinted.remove(&self.bot_id);
            }
        }
    }
}

/// The checks before an upgrade, in the order of docs/gateway.md: 403 suspended →
/// 426 no upgrade → 429 connection limit. `handle_request` runs them to
/// answer a gateway request it cannot upgrade.
pub(crate) fn check_upgrade(registry: &Registry, req: &Request<'_>, bot: &Bot) -> ApiResult<()> {
    if !bot.active {
        return Err(ApiError::bot_suspended());
    }
    let upgrade = req.header_has_token("upgrade", "websocket")
        && req.header_has_token("connection", "upgrade")
        && req.header("sec-websocket-key").is_some()
        && req.header_str("sec-websocket-version") == Some("13");
    if !upgrade {
        return Err(ApiError::upgrade_required());
    }
    let open = registry.open_count(&bot.id);
    if open >= bot.connection_limit {
        return Err(ApiError::connection_limit(open, bot.connection_limit));
    }
    Ok(())
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

/// A gateway session on whole messages. Dropping it frees its connection slot.
pub struct GatewaySession {
    db: Arc<Db>,
    registry: Arc<Registry>,
    heartbeat_interval_ms: u64,
    bot_id: String,
    session_id: String,
    identity_json: String,
    epoch: (u64, u64),
    /// Highest seq sent on this session.
    cursor: i64,
    replay_from: i64,
    replay_truncated: bool,
    hello_sent: bool,
    last_heartbeat_ms: u64,
    /// More events are waiting beyond the last read batch.
    backlog: bool,
    /// The bot's commit counter when the log was last read.
    notified: u64,
    /// The bot's hint counter when the session last checked the database.
    hinted: u64,
    /// The latest time a host passed in: a check prompted by a hint (in
    /// `poll_transmit`, which takes no time) runs at this time.
    seen_ms: u64,
    /// The highest ack received and not yet written.
    pending_ack: Option<i64>,
    out: VecDeque<GatewayOutput>,
    events: VecDeque<GatewayEvent>,
    closed: bool,
    /// `None` once the session no longer counts against the limit.
    slot: Option<Slot>,
    /// `Some` on a shared store.
    shared: Option<Shared>,
}

/// Result of [`crate::Service::accept_gateway`].
pub struct GatewayAccept {
    /// Bytes to write: `101 Switching Protocols` or a JSON error response.
    pub response: Vec<u8>,
    /// The connection, when the upgrade succeeded.
    pub connection: Option<GatewayConnection>,
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
}

/// How long a gateway lease counts after its last renewal: a node that dies
/// stops counting against its bots' connection limits within this time.
pub const LEASE_TTL_MS: u64 = 10_000;

/// What a session on a shared store (PostgreSQL, several nodes) checks
/// itself, since commits on other nodes wake nothing here.
struct Shared {
    poll_interval_ms: u64,
    next_check_ms: u64,
    token_hash: [u8; 32],
    /// The lease row exists and must be deleted when the session ends.
    leased: bool,
    /// When the first of the checks failing in a row began (service clock).
    failing_since_ms: Option<u64>,
}

impl GatewaySession {
    /// Runs the upgrade checks, takes a slot and reads where the replay
    /// starts. A failure after the slot was taken frees it (RAII).
    pub(crate) fn open(at: Opening<'_>, req: &Request<'_>, bot: &Bot) -> ApiResult<GatewaySession> {
        check_upgrade(at.registry, req, bot)?;
        let slot = at.registry.reserve(bot)?;
        // Fields come after status, upgrade and limit (docs/errors.md, check order).
        let after = parse_after(req.query)?;
        let session_id = crate::auth::new_id(at.random, "gws_")?;
        let shared = if at.conn.dialect() == Dialect::Postgres {
            take_lease(at.conn, bot, &session_id, at.now_ms)?;
            at.registry.add_lease(&session_id, &bot.id, at.now_ms);
            // Leases are renewed by these checks: at least twice per TTL,
            // however long the configured interval.
            let poll_interval_ms = at.poll_interval_ms.min(LEASE_TTL_MS / 2);
            Some(Shared {
                poll_interval_ms,
                next_check_ms: at.now_ms + poll_interval_ms,
                token_hash: at.token_hash,
                leased: true,
                failing_since_ms: None,
            })
        } else {
            None
        };
        let (acked, last): (i64, i64) = at
            .conn
            .prepare_cached("SELECT acked_seq, last_seq FROM bots WHERE id = ?1")?
            .query_row([&bot.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let oldest: Option<i64> = at
            .conn
            .prepare_cached("SELECT min(seq) FROM bot_events WHERE bot_id = ?1")?
            .query_row([&bot.id], |r| r.get(0))
            .optional()?
            .flatten();
        let start = after.unwrap_or(acked).min(last);
        // Events after `start` that are no longer kept: the oldest kept one is
        // past start+1, or none is kept although some were written.
        let first_kept = oldest.unwrap_or(last + 1);
        let truncated = first_kept > start + 1 && last > start;
        let replay_from = if truncated { first_kept } else { start + 1 };
        let (epoch, notified, hinted) = at.registry.view(&bot.id);
        Ok(GatewaySession {
            db: at.db.clone(),
            registry: at.registry.clone(),
            heartbeat_interval_ms: at.heartbeat_interval_ms,
            bot_id: bot.id.clone(),
            session_id,
            identity_json: bot.identity_json.clone(),
            epoch,
            cursor: replay_from - 1,
            replay_from,
            replay_truncated: truncated,
            hello_sent: false,
            last_heartbeat_ms: at.now_ms,
            backlog: true,
            notified,
            hinted,
            seen_ms: at.now_ms,
            pending_ack: None,
            out: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
            slot: Some(slot),
            shared,
        })
    }

    /// The byte-level connection for this session, and its `101` response
    /// for the client's `Sec-WebSocket-Key`.
    pub(crate) fn upgrade(self, key: &str) -> GatewayAccept {
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        let response = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .into_bytes();
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_INBOUND_MESSAGE))
            .max_frame_size(Some(MAX_INBOUND_MESSAGE))
            .write_buffer_size(0);
        GatewayAccept {
            response,
            connection: Some(GatewayConnection {
                session: self,
                ws: WebSocketContext::new(Role::Server, Some(config)),
                io: MemIo::default(),
                close_sent: false,
                peer_gone: false,
            }),
        }
    }
}

impl GatewaySession {
    pub fn bot_id(&self) -> &str {
        &self.bot_id
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// True once the session has ended: after the last `poll_transmit`
    /// output nothing more will be sent.
    pub fn is_closed(&self) -> bool {
        self.closed && self.out.is_empty()
    }

    // ---- inputs ----

    /// A text message from the bot, received at `now_ms`.
    pub fn handle_text(&mut self, text: &str, now_ms: u64) {
        if self.closed {
            return;
        }
        self.seen_ms = self.seen_ms.max(now_ms);
        let v: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return self.close(CLOSE_INVALID_PAYLOAD),
        };
        match v.get("op").and_then(|o| o.as_str()) {
            Some("heartbeat") => {
                self.last_heartbeat_ms = now_ms;
                self.out.push_back(GatewayOutput::Text("{\"op\":\"heartbeat_ack\"}".into()));
            }
            // Acks are coalesced: the highest one is written once, at the
            // next `poll_transmit`, so an ack flood costs one commit per round.
            Some("ack") => match v.get("seq").and_then(|s| s.as_i64()) {
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

    /// Time has reached `now_ms`: the heartbeat deadline is checked.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.seen_ms = self.seen_ms.max(now_ms);
        if !self.closed && now_ms > self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms {
            self.close(CLOSE_SESSION_TIMEOUT);
        }
        if !self.closed && self.shared.as_ref().is_some_and(|s| now_ms >= s.next_check_ms) {
            self.check_shared(now_ms, Recency::Interval);
        }
    }

    // ---- outputs ----

    /// The next message to send, or `None` when there is nothing now. Call
    /// it after every input, after a wake-up for this bot, and until it
    /// returns `None`. It writes the pending ack and reads the bot's event
    /// log when new events were committed (at most `EVENTS_PER_POLL` rows
    /// or `READ_BYTES` of frames per read), so memory stays bounded however
    /// far behind the bot is.
    pub fn poll_transmit(&mut self) -> Option<GatewayOutput> {
        if let Some(o) = self.out.pop_front() {
            return Some(o);
        }
        if self.closed {
            return None;
        }
        let (epoch, notified, hinted) = self.registry.view(&self.bot_id);
        if hinted != self.hinted && self.shared.is_some() {
            // Another node said it committed something for this bot: look
            // at the bot's row now (a hint only; the database decides).
            self.hinted = hinted;
            self.check_shared(self.seen_ms, Recency::Hint);
            if self.closed {
                return self.out.pop_front();
            }
        }
        if epoch != self.epoch {
            self.close(CLOSE_AUTHENTICATION_FAILED);
            return self.out.pop_front();
        }
        if let Some(seq) = self.pending_ack.take() {
            match self.write_ack(seq) {
                Ok(true) => {}
                Ok(false) => {
                    self.close(CLOSE_INVALID_PAYLOAD);
                    return self.out.pop_front();
                }
                Err(_) => {} // storage trouble: the ack is not recorded; the bot may ack again
            }
        }
        if !self.hello_sent {
            self.hello_sent = true;
            let hello = format!(
                "{{\"op\":\"hello\",\"session_id\":\"{}\",\"heartbeat_interval_ms\":{},\"bot\":{},\"replay_from\":{},\"replay_truncated\":{}}}",
                self.session_id, self.heartbeat_interval_ms, self.identity_json, self.replay_from, self.replay_truncated
            );
            return Some(GatewayOutput::Text(hello));
        }
        if self.backlog || notified != self.notified {
            // Read the counter before the log: an event committed meanwhile
            // bumps it again and is read on the next call.
            self.notified = notified;
            if self.read_events().is_err() {
                // Storage trouble: keep the cursor, read again next time.
                self.backlog = true;
            }
        }
        self.out.pop_front()
    }

    /// When `handle_timeout` must be called at the latest (Unix ms): the
    /// first instant the heartbeat deadline has passed. `None` once closed.
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

    // ---- internals ----

    /// Moves the bot's durable cursor to `seq` (never backwards). False when
    /// `seq` is beyond the last event the bot was ever given.
    fn write_ack(&mut self, seq: i64) -> StoreResult<bool> {
        let inner = self.db.lock();
        let n = inner
            .conn
            .prepare_cached("UPDATE bots SET acked_seq = CASE WHEN acked_seq > ?1 THEN acked_seq ELSE ?1 END WHERE id = ?2 AND last_seq >= ?1")?
            .execute(params![seq, self.bot_id])?;
        Ok(n == 1)
    }

    /// Sends a close frame with the reason's code and ends the session.
    fn close(&mut self, reason: CloseCode) {
        // Every reason the library closes with has a code; one without
        // (the bot's own close) has nothing to send.
        let Some(code) = reason.code() else { return self.end(1005, reason) };
        if !self.closed {
            self.out.push_back(GatewayOutput::Close { code, reason });
            self.end(code, reason);
        }
    }

    /// Ends the session without sending anything more: frees the slot and
    /// reports why.
    fn end(&mut self, code: u16, reason: CloseCode) {
        if !self.closed {
            // An ack that arrived before the close still counts.
            if let Some(seq) = self.pending_ack.take() {
                let _ = self.write_ack(seq);
            }
            self.release_lease();
            self.closed = true;
            self.slot = None;
            self.events.push_back(GatewayEvent::Closed { code, reason });
        }
    }

    /// On a shared store: whether another node rotated the token or
    /// suspended the bot (4004), whether it committed events for the bot
    /// (read at the next `poll_transmit`), and the lease renewal.
    fn check_shared(&mut self, now_ms: u64, want: Recency) {
        let Some(sh) = self.shared.as_mut() else { return };
        sh.next_check_ms = now_ms + sh.poll_interval_ms;
        let (interval, token_hash) = (sh.poll_interval_ms, sh.token_hash);
        let mut row = self.registry.shared_row(&self.db, &self.bot_id, now_ms, interval, want);
        let revoked = |r: &Option<Option<BotRow>>| {
            matches!(r, Some(None))
                || matches!(r, Some(Some((_, hash, active))) if hash[..] != token_hash[..] || !active)
        };
        if revoked(&row) {
            // The view may predate this session's token: look again first.
            row = self.registry.shared_row(&self.db, &self.bot_id, now_ms, interval, Recency::Now);
        }
        if let Some(sh) = self.shared.as_mut() {
            sh.failing_since_ms = match row {
                None => Some(sh.failing_since_ms.unwrap_or(now_ms)),
                Some(_) => None,
            };
            if sh.failing_since_ms.is_some_and(|since| now_ms >= since + STORAGE_CLOSE_AFTER_MS) {
                // Closing must not wait on the database it cannot reach:
                // the lease lapses by itself, and an ack not recorded is
                // sent again by the bot after it reconnects.
                sh.leased = false;
                self.registry.remove_lease(&self.session_id);
                self.pending_ack = None;
                self.close(CLOSE_STORAGE_UNAVAILABLE);
                return;
            }
        }
        match row {
            Some(_) if revoked(&row) => self.close(CLOSE_AUTHENTICATION_FAILED),
            Some(Some((last, _, _))) if last > self.cursor => self.backlog = true,
            // Storage trouble (the database restarting, this node's
            // connection being reopened): look again within a second, not a
            // whole interval, so what other nodes commit once it is back
            // is not held up by a long poll interval.
            None => {
                if let Some(sh) = self.shared.as_mut() {
                    sh.next_check_ms = now_ms + sh.poll_interval_ms.min(1000);
                }
            }
            // Nothing new: the next check.
            _ => {}
        }
    }

    /// Deletes the session's lease (shared store), once.
    fn release_lease(&mut self) {
        if let Some(sh) = self.shared.as_mut().filter(|s| s.leased) {
            sh.leased = false;
            self.registry.remove_lease(&self.session_id);
            let inner = self.db.lock();
            let _ = inner
                .conn
                .prepare_cached("DELETE FROM gateway_leases WHERE session_id = ?1")
                .and_then(|mut st| st.execute([&self.session_id]));
        }
    }

    fn read_events(&mut self) -> StoreResult<()> {
        let inner = self.db.lock();
        let mut st = inner.conn.prepare_cached(
            "SELECT seq, type, data FROM bot_events WHERE bot_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let (mut n, mut bytes) = (0, 0);
        let mut full = false;
        let from = self.cursor;
        let (out, cursor) = (&mut self.out, &mut self.cursor);
        st.query_each(params![self.bot_id, from, EVENTS_PER_POLL as i64], |r| {
            let seq: i64 = r.get(0)?;
            let kind = r.get_str(1)?;
            let data = r.get_str(2)?;
            let mut frame = String::with_capacity(40 + kind.len() + data.len());
            frame.push_str("{\"op\":\"event\",\"seq\":");
            // Into the frame itself: no temporary string per event.
            let _ = std::fmt::Write::write_fmt(&mut frame, format_args!("{seq}"));
            frame.push_str(",\"type\":\"");
            frame.push_str(kind);
            frame.push_str("\",\"data\":");
            frame.push_str(data);
            frame.push('}');
            bytes += frame.len();
            out.push_back(GatewayOutput::Text(frame));
            *cursor = seq;
            n += 1;
            full = bytes >= READ_BYTES;
            Ok(!full)
        })?;
        // Frames leave only once the commits they carry are on disk
        // (crate::store::wal); if that fails they are read again later.
        let seen = self.db.wal.as_ref().map(|w| (w, w.seen()));
        drop(st);
        drop(inner);
        if let Some((wal, seen)) = seen {
            if wal.sync_to(seen).is_err() {
                self.out.truncate(self.out.len() - n);
                self.cursor = from;
                return Err(crate::store::StorageError::Unavailable("the disk sync failed"));
            }
        }
        self.backlog = full || n == EVENTS_PER_POLL;
        Ok(())
    }
}

impl Drop for GatewaySession {
    /// A host may drop a session right after its last input: the acks in
    /// that input are still written.
    fn drop(&mut self) {
        if let Some(seq) = self.pending_ack.take() {
            let _ = self.write_ack(seq);
        }
        self.release_lease();
    }
}

/// Takes a lease on one of the bot's connections across every node of a
/// shared store, or refuses with 429 `connection_limit`. The bot's row is
/// locked meanwhile, so two nodes cannot both take the last one.
fn take_lease(conn: &Conn, bot: &Bot, session_id: &str, now_ms: u64) -> ApiResult<()> {
    conn.begin()?;
    let taken = (|| -> ApiResult<()> {
        conn.prepare_cached("SELECT id FROM bots WHERE id = ?1 FOR UPDATE")?.exists([&bot.id])?;
        conn.prepare_cached("DELETE FROM gateway_leases WHERE bot_id = ?1 AND expires_at_ms <= ?2")?
            .execute(params![bot.id, now_ms as i64])?;
        let open: i64 = conn
            .prepare_cached("SELECT count(*) FROM gateway_leases WHERE bot_id = ?1")?
            .query_row([&bot.id], |r| r.get(0))?;
        let open = u32::try_from(open).unwrap_or(u32::MAX);
        if open >= bot.connection_limit {
            return Err(ApiError::connection_limit(open, bot.connection_limit));
        }
        conn.prepare_cached("INSERT INTO gateway_leases (session_id, bot_id, expires_at_ms) VALUES (?1, ?2, ?3)")?
            .execute(params![session_id, bot.id, (now_ms + LEASE_TTL_MS) as i64])?;
        Ok(())
    })();
    match taken {
        Ok(()) => Ok(conn.commit()?),
        Err(e) => {
            let _ = conn.rollback();
            Err(e)
        }
    }
}

/// In-memory stream under tungstenite: reads what the host fed, collects
/// what it writes. An empty input reads as `WouldBlock`.
#[derive(Default)]
struct MemIo {
    input: Vec<u8>,
    pos: usize,
    output: Vec<u8>,
}

impl Read for MemIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = &self.input[self.pos..];
        if avail.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.pos += n;
        if self.pos == self.input.len() {
            self.input.clear();
            self.pos = 0;
        }
        Ok(n)
    }
}

impl Write for MemIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Most bytes one `GatewayConnection::poll_transmit` call appends (one
/// frame may go past it): the host writes them, then asks again.
pub const TRANSMIT_BATCH_BYTES: usize = 256 * 1024;

/// A gateway connection over raw bytes (after the `101` response).
pub struct GatewayConnection {
    session: GatewaySession,
    ws: WebSocketContext,
    io: MemIo,
    close_sent: bool,
    peer_gone: bool,
}

impl GatewayConnection {
    pub fn bot_id(&self) -> &str {
        self.session.bot_id()
    }

    pub fn session(&self) -> &GatewaySession {
        &self.session
    }

    // ---- inputs ----

    /// Bytes read from the socket at `now_ms`. Complete messages are
    /// handled at once; partial frames wait for more bytes.
    pub fn handle_input(&mut self, bytes: &[u8], now_ms: u64) {
        if self.peer_gone {
            return;
        }
        self.io.input.extend_from_slice(bytes);
        loop {
            match self.ws.read(&mut self.io) {
                Ok(Message::Text(t)) => self.session.handle_text(t.as_str(), now_ms),
                Ok(Message::Binary(_)) => self.session.handle_binary(),
                Ok(Message::Close(frame)) => {
                    // tungstenite queued the close reply; nothing more comes.
                    self.session.handle_close(frame.map(|f| u16::from(f.code)));
                }
                Ok(_) => {} // ping (pong is queued by tungstenite), pong
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(tungstenite::Error::Capacity(_)) => {
                    self.session.close(CloseCode::MessageTooBig);
                    break;
                }
                Err(tungstenite::Error::Utf8(_)) => {
                    self.session.close(CloseCode::InvalidUtf8);
                    break;
                }
                Err(_) => {
                    // Protocol violation or closed: no more frames are read.
                    self.peer_gone = true;
                    self.session.end(1002, CloseCode::ProtocolError);
                    break;
                }
            }
        }
    }

    /// Time has reached `now_ms` (see [`GatewaySession::handle_timeout`]).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.session.handle_timeout(now_ms);
    }

    // ---- outputs ----

    /// Appends the next bytes to write to `out` and returns how many; 0
    /// means nothing now. Each call appends about [`TRANSMIT_BATCH_BYTES`]
    /// at most: write them, then call again until it returns 0.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        // Frame straight into the caller's buffer: tungstenite writes into
        // `io.output`, so lend it the caller's vector. What was queued
        // before (pongs, a close reply) goes first.
        let mut pending = std::mem::replace(&mut self.io.output, std::mem::take(out));
        self.io.output.extend_from_slice(&pending);
        pending.clear();
        while !self.close_sent && !self.peer_gone && self.io.output.len() - start < TRANSMIT_BATCH_BYTES {
            let Some(o) = self.session.poll_transmit() else { break };
            let r = match o {
                GatewayOutput::Text(t) => self.ws.write(&mut self.io, Message::text(t)),
                GatewayOutput::Close { code, reason } => {
                    self.close_sent = true;
                    self.ws.close(
                        &mut self.io,
                        Some(CloseFrame { code: WsCloseCode::from(code), reason: reason.as_str().into() }),
                    )
                }
            };
            if r.is_err() {
                self.peer_gone = true;
                break;
            }
        }
        let _ = self.ws.flush(&mut self.io);
        *out = std::mem::replace(&mut self.io.output, pending);
        out.len() - start
    }

    /// When `handle_timeout` must be called at the latest (Unix ms); `None`
    /// once the connection is over.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.is_closed() {
            return None;
        }
        self.session.poll_timeout()
    }

    /// What happened: `Closed` once, with the code and reason.
    pub fn poll_event(&mut self) -> Option<GatewayEvent> {
        self.session.poll_event()
    }

    /// True when the connection is over: the host writes what
    /// `poll_transmit` returned last, then closes the socket and drops this
    /// object.
    pub fn is_closed(&self) -> bool {
        self.peer_gone || (self.session.closed && self.io.output.is_empty() && self.session.out.is_empty())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn connections_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<super::GatewayConnection>();
        is_send::<super::GatewaySession>();
    }
}
