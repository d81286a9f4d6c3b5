//! After a commit: effects taken under the lock, durability before the
//! answers leave, wake-ups after.

use super::{parked, Service};
use crate::error::ApiError;
use crate::txn::{Inner, TxEffects};

impl Service {
    /// Takes what the last commit changed. Called with the database lock
    /// held, so revocations take effect before any later request can open
    /// a gateway connection: one opened with a new token is never closed for
    /// the rotation that issued it.
    pub(crate) fn take_effects(&self, inner: &mut Inner) -> TxEffects {
        let mut fx = std::mem::take(&mut inner.fx);
        fx.seen = self.seen();
        // A held commit's wake-ups wait for its COMMIT (see `settle`): a
        // session must not look for events that are not there yet.
        if fx.held.is_none() && (!fx.woken.is_empty() || !fx.revoked.is_empty()) {
            self.gateway.after_commit(&fx.woken, &fx.revoked);
        }
        if fx.scrubbed {
            // Deleted text must leave the WAL's older page images too.
            inner.conn.checkpoint_truncate();
        }
        fx
    }

    /// What a holder of the database lock can see has committed (see
    /// [`crate::store::wal`]); 0 when commits sync themselves.
    pub(super) fn seen(&self) -> u64 {
        self.db.wal.as_ref().map_or(0, |w| w.seen())
    }

    /// With a deferred WAL sync, the transaction about to start commits
    /// without an fsync (`on`), and every other write afterwards with one
    /// (see [`crate::store::Conn::defer_commit_sync`]).
    pub(super) fn defer_sync(&self, inner: &Inner, on: bool) {
        if self.db.wal.is_some() {
            inner.conn.defer_commit_sync(on);
        }
    }

    /// Before answers leave: waits until every commit they may have seen
    /// is durable. A held PostgreSQL commit is sent and awaited here, out
    /// of the lock (see [`crate::txn::HeldCommit`]); if it fails, each
    /// success becomes that failure (503 `commit_outcome_unknown` once
    /// COMMIT was sent) and nobody is woken. If the WAL fsync fails, what
    /// was written may not survive a crash: each success becomes 503
    /// `commit_outcome_unknown`.
    pub(crate) fn settle(&self, fx: &mut TxEffects, outs: &mut [Vec<u8>]) {
        if let Some(held) = fx.held.take() {
            let started = crate::metrics::Timer::start();
            let committed = held.commit();
            if let Some(us) = started.micros() {
                self.metrics.commit_latency.observe(us);
            }
            match committed {
                Ok(()) => {
                    if !fx.woken.is_empty() {
                        self.gateway.after_commit(&fx.woken, &[]);
                    }
                }
                Err(e) => {
                    let e = ApiError::from(e);
                    for out in outs.iter_mut().filter(|o| o.starts_with(b"HTTP/1.1 2")) {
                        *out = e.clone().into_response();
                    }
                    fx.woken.clear();
                }
            }
        }
        let Some(wal) = &self.db.wal else { return };
        if let Err(e) = wal.sync_to(fx.seen) {
            for out in outs.iter_mut().filter(|o| o.starts_with(b"HTTP/1.1 2")) {
                *out = ApiError::commit_outcome_unknown(&e).into_response();
            }
        }
    }

    /// Calls the wake hook for what a commit changed; without the lock.
    /// Then, with the answers out, runs a checkpoint if one is due.
    pub(crate) fn apply_effects(&self, mut fx: TxEffects) {
        for bot_id in fx.rotated.drain(..) {
            // Which bot, never the token.
            self.gateway.log.emit(
                crate::log::Event::new(crate::log::Level::Info, "bot_token_rotated", "bot token rotated")
                    .with("bot_id", bot_id),
            );
        }
        // Before the wake-up: a host that looks at its timeout then sees
        // the press's deadline.
        if let Some(due) = fx.callback_due.take() {
            self.note_callback_due(due);
        }
        self.wake_bots(&mut fx);
        if let Some(wal) = &self.db.wal {
            wal.checkpoint_if_due();
        }
    }

    pub(super) fn wake_bots(&self, fx: &mut TxEffects) {
        if fx.woken.is_empty() && fx.revoked.is_empty() {
            return;
        }
        // Parked polls are marked due before the host hears of the bots:
        // its `poll_parked` after the hook finds them.
        self.delivery.parked.wake(&fx.woken, parked::Ready::Woken);
        self.delivery.parked.wake(&fx.revoked, parked::Ready::Revoked);
        if !fx.woken.is_empty() || !fx.webhooks_changed.is_empty() {
            let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
            d.note(&fx.woken, &fx.webhooks_changed);
        }
        fx.woken.append(&mut fx.revoked);
        fx.woken.sort_unstable();
        fx.woken.dedup();
        let hook = self.delivery.wake.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(hook) = hook {
            for bot in &fx.woken {
                // The commit is done and answered: a panicking hook must not
                // turn it into an error, nor skip the other bots.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(bot)));
            }
        }
    }
}
