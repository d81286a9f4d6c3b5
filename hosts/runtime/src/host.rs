//! The numbers of a server's socket handling, the same in every host
//! that owns sockets (the Rust example server, the C server): defaults of
//! the options, read sizes, back-offs, the drain on stop, the batch
//! queue's sizes, and the bounds hostile or slow clients meet
//! (docs/reliability.md). The state machines' own deadlines and lingers
//! are the core's (`botspace::connection::limits`).

/// A stop waits this long for connections to finish.
pub const DRAIN_MS: u64 = 5_000;

/// Most requests in one commit by a host whose core thread takes every
/// request queued by any connection at once (at most one per connection
/// is in flight): past it, the take commits in several transactions.
pub const MAX_QUEUED_BATCH: usize = 256;

/// A batch thread starts a batch while another batch is under way only
/// once this many requests wait: fewer are left for the running batch's
/// thread to take whole when it is done (see [`starts_batch`]).
pub const OVERLAP_MIN_QUEUED: usize = 16;

/// Threads of a host's reactor (sockets, framing, webhook sends) beside
/// `core_threads` threads that answer bot requests, on `cores` cores:
/// the cores the core threads leave, at least one. A reactor thread per
/// core on top of the core threads puts more runnable threads than cores
/// on a small machine, and each request then pays for the switches
/// between them.
pub fn reactor_threads(cores: usize, core_threads: usize) -> usize {
    cores.saturating_sub(core_threads).max(1)
}

/// After an accept error (out of descriptors and the like) the listener
/// rests this long instead of spinning.
pub const ACCEPT_BACKOFF_MS: u64 = 50;

/// After an eviction out of descriptors, a host waits at most this long
/// for the waiting client's accept on the released spare descriptor, and
/// rests this long before its next accept: the evicted connection's
/// descriptor is closed by then (its task or turn ends within moments),
/// and the pause is too short for a client to notice.
pub const EVICTION_SETTLE_MS: u64 = 1;

/// The longest wait for other nodes' commits (PostgreSQL notifications):
/// how late the waiting thread notices a stop.
pub const NOTIFY_WAIT_MS: u64 = 250;

/// After the notification listener broke, it is opened again this much
/// later (the sessions' own polls deliver meanwhile) ...
pub const NOTIFY_RETRY_MS: u64 = 1_000;

/// ... and the failure is logged at most this often.
pub const NOTIFY_ERROR_REPORT_MS: u64 = 10_000;

/// While the notification thread waits out [`NOTIFY_RETRY_MS`], it looks
/// for a stop this often: a stop joins the thread, so this is how long a
/// stop may wait for it.
pub const NOTIFY_RETRY_STEP_MS: u64 = 50;

/// While a stop drains ([`DRAIN_MS`]), a host that cannot be woken by its
/// connections' ends (the Rust server's tasks) looks this often whether
/// they are all done: a stop ends at most this long after the last one.
pub const DRAIN_POLL_MS: u64 = 20;

/// After the drain, tasks still running (cut by its end) get this long to
/// be dropped before the runtime itself is, so that a task stuck in a
/// blocking call cannot hold the process.
pub const RUNTIME_SHUTDOWN_MS: u64 = 1_000;

/// On a stop, an idle connection reads at most this much at once to learn
/// whether a request reached its socket before it closes (what it read is
/// answered): a request's head rarely takes more, and more is read on the
/// next turn.
pub const STOP_PROBE_BYTES: usize = 4096;

/// The most a host with a task per connection (the Rust server) reads from
/// a socket at once: as much as a whole request head may be (16 KiB,
/// `headers_too_large` past it), so a head usually arrives in one
/// read, on a scratch buffer of the task's stack that is never kept.
pub const READ_CHUNK_BYTES: usize = 16 * 1024;

/// The most a host whose one loop serves every connection (the C server)
/// reads from a socket at once: its one buffer serves every connection, so
/// it can be larger, and fewer reads per turn cost fewer system calls ...
pub const LOOP_READ_CHUNK_BYTES: usize = 64 * 1024;

/// ... and the most it reads from one connection in one turn, so that one
/// fast sender does not hold the loop from the others (fairness).
pub const LOOP_READ_PER_TURN_BYTES: usize = 256 * 1024;

