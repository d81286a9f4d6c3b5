//! [`GatewayLink`]: a gateway connection as a host with a raw socket
//! drives it, from the `101` to the socket's close.
//!
//! A [`GatewayConnection`] speaks the protocol; what happens around it at
//! the socket is policy too, and it is the same in every host: the output
//! the socket has not taken yet (an [`Outbox`], whole frames), the end of a
//! session behind output the bot is not reading (the close goes right
//! after the frame being written; the rest is dropped, and the bot gets
//! those events again from its ack), the last writes of a closing
//! connection, and its lingering close (stop sending, discard what the bot
//! still sends, so it reads the close frame rather than a reset). The
//! link keeps all of it; the host reads and writes the socket, keeps its
//! clock, and does what [`GatewayLink::state`] says, as it does for an
//! HTTP connection's [`ConnectionState`]. The verbs are the HTTP
//! connection's: `handle_input`, `handle_eof`, `handle_timeout`,
//! `poll_transmit` and `sent`, `poll_timeout`.
//!
//! One clock for the host: every call takes `now`, the host's monotonic
//! clock in milliseconds (any origin), and [`GatewayLink::poll_timeout`]
//! answers on it; how long a closing socket may take runs on it. The
//! session's deadlines (heartbeats, the slow-consumer time) run on the
//! service's clock, which `/admin/advanceClock` moves under the manual
//! clock: the link reads it itself, from the clock the session was
//! accepted with, and converts the session's next deadline to the host's
//! clock.

use super::{CloseCode, GatewayConnection, GatewayEvent, Outbox, OUTPUT_BUDGET};
use crate::clock::Clock;
use crate::connection::http::ConnectionState;
use crate::connection::limits;

/// The time of a call on both clocks: the host's `now`, and the service's
/// clock read at the call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Now {
    service_ms: u64,
    host_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    /// The session is over (its slot freed, its acks written): the rest of
    /// the output goes out, then the link lingers or closes.
    Closing {
        linger: bool,
    },
    Lingering,
    Closed,
}

/// A gateway connection with its unsent output and its closing rules.
pub struct GatewayLink {
    /// `None` once the session is over: dropping it writes a pending ack
    /// and frees the bot's connection slot, before the last writes.
    conn: Option<Box<GatewayConnection>>,
    out: Outbox,
    phase: Phase,
    peer_eof: bool,
    end: Option<(u16, CloseCode)>,
    /// The service's clock, the session's time (captured at its accept).
    clock: Clock,
    now: Now,
    /// Closing or lingering: the host drops the socket then (host clock),
    /// whatever is still unsent.
    until: u64,
    /// Bytes discarded while lingering.
    discarded: usize,
}

impl GatewayLink {
    /// The link of a connection just upgraded. The session runs on the
    /// clock of the service that accepted it; under the manual clock,
    /// whose jumps cannot be slept on, the link asks to be looked at every
    /// [`limits::TICK_MS`].
    ///
    /// `head`: bytes to write ahead of the gateway's frames (the `101` and
    /// any answers before it, for a host that has not written them), or
    /// empty. Then call [`Self::handle_timeout`] (or
    /// [`Self::handle_input`] with the bytes that followed the request).
    pub fn new(conn: GatewayConnection, head: Vec<u8>) -> GatewayLink {
        let clock = conn.session().clock().clone();
        GatewayLink {
            conn: Some(Box::new(conn)),
            out: Outbox::with_head(head),
            phase: Phase::Open,
            peer_eof: false,
            end: None,
            clock,
            now: Now::default(),
            until: 0,
            discarded: 0,
        }
    }

    /// The session's connection while it runs; `None` once it is over.
    pub fn connection(&self) -> Option<&GatewayConnection> {
        self.conn.as_deref()
    }

    /// The same, to call it directly.
    pub fn connection_mut(&mut self) -> Option<&mut GatewayConnection> {
        self.conn.as_deref_mut()
    }

    /// Where the link stands: `Open` while the session runs; `Closing`
    /// while its last bytes go out; `Lingering` once they have (the host
    /// shuts its write side and keeps reading); `Closed` when the host
    /// closes the socket and drops the link.
    pub fn state(&self) -> ConnectionState {
        match self.phase {
            Phase::Open => ConnectionState::Open,
            Phase::Closing { .. } => ConnectionState::Closing,
            Phase::Lingering => ConnectionState::Lingering,
            Phase::Closed => ConnectionState::Closed,
        }
    }

