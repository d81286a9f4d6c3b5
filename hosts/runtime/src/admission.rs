//! Which connections a server lets in, decided once for every host: the
//! answer to an accepted socket at `--max-connections` (serve, evict the
//! connection that has waited longest, or refuse busy with or without a
//! linger), the answer to a failed accept (out of descriptors: evict, give
//! up the spare descriptor; back off; said at most once a second), the
//! order in which waiting connections are evicted, and the loop that hears
//! other nodes' commits (retried every second, said at most every 10 s).
//!
//! Sans-IO: the host owns the sockets, the spare descriptor, its tasks or
//! connections (by an id of its own), threads and the clock. It asks
//! what to do ([`admit`], [`accept_failed`], [`run_store_notifications`]), passing
//! `now` in milliseconds of its monotonic clock, and does it. Those
//! count the evictions in the service's metrics and says what is to be said as the library's log
//! events through its log hook, so both servers print the same lines
//! without a logger of their own; the decisions are made here, of their
//! inputs alone.

use crate::host;
use botspace::connection::Report;
use botspace::log::{Event, Level};
use botspace::Service;
use std::collections::{BTreeSet, HashMap};

/// The host's connections that wait for a request, oldest first: the one
/// that has waited longest is the one evicted at a connection limit.
/// Keyed by the host's own id for a connection (a counter, a pointer).
/// Every operation is O(log n); equal times go in the order they were
/// touched.
#[derive(Debug, Default)]
pub struct EvictionOrder {
    /// (since, touch number, id): the first is the oldest.
    queue: BTreeSet<(u64, u64, u64)>,
    /// id → its key in `queue`.
    keys: HashMap<u64, (u64, u64)>,
    touches: u64,
}

impl EvictionOrder {
    pub fn new() -> EvictionOrder {
        EvictionOrder::default()
    }

    /// `id` waits for a request from `now` on: a new connection, or one
    /// whose request was taken and that waits afresh for the next one.
    pub fn touch(&mut self, id: u64, now: u64) {
        self.remove(id);
        self.touches += 1;
        self.queue.insert((now, self.touches, id));
        self.keys.insert(id, (now, self.touches));
    }

    /// `id` is no longer to be evicted (closed, busy, or upgraded to a
    /// gateway); false when it was not there.
    pub fn remove(&mut self, id: u64) -> bool {
        match self.keys.remove(&id) {
            Some((since, n)) => self.queue.remove(&(since, n, id)),
            None => false,
        }
    }

    /// The connection that has waited longest; `None` when none waits.
    pub fn oldest(&self) -> Option<u64> {
        self.queue.first().map(|&(_, _, id)| id)
    }

    /// Since when `id` waits, if it does.
    pub fn since(&self, id: u64) -> Option<u64> {
        self.keys.get(&id).map(|&(since, _)| since)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// What a host does with a socket it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Below the connection limit: serve it.
    Serve,
    /// At the limit: close the host's connection `id` (it waited longest
    /// for a request; `Service::admit` counted and said the eviction), then
    /// serve the new one in its room.
    ServeAfterEvicting(u64),
    /// At the limit with every connection busy: the busy refusal with its
    /// linger ([`botspace::connection::http::HttpConnection::refusing_busy`]),
    /// driven as any connection but not counted as one. Counted as a
    /// lingering refusal: call [`Admission::refusal_ended`] when it ends.
    RefuseLingering,
    /// As `RefuseLingering`, past the cap on lingering refusals
    /// ([`botspace::connection::limits::MAX_LINGERING_REFUSALS`]): the 503 ([`botspace::connection::server_busy`])
    /// best effort, never blocking, and close at once, so a flood of
    /// connections costs one accept each.
    RefuseNow,
}

/// What failed an accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptError {
    /// `EMFILE` or `ENFILE`: the process or the system is out of file
    /// descriptors.
    OutOfDescriptors,
    /// Anything else (`ENOBUFS`, `ENOMEM`, ...).
    Other,
}

