//! One HTTP/1.1 server connection, sans-IO: every rule a host that reads
//! raw sockets follows for one connection, decided once for every host.
//!
//! The host owns the socket and the clock. It gives the connection what
//! it read ([`HttpConnection::handle_input`], [`HttpConnection::handle_eof`])
//! with its monotonic time in milliseconds, takes complete requests
//! ([`HttpConnection::poll_request`]), answers them
//! ([`HttpConnection::answer`]), writes what
//! [`HttpConnection::poll_transmit`] holds and says how much went
//! ([`HttpConnection::sent`]), calls [`HttpConnection::handle_timeout`]
//! at [`HttpConnection::poll_timeout`], and does with the socket what
//! [`HttpConnection::state`] says.
//!
//! What it decides:
//! - **Framing and its bounds.** The core's [`RequestFramer`] delimits each
//!   request; the input buffer never holds more than one request's worst
//!   case ([`RequestFramer::max_request_bytes`]): past it the socket is not
//!   read ([`HttpConnection::wants_read`]).
//! - **Answers in order.** Pipelined requests wait in the buffer. A host
//!   may take several requests of one connection before answering (to
//!   answer many connections' requests in one commit) only while each is
//!   a plain request that keeps the connection; any other (the host API, a
//!   poll that may park, the gateway, a path this listener does not serve,
//!   `Connection: close`) must be answered before the next is taken, as
//!   its answer decides what the connection is afterwards.
//! - **The output budget.** No request is taken while the answers not yet
//!   sent reach [`crate::http::MAX_UNSENT_BYTES_PER_CONNECTION`]
//!   ([`should_read`]): a client that does not read its answers stops
//!   being read.
//! - **`Expect: 100-continue`**, answered once per request, when its head
//!   is whole and acceptable and every earlier request is answered.
//! - **The `Connection` header of an answer**: `close` when the request
//!   ends the connection, `keep-alive` to an HTTP/1.0 client that asked
//!   to keep it; then the connection closes after a closing request.
//! - **`HEAD`**: its answer is the status and headers alone
//!   (`http::head_answer`), whatever the host was given.
//! - **Refusals.** A stream that cannot carry a request gets the
//!   framer's error with `Connection: close` (bytes no request line
//!   starts with, a TLS ClientHello say, as soon as they arrive), then a
//!   lingering close:
//!   input is discarded for [`host::LINGER_MS`] or [`host::LINGER_BYTES`]
//!   so the client reads the answer rather than a reset.
//! - **Deadlines.** A request must arrive whole within the request timeout
//!   of its first byte, else 408 ([`super::request_timeout`]); a
//!   connection with nothing to do for the idle timeout is closed; a peer
//!   that takes none of the bytes pending for it for
//!   [`host::WRITE_TIMEOUT_MS`] is dropped ([`Expired::Write`]). The host
//!   keeps no timer of its own: [`HttpConnection::poll_timeout`] names
//!   every deadline.
//! - **Half close.** A peer that closes its side gets the answers to the
//!   requests it sent whole; a partial request is dropped.
//! - **The busy refusal.** A connection refused at the connection limit
//!   ([`HttpConnection::refusing_busy`]) takes no request: it sends the
//!   503 `server_busy`, then lingers with the refusal's own, shorter
//!   bounds ([`host::REFUSAL_LINGER_MS`], [`host::REFUSAL_LINGER_BYTES`]),
//!   so a client that was writing its request reads the 503 rather than a
//!   reset, and a flood of refused connections costs little. How many may
//!   linger at once is [`host::refusal_may_linger`].

use super::lane::{route, Lane, Listener};
use super::limits as host;
use crate::http::{head_answer, is_head_request, should_read, Framing, RequestFramer, RequestHead};
use std::collections::VecDeque;

/// The deadlines of one connection (the server's `--request-timeout` and
/// `--idle-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ConnectionOptions {
    /// A request's head and body arrive within this long of its first byte.
    pub request_timeout_ms: u64,
    /// A connection with nothing to read or send for this long is closed.
    pub idle_timeout_ms: u64,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions { request_timeout_ms: host::REQUEST_TIMEOUT_MS, idle_timeout_ms: host::IDLE_TIMEOUT_MS }
    }
}

/// What the host does with the connection's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum ConnectionState {
    /// Reading requests and sending answers.
    Open,
    /// Sending what [`HttpConnection::poll_transmit`] holds; then the connection
    /// lingers or closes. Input is read and discarded.
    Closing,
    /// Everything is sent: the host shuts its write side and reads (the
    /// connection discards) until the peer closes or the linger ends.
    Lingering,
    /// The host closes the socket (and forgets a poll it parked for it).
    Closed,
}

/// Why [`HttpConnection::handle_timeout`] acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub enum Expired {
    /// No deadline had passed.
    Nothing,
    /// A request did not arrive whole in time: its 408 is queued and the
    /// connection closes once it is sent. The host counts it
    /// (`Service::note_request_timeout`).
    Request,
    /// Nothing happened on the connection for the idle timeout: closed.
    Idle,
    /// The lingering close ended: closed.
    Linger,
    /// Output was pending and the peer took none of it for
    /// [`host::WRITE_TIMEOUT_MS`]: closed (nothing is logged or counted,
    /// as a peer that stops reading is no request's fault).
    Write,
}

/// A complete request the host takes from the connection to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Which way it goes (the listener's rule first).
    pub route: Lane,
    /// What the framer read from its head.
    pub head: RequestHead,
    start: usize,
    len: usize,
}

/// A request taken and not yet answered.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    route: Lane,
    keep_alive: bool,
    http10: bool,
    /// A `HEAD` request: its answer goes without a body.
    head: bool,
}

impl InFlight {
    /// Whether a later request may be taken before this one is answered:
    /// only after a plain request that keeps the connection, whose answer
    /// changes nothing about the connection.
    fn lets_next_through(&self) -> bool {
        self.keep_alive && matches!(self.route, Lane::Batch | Lane::Alone)
    }
}

/// What waits for every request in flight to be answered before it is
/// sent: it comes after their answers.
#[derive(Debug)]
enum Deferred {
    /// `100 Continue` for the request being received.
    Continue,
    /// The framer's refusal; then a lingering close.
    Refuse(Vec<u8>),
}

