//! The one typed way in: a slice of requests, their answers out
//! ([`Service::handle`]). Every host drives it: the C server's rounds
//! ([`crate::HttpRound`]), the Rust server's core threads, the edge worker
//! and the browser. [`Service::handle_request`] is its bytes-in, bytes-out
//! form for one request that never parks.

use super::{Handled, Service};
use crate::connection::lane::{route, Lane, Listener};
use crate::entry::Incoming;
use crate::route::Route;

/// What a host call whose client is known meets before it joins a run of
/// [`Service::handle`]: its client's login throttle and the admin secret,
/// checked once.
enum Door {
    /// Admitted: runs with the requests beside it (one commit for the
    /// run), audited with this client.
    Enter(String),
    /// Refused at the door (429 `rate_limited`, 401): answered as it is.
    Refused(Vec<u8>),
    /// Not a plain host method (metrics, an image, a page, a request that
    /// does not route): answered alone, door and all, as before.
    Alone,
}

impl Service {
    /// Answers `requests`, in order, one [`Handled`] each:
    ///
    /// * a run of requests next to each other (bot writes such as
    ///   `sendMessage`, getMe, host calls without a client) commits as one
    ///   group, in the slice's order ([`Incoming::unordered`] lets a shared
    ///   store use its lock order): one transaction and one fsync, each
    ///   request answered exactly as if it ran alone (a run of one joins
    ///   the group commit of concurrent callers instead);
    /// * a `getUpdates` with a `timeout` that finds nothing parks (unless
    ///   it came [`Incoming::at_once`])
    ///   ([`Handled::Parked`]): its answer comes from
    ///   [`Service::poll_parked`] at the latest at its deadline, `now_ms`
    ///   (the host's clock, Unix ms) plus the timeout; past the cap on
    ///   parked polls it is answered at once, as with `timeout` 0;
    /// * a host call with its client ([`Incoming::from_peer`]) passes the
    ///   login throttle of that client first (refused there, it is
    ///   answered at once), then commits with the run beside it, audited
    ///   with its client.
    ///
    /// Every answer is durable before this returns. Blocks on the group
    /// commit, the database and the WAL fsync (on PostgreSQL, round
    /// trips), as every request does.
    ///
    /// ```
    /// use botspace::{Handled, Config, Incoming, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// let get_me = b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n";
    /// let answers = svc.handle(&[Incoming::bytes(get_me), Incoming::bytes(get_me)], svc.now_ms());
    /// assert!(matches!(&answers[0], Handled::Now(out) if out.starts_with(b"HTTP/1.1 401 ")));
    /// ```
    pub fn handle(&self, requests: &[Incoming<'_>], now_ms: u64) -> Vec<Handled> {
        let mut answers = Vec::with_capacity(requests.len());
        // At each host call's door: the client it is audited with, or
        // its refusal (which writes nothing, so it stays in its run).
        let mut doors: Vec<Option<Door>> = Vec::new();
        let mut run = 0;
        for (i, r) in requests.iter().enumerate() {
            let lane = r.input.path().map_or(Lane::Alone, |p| route(Listener::All, p));
            // What must run alone: a poll that may park, and a host call
            // that is not a plain method (metrics, an image, a page). A
            // host call whose client is known passes its door first (the
            // login throttle of that client): refused, it is answered
            // here; admitted, it joins the run and is audited with its
            // client. The rest runs as it comes.
            let alone = match (lane, r.peer) {
                (Lane::Poll, _) => r.may_park,
                (Lane::Admin, Some(peer)) => match self.host_call_door(r.input, peer) {
                    Door::Alone => true,
                    door => {
                        doors.resize_with(i, || None);
                        doors.push(Some(door));
                        false
                    }
                },
                _ => false,
            };
            if !alone {
                run += 1;
                continue;
            }
            doors.resize_with(i, || None);
            self.answer_run(&requests[i - run..i], &mut doors[i - run..i], &mut answers);
            run = 0;
            answers.push(match (lane, r.peer) {
                (Lane::Poll, peer) => self.answer_input(r.input, peer.unwrap_or(""), now_ms),
                (_, Some(peer)) => Handled::Now(self.handle_input_from(r.input, peer)),
                (_, None) => Handled::Now(self.handle_input(r.input)),
            });
        }
        doors.resize_with(requests.len(), || None);
        self.answer_run(&requests[requests.len() - run..], &mut doors[requests.len() - run..], &mut answers);
        answers
    }

    /// A host call with its client, at the door: see [`Door`].
    fn host_call_door(&self, input: crate::entry::Input<'_>, peer: &str) -> Door {
        let started = crate::metrics::Timer::sampled();
        let routed = match self.route(input) {
            Ok(r) => r,
            // Refused by routing: the alone path gives the refusal.
            Err(_) => return Door::Alone,
        };
        match routed.route {
            Route::Admin(m) if !m.whole_database() => match self.admit_host_call(&routed, peer) {
                Ok(client) => Door::Enter(client),
                Err(e) => {
                    let out = e.into_response();
                    self.record(input, &out, started);
                    Door::Refused(out)
                }
            },
            _ => Door::Alone,
        }
    }

    /// A run of requests: one alone joins the group commit of concurrent
    /// callers; more commit together, in the slice's order, or in lock
    /// order on a shared store when every one came `unordered`. `doors`:
    /// what each host call with a client met at its door; one refused
    /// there is answered in its place and runs nothing.
    fn answer_run(&self, run: &[Incoming<'_>], doors: &mut [Option<Door>], answers: &mut Vec<Handled>) {
        let mut inputs = Vec::with_capacity(run.len());
        let mut clients = Vec::with_capacity(run.len());
        for (r, door) in run.iter().zip(doors.iter()) {
            match door {
                Some(Door::Refused(_)) => {}
                Some(Door::Enter(client)) => {
                    inputs.push(r.input);
                    clients.push(Some(client.as_str()));
                }
                _ => {
                    inputs.push(r.input);
                    clients.push(None);
                }
            }
        }
        let mut ran = match (&inputs[..], &clients[..]) {
            ([], _) => Vec::new(),
            ([one], [None]) => vec![self.handle_input(*one)],
            _ => {
                let unordered = run.iter().all(|r| r.unordered);
                self.handle_inputs_as(&inputs, &clients, unordered)
            }
        }
        .into_iter();
        for door in doors.iter_mut() {
            answers.push(Handled::Now(match door.take() {
                Some(Door::Refused(out)) => out,
                _ => ran.next().unwrap_or_else(crate::connection::answer_failed),
            }));
        }
    }
}
