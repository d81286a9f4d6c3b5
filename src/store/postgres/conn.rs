//! One PostgreSQL connection of a service: connecting (and reconnecting
//! after it broke), pipelined statements, transactions and their outcome.

use super::config::Target;
use super::tls::tls;
use super::types::OwnedVal;
use super::{log_storage_error, sql, Client, Params, PgFail, Timed, CHANNEL, MAX_PAYLOAD};
use crate::config::Config;
use crate::store::error::{is_unavailable, StoreError, StoreResult};
use crate::store::value::Val;
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Row, Statement};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;

/// A PostgreSQL connection that reopens itself after it broke.
pub struct PgConn {
    /// Where to connect, parsed once.
    pub(super) target: Target,
    rt: tokio::runtime::Runtime,
    client: RefCell<Option<Client>>,
    /// BEGIN is owed: it goes out with the transaction's first statement.
    begin_owed: Cell<bool>,
    /// Writes of the open transaction whose answer nobody waits for: they
    /// go out ahead of the next statement, or with the COMMIT, in that
    /// call's round trip ([`PgConn::defer`]).
    deferred: RefCell<Vec<Deferred>>,
    /// Round trips made for statements (connecting aside), for metrics;
    /// shared by a service's connections ([`PgConn::open_another`]).
    round_trips: Arc<AtomicU64>,
    /// Prepared statements run (BEGIN, COMMIT and ROLLBACK aside), shared
    /// as `round_trips` is: what a round trip carries.
    statements: Arc<AtomicU64>,
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

impl PgConn {
    /// Connects and brings the schema up to date.
    pub fn open(config: &Config) -> StoreResult<PgConn> {
        PgConn::open_counting(config, Arc::default(), Arc::default())
    }

    /// One more connection of the same service (one runs a group while
    /// another commits): its round trips count with this one's.
    pub fn open_another(&self, config: &Config) -> StoreResult<PgConn> {
        PgConn::open_counting(config, self.round_trips.clone(), self.statements.clone())
    }

    fn open_counting(config: &Config, round_trips: Arc<AtomicU64>, statements: Arc<AtomicU64>) -> StoreResult<PgConn> {
        let target = Target::parse(config).inspect_err(|e| {
            // Logged as a failure to connect would be: the setting is wrong.
            log_storage_error("connection failed", &e.to_string(), None);
        })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|_| StoreError::Unavailable("cannot start the PostgreSQL client's runtime"))?;
        let conn = PgConn {
            target,
            rt,
            client: RefCell::new(None),
            begin_owed: Cell::new(false),
            deferred: RefCell::new(Vec::new()),
            round_trips,
            statements,
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
        Timed { rt: &self.rt, deadline: self.target.deadline }
    }

    fn connect(&self) -> StoreResult<Client> {
        let tls = tls(self.target.root_cert.as_deref())?;
        // The socket is driven whenever the runtime runs: inside each call.
        let client = self.logged(self.target.connect_on(&self.rt, &tls))?;
        let pid = self.logged(self.timed().block_on(client.pg.query_one("SELECT pg_backend_pid()", &[])))?;
        self.backend_pid.store(pid.get::<_, i32>(0), Ordering::Relaxed);
        Ok(client)
    }

    /// [`PgConn::track_as`] outside a transaction, for connecting.
    fn logged<T>(&self, r: Result<T, PgFail>) -> StoreResult<T> {
        let r = self.track_as(false, r);
        if let Err(e) = &r {
            log_storage_error("connection failed", &e.to_string(), self.target.password.as_deref());
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
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Timed<'_>, &tokio_postgres::Client) -> Result<T, PgFail>,
    ) -> StoreResult<T> {
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
                return Err(StoreError::Unavailable("the connection to PostgreSQL was lost mid-transaction"));
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
                log_storage_error(
                    "call failed, the connection is dropped",
                    &e.to_string(),
                    self.target.password.as_deref(),
                );
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
                    return StoreError::Deadline { what, ms: self.target.deadline.as_millis() as u64 };
                }
            };
            if matches!(e.code(), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
            {
                self.retryable.set(true);
            }
            StoreError::Postgres(e)
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
        let sql::Translated { text, writes } = sql::translated(sql);
        // Preparing sends nothing into a transaction whose BEGIN is owed.
        let r = self.with_as(!self.begin_owed.get(), |rt, c| rt.block_on(c.prepare(&text)));
        if self.begin_owed.get() {
            self.stale(&r);
        }
        let st = r?;
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
        self.pipeline_hinting(runs, then, None)
    }

