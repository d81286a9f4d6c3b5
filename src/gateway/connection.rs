//! [`GatewayConnection`]: a [`GatewaySession`] under tungstenite's
//! `WebSocketContext` over in-memory buffers, for hosts that own a raw TCP
//! socket: feed it what you read, write what `poll_transmit` returns.

use super::driver::GatewaySession;
use super::{GatewayAccept, GatewayEvent, GatewayOutput, MAX_INBOUND_MESSAGE};
use std::io::{self, Read, Write};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::WebSocketContext;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::Message;

/// Most bytes one `GatewayConnection::poll_transmit` call appends (one
/// frame may go past it): the host writes them, then asks again.
pub const TRANSMIT_BATCH_BYTES: usize = 256 * 1024;

/// Unsent output a connection may have given its host: once the bytes the
/// host reports holding (`GatewayConnection::handle_unsent`) reach this,
/// `poll_transmit` gives nothing more (events wait in the database), and
/// if they stay at or over it for the slow-consumer time (two heartbeat
/// intervals) the session is closed with 4008 `slow_consumer`.
pub const OUTPUT_BUDGET: usize = 256 * 1024;

/// Replies to the bot's own input (pongs, heartbeat acks, the answer to
/// its close) the connection may hold while its host's output is at the
/// budget: past this, input is no longer taken (`wants_input` says false,
/// and bytes handed in anyway wait unread), so a bot that sends pings or
/// heartbeats and reads nothing costs this much, not what it sends. Room
/// for heartbeats (22 bytes each) from a bot that reads slowly.
pub const REPLY_BUDGET: usize = 64 * 1024;

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
    /// Bytes `poll_transmit` gave that the host has not written, as it last
    /// reported them (plus what was given since); `None` for a host that
    /// never reports, which writes everything it is given at once.
    host_unsent: Option<usize>,
    /// Since when (service time) the host's reports have said it holds
    /// [`OUTPUT_BUDGET`] or more.
    over_since: Option<u64>,
    /// The last `poll_transmit` stopped at the budget: more may follow.
    held: bool,
    /// Reading stopped at [`REPLY_BUDGET`]: tungstenite or `io.input`
    /// still holds bytes the bot sent.
    input_held: bool,
    /// The latest time a host passed in.
    now_ms: u64,
}