    /// How the session ended (the close code sent or received, and why),
    /// once it has: for the host's logs.
    pub fn close_reason(&self) -> Option<(u16, CloseCode)> {
        self.end
    }

    /// Whether to read the socket now. While the session runs, as the
    /// connection says (not while the replies it owes a bot that does not
    /// read fill their budget); while closing or lingering, always (what
    /// arrives is discarded); never after the bot closed its side.
    pub fn wants_read(&self) -> bool {
        !self.peer_eof
            && match self.phase {
                Phase::Open => self.conn.as_ref().is_some_and(|c| c.wants_input()),
                Phase::Closing { .. } | Phase::Lingering => true,
                Phase::Closed => false,
            }
    }

    /// The bytes to write next (empty: nothing now). Borrowed: the host
    /// writes what the socket takes and says how much with [`Self::sent`].
    pub fn poll_transmit(&self) -> &[u8] {
        if self.phase == Phase::Closed {
            return &[];
        }
        self.out.pending()
    }

    /// Bytes still to write.
    pub fn unsent(&self) -> usize {
        if self.phase == Phase::Closed {
            0
        } else {
            self.out.len()
        }
    }

    /// The socket took `n` bytes of [`Self::poll_transmit`] at `now`. The
    /// session learns at once what is still unsent (the time over the
    /// budget ends at the write that brought it under, not at the next
    /// look); a closing link whose last byte went lingers or closes.
    /// Touches no storage.
    pub fn sent(&mut self, n: usize, now: u64) {
        let now = self.tick(now);
        self.out.advance(n);
        if let Some(c) = self.conn.as_mut() {
            c.handle_unsent(self.out.len(), now.service_ms);
        }
        if let Phase::Closing { linger } = self.phase {
            if self.out.is_empty() {
                self.phase = if linger && !self.peer_eof { Phase::Lingering } else { Phase::Closed };
            }
        }
    }

    /// Bytes read from the socket at `now`: the session's input (then
    /// [`Self::handle_timeout`]), or, once it is over, discarded; a
    /// lingering link closes once it has discarded [`limits::LINGER_BYTES`].
    /// May write acks and read the event log.
    pub fn handle_input(&mut self, bytes: &[u8], now: u64) {
        let at = self.tick(now);
        match self.phase {
            Phase::Open => {
                if let Some(c) = self.conn.as_mut() {
                    c.handle_input(bytes, at.service_ms);
                }
                self.run(at);
            }
            Phase::Lingering => {
                self.discarded = self.discarded.saturating_add(bytes.len());
                if self.discarded >= limits::LINGER_BYTES {
                    self.phase = Phase::Closed;
                }
            }
            Phase::Closing { .. } | Phase::Closed => {}
        }
    }

    /// The bot closed its side at `now`: a running session ends (its last
    /// output still goes, with no linger after it); a lingering link
    /// closes. May write acks.
    pub fn handle_eof(&mut self, now: u64) {
        let at = self.tick(now);
        self.peer_eof = true;
        match self.phase {
            Phase::Open => self.run(at),
            Phase::Closing { .. } => self.phase = Phase::Closing { linger: false },
            Phase::Lingering => self.phase = Phase::Closed,
            Phase::Closed => {}
        }
    }

    /// Runs the link at `now`: the session's deadlines, its output up to
    /// the budget (counting what the socket has not taken), and the end
    /// rules; a closing or lingering link whose time is up closes. Call it
    /// when [`Self::poll_timeout`] comes, and when the service's wake hook
    /// names the bot (new events: the same call, as a wake-up is a
    /// deadline of now). May write acks and read the event log.
    pub fn handle_timeout(&mut self, now: u64) {
        let at = self.tick(now);
        self.run(at);
    }

