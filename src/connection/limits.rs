//! The numbers of the connection state machines (the HTTP connection,
//! the gateway link), the same for every host that drives them: the
//! deadlines a request and an idle connection meet, and how long and how
//! much a closing connection lingers (docs/reliability.md). A socket
//! owner's own numbers are `botspace_runtime::host`'s.

/// Default `--request-timeout`: a request's head and body arrive within
/// this long of its first byte, else 408 ([`super::request_timeout`]).
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// Default `--idle-timeout`: a keep-alive connection with nothing to read
/// for this long is closed.
pub const IDLE_TIMEOUT_MS: u64 = 120_000;

/// An HTTP connection whose peer takes none of the bytes pending for it
/// for this long is dropped (its `handle_timeout` says `Expired::Write`;
/// no host keeps a write timer of its own). A gateway's reader that stays
/// behind is the gateway's to judge (4008 `slow_consumer`).
pub const WRITE_TIMEOUT_MS: u64 = 30_000;

/// A lingering close (after an answer that ends a connection whose client
/// may still be sending) discards input for at most this long ...
pub const LINGER_MS: u64 = 2_000;

/// ... or this many bytes.
pub const LINGER_BYTES: usize = 4 << 20;

/// A gateway connection closed with 4008 `slow_consumer` gets this long
/// for its close frame before the socket is dropped, sent or not.
pub const SLOW_CONSUMER_DROP_MS: u64 = 1_000;

/// Most requests answered in one commit by a host that batches across
/// connections.
pub const MAX_BATCH: usize = 64;

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

/// The longest a host's loop sleeps: how late it notices a stop or a move
/// of the manual clock.
pub const TICK_MS: u64 = 250;

/// The longest a gateway connection under the system clock waits before
/// it looks at its session again, whatever its next deadline says.
pub const GATEWAY_LOOK_MS: u64 = 1_000;

/// Whether one more busy refusal may linger
/// ([`super::http::HttpConnection::refusing_busy`]) while
/// `lingering` of the host's refusals linger already: below
/// [`MAX_LINGERING_REFUSALS`]. When not, the host sends the 503
/// ([`super::server_busy`]) best effort, never blocking, and closes at
/// once: a flood of refused connections then costs one accept each, and
/// the host's descriptors stay with the connections it serves.
pub fn refusal_may_linger(lingering: usize) -> bool {
    lingering < MAX_LINGERING_REFUSALS
}

/// The fewest bytes of one request a face that is handed whole requests
/// (the WASM package's `handleRequest` and `handle`) copies into the
/// library: below this a cut saves little memory, and the library sees
/// exactly what it was sent.
pub const MIN_REQUEST_COPY_BYTES: usize = 64 << 20;

/// How many bytes of one whole request such a face copies in, given the
/// framer's bound ([`crate::RequestFramer::max_request_bytes`]): a
/// request longer than that bound can never be valid, so its first bytes
/// decide the answer and the rest is never copied, which keeps the
/// module's memory bounded.
pub fn request_copy_cap(max_request_bytes: usize) -> usize {
    max_request_bytes.max(MIN_REQUEST_COPY_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_request_is_copied_up_to_the_framers_bound_and_at_least_64_mib() {
        let framer = crate::http::RequestFramer::new(65_536);
        assert_eq!(request_copy_cap(framer.max_request_bytes()), 64 << 20);
        let big = crate::http::RequestFramer::new(100 << 20).max_request_bytes();
        assert_eq!(request_copy_cap(big), big, "a large body limit raises the cap");
        assert!(big > 3 * (100 << 20));
    }

    #[test]
    fn at_most_256_busy_refusals_linger_at_once() {
        assert!(refusal_may_linger(0));
        assert!(refusal_may_linger(255));
        assert!(!refusal_may_linger(256), "the 257th closes at once");
        assert!(!refusal_may_linger(usize::MAX));
    }
}
