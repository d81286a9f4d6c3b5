//! The connection that listens for other nodes' notifications.

use super::config::Target;
use super::tls::tls;
use super::{log_storage_error, Client, PgFail, CHANNEL};
use crate::store::error::{StoreError, StoreResult};
use crate::store::heard::Heard;
use std::time::{Duration, Instant};

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
    target: Target,
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
    /// Listens where `conn` connects (same hosts, TLS and deadline).
    pub fn new(conn: &super::PgConn) -> Listener {
        Listener { target: conn.target.clone(), rt: None, live: None }
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
                .map_err(|_| StoreError::Unavailable("cannot start the PostgreSQL client's runtime"))?;
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
            log_storage_error("notification listener failed", &e.to_string(), self.target.password.as_deref());
        }
        r
    }

    fn deadline_error(&self, what: &'static str) -> StoreError {
        StoreError::Deadline { what, ms: self.target.deadline.as_millis() as u64 }
    }

    fn listen(&self) -> StoreResult<Listening> {
        let rt = self.rt.as_ref().expect("made by wait");
        let tls = tls(self.target.root_cert.as_deref())?;
        let (pg, mut connection) = rt.block_on(self.target.connect_first(&tls)).map_err(|e| match e {
            PgFail::Pg(e) => StoreError::Postgres(e),
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
            tokio::time::timeout(self.target.deadline, client.pg.batch_execute(&format!("LISTEN {CHANNEL}"))).await
        }) {
            Ok(Ok(())) => Ok(Listening { client, notes, checked: Instant::now() }),
            Ok(Err(e)) => Err(StoreError::Postgres(e)),
            Err(_) => Err(self.deadline_error("LISTEN")),
        }
    }

    fn receive(&self, live: &mut Listening, timeout: Duration, own_pids: &[i32]) -> StoreResult<Heard> {
        let rt = self.rt.as_ref().expect("made by wait");
        let lost = || StoreError::Unavailable("the connection listening to PostgreSQL notifications was lost");
        if live.checked.elapsed() >= LISTENER_CHECK_EVERY {
            // An open socket says nothing of a stopped server: ask it.
            match rt
                .block_on(async { tokio::time::timeout(self.target.deadline, live.client.pg.simple_query("")).await })
            {
                Ok(Ok(_)) => live.checked = Instant::now(),
                Ok(Err(e)) => return Err(StoreError::Postgres(e)),
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
