//! The status every fallible call returns, and the message of the last
//! failure on the calling thread (`botspace_last_error_message`).

use std::cell::RefCell;
use std::ffi::c_char;

/// The result of every fallible call. The values are fixed and will never
/// change meaning; new values may be added. `botspace_status_message`
/// gives a static description and `botspace_last_error_message` the detail
/// of the last failure on the calling thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_status {
    /// Success; outputs were written.
    Ok = 0,
    /// A required pointer argument was NULL (an input pointer may be NULL
    /// only when its length is 0).
    NullArgument = 1,
    /// The configuration JSON was malformed or named an invalid value.
    InvalidConfig = 2,
    /// The database could not be opened, created or migrated; or, from
    /// `botspace_service_wait_store_notifications`, the connection that
    /// listens for other nodes' commits could not be opened or broke.
    StorageError = 3,
    /// An argument is out of range (e.g. a length above `PTRDIFF_MAX`).
    InvalidArgument = 4,
    /// An internal error (a Rust panic) was caught at the boundary; no
    /// output was written and the handle stays usable. Please report it.
    Panic = 5,
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(crate) fn set_last_error(msg: impl Into<String>) {
    let msg = msg.into();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = msg);
}

pub(crate) fn fail(status: botspace_status, msg: impl Into<String>) -> botspace_status {
    set_last_error(msg);
    status
}

/// A static, NUL-terminated description of a status value (unknown values
/// give "unknown status"); never freed. Thread-safe.
#[no_mangle]
pub extern "C" fn botspace_status_message(status: u32) -> *const c_char {
    let s: &'static std::ffi::CStr = match status {
        0 => c"ok",
        1 => c"a required pointer argument was NULL",
        2 => c"the configuration is invalid",
        3 => c"the database could not be opened or reached",
        4 => c"an argument is out of range",
        5 => c"internal error (panic) caught at the C boundary",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// Copies the message of the last failed call made on this thread (empty if
/// none failed) into `buf` as a NUL-terminated string, truncated to fit
/// `buf_len` bytes, and writes its full length (without the NUL) to
/// `*out_len`, so a caller can pass `buf = NULL, buf_len = 0` to ask for the
/// size. The message is per thread and is replaced by the next failure.
/// Thread-safe.
///
/// # Safety
/// `buf`, when not NULL, must have `buf_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn botspace_last_error_message(
    buf: *mut c_char,
    buf_len: usize,
    out_len: *mut usize,
) -> botspace_status {
    ffi_boundary!({
        let out_len = arg!(out out_len);
        if buf.is_null() && buf_len != 0 {
            return fail(botspace_status::NullArgument, "argument `buf` is NULL with a non-zero buf_len");
        }
        let msg = LAST_ERROR.try_with(|e| e.borrow().clone()).unwrap_or_default();
        if buf_len > 0 {
            let n = msg.len().min(buf_len - 1);
            // SAFETY: the caller gives `buf_len` writable bytes; n < buf_len.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        out_len.write(msg.len());
        botspace_status::Ok
    })
}
