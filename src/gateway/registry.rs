//! This node's gateway connections: how many each bot has open (the
//! connection limit), the epochs that tell a connection it must close, and
//! the counters that tell a session to read its log. All in memory: no
//! database lock is taken here.

use super::shared::{Recency, Shared};
use crate::error::ApiResult;
use crate::http::Request;
use crate::model::Bot;
use crate::protocol::CloseCode;
use crate::rules;
use crate::store::gateway::BotRow;
use crate::txn::Db;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The gateway's shared state: open connections per bot (the connection
/// limit) and the epochs that tell a connection it must close. It needs no
/// database lock.
#[derive(Default)]
pub(crate) struct Registry {
    state: Mutex<RegistryState>,
    /// On a shared store: what this node last read of its sessions' bots.
    shared: Shared,
    /// Sessions holding a slot now, for the metrics.
    pub(crate) sessions: AtomicU64,
    /// Sessions ended, by reason (index in `CloseCode::ALL`).
    pub(crate) closes: [AtomicU64; CloseCode::ALL.len()],
    /// Lease renewals written (shared store), each one statement for all
    /// of this node's sessions.
    pub(crate) lease_renewals: AtomicU64,
    /// The host's printer of operator lines (the service's, shared with
    /// the sessions).
    pub(crate) log: crate::log::Sink,
}

#[derive(Default)]
struct RegistryState {
    /// Open connections per bot.
    open: HashMap<String, u32>,
    /// Bumped when a bot's token rotates or it is suspended; connections
    /// opened under an older epoch close with 4004.
    epoch: HashMap<String, u64>,
    /// Bumped when the whole database is replaced: every connection closes.
    generation: u64,
    /// Bumped by each commit that gave the bot events: a session reads the
    /// log only when this moved, so polling an idle session costs no query.
    notified: HashMap<String, u64>,
    /// Bumped by each notification from another node naming the bot (shared
    /// store): its sessions then check the bot's row at once.
    hinted: HashMap<String, u64>,
}

/// What a session must see of the registry: the epoch it must still match
/// to stay open, the bot's commit counter and its hint counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct View {
    pub epoch: (u64, u64),
    pub notified: u64,
    pub hinted: u64,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, RegistryState> {
        // The state stays consistent at every step: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn view(&self, bot_id: &str) -> View {
        let st = self.lock();
        View {
            epoch: (st.generation, st.epoch.get(bot_id).copied().unwrap_or(0)),
            notified: st.notified.get(bot_id).copied().unwrap_or(0),
            hinted: st.hinted.get(bot_id).copied().unwrap_or(0),
        }
    }

    /// The bot's row on a shared store, as recent as `want` asks (see
    /// [`Shared::row`]).
    pub(super) fn shared_row(
        &self,
        db: &Db,
        bot_id: &str,
        now_ms: u64,
        interval_ms: u64,
        want: Recency,
    ) -> Option<Option<BotRow>> {
        self.shared.row(db, bot_id, || self.open_bots(), &self.lease_renewals, now_ms, interval_ms, want)
    }

    pub(super) fn add_lease(&self, session_id: &str, bot_id: &str, now_ms: u64) {
        self.shared.add_lease(session_id, bot_id, now_ms);
    }

    pub(super) fn remove_lease(&self, session_id: &str) {
        self.shared.remove_lease(session_id);
    }

    /// The bots with a connection open here.
    pub(super) fn open_bots(&self) -> Vec<String> {
        self.lock().open.keys().cloned().collect()
    }

    /// After a commit: `woken` bots have new events; `revoked` bots' sessions
    /// close (4004) at their next `poll_transmit`.
    pub fn after_commit(&self, woken: &[String], revoked: &[String]) {
        let mut st = self.lock();
        for bot in woken {
            // Only bots with a session need a counter.
            if let Some(n) = st.notified.get_mut(bot) {
                *n += 1;
            }
        }
        for bot in revoked {
            *st.epoch.entry(bot.clone()).or_insert(0) += 1;
        }
    }

    /// Another node committed something for `bots` (every bot, when
    /// `all`): the shared view is stale, and the sessions of those bots
    /// check the database at their next `poll_transmit`. Returns the bots
    /// named that have a session here, to wake their hosts.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn hint(&self, all: bool, bots: &[String]) -> Vec<String> {
        // The view first: a session that sees its counter move must find
        // the view stale.
        self.shared.hint();
        let mut st = self.lock();
        let here: Vec<String> = if all {
            st.hinted.keys().cloned().collect()
        } else {
            bots.iter().filter(|b| st.hinted.contains_key(*b)).cloned().collect()
        };
        for bot in &here {
            if let Some(n) = st.hinted.get_mut(bot) {
                *n += 1;
            }
        }
        here
    }

    /// Closes every connection (the database was replaced); returns the bots
    /// that had connections open, to wake their hosts.
    pub fn reset(&self) -> Vec<String> {
        let mut st = self.lock();
        st.generation += 1;
        st.open.keys().cloned().collect()
    }

    /// Counts a session that ended with `reason`.
    pub(super) fn note_close(&self, reason: CloseCode) {
        self.closes[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Sessions ended so far, by reason.
    pub(crate) fn close_counts(&self) -> Vec<(CloseCode, u64)> {
        CloseCode::ALL.iter().map(|c| (*c, self.closes[*c as usize].load(Ordering::Relaxed))).collect()
    }

    /// Open gateway connections of a bot.
    pub fn open_count(&self, bot_id: &str) -> u32 {
        self.lock().open.get(bot_id).copied().unwrap_or(0)
    }

    /// Admits a gateway connection of `bot` ([`rules::gateway::admit`],
    /// with the count under the lock) and takes one of its slots.
    pub(super) fn admit(self: &Arc<Self>, bot: &Bot, websocket: bool) -> ApiResult<Slot> {
        let mut st = self.lock();
        let open = st.open.get(&bot.id).copied().unwrap_or(0);
        rules::gateway::admit(bot, websocket, open)?;
        *st.open.entry(bot.id.clone()).or_insert(0) += 1;
        st.notified.entry(bot.id.clone()).or_insert(0);
        st.hinted.entry(bot.id.clone()).or_insert(0);
        self.sessions.fetch_add(1, Ordering::Relaxed);
        Ok(Slot { registry: self.clone(), bot_id: bot.id.clone() })
    }
}

/// A held connection slot; dropping it frees the slot.
pub(crate) struct Slot {
    registry: Arc<Registry>,
    bot_id: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.sessions.fetch_sub(1, Ordering::Relaxed);
        let mut st = self.registry.lock();
        if let Some(n) = st.open.get_mut(&self.bot_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.open.remove(&self.bot_id);
                st.notified.remove(&self.bot_id);
                st.hinted.remove(&self.bot_id);
            }
        }
    }
}

/// The checks before an upgrade ([`rules::gateway::admit`]) with the
/// bot's count now, for a gateway request that cannot be upgraded
/// (`handle_request`): it is answered with the first refusal, else 426.
pub(crate) fn check_upgrade(registry: &Registry, req: &Request<'_>, bot: &Bot) -> ApiResult<()> {
    rules::gateway::admit(bot, rules::gateway::is_websocket_upgrade(req), registry.open_count(&bot.id))
}
