//! The bot gateway (docs/gateway.md), in jobs:
//!
//! - `session`: the protocol as a pure state machine — frames, heartbeat,
//!   cursor, acks, close. It holds no storage handle and reads no clock:
//!   inputs and `now` go in, messages to send and `Effect`s
//!   (read the log, write an ack, check the bot's row, free a lease or a
//!   slot) come out.
//! - `driver`: [`GatewaySession`], the state machine with the one place
//!   that carries out its effects against the store (`crate::store::gateway`)
//!   and the registry, and feeds the results back.
//! - `connection`: [`GatewayConnection`], a session under tungstenite's
//!   `WebSocketContext` over in-memory buffers, for hosts that own a raw
//!   TCP socket: feed it what you read, write what `poll_transmit` returns.
//! - `outbox`: `Outbox` (crate-internal), a connection's output its socket has not taken,
//!   as whole frames, for a host that writes as the socket takes it (the
//!   close goes right after the frame being written).
//! - `link`: [`GatewayLink`], a connection with its outbox and its closing
//!   rules (close next, last writes, lingering close), for a host that
//!   only moves bytes.
//! - `registry`: this node's open connections per bot (the connection
//!   limit), the epochs that close them, the commit counters that wake them.
//! - `shared`: on a shared store (PostgreSQL), this node's view of its
//!   bots' rows and its leases, read and renewed once for all sessions.
//! - `accept`: the service's gateway entry points.
//!
//! The host owns the socket and the clock; what each call may block on is
//! in docs/architecture.md, "The I/O boundary".

// The state machine and its driver stay inside the crate: driving a
// session needs the store, which is the crate's own.
mod connection;
mod driver;
mod link;
mod outbox;
mod registry;
mod session;
mod shared;

pub use crate::protocol::CloseCode;
pub use connection::{GatewayConnection, OUTPUT_BUDGET, REPLY_BUDGET, TRANSMIT_BATCH_BYTES};
pub use driver::GatewaySession;
pub(crate) use driver::Opening;
pub use link::GatewayLink;
pub(crate) use outbox::Outbox;
pub(crate) use registry::{check_upgrade, Registry};

/// Close codes of the gateway. 4001: a frame the gateway cannot take (not
/// JSON, an unknown op, a bad ack, a binary frame).
pub const CLOSE_INVALID_PAYLOAD: CloseCode = CloseCode::InvalidPayload;
/// 4004: the token stopped being valid (rotated, the bot suspended, or the
/// database replaced by `import_database`).
pub const CLOSE_AUTHENTICATION_FAILED: CloseCode = CloseCode::AuthenticationFailed;
/// The bot read too slowly: its unsent output stayed at or over
/// [`OUTPUT_BUDGET`] for two heartbeat intervals. A [`GatewayConnection`]
/// whose host reports what it holds (`handle_unsent`) decides it itself;
/// a host may also send it ([`GatewayConnection::close`]).
pub const CLOSE_SLOW_CONSUMER: CloseCode = CloseCode::SlowConsumer;
/// 4009: no heartbeat from the bot for two intervals.
pub const CLOSE_SESSION_TIMEOUT: CloseCode = CloseCode::SessionTimeout;
/// On a shared store (PostgreSQL): this node has not reached the database
/// for [`STORAGE_CLOSE_AFTER_MS`]. The bot should reconnect, through the
/// load balancer to another node if this one stays cut off; it resumes
/// from its last recorded ack.
pub const CLOSE_STORAGE_UNAVAILABLE: CloseCode = CloseCode::StorageUnavailable;
/// How long a session's checks of the database may fail in a row before it
/// closes with 4010: half a lease, so the session ends before its lease
/// (which it can no longer renew) lapses and other nodes stop counting it.
/// A short failover (a second or two) closes nothing.
pub const STORAGE_CLOSE_AFTER_MS: u64 = LEASE_TTL_MS / 2;

/// How long a gateway lease counts after its last renewal: a node that dies
/// stops counting against its bots' connection limits within this time.
pub const LEASE_TTL_MS: u64 = 10_000;

/// Largest message a bot may send; its frames are small JSON.
pub const MAX_INBOUND_MESSAGE: usize = 64 * 1024;
/// Events read from the log per read, bounding memory per connection.
pub const EVENTS_PER_POLL: usize = 1024;
/// Bytes of frames one read of the log may hold (one event may go past
/// it): with large events, the byte bound comes first.
pub const READ_BYTES: usize = 256 * 1024;

