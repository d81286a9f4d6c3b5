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
    }

    /// Time has reached `now_ms` (see [`GatewaySession::handle_timeout`]).
    pub fn handle_timeout(&mut self, now_ms: u64) {
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
        self.peer_gone || (self.session.has_ended() && self.io.output.is_empty() && self.session.is_closed())
    }
}
