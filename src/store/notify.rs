//! Hearing other nodes' commits: on a shared store with `listen_notify`,
//! a connection of its own waits for the notifications every node's
//! commits send (PostgreSQL's LISTEN/NOTIFY). A store that no other node
//! writes has none: [`Notifications::open`] gives `None`.

use super::{Conn, StoreResult};
use std::sync::atomic::AtomicI32;
use std::sync::Arc;
use std::time::Duration;

/// What a wait for notifications heard.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Heard {
    /// Notifications from other connections (this node's own are skipped).
    pub count: usize,
    /// Everything may have changed: an empty payload, or a (re)connection
    /// (what was sent while nobody listened is lost).
    pub all: bool,
    /// The bots named, sorted, without duplicates.
    pub bots: Vec<String>,
    /// For each notification that carried its sender's clock (`t` and
    /// microseconds, last in the list): microseconds from then to now.
    pub lags_us: Vec<u64>,
}

impl Heard {
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn take(&mut self, payload: &str, now_us: u64) {
        self.count += 1;
        if payload.is_empty() {
            self.all = true;
            return;
        }
        for item in payload.split(',').filter(|b| !b.is_empty()) {
            // Bot ids start with `bot_`: `t` and digits is the clock.
            match item.strip_prefix('t').filter(|d| d.bytes().all(|b| b.is_ascii_digit())).map(str::parse::<u64>) {
                Some(Ok(sent_us)) => self.lags_us.push(now_us.saturating_sub(sent_us)),
                _ => self.bots.push(item.to_string()),
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    /// A payload's bots, and its sender's clock as a lag; an older
    /// sender's payload (no clock) and "re-read everything" as before.
    #[test]
    fn notification_payloads_give_bots_and_the_lag() {
        let mut h = super::Heard::default();
        h.take("bot_a,bot_t1,t1000", 1_250);
        h.take("bot_b", 2_000);
        h.take("bot_c,t5000", 4_000);
        assert_eq!((h.count, h.all), (3, false));
        assert_eq!(h.bots, ["bot_a", "bot_t1", "bot_b", "bot_c"]);
        assert_eq!(h.lags_us, [250, 0]);
        h.take("", 0);
        assert!(h.all);
    }
}
