//! The numbers of a server's connection handling, the same in every host
//! (`botspace_host_policy`), and the default connection cap.

use crate::status::botspace_status;

/// The numbers of a server's connection handling, the same in every host
/// (`botspace_host_policy_default`; docs/reliability.md).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct botspace_host_policy {
    /// Default `--request-timeout`: a request arrives whole within this
    /// long of its first byte, else the connection's timeout answers 408
    /// (`botspace_http_connection_handle_timeout`).
    pub request_timeout_ms: u64,
    /// Default `--idle-timeout`: an idle keep-alive connection is closed.
    pub idle_timeout_ms: u64,
    /// A lingering close discards input for at most this long...
    pub linger_ms: u64,
    /// ...or this many bytes.
    pub linger_bytes: usize,
    /// How long a stop waits for connections to finish.
    pub drain_ms: u64,
    /// A gateway closed with 4008 `slow_consumer`: its close frame gets
    /// this long before the socket is dropped, sent or not.
    pub slow_consumer_drop_ms: u64,
    /// Most requests in one `botspace_service_handle` call.
    pub max_batch: usize,
    /// After an accept error the listener rests this long.
    pub accept_backoff_ms: u64,
    /// The longest sleep of a host's loop: how late it notices a stop or a
    /// move of the manual clock.
    pub tick_ms: u64,
    /// The longest `botspace_service_wait_store_notifications` wait.
    pub notify_wait_ms: u64,
    /// After that wait failed, the next attempt this much later...
    pub notify_retry_ms: u64,
    /// ...and the failure logged at most this often.
    pub notify_error_report_ms: u64,
    /// Accept errors logged at most this often, with their count.
    pub accept_error_report_ms: u64,
    /// While waiting out `notify_retry_ms`, the notification thread looks
    /// for a stop this often.
    pub notify_retry_step_ms: u64,
    /// The most a loop that serves every connection reads from a socket
    /// at once (the size of its one read buffer)...
    pub read_chunk_bytes: usize,
    /// ...and from one connection in one turn (fairness between
    /// connections).
    pub read_per_turn_bytes: usize,
    /// Finished webhook transfers kept (with their configured handle) for
    /// the next deliveries; past it they are freed.
    pub webhook_spare_transfers: usize,
    /// The file limit assumed when `getrlimit` fails (for
    /// `botspace_server_options_settings`'s default connection cap).
    pub fallback_file_limit: u64,
}

/// Writes the library's host policy to `*out`.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_host_policy_default(out: *mut botspace_host_policy) -> botspace_status {
    ffi_boundary!({
        let out = arg!(out out);
        use botspace::connection::limits as h;
        use botspace_runtime::host as rh;
        let p = botspace_host_policy {
            request_timeout_ms: h::REQUEST_TIMEOUT_MS,
            idle_timeout_ms: h::IDLE_TIMEOUT_MS,
            linger_ms: h::LINGER_MS,
            linger_bytes: h::LINGER_BYTES,
            drain_ms: rh::DRAIN_MS,
            slow_consumer_drop_ms: h::SLOW_CONSUMER_DROP_MS,
            max_batch: h::MAX_BATCH,
            accept_backoff_ms: rh::ACCEPT_BACKOFF_MS,
            tick_ms: h::TICK_MS,
            notify_wait_ms: rh::NOTIFY_WAIT_MS,
            notify_retry_ms: rh::NOTIFY_RETRY_MS,
            notify_error_report_ms: rh::NOTIFY_ERROR_REPORT_MS,
            accept_error_report_ms: rh::ACCEPT_ERROR_REPORT_MS,
            notify_retry_step_ms: rh::NOTIFY_RETRY_STEP_MS,
            read_chunk_bytes: rh::LOOP_READ_CHUNK_BYTES,
            read_per_turn_bytes: rh::LOOP_READ_PER_TURN_BYTES,
            webhook_spare_transfers: rh::WEBHOOK_SPARE_TRANSFERS,
            fallback_file_limit: rh::FALLBACK_FILE_LIMIT,
        };
        out.write(p);
        botspace_status::Ok
    })
}

/// The default `--max-connections` under a file limit of `file_limit`
/// descriptors (`RLIM_INFINITY` as `UINT64_MAX`): one per connection after
/// the server's own 64, at least 1, at most 2^20. Cannot fail.
#[no_mangle]
pub extern "C" fn botspace_default_max_connections(file_limit: u64) -> usize {
    ffi_boundary!(on_panic = 1; { botspace_runtime::host::default_max_connections(file_limit) })
}
