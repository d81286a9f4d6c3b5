//! When unanswered button presses expire. The library starts no timer:
//! the expiry rides on the webhook schedule's store turn, which every
//! host already drives (its timeout is [`Service::webhook_timeout`], its
//! store part [`Service::poll_webhook`]). The earliest deadline of the
//! presses still waiting is folded into that timeout; when it comes, the
//! store turn writes each due press's `callback_expired` with a
//! conditional UPDATE in one transaction, so an answer committed first,
//! here or on another node, wins, and a crash leaves either both the
//! outcome and its event or neither.

use super::parts::CallbackTimer;
use super::Service;
use crate::store;

use crate::methods::buttons::EXPIRE_BATCH;

/// With a store other nodes share, how often the earliest deadline is
/// read again (a press on another node sets only that node's timer; if
/// the node dies, this one expires it within this much).
pub const CALLBACK_REREAD_MS: u64 = 2_000;

impl CallbackTimer {
    /// When the store turn is next due for the presses: now when the store
    /// was never read (or, shared, not lately), else the earliest deadline.
    fn due(&self, shared: bool, now_ms: u64) -> Option<u64> {
        match self.read_at_ms {
            None => Some(now_ms),
            Some(at) if shared => {
                Some(self.next_ms.map_or(at + CALLBACK_REREAD_MS, |n| n.min(at + CALLBACK_REREAD_MS)))
            }
            Some(_) => self.next_ms,
        }
    }
}

impl Service {
    /// A commit made presses waiting until `deadline_ms` at the earliest.
    pub(super) fn note_callback_due(&self, deadline_ms: u64) {
        let mut t = self.delivery.callbacks.lock().unwrap_or_else(|e| e.into_inner());
        t.next_ms = Some(t.next_ms.map_or(deadline_ms, |n| n.min(deadline_ms)));
    }

    /// The store was read at `now_ms`: the earliest deadline of the presses
    /// waiting then (on opening the service).
    pub(super) fn note_callbacks_read(&self, next_ms: Option<u64>, now_ms: u64) {
        let mut t = self.delivery.callbacks.lock().unwrap_or_else(|e| e.into_inner());
        t.next_ms = next_ms;
        t.read_at_ms = Some(now_ms);
    }

    /// When the presses need the store turn ([`Service::webhook_timeout`]
    /// folds it in).
    pub(super) fn callback_due(&self) -> Option<u64> {
        self.delivery.callbacks.lock().unwrap_or_else(|e| e.into_inner()).due(self.shared_store, self.now_ms())
    }

    /// The store turn's part for the presses: expires what is due at
    /// `now_ms` and reads the next deadline. False when the store failed
    /// (the timer stays due: the next turn tries again).
    pub(super) fn expire_callbacks(&self, now_ms: u64) -> bool {
        if self.callback_due().is_none_or(|d| d > now_ms) {
            return true;
        }
        let inner = self.lock();
        let conn = &inner.conn;
        let mut pending = crate::events::PendingUpdates::default();
        let result = (|| -> Result<Option<u64>, store::StoreError> {
            loop {
                conn.begin()?;
                let due = crate::methods::buttons::expire_due(conn, now_ms, EXPIRE_BATCH, &mut pending)?;
                crate::events::commit_with_updates(conn, &mut pending, None)?;
                if (due as i64) < EXPIRE_BATCH {
                    return store::buttons::next_deadline(conn);
                }
            }
        })();
        match result {
            Ok(next) => {
                if let Some(wal) = &self.db.wal {
                    wal.note_commit();
                }
                drop(inner);
                let mut t = self.delivery.callbacks.lock().unwrap_or_else(|e| e.into_inner());
                // A press committed meanwhile may have brought it forward.
                t.next_ms = [next, t.next_ms.filter(|b| *b > now_ms)].into_iter().flatten().min();
                t.read_at_ms = Some(now_ms);
                true
            }
            Err(_) => {
                let _ = conn.rollback();
                false
            }
        }
    }
}