/// What a host does after a failed accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterAcceptError {
    /// Close this connection now (it waited longest for a request;
    /// `Service::accept_failed` counted and said the eviction): its
    /// descriptor makes room.
    pub evict: Option<u64>,
    /// Give up the spare descriptor (libev's and libuv's trick), accept
    /// the waiting client on it and open the spare again: with `evict`,
    /// serve that client (the evicted connection's descriptor is its room,
    /// even when the host closes it a moment later); without, refuse it
    /// at once ([`Admit::RefuseNow`]: out of descriptors, no linger) rather
    /// than leave it hanging. A host that has no spare does nothing here.
    pub use_spare: bool,
    /// Accept no more before this (the host's clock): a short settle after
    /// an eviction ([`host::EVICTION_SETTLE_MS`]: the evicted descriptor is
    /// closed by then), else the back-off ([`host::ACCEPT_BACKOFF_MS`]) that
    /// keeps a listener in error from spinning.
    pub resume_at: u64,
}

/// The admission of one server's connections (all its listeners): the
/// eviction order of its waiting connections, its lingering busy refusals
/// and the report of its accept errors. One per server; not thread-safe
/// (a host with several threads keeps it behind a lock).
#[derive(Debug)]
pub struct Admission {
    order: EvictionOrder,
    lingering: usize,
    errors: Report,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission::new()
    }
}

impl Admission {
    pub fn new() -> Admission {
        Admission { order: EvictionOrder::new(), lingering: 0, errors: Report::new(host::ACCEPT_ERROR_REPORT_MS) }
    }

    /// The host's connection `id` waits for a request from `now` on
    /// ([`EvictionOrder::touch`]).
    pub fn touch(&mut self, id: u64, now: u64) {
        self.order.touch(id, now);
    }

    /// The host's connection `id` is not to be evicted any more
    /// ([`EvictionOrder::remove`]).
    pub fn remove(&mut self, id: u64) -> bool {
        self.order.remove(id)
    }

    /// The waiting connections.
    pub fn order(&self) -> &EvictionOrder {
        &self.order
    }

    /// Busy refusals lingering now ([`Admit::RefuseLingering`] not ended).
    pub fn lingering_refusals(&self) -> usize {
        self.lingering
    }

    /// A socket was accepted while `open` connections are open (what
    /// `max` counts: HTTP and gateway, not refusals). At the limit the
    /// connection that has waited longest makes room (it leaves the
    /// order); only when every connection is busy is the new one refused.
    /// Hosts call it through `Service::admit`, which counts and says an
    /// eviction.
    pub(crate) fn admit(&mut self, open: usize, max: usize) -> Admit {
        if open < max {
            return Admit::Serve;
        }
        if let Some(id) = self.evict() {
            return Admit::ServeAfterEvicting(id);
        }
        if botspace::connection::limits::refusal_may_linger(self.lingering) {
            self.lingering += 1;
            Admit::RefuseLingering
        } else {
            Admit::RefuseNow
        }
    }

    /// A refusal of [`Admit::RefuseLingering`] is over (closed).
    pub fn refusal_ended(&mut self) {
        self.lingering = self.lingering.saturating_sub(1);
    }

    /// An accept failed at `now`. Out of descriptors, the connection that
    /// has waited longest makes room and the waiting client gets in on the
    /// spare descriptor; with nobody to evict, or for any other error, the
    /// listener backs off and the error is to be said: `Some(n)` at most
    /// once per [`host::ACCEPT_ERROR_REPORT_MS`], `n` the errors since the
    /// last line (this one included). Hosts call it through
    /// `Service::accept_failed`, which counts and says.
    pub(crate) fn accept_failed(&mut self, kind: AcceptError, now: u64) -> (AfterAcceptError, Option<u64>) {
        if kind == AcceptError::OutOfDescriptors {
            if let Some(id) = self.evict() {
                let after = AfterAcceptError {
                    evict: Some(id),
                    use_spare: true,
                    resume_at: now.saturating_add(host::EVICTION_SETTLE_MS),
                };
                return (after, None);
            }
        }
        let after = AfterAcceptError {
            evict: None,
            use_spare: kind == AcceptError::OutOfDescriptors,
            resume_at: now.saturating_add(host::ACCEPT_BACKOFF_MS),
        };
        (after, self.errors.note(now))
    }

