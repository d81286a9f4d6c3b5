//! The one typed way in: a slice of requests, their answers out
//! ([`Service::handle`]). Every host drives it: the C server's rounds
//! ([`crate::HttpRound`]), the Rust server's core threads, the edge worker
//! and the browser. [`Service::handle_request`] is its bytes-in, bytes-out
//! form for one request that never parks.

use super::{Handled, Service};
use crate::connection::lane::{route, Lane, Listener};
use crate::entry::Incoming;

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
    /// * a host call with its client ([`Incoming::from_peer`]) is answered
    ///   alone, behind the login throttle of that client, and audited
    ///   with it.
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
        let mut run = 0;
        for (i, r) in requests.iter().enumerate() {
            let lane = r.input.path().map_or(Lane::Alone, |p| route(Listener::All, p));
            // What must run alone: a poll that may park, and a host call
            // whose client is known (its login is throttled per client and
            // its change audited with it). The rest runs as it comes.
            let alone = match lane {
                Lane::Poll => r.may_park,
                Lane::Admin => r.peer.is_some(),
                _ => false,
            };
            if !alone {
                run += 1;
                continue;
            }
            self.answer_run(&requests[i - run..i], &mut answers);
            run = 0;
            answers.push(match (lane, r.peer) {
                (Lane::Poll, peer) => self.answer_input(r.input, peer.unwrap_or(""), now_ms),
                (_, Some(peer)) => Handled::Now(self.handle_input_from(r.input, peer)),
                (_, None) => Handled::Now(self.handle_input(r.input)),
            });
        }
        self.answer_run(&requests[requests.len() - run..], &mut answers);
        answers
    }

    /// A run of requests: one alone joins the group commit of concurrent
    /// callers; more commit together, in the slice's order, or in lock
    /// order on a shared store when every one came `unordered`.
    fn answer_run(&self, run: &[Incoming<'_>], answers: &mut Vec<Handled>) {
        match run {
            [] => {}
            [one] => answers.push(Handled::Now(self.handle_input(one.input))),
            _ => {
                let inputs: Vec<_> = run.iter().map(|r| r.input).collect();
                let unordered = run.iter().all(|r| r.unordered);
                answers.extend(self.handle_inputs_as(&inputs, unordered).into_iter().map(Handled::Now));
            }
        }
    }
}