/// The webhook sender wakes at least this often even with no delivery due
/// and no wake-up: how late it notices that its service is gone.
pub const WEBHOOK_LOOK_MS: u64 = 1_000;

/// Finished webhook transfers a host keeps for the next deliveries (a
/// libcurl host: each with its handle and options set, so a delivery
/// neither allocates nor sets up a handle): a little over one webhook's
/// `webhook::MAX_CONNECTIONS` (100), so one receiver at full concurrency
/// reuses its own; past it, finished transfers are freed.
pub const WEBHOOK_SPARE_TRANSFERS: usize = 128;

/// The file limit a host assumes when it cannot read its own
/// (`getrlimit` failed): the usual default soft limit, from which
/// [`default_max_connections`] gives the default `--max-connections`.
pub const FALLBACK_FILE_LIMIT: u64 = 1024;

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

/// What share of the connection budget (`--max-connections`) outgoing
/// webhook connections may hold at once, all bots together: one in this
/// many. Each bot's own `max_connections` (at most 100) still applies
/// within it; without a cap for the whole server, bots pointed at a
/// receiver that never answers took every descriptor, and clients got 503
/// until the attempts timed out.
pub const WEBHOOK_CONNECTION_SHARE: usize = 4;

/// The most webhook deliveries a server has in flight at once under a
/// connection budget of `max_connections`: a quarter of it (240 under the
/// default 1 024 descriptors), at least one. Deliveries past it wait for
/// a free slot in the webhook pump (`webhook_pump::Pump`).
pub fn webhook_connection_cap(max_connections: usize) -> usize {
    (max_connections / WEBHOOK_CONNECTION_SHARE).max(1)
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
    fn webhooks_hold_at_most_a_quarter_of_the_connection_budget() {
        assert_eq!(webhook_connection_cap(default_max_connections(FALLBACK_FILE_LIMIT)), 240);
        assert_eq!(webhook_connection_cap(7), 1);
        assert_eq!(webhook_connection_cap(0), 1, "never zero: deliveries still go, one at a time");
        assert_eq!(webhook_connection_cap(default_max_connections(20_000)), 4_984);
    }

    #[test]
    fn the_socket_owners_numbers() {
        // The values the two servers had of their own before they were
        // the core's; a change here changes both.
        assert_eq!((ACCEPT_BACKOFF_MS, EVICTION_SETTLE_MS, DRAIN_POLL_MS, RUNTIME_SHUTDOWN_MS), (50, 1, 20, 1_000));
        assert_eq!((NOTIFY_RETRY_STEP_MS, WEBHOOK_LOOK_MS), (50, 1_000));
        assert_eq!((STOP_PROBE_BYTES, READ_CHUNK_BYTES), (4096, 16 * 1024));
        assert_eq!(READ_CHUNK_BYTES, botspace::MAX_HEAD_BYTES, "a whole head fits one read");
        assert_eq!((LOOP_READ_CHUNK_BYTES, LOOP_READ_PER_TURN_BYTES), (64 * 1024, 256 * 1024));
        assert_eq!(WEBHOOK_SPARE_TRANSFERS, 128);
        assert!(WEBHOOK_SPARE_TRANSFERS >= botspace::webhook::MAX_CONNECTIONS as usize);
        assert_eq!(FALLBACK_FILE_LIMIT, 1024);
        assert_eq!(default_max_connections(FALLBACK_FILE_LIMIT), 960);
        // The retry is waited out in whole steps.
        assert_eq!(NOTIFY_RETRY_MS % NOTIFY_RETRY_STEP_MS, 0);
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

    #[test]
    fn the_reactor_takes_the_cores_the_core_threads_leave() {
        assert_eq!(reactor_threads(2, 1), 1, "SQLite on two cores");
        assert_eq!(reactor_threads(2, 2), 1, "PostgreSQL on two cores: still one");
        assert_eq!(reactor_threads(16, 2), 14);
        assert_eq!(reactor_threads(4, 0), 4, "no core thread (the blocking pool)");
        assert_eq!(reactor_threads(1, 0), 1);
    }
}