/// How long and how much a lingering close discards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Linger {
    ms: u64,
    bytes: usize,
}

/// After an answer that ends a connection.
const LINGER: Linger = Linger { ms: host::LINGER_MS, bytes: host::LINGER_BYTES };
/// After the busy refusal: shorter, as a refused client has no request to
/// finish here and a flood of them must cost little.
const REFUSAL_LINGER: Linger = Linger { ms: host::REFUSAL_LINGER_MS, bytes: host::REFUSAL_LINGER_BYTES };

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    Closing { linger: bool },
    Lingering { until: u64, lingered: usize },
    Closed,
}

/// A buffer drained past this is released rather than kept while the
/// connection idles.
const KEEP_BYTES: usize = 64 * 1024;

/// One HTTP/1.1 server connection's state (see the module's comment).
#[derive(Debug)]
pub struct HttpConnection {
    listener: Listener,
    opts: ConnectionOptions,
    framer: RequestFramer,
    max_input: usize,
    /// Bytes read; the first `taken` were framed into requests already
    /// taken (kept until the next input, so a host may answer from them).
    input: Vec<u8>,
    taken: usize,
    /// The input may hold a complete request not framed yet.
    ready: bool,
    in_flight: VecDeque<InFlight>,
    deferred: Option<Deferred>,
    continue_sent: bool,
    output: Vec<u8>,
    output_sent: usize,
    phase: Phase,
    linger: Linger,
    peer_closed: bool,
    last_activity: u64,
    /// When the first byte of the request being received arrived.
    request_started: Option<u64>,
    /// Since when the connection waits for a request (accepted, or its
    /// last answer queued).
    waiting_since: u64,
    /// Since when its one request in flight is a long poll the core
    /// parked ([`Self::park`]): it waits on the service, not on work, so
    /// it may be evicted as a connection waiting for a request may.
    parked_since: Option<u64>,
    /// Since when output waits for the peer: when it became pending, or
    /// the last write that took some of it. `None` while nothing waits.
    write_since: Option<u64>,
}

impl HttpConnection {
    /// A connection accepted at `now` on `listener`, framing with
    /// `framer` (the service's `request_framer()`).
    pub fn new(listener: Listener, opts: ConnectionOptions, framer: RequestFramer, now: u64) -> Self {
        HttpConnection {
            listener,
            opts,
            max_input: framer.max_request_bytes(),
            framer,
            input: Vec::new(),
            taken: 0,
            ready: false,
            in_flight: VecDeque::new(),
            deferred: None,
            continue_sent: false,
            output: Vec::new(),
            output_sent: 0,
            phase: Phase::Open,
            linger: LINGER,
            peer_closed: false,
            last_activity: now,
            request_started: None,
            waiting_since: now,
            parked_since: None,
            write_since: None,
        }
    }

    /// A connection refused at `now` because the host is at its connection
    /// limit with every connection busy: it never takes a request. Its
    /// [`Self::poll_transmit`] holds the 503 `server_busy`
    /// ([`super::server_busy`]); input is discarded. Once the answer is
    /// sent it lingers for [`host::REFUSAL_LINGER_MS`] or
    /// [`host::REFUSAL_LINGER_BYTES`] (not the longer linger of a refused
    /// request: this client never got a turn), then is closed; the peer's
    /// EOF ends it sooner. It is never waiting for a request
    /// ([`Self::waiting_since`] is `None`), so it is not evicted, and the
    /// host counts it apart from its connection limit, at most as many at
    /// once as [`host::refusal_may_linger`] allows.
    pub fn refusing_busy(now: u64) -> Self {
        // No request is ever framed: the framer's limits do not matter.
        let mut c = HttpConnection::new(Listener::All, ConnectionOptions::default(), RequestFramer::new(0), now);
        c.linger = REFUSAL_LINGER;
        c.output = super::server_busy();
        c.write_since = Some(now);
        c.phase = Phase::Closing { linger: true };
        c
    }

    /// What the host does with the socket now.
    pub fn state(&self) -> ConnectionState {
        match self.phase {
            Phase::Open => ConnectionState::Open,
            Phase::Closing { .. } => ConnectionState::Closing,
            Phase::Lingering { .. } => ConnectionState::Lingering,
            Phase::Closed => ConnectionState::Closed,
        }
    }

    fn unsent(&self) -> usize {
        self.output.len() - self.output_sent
    }

    fn pending_input(&self) -> usize {
        self.input.len() - self.taken
    }

    /// How many bytes the host may add to the buffer now (0: none): an
    /// open connection takes input while its answers are under the
    /// budget, up to one request's worst case; while a request is being
    /// answered it takes input too (up to that bound: its client closing
    /// is how a parked poll is cancelled). Closing and lingering
    /// connections take anything, and discard it.
    pub fn read_limit(&self) -> usize {
        if self.peer_closed {
            return 0;
        }
        match self.phase {
            Phase::Closed => 0,
            Phase::Closing { .. } | Phase::Lingering { .. } => usize::MAX,
            Phase::Open if self.in_flight.is_empty() && !should_read(self.unsent()) => 0,
            Phase::Open => self.max_input.saturating_sub(self.pending_input()),
        }
    }

    /// Whether the host waits for the socket to be readable: input is
    /// taken ([`Self::read_limit`]) and no complete request may be waiting
    /// in the buffer already (those are taken first).
    pub fn wants_read(&self) -> bool {
        self.read_limit() > 0 && !(self.phase == Phase::Open && self.ready && self.in_flight.is_empty())
    }

    /// Whether [`Self::poll_request`] may have something to take: the
    /// connection is open, its buffer may hold a complete request, nothing
    /// taken blocks the next, and its answers are under the budget.
    pub fn has_request(&self) -> bool {
        self.phase == Phase::Open
            && self.ready
            && self.in_flight.iter().all(InFlight::lets_next_through)
            && !matches!(self.deferred, Some(Deferred::Refuse(_)))
            && should_read(self.unsent())
    }