    /// Takes the oldest waiting connection out of the order.
    fn evict(&mut self) -> Option<u64> {
        let id = self.order.oldest()?;
        self.order.remove(id);
        Some(id)
    }
}

/// The loop a server runs on a thread of its own while its store can hear
/// other nodes' commits: waits for them ([`host::NOTIFY_WAIT_MS`] at a
/// time, so a stop is seen that late at most) until `should_stop` says
/// so. When the listening connection breaks (or cannot be opened) the
/// sessions' polls still deliver: it is opened again [`host::NOTIFY_RETRY_MS`]
/// later, waited out in steps of [`host::NOTIFY_RETRY_STEP_MS`] that watch
/// `should_stop`, and the failure is said (`report`) at most every
/// [`host::NOTIFY_ERROR_REPORT_MS`]. The I/O is the caller's: `wait`,
/// `sleep_ms` and `now` (milliseconds of a monotonic clock).
pub(crate) fn notification_loop<E>(
    mut wait: impl FnMut(u64) -> Result<usize, E>,
    should_stop: &dyn Fn() -> bool,
    mut sleep_ms: impl FnMut(u64),
    mut now: impl FnMut() -> u64,
    mut report: impl FnMut(&E),
) {
    let said = Report::new(host::NOTIFY_ERROR_REPORT_MS);
    while !should_stop() {
        if let Err(e) = wait(host::NOTIFY_WAIT_MS) {
            if said.note(now()).is_some() {
                report(&e);
            }
            let mut waited = 0;
            while waited < host::NOTIFY_RETRY_MS && !should_stop() {
                sleep_ms(host::NOTIFY_RETRY_STEP_MS);
                waited += host::NOTIFY_RETRY_STEP_MS;
            }
        }
    }
}

// The admission's side that needs the service: an eviction is counted in
// the metrics and said, an accept error and a broken notification listener
// are said through the log hook. Hosts call these, so no host counts or
// says any of it itself.
/// What to do with a socket accepted while `open` connections are open
/// (what `max` counts: HTTP and gateway connections, not refusals),
/// decided by `admission` (`Admission`'s rules): serve it; at the
/// limit, evict the connection that has waited longest (counted in
/// `botspace_connection_evictions_total` and said, as
/// `Service::note_connection_evicted`); with every connection busy,
/// refuse it, with a linger while fewer than 256 refusals linger.
pub fn admit(svc: &Service, admission: &mut Admission, open: usize, max: usize) -> Admit {
    let admit = admission.admit(open, max);
    if let Admit::ServeAfterEvicting(_) = admit {
        svc.note_connection_evicted();
    }
    admit
}

/// What to do after an accept that failed at `now` (the host's
/// monotonic clock, in milliseconds) with `error` (its text), decided
/// by `admission`: an eviction is counted and said as in
/// [`admit`]; an error is said through the log hook (level
/// error, `accept failed: {error} ({n} in the last second)`, no
/// fields: the line the servers printed of their own) at most once a
/// second, with how many there were.
pub fn accept_failed(
    svc: &Service,
    admission: &mut Admission,
    kind: AcceptError,
    error: &str,
    now: u64,
) -> AfterAcceptError {
    let (after, say) = admission.accept_failed(kind, now);
    if after.evict.is_some() {
        svc.note_connection_evicted();
    }
    if let Some(n) = say {
        svc.say(Event::line(Level::Error, format!("accept failed: {error} ({n} in the last second)")));
    }
    after
}

