//! Hearing other nodes' commits: on a shared store with `listen_notify`,
//! a connection of its own waits for the notifications every node's
//! commits send (PostgreSQL's LISTEN/NOTIFY). A store that no other node
//! writes has none: [`Notifications::open`] gives `None`.

pub use super::heard::Heard;
use super::{Conn, StoreResult};
use std::sync::atomic::AtomicI32;
use std::sync::Arc;
use std::time::Duration;

/// The listening side of a shared store's notifications, with the server
/// processes of the service's own connections: their notifications are
/// this node's own commits, already applied.
pub struct Notifications {
    #[cfg(feature = "postgres")]
    listener: std::sync::Mutex<super::postgres::Listener>,
    own_pids: Vec<Arc<AtomicI32>>,
}

impl Notifications {
    /// The listener of a service whose connections are `conns`, when the
    /// store is shared and `config.listen_notify` is on; else `None`.
    pub fn open(config: &crate::config::Config, conns: &[&Conn]) -> Option<Notifications> {
        if !config.listen_notify {
            return None;
        }
        let own_pids: Vec<Arc<AtomicI32>> = conns.iter().filter_map(|c| c.backend_pid()).collect();
        match conns.first() {
            #[cfg(feature = "postgres")]
            Some(Conn::Postgres(pg)) => {
                Some(Notifications { listener: std::sync::Mutex::new(super::postgres::Listener::new(pg)), own_pids })
            }
            _ => {
                let _ = own_pids;
                None
            }
        }
    }

    /// Blocks at most `timeout` (plus one deadline, for the liveness check)
    /// for notifications from other nodes (see
    /// `Service::wait_store_notifications`).
    /// Calls from several threads take turns.
    pub fn wait(&self, timeout: Duration) -> StoreResult<Heard> {
        let own: Vec<i32> = self.own_pids.iter().map(|p| p.load(std::sync::atomic::Ordering::Relaxed)).collect();
        #[cfg(feature = "postgres")]
        {
            let mut listener = self.listener.lock().unwrap_or_else(|e| e.into_inner());
            listener.wait(timeout, &own)
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = (timeout, own);
            Ok(Heard::default())
        }
    }
}
