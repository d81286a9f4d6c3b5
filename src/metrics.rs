//! The service's own counters and their Prometheus text exposition
//! (`GET /admin/metrics`, docs/operations.md).
//!
//! Counting costs the request path a few relaxed atomic adds: every
//! counter is a fixed array indexed by words the library already has (a
//! method from the route table, an error code, a close reason), so no
//! label grows with the number of bots, users or chats, no map is looked
//! up and no lock is taken. A scrape reads the atomics and renders text;
//! the gauges that need the database (backlogs) are read by the service
//! (`service/ops.rs`) and passed in.

pub(crate) use crate::histogram::{Histogram, Timer, SYNC_US};
use crate::protocol::{CloseCode, ErrorCode, RateLimitScope};
use crate::route::{AdminMethod, BotMethod};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The `method` label values after the bot and admin methods: the
/// gateway upgrade, the operations paths, the console's pages, and
/// anything that names no method.
const EXTRA_METHODS: [&str; 6] = ["gateway", "healthz", "readyz", "metrics", "console", "other"];
const N_BOT: usize = BotMethod::ALL.len();
const N_ADMIN: usize = AdminMethod::ALL.len();
pub(crate) const N_METHODS: usize = N_BOT + N_ADMIN + EXTRA_METHODS.len();
pub(crate) const OTHER_METHOD: usize = N_METHODS - 1;

/// Answers that are not errors, by status; then errors by code; then
/// anything else (never expected: every refusal carries the envelope).
const OK_STATUSES: [u16; 3] = [200, 101, 304];
const N_CODES: usize = ErrorCode::ALL.len();
const N_OUTCOMES: usize = OK_STATUSES.len() + N_CODES + 1;
const OTHER_OUTCOME: usize = N_OUTCOMES - 1;

/// `scope` of a 429 `rate_limited`.
const SCOPES: &[RateLimitScope] = RateLimitScope::ALL;
/// The storage failures a request can meet.
const STORAGE_KINDS: [ErrorCode; 3] =
    [ErrorCode::StorageFull, ErrorCode::StorageUnavailable, ErrorCode::CommitOutcomeUnknown];

/// A full disk is said at most this often (with how many writes it
/// refused meanwhile).
const STORAGE_FULL_REPORT_MS: u64 = 10_000;

/// Request latency buckets, in microseconds (0.5 ms to 10 s).
const LATENCY_US: &[u64] = &[
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
    10_000_000,
];
/// Requests per transaction.
const BATCH_SIZES: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// The index of a request's `method` label, from its request line: the
/// path's method name if the route table has it, else "other".
#[cfg(test)]
pub(crate) fn method_of(request: &[u8]) -> usize {
    crate::entry::Input::Wire(request).path().map_or(OTHER_METHOD, method_of_path)
}

pub(crate) fn method_of_path(path: &str) -> usize {
    let extra = |name: &str| N_BOT + N_ADMIN + EXTRA_METHODS.iter().position(|m| *m == name).unwrap_or(5);
    match path {
        "/healthz" => return extra("healthz"),
        "/readyz" => return extra("readyz"),
        "/admin/metrics" => return extra("metrics"),
        "/bot/gateway" => return extra("gateway"),
        _ => {}
    }
    if let Some(name) = path.strip_prefix("/bot/") {
        return BotMethod::ALL.iter().position(|m| m.name() == name).unwrap_or(OTHER_METHOD);
    }
    if let Some(name) = path.strip_prefix("/admin/") {
        if let Some(i) = AdminMethod::ALL.iter().position(|m| m.name() == name) {
            return N_BOT + i;
        }
        if crate::console::Asset::is_console_path(name) {
            return extra("console");
        }
    }
    OTHER_METHOD
}

/// The index of a routed request's `method` label: the route's own
/// position, without reading the request line again.
pub(crate) fn method_of_route(route: crate::route::Route) -> usize {
    use crate::route::Route;
    let extra = N_BOT + N_ADMIN;
    match route {
        Route::Bot(m) => m as usize,
        Route::Admin(m) => N_BOT + m as usize,
        Route::Gateway => extra,
        Route::Health => extra + 1,
        Route::Ready => extra + 2,
        Route::Metrics => extra + 3,
        Route::Console(_) => extra + 4,
    }
}