/// Hears other nodes' commits until `should_stop` returns true
/// ([`Service::wait_store_notifications`] in a loop): **blocks the
/// calling thread on the network**, so run it on a thread of its own.
/// `should_stop` is asked at least every 250 ms (`NOTIFY_WAIT_MS`) and
/// every 50 ms while a broken listening connection waits out its
/// one-second retry; the failure is said through the log hook (level
/// warn, `listening for notifications failed: {error}; retrying every
/// second`) at most every 10 s. Returns at once when the store cannot
/// hear other nodes ([`Service::has_store_notifications`] false).
pub fn run_store_notifications(svc: &Service, should_stop: &dyn Fn() -> bool) {
    if !svc.has_store_notifications() {
        return;
    }
    let started = std::time::Instant::now();
    notification_loop(
        |ms| svc.wait_store_notifications(ms),
        should_stop,
        |ms| std::thread::sleep(std::time::Duration::from_millis(ms)),
        || started.elapsed().as_millis() as u64,
        |e| {
            svc.say(Event::line(Level::Warn, format!("listening for notifications failed: {e}; retrying every second")))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    #[test]
    fn the_order_gives_the_connection_that_waited_longest() {
        let mut o = EvictionOrder::new();
        assert_eq!(o.oldest(), None);
        o.touch(7, 100);
        o.touch(3, 50);
        o.touch(9, 50);
        assert_eq!((o.oldest(), o.len()), (Some(3), 3));
        // Equal times: the one touched first.
        assert!(o.remove(3));
        assert_eq!(o.oldest(), Some(9));
        // A request taken: it waits afresh, behind the others.
        o.touch(9, 120);
        assert_eq!((o.oldest(), o.since(9)), (Some(7), Some(120)));
        assert!(!o.remove(3), "removed already");
        assert!(o.remove(7));
        assert!(o.remove(9));
        assert_eq!((o.oldest(), o.is_empty(), o.since(9)), (None, true, None));
    }

    #[test]
    fn below_the_limit_every_socket_is_served() {
        let mut a = Admission::new();
        a.touch(1, 0);
        assert_eq!(a.admit(0, 1), Admit::Serve);
        assert_eq!(a.admit(9, 10), Admit::Serve);
        assert_eq!((a.order().len(), a.order().oldest()), (1, Some(1)));
    }

    #[test]
    fn at_the_limit_the_oldest_waiting_connection_makes_room() {
        let mut a = Admission::new();
        a.touch(1, 10);
        a.touch(2, 5);
        assert_eq!(a.admit(2, 2), Admit::ServeAfterEvicting(2));
        assert_eq!(a.admit(5, 2), Admit::ServeAfterEvicting(1), "over the limit too");
        assert_eq!((a.order().len(), a.lingering_refusals()), (0, 0));
    }

    #[test]
    fn with_every_connection_busy_256_refusals_linger_then_they_close_at_once() {
        let mut a = Admission::new();
        for i in 0..botspace::connection::limits::MAX_LINGERING_REFUSALS {
            assert_eq!(a.admit(1, 1), Admit::RefuseLingering, "refusal {i}");
        }
        assert_eq!(a.lingering_refusals(), 256);
        assert_eq!(a.admit(1, 1), Admit::RefuseNow);
        assert_eq!(a.lingering_refusals(), 256, "a refusal that does not linger is not counted");
        a.refusal_ended();
        assert_eq!(a.admit(1, 1), Admit::RefuseLingering);
        for _ in 0..300 {
            a.refusal_ended();
        }
        assert_eq!(a.lingering_refusals(), 0, "never below zero");
    }

    #[test]
    fn out_of_descriptors_the_oldest_makes_room_for_the_client_on_the_spare() {
        let mut a = Admission::new();
        a.touch(4, 1);
        let after = a.accept_failed(AcceptError::OutOfDescriptors, 1_000);
        // An eviction is not an accept error: nothing to say.
        assert_eq!(after, (AfterAcceptError { evict: Some(4), use_spare: true, resume_at: 1_001 }, None));
        assert!(a.order().is_empty());
    }

    #[test]
    fn out_of_descriptors_with_nobody_to_evict_the_client_is_refused_and_the_listener_backs_off() {
        let mut a = Admission::new();
        let after = a.accept_failed(AcceptError::OutOfDescriptors, 2_000);
        assert_eq!(after, (AfterAcceptError { evict: None, use_spare: true, resume_at: 2_050 }, Some(1)));
    }

    #[test]
    fn accept_errors_are_to_be_said_at_most_once_a_second_with_their_count() {
        let mut a = Admission::new();
        let other = AfterAcceptError { evict: None, use_spare: false, resume_at: 60 };
        assert_eq!(a.accept_failed(AcceptError::Other, 10), (other, Some(1)));
        assert_eq!(a.accept_failed(AcceptError::Other, 60).1, None);
        assert_eq!(a.accept_failed(AcceptError::Other, 1_009).1, None);
        // Out of descriptors with nobody to evict counts the same.
        assert_eq!(a.accept_failed(AcceptError::OutOfDescriptors, 1_010).1, Some(3));
        assert_eq!(a.accept_failed(AcceptError::Other, 1_500).1, None);
        assert_eq!(a.accept_failed(AcceptError::Other, 5_000).1, Some(2));
        assert_eq!(a.accept_failed(AcceptError::Other, u64::MAX).0.resume_at, u64::MAX, "no overflow");
    }
    /// Runs the notification loop over a script of wait results on a fake
    /// clock: (the log of what it did, the lines said).
    fn run_loop(results: Vec<Result<usize, &'static str>>, stop_after_waits: usize) -> (Vec<String>, Vec<String>) {
        let clock = Cell::new(0u64);
        let log = RefCell::new(Vec::new());
        let said = RefCell::new(Vec::new());
        let waits = Cell::new(0usize);
        let results = RefCell::new(results.into_iter());
        notification_loop(
            |ms| {
                waits.set(waits.get() + 1);
                log.borrow_mut().push(format!("wait {ms} at {}", clock.get()));
                let r = results.borrow_mut().next().unwrap_or(Ok(0));
                clock.set(clock.get() + if r.is_ok() { ms } else { 1 });
                r
            },
            &|| waits.get() >= stop_after_waits,
            |ms| clock.set(clock.get() + ms),
            || clock.get(),
            |e| said.borrow_mut().push(format!("{e} at {}", clock.get())),
        );
        (log.into_inner(), said.into_inner())
    }

    #[test]
    fn the_notification_loop_waits_250_ms_at_a_time_until_told_to_stop() {
        let (log, said) = run_loop(vec![Ok(0), Ok(2), Ok(0)], 3);
        assert_eq!(log, ["wait 250 at 0", "wait 250 at 250", "wait 250 at 500"]);
        assert!(said.is_empty());
    }

    #[test]
    fn a_broken_listener_is_retried_every_second_and_said_every_10_s() {
        let fails = vec![Err("broken"); 12];
        let (log, said) = run_loop(fails, 12);
        // Each failure: a 1 ms wait, then 1 000 ms in 50 ms steps.
        assert_eq!(log[..3], ["wait 250 at 0", "wait 250 at 1001", "wait 250 at 2002"]);
        assert_eq!(log.len(), 12);
        // Said at the first failure, then once 10 s have passed (at 10 010).
        assert_eq!(said, ["broken at 1", "broken at 10011"]);
    }

    #[test]
    fn a_stop_during_the_retry_is_seen_within_one_step() {
        let steps = Cell::new(0u32);
        let stop = Cell::new(false);
        notification_loop(
            |_| Err::<usize, _>("broken"),
            &|| stop.get(),
            |ms| {
                assert_eq!(ms, 50);
                steps.set(steps.get() + 1);
                if steps.get() == 3 {
                    stop.set(true);
                }
            },
            || 0,
            |_| {},
        );
        assert_eq!(steps.get(), 3, "no step after the stop, no second wait");
    }
}

#[cfg(test)]
mod with_service {
    use super::{accept_failed, admit, run_store_notifications, AcceptError, Admission, Admit, AfterAcceptError};
    use botspace::log::{Event, Level};
    use botspace::{ClockKind, Config, Service};
    use std::sync::{Arc, Mutex};

    /// The log events a test's service said: (level, text line).
    type Said = Arc<Mutex<Vec<(Level, String)>>>;

    /// A service whose log events are kept.
    fn service() -> (Service, Said) {
        let cfg = Config::default().with(|c| {
            c.admin_secret = "an-admin-secret-0123".into();
            c.clock = ClockKind::Manual;
        });
        let svc = Service::open(cfg).unwrap();
        let lines: Said = Arc::default();
        let sink = lines.clone();
        svc.set_log_hook(Some(Arc::new(move |ev: &Event| sink.lock().unwrap().push((ev.level, ev.text())))));
        (svc, lines)
    }

    const EVICTED: &str = "connection evicted: the oldest waiting connection was closed to admit a new one at the connection limit event=connection_evicted";

    /// `botspace_connection_evictions_total`, as the operator scrapes it.
    fn evictions(svc: &Service) -> u64 {
        let resp =
            svc.handle_request(b"GET /admin/metrics HTTP/1.1\r\nAuthorization: Admin an-admin-secret-0123\r\n\r\n");
        let text = String::from_utf8(resp).unwrap();
        let line = text.lines().find(|l| l.starts_with("botspace_connection_evictions_total ")).expect("the counter");
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[test]
    fn an_eviction_at_the_limit_is_counted_and_said_a_serve_or_a_refusal_is_not() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        a.touch(1, 10);
        assert_eq!(admit(&svc, &mut a, 0, 1), Admit::Serve);
        assert_eq!(admit(&svc, &mut a, 1, 1), Admit::ServeAfterEvicting(1));
        assert_eq!(admit(&svc, &mut a, 1, 1), Admit::RefuseLingering);
        assert_eq!(evictions(&svc), 1);
        assert_eq!(*lines.lock().unwrap(), [(Level::Warn, EVICTED.to_string())]);
    }

    #[test]
    fn out_of_descriptors_an_eviction_is_said_and_no_accept_error() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        a.touch(4, 1);
        let after = accept_failed(&svc, &mut a, AcceptError::OutOfDescriptors, "Too many open files", 1_000);
        assert_eq!(after, AfterAcceptError { evict: Some(4), use_spare: true, resume_at: 1_001 });
        assert_eq!(evictions(&svc), 1);
        assert_eq!(*lines.lock().unwrap(), [(Level::Warn, EVICTED.to_string())]);
    }

    #[test]
    fn accept_errors_are_said_at_level_error_at_most_once_a_second_with_their_count() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        let after = accept_failed(&svc, &mut a, AcceptError::OutOfDescriptors, "Too many open files", 2_000);
        assert_eq!(after, AfterAcceptError { evict: None, use_spare: true, resume_at: 2_050 });
        accept_failed(&svc, &mut a, AcceptError::Other, "No buffer space available", 2_500);
        accept_failed(&svc, &mut a, AcceptError::Other, "No buffer space available", 3_000);
        assert_eq!(
            *lines.lock().unwrap(),
            [
                (Level::Error, "accept failed: Too many open files (1 in the last second)".to_string()),
                (Level::Error, "accept failed: No buffer space available (2 in the last second)".to_string()),
            ]
        );
        assert_eq!(evictions(&svc), 0);
    }

    #[test]
    fn without_store_notifications_the_run_returns_at_once() {
        let (svc, lines) = service();
        let asked = std::cell::Cell::new(0);
        run_store_notifications(&svc, &|| {
            asked.set(asked.get() + 1);
            false
        });
        assert_eq!(asked.get(), 0);
        assert!(lines.lock().unwrap().is_empty());
    }
}
