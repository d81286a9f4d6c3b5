//! The log level a setting names and the JSON log line, for hosts that
//! print their own lines (`botspace_log_level`, `botspace_log_line`).

use crate::boundary::input;
use crate::bytes::botspace_bytes;
use crate::status::{botspace_status, fail};
use std::ffi::c_char;

/// The log level a setting names (the value of `BOTSPACE_LOG`; `setting`
/// may be NULL for unset): 0 error, 1 warn, 2 info, 3 debug. A plain level
/// name, any case (`trace` counts as debug); anything else gives 2 (info),
/// the default. A line of level `n` is printed when `n` <= the result.
/// Thread-safe.
///
/// # Safety
/// When non-NULL, `setting` must point at `setting_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn botspace_log_level(setting: *const c_char, setting_len: usize) -> i32 {
    ffi_boundary!(on_panic = botspace::log::Level::Info as i32; {
        if setting.is_null() {
            return botspace::log::Level::Info as i32;
        }
        // SAFETY: as documented above.
        match unsafe { input(setting.cast::<u8>(), setting_len, "setting") } {
            Ok(b) => botspace::log::Level::from_setting(Some(&String::from_utf8_lossy(b))) as i32,
            Err(_) => botspace::log::Level::Info as i32,
        }
    })
}

/// Writes one JSON log line (no newline) to `out_line`:
/// `{"ts":"…Z","level":"…","msg":"…"}`, the same shape the Rust server
/// prints. `level` is 0 error, 1 warn, 2 info, 3 debug; `unix_ms` is the
/// host's wall clock in milliseconds since 1970. With `block_len` > 0,
/// `block`'s text lines go, unchanged, into a `lines` array (the demo's
/// start-up block). Free `out_line` with `botspace_bytes_free`.
/// `InvalidArgument` for another level. Thread-safe.
///
/// # Safety
/// `msg` and `block` must point at `msg_len` and `block_len` readable bytes
/// (NULL with a length of 0 is empty); `out_line` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_log_line(
    level: i32,
    msg: *const c_char,
    msg_len: usize,
    block: *const c_char,
    block_len: usize,
    unix_ms: u64,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let out_line = arg!(out out_line);
        let Some(level) = botspace::log::Level::from_number(level) else {
            return fail(botspace_status::InvalidArgument, format!("log level {level} is not 0 to 3"));
        };
        let msg = arg!(text msg, msg_len);
        let block = arg!(text block, block_len);
        let line = if block.is_empty() {
            botspace::log::log_line(level, &msg, &[], unix_ms)
        } else {
            botspace_runtime::output::log_block(level, &msg, &block, unix_ms)
        };
        out_line.write(botspace_bytes::from_vec(line.into_bytes()));
        botspace_status::Ok
    })
}
