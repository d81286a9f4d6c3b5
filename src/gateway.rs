//! The bot gateway (contract section 8), sans-IO.
//!
//! [`GatewaySession`] is the protocol on whole text messages — what an edge
//! runtime that does its own WebSocket framing needs. [`GatewayConnection`]
//! wraps a session in tungstenite's `WebSocketContext` over in-memory
//! buffers for hosts that own a raw TCP socket: feed it what you read, write
//! what `poll` returns.

use crate::error::{ApiError, ApiResult};
use crate::http::Request;
use crate::model::Bot;
use crate::txn::Db;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::WebSocketContext;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::Message;

/// Close codes of the gateway.
pub const CLOSE_INVALID_PAYLOAD: u16 = 4001;
pub const CLOSE_AUTHENTICATION_FAILED: u16 = 4004;
pub const CLOSE_SESSION_TIMEOUT: u16 = 4009;

/// Largest message a bot may send; its frames are small JSON.
pub const MAX_INBOUND_MESSAGE: usize = 64 * 1024;
/// Events read from the log per poll, bounding memory per connection.
pub const EVENTS_PER_POLL: usize = 1024;

/// Something the session wants sent to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayOutput {
    /// One JSON text message.
    Text(String),
    /// Close with this code and reason; nothing follows.
    Close { code: u16, reason: &'static str },
}

/// The gateway's shared state: open connections per bot (the connection
/// limit) and the epochs that tell a connection it must close. It needs no
/// database lock.
#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<RegistryState>,
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
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, RegistryState> {
        // The state stays consistent at every step: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a connection must still see to stay open.
    fn epoch_of(&self, bot_id: &str) -> (u64, u64) {
        let st = self.lock();
        (st.generation, st.epoch.get(bot_id).copied().unwrap_or(0))
    }

    /// Closes (4004) every connection of these bots at its next poll.
    pub fn revoke(&self, bots: &[String]) {
        let mut st = self.lock();
        for bot in bots {
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
            }
        }
    }
}

/// The checks before an upgrade, in the contract's order: 403 suspended →
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
    out: VecDeque<GatewayOutput>,
    closed: bool,
    /// `None` once the session no longer counts against the limit.
    slot: Option<Slot>,
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
    pub conn: &'a Connection,
    pub heartbeat_interval_ms: u64,
    pub now_ms: u64,
}

