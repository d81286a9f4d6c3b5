//! The store: the one database connection every method, the gateway and
//! the commit path go through, over SQLite (embedded, the default and the
//! only store in the WASM build) or PostgreSQL (feature `postgres`, when
//! `database` is a `postgres://` or `postgresql://` URL).
//!
//! The interface is narrow on purpose: cached prepared statements with
//! positional parameters, rows read by column index, and transactions. The
//! queries stay hand-written SQL in one portable dialect (`?1`-style
//! parameters, `ON CONFLICT`, `RETURNING`, `CASE` rather than two-argument
//! `max`), so both stores run the same text; the few statements the two
//! dialects spell differently are chosen by [`Conn::dialect`]. Integers are
//! 64-bit and flags are 0/1 integers in both schemas, so a value reads back
//! the same from either store.

pub mod backlog;
// `bot_with_chat_columns!`, for the modules declared after it.
#[macro_use]
pub mod bots;
pub mod buttons;
pub mod chats;
pub mod console;
pub mod error;
pub mod events;
pub mod gateway;
pub mod group;
pub mod heard;
pub mod idempotency;
pub(crate) mod import;
pub mod limits;
pub mod messages;
pub mod notify;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod schema;
pub mod sqlite;
pub mod stats;
pub mod users;
pub mod value;
pub mod wal;
pub mod webhooks;

pub use error::{Optional, StoreError, StoreResult};
pub use value::{Deferral, Params, Row, ToVal, Val};

/// Which SQL dialect a connection speaks, for the few statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres,
}

/// The connection of a service.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    // Boxed: one per service, and SQLite's variant stays small.
    Postgres(Box<postgres::PgConn>),
}

