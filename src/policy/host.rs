//! The numbers of a server's connection handling, the same in every host
//! that owns sockets (the Rust example server, the C server): defaults of
//! the options, and the bounds hostile or slow clients meet
//! (docs/reliability.md).

/// Default `--request-timeout`: a request's head and body arrive within
/// this long of its first byte, else 408 ([`super::request_timeout`]).
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Default `--idle-timeout`: a keep-alive connection with nothing to read
/// for this long is closed.
pub const IDLE_TIMEOUT_MS: u64 = 120_000;
/// A peer that takes none of the bytes sent to it for this long is
/// dropped.
pub const WRITE_TIMEOUT_MS: u64 = 30_000;
/// A lingering close (after an answer that ends a connection whose client
/// may still be sending) discards input for at most this long ...
pub const LINGER_MS: u64 = 2_000;
/// ... or this many bytes.
pub const LINGER_BYTES: usize = 4 << 20;
/// A stop waits this long for connections to finish.
pub const DRAIN_MS: u64 = 5_000;
/// A gateway connection closed with 4008 `slow_consumer` gets this long
/// for its close frame before the socket is dropped, sent or not.
pub const SLOW_CONSUMER_DROP_MS: u64 = 1_000;
/// Most requests answered in one commit by a host that batches across
/// connections.
pub const MAX_BATCH: usize = 64;
/// Most requests in one commit by a host whose core thread takes every
/// request queued by any connection at once (at most one per connection
/// is in flight): past it, the take commits in several transactions.
pub const MAX_QUEUED_BATCH: usize = 256;
/// A batch thread starts a batch while another batch is under way only
/// once this many requests wait: fewer are left for the running batch's
/// thread to take whole when it is done (see [`starts_batch`]).
pub const OVERLAP_MIN_QUEUED: usize = 16;
/// A connection refused for `--max-connections` (the busy 503) stops
/// sending and discards what the client still sends for at most this
/// long, so that a client that was writing its request reads the 503
/// rather than a reset ...
pub const REFUSAL_LINGER_MS: u64 = 500;
/// ... or until it has discarded this many bytes ...
pub const REFUSAL_LINGER_BYTES: usize = 64 * 1024;
/// ... and at most this many refusals linger at once: past it they close
/// at once, so a flood of connections costs one accept each
/// ([`refusal_may_linger`]).
pub const MAX_LINGERING_REFUSALS: usize = 256;
/// After an accept error (out of descriptors and the like) the listener
/// rests this long instead of spinning.
pub const ACCEPT_BACKOFF_MS: u64 = 50;
/// The longest a host's loop sleeps: how late it notices a stop or a move
/// of the manual clock.
pub const TICK_MS: u64 = 250;
/// The longest a gateway connection under the system clock waits before
/// it looks at its session again, whatever its next deadline says.
pub const GATEWAY_LOOK_MS: u64 = 1_000;
/// The longest wait for other nodes' commits (PostgreSQL notifications):
/// how late the waiting thread notices a stop.
pub const NOTIFY_WAIT_MS: u64 = 250;
/// After the notification listener broke, it is opened again this much
/// later (the sessions' own polls deliver meanwhile) ...
pub const NOTIFY_RETRY_MS: u64 = 1_000;
/// ... and the failure is logged at most this often.
pub const NOTIFY_ERROR_REPORT_MS: u64 = 10_000;
/// Accept errors (out of descriptors and the like) are logged at most
/// this often, with how many there were.
pub const ACCEPT_ERROR_REPORT_MS: u64 = 1_000;
/// Descriptors kept for the server itself (standard streams, listeners,
/// the spare, SQLite's file, WAL, shared memory and checkpoint
/// connection, PostgreSQL connections, the runtime's own).
pub const RESERVED_FDS: u64 = 64;
/// The most connections a default `--max-connections` ever gives.
pub const MAX_CONNECTIONS_CAP: u64 = 1 << 20;

/// The default `--max-connections` under a file limit of `file_limit`
/// descriptors: one per connection after the server's own, at least one.
pub fn default_max_connections(file_limit: u64) -> usize {
    let cap = if file_limit > 2 * RESERVED_FDS { file_limit - RESERVED_FDS } else { file_limit / 2 };
    cap.clamp(1, MAX_CONNECTIONS_CAP) as usize
}

/// Whether one more busy refusal may linger
/// ([`super::connection::HttpConnection::refusing_busy`]) while
/// `lingering` of the host's refusals linger already: below
/// [`MAX_LINGERING_REFUSALS`]. When not, the host sends the 503
/// ([`super::server_busy`]) best effort, never blocking, and closes at
/// once: a flood of refused connections then costs one accept each, and
/// the host's descriptors stay with the connections it serves.
pub fn refusal_may_linger(lingering: usize) -> bool {
    lingering < MAX_LINGERING_REFUSALS
}

/// Whether an idle batch thread takes the `queued` requests now, while
/// `running` batches are under way on the others. Alone, always. Beside
/// another batch only with at least [`OVERLAP_MIN_QUEUED`] waiting: a
/// second batch overlaps the first one's COMMIT, which pays when groups
/// are large, but splitting a small group costs every request more of a
/// transaction's fixed price than the overlap saves (docs/decisions.md,
/// "Batch threads").
pub fn starts_batch(running: usize, queued: usize) -> bool {
    queued > 0 && (running == 0 || queued >= OVERLAP_MIN_QUEUED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_connection_cap_leaves_the_servers_own_descriptors() {
        assert_eq!(default_max_connections(1024), 960);
        assert_eq!(default_max_connections(129), 65);
        assert_eq!(default_max_connections(128), 64, "half of a small limit");
        assert_eq!(default_max_connections(1), 1, "never zero");
        assert_eq!(default_max_connections(0), 1);
        assert_eq!(default_max_connections(u64::MAX), 1 << 20, "an unlimited limit is capped");
    }

    #[test]
    fn at_most_256_busy_refusals_linger_at_once() {
        assert!(refusal_may_linger(0));
        assert!(refusal_may_linger(255));
        assert!(!refusal_may_linger(256), "the 257th closes at once");
        assert!(!refusal_may_linger(usize::MAX));
    }

    #[test]
    fn a_second_batch_starts_beside_another_only_for_a_large_group() {
        assert!(!starts_batch(0, 0), "nothing queued");
        assert!(starts_batch(0, 1), "alone, any group");
        assert!(!starts_batch(1, 1));
        assert!(!starts_batch(1, OVERLAP_MIN_QUEUED - 1));
        assert!(starts_batch(1, OVERLAP_MIN_QUEUED));
        assert!(starts_batch(2, 100));
    }
}
