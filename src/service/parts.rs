//! `Service`'s fields grouped by job, the groups that its methods in
//! several files share. Types only: the methods are in the files of their
//! job (`service/effects.rs`, `long_poll.rs`, `webhooks.rs`, `ops.rs`).

use super::parked::Parking;
use crate::store;
use crate::webhook::deliveries::Deliveries;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

/// Called with a bot id after a commit that gave that bot new events, or
/// closed its gateway connections. It runs on the thread that ran the
/// commit (with group commit, the thread of one of the grouped requests,
/// not always the one whose request gave the event), after the answers are
/// out and the service's lock is released, and must not block. A hook that
/// panics is caught: the other bots of the commit are still woken.
pub type WakeHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Where a commit's events go besides the gateway's sessions.
pub(super) struct Delivery {
    /// The host's wake-up hook.
    pub(super) wake: RwLock<Option<WakeHook>>,
    /// Parked long polls (getUpdates with a timeout).
    pub(super) parked: Parking,
    /// This node's webhook deliveries (`service/webhooks.rs`).
    pub(super) webhooks: Mutex<Deliveries>,
    /// When unanswered presses expire (`service/callbacks.rs`).
    pub(super) callbacks: Mutex<CallbackTimer>,
}

impl Delivery {
    pub(super) fn new(max_parked_polls: usize) -> Delivery {
        Delivery {
            wake: RwLock::new(None),
            parked: Parking::new(max_parked_polls),
            webhooks: Mutex::default(),
            callbacks: Mutex::default(),
        }
    }
}

/// The expiry's timer (`service/callbacks.rs`): the earliest deadline
/// of the presses still waiting, as this node knows it.
#[derive(Debug, Default)]
pub(super) struct CallbackTimer {
    /// `None`: none waits (as far as known).
    pub(super) next_ms: Option<u64>,
    /// When the store was last read (`None`: not yet since opening).
    pub(super) read_at_ms: Option<u64>,
}

/// What the operator's endpoints (health, readiness, metrics) keep between
/// calls.
#[derive(Default)]
pub(super) struct Ops {
    /// The scrape's read-only connection (a SQLite file), opened at the
    /// first scrape.
    pub(super) metrics_reader: Mutex<Option<store::Conn>>,
    /// The backlog gauges' pass over the bots, carried across scrapes.
    pub(super) backlog_scan: Mutex<store::backlog::Scan>,
    /// Set by [`super::Service::begin_shutdown`]: `/readyz` answers 503.
    pub(super) shutting_down: AtomicBool,
    /// The host's own storage figures, for `getStorageStats`.
    pub(super) host_stats: RwLock<Option<HostStats>>,
}

/// The host's own storage figures (what its page storage was given, its
/// memory, its timers...), by name, for `POST /admin/getStorageStats`
/// (`host` in its result). Called with the request being answered, on
/// its thread; it must not call back into the service.
pub type HostStats = Arc<dyn Fn() -> Vec<(String, u64)> + Send + Sync>;