    /// [`PgConn::pipeline`], with `hint` (a simple query: the commit's
    /// notification) sent after `then` in the same round trip, as its own
    /// implicit transaction. Its failure is logged, never the call's: the
    /// commit before it stands.
    fn pipeline_hinting(
        &self,
        runs: &[(&Statement, &Params<'_>)],
        then: Option<&str>,
        hint: Option<&str>,
    ) -> StoreResult<Vec<(Vec<Row>, u64)>> {
        let begin = self.begin_owed.get();
        // The deferred writes go first: whatever runs next sees them.
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        let owned: Vec<Vec<&(dyn ToSql + Sync)>> =
            deferred.iter().map(|d| d.vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect()).collect();
        let mut all: Vec<(&Statement, &Params<'_>)> =
            deferred.iter().zip(&owned).map(|(d, p)| (&d.st, p.as_slice())).collect();
        all.extend_from_slice(runs);
        self.statements.fetch_add(all.len() as u64, Ordering::Relaxed);
        let r = self.with(|rt, c| {
            rt.block_on(async {
                let begin = async {
                    if begin {
                        c.batch_execute("BEGIN").await
                    } else {
                        Ok(())
                    }
                };
                let statements = futures_util::future::join_all(all.iter().map(|(st, p)| query_counted(c, st, p)));
                let last = async {
                    match then {
                        Some(q) => c.batch_execute(q).await,
                        None => Ok(()),
                    }
                };
                let after = async {
                    match hint {
                        Some(q) => c.batch_execute(q).await.err(),
                        None => None,
                    }
                };
                let (b, results, t, hint_failed) = futures_util::join!(begin, statements, last, after);
                let r = b.and_then(|()| results.into_iter().collect::<Result<Vec<_>, _>>()).and_then(|v| t.map(|()| v));
                if r.is_err() && then.is_some() && !c.is_closed() {
                    let _ = c.batch_execute("ROLLBACK").await;
                }
                if let Some(e) = hint_failed.filter(|_| r.is_ok()) {
                    // Other nodes hear of this commit at their next poll
                    // of the bots' rows instead.
                    log_storage_error("notification failed", &e.to_string(), self.target.password.as_deref());
                }
                r
            })
        });
        if begin && then.is_none() {
            self.stale(&r);
        }
        if begin && !matches!(&r, Err(StoreError::Unavailable(_))) {
            self.begin_owed.set(false);
        }
        let mut out = r?;
        // A deferred write that changed other than the rows it had to:
        // the transaction must not commit (`finish` sends those ahead of
        // the COMMIT, never with it).
        for (d, (_, n)) in deferred.iter().zip(&out) {
            if d.expect.is_some_and(|want| want != *n) {
                self.aborted.set(true);
                return Err(StoreError::Inconsistent(d.what));
            }
        }
        Ok(out.split_off(deferred.len()))
    }

    /// Queues a write whose answer (besides success) nobody waits for: it
    /// goes out ahead of the transaction's next call, in its round trip,
    /// or with the COMMIT. `d.expect`: the rows it must change, else the
    /// transaction fails (checked before the COMMIT is sent, at the cost of
    /// a round trip of its own). `d.counted`: it counts in
    /// [`PgConn::total_changes`]. Outside a transaction it runs now.
    pub fn defer(&self, st: &Statement, vals: &[Val<'_>], d: crate::store::value::Deferral) -> StoreResult<()> {
        let crate::store::value::Deferral { expect, waits, counted, what } = d;
        let expect = expect.map(|n| n as u64);
        if !self.in_tx.get() {
            let n = self.execute_uncounted(st, vals)? as u64;
            if counted {
                self.changes.set(self.changes.get() + n);
            }
            return match expect {
                Some(want) if want != n => Err(StoreError::Inconsistent(what)),
                _ => Ok(()),
            };
        }
        if counted {
            self.changes.set(self.changes.get() + expect.unwrap_or(1).max(1));
        }
        let vals = vals.iter().map(OwnedVal::of).collect();
        self.deferred.borrow_mut().push(Deferred { st: st.clone(), vals, expect, waits, what, rows: None });
        Ok(())
    }

    /// [`PgConn::defer`] of one row (`row`, a JSON object) of a statement
    /// that writes a JSON array of them (its one parameter): rows queued
    /// one after another go out as one statement. The statement counts no
    /// rows (`d.expect` is ignored); each row counts as one change when
    /// `d.counted`.
    pub fn defer_row(&self, sql: &'static str, row: &str, d: crate::store::value::Deferral) -> StoreResult<()> {
        let (st, _) = self.prepare_cached(sql)?;
        if !self.in_tx.get() {
            let n = self.execute_uncounted(&st, &[Val::Text(&format!("[{row}]"))])?;
            if d.counted {
                self.changes.set(self.changes.get() + n as u64);
            }
            return Ok(());
        }
        if d.counted {
            self.changes.set(self.changes.get() + 1);
        }
        let mut deferred = self.deferred.borrow_mut();
        if let Some(last) = deferred.last_mut().filter(|l| l.rows == Some(sql) && l.waits == d.waits) {
            if let Some(OwnedVal::Text(json)) = last.vals.first_mut() {
                json.pop();
                json.push(',');
                json.push_str(row);
                json.push(']');
                return Ok(());
            }
        }
        let vals = vec![OwnedVal::Text(format!("[{row}]"))];
        deferred.push(Deferred { st, vals, expect: None, waits: d.waits, what: d.what, rows: Some(sql) });
        Ok(())
    }

    /// The rows [`PgConn::defer_row`] queued for `sql`, taken back from the
    /// queue as their JSON array, when they are the last write queued (so
    /// whatever goes out next still runs after everything queued before
    /// them).
    pub fn take_last_rows(&self, sql: &'static str) -> Option<String> {
        let mut deferred = self.deferred.borrow_mut();
        if deferred.last().is_none_or(|l| l.rows != Some(sql)) {
            return None;
        }
        match deferred.pop()?.vals.pop()? {
            OwnedVal::Text(json) => Some(json),
            _ => None,
        }
    }

    /// Sends the deferred writes that may wait for another transaction's
    /// rows, or whose row count is checked (and those queued before them),
    /// in one round trip; nothing when there are none. After it, what is
    /// left waits for nobody: a COMMIT sent without the service's lock
    /// cannot wait for a transaction that waits for the lock's holder.
    pub fn send_waiting_writes(&self) -> StoreResult<()> {
        let last = self.deferred.borrow().iter().rposition(|d| d.waits || d.expect.is_some());
        let Some(last) = last else { return Ok(()) };
        let rest = self.deferred.borrow_mut().split_off(last + 1);
        let r = self.pipeline(&[], None).map(drop);
        *self.deferred.borrow_mut() = rest;
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
        if self.reused.get() && matches!(r, Err(StoreError::Postgres(e)) if is_unavailable(e)) {
            self.retryable.set(true);
        }
    }

    /// Runs each read with its parameters, all in one round trip (with
    /// the owed BEGIN and the deferred writes ahead of them), and hands
    /// each run's rows to `f` with the run's index. The server runs them
    /// in order.
    pub fn query_pipelined(
        &self,
        runs: &[(Statement, &[Val<'_>])],
        f: &mut dyn FnMut(usize, &crate::store::value::Row<'_>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let params: Vec<Vec<&(dyn ToSql + Sync)>> =
            runs.iter().map(|(_, v)| v.iter().map(|x| x as &(dyn ToSql + Sync)).collect()).collect();
        let runs: Vec<(&Statement, &Params<'_>)> =
            runs.iter().zip(&params).map(|((st, _), p)| (st, p.as_slice())).collect();
        for (i, (rows, _)) in self.pipeline(&runs, None)?.iter().enumerate() {
            for row in rows {
                f(i, &crate::store::value::Row::Pg(row))?;
            }
        }
        Ok(())
    }

    pub fn query_each(
        &self,
        st: &Statement,
        writes: bool,
        vals: &[Val<'_>],
        f: &mut dyn FnMut(&crate::store::value::Row<'_>) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let params: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let (rows, _) = self.run(st, &params)?;
        // A write that returns rows (`… RETURNING`, or a CTE that writes
        // and then reads) changed something, whatever it returned.
        if writes {
            self.changes.set(self.changes.get() + rows.len().max(1) as u64);
        }
        for r in &rows {
            if !f(&crate::store::value::Row::Pg(r))? {
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
    /// same round trip, just after COMMIT, as a transaction of its own
    /// (see `finish`). A failing `pg_notify` is logged: the commit stands,
    /// and other nodes find its events at their next poll.
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
            return Err(StoreError::Aborted);
        }
        if self.deferred.borrow().iter().any(|d| d.expect.is_some()) {
            // Checked before anything can commit: a round trip of their own.
            if let Err(e) = self.pipeline(&[], None) {
                let _ = self.rollback();
                return Err(e);
            }
        }
        if self.begin_owed.get() && last.is_none() && self.deferred.borrow().is_empty() {
            // Nothing was sent: there is nothing to commit (nor to notify).
            self.end_tx();
            return Ok(());
        }
        // The hint goes out behind the COMMIT, in its round trip, as a
        // transaction of its own: PostgreSQL holds its notification lock,
        // one transaction of the whole cluster at a time, from `pg_notify`
        // to the end of that transaction's commit, so inside this one it
        // would line every waking commit up behind the others' WAL flushes.
        // Its own commit does not wait for a flush (a hint is not worth
        // one: lost in a crash, the sessions' polls find the events). A
        // COMMIT that failed sends it anyway: it is only a hint, and the
        // nodes that hear it re-read and find nothing new. The payload goes
        // in as a literal: only the characters of bot ids and commas are
        // let through (anything else becomes the empty "re-read
        // everything" payload), so it needs no escaping.
        let hint = notify.map(|p| {
            let safe = p.len() <= MAX_PAYLOAD
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b','));
            let p = if safe { p } else { "" };
            format!("SET LOCAL synchronous_commit TO off; SELECT pg_notify('{CHANNEL}', '{p}')")
        });
        let r = match last {
            None => self.pipeline_hinting(&[], Some("COMMIT"), hint.as_deref()).map(drop),
            Some((st, params, n)) => {
                self.pipeline_hinting(&[(st, params)], Some("COMMIT"), hint.as_deref()).map(|mut out| {
                    *n = out.pop().map_or(0, |(_, count)| count as usize);
                })
            }
        };
        self.end_tx();
        match r {
            // COMMIT was sent; whether the server applied it before the
            // connection went is not known here.
            Err(e) if e.is_unavailable() => Err(StoreError::CommitLost(Box::new(e))),
            r => r,
        }
    }

    fn end_tx(&self) {
        self.deferred.borrow_mut().clear();
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

    /// Prepared statements run so far (BEGIN, COMMIT and ROLLBACK aside).
    #[cfg(feature = "test-hooks")]
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
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
}

/// A write queued by [`PgConn::defer`].
struct Deferred {
    st: Statement,
    vals: Vec<OwnedVal>,
    expect: Option<u64>,
    waits: bool,
    what: &'static str,
    /// The statement's SQL, when its one parameter is a JSON array of rows
    /// that later rows of the same statement join ([`PgConn::defer_row`]).
    rows: Option<&'static str>,
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
