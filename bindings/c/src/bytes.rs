//! Bytes across the boundary: output
//! the caller owns (`botspace_bytes`, released by `botspace_bytes_free`)
//! and output lent from a handle (the `_transmit` calls).

use std::mem::MaybeUninit;

/// Bytes owned by the caller after a successful call. Release them with
/// `botspace_bytes_free` (exactly once, or any number of times on the same
/// variable, since it resets the value to `{NULL, 0}`). An empty output is
/// `{NULL, 0}`. The bytes are not NUL-terminated.
#[repr(C)]
#[derive(Debug)]
pub struct botspace_bytes {
    pub ptr: *mut u8,
    pub len: usize,
}

impl botspace_bytes {
    pub(crate) const EMPTY: botspace_bytes = botspace_bytes { ptr: std::ptr::null_mut(), len: 0 };

    pub(crate) fn from_vec(v: Vec<u8>) -> botspace_bytes {
        if v.is_empty() {
            return botspace_bytes::EMPTY;
        }
        let b: Box<[u8]> = v.into_boxed_slice();
        let len = b.len();
        botspace_bytes { ptr: Box::into_raw(b) as *mut u8, len }
    }
}

/// Releases bytes returned by any botspace call and resets `*bytes` to
/// `{NULL, 0}`. Accepts NULL, and an already released or empty value, so
/// calling it twice on the same variable is harmless. Thread-safe (for
/// different values).
///
/// # Safety
/// `*bytes` must be an output of botspace (or `{NULL, 0}`), not a copy of
/// one that was already released.
#[no_mangle]
pub unsafe extern "C" fn botspace_bytes_free(bytes: *mut botspace_bytes) {
    ffi_boundary!(on_panic = (); {
        if bytes.is_null() {
            return;
        }
        // SAFETY: non-NULL, and the caller passes a botspace_bytes.
        let b = unsafe { &mut *bytes };
        let (ptr, len) = (b.ptr, b.len);
        *b = botspace_bytes::EMPTY;
        if !ptr.is_null() && len != 0 {
            // SAFETY: ptr/len came from Box<[u8]>::into_raw in from_vec.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        }
    })
}

/// Lends `t` to the caller as a pointer and a length (NULL for nothing):
/// the `_transmit` functions' bytes, borrowed from their handle.
pub(crate) fn write_borrowed(t: &[u8], out_ptr: &mut MaybeUninit<*const u8>, out_len: &mut MaybeUninit<usize>) {
    out_ptr.write(if t.is_empty() { std::ptr::null() } else { t.as_ptr() });
    out_len.write(t.len());
}
