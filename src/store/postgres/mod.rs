//! The PostgreSQL store, by job: where to connect (`config`: the URL,
//! parsed by tokio-postgres's `Config`), TLS (`tls`), the connection and
//! its transactions (`conn`), the schema (`migrate`), the notification
//! listener (`listener`), statements as PostgreSQL reads them (`sql`) and
//! the store's values as PostgreSQL's parameters (`types`). What a
//! PostgreSQL error says and whether it means the server is not there are
//! in `store/error.rs`, and how a column reads in `store/value.rs`: both
//! stores' code names them, so they sit below this module.
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

mod config;
mod conn;
mod listener;
mod migrate;
mod sql;
mod tls;
mod types;

pub use conn::PgConn;
pub use listener::Listener;

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The channel every node notifies and listens on.
pub const CHANNEL: &str = "botspace";

/// Largest payload sent: PostgreSQL refuses 8000 bytes and more. A longer
/// list is sent as an empty payload, which means "re-read everything".
pub const MAX_PAYLOAD: usize = 7900;

type Params<'a> = [&'a (dyn postgres::types::ToSql + Sync)];

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