fn method_name(i: usize) -> &'static str {
    if i < N_BOT {
        BotMethod::ALL[i].name()
    } else if i < N_BOT + N_ADMIN {
        AdminMethod::ALL[i - N_BOT].name()
    } else {
        EXTRA_METHODS[i - N_BOT - N_ADMIN]
    }
}

/// The HTTP status of a complete response (`HTTP/1.1 NNN`), 0 if it has
/// none: three digits read in place, no text parsing on the request path.
fn status_of(resp: &[u8]) -> u16 {
    match resp.get(9..12) {
        Some(&[a, b, c]) if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => 0,
    }
}

/// The string value of `"key":"…"` in a (small, error) response.
fn json_str<'a>(resp: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = resp.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &resp[at..];
    let end = rest.iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// A request's outcome from its answer: a success status, or the error
/// code (the envelope's `error`). Only errors are read past the status.
#[inline]
fn outcome_of(resp: &[u8]) -> (usize, Option<ErrorCode>) {
    // Nearly every answer is a 200: one compare, nothing else read.
    if resp.get(9..12) == Some(b"200") {
        return (0, None);
    }
    let status = status_of(resp);
    if let Some(i) = OK_STATUSES.iter().position(|s| *s == status) {
        return (i, None);
    }
    match json_str(resp, br#""error":""#).and_then(ErrorCode::parse) {
        Some(code) => (OK_STATUSES.len() + code as usize, Some(code)),
        None => (OTHER_OUTCOME, None),
    }
}

/// What came of a webhook attempt: the receiver answered 2xx, answered
/// something else, did not answer in time, or could not be reached.
pub(crate) const WEBHOOK_RESULTS: [&str; 4] = ["delivered", "refused", "timed_out", "unreachable"];

/// The service's counters.
pub(crate) struct Metrics {
    /// `N_METHODS × N_OUTCOMES` request counts.
    requests: Box<[AtomicU64]>,
    latency: Box<[Histogram]>,
    pub(crate) batch_size: Histogram,
    pub(crate) commit_latency: Histogram,
    /// From a commit on another node to its notification here (PostgreSQL).
    pub(crate) notification_lag: Histogram,
    rate_limited: [AtomicU64; SCOPES.len()],
    storage_errors: [AtomicU64; STORAGE_KINDS.len()],
    pub(crate) evictions: AtomicU64,
    request_timeouts: AtomicU64,
    /// Webhook attempts by what came of them (`WEBHOOK_RESULTS`), and the
    /// attempts that were retries.
    pub(crate) webhook_attempts: [AtomicU64; WEBHOOK_RESULTS.len()],
    pub(crate) webhook_retries: AtomicU64,
    /// Webhook requests due and waiting for an outgoing connection slot,
    /// and the server's cap on those connections (0: no host said one):
    /// the runtime's webhook pump sets them (`Service::note_webhook_slots`).
    pub(crate) webhook_waiting: AtomicU64,
    pub(crate) webhook_connection_cap: AtomicU64,
    /// A write was refused for a full disk and none has succeeded since:
    /// readiness then probes with a write.
    pub(crate) disk_full: AtomicBool,
    /// The operator's line about a full disk: at most once every 10 s.
    pub(crate) storage_full_report: crate::connection::Report,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            requests: (0..N_METHODS * N_OUTCOMES).map(|_| AtomicU64::new(0)).collect(),
            latency: (0..N_METHODS).map(|_| Histogram::new(LATENCY_US)).collect(),
            batch_size: Histogram::new(BATCH_SIZES),
            commit_latency: Histogram::new(SYNC_US),
            notification_lag: Histogram::new(SYNC_US),
            rate_limited: Default::default(),
            storage_errors: Default::default(),
            evictions: AtomicU64::new(0),
            request_timeouts: AtomicU64::new(0),
            webhook_attempts: Default::default(),
            webhook_retries: AtomicU64::new(0),
            webhook_waiting: AtomicU64::new(0),
            webhook_connection_cap: AtomicU64::new(0),
            disk_full: AtomicBool::new(false),
            storage_full_report: crate::connection::Report::new(STORAGE_FULL_REPORT_MS),
        }
    }
}