/// Sent by hosts, not by the library: the server is shutting down; the bot
/// reconnects (to another node) and resumes from its ack.
pub const CLOSE_SERVER_SHUTDOWN: CloseCode = CloseCode::ServerShutdown;

/// The close codes a host may end a connection with
/// ([`GatewayConnection::close`], [`GatewaySession::close`]). The library's own codes (4001,
/// 4004, 4009, 4010, 1007, 1009) stay the library's: a host that sent them
/// would make them mean something the session did not decide.
pub const HOST_CLOSE_CODES: [CloseCode; 2] = [CLOSE_SERVER_SHUTDOWN, CLOSE_SLOW_CONSUMER];

/// The reason a host close code is reported with; `None` for a code a host
/// may not send (see [`HOST_CLOSE_CODES`]).
pub fn host_close_reason(code: u16) -> Option<CloseCode> {
    HOST_CLOSE_CODES.into_iter().find(|c| c.code() == Some(code))
}

/// What a host that cannot serve a session any more (its storage failed
/// to make a commit durable, or the library failed inside a call) closes
/// the bot's socket with: 1001 `server_shutdown`, a host's own close, so
/// the bot reconnects and resumes from its ack. Never 1011: it is none of
/// the gateway's close words.
pub const CLOSE_HOST_FAILURE: CloseCode = CLOSE_SERVER_SHUTDOWN;

/// What a host whose WebSocket stack does not check close codes answers a
/// bot's close with when the bot's code is not one to echo: 1000, a
/// normal closure.
pub const CLOSE_NORMAL: u16 = 1000;

/// Whether a close code a bot's WebSocket reported is one an endpoint may
/// send (RFC 6455, section 7.4: 1000–1003, 1007–1014, 3000–4999), for a
/// host whose WebSocket stack hands over whatever came (a runtime's
/// `CloseEvent`): `Some(code)` to pass to the session's `handle_close` and
/// echo, `None` for the codes a runtime makes up (1005 none sent, 1006
/// abnormal, 1015 TLS) and anything else.
pub fn peer_close_code(code: u32) -> Option<u16> {
    match code {
        1000..=1003 | 1007..=1014 | 3000..=4999 => Some(code as u16),
        _ => None,
    }
}

/// The code a host echoes a bot's close with: the bot's own when it may be
/// sent ([`peer_close_code`]), else [`CLOSE_NORMAL`].
pub fn echo_close_code(code: u32) -> u16 {
    peer_close_code(code).unwrap_or(CLOSE_NORMAL)
}

/// What a session reports to its host, besides what to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayEvent {
    /// The session ended; it reports this once. `code` is the close code
    /// sent to the bot (4001, 4004, 4009, 4010, 1007, 1009, or the host's
    /// own through `close`), or the bot's own when it closed first
    /// (`reason` "closed_by_bot"; 1005 when it sent none), or 1002
    /// "protocol_error" when its bytes broke the WebSocket protocol.
    Closed { code: u16, reason: CloseCode },
}

/// Something the session wants sent to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayOutput {
    /// One JSON text message.
    Text(String),
    /// Close with this code and reason; nothing follows.
    Close { code: u16, reason: CloseCode },
}

/// Result of [`crate::Service::accept_gateway`].
pub struct GatewayAccept {
    /// Bytes to write: `101 Switching Protocols` or a JSON error response.
    pub response: Vec<u8>,
    /// The connection, when the upgrade succeeded.
    pub connection: Option<GatewayConnection>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn connections_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<super::GatewayConnection>();
        is_send::<super::GatewaySession>();
    }

    #[test]
    fn a_peers_close_code_is_echoed_only_when_an_endpoint_may_send_it() {
        use super::{echo_close_code, peer_close_code, CLOSE_HOST_FAILURE};
        for ok in [1000, 1001, 1003, 1007, 1011, 1014, 3000, 4008, 4999] {
            assert_eq!(peer_close_code(ok), Some(ok as u16), "{ok}");
            assert_eq!(echo_close_code(ok), ok as u16);
        }
        for bad in [0, 999, 1004, 1005, 1006, 1015, 2999, 5000, 65_535, 65_536 + 1000, u32::MAX] {
            assert_eq!(peer_close_code(bad), None, "{bad}");
            assert_eq!(echo_close_code(bad), 1000, "{bad}");
        }
        assert_eq!((CLOSE_HOST_FAILURE.as_str(), CLOSE_HOST_FAILURE.code()), ("server_shutdown", Some(1001)));
        assert!(super::HOST_CLOSE_CODES.contains(&CLOSE_HOST_FAILURE), "a host's own close");
    }
}