    fn run(&mut self, now: Now) {
        match self.phase {
            Phase::Open => {}
            Phase::Closing { .. } | Phase::Lingering if now.host_ms >= self.until => {
                self.phase = Phase::Closed;
                return;
            }
            _ => return,
        }
        let Some(c) = self.conn.as_mut() else { return };
        c.handle_unsent(self.out.len(), now.service_ms);
        c.handle_timeout(now.service_ms);
        let mut buf = self.out.take_spare();
        while c.poll_transmit(&mut buf) > 0 {}
        self.out.append(buf);
        // Not reported again here: the time at the budget counts from the
        // first look that finds the socket has not taken it (the next
        // poll), and ends at the write that brings it under (`sent`). A
        // bot whose socket takes bytes between two looks keeps up.
        while let Some(GatewayEvent::Closed { code, reason }) = c.poll_event() {
            self.end = Some((code, reason));
        }
        let closed = c.is_closed();
        if let Some((_, reason)) = self.end.filter(|_| self.out.len() >= OUTPUT_BUDGET) {
            // The session is over (4008 `slow_consumer` among others) and
            // its close frame, the last one it gave, sits behind output the
            // bot is not reading.
            if matches!(reason, CloseCode::ClosedByBot | CloseCode::ProtocolError) {
                // The bot is gone or broke the protocol: nothing more
                // is worth writing.
                self.finish(false, false);
                self.phase = Phase::Closed;
            } else {
                self.out.close_next();
                self.finish(true, !self.peer_eof);
            }
        } else if closed {
            // Let the bot read the close frame and answer it.
            self.finish(false, !self.peer_eof);
        } else if self.peer_eof {
            self.finish(false, false);
        }
    }

    /// The host ends the session with close `code` (1001
    /// `server_shutdown` at a stop; see [`GatewayConnection::close`]): its
    /// close frame goes right after the frame being written, the frames
    /// not begun are dropped, and the socket gets
    /// [`limits::SLOW_CONSUMER_DROP_MS`] for it. False, changing nothing,
    /// once the session is over. May write acks.
    pub fn close(&mut self, code: CloseCode, now: u64) -> bool {
        self.tick(now);
        let (Phase::Open, Some(c)) = (self.phase, self.conn.as_mut()) else { return false };
        let mut buf = self.out.take_spare();
        if c.close(code) {
            while c.poll_transmit(&mut buf) > 0 {}
        }
        self.out.append(buf);
        while let Some(GatewayEvent::Closed { code, reason }) = c.poll_event() {
            self.end = Some((code, reason));
        }
        self.out.close_next();
        self.finish(true, !self.peer_eof);
        true
    }

    /// When the host must call [`Self::handle_timeout`] at the latest, on
    /// its own clock: now, when the session held output back and the socket has
    /// room again; the session's next deadline (at most
    /// [`limits::GATEWAY_LOOK_MS`] away, or [`limits::TICK_MS`] under the
    /// manual clock, whose jumps cannot be slept on); the end of a closing
    /// or lingering link's time. `None` once closed.
    pub fn poll_timeout(&self) -> Option<u64> {
        let now = self.now;
        match self.phase {
            Phase::Closed => None,
            Phase::Closing { .. } | Phase::Lingering => Some(self.until),
            Phase::Open => {
                let c = self.conn.as_ref()?;
                if c.wants_transmit() {
                    return Some(now.host_ms);
                }
                let manual = self.clock.is_manual();
                let look = if manual { limits::TICK_MS } else { limits::GATEWAY_LOOK_MS };
                let wait = match c.poll_timeout() {
                    // Already here right after a look that found nothing
                    // due (a deadline fires strictly after it): wait for the
                    // clock to move rather than spin.
                    Some(d) if d <= now.service_ms => {
                        if manual {
                            look
                        } else {
                            1
                        }
                    }
                    Some(d) => (d - now.service_ms).min(look),
                    None => look,
                };
                Some(now.host_ms.saturating_add(wait))
            }
        }
    }

    /// The time of a call: the host's `now` and the service's clock, each
    /// never going back.
    fn tick(&mut self, now: u64) -> Now {
        self.now.service_ms = self.now.service_ms.max(self.clock.now_ms());
        self.now.host_ms = self.now.host_ms.max(now);
        self.now
    }

    /// The session is over: it is dropped now (its pending ack written,
    /// its slot freed), and the rest of the output has until
    /// [`limits::SLOW_CONSUMER_DROP_MS`] (a close the server forced on a
    /// bot behind its output) or [`limits::LINGER_MS`].
    fn finish(&mut self, forced: bool, linger: bool) {
        if let Some(c) = self.conn.as_mut() {
            while let Some(GatewayEvent::Closed { code, reason }) = c.poll_event() {
                self.end = Some((code, reason));
            }
        }
        self.conn = None;
        let grace = if forced { limits::SLOW_CONSUMER_DROP_MS } else { limits::LINGER_MS };
        self.until = self.now.host_ms.saturating_add(grace);
        self.phase = if !self.out.is_empty() {
            Phase::Closing { linger }
        } else if linger {
            Phase::Lingering
        } else {
            Phase::Closed
        };
    }
}
