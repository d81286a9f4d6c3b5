//! The PostgreSQL store: one connection per service, its schema and
//! migrations, and the mapping between the store's values and PostgreSQL's.
//!
//! Transactions run at READ COMMITTED. Everything that must stay gapless
//! (per-chat message ids, per-bot event seqs, update ids) is taken from its
//! owning row by `UPDATE … RETURNING` inside the writing transaction, so the
//! row lock orders writers on every node and a number is never skipped.
//! A serialization failure or deadlock (SQLSTATE 40001, 40P01) is reported
//! through [`PgConn::take_retryable`] and the service reruns the whole
//! transaction. A broken or refused connection is dropped and opened again
//! on the next request; meanwhile requests are answered 503.
//!
//! Every call to the server has a deadline (`Config::database_timeout_ms`):
//! connecting to each host of the URL, each round trip of statements,
//! COMMIT, the listener's LISTEN and liveness checks. A server that stops
//! answering without closing the connection (stopped, a stalled disk, a
//! partition that keeps TCP up) costs a call that long; the connection is
//! then dropped, as a broken one would be.

use super::{StorageError, StoreResult, Val};
use crate::config::Config;
use bytes::BytesMut;
use postgres::error::SqlState;
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Row, Statement};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The channel every node notifies and listens on.
pub const CHANNEL: &str = "botspace";

/// Largest payload sent: PostgreSQL refuses 8000 bytes and more. A longer
/// list is sent as an empty payload, which means "re-read everything".
pub const MAX_PAYLOAD: usize = 7900;

type Params<'a> = [&'a (dyn ToSql + Sync)];

/// tokio-postgres driven on a one-thread runtime: the synchronous calls the
/// store makes, plus pipelining, which the synchronous `postgres` client
/// lacks. A transaction's BEGIN goes out with its first statement and its
/// last write with its COMMIT, so a request alone costs three round trips
/// (BEGIN + read, write, last write + COMMIT), not five.
struct Client {
    pg: tokio_postgres::Client,
    /// The task that drives the connection's socket. Dropping the client
    /// aborts it, which closes the socket: a connection given up after a
    /// deadline must not linger waiting for a server that may never answer.
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client {
    fn is_closed(&self) -> bool {
        self.pg.is_closed()
    }
}

type MakeTls = tokio_postgres_rustls::MakeRustlsConnect;
type PgConnection = tokio_postgres::Connection<
    tokio_postgres::Socket,
    <MakeTls as tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>>::Stream,
>;

/// Why a call to the server failed: the server's or the client's error, or
/// the deadline.
enum PgFail {
    Pg(postgres::Error),
    Deadline(&'static str),
}

impl From<postgres::Error> for PgFail {
    fn from(e: postgres::Error) -> Self {
        PgFail::Pg(e)
    }
}

/// Blocks on calls to the server, each with the deadline.
struct Timed<'a> {
    rt: &'a tokio::runtime::Runtime,
    deadline: Duration,
}

impl Timed<'_> {
    fn block_on<T>(&self, call: impl Future<Output = Result<T, postgres::Error>>) -> Result<T, PgFail> {
        match self.rt.block_on(async { tokio::time::timeout(self.deadline, call).await }) {
            Ok(r) => r.map_err(PgFail::Pg),
            Err(_) => Err(PgFail::Deadline("a statement")),
        }
    }
}

/// The URL once per host, in the URL's order: a multi-host URL
/// (`postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write`) is
/// tried host by host, each with a deadline of its own. tokio-postgres
/// bounds only the TCP connect of each host (`connect_timeout`), not the
/// start-up that follows, so one stopped host at the head of the list
/// would otherwise hold every attempt and the standby that took over would
/// never be reached. Other forms (one host, key=value strings) stay whole.
fn per_host(url: &str) -> Vec<String> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return vec![url.to_string()] };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return vec![url.to_string()];
    }
    hosts.split(',').map(|h| format!("{}{userinfo}{h}{}", &url[..scheme_end], &rest[authority_end..])).collect()
}

/// Connects to the first host of `urls` that answers, each within
/// `deadline`; the last failure when none does.
async fn connect_first(
    urls: &[String],
    tls: &MakeTls,
    deadline: Duration,
) -> Result<(tokio_postgres::Client, PgConnection), PgFail> {
    let mut last = PgFail::Deadline("connecting");
    for url in urls {
        match tokio::time::timeout(deadline, tokio_postgres::connect(url, tls.clone())).await {
            Ok(Ok(pair)) => return Ok(pair),
            Ok(Err(e)) => last = PgFail::Pg(e),
            Err(_) => last = PgFail::Deadline("connecting"),
        }
    }
    Err(last)
}

/// The password of a URL, so that no log line can carry it (the client's
/// errors do not quote it today; this holds if one ever does).
fn password_of(url: &str) -> Option<String> {
    let config: tokio_postgres::Config = url.parse().ok()?;
    config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).filter(|p| !p.is_empty())
}

