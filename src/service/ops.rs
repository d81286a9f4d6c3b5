//! The operations paths (docs/operations.md): `GET /healthz`, `GET
//! /readyz` and `GET /admin/metrics`, the graceful stop's flag, and what
//! hosts report for the metrics.

use super::Service;
use crate::error::{ApiError, ApiResult};
use crate::log::{Event, Level};
use crate::metrics::{Snapshot, Timer};
use crate::route::Route;
use crate::store;
use std::sync::atomic::Ordering;

/// `{"ok":true}`, the body of a healthy `/healthz` and a ready `/readyz`.
const OK_BODY: &[u8] = br#"{"ok":true}"#;

impl Service {
    /// The host begins a graceful stop: from now on `GET /readyz` answers
    /// 503 `shutting_down` (load balancers stop sending new traffic) while
    /// every other request is still answered as before. Call it first
    /// thing on SIGTERM, before draining. It cannot be undone.
    /// The C server (`botspace_service_begin_shutdown`), the Rust server
    /// (`botspace-hyper`) and the JS face (wasm) call it.
    pub fn begin_shutdown(&self) {
        self.ops.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether [`Service::begin_shutdown`] was called.
    /// Only the core's tests call it (`GET /readyz` says the same).
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// svc.begin_shutdown();
    /// assert!(svc.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.ops.shutting_down.load(Ordering::SeqCst)
    }

    /// Says `event` through the log hook, as the library's own lines are
    /// said. The runtime crate calls it for what its socket owner's
    /// decisions are to say (an accept error, a broken notification
    /// listener), so that every server prints them through one hook.
    pub fn say(&self, event: Event) {
        self.gateway.log.emit(event);
    }

    /// The host closed a waiting connection to admit a new one at its
    /// connection limit (`botspace_connection_evictions_total`); a warn
    /// line goes to the log hook.
    /// The C ABI (`botspace_service_note_connection_evicted`) and
    /// `botspace-runtime`'s admission (both servers) call it.
    pub fn note_connection_evicted(&self) {
        self.metrics.note_eviction();
        self.gateway.log.emit(Event::new(
            Level::Warn,
            "connection_evicted",
            "connection evicted: the oldest waiting connection was closed to admit a new one at the connection limit",
        ));
    }

    /// The host's webhook sender has `waiting` requests due and waiting for
    /// an outgoing connection slot, under a cap of `cap` connections
    /// (`botspace_webhook_waiting_for_connection`,
    /// `botspace_webhook_connection_cap`). The webhook pump
    /// ([`crate::WebhookPump`]) calls it whenever either changes.
    pub(crate) fn note_webhook_slots(&self, waiting: usize, cap: usize) {
        self.metrics.webhook_waiting.store(waiting as u64, Ordering::Relaxed);
        self.metrics.webhook_connection_cap.store(cap as u64, Ordering::Relaxed);
    }

    /// The host answered 408 to a request that did not arrive whole in
    /// time (`botspace_request_timeouts_total`); an info line goes to the
    /// log hook.
    /// The C ABI (`botspace_service_note_request_timeout`) calls it; the servers
    /// reach it through [`Service::handle_connection_timeout`].
    pub fn note_request_timeout(&self) {
        self.metrics.note_request_timeout();
        self.gateway.log.emit(Event::new(
            Level::Info,
            "request_timeout",
            "request timed out: answered 408, it did not arrive whole in time",
        ));
    }

    /// Acts on the deadlines of `conn` that passed by `now` (the
    /// connection's own clock, see [`HttpConnection::handle_timeout`]): a
    /// request that did not arrive whole in time gets its 408 queued and is
    /// counted and said ([`Service::note_request_timeout`]), here, once,
    /// for every host.
    ///
    /// [`HttpConnection::handle_timeout`]: crate::connection::http::HttpConnection::handle_timeout
    ///
    /// The C server (`botspace_http_connection_handle_timeout`) and the Rust
    /// server (`botspace-hyper`) call it.
    pub fn handle_connection_timeout(
        &self,
        conn: &mut crate::connection::http::HttpConnection,
        now: u64,
    ) -> crate::connection::http::Expired {
        let expired = conn.handle_timeout(now);
        if expired == crate::connection::http::Expired::Request {
            self.note_request_timeout();
        }
        expired
    }