impl GatewaySession {
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
                host_unsent: None,
                over_since: None,
                held: false,
                input_held: false,
                now_ms: 0,
            }),
        }
    }
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
    /// handled at once, while the replies they queue stay under
    /// [`REPLY_BUDGET`]; the rest waits, unread, until the bot has read
    /// enough (`poll_transmit` goes on with it). Partial frames wait for
    /// more bytes. Read from the socket only while [`Self::wants_input`].
    pub fn handle_input(&mut self, bytes: &[u8], now_ms: u64) {
        if self.peer_gone {
            return;
        }
        self.now_ms = self.now_ms.max(now_ms);
        self.io.input.extend_from_slice(bytes);
        self.read_input(now_ms);
    }

    /// Whether the host should read from the socket now: false while the
    /// replies the bot's input queued are at [`REPLY_BUDGET`] (its output
    /// is not being read) or bytes it sent still wait, and once the bot's
    /// side is gone. The host that obeys holds at most one read's worth of
    /// input beyond the budget; the bot's own socket buffers the rest and
    /// then blocks it.
    pub fn wants_input(&self) -> bool {
        !self.peer_gone && !self.input_held && self.replies_held() < REPLY_BUDGET
    }

    /// Replies held here, not yet given to the host: tungstenite's pongs
    /// and close answer, the session's heartbeat acks.
    fn replies_held(&self) -> usize {
        self.io.output.len() + self.session.reply_bytes()
    }

    /// Handles the complete messages fed, up to the reply budget.
    fn read_input(&mut self, now_ms: u64) {
        loop {
            if self.replies_held() >= REPLY_BUDGET {
                self.input_held = true;
                return;
            }
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
                    self.session.close_with(super::CloseCode::MessageTooBig);
                    break;
                }
                Err(tungstenite::Error::Utf8(_)) => {
                    self.session.close_with(super::CloseCode::InvalidUtf8);
                    break;
                }
                Err(_) => {
                    // Protocol violation or closed: no more frames are read.
                    self.peer_gone = true;
                    self.session.end(1002, super::CloseCode::ProtocolError);
                    break;
                }
            }
        }
        self.input_held = false;
    }

    /// The host holds `unsent` bytes of what `poll_transmit` gave, not yet
    /// taken by the socket, at `now_ms`: call it after each write (with
    /// the time of the write) and before each `poll_transmit`. From the
    /// first report on, the connection keeps count: `poll_transmit` gives
    /// nothing more while the host holds [`OUTPUT_BUDGET`], and a host
    /// that holds that much for the slow-consumer time (two heartbeat
    /// intervals) has its session closed with 4008 `slow_consumer` at the
    /// next `handle_timeout`. A host that never reports is taken to write
    /// everything at once.
    pub fn handle_unsent(&mut self, unsent: usize, now_ms: u64) {
        self.host_unsent = Some(unsent);
        if unsent < OUTPUT_BUDGET {
            // Under again at `now_ms`: the time over ended then. If it had
            // run past the slow-consumer time by then (the socket took the
            // bytes after a jump of the clock, before the next look), it
            // still counts: the next `handle_timeout` closes.
            if self.slow_deadline().is_none_or(|d| now_ms <= d) {
                self.over_since = None;
            }
        } else {
            self.over_since.get_or_insert(now_ms);
        }
    }

    /// True when `poll_transmit` stopped at the budget, or input waits for
    /// replies to leave, and the host now has room: call `poll_transmit`.
    pub fn wants_transmit(&self) -> bool {
        let room = self.host_unsent.is_none_or(|u| u < OUTPUT_BUDGET);
        room && (self.held || self.input_held) && !self.peer_gone && !self.close_sent
    }

    /// The last instant the host's unsent output may stay at the budget:
    /// two heartbeat intervals after its reports first said so.
    fn slow_deadline(&self) -> Option<u64> {
        let since = self.over_since?;
        Some(since.saturating_add(self.session.slow_consumer_ms()))
    }

    /// Time has reached `now_ms` (see [`GatewaySession::handle_timeout`]),
    /// and the output budget: unsent output at or over [`OUTPUT_BUDGET`]
    /// for longer than two heartbeat intervals closes the session with
    /// 4008 `slow_consumer`, its close frame next (what was queued and not
    /// given is dropped; the bot resumes from its ack). When the heartbeat
    /// deadline has passed too, the earlier one decides (4009 for a bot
    /// silent first).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        if let Some(slow) = self.slow_deadline().filter(|&d| now_ms > d && !self.session.has_ended()) {
            // Both deadlines may have passed: the close says which came
            // first. On a tie (the same instant), a bot that has
            // heartbeated is alive and not reading (4008), one that never
            // did is silent (4009). A bot whose input waits unread may have
            // heartbeats in it: 4008.
            let (silent_at, heard) = self.session.heartbeat_deadline();
            let silent_first = silent_at < slow || (silent_at == slow && !heard);
            if self.input_held || !silent_first {
                self.session.close(super::CLOSE_SLOW_CONSUMER);
            }
        }
        self.session.handle_timeout(now_ms);
    }

    /// The host ends the connection with close `code` (see
    /// [`GatewaySession::close`]; 4008 `slow_consumer` for a bot that reads
    /// too slowly): the next `poll_transmit` returns the close frame, which
    /// goes after the bytes already returned; the host writes it and
    /// closes the socket once `is_closed`. False, changing nothing, when
    /// the code is not a host's or the session has already ended.
    pub fn close(&mut self, code: super::CloseCode) -> bool {
        if self.peer_gone || self.close_sent {
            return false;
        }
        self.session.close(code)
    }

    // ---- outputs ----

    /// Appends the next bytes to write to `out` and returns how many; 0
    /// means nothing now. Each call appends about [`TRANSMIT_BATCH_BYTES`]
    /// at most: write them, then call again until it returns 0. For a host
    /// that reports what it holds ([`Self::handle_unsent`]), nothing more
    /// once it holds [`OUTPUT_BUDGET`] (one frame may go past it), until
    /// the session has ended: its last bytes are given whatever the host
    /// holds.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        // Input that waited for the replies to leave: read on, now that
        // they may (as of the latest time handed in).
        if self.input_held && !self.peer_gone {
            self.read_input(self.now_ms);
        }
        let ended = self.session.has_ended() || self.peer_gone;
        let host = self.host_unsent.unwrap_or(0);
        if host >= OUTPUT_BUDGET && !ended {
            self.held = true;
            return 0;
        }
        let room = if ended { usize::MAX } else { OUTPUT_BUDGET - host };
        self.held = false;
        // Frame straight into the caller's buffer: tungstenite writes into
        // `io.output`, so lend it the caller's vector. What was queued
        // before (pongs, a close reply) goes first.
        let mut pending = std::mem::replace(&mut self.io.output, std::mem::take(out));
        self.io.output.extend_from_slice(&pending);
        pending.clear();
        // The pong tungstenite made for the last ping read and has not
        // written yet goes now: written with the next frame instead, it
        // would follow a close frame.
        let _ = self.ws.flush(&mut self.io);
        while !self.close_sent && !self.peer_gone && self.io.output.len() - start < TRANSMIT_BATCH_BYTES {
            if self.io.output.len() - start >= room {
                self.held = true;
                break;
            }
            let Some(o) = self.session.poll_transmit() else { break };
            let r = match o {
                GatewayOutput::Text(t) => self.ws.write(&mut self.io, Message::text(t)),
                GatewayOutput::Close { code, reason } => {
                    self.close_sent = true;
                    self.ws.close(
                        &mut self.io,
                        Some(CloseFrame { code: CloseCode::from(code), reason: reason.as_str().into() }),
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
        let n = out.len() - start;
        // Counted until the host's next report, so that the calls before
        // it stop at the budget. The time over the budget runs from the
        // host's reports alone (`handle_unsent`), which say what the
        // socket has taken.
        if let Some(u) = self.host_unsent.as_mut() {
            *u += n;
        }
        n
    }

    /// When `handle_timeout` must be called at the latest (Unix ms); `None`
    /// once the connection is over.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.is_closed() {
            return None;
        }
        let slow = self.slow_deadline().filter(|_| !self.session.has_ended()).map(|d| d.saturating_add(1));
        match (self.session.poll_timeout(), slow) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What happened: `Closed` once, with the code and reason.
    pub fn poll_event(&mut self) -> Option<GatewayEvent> {
        self.session.poll_event()
    }

    /// True when the connection is over: the host writes what
    /// `poll_transmit` returned last, then closes the socket and drops this
    /// object.
    pub fn is_closed(&self) -> bool {
        self.peer_gone || (self.session.has_ended() && self.io.output.is_empty() && self.session.is_closed())
    }
}
