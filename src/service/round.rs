//! One round of a host's HTTP connections: every complete request
//! buffered on any of them answered in batches, one commit each (the group
//! commit of a host that owns its sockets, decided once for every such
//! host).
//!
//! After each wait for its sockets a host that batches across connections
//! calls [`HttpRound::serve`] with its connections ([`HttpConnection`]s)
//! and the time. The round:
//!
//! - takes the requests of the connections that read bytes this turn
//!   first, each up to its budget (the connection gives none over it);
//!   then the backlog, connections with requests held back from earlier
//!   turns, round robin from where the last round stopped, at most
//!   [`MAX_BATCH`] requests a round, so the round stays short and a client
//!   that just sent its request is answered in the round that read it
//!   (the connection's `has_request` tells the host to poll again without
//!   sleeping while some of it waits);
//! - answers each [`MAX_BATCH`] of plain requests with one
//!   [`Service::handle`] (one transaction, one fsync), each answer
//!   to its connection in order; host calls go with their connection's
//!   peer (each passes that client's login throttle, then commits with
//!   the batch); a failed call still ends each request's turn, with the
//!   core's 500 `answer_failed`;
//! - answers what must go alone once the batch before it is answered:
//!   a `getUpdates` (it may park), a path the listener does not serve. Such
//!   a request ends that connection's share of the batch; its later
//!   requests go to the next batch;
//! - gives back to the host only what changes the host's own state
//!   ([`RoundStep`]): a gateway upgrade (the socket becomes the
//!   gateway's) and a parked poll (the connection waits for its answer).

use super::parked::{Handled, PollId};
use super::Service;
use crate::connection::http::{HttpConnection, Taken};
use crate::connection::limits::MAX_BATCH;
use crate::connection::Lane;
use crate::entry::Incoming;
use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Requests (and steps) a round takes from connections with nothing
/// newly read: the backlog's share of a round.
const TURN_BACKLOG: usize = MAX_BATCH;

/// The host's connections for one round, by index: the indices of
/// [`RoundStep`] are these. An index may hold no HTTP connection (a
/// gateway, a closed socket): it is skipped, and still counts in the round
/// robin.
pub trait RoundConnections {
    /// How many connections (indices `0..len`).
    fn len(&self) -> usize;
    /// Whether there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Connection `i`, when it is an HTTP connection whose socket is open.
    fn connection(&self, i: usize) -> Option<&HttpConnection>;
    /// The same, to take requests and queue answers.
    fn connection_mut(&mut self, i: usize) -> Option<&mut HttpConnection>;
    /// Whether connection `i` read bytes this turn (served ahead of the
    /// backlog).
    fn fresh(&self, i: usize) -> bool;
    /// The IP address of connection `i`'s peer (the host API's login
    /// throttle, the audit log).
    fn peer(&self, i: usize) -> Cow<'_, str>;
}

/// One connection as a Rust host gives it to a round.
#[derive(Debug)]
pub struct RoundConnection<'a> {
    /// `None`: not an HTTP connection now (skipped).
    pub conn: Option<&'a mut HttpConnection>,
    /// It read bytes this turn.
    pub fresh: bool,
    /// Its peer's IP address.
    pub peer: &'a str,
}

impl RoundConnections for [RoundConnection<'_>] {
    fn len(&self) -> usize {
        <[RoundConnection<'_>]>::len(self)
    }
    fn connection(&self, i: usize) -> Option<&HttpConnection> {
        self[i].conn.as_deref()
    }
    fn connection_mut(&mut self, i: usize) -> Option<&mut HttpConnection> {
        self[i].conn.as_deref_mut()
    }
    fn fresh(&self, i: usize) -> bool {
        self[i].fresh
    }
    fn peer(&self, i: usize) -> Cow<'_, str> {
        Cow::Borrowed(self[i].peer)
    }
}

/// What a round leaves to the host: the only outcomes that change the
/// host's own state. At most one per connection and round (either blocks
/// its connection until the host acts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundStep {
    /// `GET /bot/gateway` taken from connection `conn`: the host accepts
    /// it ([`Service::accept_gateway`]; the request's bytes are
    /// `connection.request(&request)`) and, upgraded, moves the socket to
    /// the gateway ([`HttpConnection::upgrade`]); refused, it answers the
    /// refusal on the connection.
    Gateway { conn: usize, request: Taken },
    /// Connection `conn`'s `getUpdates` is parked: its answer comes from
    /// [`Service::poll_parked`] under this id (the host answers it on the
    /// connection), or the host cancels it when the client goes away.
    Parked { conn: usize, poll: PollId },
}

/// The state a host keeps between rounds: where the backlog's round robin
/// starts, and the buffers of a round (kept to be reused).
#[derive(Debug, Default)]
pub struct HttpRound {
    /// Round robin: where the next backlog pass starts.
    backlog_next: usize,
    /// The batch being formed: which connection, which request.
    batch: Vec<(usize, Taken)>,
    /// Per connection, the request that ended its share of the batch.
    stepped: Vec<Option<Taken>>,
    steps: Vec<RoundStep>,
}

impl HttpRound {
    pub fn new() -> Self {
        HttpRound::default()
    }