impl GatewaySession {
    /// Runs the upgrade checks, takes a slot and reads where the replay
    /// starts. A failure after the slot was taken frees it (RAII).
    pub(crate) fn open(at: Opening<'_>, req: &Request<'_>, bot: &Bot) -> ApiResult<GatewaySession> {
        check_upgrade(at.registry, req, bot)?;
        let slot = at.registry.reserve(bot)?;
        // Fields come after status, upgrade and limit (contract section 3).
        let after = parse_after(req.query)?;
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
        Ok(GatewaySession {
            db: at.db.clone(),
            registry: at.registry.clone(),
            heartbeat_interval_ms: at.heartbeat_interval_ms,
            bot_id: bot.id.clone(),
            session_id: crate::auth::new_id("gws_")?,
            identity_json: bot.identity_json.clone(),
            epoch: at.registry.epoch_of(&bot.id),
            cursor: replay_from - 1,
            replay_from,
            replay_truncated: truncated,
            hello_sent: false,
            last_heartbeat_ms: at.now_ms,
            backlog: true,
            out: VecDeque::new(),
            closed: false,
            slot: Some(slot),
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
                outs: Vec::new(),
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

    /// True once a close was queued; the host may drop the session after
    /// sending what `poll` returned.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// A text message from the bot.
    pub fn on_text(&mut self, text: &str, now_ms: u64) {
        if self.closed {
            return;
        }
        let v: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return self.close(CLOSE_INVALID_PAYLOAD, "invalid_payload"),
        };
        match v.get("op").and_then(|o| o.as_str()) {
            Some("heartbeat") => {
                self.last_heartbeat_ms = now_ms;
                self.out.push_back(GatewayOutput::Text("{\"op\":\"heartbeat_ack\"}".into()));
            }
            Some("ack") => match v.get("seq").and_then(|s| s.as_i64()) {
                Some(seq) if seq >= 0 => match self.ack(seq) {
                    Ok(true) => {}
                    Ok(false) => self.close(CLOSE_INVALID_PAYLOAD, "invalid_payload"),
                    Err(_) => {} // storage trouble: the ack is simply not recorded; the bot may ack again
                },
                _ => self.close(CLOSE_INVALID_PAYLOAD, "invalid_payload"),
            },
            _ => self.close(CLOSE_INVALID_PAYLOAD, "invalid_payload"),
        }
    }

    /// A binary message: the gateway speaks JSON text only.
    pub fn on_binary(&mut self) {
        self.close(CLOSE_INVALID_PAYLOAD, "invalid_payload");
    }

    /// Moves the bot's durable cursor to `seq` (never backwards). False when
    /// `seq` is beyond the last event the bot was ever given.
    fn ack(&mut self, seq: i64) -> rusqlite::Result<bool> {
        let inner = self.db.lock();
        let n = inner
            .conn
            .prepare_cached("UPDATE bots SET acked_seq = max(acked_seq, ?1) WHERE id = ?2 AND last_seq >= ?1")?
            .execute(params![seq, self.bot_id])?;
        Ok(n == 1)
    }

    fn close(&mut self, code: u16, reason: &'static str) {
        if !self.closed {
            self.closed = true;
            self.out.push_back(GatewayOutput::Close { code, reason });
            self.free_slot();
        }
    }

    fn free_slot(&mut self) {
        self.slot = None;
    }

    /// When the host should call `poll` next at the latest (Unix ms).
    /// `Some(0)` means now: events are waiting.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        if self.backlog || !self.hello_sent || !self.out.is_empty() {
            return Some(0);
        }
        // The session times out strictly after two intervals: the first
        // instant a poll would close it.
        Some(self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms + 1)
    }

    /// Brings the session up to date at `now_ms`: hello, revocation,
    /// heartbeat timeout, new events. Returns what to send, in order.
    pub fn poll(&mut self, now_ms: u64) -> Vec<GatewayOutput> {
        if !self.closed {
            self.poll_inner(now_ms);
        }
        self.out.drain(..).collect()
    }

    /// Like `poll`, appending into `out` to reuse its allocation.
    pub fn poll_into(&mut self, now_ms: u64, out: &mut Vec<GatewayOutput>) {
        if !self.closed {
            self.poll_inner(now_ms);
        }
        out.extend(self.out.drain(..));
    }

    fn poll_inner(&mut self, now_ms: u64) {
        let epoch = self.registry.epoch_of(&self.bot_id);
        if epoch != self.epoch {
            return self.close(CLOSE_AUTHENTICATION_FAILED, "authentication_failed");
        }
        if now_ms > self.last_heartbeat_ms + 2 * self.heartbeat_interval_ms {
            return self.close(CLOSE_SESSION_TIMEOUT, "session_timeout");
        }
        if !self.hello_sent {
            self.hello_sent = true;
            let hello = format!(
                "{{\"op\":\"hello\",\"session_id\":\"{}\",\"heartbeat_interval_ms\":{},\"bot\":{},\"replay_from\":{},\"replay_truncated\":{}}}",
                self.session_id, self.heartbeat_interval_ms, self.identity_json, self.replay_from, self.replay_truncated
            );
            self.out.push_back(GatewayOutput::Text(hello));
        }
        if let Err(_e) = self.read_events() {
            // Storage trouble: keep the cursor, try again on the next poll.
            self.backlog = true;
        }
    }