    /// Sets where the library's operator lines go ([`crate::log::Event`]:
    /// evictions, request timeouts, slow-consumer closes, token
    /// rotations), replacing any earlier hook; `None` drops them. The hook
    /// runs on the thread whose call caused the line.
    /// The C server (`botspace_service_set_output_callback`), the Rust server
    /// and `botspace-runtime` call it.
    pub fn set_log_hook(&self, hook: Option<crate::log::LogHook>) {
        self.gateway.log.set(hook);
    }

    /// The answer to an operations path or a host method on the whole
    /// database; `None` for any other route. These need the host credential, checked here (a host that
    /// throttles failed logins per peer has checked it already).
    pub(super) fn answer_ops(&self, route: Route, req: &crate::http::Request<'_>) -> Option<Vec<u8>> {
        match route {
            Route::Health => Some(crate::http::response(200, &[("Cache-Control", "no-store")], OK_BODY)),
            Route::Ready => Some(match self.readiness() {
                Ok(()) => crate::http::response(200, &[("Cache-Control", "no-store")], OK_BODY),
                Err(e) => e.into_response(),
            }),
            Route::Metrics => Some(match self.check_admin(req) {
                Ok(()) => self.metrics_response(),
                Err(e) => e.into_response(),
            }),
            Route::Admin(m) if m.whole_database() => Some(match self.check_admin(req) {
                Ok(()) => self.answer_whole_database(m, req),
                Err(e) => e.into_response(),
            }),
            _ => None,
        }
    }