/// What a scrape reads outside these counters: the store's backlogs, the
/// commit counts, the gateway, the state of the service.
#[derive(Debug, Default, Clone)]
pub(crate) struct Snapshot {
    pub commits: crate::group::CommitStats,
    /// `None` when the store could not be read (the scrape still answers).
    pub backlog: Option<crate::store::backlog::Backlog>,
    /// How old the event backlog's last completed pass is.
    pub backlog_age_ms: Option<u64>,
    /// The store could not be read for them this time.
    pub backlog_error: bool,
    pub backlog_read_us: u64,
    pub gateway_sessions: u64,
    /// getUpdates polls parked now (long polling).
    pub parked_polls: u64,
    /// Webhooks this node delivers, their events read and not yet
    /// delivered, and attempts in flight.
    pub webhooks: u64,
    pub webhook_pending: u64,
    pub webhook_in_flight: u64,
    pub gateway_closes: Vec<(CloseCode, u64)>,
    pub database_connections: u64,
    pub lease_renewals: Option<u64>,
    pub ready: bool,
    pub shutting_down: bool,
    /// The service clock at the scrape (Unix ms).
    pub now_ms: u64,
}

/// A new metric's `# HELP` and `# TYPE` lines.
fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A metric with one unlabelled sample.
fn metric(out: &mut String, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
    head(out, name, kind, help);
    line(out, name, "", v);
}

