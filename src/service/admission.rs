//! The admission's side that needs the service (`policy/admission.rs`
//! decides): an eviction is counted in the metrics and said, an accept
//! error and a broken notification listener are said through the log hook,
//! and the notification loop waits on the service's store. Hosts call
//! these, so no host counts or says any of it itself.

use super::Service;
use crate::log::{Event, Level};
use crate::policy::admission::{notification_loop, AcceptError, Admission, Admit, AfterAcceptError};

impl Service {
    /// What to do with a socket accepted while `open` connections are open
    /// (what `max` counts: HTTP and gateway connections, not refusals),
    /// decided by `admission` (`Admission`'s rules): serve it; at the
    /// limit, evict the connection that has waited longest (counted in
    /// `botspace_connection_evictions_total` and said, as
    /// [`Service::note_connection_evicted`]); with every connection busy,
    /// refuse it, with a linger while fewer than 256 refusals linger.
    pub fn admit(&self, admission: &mut Admission, open: usize, max: usize) -> Admit {
        let admit = admission.admit(open, max);
        if let Admit::ServeAfterEvicting(_) = admit {
            self.note_connection_evicted();
        }
        admit
    }

    /// What to do after an accept that failed at `now` (the host's
    /// monotonic clock, in milliseconds) with `error` (its text), decided
    /// by `admission`: an eviction is counted and said as in
    /// [`Service::admit`]; an error is said through the log hook (level
    /// error, `accept failed: {error} ({n} in the last second)`, no
    /// fields: the line the servers printed of their own) at most once a
    /// second, with how many there were.
    pub fn accept_failed(
        &self,
        admission: &mut Admission,
        kind: AcceptError,
        error: &str,
        now: u64,
    ) -> AfterAcceptError {
        let (after, say) = admission.accept_failed(kind, now);
        if after.evict.is_some() {
            self.note_connection_evicted();
        }
        if let Some(n) = say {
            self.gateway
                .log
                .emit(Event::line(Level::Error, format!("accept failed: {error} ({n} in the last second)")));
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
    pub fn run_store_notifications(&self, should_stop: &dyn Fn() -> bool) {
        if !self.has_store_notifications() {
            return;
        }
        let started = std::time::Instant::now();
        notification_loop(
            |ms| self.wait_store_notifications(ms),
            should_stop,
            |ms| std::thread::sleep(std::time::Duration::from_millis(ms)),
            || started.elapsed().as_millis() as u64,
            |e| {
                self.gateway.log.emit(Event::line(
                    Level::Warn,
                    format!("listening for notifications failed: {e}; retrying every second"),
                ))
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::log::{Event, Level};
    use crate::policy::admission::{AcceptError, Admission, Admit, AfterAcceptError};
    use crate::{ClockKind, Config, Service};
    use std::sync::atomic::Ordering;
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

    fn evictions(svc: &Service) -> u64 {
        svc.metrics.evictions.load(Ordering::Relaxed)
    }

    #[test]
    fn an_eviction_at_the_limit_is_counted_and_said_a_serve_or_a_refusal_is_not() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        a.touch(1, 10);
        assert_eq!(svc.admit(&mut a, 0, 1), Admit::Serve);
        assert_eq!(svc.admit(&mut a, 1, 1), Admit::ServeAfterEvicting(1));
        assert_eq!(svc.admit(&mut a, 1, 1), Admit::RefuseLingering);
        assert_eq!(evictions(&svc), 1);
        assert_eq!(*lines.lock().unwrap(), [(Level::Warn, EVICTED.to_string())]);
    }

    #[test]
    fn out_of_descriptors_an_eviction_is_said_and_no_accept_error() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        a.touch(4, 1);
        let after = svc.accept_failed(&mut a, AcceptError::OutOfDescriptors, "Too many open files", 1_000);
        assert_eq!(after, AfterAcceptError { evict: Some(4), use_spare: true, resume_at: 1_001 });
        assert_eq!(evictions(&svc), 1);
        assert_eq!(*lines.lock().unwrap(), [(Level::Warn, EVICTED.to_string())]);
    }

    #[test]
    fn accept_errors_are_said_at_level_error_at_most_once_a_second_with_their_count() {
        let (svc, lines) = service();
        let mut a = Admission::new();
        let after = svc.accept_failed(&mut a, AcceptError::OutOfDescriptors, "Too many open files", 2_000);
        assert_eq!(after, AfterAcceptError { evict: None, use_spare: true, resume_at: 2_050 });
        svc.accept_failed(&mut a, AcceptError::Other, "No buffer space available", 2_500);
        svc.accept_failed(&mut a, AcceptError::Other, "No buffer space available", 3_000);
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
        svc.run_store_notifications(&|| {
            asked.set(asked.get() + 1);
            false
        });
        assert_eq!(asked.get(), 0);
        assert!(lines.lock().unwrap().is_empty());
    }
}
