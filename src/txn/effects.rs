//! What a transaction did that matters only once it commits: bots to
//! wake or close, webhooks to reload, updates to hand over.

use super::HeldCommit;
use crate::events;

/// Effects of the current transaction, applied only after it commits.
#[derive(Default)]
pub(crate) struct TxEffects {
    /// Bots that got events.
    pub woken: Vec<String>,
    /// Bots whose gateway connections must close with 4004.
    pub revoked: Vec<String>,
    /// Bots whose webhook was set or deleted.
    pub webhooks_changed: Vec<String>,
    /// Bots whose token was rotated: a log line each once committed.
    pub rotated: Vec<String>,
    /// A bot row changed: the auth cache must be dropped if this rolls back.
    pub bots_touched: bool,
    /// Message text was deleted: once committed, the WAL is checkpointed
    /// and truncated so the old text leaves the files too.
    pub scrubbed: bool,
    /// What the transaction read ahead and holds: message counters, rate
    /// buckets, idempotency keys (database server only; dropped when a
    /// transaction begins, see [`super::Inner::begin`]).
    pub ahead: crate::store::group::Ahead,
    /// Host-stream rows waiting for the commit (database server only).
    pub updates: events::PendingUpdates,
    /// The commits the answers may have seen ([`crate::store::wal`]): they
    /// must be durable before the answers leave.
    pub seen: u64,
    /// A transaction whose COMMIT is still to be sent and awaited, after
    /// the database lock is released (PostgreSQL, see [`HeldCommit`]).
    pub held: Option<HeldCommit>,
    /// A getUpdates that found nothing and may wait: its bot and request
    /// (see `Service::handle`; the bytes entry points ignore it).
    pub park: Option<(String, events::Poll)>,
    /// The earliest deadline of the callback queries this transaction
    /// made: once committed, the expiry's timer is brought forward to it.
    pub callback_due: Option<u64>,
}