    /// Bytes the host read from the socket at `now`.
    pub fn handle_input(&mut self, bytes: &[u8], now: u64) {
        if bytes.is_empty() {
            return;
        }
        self.last_activity = now;
        let max_lingered = self.linger.bytes;
        match &mut self.phase {
            Phase::Open => {}
            Phase::Closing { .. } | Phase::Closed => return,
            Phase::Lingering { lingered, .. } => {
                *lingered += bytes.len();
                if *lingered >= max_lingered {
                    self.phase = Phase::Closed;
                }
                return;
            }
        }
        // Requests taken before are the host's now: their bytes go.
        self.input.drain(..self.taken);
        self.taken = 0;
        if self.input.is_empty() {
            // A request's first bytes: its deadline starts.
            self.request_started = Some(now);
            if self.input.capacity() > KEEP_BYTES {
                self.input = Vec::new();
            }
        }
        self.input.extend_from_slice(bytes);
        self.ready = true;
    }

    /// The peer closed its side at `now`: the requests it sent whole are
    /// still answered, then the connection closes; a poll being answered
    /// has nobody left to answer and the connection closes at once.
    pub fn handle_eof(&mut self, now: u64) {
        self.peer_closed = true;
        match self.phase {
            Phase::Open if self.in_flight.iter().any(|r| r.route == Lane::Poll) => self.phase = Phase::Closed,
            Phase::Open => {
                self.ready = true;
                self.close_if_drained(now);
            }
            // Send the rest, then close: nobody reads a lingering close.
            Phase::Closing { .. } => self.phase = Phase::Closing { linger: false },
            Phase::Lingering { .. } => self.phase = Phase::Closed,
            Phase::Closed => {}
        }
    }

    /// A peer that closed its side, with nothing left to answer: the
    /// connection ends once its answers are sent.
    fn close_if_drained(&mut self, now: u64) {
        if self.peer_closed && self.in_flight.is_empty() && self.pending_input() == 0 && self.phase == Phase::Open {
            self.close(false, now);
        }
    }

    /// The next complete request to answer, in order; `None` when there is
    /// none to take now (see [`Self::has_request`]). This machine's
    /// `poll_event`: what it reports is a request to answer. Steps the connection
    /// takes by itself on the way: `100 Continue` for a request whose head
    /// asked for it, a refusal for a stream that cannot carry a request
    /// (then the connection closes), the close of a half-closed connection
    /// with nothing left.
    pub fn poll_request(&mut self, now: u64) -> Option<Taken> {
        if !self.has_request() {
            return None;
        }
        let from = self.taken;
        match self.framer.frame(&self.input[from..]) {
            Framing::Incomplete => {
                self.ready = false;
                if !self.continue_sent && self.framer.pending_head().is_some_and(|h| h.expect_continue) {
                    self.defer(Deferred::Continue, now);
                }
                if self.peer_closed && self.in_flight.is_empty() {
                    // A peer that closed its side sent nothing more whole: a
                    // partial request is dropped.
                    self.close(false, now);
                }
                None
            }
            Framing::Invalid(mut refusal) => {
                self.ready = false;
                if is_head_request(&self.input[from..]) {
                    refusal.truncate(head_answer(&refusal).len());
                }
                self.defer(Deferred::Refuse(refusal), now);
                None
            }
            Framing::Complete { len, head } => {
                self.taken += len;
                self.continue_sent = false;
                let request = &self.input[from..from + len];
                let route = route(self.listener, head.path(request));
                let is_head = head.method(request) == "HEAD";
                self.in_flight.push_back(InFlight {
                    route,
                    keep_alive: head.keep_alive,
                    http10: head.http_minor == 0,
                    head: is_head,
                });
                Some(Taken { route, head, start: from, len })
            }
        }
    }

    /// The bytes of a request [`Self::poll_request`] gave: valid until the
    /// next [`Self::handle_input`].
    pub fn request(&self, taken: &Taken) -> &[u8] {
        &self.input[taken.start..taken.start + taken.len]
    }

    /// Sends `what` now if nothing is in flight, else once the last
    /// request in flight is answered.
    fn defer(&mut self, what: Deferred, now: u64) {
        self.deferred = Some(what);
        if self.in_flight.is_empty() {
            self.run_deferred(now);
        }
    }

    fn run_deferred(&mut self, now: u64) {
        match self.deferred.take() {
            None => {}
            Some(Deferred::Continue) => {
                self.continue_sent = true;
                self.output.extend_from_slice(super::CONTINUE);
                self.note_queued(now);
            }
            Some(Deferred::Refuse(refusal)) => {
                self.queue_with_header(&refusal, Some("close"), now);
                // The refused body may still be arriving.
                self.close(true, now);
            }
        }
    }

    /// The answer to the oldest request taken and not answered, at `now`:
    /// queued with the `Connection` header its request calls for; after a
    /// request that ends the connection, the connection closes once it is
    /// sent. An empty `response` says the host could not get the core's
    /// answer (the call failed or panicked): the request gets the core's
    /// 500 `answer_failed` ([`super::answer_failed`]) in its turn, so the
    /// client reads an answer for it and the ones after it stay in order.
    pub fn answer(&mut self, response: &[u8], now: u64) {
        self.parked_since = None;
        let Some(req) = self.in_flight.pop_front() else { return };
        if self.phase != Phase::Open {
            return;
        }
        let connection = if !req.keep_alive {
            Some("close")
        } else if req.http10 {
            Some("keep-alive")
        } else {
            None
        };
        let failed;
        let response = if response.is_empty() {
            failed = super::answer_failed();
            &failed[..]
        } else {
            response
        };
        self.queue_with_header(if req.head { head_answer(response) } else { response }, connection, now);
        if !req.keep_alive {
            self.close(false, now);
            return;
        }
        if self.in_flight.is_empty() {
            // Answered: the connection waits afresh, and what is left is
            // the start of the next request.
            self.waiting_since = now;
            self.request_started = (self.pending_input() > 0).then_some(now);
            if self.pending_input() > 0 {
                self.ready = true;
            }
            self.run_deferred(now);
            self.close_if_drained(now);
        }
    }

    /// The host's own refusal of the oldest request taken (one it cannot
    /// read after all): queued with `Connection: close`, then the
    /// connection closes once it is sent, without lingering (the request
    /// was read whole).
    pub fn refuse(&mut self, response: &[u8], now: u64) {
        let Some(req) = self.in_flight.pop_front() else { return };
        if self.phase != Phase::Open {
            return;
        }
        self.queue_with_header(if req.head { head_answer(response) } else { response }, Some("close"), now);
        self.close(false, now);
    }

