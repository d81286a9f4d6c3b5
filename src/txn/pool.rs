//! The service's other PostgreSQL connections, idle ([`ConnPool`]).

use crate::store::Conn;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The other PostgreSQL connections of a service, idle, for the next
/// transaction while one commits (see [`HeldCommit`]). Empty on SQLite.
#[derive(Default)]
pub(crate) struct ConnPool {
    free: Mutex<Vec<Conn>>,
    back: Condvar,
}

impl ConnPool {
    pub fn put(&self, conn: Conn) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
        self.back.notify_one();
    }

    /// An idle connection, waiting at most `wait` for a commit under way
    /// to give one back (a commit ends within its deadline); `None` when
    /// the pool has none.
    pub fn take(&self, wait: Duration) -> Option<Conn> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (mut free, _) =
            self.back.wait_timeout_while(free, wait, |f| f.is_empty()).unwrap_or_else(|e| e.into_inner());
        free.pop()
    }
}