    fn read_events(&mut self) -> rusqlite::Result<()> {
        let inner = self.db.lock();
        let mut st = inner.conn.prepare_cached(
            "SELECT seq, type, data FROM bot_events WHERE bot_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let mut rows = st.query(params![self.bot_id, self.cursor, EVENTS_PER_POLL as i64])?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let kind = r.get_ref(1)?.as_str()?;
            let data = r.get_ref(2)?.as_str()?;
            let mut frame = String::with_capacity(40 + kind.len() + data.len());
            frame.push_str("{\"op\":\"event\",\"seq\":");
            // Into the frame itself: no temporary string per event.
            let _ = std::fmt::Write::write_fmt(&mut frame, format_args!("{seq}"));
            frame.push_str(",\"type\":\"");
            frame.push_str(kind);
            frame.push_str("\",\"data\":");
            frame.push_str(data);
            frame.push('}');
            self.out.push_back(GatewayOutput::Text(frame));
            self.cursor = seq;
            n += 1;
        }
        self.backlog = n == EVENTS_PER_POLL;
        Ok(())
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

/// A gateway connection over raw bytes (after the `101` response).
pub struct GatewayConnection {
    session: GatewaySession,
    ws: WebSocketContext,
    io: MemIo,
    close_sent: bool,
    peer_gone: bool,
    /// Reused between polls.
    outs: Vec<GatewayOutput>,
}

impl GatewayConnection {
    pub fn bot_id(&self) -> &str {
        self.session.bot_id()
    }

    pub fn session(&self) -> &GatewaySession {
        &self.session
    }

    /// Bytes read from the socket. Complete messages are handled at once;
    /// partial frames wait for more bytes. Call `poll` afterwards.
    pub fn feed(&mut self, bytes: &[u8], now_ms: u64) {
        if self.peer_gone {
            return;
        }
        self.io.input.extend_from_slice(bytes);
        loop {
            match self.ws.read(&mut self.io) {
                Ok(Message::Text(t)) => self.session.on_text(t.as_str(), now_ms),
                Ok(Message::Binary(_)) => self.session.on_binary(),
                Ok(Message::Close(_)) => {
                    // tungstenite queued the close reply; nothing more comes.
                    self.session.free_slot();
                    self.session.closed = true;
                }
                Ok(_) => {} // ping (pong is queued by tungstenite), pong
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(tungstenite::Error::Capacity(_)) => {
                    self.session.close(1009, "message_too_big");
                    break;
                }
                Err(tungstenite::Error::Utf8(_)) => {
                    self.session.close(1007, "invalid_utf8");
                    break;
                }
                Err(_) => {
                    // Protocol violation or closed: no more frames are read.
                    self.peer_gone = true;
                    self.session.free_slot();
                    self.session.closed = true;
                    break;
                }
            }
        }
    }

    /// Runs the session at `now_ms` and returns the bytes to write.
    pub fn poll(&mut self, now_ms: u64) -> Vec<u8> {
        let mut out = Vec::new();
        self.poll_into(now_ms, &mut out);
        out
    }

    /// Like `poll`, appending the bytes to write into `out` (reuse it).
    pub fn poll_into(&mut self, now_ms: u64, out: &mut Vec<u8>) {
        // Frame straight into the caller's buffer: no copy, no regrowth.
        let pending = std::mem::take(&mut self.io.output);
        std::mem::swap(&mut self.io.output, out);
        self.io.output.extend_from_slice(&pending);
        let mut outs = std::mem::take(&mut self.outs);
        self.session.poll_into(now_ms, &mut outs);
        for o in outs.drain(..) {
            if self.close_sent {
                break;
            }
            let r = match o {
                GatewayOutput::Text(t) => self.ws.write(&mut self.io, Message::text(t)),
                GatewayOutput::Close { code, reason } => {
                    self.close_sent = true;
                    self.ws.close(&mut self.io, Some(CloseFrame { code: CloseCode::from(code), reason: reason.into() }))
                }
            };
            if r.is_err() {
                self.peer_gone = true;
                break;
            }
        }
        self.outs = outs;
        let _ = self.ws.flush(&mut self.io);
        std::mem::swap(&mut self.io.output, out);
    }

    /// When to poll next at the latest (Unix ms); `Some(0)` means now.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        if !self.io.output.is_empty() {
            return Some(0);
        }
        self.session.next_deadline_ms()
    }

    /// True when the connection is over: the host writes what `poll`
    /// returned last, then closes the socket and drops this object.
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