    /// Answers every complete request buffered on `conns` at `now` (the
    /// host's monotonic clock in milliseconds, the clock of its
    /// connections), as the module's comment says, and returns what is
    /// left for the host, in the order of the connections each round
    /// stepped. The host clears its `fresh` marks afterwards.
    pub fn serve<C: RoundConnections + ?Sized>(&mut self, svc: &Service, conns: &mut C, now: u64) -> &[RoundStep] {
        let n = conns.len();
        self.steps.clear();
        self.batch.clear();
        self.stepped.clear();
        self.stepped.resize(n, None);
        let mut backlog = 0;
        loop {
            for i in 0..n {
                if conns.fresh(i) && has_request(conns, i) {
                    self.collect(conns, i, now);
                }
            }
            let mut k = 0;
            while k < n && self.batch.len() < MAX_BATCH && backlog < TURN_BACKLOG {
                k += 1;
                let i = self.backlog_next % n;
                self.backlog_next = self.backlog_next.wrapping_add(1);
                if conns.fresh(i) || self.stepped[i].is_some() || !has_request(conns, i) {
                    continue;
                }
                let before = self.batch.len();
                self.collect(conns, i, now);
                backlog += self.batch.len() - before + usize::from(self.stepped[i].is_some());
            }
            let stepped = self.stepped.iter().any(Option::is_some);
            if self.batch.is_empty() && !stepped {
                break;
            }
            self.answer_batch(svc, conns, now);
            if stepped {
                for i in 0..n {
                    if let Some(t) = self.stepped[i].take() {
                        self.run_step(svc, conns, i, t, now);
                    }
                }
            }
        }
        &self.steps
    }

    /// Takes connection `i`'s complete requests into the batch, up to the
    /// first that must go alone. The connection gives none while its
    /// answers are over the budget, and queues by itself what needs no
    /// answer from the service (100 Continue, a refusal).
    fn collect<C: RoundConnections + ?Sized>(&mut self, conns: &mut C, i: usize, now: u64) {
        let Some(c) = conns.connection_mut(i) else { return };
        while self.stepped[i].is_none() && self.batch.len() < MAX_BATCH {
            let Some(t) = c.poll_request(now) else { return };
            match t.route {
                // Host calls too: each passes its client's login throttle
                // at the door, then commits with the others.
                Lane::Batch | Lane::Alone | Lane::Admin => self.batch.push((i, t)),
                _ => self.stepped[i] = Some(t),
            }
        }
    }

    /// Answers the batch, each answer to its connection: one commit for
    /// all. A failed call (a panic in the core) ends each request's turn
    /// with the core's 500 `answer_failed`.
    fn answer_batch<C: RoundConnections + ?Sized>(&mut self, svc: &Service, conns: &mut C, now: u64) {
        if self.batch.is_empty() {
            return;
        }
        // One call for the batch: a lone write joins the group commit,
        // more commit together ([`Service::handle`]).
        let answers = {
            // A host call's client: its login throttle and its audit entry.
            let peers: Vec<Option<Cow<'_, str>>> =
                self.batch.iter().map(|&(i, t)| (t.route == Lane::Admin).then(|| conns.peer(i))).collect();
            let reqs: Vec<Incoming<'_>> = self
                .batch
                .iter()
                .zip(&peers)
                .map(|(&(i, t), peer)| {
                    let req = Incoming::bytes(conns.connection(i).map_or(&[][..], |c| c.request(&t)));
                    match peer {
                        Some(peer) => req.from_peer(peer),
                        None => req,
                    }
                })
                .collect();
            catch_unwind(AssertUnwindSafe(|| svc.handle(&reqs, svc.now_ms()))).ok()
        };
        for (k, &(i, _)) in self.batch.iter().enumerate() {
            let out = match answers.as_ref().and_then(|a| a.get(k)) {
                Some(Handled::Now(out)) => out.as_slice(),
                // A panic: the connection answers the core's 500.
                _ => &[][..],
            };
            if let Some(c) = conns.connection_mut(i) {
                c.answer(out, now);
            }
        }
        self.batch.clear();
    }

    fn run_step<C: RoundConnections + ?Sized>(&mut self, svc: &Service, conns: &mut C, i: usize, t: Taken, now: u64) {
        let out = {
            let Some(c) = conns.connection(i) else { return };
            let req = c.request(&t);
            let peer = conns.peer(i);
            match t.route {
                Lane::Gateway => {
                    self.steps.push(RoundStep::Gateway { conn: i, request: t });
                    return;
                }
                Lane::Poll => {
                    let one = [Incoming::bytes(req).from_peer(&peer)];
                    match catch_unwind(AssertUnwindSafe(|| svc.handle(&one, svc.now_ms()))).map(|mut a| a.pop()) {
                        Ok(Some(Handled::Now(out))) => Some(out),
                        Ok(Some(Handled::Parked(poll))) => {
                            // Parked: the connection waits on the service
                            // and may be evicted as an idle one may.
                            if let Some(c) = conns.connection_mut(i) {
                                c.park(now);
                            }
                            self.steps.push(RoundStep::Parked { conn: i, poll });
                            return;
                        }
                        _ => None,
                    }
                }
                _ => Some(crate::connection::not_here(t.head.path(req))),
            }
        };
        let Some(c) = conns.connection_mut(i) else { return };
        match out {
            Some(out) => c.answer(&out, now),
            None => c.answer(&[], now),
        }
    }
}

fn has_request<C: RoundConnections + ?Sized>(conns: &C, i: usize) -> bool {
    conns.connection(i).is_some_and(HttpConnection::has_request)
}
