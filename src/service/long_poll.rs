//! Long polls: [`Service::handle`]
//! parks a `getUpdates` that finds nothing, [`Service::poll_parked`]
//! answers the due and expired ones (docs/delivery.md, "Parking"). The
//! parked polls themselves are held by `service/parked.rs`.

use super::parked::{Handled, Parked, PollId, Ready};
use super::Service;
use crate::methods::updates;

impl Handled {
    /// The answer to send now, for a host that cannot hold a connection
    /// open (a batch, a queue, a one-shot call): a poll that parked anyway
    /// is cancelled on `svc` (the service that parked it) and answered 500
    /// `answer_failed` ([`crate::connection::answer_failed`]). A request
    /// made [`Incoming::at_once`](crate::Incoming::at_once) never parks.
    /// The Rust server (`botspace-hyper`, `botspace-runtime`'s core
    /// threads), the C ABI and the JS face (wasm) call it.
    pub fn now_or_failed(self, svc: &Service) -> Vec<u8> {
        match self {
            Handled::Now(out) => out,
            Handled::Parked(id) => {
                svc.cancel_parked(id);
                crate::connection::answer_failed()
            }
        }
    }
}

impl Service {
    /// One request, answered or parked ([`Service::handle`]): a
    /// `getUpdates` runs alone, in its own transaction, its offset's
    /// acknowledgement durable before this returns, parked or not.
    pub(crate) fn answer_input(&self, request: crate::entry::Input<'_>, peer: &str, now_ms: u64) -> Handled {
        let routed = match self.route(request) {
            Ok(r) if r.route == crate::route::Route::Bot(crate::route::BotMethod::GetUpdates) => r,
            _ => return Handled::Now(self.handle_input_from(request, peer)),
        };
        let started = crate::metrics::Timer::sampled();
        let seen = self.delivery.parked.generation();
        // A getUpdates runs alone, in its own transaction (not in a group):
        // the method leaves what to park in the transaction's effects.
        let mut inner = self.lock();
        let out = self.run_one(&mut inner, &routed);
        let mut fx = self.take_effects(&mut inner);
        drop(inner);
        let park = fx.park.take();
        let mut outs = [out];
        self.settle(&mut fx, &mut outs);
        self.apply_effects(fx);
        let [out] = outs;
        let answer = match park {
            // Stopping: nothing parks any more (the host's drain would
            // wait on it); the poll is answered as with `timeout` 0.
            Some((bot_id, poll)) if out.starts_with(b"HTTP/1.1 200") && !self.is_shutting_down() => {
                let deadline = now_ms.saturating_add(u64::from(poll.timeout_s) * 1000);
                match self.delivery.parked.park(&bot_id, deadline, poll, seen) {
                    Some(id) => Handled::Parked(id),
                    None => Handled::Now(out),
                }
            }
            _ => Handled::Now(out),
        };
        if let Handled::Now(out) = &answer {
            self.record(request, out, started);
        }
        answer
    }

    /// Every parked poll's answer that is ready at `now_ms`: those a commit
    /// gave events (read from the log now, durable before they are
    /// returned), and those past their deadline (`[]`). Call it when the
    /// wake hook has run, and when the timer for [`Service::parked_timeout`]
    /// fires. A woken poll whose read finds nothing it asked for (its
    /// `allowed_updates` filtered the events out) stays parked. Cheap when
    /// nothing is ready. Blocks as a request does (the database lock, a
    /// read, the WAL sync).
    /// The C server (`botspace_service_poll_parked`), the Rust server
    /// (`botspace-hyper`'s parked polls) and the JS face (wasm) call it.
    pub fn poll_parked(&self, now_ms: u64) -> Vec<(PollId, Vec<u8>)> {
        let (ready, seen) = self.delivery.parked.take_ready(now_ms);
        let mut answers = Vec::with_capacity(ready.len());
        for (id, p, why) in ready {
            let out = match why {
                Ready::Expired | Ready::Revoked => crate::http::ok_response(b"[]"),
                // Its bot parked a newer poll past its own cap.
                Ready::Superseded => crate::error::ApiError::poll_superseded().into_response(),
                Ready::Woken => match self.read_parked(&p) {
                    Ok(Some(json)) => crate::http::ok_response(json.as_bytes()),
                    Ok(None) if p.deadline_ms > now_ms => {
                        self.delivery.parked.repark(id, p, seen);
                        continue;
                    }
                    Ok(None) => crate::http::ok_response(b"[]"),
                    Err(e) => e.into_response(),
                },
            };
            answers.push((id, out));
        }
        answers
    }

    /// One woken poll's read: `None` when it found nothing to return.
    fn read_parked(&self, p: &Parked) -> crate::error::ApiResult<Option<String>> {
        let inner = self.lock();
        let read = updates::read(&inner.conn, &p.bot_id, &p.poll);
        let seen = self.seen();
        drop(inner);
        let read = read?;
        if read.count == 0 {
            return Ok(None);
        }
        // What it read leaves only once durable (as a gateway frame does).
        if let Some(wal) = &self.db.wal {
            wal.sync_to(seen).map_err(|e| crate::error::ApiError::commit_outcome_unknown(&e))?;
        }
        Ok(Some(read.json))
    }

    /// When the host must call [`Service::poll_parked`] at the latest (Unix
    /// ms): 0 when an answer is ready now, the earliest deadline otherwise,
    /// `None` with nothing parked.
    /// The C server (`botspace_service_parked_timeout`), the Rust server
    /// (`botspace-hyper`) and the JS face (wasm) call it.
    pub fn parked_timeout(&self) -> Option<u64> {
        self.delivery.parked.timeout()
    }

    /// Forgets a parked poll whose client went away; false if it was not
    /// parked (already answered, or never). Its offset stays acknowledged.
    /// The C server (`botspace_service_cancel_parked`), the Rust server
    /// (`botspace-hyper`, `botspace-runtime`'s workers) and the JS face (wasm)
    /// call it.
    pub fn cancel_parked(&self, id: PollId) -> bool {
        self.delivery.parked.cancel(id)
    }

    /// The bots with a poll parked here, of `bots` (all, when `all`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn parked_bots_among(&self, all: bool, bots: &[String]) -> Vec<String> {
        self.delivery.parked.bots_among(all, bots)
    }

    /// Polls parked now.
    /// Only the core's tests call it (`botspace_parked_polls` in the metrics
    /// is the same figure).
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// assert_eq!(svc.parked_count(), 0);
    /// ```
    pub fn parked_count(&self) -> usize {
        self.delivery.parked.len()
    }
}
