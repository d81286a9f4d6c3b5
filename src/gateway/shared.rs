//! On a shared store (PostgreSQL, several nodes): what this node last read
//! of its sessions' bots, and its connection leases. One read of the
//! shared store for every bot with a session on this node per poll
//! interval, and one lease renewal for all of them: the cost of watching
//! other nodes does not grow with the number of sessions.

use super::LEASE_TTL_MS;
use crate::store::gateway::{self as store, BotRow};
use crate::txn::Db;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How recent the shared view of the bot's row must be for a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recency {
    /// The poll: read if older than the interval or than the last hint.
    Interval,
    /// After a hint: read unless a read began after it (whatever the
    /// clock says; sessions' clocks differ by when they last ran).
    Hint,
    /// Read now.
    Now,
}

/// The registry's view of the shared store (its field `shared`): the
/// registry calls it, it knows nothing of the registry.
#[derive(Default)]
pub(crate) struct Shared(Mutex<SharedView>);

#[derive(Default)]
struct SharedView {
    /// When the rows were read (the hosts' `now`).
    taken_ms: Option<u64>,
    bots: HashMap<String, BotRow>,
    /// This node's leased sessions: session id → bot id.
    sessions: HashMap<String, String>,
    renewed_ms: u64,
    /// Bumped by each notification from another node; `bots` is as recent
    /// as the `hint_gen` its read started under (`read_gen`). A read that
    /// began before a notification does not count as after it.
    hint_gen: u64,
    read_gen: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SharedView> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Another node committed something: rows read before now are stale.
    pub(super) fn hint(&self) {
        self.lock().hint_gen += 1;
    }

    /// The bot's row as of at most `interval_ms` ago (read now when older,
    /// when the bot is not in it yet, or when `want` says so), renewing
    /// this node's leases when due. `None` on storage trouble; `Some(None)`
    /// when the bot is gone. A read takes the rows of every bot in
    /// `open_bots` (those with a connection here) at once; `renewals`
    /// counts the lease renewals written.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn row(
        &self,
        db: &Db,
        bot_id: &str,
        open_bots: impl FnOnce() -> Vec<String>,
        renewals: &AtomicU64,
        now_ms: u64,
        interval_ms: u64,
        want: Recency,
    ) -> Option<Option<BotRow>> {
        // The view's lock is never held with the database's: a session
        // opens (and registers its lease) with the database lock held.
        let (renew, gen) = {
            let view = self.lock();
            let hinted = view.read_gen < view.hint_gen;
            let stale = match want {
                Recency::Interval => hinted || view.taken_ms.is_none_or(|t| now_ms >= t + interval_ms || now_ms < t),
                Recency::Hint => hinted || view.taken_ms.is_none(),
                Recency::Now => true,
            };
            if !stale {
                if let Some(row) = view.bots.get(bot_id) {
                    return Some(Some(row.clone()));
                }
            }
            let due = now_ms >= view.renewed_ms + LEASE_TTL_MS / 2 && !view.sessions.is_empty();
            let renew = due
                .then(|| view.sessions.iter().map(|(s, b)| (s.clone(), b.clone())).collect::<Vec<(String, String)>>());
            (renew, view.hint_gen)
        };
        let mut ids = open_bots();
        if !ids.iter().any(|b| b == bot_id) {
            ids.push(bot_id.to_string());
        }
        let inner = db.lock();
        let read = store::bot_rows(&inner.conn, &ids);
        // One statement renews every lease of this node; a lease that
        // lapsed (the node stalled) is taken again, since its connection is
        // open and counts.
        let renewed = renew.map(|pairs| {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(s, b)| (s.as_str(), b.as_str())).collect();
            store::renew_leases(&inner.conn, &pairs, now_ms + LEASE_TTL_MS).is_ok()
        });
        drop(inner);
        let mut view = self.lock();
        if renewed == Some(true) {
            renewals.fetch_add(1, Ordering::Relaxed);
            view.renewed_ms = now_ms;
        }
        let bots = read.ok()?;
        let row = bots.get(bot_id).cloned();
        view.bots = bots;
        view.taken_ms = Some(now_ms);
        view.read_gen = view.read_gen.max(gen);
        Some(row)
    }

    pub(super) fn add_lease(&self, session_id: &str, bot_id: &str, now_ms: u64) {
        let mut view = self.lock();
        if view.sessions.is_empty() {
            view.renewed_ms = now_ms;
        }
        view.sessions.insert(session_id.to_string(), bot_id.to_string());
    }

    pub(super) fn remove_lease(&self, session_id: &str) {
        self.lock().sessions.remove(session_id);
    }
}
