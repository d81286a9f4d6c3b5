//! botspace: the bot interface of a messaging service, as an embeddable
//! library that leaves the client sockets to its host.
//!
//! ```text
//!   host (C server, Rust server, edge worker, browser): sockets, clock, threads
//!      │ bytes / parsed requests                    ▲ bytes, frames, I/O asks
//!      ▼                                            │
//!   Service::handle ── route ── auth ── rules ── store (SQLite / PostgreSQL)
//!      │                                            │ group commit, fsync
//!      └── state machines: HttpConnection, GatewayConnection, webhook Schedule
//! ```
//!
//! One [`Service`] owns a database (SQLite, or PostgreSQL with the feature
//! `postgres`) and answers requests: [`Service::handle`] takes a slice of
//! them ([`Incoming`]) and gives one [`Handled`] each, and
//! [`Service::handle_request`] is its bytes-in, bytes-out form for one. The
//! bot gateway is a per-connection object fed with socket bytes
//! ([`Service::accept_gateway`]). The host owns the client sockets, the
//! clock and every thread: the library starts none. What only a host that
//! owns sockets and threads needs (a batch queue's threads, admission,
//! options, operator output) is the `botspace-runtime` crate's. But the
//! library owns the database, so its synchronous calls may wait for it:
//!
//! | entry point | may block on |
//! |---|---|
//! | [`Service::open`] | disk (create, migrate, fsync); PostgreSQL connect, TLS, migrations |
//! | [`Service::handle`], [`Service::handle_request`] | the group commit (a parked thread while another thread's group commits), the database lock, the WAL fsync before the answer leaves; PostgreSQL round trips |
//! | [`Service::poll_parked`] | the database lock, a read of the log and the WAL sync before the answers leave |
//! | [`Service::accept_gateway`] | the database lock and a read of the bot's log; a PostgreSQL lease |
//! | [`GatewayConnection::handle_input`], `handle_timeout` | an ack write (commit, fsync) when the input ends the session; PostgreSQL lease renewal and row checks |
//! | [`GatewayConnection::poll_transmit`] | the ack write (commit, fsync), the event-log read and the WAL fsync before frames leave; PostgreSQL round trips |
//! | dropping a [`GatewaySession`] / [`GatewayConnection`] | the pending ack's commit; the PostgreSQL lease release |
//! | [`Service::export_database`], [`Service::import_database`] | the database lock, disk reads or writes and fsync |
//! | [`Service::wait_store_notifications`] | PostgreSQL: up to its timeout, by design (run it on a thread of its own) |
//! | [`frame_request`], [`RequestFramer`], [`parse_http_request`], [`http_request_from_parts`], `poll_timeout`, `poll_event` | nothing (CPU only) |
//!
//! An async host calls the blocking ones from `spawn_blocking` (or a thread
//! of its own), never on an executor thread. In WebAssembly the database is
//! in memory and nothing waits for a disk or a network. The whole table,
//! with what each wait is for: `docs/architecture.md`, "The I/O boundary".
//!
//! ```
//! use botspace::{Config, Service};
//! let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
//! let resp = svc.handle_request(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n");
//! assert!(resp.starts_with(b"HTTP/1.1 401 "));
//! ```

mod auth;
pub mod clock;
pub mod config;
pub mod connection;
mod console;
mod entry;
pub mod error;
mod events;
mod forwarded;
pub mod gateway;
mod group;
mod hex;
mod histogram;
mod http;
pub mod log;
mod methods;
mod metrics;
mod model;
mod protocol;
mod random;
mod ratelimit;
mod route;
mod rules;
mod service;
mod store;
mod throttle;
mod txn;
pub mod webhook;

pub use clock::Clock;
pub use config::{ClockKind, Config, ConfigError, Limits, Rate, Synchronous, TierLimits};
pub use entry::Incoming;
#[cfg(feature = "typed")]
pub use entry::{http_response_bytes, into_http_response};
pub use error::{ApiError, StorageError};
pub use gateway::{GatewayAccept, GatewayConnection, GatewayEvent, GatewayOutput, GatewaySession};
pub use group::CommitStats;
pub use http::reason as reason_phrase;
pub use http::{
    frame_request, should_read, Framing, RequestFramer, RequestHead, MAX_HEAD_BYTES, MAX_UNSENT_BYTES_PER_CONNECTION,
};
#[cfg(feature = "typed")]
pub use http::{http_request_from_parts, parse_http_request};
pub use protocol::{
    BlockedBy, BotStatus, ChatAction, ChatKind, CloseCode, ErrorCode, EventKind, GapMarker, GatewayOp, ParseMode,
    RateLimitScope, Tier, UnknownWord,
};
pub use service::webhook_pump::{Pump as WebhookPump, DEFAULT_CONNECTION_CAP as WEBHOOK_CONNECTION_CAP};
#[cfg(feature = "typed")]
pub use service::BodyRefusal;
#[cfg(feature = "test-hooks")]
pub use service::CommitPause;
pub use service::{
    Handled, HostStats, HttpRound, OpenError, PollId, RoundConnection, RoundConnections, RoundStep, Service, WakeHook,
    WebhookPoll, BYTES_PER_PARKED_POLL, DEFAULT_MAX_PARKED_POLLS, MAX_PARKED_POLLS_PER_BOT,
};

/// The library version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn service_is_send_and_sync() {
        assert_send_sync::<crate::Service>();
    }
}

/// The word tables against the modules that use them: here at the root,
/// so that `protocol` itself depends on no module (tests/module_graph.rs).
#[cfg(test)]
mod protocol_in_use {
    use crate::{ErrorCode, EventKind};

    #[test]
    fn error_codes_carry_their_status_and_match_the_catalog() {
        let catalog: Vec<(ErrorCode, u16)> = crate::error::catalog().iter().map(|e| (e.code(), e.status())).collect();
        let table: Vec<(ErrorCode, u16)> = ErrorCode::ALL.iter().map(|c| (*c, c.status())).collect();
        assert_eq!(catalog, table, "the catalog and the ErrorCode table list the same codes in the same order");
        assert_eq!(ErrorCode::try_from(411), Ok(ErrorCode::LengthRequired));
        assert_eq!(ErrorCode::try_from(400), Err(crate::UnknownWord));
    }

    #[test]
    fn the_logged_kinds_are_the_ones_imports_accept() {
        let listed: Vec<String> =
            EventKind::ALL.iter().filter(|k| k.is_logged()).map(|k| format!("'{}'", k.as_str())).collect();
        assert_eq!(crate::store::events::KNOWN_TYPES_SQL, listed.join(", "));
    }
}
