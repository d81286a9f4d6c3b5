//! botspace: the bot interface of a messaging service, as an embeddable,
//! sans-IO library.
//!
//! One [`Service`] owns a SQLite database and answers whole HTTP/1.1
//! requests with whole responses ([`Service::handle_request`]); the bot
//! gateway is a per-connection object fed with socket bytes
//! ([`Service::accept_gateway`]). The library opens no socket, starts no
//! thread and never sleeps: the host does all I/O. (With a PostgreSQL
//! store, one call blocks by design: [`Service::wait_store_notifications`],
//! which a host runs on a thread of its own to hear other nodes' commits.)
//!
//! ```
//! use botspace::{Config, Service};
//! let svc = Service::open(Config { admin_secret: "an-admin-secret-0123".into(), ..Config::default() }).unwrap();
//! let resp = svc.handle_request(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n");
//! assert!(resp.starts_with(b"HTTP/1.1 401 "));
//! ```

mod auth;
pub mod clock;
pub mod config;
mod console;
pub mod error;
mod events;
pub mod gateway;
mod group;
pub mod http;
mod import;
mod methods;
mod model;
mod random;
mod ratelimit;
mod route;
mod service;
mod store;
mod throttle;
mod txn;

pub use clock::Clock;
pub use config::{ClockKind, Config, ConfigError, Limits, Rate, Synchronous, TierLimits};
pub use error::ApiError;
pub use gateway::{GatewayAccept, GatewayConnection, GatewayEvent, GatewayOutput, GatewaySession};
pub use group::CommitStats;
pub use http::{frame_request, Framing, RequestFramer};
pub use service::{CommitPause, OpenError, Service, WakeHook};
pub use store::StorageError;

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