    /// Ready when no stop has begun and the store answers: a read (one
    /// round trip on PostgreSQL, within `database_timeout_ms` like every
    /// statement). After a write was refused for a full disk (and until
    /// one commits), the check is whether the disk takes writes again: a
    /// scratch file next to the database ([`store::space_probe`]), and a
    /// no-op UPDATE committed. A one-page write alone is
    /// not enough: SQLite reuses WAL space its failed writes had taken.
    /// So readiness comes back by itself once space is freed. Any failure
    /// reads as the error a write would get; what failed inside is never
    /// sent.
    fn readiness(&self) -> ApiResult<()> {
        if self.is_shutting_down() {
            return Err(ApiError::shutting_down());
        }
        let disk_full = self.metrics.disk_full.load(Ordering::Relaxed);
        if disk_full && !self.in_memory && !self.shared_store {
            if let Err(e) = store::space_probe(&self.config) {
                if e.kind() == std::io::ErrorKind::StorageFull {
                    return Err(ApiError::storage_full(e));
                }
            }
        }
        let inner = self.lock();
        let probe =
            if disk_full { store::stats::probe_write(&inner.conn) } else { inner.conn.schema_version().map(|_| ()) };
        drop(inner);
        match probe {
            Ok(()) => {
                self.metrics.disk_full.store(false, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(match ApiError::from(e) {
                e if e.code == crate::ErrorCode::StorageFull => {
                    self.metrics.disk_full.store(true, Ordering::Relaxed);
                    e
                }
                _ => ApiError::storage_unavailable("readiness check failed"),
            }),
        }
    }

    pub(super) fn metrics_response(&self) -> Vec<u8> {
        // As last known: a scrape takes no lock for it.
        let ready = !self.is_shutting_down() && !self.metrics.disk_full.load(Ordering::Relaxed);
        let started = Timer::start();
        let now_ms = self.clock.now_ms();
        let read = self.read_backlog(now_ms);
        let backlog_error = read.is_err();
        let backlog = read.ok().flatten();
        let backlog_age_ms = backlog.map(|b| now_ms.saturating_sub(b.pass_started_ms));
        let backlog_read_us = started.micros().unwrap_or(0);
        // The commit counts without the database lock; only PostgreSQL
        // round trips live with the connection.
        let (durable_commits, syncs) = self.db.wal.as_ref().map_or((0, 0), |w| w.counts());
        let round_trips = if self.shared_store { self.lock().conn.round_trips() } else { 0 };
        let commits = crate::group::CommitStats { round_trips, durable_commits, syncs, ..self.group.stats() };
        let (webhooks, webhook_pending, webhook_in_flight) = self.webhook_figures();
        // Requests waiting for a connection slot are handed out by the
        // core but not sent: not in flight on the wire.
        let webhook_in_flight = webhook_in_flight.saturating_sub(self.metrics.webhook_waiting.load(Ordering::Relaxed));
        let snap = Snapshot {
            commits,
            backlog,
            backlog_age_ms,
            backlog_error,
            backlog_read_us,
            gateway_sessions: self.gateway.sessions.load(Ordering::Relaxed),
            parked_polls: self.parked_count() as u64,
            webhooks,
            webhook_pending,
            webhook_in_flight,
            gateway_closes: self.gateway.close_counts(),
            database_connections: self.database_connections() as u64,
            lease_renewals: self.shared_store.then(|| self.gateway.lease_renewals.load(Ordering::Relaxed)),
            ready,
            shutting_down: self.is_shutting_down(),
            now_ms,
        };
        let text = self.metrics.render(&snap, self.db.wal.as_ref().map(|w| &w.sync_latency));
        let mut out = Vec::with_capacity(text.len() + 160);
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
        out.extend_from_slice(format!("Content-Length: {}\r\nCache-Control: no-store\r\n\r\n", text.len()).as_bytes());
        out.extend_from_slice(text.as_bytes());
        out
    }

    /// The backlog gauges (see [`store::backlog::Scan`]: one chunk of
    /// bots per scrape). On a SQLite file they are read on a read-only
    /// connection of their own, without the service's lock (WAL readers
    /// do not block the writer); elsewhere under the lock.
    fn read_backlog(&self, now_ms: u64) -> Result<Option<store::backlog::Backlog>, ()> {
        let mut scan = self.ops.backlog_scan.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared_store || self.in_memory {
            return scan.step(&self.lock().conn, now_ms).map_err(|_| ());
        }
        let mut reader = self.ops.metrics_reader.lock().unwrap_or_else(|e| e.into_inner());
        if reader.is_none() {
            *reader = store::open_reader(&self.config);
        }
        let read = scan.step(reader.as_ref().ok_or(())?, now_ms);
        if read.is_err() {
            // Opened again next time (the file may have been replaced).
            *reader = None;
        }
        read.map_err(|_| ())
    }
}

/// Counts a request's answer (method, status, error code, latency).
impl Service {
    pub(crate) fn record(&self, request: crate::entry::Input<'_>, resp: &[u8], started: Option<Timer>) {
        let method = request.path().map_or(crate::metrics::OTHER_METHOD, crate::metrics::method_of_path);
        self.record_method(method, resp, started);
    }

    /// Counts an answer; a write refused for a full disk is also said to
    /// the operator, at most once every 10 s with how many were refused
    /// meanwhile (no host looks for it in the answers).
    pub(crate) fn record_method(&self, method: usize, resp: &[u8], started: Option<Timer>) {
        if self.metrics.record(method, resp, started) {
            if let Some(n) = self.metrics.storage_full_report.note(self.now_ms()) {
                self.gateway.log.emit(
                    Event::new(
                        Level::Error,
                        "storage_full",
                        "storage full: the database's disk has no space; writes are refused (503 storage_full, nothing written) until space is freed",
                    )
                    .with("refused", n),
                );
            }
        }
    }
}