/// What a PostgreSQL error says, cause included: tokio-postgres shows only
/// its kind ("db error", "error connecting to server"), and the cause is
/// what an operator needs (the server's message and SQLSTATE, the refused
/// connection, the read-only standby).
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Logs a storage error (`log::error!`), at most one line a second per
/// process (a database that is down fails every request, and a log that
/// floods hides the first cause), counting what it held back. A host that
/// wants every error has them in `ApiError::detail`.
fn log_storage_error(what: &str, cause: &str, password: Option<&str>) {
    static LAST: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last.0.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
        last.1 += 1;
        return;
    }
    let held = std::mem::replace(&mut last.1, 0);
    last.0 = Some(Instant::now());
    let mut line = format!("botspace: PostgreSQL {what}: {cause}");
    if let Some(p) = password {
        line = line.replace(p, "***");
    }
    if held > 0 {
        line.push_str(&format!(" ({held} more storage errors since the last line, not shown)"));
    }
    log::error!("{line}");
}

/// Schema migrations, applied in order, versioned like SQLite's
/// (`botspace_schema.version` plays `PRAGMA user_version`). Never edit a
/// released entry; append. Integers are BIGINT and flags 0/1 BIGINT, as the
/// store reads them.
pub const MIGRATIONS: &[&str] = &[
    // 1: initial schema.
    r#"
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        handle TEXT,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE bots (
        id TEXT PRIMARY KEY,
        token_hash BYTEA NOT NULL UNIQUE,
        op_token BYTEA,
        display_name TEXT NOT NULL,
        handle TEXT NOT NULL,
        avatar_key TEXT,
        status TEXT NOT NULL DEFAULT 'active',
        verified BIGINT NOT NULL DEFAULT 0,
        official BIGINT NOT NULL DEFAULT 0,
        quota_tier TEXT NOT NULL DEFAULT 'free',
        gateway_connection_limit BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        acked_seq BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE chats (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL CHECK (type IN ('private', 'group')),
        title TEXT,
        user_id TEXT,
        bot_id TEXT,
        started BIGINT NOT NULL DEFAULT 0,
        blocked_by_user BIGINT NOT NULL DEFAULT 0,
        blocked_by_bot BIGINT NOT NULL DEFAULT 0,
        bots_can_send BIGINT NOT NULL DEFAULT 1,
        dissolved BIGINT NOT NULL DEFAULT 0,
        last_message_id BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL
    );
    CREATE UNIQUE INDEX chats_private_pair ON chats (user_id, bot_id) WHERE type = 'private';
    CREATE TABLE members (
        chat_id TEXT NOT NULL,
        member_id TEXT NOT NULL,
        is_bot BIGINT NOT NULL,
        active BIGINT NOT NULL DEFAULT 1,
        PRIMARY KEY (chat_id, member_id)
    );
    CREATE INDEX members_current_bots ON members (chat_id, member_id) WHERE is_bot = 1 AND active = 1;
    CREATE TABLE messages (
        chat_id TEXT NOT NULL,
        message_id BIGINT NOT NULL,
        sender_id TEXT NOT NULL,
        sender_is_bot BIGINT NOT NULL,
        text TEXT,
        date BIGINT NOT NULL,
        edit_date BIGINT,
        reply_to BIGINT,
        deleted BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (chat_id, message_id)
    );
    CREATE TABLE chat_actions (
        chat_id TEXT NOT NULL,
        bot_id TEXT NOT NULL,
        action TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        PRIMARY KEY (chat_id, bot_id)
    );
    CREATE TABLE idempotency (
        bot_id TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash BYTEA NOT NULL,
        result TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (bot_id, key)
    );
    CREATE INDEX idempotency_by_age ON idempotency (created_at_ms);
    CREATE TABLE bot_events (
        bot_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message BIGINT,
        PRIMARY KEY (bot_id, seq)
    );
    CREATE INDEX bot_events_by_message ON bot_events (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
    -- update_id comes from meta.last_update_id, taken in the writing
    -- transaction: a sequence would hand out ids out of commit order, and
    -- getUpdates would skip an update committed after a higher one.
    CREATE TABLE updates (
        update_id BIGINT PRIMARY KEY,
        created_at_ms BIGINT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message BIGINT
    );
    CREATE INDEX updates_by_message ON updates (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    );
    INSERT INTO meta (key, value) VALUES ('updates_confirmed', 0), ('last_update_id', 0);
    "#,
    // 2: pruning marks (see the SQLite migration 2).
    r#"
    ALTER TABLE bots ADD COLUMN pruned_seq BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE bots ADD COLUMN kept_since_ms BIGINT NOT NULL DEFAULT 0;
    "#,
    // 3: gateway connections of every node, for the per-bot limit. A lease
    // is renewed while its session lives and lapses when its node dies.
    r#"
    CREATE TABLE gateway_leases (
        session_id TEXT PRIMARY KEY,
        bot_id TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL
    );
    CREATE INDEX gateway_leases_by_bot ON gateway_leases (bot_id, expires_at_ms);
    -- Rate-limit buckets shared by the nodes: GCRA's theoretical arrival
    -- time (µs) per bucket, 'b:<bot>' or 'c:<bot>:<chat>'.
    CREATE TABLE rate_buckets (
        key TEXT PRIMARY KEY,
        tat BIGINT NOT NULL
    );
    CREATE INDEX rate_buckets_by_tat ON rate_buckets (tat);
    "#,
    // 4: the admin console's audit log and list indexes.
    super::console::POSTGRES_MIGRATION,
    // 5: bot handles are unique, compared case-insensitively (see the
    // SQLite migration 5); existing bots get their keys in the same
    // transaction.
    super::bots::HANDLE_KEYS_MIGRATION,
    // 6: bots' webhooks.
    super::webhooks::POSTGRES_MIGRATION,
];

/// A PostgreSQL connection that reopens itself after it broke.
pub struct PgConn {
    urls: Vec<String>,
    root_cert: Option<String>,
    password: Option<String>,
    deadline: Duration,
    rt: tokio::runtime::Runtime,
    client: RefCell<Option<Client>>,
    /// BEGIN is owed: it goes out with the transaction's first statement.
    begin_owed: Cell<bool>,
    /// Round trips made for statements (connecting aside), for metrics;
    /// shared by a service's connections ([`PgConn::open_another`]).
    round_trips: Arc<AtomicU64>,
    /// Prepared statements of the current client, by SQL text as written.
    cache: RefCell<HashMap<String, (Statement, bool)>>,
    changes: Cell<u64>,
    in_tx: Cell<bool>,
    /// An error inside the open transaction: PostgreSQL will only roll it back.
    aborted: Cell<bool>,
    retryable: Cell<bool>,
    /// The last call went out on a connection made before it (not one
    /// made for it): a failure there may only mean that connection went
    /// stale while idle (a server restarted since), see [`PgConn::stale`].
    reused: Cell<bool>,
    /// The server process of the current connection (0 before the first):
    /// a node's listener skips the notifications of its own commits, which
    /// it has applied already.
    backend_pid: Arc<AtomicI32>,
}

/// True for errors that say the server is not there (refused, closed,
/// shutting down, starting up), as opposed to a failing statement.
pub fn is_unavailable(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            let c = c.code();
            c.starts_with("08") || c.starts_with("57P")
        }
        None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) || e.as_db_error().is_none(),
    }
}

