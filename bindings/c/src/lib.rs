//! The C ABI of botspace: `include/botspace.h` is generated from this crate
//! by cbindgen (this file, then its modules in the order they are declared
//! below, which is the header's order), so the doc comments are the
//! header's documentation.
//!
//! Conventions (in the manner of rustls-ffi):
//! - opaque handles (`botspace_service`, `botspace_gateway`), created by one
//!   function and released by one `_free` function;
//! - every function that can fail returns a `botspace_status`, 0 is OK;
//! - every body runs inside [`ffi_boundary!`], so no Rust panic unwinds into
//!   C: a panic becomes `BOTSPACE_STATUS_PANIC`;
//! - NULL pointers are checked by [`arg!`] and refused with
//!   `BOTSPACE_STATUS_NULL_ARGUMENT`, except that a NULL input pointer with
//!   length 0 is an empty input;
//! - output parameters are written only when the call returns OK;
//! - output bytes are a `botspace_bytes {ptr, len}` released by
//!   `botspace_bytes_free`, which accepts NULL and empty values.
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

// The boundary first: its macros are used by every module after it.
#[macro_use]
mod boundary;

// One module per handle or object. cbindgen writes this file's items, then
// each module's in the order declared here: that order is the header's, so
// each declaration stands alone (a blank line apart, where rustfmt does not
// sort them).

/// `botspace_status`, the per-thread error message.
pub mod status;

/// `botspace_bytes` and `botspace_bytes_free`.
pub mod bytes;

/// `botspace_service`: open, free, requests, parked polls, callbacks.
pub mod service;

/// `botspace_request_framer` and the framing of a request.
pub mod request_framer;

/// `botspace_gateway`: one gateway connection after its upgrade.
pub mod gateway;

/// `botspace_gateway_link`: a gateway connection for a byte-moving host.
pub mod gateway_link;

/// `botspace_webhook_request`, outcomes and the address policy.
pub mod webhook;

/// `botspace_log_level` and `botspace_log_line`.
pub mod log_line;

/// `botspace_route_request` and the answers the library words.
pub mod route;

/// `botspace_host_policy` and the default connection cap.
pub mod host_policy;

/// `botspace_server_options`: the example servers' options.
pub mod server_options;

/// `botspace_http_connection`: one HTTP/1.1 connection, sans-IO.
pub mod http_connection;

/// `botspace_http_round`: group commit across connections.
pub mod http_round;

/// `botspace_admission`: which accepted sockets are served, evicted or refused.
pub mod admission;

/// `botspace_output` and `botspace_startup`: the operator lines.
pub mod output;

/// `botspace_webhook_pump`: the webhook schedule between loop and store.
pub mod webhook_pump;

#[cfg(test)]
mod tests;

/// `botspace_gateway_poll_timeout` writes this when no timeout is due: the
/// connection is closed.
pub const BOTSPACE_NO_DEADLINE: u64 = u64::MAX;

/// The memory budget of one connection's answers (the core's
/// `MAX_UNSENT_BYTES_PER_CONNECTION`): a server takes no further request
/// from a connection (frames none from its buffer, reads none from its
/// socket) while it holds this many bytes or more of answers the client has
/// not read. `botspace_should_read` applies it.
pub const BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION: usize = 64 * 1024;
const _: () = assert!(BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION == botspace::MAX_UNSENT_BYTES_PER_CONNECTION);

/// Whether a server may take a connection's next request (frame it from its
/// buffer, or read its socket for one) while `unsent_bytes` of answers to
/// that connection still wait for the client to read them: true below
/// `BOTSPACE_MAX_UNSENT_BYTES_PER_CONNECTION`. Cannot fail; any thread.
#[no_mangle]
pub extern "C" fn botspace_should_read(unsent_bytes: usize) -> bool {
    botspace::should_read(unsent_bytes)
}

/// The library version, e.g. `"0.1.0"`: a static NUL-terminated string
/// that is never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn botspace_version() -> *const c_char {
    static V: OnceLock<CString> = OnceLock::new();
    ffi_boundary!(on_panic = c"unknown".as_ptr(); {
        V.get_or_init(|| CString::new(botspace::VERSION).unwrap_or_default()).as_ptr()
    })
}