    /// Output was queued at `now`: if none was pending, the peer's time to
    /// take it starts.
    fn note_queued(&mut self, now: u64) {
        if self.write_since.is_none() && self.unsent() > 0 {
            self.write_since = Some(now);
        }
    }

    /// Appends `response`, with `Connection: <connection>` right after its
    /// status line, at `now`.
    fn queue_with_header(&mut self, response: &[u8], connection: Option<&str>, now: u64) {
        let Some(value) = connection else {
            self.output.extend_from_slice(response);
            self.note_queued(now);
            return;
        };
        let split = response.windows(2).position(|w| w == b"\r\n").map_or(response.len(), |p| p + 2);
        self.output.reserve(response.len() + 24);
        self.output.extend_from_slice(&response[..split]);
        self.output.extend_from_slice(b"Connection: ");
        self.output.extend_from_slice(value.as_bytes());
        self.output.extend_from_slice(b"\r\n");
        self.output.extend_from_slice(&response[split..]);
        self.note_queued(now);
    }

    /// Ends the connection once its output is sent (the host could not
    /// answer, or stops): no lingering.
    pub fn close(&mut self, linger: bool, now: u64) {
        if matches!(self.phase, Phase::Closed | Phase::Lingering { .. }) {
            return;
        }
        self.phase = Phase::Closing { linger };
        // What is still buffered is never read as a request (a host may
        // still be reading a request it took from it).
        self.in_flight.clear();
        self.parked_since = None;
        self.deferred = None;
        self.ready = false;
        self.request_started = None;
        self.after_flush(now);
    }

    /// Closing with everything sent: linger (unless the peer is gone) or
    /// close.
    fn after_flush(&mut self, now: u64) {
        if let Phase::Closing { linger } = self.phase {
            if self.unsent() == 0 {
                self.phase = if linger && !self.peer_closed {
                    Phase::Lingering { until: now + self.linger.ms, lingered: 0 }
                } else {
                    Phase::Closed
                };
            }
        }
    }

    /// The request of a `GET /bot/gateway` the host upgraded (its `101`
    /// answer is the host's to send, after this): the connection is the
    /// gateway's from here. Returns what the bot sent after its request
    /// (the gateway's first input) and the answers not yet sent (to send
    /// before the `101`). The connection is closed afterwards.
    pub fn upgrade(&mut self) -> (Vec<u8>, Vec<u8>) {
        let input = self.input.split_off(self.taken);
        let output = self.output.split_off(self.output_sent);
        self.input = Vec::new();
        self.output = Vec::new();
        self.output_sent = 0;
        self.write_since = None;
        self.taken = 0;
        self.in_flight.clear();
        self.deferred = None;
        self.phase = Phase::Closed;
        (input, output)
    }

    /// The bytes to write to the socket (empty: nothing now). Borrowed:
    /// the host writes what the socket takes and says how much with
    /// [`Self::sent`].
    pub fn poll_transmit(&self) -> &[u8] {
        &self.output[self.output_sent..]
    }

    /// The host wrote the first `n` bytes of [`Self::poll_transmit`] at
    /// `now`: the peer's time to take the rest starts again.
    pub fn sent(&mut self, n: usize, now: u64) {
        let n = n.min(self.unsent());
        if n == 0 {
            return;
        }
        self.output_sent += n;
        self.last_activity = now;
        self.write_since = (self.unsent() > 0).then_some(now);
        if self.output_sent == self.output.len() {
            self.output_sent = 0;
            self.output.clear();
            if self.output.capacity() > KEEP_BYTES {
                self.output = Vec::new();
            }
            self.after_flush(now);
        } else if self.output_sent >= self.unsent() {
            // What the socket took goes once it is half the buffer (one
            // move of what is left, at most as long: amortized constant a
            // byte). Kept, it would stay in memory as long as the client
            // reads slowly, more answers appended behind it: a client that
            // reads a little now and then would hold the kernel's share of
            // its answers twice, and the budget of unsent answers would
            // not bound the buffer.
            self.output.drain(..self.output_sent);
            self.output_sent = 0;
            if self.output.capacity() > KEEP_BYTES.max(2 * self.output.len()) {
                self.output.shrink_to(KEEP_BYTES.max(self.output.len()));
            }
        }
    }