/// A cached prepared statement.
pub enum Stmt<'c> {
    Sqlite(rusqlite::CachedStatement<'c>),
    #[cfg(feature = "postgres")]
    Pg(&'c postgres::PgConn, ::postgres::Statement, bool),
}

impl Conn {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Shared with other nodes (a database server, PostgreSQL): another
    /// node may change any row at any time, so what a node cached may be
    /// stale, gateway connections are counted by leases in the database,
    /// rate buckets live there, and a group's requests run in lock order.
    /// A SQLite file belongs to one process.
    pub fn is_shared(&self) -> bool {
        self.dialect() != Dialect::Sqlite
    }

    /// The server process of this connection, kept up to date across
    /// reconnections (a shared store's own notifications are skipped by
    /// it); `None` for an embedded store.
    pub fn backend_pid(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicI32>> {
        match self {
            Conn::Sqlite(_) => None,
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => Some(c.backend_pid()),
        }
    }

    /// After deleted text was scrubbed: on SQLite, truncates the WAL so
    /// the text leaves its older page images too. A server keeps no such
    /// file of ours: nothing to do.
    pub fn checkpoint_truncate(&self) {
        match self {
            Conn::Sqlite(c) => sqlite::checkpoint_truncate(c),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => {}
        }
    }

    /// With a deferred WAL sync (SQLite), the transaction about to start
    /// commits without an fsync (`on`), every other write with one (see
    /// [`sqlite::defer_commit_sync`]). Nothing elsewhere.
    pub fn defer_commit_sync(&self, on: bool) {
        match self {
            Conn::Sqlite(c) => sqlite::defer_commit_sync(c, on),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => {}
        }
    }

    /// A database that lives in this process's memory (SQLite's
    /// `:memory:` or a temporary database): no call on it waits on a disk
    /// or a network.
    pub fn in_memory(&self) -> bool {
        match self {
            Conn::Sqlite(c) => c.path().is_none_or(str::is_empty),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => false,
        }
    }

    /// The SQLite connection, for what only SQLite has (export, import).
    pub fn sqlite(&mut self) -> Option<&mut rusqlite::Connection> {
        match self {
            Conn::Sqlite(c) => Some(c),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => None,
        }
    }

    /// The SQLite connection, shared.
    pub fn sqlite_ref(&self) -> Option<&rusqlite::Connection> {
        match self {
            Conn::Sqlite(c) => Some(c),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => None,
        }
    }

    /// The schema version (the number of migrations applied).
    pub fn schema_version(&self) -> StoreResult<i64> {
        match self {
            Conn::Sqlite(c) => Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.schema_version(),
        }
    }

    /// A prepared statement from the connection's cache.
    pub fn prepare_cached(&self, sql: &str) -> StoreResult<Stmt<'_>> {
        match self {
            Conn::Sqlite(c) => Ok(Stmt::Sqlite(c.prepare_cached(sql)?)),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => {
                let (st, writes) = c.prepare_cached(sql)?;
                Ok(Stmt::Pg(c, st, writes))
            }
        }
    }

    /// Starts a write transaction (SQLite: `BEGIN IMMEDIATE`, taking the
    /// write lock now, so the transaction never fails to upgrade later).
    /// Round trips to a database server so far (0 on SQLite, which is in
    /// the process).
    pub fn round_trips(&self) -> u64 {
        match self {
            Conn::Sqlite(_) => 0,
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.round_trips(),
        }
    }

    /// Statements run on a database server so far (BEGIN, COMMIT and
    /// ROLLBACK aside; 0 on SQLite): what [`Conn::round_trips`] carried.
    #[cfg(feature = "test-hooks")]
    pub fn statements(&self) -> u64 {
        match self {
            Conn::Sqlite(_) => 0,
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.statements(),
        }
    }

    pub fn begin(&self) -> StoreResult<()> {
        match self {
            Conn::Sqlite(c) => Ok(c.prepare_cached("BEGIN IMMEDIATE")?.execute([]).map(|_| ())?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.begin(),
        }
    }

    pub fn commit(&self) -> StoreResult<()> {
        self.commit_notifying(None)
    }

    /// Commits; on PostgreSQL with `notify`, other nodes listening get
    /// that payload if and only if the commit succeeds (see
    /// [`postgres::PgConn::commit`]). SQLite has no other nodes: `notify`
    /// is ignored.
    pub fn commit_notifying(&self, notify: Option<&str>) -> StoreResult<()> {
        match self {
            Conn::Sqlite(c) => {
                let _ = notify;
                Ok(c.prepare_cached("COMMIT")?.execute([]).map(|_| ())?)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.commit(notify),
        }
    }

    /// Runs `sql` as the transaction's last statement and commits: on a
    /// database server both go out in one round trip, and a failing
    /// statement turns the COMMIT into a rollback.
    /// `notify` as in [`Conn::commit_notifying`].
    pub fn execute_then_commit(&self, sql: &str, p: impl Params, notify: Option<&str>) -> StoreResult<usize> {
        match self {
            Conn::Sqlite(_) => {
                let n = self.prepare_cached(sql)?.execute(p)?;
                self.commit_notifying(notify)?;
                Ok(n)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => {
                let (st, _) = c.prepare_cached(sql)?;
                p.bind(|v| c.execute_then_commit(&st, v, notify))
            }
        }
    }

    /// Runs each read (its SQL and parameters) and hands each run's rows
    /// to `f` with the run's index: on a database server all in one round
    /// trip.
    pub fn query_pipelined(
        &self,
        runs: &[(&str, Vec<Val<'_>>)],
        mut f: impl FnMut(usize, &Row<'_>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        match self {
            Conn::Sqlite(_) => {
                for (i, (sql, run)) in runs.iter().enumerate() {
                    self.prepare_cached(sql)?.query_each(run.as_slice(), |r| f(i, r).map(|()| true))?;
                }
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => {
                let prepared: Vec<(::postgres::Statement, &[Val<'_>])> = runs
                    .iter()
                    .map(|(sql, v)| Ok((c.prepare_cached(sql)?.0, v.as_slice())))
                    .collect::<StoreResult<_>>()?;
                c.query_pipelined(&prepared, &mut f)
            }
        }
    }

    /// A deferred write ([`Deferral`]) of one row of `sql`, a statement
    /// whose one parameter is a JSON array of rows (`row`: a JSON object):
    /// on a database server the rows queued one after another go out as
    /// one statement. Not on SQLite, which writes each row at once.
    pub fn defer_row(&self, sql: &'static str, row: &str, d: Deferral) -> StoreResult<()> {
        match self {
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.defer_row(sql, row, d),
            // Only a database server numbers messages in memory, the one
            // caller (`messages::reserve`).
            Conn::Sqlite(_) => {
                let _ = (sql, row, d);
                Err(StoreError::Unsupported("rows are queued only on a database server"))
            }
        }
    }

    /// The rows queued last by [`Conn::defer_row`] for `sql`, taken back
    /// from the queue as their JSON array when nothing was queued after
    /// them: the caller sends them itself, in a statement that writes them
    /// and more. `None` otherwise (and always on SQLite).
    pub fn take_last_rows(&self, sql: &'static str) -> Option<String> {
        match self {
            Conn::Sqlite(_) => {
                let _ = sql;
                None
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.take_last_rows(sql),
        }
    }

    /// Sends now the deferred writes that may wait for another
    /// transaction (see [`Deferral`]): one round trip on a database server
    /// when there are any, nothing otherwise.
    pub fn send_waiting_writes(&self) -> StoreResult<()> {
        match self {
            Conn::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.send_waiting_writes(),
        }
    }

    pub fn rollback(&self) -> StoreResult<()> {
        match self {
            Conn::Sqlite(c) => Ok(c.prepare_cached("ROLLBACK")?.execute([]).map(|_| ())?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.rollback(),
        }
    }

    /// Rows changed since the connection opened: a method that failed
    /// without changing it wrote nothing.
    pub fn total_changes(&self) -> u64 {
        match self {
            Conn::Sqlite(c) => c.total_changes(),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.total_changes(),
        }
    }

    /// True when no transaction is open, or the open one can no longer
    /// commit (SQLite may end a transaction itself on an error; PostgreSQL
    /// aborts it on any error): the group's earlier writes are gone.
    pub fn transaction_lost(&self) -> bool {
        match self {
            Conn::Sqlite(c) => c.is_autocommit(),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.transaction_lost(),
        }
    }

    /// True once after a failure that a rerun of the whole transaction may
    /// not meet again (PostgreSQL serialization failure or deadlock,
    /// SQLSTATE 40001 / 40P01).
    pub fn take_retryable(&self) -> bool {
        match self {
            Conn::Sqlite(_) => false,
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.take_retryable(),
        }
    }
}

impl Stmt<'_> {
    /// Runs the statement; the number of rows it changed.
    pub fn execute(&mut self, p: impl Params) -> StoreResult<usize> {
        match self {
            Stmt::Sqlite(s) => p.bind(|v| s.execute(rusqlite::params_from_iter(v.iter()))).map_err(Into::into),
            #[cfg(feature = "postgres")]
            Stmt::Pg(c, s, _) => p.bind(|v| c.execute(s, v)),
        }
    }

    /// Runs a write whose answer is only "it went through": on a database
    /// server it waits to go out with the transaction's next call or its
    /// COMMIT (no round trip of its own; its failure is that call's). See
    /// [`Deferral`]. SQLite runs it now.
    pub fn defer(&mut self, p: impl Params, d: Deferral) -> StoreResult<()> {
        match self {
            Stmt::Sqlite(s) => {
                let n = p.bind(|v| s.execute(rusqlite::params_from_iter(v.iter())))?;
                match d.expect {
                    Some(want) if want != n => Err(StoreError::Inconsistent(d.what)),
                    _ => Ok(()),
                }
            }
            #[cfg(feature = "postgres")]
            Stmt::Pg(c, s, _) => p.bind(|v| c.defer(s, v, d)),
        }
    }

    /// [`Stmt::defer`] of a write that changes no state the caller cares
    /// about (creating a row that means "nothing yet"): it does not count
    /// in [`Conn::total_changes`], so a request refused after it still
    /// counts as having written nothing. SQLite counts every change
    /// itself (and runs it now).
    pub fn defer_uncounted(&mut self, p: impl Params) -> StoreResult<()> {
        match self {
            Stmt::Sqlite(s) => {
                p.bind(|v| s.execute(rusqlite::params_from_iter(v.iter())))?;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Stmt::Pg(c, s, _) => p.bind(|v| c.defer(s, v, Deferral::waits("an uncounted write").uncounted())),
        }
    }

    /// The first row through `f`; [`StoreError::NoRows`] when there is none.
    pub fn query_row<T>(&mut self, p: impl Params, f: impl FnOnce(&Row<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut f = Some(f);
        let mut out = None;
        self.query_each(p, |r| {
            if let Some(f) = f.take() {
                out = Some(f(r)?);
            }
            Ok(false)
        })?;
        out.ok_or(StoreError::NoRows)
    }

    /// Every row through `f`, collected.
    pub fn query_vec<T>(
        &mut self,
        p: impl Params,
        mut f: impl FnMut(&Row<'_>) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let mut out = Vec::new();
        self.query_each(p, |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// True when the query returns a row.
    pub fn exists(&mut self, p: impl Params) -> StoreResult<bool> {
        let mut any = false;
        self.query_each(p, |_| {
            any = true;
            Ok(false)
        })?;
        Ok(any)
    }

    /// Streams rows through `f` until it returns `false` (the rest are not
    /// read, so a caller can bound what it takes by bytes).
    pub fn query_each(&mut self, p: impl Params, mut f: impl FnMut(&Row<'_>) -> StoreResult<bool>) -> StoreResult<()> {
        match self {
            Stmt::Sqlite(s) => p.bind(|v| {
                let mut rows = s.query(rusqlite::params_from_iter(v.iter()))?;
                while let Some(r) = rows.next()? {
                    if !f(&Row::Sqlite(r))? {
                        break;
                    }
                }
                Ok(())
            }),
            #[cfg(feature = "postgres")]
            Stmt::Pg(c, s, writes) => p.bind(|v| c.query_each(s, *writes, v, &mut f)),
        }
    }
}

/// Connections to a shared store per service: while one group's COMMIT
/// syncs (awaited without the lock, see `txn::HeldCommit`), the calls that
/// come meanwhile (a gateway session's read, a host call) run on another.
pub const SHARED_CONNECTIONS: usize = 2;

/// Opens the store the configuration names: the main connection, and the
/// pool's others (none on SQLite, [`SHARED_CONNECTIONS`] in all on a
/// shared store).
pub fn open_pool(config: &crate::config::Config) -> StoreResult<(Conn, Vec<Conn>)> {
    let conn = open(config)?;
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut others = Vec::new();
    #[cfg(feature = "postgres")]
    if let Conn::Postgres(pg) = &conn {
        for _ in 1..SHARED_CONNECTIONS {
            others.push(Conn::Postgres(Box::new(pg.open_another(config)?)));
        }
    }
    Ok((conn, others))
}

/// A read-only connection of its own to the SQLite file `config` names,
/// for reads that must not take the service's lock (the metrics scrape);
/// `None` for other stores or when it cannot be opened.
pub fn open_reader(config: &crate::config::Config) -> Option<Conn> {
    if is_server_url(&config.database) {
        return None;
    }
    sqlite::open_reader(&config.database).ok().map(Conn::Sqlite)
}

/// Whether the disk under the SQLite file `config` names takes a write
/// again (see [`sqlite::space_probe`]); always `Ok` for other stores.
pub fn space_probe(config: &crate::config::Config) -> std::io::Result<()> {
    if is_server_url(&config.database) {
        return Ok(());
    }
    sqlite::space_probe(&config.database)
}

fn is_server_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// Opens the store the configuration names and brings its schema up to date.
pub fn open(config: &crate::config::Config) -> StoreResult<Conn> {
    if is_server_url(&config.database) {
        #[cfg(feature = "postgres")]
        return Ok(Conn::Postgres(Box::new(postgres::PgConn::open(config)?)));
        #[cfg(not(feature = "postgres"))]
        return Err(StoreError::Unsupported(
            "database is a PostgreSQL URL, but this build has no PostgreSQL store (cargo feature `postgres`)",
        ));
    }
    Ok(Conn::Sqlite(sqlite::open(config)?))
}