fn line(out: &mut String, name: &str, labels: &str, v: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {v}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

impl Metrics {
    /// Counts one answered request; `started`, for a sampled one
    /// ([`Timer::sampled`]), times it.
    /// Counts an answer; true when it refused a write for a full disk.
    #[inline]
    pub(crate) fn record(&self, method: usize, resp: &[u8], started: Option<Timer>) -> bool {
        let (outcome, code) = outcome_of(resp);
        self.requests[method * N_OUTCOMES + outcome].fetch_add(1, Relaxed);
        if let Some(us) = started.and_then(Timer::micros) {
            self.latency[method].observe(us);
        }
        let Some(code) = code else { return false };
        if code == ErrorCode::RateLimited {
            let scope = json_str(resp, br#""scope":""#).and_then(|s| SCOPES.iter().position(|x| x.as_str() == s));
            if let Some(i) = scope {
                self.rate_limited[i].fetch_add(1, Relaxed);
            }
        } else if let Some(i) = STORAGE_KINDS.iter().position(|k| *k == code) {
            self.storage_errors[i].fetch_add(1, Relaxed);
            if code == ErrorCode::StorageFull {
                self.disk_full.store(true, Relaxed);
                return true;
            }
        }
        false
    }

    pub(crate) fn note_eviction(&self) {
        self.evictions.fetch_add(1, Relaxed);
    }

    pub(crate) fn note_request_timeout(&self) {
        self.request_timeouts.fetch_add(1, Relaxed);
    }

    /// The exposition, Prometheus text format 0.0.4.
    pub(crate) fn render(&self, s: &Snapshot, wal_sync: Option<&Histogram>) -> String {
        let mut out = String::with_capacity(32 * 1024);
        let o = &mut out;

        head(
            o,
            "botspace_requests_total",
            "counter",
            "Requests answered, by method (unknown paths: other), HTTP status and error code (none for a success).",
        );
        for (i, count) in self.requests.iter().enumerate() {
            let n = count.load(Relaxed);
            if n == 0 {
                continue;
            }
            let (m, k) = (i / N_OUTCOMES, i % N_OUTCOMES);
            let (status, error) = match k.checked_sub(OK_STATUSES.len()) {
                None => (OK_STATUSES[k].to_string(), "none"),
                Some(c) if c < N_CODES => (ErrorCode::ALL[c].status().to_string(), ErrorCode::ALL[c].as_str()),
                Some(_) => ("other".to_string(), "other"),
            };
            let labels = format!("method=\"{}\",status=\"{status}\",error=\"{error}\"", method_name(m));
            line(o, "botspace_requests_total", &labels, n);
        }

        head(o, "botspace_request_duration_seconds", "histogram",
            "Time from a request's bytes handed to the library to its answer, by method (in a host batch: the batch's time).");
        for m in 0..N_METHODS {
            let h = &self.latency[m];
            if h.counts.iter().all(|c| c.load(Relaxed) == 0) {
                continue;
            }
            h.render(o, "botspace_request_duration_seconds", &format!("method=\"{}\"", method_name(m)), 1e6);
        }

        head(
            o,
            "botspace_commit_batch_size",
            "histogram",
            "Requests per write transaction (group commit and host batches; 1 for a request that ran alone).",
        );
        self.batch_size.render(o, "botspace_commit_batch_size", "", 1.0);
        head(
            o,
            "botspace_commit_duration_seconds",
            "histogram",
            "Time of a write transaction's COMMIT statement (with its fsync when the database syncs at commit).",
        );
        self.commit_latency.render(o, "botspace_commit_duration_seconds", "", 1e6);
        head(o, "botspace_wal_fsync_duration_seconds", "histogram",
            "Time of the fdatasync that makes group commits durable, on a SQLite file with synchronous = full (empty elsewhere).");
        match wal_sync {
            Some(h) => h.render(o, "botspace_wal_fsync_duration_seconds", "", 1e6),
            None => Histogram::new(SYNC_US).render(o, "botspace_wal_fsync_duration_seconds", "", 1e6),
        }

        let c = &s.commits;
        metric(
            o,
            "botspace_group_commit_requests_total",
            "counter",
            "Requests that went through group commit (getMe and host batches aside).",
            c.requests,
        );
        metric(o, "botspace_group_commit_transactions_total", "counter", "Transactions those requests took.", c.groups);
        metric(
            o,
            "botspace_group_commit_waiting_requests",
            "gauge",
            "Requests waiting for the next group commit now.",
            c.waiting,
        );
        metric(
            o,
            "botspace_wal_durable_commits_total",
            "counter",
            "Commits made durable by the service's own WAL sync (SQLite file, synchronous = full).",
            c.durable_commits,
        );
        metric(o, "botspace_wal_fsyncs_total", "counter", "fdatasync calls made for them.", c.syncs);
        metric(
            o,
            "botspace_database_round_trips_total",
            "counter",
            "Round trips to a database server (PostgreSQL; 0 on SQLite).",
            c.round_trips,
        );
        metric(
            o,
            "botspace_database_connections",
            "gauge",
            "Connections the service holds to its database.",
            s.database_connections,
        );
        if let Some(n) = s.lease_renewals {
            metric(
                o,
                "botspace_gateway_lease_renewals_total",
                "counter",
                "Gateway lease renewals written to the shared store (PostgreSQL).",
                n,
            );
            head(
                o,
                "botspace_notification_lag_seconds",
                "histogram",
                "From another node's COMMIT to its notification taken here (PostgreSQL; the nodes' wall clocks).",
            );
            self.notification_lag.render(o, "botspace_notification_lag_seconds", "", 1e6);
        }

        head(
            o,
            "botspace_storage_errors_total",
            "counter",
            "Requests refused by a storage failure, by kind (the error code they were answered with).",
        );
        for (i, k) in STORAGE_KINDS.iter().enumerate() {
            line(
                o,
                "botspace_storage_errors_total",
                &format!("kind=\"{}\"", k.as_str()),
                self.storage_errors[i].load(Relaxed),
            );
        }
        head(
            o,
            "botspace_rate_limited_total",
            "counter",
            "Requests refused with 429 rate_limited, by the scope that ran out.",
        );
        for (i, sc) in SCOPES.iter().enumerate() {
            line(o, "botspace_rate_limited_total", &format!("scope=\"{sc}\""), self.rate_limited[i].load(Relaxed));
        }

        metric(o, "botspace_gateway_sessions", "gauge", "Gateway sessions open on this node.", s.gateway_sessions);
        metric(
            o,
            "botspace_parked_polls",
            "gauge",
            "getUpdates long polls waiting on this node (docs/delivery.md).",
            s.parked_polls,
        );
        metric(
            o,
            "botspace_webhooks",
            "gauge",
            "Bots whose webhooks this node delivers (docs/delivery.md).",
            s.webhooks,
        );
        metric(o, "botspace_webhook_pending_events", "gauge", "Events of those bots read from their logs and not yet delivered (the rest of a backlog is in botspace_unacked_events).", s.webhook_pending);
        metric(
            o,
            "botspace_webhook_attempts_in_flight",
            "gauge",
            "Webhook requests sent and not yet answered.",
            s.webhook_in_flight,
        );
        metric(o, "botspace_webhook_waiting_for_connection", "gauge", "Webhook requests due and waiting for a free outgoing connection under the server's cap (docs/reliability.md).", self.webhook_waiting.load(Relaxed));
        metric(
            o,
            "botspace_webhook_connection_cap",
            "gauge",
            "Most webhook connections this server opens at once.",
            self.webhook_connection_cap.load(Relaxed),
        );
        head(
            o,
            "botspace_webhook_attempts_total",
            "counter",
            "Webhook requests by result: delivered (2xx), refused (another status), timed_out (no answer in 10 s), unreachable (no connection).",
        );
        for (i, r) in WEBHOOK_RESULTS.iter().enumerate() {
            line(
                o,
                "botspace_webhook_attempts_total",
                &format!("result=\"{r}\""),
                self.webhook_attempts[i].load(Relaxed),
            );
        }
        metric(
            o,
            "botspace_webhook_retries_total",
            "counter",
            "Webhook requests that were a retry of an earlier attempt.",
            self.webhook_retries.load(Relaxed),
        );
        head(o, "botspace_gateway_closes_total", "counter", "Gateway sessions ended, by reason (docs/gateway.md).");
        for (reason, n) in &s.gateway_closes {
            line(o, "botspace_gateway_closes_total", &format!("reason=\"{}\"", reason.as_str()), n);
        }

        metric(
            o,
            "botspace_connection_evictions_total",
            "counter",
            "Waiting connections the host closed to admit a new one at its connection limit.",
            self.evictions.load(Relaxed),
        );
        metric(
            o,
            "botspace_request_timeouts_total",
            "counter",
            "Requests the host answered 408 because they did not arrive whole in time.",
            self.request_timeouts.load(Relaxed),
        );

        if let (Some(b), Some(age_ms)) = (&s.backlog, s.backlog_age_ms) {
            let e = &b.events;
            metric(
                o,
                "botspace_unacked_events",
                "gauge",
                "Gateway events written and not yet acknowledged, all bots together.",
                e.total,
            );
            metric(
                o,
                "botspace_unacked_events_max_per_bot",
                "gauge",
                "The largest backlog of unacknowledged events of one bot.",
                e.max,
            );
            head(
                o,
                "botspace_oldest_unacked_event_age_seconds",
                "gauge",
                "Age of the oldest unacknowledged event still in the log (0 when none).",
            );
            let oldest = e.oldest_ms.map_or(0, |t| s.now_ms.saturating_sub(u64::try_from(t).unwrap_or(0)));
            line(o, "botspace_oldest_unacked_event_age_seconds", "", oldest as f64 / 1000.0);
            metric(o, "botspace_unacked_events_pass_age_seconds", "gauge", "How old the three gauges above are: the start of the last completed pass over the bots (one chunk per scrape).", age_ms as f64 / 1000.0);
            metric(
                o,
                "botspace_host_updates_unconfirmed",
                "gauge",
                "Host updates (getUpdates) not yet confirmed.",
                b.updates_unconfirmed,
            );
        }
        metric(
            o,
            "botspace_backlog_scrape_duration_seconds",
            "gauge",
            "Time this scrape spent reading the backlog gauges from the store.",
            s.backlog_read_us as f64 / 1e6,
        );
        metric(
            o,
            "botspace_backlog_scrape_errors",
            "gauge",
            "1 when this scrape could not read the backlog gauges.",
            u8::from(s.backlog_error),
        );

        metric(
            o,
            "botspace_ready",
            "gauge",
            "1 when /readyz answers 200 (the store takes writes and no stop has begun).",
            u8::from(s.ready),
        );
        metric(
            o,
            "botspace_shutting_down",
            "gauge",
            "1 once the host began a graceful stop.",
            u8::from(s.shutting_down),
        );
        head(o, "botspace_build_info", "gauge", "The library version, as a label; always 1.");
        line(o, "botspace_build_info", &format!("version=\"{}\"", crate::VERSION), 1);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status_line: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status_line}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn methods_come_from_the_route_table_and_everything_else_is_other() {
        assert_eq!(method_name(method_of(b"POST /bot/sendMessage HTTP/1.1\r\n\r\n")), "sendMessage");
        assert_eq!(method_name(method_of(b"POST /admin/createBot HTTP/1.1\r\n")), "createBot");
        assert_eq!(method_name(method_of(b"GET /bot/gateway?after=3 HTTP/1.1\r\n")), "gateway");
        assert_eq!(method_name(method_of(b"GET /healthz HTTP/1.1\r\n")), "healthz");
        assert_eq!(method_name(method_of(b"GET /readyz HTTP/1.1\r\n")), "readyz");
        assert_eq!(method_name(method_of(b"GET /admin/metrics HTTP/1.1\r\n")), "metrics");
        assert_eq!(method_name(method_of(b"GET /admin/console HTTP/1.1\r\n")), "console");
        // A bot id, a token or any other growing value never becomes a label.
        assert_eq!(method_name(method_of(b"POST /bot/bot123:secret/getMe HTTP/1.1\r\n")), "other");
        assert_eq!(method_name(method_of(b"POST /bot/getme HTTP/1.1\r\n")), "other");
        assert_eq!(method_name(method_of(b"garbage")), "other");
        assert_eq!(method_name(method_of(b"")), "other");
    }

    #[test]
    fn a_route_and_its_request_line_give_the_same_method() {
        let paths = [
            "/bot/getMe",
            "/bot/deleteMessage",
            "/admin/createUser",
            "/admin/advanceClock",
            "/bot/gateway",
            "/healthz",
            "/readyz",
            "/admin/metrics",
            "/admin/console",
        ];
        for path in paths {
            let verb = if path.starts_with("/bot/") && path != "/bot/gateway"
                || path.starts_with("/admin/") && !path.ends_with("metrics") && !path.ends_with("console")
            {
                "POST"
            } else {
                "GET"
            };
            let route = crate::route::Target::check(verb, path).unwrap().resolve(true).unwrap();
            let line = format!("{verb} {path} HTTP/1.1\r\n\r\n");
            assert_eq!(method_of_route(route), method_of(line.as_bytes()), "{path}");
        }
        for m in crate::route::BotMethod::ALL {
            assert_eq!(method_name(method_of_route(crate::route::Route::Bot(*m))), m.name());
        }
        for m in crate::route::AdminMethod::ALL {
            assert_eq!(method_name(method_of_route(crate::route::Route::Admin(*m))), m.name());
        }
    }

    #[test]
    fn outcomes_are_read_from_the_status_and_the_envelope() {
        assert_eq!(outcome_of(&resp("200 OK", r#"{"ok":true,"result":{"error":"x"}}"#)), (0, None));
        assert_eq!(outcome_of(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"), (1, None));
        let e =
            resp("429 Too Many Requests", r#"{"ok":false,"error_code":429,"error":"rate_limited","description":"d"}"#);
        assert_eq!(outcome_of(&e).1, Some(ErrorCode::RateLimited));
        assert_eq!(outcome_of(b"HTTP/1.1 500 Internal Server Error\r\n\r\n"), (OTHER_OUTCOME, None));
        assert_eq!(outcome_of(b"HTTP/1.1 304 Not Modified\r\n\r\n"), (2, None));
        assert_eq!(outcome_of(b"HTTP/1.1 2x0 OK\r\n\r\n"), (OTHER_OUTCOME, None));
        assert_eq!(outcome_of(b"HTTP/1.1 20"), (OTHER_OUTCOME, None));
        assert_eq!((status_of(b"HTTP/1.1 503 x"), status_of(b"")), (503, 0));
    }

    #[test]
    fn histograms_are_cumulative_and_agree_with_their_count() {
        let h = Histogram::new(&[1, 2, 4]);
        for v in [0, 1, 2, 3, 100] {
            h.observe(v);
        }
        let mut out = String::new();
        h.render(&mut out, "x", "a=\"b\"", 1.0);
        assert_eq!(
            out,
            "x_bucket{a=\"b\",le=\"1\"} 2\nx_bucket{a=\"b\",le=\"2\"} 3\nx_bucket{a=\"b\",le=\"4\"} 4\n\
             x_bucket{a=\"b\",le=\"+Inf\"} 5\nx_sum{a=\"b\"} 106\nx_count{a=\"b\"} 5\n"
        );
        let mut out = String::new();
        let s = Histogram::new(&[500, 1_000_000]);
        s.observe(250);
        s.render(&mut out, "t_seconds", "", 1e6);
        assert_eq!(
            out,
            "t_seconds_bucket{le=\"0.0005\"} 1\nt_seconds_bucket{le=\"1\"} 1\nt_seconds_bucket{le=\"+Inf\"} 1\n\
             t_seconds_sum 0.00025\nt_seconds_count 1\n"
        );
        assert_eq!(s.count(), 1);
    }

    #[test]
    fn the_exposition_counts_requests_by_method_status_and_code() {
        let m = Metrics::default();
        let get_me = method_of(b"POST /bot/getMe HTTP/1.1\r\n");
        m.record(get_me, &resp("200 OK", r#"{"ok":true}"#), Some(Timer::start()));
        m.record(get_me, &resp("200 OK", r#"{"ok":true}"#), Some(Timer::start()));
        let limited = r#"{"ok":false,"error_code":429,"error":"rate_limited","description":"d","parameters":{"retry_after":1,"retry_after_ms":1000,"scope":"chat"}}"#;
        m.record(
            method_of(b"POST /bot/sendMessage HTTP/1.1\r\n"),
            &resp("429 Too Many Requests", limited),
            Some(Timer::start()),
        );
        let full = r#"{"ok":false,"error_code":503,"error":"storage_full","description":"d"}"#;
        m.record(OTHER_METHOD, &resp("503 Service Unavailable", full), Some(Timer::start()));
        m.batch_size.observe(3);
        let text = m.render(&Snapshot::default(), None);
        assert!(
            text.contains("\nbotspace_requests_total{method=\"getMe\",status=\"200\",error=\"none\"} 2\n"),
            "{text}"
        );
        assert!(text
            .contains("\nbotspace_requests_total{method=\"sendMessage\",status=\"429\",error=\"rate_limited\"} 1\n"));
        assert!(text.contains("\nbotspace_requests_total{method=\"other\",status=\"503\",error=\"storage_full\"} 1\n"));
        assert!(text.contains("\nbotspace_rate_limited_total{scope=\"chat\"} 1\n"));
        assert!(text.contains("\nbotspace_rate_limited_total{scope=\"bot\"} 0\n"));
        assert!(text.contains("\nbotspace_storage_errors_total{kind=\"storage_full\"} 1\n"));
        assert!(text.contains("\nbotspace_request_duration_seconds_count{method=\"getMe\"} 2\n"));
        assert!(text.contains("\nbotspace_commit_batch_size_bucket{le=\"4\"} 1\n"));
        assert!(!text.contains("method=\"deleteMessage\""), "methods never called have no series");
        // No backlog read yet: those gauges are absent, and that is no error.
        assert!(!text.contains("botspace_unacked_events "));
        assert!(text.contains("\nbotspace_backlog_scrape_errors 0\n"));
    }

    /// The text format's grammar, as Prometheus reads it: every sample
    /// belongs to the metric family declared last by `# TYPE`, names are
    /// `botspace_` and valid, a family is declared once, and every line is
    /// a comment or `name{labels} value`.
    #[test]
    fn every_line_is_valid_exposition_text() {
        let m = Metrics::default();
        m.record(0, &resp("200 OK", "{}"), Some(Timer::start()));
        let snap = Snapshot {
            backlog: Some(crate::store::backlog::Backlog {
                events: crate::store::backlog::Events { total: 3, max: 2, oldest_ms: Some(8_500) },
                pass_started_ms: 9_000,
                updates_unconfirmed: 4,
            }),
            backlog_age_ms: Some(1_000),
            now_ms: 10_000,
            gateway_closes: vec![(CloseCode::SessionTimeout, 2)],
            lease_renewals: Some(7),
            ..Snapshot::default()
        };
        let text = m.render(&snap, None);
        assert!(text.contains("\nbotspace_oldest_unacked_event_age_seconds 1.5\n"));
        let mut declared: Vec<String> = Vec::new();
        let mut current = String::new();
        let mut kind = String::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, k) = rest.split_once(' ').unwrap();
                assert!(!declared.contains(&name.to_string()), "{name} declared twice");
                assert!(["counter", "gauge", "histogram"].contains(&k));
                assert!(name.starts_with("botspace_"));
                assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
                if k == "counter" {
                    assert!(name.ends_with("_total"), "{name}: a counter's name ends in _total");
                }
                declared.push(name.to_string());
                current = name.to_string();
                kind = k.to_string();
                continue;
            }
            if l.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = l.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{l}");
            let name = series.split('{').next().unwrap();
            let ok = if kind == "histogram" {
                [format!("{current}_bucket"), format!("{current}_sum"), format!("{current}_count")]
                    .contains(&name.to_string())
            } else {
                name == current
            };
            assert!(ok, "{l} is not of {current}");
            if let Some(labels) = series.strip_prefix(name).filter(|s| !s.is_empty()) {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{l}");
                for pair in labels[1..labels.len() - 1].split(',') {
                    let (k, v) = pair.split_once('=').unwrap();
                    assert!(k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{l}");
                    assert!(v.starts_with('"') && v.ends_with('"') && !v[1..v.len() - 1].contains('"'), "{l}");
                }
            }
        }
        assert!(text.ends_with('\n'));
    }
}
