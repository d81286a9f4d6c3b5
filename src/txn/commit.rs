//! A PostgreSQL transaction held for its COMMIT ([`HeldCommit`]), awaited
//! without the database lock while the next group runs on another
//! connection of the pool.

use super::ConnPool;
use crate::events;
use crate::store::Conn;
use std::sync::Arc;

/// A PostgreSQL transaction whose statements all ran and whose COMMIT
/// (with the host-stream rows and the notification that go with it) is
/// sent and awaited without the database lock, in the service's settle
/// step, on the connection that ran it: meanwhile the next group runs on
/// another connection of the [`ConnPool`]. Its answers leave only after
/// [`HeldCommit::commit`] returned. Dropped without committing (a panic on
/// the way), it rolls back; either way the connection goes back to the
/// pool.
pub(crate) struct HeldCommit {
    conn: Option<Conn>,
    pool: Arc<ConnPool>,
    pub updates: events::PendingUpdates,
    pub notify: Option<String>,
}

impl HeldCommit {
    pub fn new(conn: Conn, pool: Arc<ConnPool>, updates: events::PendingUpdates, notify: Option<String>) -> Self {
        HeldCommit { conn: Some(conn), pool, updates, notify }
    }

    /// Sends COMMIT and waits for it (within `database_timeout_ms`, as
    /// every call); the connection returns to the pool.
    pub fn commit(mut self) -> crate::store::StoreResult<()> {
        let conn = self.conn.take().expect("a held commit owns its connection until it ends");
        let r = events::commit_with_updates(&conn, &mut self.updates, self.notify.as_deref());
        self.pool.put(conn);
        r
    }
}

impl Drop for HeldCommit {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.rollback();
            self.pool.put(conn);
        }
    }
}
