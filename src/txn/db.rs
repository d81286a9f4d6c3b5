//! The database handle ([`Db`]): the connection behind its lock, the state
//! that lives with it ([`Inner`]) and the undo points a group's requests
//! return to when refused ([`UndoPoint`]).

use super::{ConnPool, TxEffects};
use crate::auth;
use crate::model::Bot;
use crate::ratelimit::RateLimiter;
use crate::store::wal::WalSync;
use crate::store::Conn;
use std::sync::{Arc, Mutex, MutexGuard};

/// What the database lock guards.
pub(crate) struct Inner {
    pub conn: Conn,
    /// Token hash → bot, for authentication without a query.
    pub bot_cache: auth::DigestMap<Arc<Bot>>,
    pub rate: RateLimiter,
    pub fx: TxEffects,
    pub last_prune_ms: u64,
}

/// Where the open transaction stood before one request of a group ran:
/// the state a refusal returns to ([`Inner::undo_to`]). The database needs
/// no savepoint: methods validate before they write, so a refused request
/// wrote nothing ([`Inner::wrote_since`] tells when that did not hold).
pub(crate) struct UndoPoint {
    rate: usize,
    bots_touched: bool,
    woken: usize,
    revoked: usize,
    rotated: usize,
    changes: u64,
    pending_updates: usize,
}

impl Inner {
    /// Opens the transaction a request or a group runs in. What the last
    /// one held beside the database (counters, buckets, keys) is dropped: it held
    /// only under that transaction's row locks.
    pub fn begin(&mut self) -> crate::store::StoreResult<()> {
        self.fx.ahead = Default::default();
        self.conn.begin()
    }

    pub fn undo_point(&self) -> UndoPoint {
        UndoPoint {
            rate: self.rate.mark(),
            bots_touched: self.fx.bots_touched,
            woken: self.fx.woken.len(),
            revoked: self.fx.revoked.len(),
            rotated: self.fx.rotated.len(),
            changes: self.conn.total_changes(),
            pending_updates: self.fx.updates.len(),
        }
    }

    /// True when the database changed since `p`, or the transaction was
    /// lost (SQLite may end it itself on an error: FULL, IOERR,
    /// RAISE(ROLLBACK)...): only the whole transaction can be undone.
    pub fn wrote_since(&self, p: &UndoPoint) -> bool {
        self.conn.total_changes() != p.changes
            || self.fx.updates.len() != p.pending_updates
            || self.conn.transaction_lost()
    }

    /// Undoes what a refused request did besides the database (which it
    /// did not change): rate-limit slots, wake-ups, revocations, and the
    /// auth cache if it dropped a bot since `p`.
    pub fn undo_to(&mut self, p: UndoPoint) {
        self.rate.rollback_to(p.rate);
        self.fx.woken.truncate(p.woken);
        self.fx.revoked.truncate(p.revoked);
        self.fx.rotated.truncate(p.rotated);
        if self.fx.bots_touched && !p.bots_touched {
            self.bot_cache.clear();
        }
    }

    /// Rolls the whole transaction back, and with it everything kept
    /// beside the database for it: rate-limit slots, pending effects and
    /// host-stream rows, and the auth cache (`all_cached`: every entry;
    /// else only when a bot row changed).
    pub fn roll_back(&mut self, all_cached: bool) {
        let _ = self.conn.rollback();
        self.rate.rollback_to(0);
        if all_cached || self.fx.bots_touched {
            self.bot_cache.clear();
        }
        self.fx = TxEffects::default();
    }
}

/// The one SQLite connection, shared by the service and its gateway
/// sessions.
pub(crate) struct Db {
    inner: Mutex<Inner>,
    /// A durable file database's WAL fsync, run without the lock (group
    /// commit); `None` when SQLite syncs in COMMIT or nothing is synced.
    pub wal: Option<WalSync>,
    /// The other connections (PostgreSQL), see [`HeldCommit`].
    pub pool: Arc<ConnPool>,
    /// Set when the pool holds connections: a commit may be held.
    pub pooled: bool,
}

impl Db {
    pub fn new(mut conn: Conn, others: Vec<Conn>, synchronous: crate::config::Synchronous) -> Db {
        let full = synchronous == crate::config::Synchronous::Full;
        let pool = Arc::new(ConnPool::default());
        let pooled = !others.is_empty();
        for c in others {
            pool.put(c);
        }
        Db {
            wal: WalSync::for_conn(&mut conn, full),
            pool,
            pooled,
            inner: Mutex::new(Inner {
                conn,
                bot_cache: auth::DigestMap::default(),
                rate: RateLimiter::default(),
                fx: TxEffects::default(),
                last_prune_ms: 0,
            }),
        }
    }

    /// Takes the lock. A panic that poisoned it may have left a transaction
    /// open: roll it back so nothing half-done survives.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut g = poisoned.into_inner();
                if !g.conn.transaction_lost() {
                    let _ = g.conn.rollback();
                }
                g.bot_cache.clear();
                g.fx = TxEffects::default();
                g
            }
        }
    }
}