/// The URL as the client takes it, and libpq's `sslrootcert`, which the
/// client does not know. libpq's `verify-ca` and `verify-full` become
/// `require`: botspace verifies the certificate in every TLS mode.
fn split_url(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_string(), None) };
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", v)) => root = Some(v.to_string()),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (url, root)
}

fn tls(root_cert: Option<&str>) -> StoreResult<MakeTls> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        // `sslrootcert=/path/ca.pem`: only these roots.
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|_| StorageError::Unsupported("sslrootcert: the file cannot be read"))?;
            for cert in certs {
                let cert = cert.map_err(|_| StorageError::Unsupported("sslrootcert: not a PEM certificate file"))?;
                roots.add(cert).map_err(|_| StorageError::Unsupported("sslrootcert: a certificate is not valid"))?;
            }
        }
        // The platform's roots (SSL_CERT_FILE / SSL_CERT_DIR are honoured).
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| StorageError::Unsupported("TLS: no protocol version in common"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

impl PgConn {
    /// Connects and brings the schema up to date.
    pub fn open(config: &Config) -> StoreResult<PgConn> {
        PgConn::open_counting(config, Arc::default())
    }

    /// One more connection of the same service (one runs a group while
    /// another commits): its round trips count with this one's.
    pub fn open_another(&self, config: &Config) -> StoreResult<PgConn> {
        PgConn::open_counting(config, self.round_trips.clone())
    }

    fn open_counting(config: &Config, round_trips: Arc<AtomicU64>) -> StoreResult<PgConn> {
        let (url, root_cert) = split_url(&config.database);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|_| StorageError::Unavailable("cannot start the PostgreSQL client's runtime"))?;
        let conn = PgConn {
            urls: per_host(&url),
            password: password_of(&url),
            deadline: Duration::from_millis(config.database_timeout_ms),
            root_cert,
            rt,
            client: RefCell::new(None),
            begin_owed: Cell::new(false),
            round_trips,
            cache: RefCell::new(HashMap::new()),
            changes: Cell::new(0),
            in_tx: Cell::new(false),
            aborted: Cell::new(false),
            retryable: Cell::new(false),
            reused: Cell::new(false),
            backend_pid: Arc::new(AtomicI32::new(0)),
        };
        conn.migrate()?;
        Ok(conn)
    }

    fn timed(&self) -> Timed<'_> {
        Timed { rt: &self.rt, deadline: self.deadline }
    }

    fn connect(&self) -> StoreResult<Client> {
        let tls = tls(self.root_cert.as_deref())?;
        let (pg, connection) = self.logged(self.rt.block_on(connect_first(&self.urls, &tls, self.deadline)))?;
        // Runs whenever the runtime does: inside each call below.
        let task = self.rt.spawn(async move {
            let _ = connection.await;
        });
        let client = Client { pg, task };
        let pid = self.logged(self.timed().block_on(client.pg.query_one("SELECT pg_backend_pid()", &[])))?;
        self.backend_pid.store(pid.get::<_, i32>(0), Ordering::Relaxed);
        Ok(client)
    }

    /// [`PgConn::track_as`] outside a transaction, for connecting.
    fn logged<T>(&self, r: Result<T, PgFail>) -> StoreResult<T> {
        let r = self.track_as(false, r);
        if let Err(e) = &r {
            log_storage_error("connection failed", &e.to_string(), self.password.as_deref());
        }
        r
    }

    /// The server process id of the current connection, kept up to date
    /// across reconnections.
    pub fn backend_pid(&self) -> Arc<AtomicI32> {
        self.backend_pid.clone()
    }

    /// Runs `f` on the client, connecting first when there is none (never
    /// inside a transaction that began: a lost connection lost the
    /// transaction too).
    fn with<T>(&self, f: impl FnOnce(&Timed<'_>, &tokio_postgres::Client) -> Result<T, PgFail>) -> StoreResult<T> {
        self.with_as(true, f)
    }

    /// [`PgConn::with`]; `in_tx` says whether `f` sends anything into the
    /// open transaction (a statement, the owed BEGIN), so that its failure
    /// aborts the transaction. Connecting never does.
    fn with_as<T>(
        &self,
        in_tx: bool,
        f: impl FnOnce(&Timed<'_>, &tokio_postgres::Client) -> Result<T, PgFail>,
    ) -> StoreResult<T> {
        let mut slot = self.client.borrow_mut();
        self.reused.set(slot.as_ref().is_some_and(|c| !c.is_closed()));
        if slot.as_ref().is_none_or(Client::is_closed) {
            if self.in_tx.get() && !self.begin_owed.get() {
                self.aborted.set(true);
                *slot = None;
                return Err(StorageError::Unavailable("the connection to PostgreSQL was lost mid-transaction"));
            }
            self.cache.borrow_mut().clear();
            *slot = Some(self.connect()?);
        }
        let client = slot.as_ref().expect("connected above");
        // Every call of `f` waits for the server once (pipelining puts
        // several statements in that one wait).
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let r = f(&self.timed(), &client.pg);
        let gone = match &r {
            Err(PgFail::Deadline(_)) => true,
            Err(PgFail::Pg(e)) => is_unavailable(e),
            Ok(_) => false,
        };
        // Dropped, not kept: after a deadline the connection may still be
        // waiting for an answer, and its next answer would be that one.
        if gone {
            *slot = None;
        }
        let r = self.track_as(in_tx, r);
        if gone {
            if let Err(e) = &r {
                log_storage_error("call failed, the connection is dropped", &e.to_string(), self.password.as_deref());
            }
        }
        r
    }

    /// Notes what an error means for the transaction and the caller.
    /// `in_tx`: the failed call had sent something into
    /// the open transaction, which PostgreSQL has now aborted. A failure
    /// before anything was sent (connecting, preparing while BEGIN is still
    /// owed) leaves the transaction as it was.
    fn track_as<T>(&self, in_tx: bool, r: Result<T, PgFail>) -> StoreResult<T> {
        r.map_err(|e| {
            if in_tx && self.in_tx.get() {
                self.aborted.set(true);
            }
            let e = match e {
                PgFail::Pg(e) => e,
                PgFail::Deadline(what) => {
                    return StorageError::Deadline { what, ms: self.deadline.as_millis() as u64 };
                }
            };
            if matches!(e.code(), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
            {
                self.retryable.set(true);
            }
            StorageError::Postgres(e)
        })
    }

    /// A prepared statement, and whether the rows it returns are rows it
    /// wrote (`UPDATE … RETURNING`).
    pub fn prepare_cached(&self, sql: &str) -> StoreResult<(Statement, bool)> {
        if self.client.borrow().as_ref().is_none_or(Client::is_closed) {
            // Statements of a lost connection: the next one prepares anew.
            self.cache.borrow_mut().clear();
        }
        if let Some(s) = self.cache.borrow().get(sql) {
            return Ok(s.clone());
        }
        let text = positional(sql);
        // Preparing sends nothing into a transaction whose BEGIN is owed.
        let r = self.with_as(!self.begin_owed.get(), |rt, c| rt.block_on(c.prepare(&text)));
        if self.begin_owed.get() {
            self.stale(&r);
        }
        let st = r?;
        let upper = sql.trim_start().to_ascii_uppercase();
        let writes = ["UPDATE", "INSERT", "DELETE"].iter().any(|w| upper.starts_with(w))
            || (upper.starts_with("WITH") && ["UPDATE ", "INSERT ", "DELETE "].iter().any(|w| upper.contains(w)));
        self.cache.borrow_mut().insert(sql.to_string(), (st.clone(), writes));
        Ok((st, writes))
    }

    pub fn execute(&self, st: &Statement, vals: &[Val<'_>]) -> StoreResult<usize> {
        let n = self.execute_uncounted(st, vals)?;
        self.changes.set(self.changes.get() + n as u64);
        Ok(n)
    }

    pub fn execute_uncounted(&self, st: &Statement, vals: &[Val<'_>]) -> StoreResult<usize> {
        let params: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        Ok(self.run(st, &params)?.1 as usize)
    }

    /// Runs a statement, with the owed BEGIN ahead of it in the same round
    /// trip.
    fn run(&self, st: &Statement, params: &Params<'_>) -> StoreResult<(Vec<Row>, u64)> {
        Ok(self.pipeline(&[(st, params)], None)?.pop().unwrap_or_default())
    }

    /// The one way statements go out: the owed BEGIN, then each statement
    /// with its parameters, then `then` (a simple query: COMMIT), all in
    /// one round trip; the server runs them in order. Each statement's rows
    /// and count. When `then` ends the transaction and something failed
    /// before it ran, the transaction is still open (and aborted) on a live
    /// connection: it is rolled back here.
    fn pipeline(&self, runs: &[(&Statement, &Params<'_>)], then: Option<&str>) -> StoreResult<Vec<(Vec<Row>, u64)>> {
        let begin = self.begin_owed.get();
        let r = self.with(|rt, c| {
            rt.block_on(async {
                let begin = async {
                    if begin {
                        c.batch_execute("BEGIN").await
                    } else {
                        Ok(())
                    }
                };
                let statements = futures_util::future::join_all(runs.iter().map(|(st, p)| query_counted(c, st, p)));
                let last = async {
                    match then {
                        Some(q) => c.batch_execute(q).await,
                        None => Ok(()),
                    }
                };
                let (b, results, t) = futures_util::join!(begin, statements, last);
                let r = b.and_then(|()| results.into_iter().collect::<Result<Vec<_>, _>>()).and_then(|v| t.map(|()| v));
                if r.is_err() && then.is_some() && !c.is_closed() {
                    let _ = c.batch_execute("ROLLBACK").await;
                }
                r
            })
        });
        if begin && then.is_none() {
            self.stale(&r);
        }
        if begin && !matches!(&r, Err(StorageError::Unavailable(_))) {
            self.begin_owed.set(false);
        }
        r
    }

    /// A call that opened a transaction (its BEGIN went with it, no COMMIT
    /// did) failed because the connection it reused was gone: the server
    /// closed it while it sat idle (a restart, a failover, an
    /// administrator). Nothing of the transaction can have been applied,
    /// and a fresh connection may well succeed: the failure is reported as
    /// retryable, and the service reruns the transaction, connecting anew.
    /// A service has several connections, and each would otherwise fail
    /// one request after every restart. A deadline is not retried (that
    /// would double the wait), nor a failure to connect.
    fn stale<T>(&self, r: &StoreResult<T>) {
        if self.reused.get() && matches!(r, Err(StorageError::Postgres(e)) if is_unavailable(e)) {
            self.retryable.set(true);
        }
    }

    /// Runs a read once per parameter list, all in one round trip (with
    /// the owed BEGIN ahead of them), and hands each run's rows to `f`
    /// with the run's index. The server runs them in order.
    pub fn query_pipelined(
        &self,
        st: &Statement,
        runs: &[Vec<Val<'_>>],
        f: &mut dyn FnMut(usize, &super::Row<'_>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let params: Vec<Vec<&(dyn ToSql + Sync)>> =
            runs.iter().map(|v| v.iter().map(|x| x as &(dyn ToSql + Sync)).collect()).collect();
        let runs: Vec<(&Statement, &Params<'_>)> = params.iter().map(|p| (st, p.as_slice())).collect();
        for (i, (rows, _)) in self.pipeline(&runs, None)?.iter().enumerate() {
            for row in rows {
                f(i, &super::Row::Pg(row))?;
            }
        }
        Ok(())
    }

    pub fn query_each(
        &self,
        st: &Statement,
        writes: bool,
        vals: &[Val<'_>],
        f: &mut dyn FnMut(&super::Row<'_>) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let params: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let (rows, _) = self.run(st, &params)?;
        // A write that returns rows (`… RETURNING`, or a CTE that writes
        // and then reads) changed something, whatever it returned.
        if writes {
            self.changes.set(self.changes.get() + rows.len().max(1) as u64);
        }
        for r in &rows {
            if !f(&super::Row::Pg(r))? {
                break;
            }
        }
        Ok(())
    }

    /// Opens a transaction; BEGIN itself waits for the first statement.
    pub fn begin(&self) -> StoreResult<()> {
        self.retryable.set(false);
        self.aborted.set(false);
        self.in_tx.set(true);
        self.begin_owed.set(true);
        Ok(())
    }

    /// Commits; with `notify`, sends `pg_notify` with that payload in the
    /// same round trip, just before COMMIT (NOTIFY is transactional: it is
    /// delivered only if the commit is). A failing `pg_notify` aborts the
    /// transaction and COMMIT is not run: the error is the commit's.
    pub fn commit(&self, notify: Option<&str>) -> StoreResult<()> {
        self.finish(None, notify)
    }

    /// Runs `st` as the transaction's last statement and commits (as
    /// [`PgConn::commit`]), all in one round trip. If the statement fails,
    /// nothing of the transaction is kept.
    pub fn execute_then_commit(&self, st: &Statement, vals: &[Val<'_>], notify: Option<&str>) -> StoreResult<usize> {
        let params: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let mut n = 0;
        self.finish(Some((st, &params, &mut n)), notify)?;
        self.changes.set(self.changes.get() + n as u64);
        Ok(n)
    }

    fn finish(&self, last: Option<(&Statement, &Params<'_>, &mut usize)>, notify: Option<&str>) -> StoreResult<()> {
        if self.aborted.get() {
            // PostgreSQL answers COMMIT of an aborted transaction with a
            // silent ROLLBACK; this must fail loudly instead.
            let _ = self.rollback();
            return Err(StorageError::Aborted);
        }
        if self.begin_owed.get() && last.is_none() {
            // Nothing was sent: there is nothing to commit (nor to notify).
            self.end_tx();
            return Ok(());
        }
        // One simple-query message, so the hint costs no round trip of its
        // own. The payload goes in as a literal: only the characters of
        // bot ids and commas are let through (anything else becomes the
        // empty "re-read everything" payload), so it needs no escaping.
        let commit = match notify {
            None => std::borrow::Cow::Borrowed("COMMIT"),
            Some(p) => {
                let safe = p.len() <= MAX_PAYLOAD
                    && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b','));
                let p = if safe { p } else { "" };
                std::borrow::Cow::Owned(format!("SELECT pg_notify('{CHANNEL}', '{p}'); COMMIT"))
            }
        };
        let r = match last {
            None => self.pipeline(&[], Some(&commit)).map(drop),
            Some((st, params, n)) => self.pipeline(&[(st, params)], Some(&commit)).map(|mut out| {
                *n = out.pop().map_or(0, |(_, count)| count as usize);
            }),
        };
        self.end_tx();
        match r {
            // COMMIT was sent; whether the server applied it before the
            // connection went is not known here.
            Err(e) if e.is_unavailable() => Err(StorageError::CommitLost(Box::new(e))),
            r => r,
        }
    }

    fn end_tx(&self) {
        self.in_tx.set(false);
        self.aborted.set(false);
        self.begin_owed.set(false);
    }

    pub fn rollback(&self) -> StoreResult<()> {
        let sent = !self.begin_owed.get();
        let r = if sent && self.client.borrow().is_some() {
            self.with(|rt, c| rt.block_on(c.batch_execute("ROLLBACK")))
        } else {
            Ok(())
        };
        self.end_tx();
        r
    }

    /// Round trips to the server so far, connecting aside.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    pub fn total_changes(&self) -> u64 {
        self.changes.get()
    }

    pub fn transaction_lost(&self) -> bool {
        !self.in_tx.get() || self.aborted.get()
    }

    pub fn take_retryable(&self) -> bool {
        self.retryable.replace(false)
    }

    pub fn schema_version(&self) -> StoreResult<i64> {
        self.with(|rt, c| {
            rt.block_on(c.query_one("SELECT version FROM botspace_schema", &[])).map(|r| r.get::<_, i64>(0))
        })
    }

    /// Applies what is missing of [`MIGRATIONS`] under an advisory lock, so
    /// nodes starting together migrate once.
    fn migrate(&self) -> StoreResult<()> {
        let supported = MIGRATIONS.len() as i64;
        self.with(|rt, c| {
            rt.block_on(async {
                let r: Result<StoreResult<()>, postgres::Error> = async {
                    c.batch_execute("BEGIN").await?;
                    // A fixed key ("bots" in ASCII): only botspace migrations take it.
                    c.execute("SELECT pg_advisory_xact_lock(1651471475)", &[]).await?;
                    c.batch_execute("CREATE TABLE IF NOT EXISTS botspace_schema (version BIGINT NOT NULL)").await?;
                    let version: Option<i64> =
                        c.query_opt("SELECT version FROM botspace_schema", &[]).await?.map(|r| r.get(0));
                    let version = match version {
                        Some(v) => v,
                        None => {
                            c.execute("INSERT INTO botspace_schema (version) VALUES (0)", &[]).await?;
                            0
                        }
                    };
                    if version > supported {
                        return Ok(Err(StorageError::TooNew { found: version, supported }));
                    }
                    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
                        c.batch_execute(sql).await?;
                        if *sql == super::bots::HANDLE_KEYS_MIGRATION {
                            let rows = c.query(super::bots::EXISTING_HANDLES, &[]).await?;
                            let bots: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                            let (claims, unclaimed) = super::bots::claim_keys(&bots);
                            let set = c.prepare("UPDATE bots SET handle_key = $1 WHERE id = $2").await?;
                            for (id, key) in claims {
                                c.execute(&set, &[&key, &id]).await?;
                            }
                            super::bots::report_unclaimed(&unclaimed);
                        }
                        c.execute("UPDATE botspace_schema SET version = $1", &[&(i as i64 + 1)]).await?;
                    }
                    c.batch_execute("COMMIT").await?;
                    Ok(Ok(()))
                }
                .await;
                if !matches!(r, Ok(Ok(()))) {
                    let _ = c.batch_execute("ROLLBACK").await;
                }
                r
            })
        })?
    }
}

/// Runs a prepared statement: its rows, and how many rows it changed (or
/// returned, for a read), from the server's command tag.
async fn query_counted(
    c: &tokio_postgres::Client,
    st: &Statement,
    params: &Params<'_>,
) -> Result<(Vec<Row>, u64), postgres::Error> {
    use futures_util::TryStreamExt;
    let stream = c.query_raw(st, params.iter().copied()).await?;
    futures_util::pin_mut!(stream);
    let mut rows = Vec::new();
    while let Some(r) = stream.try_next().await? {
        rows.push(r);
    }
    let n = stream.rows_affected().unwrap_or(rows.len() as u64);
    Ok((rows, n))
}

use super::notify::Heard;

/// A second connection that only runs `LISTEN botspace` and waits: the
/// main one is held by requests, and a wait must not hold the service's
/// lock. Opened on the first wait, and again after it broke.
///
/// Connecting, LISTEN and a liveness check (an empty query, at most once
/// per [`LISTENER_CHECK_EVERY`]) each have the deadline: a server that
/// stopped answering, or a primary that was replaced while this connection
/// stayed open to it, is noticed within that check and the deadline, and
/// the next wait connects to whichever host is the primary now.
pub struct Listener {
    urls: Vec<String>,
    root_cert: Option<String>,
    password: Option<String>,
    deadline: Duration,
    rt: Option<tokio::runtime::Runtime>,
    live: Option<Listening>,
}

/// How often a wait checks that the listening connection still answers.
pub const LISTENER_CHECK_EVERY: Duration = Duration::from_secs(1);

struct Listening {
    client: Client,
    /// Notifications, forwarded by the connection's task; closed when the
    /// connection ends.
    notes: tokio::sync::mpsc::UnboundedReceiver<postgres::Notification>,
    checked: Instant,
}

impl Listener {
    pub fn new(config: &Config) -> Listener {
        let (url, root_cert) = split_url(&config.database);
        Listener {
            urls: per_host(&url),
            password: password_of(&url),
            root_cert,
            deadline: Duration::from_millis(config.database_timeout_ms),
            rt: None,
            live: None,
        }
    }

    /// Blocks at most `timeout` (plus one deadline, for the liveness check)
    /// for notifications and takes every one that is there, skipping those
    /// sent by the connections `own_pids`. A call that (re)connects returns
    /// at once with `all` set. A lost or unanswering connection is an
    /// error; the next call connects again.
    pub fn wait(&mut self, timeout: Duration, own_pids: &[i32]) -> StoreResult<Heard> {
        if self.rt.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .map_err(|_| StorageError::Unavailable("cannot start the PostgreSQL client's runtime"))?;
            self.rt = Some(rt);
        }
        let r = match self.live.take() {
            None => self.listen().map(|live| {
                self.live = Some(live);
                Heard { all: true, ..Heard::default() }
            }),
            Some(mut live) => {
                let heard = self.receive(&mut live, timeout, own_pids);
                if heard.is_ok() {
                    self.live = Some(live);
                }
                heard
            }
        };
        if let Err(e) = &r {
            log_storage_error("notification listener failed", &e.to_string(), self.password.as_deref());
        }
        r
    }

    fn deadline_error(&self, what: &'static str) -> StorageError {
        StorageError::Deadline { what, ms: self.deadline.as_millis() as u64 }
    }

    fn listen(&self) -> StoreResult<Listening> {
        let rt = self.rt.as_ref().expect("made by wait");
        let tls = tls(self.root_cert.as_deref())?;
        let (pg, mut connection) =
            rt.block_on(connect_first(&self.urls, &tls, self.deadline)).map_err(|e| match e {
                PgFail::Pg(e) => StorageError::Postgres(e),
                PgFail::Deadline(what) => self.deadline_error(what),
            })?;
        let (tx, notes) = tokio::sync::mpsc::unbounded_channel();
        let task = rt.spawn(async move {
            while let Some(Ok(m)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                if let tokio_postgres::AsyncMessage::Notification(n) = m {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
            }
        });
        let client = Client { pg, task };
        match rt.block_on(async {
            tokio::time::timeout(self.deadline, client.pg.batch_execute(&format!("LISTEN {CHANNEL}"))).await
        }) {
            Ok(Ok(())) => Ok(Listening { client, notes, checked: Instant::now() }),
            Ok(Err(e)) => Err(StorageError::Postgres(e)),
            Err(_) => Err(self.deadline_error("LISTEN")),
        }
    }

    fn receive(&self, live: &mut Listening, timeout: Duration, own_pids: &[i32]) -> StoreResult<Heard> {
        let rt = self.rt.as_ref().expect("made by wait");
        let lost = || StorageError::Unavailable("the connection listening to PostgreSQL notifications was lost");
        if live.checked.elapsed() >= LISTENER_CHECK_EVERY {
            // An open socket says nothing of a stopped server: ask it.
            match rt.block_on(async { tokio::time::timeout(self.deadline, live.client.pg.simple_query("")).await }) {
                Ok(Ok(_)) => live.checked = Instant::now(),
                Ok(Err(e)) => return Err(StorageError::Postgres(e)),
                Err(_) => return Err(self.deadline_error("the notification listener's check")),
            }
        }
        let mut heard = Heard::default();
        let mut keep = |n: postgres::Notification| {
            if !own_pids.contains(&n.process_id()) && n.channel() == CHANNEL {
                heard.take(n.payload(), crate::histogram::wall_micros());
            }
        };
        match rt.block_on(async { tokio::time::timeout(timeout, live.notes.recv()).await }) {
            Ok(Some(n)) => keep(n),
            Ok(None) => return Err(lost()),
            Err(_) => {}
        }
        // Then whatever else has arrived, without waiting. (A connection
        // that ended after these: the next wait says so.)
        while let Ok(n) = live.notes.try_recv() {
            keep(n);
        }
        heard.bots.sort_unstable();
        heard.bots.dedup();
        Ok(heard)
    }
}

/// `?1`-style parameters (SQLite's, the dialect's) as PostgreSQL's `$1`.
///
/// Only a `?` followed by a digit in the statement's own text is a
/// parameter: the scan skips what PostgreSQL does not read as text of the
/// statement — string literals (`'…'`, `''` inside; `E'…'` with backslash
/// escapes), quoted identifiers (`"…"`), dollar-quoted strings
/// (`$tag$…$tag$`), line comments (`-- …`) and block comments (`/* … */`,
/// nested). A `?` not followed by a digit (jsonb's `?`, `?|`, `?&`) stays.
fn positional(sql: &str) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    // Everything up to `done` has been copied to `out`.
    let mut done = 0;
    let mut i = 0;
    while i < b.len() {
        i = match b[i] {
            b'\'' => {
                let escapes = i > 0 && matches!(b[i - 1], b'E' | b'e') && (i < 2 || !is_ident(b[i - 2]));
                skip_quoted(b, i + 1, b'\'', escapes)
            }
            b'"' => skip_quoted(b, i + 1, b'"', false),
            b'-' if b.get(i + 1) == Some(&b'-') => b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n),
            b'/' if b.get(i + 1) == Some(&b'*') => skip_block_comment(b, i + 2),
            b'$' if i == 0 || !is_ident(b[i - 1]) => skip_dollar_quoted(b, i),
            b'?' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push_str(&sql[done..i]);
                out.push('$');
                done = i + 1;
                i + 1
            }
            _ => i + 1,
        };
    }
    out.push_str(&sql[done..]);
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The index after the closing `quote` of a quoted run starting at `i`
/// (its opening quote already passed); a doubled quote is one character
/// of the run, as is a backslash and what follows it with `escapes`.
fn skip_quoted(b: &[u8], mut i: usize, quote: u8, escapes: bool) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' if escapes => i += 2,
            c if c == quote && b.get(i + 1) == Some(&quote) => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The index after the `*/` that closes a block comment whose `/*` ends at
/// `i`; PostgreSQL's block comments nest.
fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    let mut depth = 1;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// At a `$` that starts a token: past a dollar-quoted string (`$$…$$` or
/// `$tag$…$tag$`) when it is one, else just past the `$` (a `$1`
/// parameter or anything else).
fn skip_dollar_quoted(b: &[u8], i: usize) -> usize {
    let tag_len = b[i + 1..].iter().take_while(|&&c| is_ident(c) && !c.is_ascii_digit()).count();
    let end = i + 1 + tag_len;
    if b.get(end) != Some(&b'$') {
        return i + 1;
    }
    let tag = &b[i..=end];
    b[end + 1..].windows(tag.len()).position(|w| w == tag).map_or(b.len(), |n| end + 1 + n + tag.len())
}

impl ToSql for Val<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(i) => match *ty {
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Val::Text(t) => t.to_sql(ty, out),
            Val::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A column as the type the code reads; integers widen, flags are 0/1.
pub fn get<T: PgCol>(r: &postgres::Row, i: usize) -> StoreResult<T> {
    T::pg(r, i).ok_or(StorageError::Type(i))
}

pub trait PgCol: Sized {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self>;
}

fn int(r: &postgres::Row, i: usize) -> Option<Option<i64>> {
    if let Ok(v) = r.try_get::<_, Option<i64>>(i) {
        return Some(v);
    }
    if let Ok(v) = r.try_get::<_, Option<i32>>(i) {
        return Some(v.map(i64::from));
    }
    if let Ok(v) = r.try_get::<_, Option<bool>>(i) {
        return Some(v.map(i64::from));
    }
    None
}

impl PgCol for Option<i64> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i)
    }
}
impl PgCol for i64 {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten()
    }
}
impl PgCol for Option<bool> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).map(|v| v.map(|n| n != 0))
    }
}
impl PgCol for bool {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        int(r, i).flatten().map(|n| n != 0)
    }
}
impl PgCol for Option<u32> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        match int(r, i)? {
            None => Some(None),
            Some(n) => u32::try_from(n).ok().map(Some),
        }
    }
}
impl PgCol for u32 {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        <Option<u32>>::pg(r, i).flatten()
    }
}
impl PgCol for Option<String> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for String {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for Option<Vec<u8>> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}
impl PgCol for Vec<u8> {
    fn pg(r: &postgres::Row, i: usize) -> Option<Self> {
        r.try_get(i).ok()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sslrootcert_is_taken_out_of_the_url_and_verify_modes_become_require() {
        assert_eq!(super::split_url("postgres://h/db"), ("postgres://h/db".into(), None));
        assert_eq!(
            super::split_url("postgres://h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x"),
            ("postgres://h/db?sslmode=require&application_name=x".into(), Some("/ca.pem".into()))
        );
        assert_eq!(
            super::split_url("postgres://h/db?sslrootcert=/ca.pem"),
            ("postgres://h/db".into(), Some("/ca.pem".into()))
        );
    }

    #[test]
    fn positional_parameters_become_dollar_numbers_outside_strings() {
        assert_eq!(super::positional("SELECT ?1, '?2', ?12 WHERE a = ?3"), "SELECT $1, '?2', $12 WHERE a = $3");
    }

    #[test]
    fn positional_rewrite_leaves_comments_quoted_identifiers_and_dollar_quotes_alone() {
        let p = super::positional;
        assert_eq!(p("SELECT ?1 -- not ?2\nFROM t WHERE a = ?3"), "SELECT $1 -- not ?2\nFROM t WHERE a = $3");
        assert_eq!(p("SELECT /* ?1 /* nested ?2 */ ?3 */ ?4"), "SELECT /* ?1 /* nested ?2 */ ?3 */ $4");
        assert_eq!(p(r#"SELECT "col?1", ?2 FROM "t""?3""#), r#"SELECT "col?1", $2 FROM "t""?3""#);
        assert_eq!(p("SELECT 'it''s ?1', ?2"), "SELECT 'it''s ?1', $2");
        assert_eq!(p(r"SELECT E'\' ?1', ?2"), r"SELECT E'\' ?1', $2");
        assert_eq!(p("SELECT $$ ?1 $$, $q$ ?2 $q$, ?3"), "SELECT $$ ?1 $$, $q$ ?2 $q$, $3");
        // Already numbered, and jsonb's own operators, stay as they are.
        assert_eq!(p("SELECT $1, d ? 'k', d ?| ?2"), "SELECT $1, d ? 'k', d ?| $2");
        // Unterminated runs end the scan without a panic.
        assert_eq!(p("SELECT '?1"), "SELECT '?1");
        assert_eq!(p("SELECT /* ?1"), "SELECT /* ?1");
        assert_eq!(p("SELECT $a$ ?1"), "SELECT $a$ ?1");
        assert_eq!(p("SELECT ?1 --"), "SELECT $1 --");
    }
}