    /// Whether the connection waits for a request with nothing in flight
    /// and nothing to send (a host stopping closes such a connection when
    /// no byte waits in its socket). Its first byte arriving ends it.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Open && self.in_flight.is_empty() && self.unsent() == 0 && self.pending_input() == 0
    }

    /// Since when the connection waits for a request, when it could be
    /// evicted to admit another (open, nothing in flight, nothing to
    /// send); `None` when it is busy. At a connection limit the one that
    /// has waited longest makes room.
    /// A connection whose one request in flight is a parked long poll
    /// ([`Self::park`]) waits too, since it parked: its client holds a
    /// connection and gives the server no work, so a bot's thousand parked
    /// polls cannot keep every other client out (evicting it cancels the
    /// poll; its offset stays acknowledged, the bot polls again).
    pub fn waiting_since(&self) -> Option<u64> {
        if self.phase != Phase::Open || self.unsent() != 0 {
            return None;
        }
        match self.in_flight.len() {
            0 => Some(self.waiting_since),
            1 => self.parked_since,
            _ => None,
        }
    }

    /// The request in flight, a `getUpdates` taken from this connection,
    /// was parked by the core at `now` (`Handled::Parked`): until its
    /// answer, the connection counts as waiting from `now` on
    /// ([`Self::waiting_since`]). Nothing else in flight: no effect.
    pub fn park(&mut self, now: u64) {
        if self.phase == Phase::Open && self.in_flight.len() == 1 && self.in_flight[0].route == Lane::Poll {
            self.parked_since = Some(now);
        }
    }

    fn idle_deadline(&self) -> Option<u64> {
        self.is_idle().then(|| self.last_activity.saturating_add(self.opts.idle_timeout_ms).saturating_add(1))
    }

    /// Only for an incomplete request, and only while nothing waits for
    /// the peer to read: a request the connection stopped reading or
    /// framing (the budget) is not the client's delay.
    fn request_deadline(&self) -> Option<u64> {
        let started = self.request_started?;
        (self.phase == Phase::Open && self.in_flight.is_empty() && self.unsent() == 0 && !self.ready)
            .then(|| started.saturating_add(self.opts.request_timeout_ms).saturating_add(1))
    }

    /// While output waits for the peer (open or closing): the peer must
    /// take some of it within [`host::WRITE_TIMEOUT_MS`] of when it became
    /// pending or of the last write that took some.
    fn write_deadline(&self) -> Option<u64> {
        let since = self.write_since.filter(|_| self.unsent() > 0)?;
        matches!(self.phase, Phase::Open | Phase::Closing { .. })
            .then(|| since.saturating_add(host::WRITE_TIMEOUT_MS).saturating_add(1))
    }

    /// When [`Self::handle_timeout`] next has something to do, on the
    /// host's monotonic clock; `None` when no deadline runs. It names
    /// every deadline of the connection (the write stall's too): the host
    /// sleeps on this and nothing else.
    pub fn poll_timeout(&self) -> Option<u64> {
        let phase = match self.phase {
            Phase::Lingering { until, .. } => Some(until),
            Phase::Open => match (self.idle_deadline(), self.request_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            _ => None,
        };
        match (phase, self.write_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Acts on the deadlines that passed by `now`.
    pub fn handle_timeout(&mut self, now: u64) -> Expired {
        if self.write_deadline().is_some_and(|d| now >= d) {
            // The peer reads nothing: what waits for it is dropped with
            // the socket.
            self.phase = Phase::Closed;
            self.output = Vec::new();
            self.output_sent = 0;
            self.write_since = None;
            self.in_flight.clear();
            self.parked_since = None;
            self.deferred = None;
            self.ready = false;
            return Expired::Write;
        }
        match self.phase {
            Phase::Lingering { until, .. } if now >= until => {
                self.phase = Phase::Closed;
                Expired::Linger
            }
            Phase::Open if self.idle_deadline().is_some_and(|d| now >= d) => {
                self.phase = Phase::Closed;
                Expired::Idle
            }
            Phase::Open if self.request_deadline().is_some_and(|d| now >= d) => {
                self.output.extend_from_slice(&super::request_timeout());
                self.note_queued(now);
                self.close(false, now);
                Expired::Request
            }
            _ => Expired::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: &[u8] = b"GET /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
    const SEND: &[u8] = b"POST /bot/sendMessage HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";

    fn conn() -> HttpConnection {
        HttpConnection::new(
            Listener::All,
            ConnectionOptions { request_timeout_ms: 1_000, idle_timeout_ms: 5_000 },
            RequestFramer::new(1024),
            0,
        )
    }

    fn drain(c: &mut HttpConnection, now: u64) -> String {
        let out = String::from_utf8(c.poll_transmit().to_vec()).unwrap();
        c.sent(out.len(), now);
        out
    }

    #[test]
    fn one_request_is_taken_answered_and_the_connection_stays() {
        let mut c = conn();
        assert!(c.wants_read());
        c.handle_input(GET, 1);
        assert!(!c.wants_read(), "a complete request waits: no read");
        let t = c.poll_request(2).unwrap();
        assert_eq!(t.route, Lane::Alone);
        assert_eq!(c.request(&t), GET);
        assert!(c.poll_request(2).is_none());
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 3);
        assert_eq!(drain(&mut c, 4), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(c.state(), ConnectionState::Open);
        assert!(c.wants_read());
        assert_eq!(c.waiting_since(), Some(3));
    }

    #[test]
    fn pipelined_plain_requests_are_taken_together_and_answered_in_order() {
        let mut c = conn();
        let mut bytes = SEND.to_vec();
        bytes.extend_from_slice(GET);
        bytes.extend_from_slice(b"GET /bot/getUpdates HTTP/1.1\r\n\r\n");
        bytes.extend_from_slice(SEND);
        c.handle_input(&bytes, 0);
        let a = c.poll_request(0).unwrap();
        let b = c.poll_request(0).unwrap();
        let p = c.poll_request(0).unwrap();
        assert_eq!((a.route, b.route, p.route), (Lane::Batch, Lane::Alone, Lane::Poll));
        assert_eq!(c.request(&b), GET);
        assert!(c.poll_request(0).is_none(), "a poll in flight blocks the next request");
        c.answer(b"HTTP/1.1 200 OK\r\n\r\na", 1);
        c.answer(b"HTTP/1.1 200 OK\r\n\r\nb", 1);
        assert!(c.poll_request(1).is_none());
        c.answer(b"HTTP/1.1 200 OK\r\n\r\np", 2);
        assert_eq!(c.poll_request(2).unwrap().route, Lane::Batch);
        assert_eq!(drain(&mut c, 2), "HTTP/1.1 200 OK\r\n\r\naHTTP/1.1 200 OK\r\n\r\nbHTTP/1.1 200 OK\r\n\r\np");
    }

    #[test]
    fn connection_header_close_and_http10_keep_alive() {
        let mut c = conn();
        c.handle_input(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n", 0);
        c.poll_request(0).unwrap();
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
        let t = c.poll_request(0).unwrap();
        assert!(!t.head.keep_alive);
        assert!(c.poll_request(0).is_none(), "nothing after a closing request");
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert_eq!(
            drain(&mut c, 2),
            "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n\
             HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        );
        assert_eq!(c.state(), ConnectionState::Closed, "closed once sent, without lingering");
    }

    #[test]
    fn an_empty_answer_is_the_cores_answer_failed_in_its_turn() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(GET);
        c.handle_input(&bytes, 0);
        c.poll_request(0).unwrap();
        c.poll_request(0).unwrap();
        // The first call failed; the second was answered.
        c.answer(&[], 1);
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1);
        let failed = String::from_utf8(super::super::answer_failed()).unwrap();
        assert!(failed.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{failed}");
        assert_eq!(drain(&mut c, 2), format!("{failed}HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert_eq!(c.state(), ConnectionState::Open, "the connection goes on, as after any answer");
        // A request that ends the connection gets it with its `Connection: close`.
        c.handle_input(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", 3);
        c.poll_request(3).unwrap();
        c.answer(&[], 4);
        let closing = failed.replacen("\r\n", "\r\nConnection: close\r\n", 1);
        assert_eq!(drain(&mut c, 5), closing);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn a_hosts_refusal_closes_without_a_linger() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(GET);
        c.handle_input(&bytes, 0);
        c.poll_request(0).unwrap();
        c.refuse(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", 1);
        assert!(c.poll_request(1).is_none(), "nothing after a refusal");
        assert_eq!(drain(&mut c, 2), "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn continue_is_sent_once_when_the_head_is_whole() {
        let mut c = conn();
        c.handle_input(b"POST /bot/sendMessage HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", 0);
        assert!(c.poll_request(0).is_none());
        assert_eq!(drain(&mut c, 0), "HTTP/1.1 100 Continue\r\n\r\n");
        c.handle_input(b"{", 1);
        assert!(c.poll_request(1).is_none());
        assert_eq!(c.poll_transmit(), b"", "once per request");
        c.handle_input(b"}", 2);
        assert_eq!(c.poll_request(2).unwrap().route, Lane::Batch);
    }

    #[test]
    fn continue_behind_a_request_in_flight_follows_its_answer() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(b"POST /bot/x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        c.handle_input(&bytes, 0);
        c.poll_request(0).unwrap();
        assert!(c.poll_request(0).is_none());
        assert_eq!(c.poll_transmit(), b"");
        c.answer(b"HTTP/1.1 200 OK\r\n\r\n", 1);
        assert_eq!(drain(&mut c, 1), "HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn a_head_request_is_answered_without_the_body() {
        let mut c = conn();
        let answer = b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n{}";
        c.handle_input(b"HEAD /bot/getMe HTTP/1.1\r\n\r\n", 0);
        c.poll_request(0).unwrap();
        c.answer(answer, 1);
        // Status and headers, Content-Length too, as the answer has them.
        assert_eq!(drain(&mut c, 1), "HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(c.state(), ConnectionState::Open, "the connection stays");
        // The next request's answer keeps its body.
        c.handle_input(GET, 2);
        c.poll_request(2).unwrap();
        c.answer(answer, 3);
        assert!(drain(&mut c, 3).ends_with("\r\n\r\n{}"));
        // A host's refusal, and a framing refusal, of a HEAD request too.
        c.handle_input(b"HEAD /bot/getMe HTTP/1.1\r\n\r\n", 4);
        c.poll_request(4).unwrap();
        c.refuse(answer, 5);
        assert_eq!(
            drain(&mut c, 5),
            "HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nAllow: POST\r\nContent-Length: 2\r\n\r\n"
        );
        let mut c = conn();
        c.handle_input(b"\r\nHEAD /bot/x HTTP/1.1\r\nContent-Length: 999999\r\n\r\n", 0);
        assert!(c.poll_request(0).is_none());
        let out = drain(&mut c, 0);
        assert!(out.starts_with("HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\n"), "{out}");
    }

    #[test]
    fn bytes_no_request_starts_with_are_refused_at_once() {
        // A TLS ClientHello's first bytes, a NUL, a space before any method.
        for start in [&b"\x16\x03\x01\x02\x00\x01"[..], b"\x00", b"G\x00", b" GET / HTTP/1.1", b"\r\n\xff", b"GET\t/"] {
            let mut c = conn();
            c.handle_input(start, 0);
            assert!(c.poll_request(0).is_none());
            let out = drain(&mut c, 0);
            assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"), "{start:?}: {out}");
            assert!(out.ends_with("\"description\":\"malformed HTTP request: invalid token\"}"), "{start:?}: {out}");
            assert_eq!(c.state(), ConnectionState::Lingering, "{start:?}");
        }
        // The start of a request, byte by byte, waits for the rest.
        let mut c = conn();
        for (i, b) in GET.iter().enumerate().take(GET.len() - 1) {
            c.handle_input(&[*b], i as u64);
            assert!(c.poll_request(i as u64).is_none());
            assert!(c.poll_transmit().is_empty(), "after {i} bytes");
        }
        c.handle_input(&GET[GET.len() - 1..], 100);
        assert!(c.poll_request(100).is_some());
    }

    #[test]
    fn a_refusal_closes_with_a_linger() {
        let mut c = conn();
        c.handle_input(b"POST /bot/x HTTP/1.1\r\nContent-Length: 999999\r\n\r\n", 0);
        assert!(c.poll_request(0).is_none());
        let out = drain(&mut c, 10);
        assert!(out.starts_with("HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n"), "{out}");
        assert_eq!(c.state(), ConnectionState::Lingering);
        assert!(c.wants_read(), "input is read and discarded");
        assert_eq!(c.poll_timeout(), Some(10 + host::LINGER_MS));
        c.handle_input(&[0; 100], 11);
        assert_eq!(c.handle_timeout(11), Expired::Nothing);
        assert_eq!(c.handle_timeout(10 + host::LINGER_MS), Expired::Linger);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn a_linger_ends_at_its_bytes_or_the_peers_close() {
        let mut c = conn();
        c.handle_input(b"BAD\r\n\r\n", 0);
        c.poll_request(0);
        drain(&mut c, 0);
        c.handle_input(&vec![0; host::LINGER_BYTES - 1], 1);
        assert_eq!(c.state(), ConnectionState::Lingering);
        c.handle_input(&[0], 1);
        assert_eq!(c.state(), ConnectionState::Closed);
        let mut c = conn();
        c.handle_input(b"BAD\r\n\r\n", 0);
        c.poll_request(0);
        drain(&mut c, 0);
        c.handle_eof(1);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn a_refusal_to_a_closed_peer_does_not_linger() {
        let mut c = conn();
        c.handle_input(b"BAD\r\n\r\n", 0);
        c.handle_eof(0);
        c.poll_request(0);
        assert_eq!(c.state(), ConnectionState::Closing);
        drain(&mut c, 0);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn a_busy_refusal_sends_the_503_then_lingers_with_its_own_bounds() {
        let mut c = HttpConnection::refusing_busy(100);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert_eq!(c.poll_transmit(), &super::super::server_busy()[..]);
        assert!(c.poll_transmit().starts_with(b"HTTP/1.1 503 Service Unavailable\r\n"));
        assert_eq!(c.waiting_since(), None, "never evicted as waiting");
        assert!(!c.is_idle());
        assert_eq!(c.poll_timeout(), Some(100 + host::WRITE_TIMEOUT_MS + 1), "only the peer's time to take the 503");
        // What the client was writing is read and discarded: never a request.
        assert!(c.wants_read());
        c.handle_input(GET, 101);
        assert!(!c.has_request());
        assert!(c.poll_request(101).is_none());
        assert_eq!(c.poll_transmit(), &super::super::server_busy()[..], "nothing queued but the 503");
        // A partial write leaves the rest to send.
        c.sent(10, 102);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert_eq!(c.poll_transmit(), &super::super::server_busy()[10..]);
        let rest = c.poll_transmit().len();
        c.sent(rest, 110);
        assert_eq!(c.state(), ConnectionState::Lingering);
        assert!(c.wants_read());
        assert_eq!(c.poll_timeout(), Some(110 + host::REFUSAL_LINGER_MS));
        assert_eq!(c.poll_timeout(), Some(610), "the refusal's 500 ms, not the 2 s linger");
        c.handle_input(&[0; 100], 200);
        assert_eq!(c.handle_timeout(609), Expired::Nothing);
        assert_eq!(c.state(), ConnectionState::Lingering);
        assert_eq!(c.handle_timeout(610), Expired::Linger);
        assert_eq!(c.state(), ConnectionState::Closed);
        assert_eq!(c.read_limit(), 0);
    }

    #[test]
    fn a_busy_refusal_lingers_for_64_kib_at_most_and_ends_at_eof() {
        let mut c = HttpConnection::refusing_busy(0);
        drain(&mut c, 0);
        c.handle_input(&vec![0; host::REFUSAL_LINGER_BYTES - 1], 1);
        assert_eq!(c.state(), ConnectionState::Lingering);
        c.handle_input(&[0], 2);
        assert_eq!(c.state(), ConnectionState::Closed, "64 KiB, not the 4 MiB of a refused request");
        assert_eq!(host::REFUSAL_LINGER_BYTES, 64 * 1024);
        // The peer's EOF while lingering: closed at once.
        let mut c = HttpConnection::refusing_busy(0);
        drain(&mut c, 0);
        c.handle_eof(5);
        assert_eq!(c.state(), ConnectionState::Closed);
        // EOF before the 503 went: it is still sent, then no linger.
        let mut c = HttpConnection::refusing_busy(0);
        c.handle_eof(1);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert!(!c.wants_read(), "nothing more to read after EOF");
        assert_eq!(drain(&mut c, 2).as_bytes(), &super::super::server_busy()[..]);
        assert_eq!(c.state(), ConnectionState::Closed);
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn a_partial_request_times_out_with_408() {
        let mut c = conn();
        c.handle_input(b"GET / HTTP/1.1\r\n", 100);
        assert!(c.poll_request(100).is_none());
        assert_eq!(c.poll_timeout(), Some(1_101));
        assert_eq!(c.handle_timeout(1_100), Expired::Nothing);
        assert_eq!(c.handle_timeout(1_101), Expired::Request);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert_eq!(c.poll_transmit(), &super::super::request_timeout()[..]);
        drain(&mut c, 1_102);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn the_request_deadline_counts_from_the_first_byte_after_an_answer() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(b"GET /x");
        c.handle_input(&bytes, 0);
        c.poll_request(0).unwrap();
        assert_eq!(c.poll_timeout(), None, "nothing runs while a request is answered");
        c.answer(b"HTTP/1.1 200 OK\r\n\r\n", 500);
        drain(&mut c, 500);
        assert!(c.poll_request(500).is_none());
        assert_eq!(c.poll_timeout(), Some(1_501));
    }

    #[test]
    fn an_idle_connection_closes() {
        let mut c = conn();
        assert_eq!(c.poll_timeout(), Some(5_001));
        assert_eq!(c.handle_timeout(5_000), Expired::Nothing);
        assert_eq!(c.handle_timeout(5_001), Expired::Idle);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn half_close_answers_what_was_whole() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(b"GET /partial");
        c.handle_input(&bytes, 0);
        c.handle_eof(0);
        assert!(!c.wants_read());
        c.poll_request(0).unwrap();
        c.answer(b"HTTP/1.1 200 OK\r\n\r\n", 0);
        assert_eq!(c.state(), ConnectionState::Open);
        assert!(c.poll_request(0).is_none());
        assert_eq!(c.state(), ConnectionState::Closing, "the partial request is dropped");
        drain(&mut c, 0);
        assert_eq!(c.state(), ConnectionState::Closed);
        let mut c = conn();
        c.handle_eof(0);
        assert_eq!(c.state(), ConnectionState::Closed, "nothing to answer");
    }

    #[test]
    fn what_the_socket_took_leaves_the_buffer_though_the_client_never_catches_up() {
        let mut c = conn();
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: 28000\r\n\r\n{}", "a".repeat(28_000));
        // A client that reads 4 KiB now and then: the budget lets a request
        // in whenever under 64 KiB is unsent; what was sent must not pile up.
        let mut peak = 0;
        for i in 0..200 {
            c.handle_input(GET, i);
            if c.poll_request(i).is_some() {
                c.answer(answer.as_bytes(), i);
            }
            for _ in 0..4 {
                let n = c.poll_transmit().len().min(4096);
                c.sent(n, i);
            }
            peak = peak.max(c.output.capacity());
        }
        assert!(c.unsent() > 0, "the client is behind");
        assert!(peak <= 256 * 1024, "the output buffer grew to {peak} bytes");
    }

    #[test]
    fn a_parked_poll_waits_from_when_it_parked_until_its_answer() {
        let mut c = conn();
        c.handle_input(b"GET /bot/getUpdates HTTP/1.1\r\n\r\n", 0);
        c.poll_request(1).unwrap();
        assert_eq!(c.waiting_since(), None, "taken, not parked: busy");
        c.park(5);
        assert_eq!(c.waiting_since(), Some(5), "parked: evictable, from when it parked");
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 9);
        assert_eq!(c.waiting_since(), None, "its answer is unsent: busy");
        drain(&mut c, 9);
        assert_eq!(c.waiting_since(), Some(9), "waits afresh for a request");
        // A request that is not a poll is never parked.
        c.handle_input(GET, 10);
        c.poll_request(10).unwrap();
        c.park(11);
        assert_eq!(c.waiting_since(), None);
    }

    #[test]
    fn a_peer_closing_cancels_its_poll() {
        let mut c = conn();
        c.handle_input(b"GET /bot/getUpdates HTTP/1.1\r\n\r\n", 0);
        assert_eq!(c.poll_request(0).unwrap().route, Lane::Poll);
        assert!(c.wants_read(), "read while parked: the close is seen");
        c.handle_eof(1);
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn unsent_answers_over_the_budget_stop_the_taking_and_reading() {
        let mut c = conn();
        let mut bytes = GET.to_vec();
        bytes.extend_from_slice(GET);
        c.handle_input(&bytes, 0);
        c.poll_request(0).unwrap();
        let mut big = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        big.resize(crate::http::MAX_UNSENT_BYTES_PER_CONNECTION, b'x');
        c.answer(&big, 0);
        assert!(!c.has_request());
        assert!(c.poll_request(0).is_none());
        assert!(!c.wants_read());
        c.sent(1, 1);
        assert!(c.poll_request(1).is_some(), "below the budget again");
    }

    #[test]
    fn input_is_bounded_by_the_largest_request() {
        let mut c = conn();
        let max = RequestFramer::new(1024).max_request_bytes();
        assert_eq!(c.read_limit(), max);
        c.handle_input(b"GET / HTTP/1.1\r\nX: ", 0);
        assert!(c.poll_request(0).is_none());
        assert_eq!(c.read_limit(), max - 19);
    }

    #[test]
    fn the_listener_routes_and_upgrade_hands_over_the_rest() {
        let mut c = HttpConnection::new(Listener::Public, ConnectionOptions::default(), RequestFramer::new(1024), 0);
        c.handle_input(b"GET /admin/x HTTP/1.1\r\n\r\nGET /bot/gateway HTTP/1.1\r\n\r\n\x81\x00", 0);
        let t = c.poll_request(0).unwrap();
        assert_eq!(t.route, Lane::NotHere);
        assert_eq!(t.head.path(c.request(&t)), "/admin/x");
        assert!(c.poll_request(0).is_none());
        c.answer(b"HTTP/1.1 404 Not Found\r\n\r\n", 0);
        assert_eq!(c.poll_request(0).unwrap().route, Lane::Gateway);
        let (input, output) = c.upgrade();
        assert_eq!(input, b"\x81\x00");
        assert_eq!(output, b"HTTP/1.1 404 Not Found\r\n\r\n");
        assert_eq!(c.state(), ConnectionState::Closed);
    }

    #[test]
    fn a_peer_that_takes_nothing_for_the_write_timeout_is_dropped() {
        let mut c = conn();
        c.handle_input(GET, 0);
        c.poll_request(0).unwrap();
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 10);
        // The write deadline is the only one: no idle or request deadline
        // runs while an answer waits for the peer.
        assert_eq!(c.poll_timeout(), Some(10 + host::WRITE_TIMEOUT_MS + 1));
        assert_eq!(c.handle_timeout(10 + host::WRITE_TIMEOUT_MS), Expired::Nothing);
        assert_eq!(c.state(), ConnectionState::Open);
        assert_eq!(c.handle_timeout(10 + host::WRITE_TIMEOUT_MS + 1), Expired::Write);
        assert_eq!(c.state(), ConnectionState::Closed);
        assert!(c.poll_transmit().is_empty(), "what waited is dropped with the socket");
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.read_limit(), 0);
    }

    #[test]
    fn each_write_that_takes_some_restarts_the_write_timeout() {
        let mut c = conn();
        c.handle_input(GET, 0);
        c.poll_request(0).unwrap();
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
        c.sent(5, 20_000);
        assert_eq!(c.poll_timeout(), Some(20_000 + host::WRITE_TIMEOUT_MS + 1));
        assert_eq!(c.handle_timeout(host::WRITE_TIMEOUT_MS + 1), Expired::Nothing, "progress moved it");
        // A write of nothing is no progress.
        c.sent(0, 40_000);
        assert_eq!(c.poll_timeout(), Some(20_000 + host::WRITE_TIMEOUT_MS + 1));
        // More answers queued behind a stalled one do not move it.
        c.handle_input(GET, 41_000);
        c.poll_request(41_000).unwrap();
        c.answer(b"HTTP/1.1 200 OK\r\n\r\n", 41_000);
        assert_eq!(c.poll_timeout(), Some(20_000 + host::WRITE_TIMEOUT_MS + 1));
        // Everything sent: the write deadline ends, the idle one runs.
        drain(&mut c, 46_000);
        assert_eq!(c.poll_timeout(), Some(46_000 + 5_000 + 1));
        assert_eq!(c.handle_timeout(20_000 + host::WRITE_TIMEOUT_MS + 1), Expired::Nothing);
        assert_eq!(c.state(), ConnectionState::Open);
    }

    #[test]
    fn a_closing_connection_and_a_busy_refusal_meet_the_write_timeout_too() {
        // A 408 that is never read.
        let mut c = conn();
        c.handle_input(b"GET / HTTP/1.1\r\n", 0);
        assert!(c.poll_request(0).is_none());
        assert_eq!(c.handle_timeout(1_001), Expired::Request);
        assert_eq!(c.state(), ConnectionState::Closing);
        assert_eq!(c.poll_timeout(), Some(1_001 + host::WRITE_TIMEOUT_MS + 1));
        assert_eq!(c.handle_timeout(1_001 + host::WRITE_TIMEOUT_MS + 1), Expired::Write);
        assert_eq!(c.state(), ConnectionState::Closed);
        // A busy refusal whose 503 is never read.
        let mut c = HttpConnection::refusing_busy(7);
        assert_eq!(c.handle_timeout(7 + host::WRITE_TIMEOUT_MS), Expired::Nothing);
        assert_eq!(c.handle_timeout(7 + host::WRITE_TIMEOUT_MS + 1), Expired::Write);
        assert_eq!(c.state(), ConnectionState::Closed);
        // `100 Continue` waits for the peer as any answer does.
        let mut c = conn();
        c.handle_input(b"POST /bot/x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", 3);
        assert!(c.poll_request(3).is_none());
        assert_eq!(c.poll_timeout(), Some(3 + host::WRITE_TIMEOUT_MS + 1));
        // Upgraded: the gateway's rules take over, no write deadline stays.
        c.upgrade();
        assert_eq!(c.poll_timeout(), None);
    }
}
