//! The boundary every exported function crosses. In the manner of
//! rustls-ffi (its `Castable`, `try_ref_from_ptr!` and
//! `ffi_panic_boundary!`), in our own terms: one trait, [`Handle`], says
//! how an opaque handle is given to C and released; one pair of macros,
//! [`ffi_boundary!`] around each body and [`arg!`] for each pointer
//! argument, is the prelude of every function, written once here:
//! - no Rust panic unwinds into C: it becomes `BOTSPACE_STATUS_PANIC`
//!   (or the function's stated value) with its message kept for
//!   `botspace_last_error_message`;
//! - a NULL pointer is refused by its argument's name with
//!   `BOTSPACE_STATUS_NULL_ARGUMENT`, except that a NULL input with
//!   length 0 is empty;
//! - a pointer becomes a reference here and nowhere else, under the
//!   exported function's `# Safety` contract.

use crate::status::{botspace_status, fail};
use std::ffi::c_void;
use std::mem::MaybeUninit;

/// The message kept for a panic caught at the boundary.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown panic payload");
    format!("internal error (panic) caught at the C boundary: {what}")
}

/// Runs a function body so that no panic crosses into C. The one-argument
/// form is for functions returning a `botspace_status` (a panic gives
/// `Panic`); the `on_panic = value;` form is for the few that return
/// something else. A `return` in the body returns from the function.
macro_rules! ffi_boundary {
    (on_panic = $default:expr; $body:block) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(p) => {
                $crate::status::set_last_error($crate::boundary::panic_message(&*p));
                // Dropping the payload may panic too: that one is dropped here.
                drop(::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(move || drop(p))));
                $default
            }
        }
    }};
    ($body:block) => {
        ffi_boundary!(on_panic = $crate::status::botspace_status::Panic; $body)
    };
}

/// One pointer argument, checked and borrowed for the call, inside
/// [`ffi_boundary!`] in a function returning `botspace_status`; a NULL
/// pointer returns `NullArgument` from the function, named by the
/// argument (`argument `out_ms` is NULL`):
/// - `arg!(ref p)`: `&T` from `*const T` or `*mut T` (a live handle, or a
///   struct the caller lends);
/// - `arg!(mut p)`: `&mut T` from `*mut T` (a handle this thread uses alone);
/// - `arg!(out p)`: `&mut MaybeUninit<T>` from `*mut T`, an output the
///   call writes (`.write(value)`) only once it has succeeded;
/// - `arg!(bytes p, len)`: the input bytes `p[0..len]` as `&[u8]` (see
///   [`input`]; NULL with length 0 is empty);
/// - `arg!(text p, len)`: the same bytes as text, invalid UTF-8 replaced;
/// - `arg!(cstr p)`: `&CStr` of a NUL-terminated string;
/// - `arg!(ptr p)`: `p` itself, non-NULL: an array whose length the
///   function checks, or the address of a handle it takes;
/// - `arg!(opt p)`, `arg!(opt_out p)`, `arg!(opt_cstr p)`: `Option` of
///   `ref`, `out` and `cstr`, for the pointers a function accepts as NULL
///   (then `None`).
///
/// The exported function's `# Safety` contract (a live handle, a readable
/// struct, a writable output, `len` readable bytes) is what makes each
/// borrow sound; the arguments are checked in the order they are named.
macro_rules! arg {
    (ref $p:ident) => {
        match arg!(opt $p) {
            Some(r) => r,
            None => arg!(@null $p),
        }
    };
    (mut $p:ident) => {
        match arg!(@opt_mut $p) {
            Some(r) => r,
            None => arg!(@null $p),
        }
    };
    (out $p:ident) => {
        match arg!(opt_out $p) {
            Some(r) => r,
            None => arg!(@null $p),
        }
    };
    (cstr $p:ident) => {
        match arg!(opt_cstr $p) {
            Some(r) => r,
            None => arg!(@null $p),
        }
    };
    (ptr $p:ident) => {{
        let p = $p;
        if p.is_null() {
            arg!(@null $p);
        }
        p
    }};
    (bytes $p:ident, $len:expr) => {{
        let (p, len) = ($p.cast::<u8>(), $len);
        // SAFETY: the function's contract: `len` readable bytes at `p`.
        match unsafe { $crate::boundary::input(p, len, stringify!($p)) } {
            Ok(b) => b,
            Err(status) => return status,
        }
    }};
    (text $p:ident, $len:expr) => {
        String::from_utf8_lossy(arg!(bytes $p, $len))
    };
    (opt $p:ident) => {{
        let p = $p;
        // SAFETY: the function's contract: NULL or valid for the call.
        unsafe { p.as_ref() }
    }};
    (opt_out $p:ident) => {{
        let p = $p;
        // SAFETY: the function's contract: NULL or writable.
        unsafe { $crate::boundary::out(p) }
    }};
    (opt_cstr $p:ident) => {{
        let p = $p;
        // SAFETY: the function's contract: NULL or a NUL-terminated string.
        (!p.is_null()).then(|| unsafe { ::std::ffi::CStr::from_ptr(p) })
    }};
    (@opt_mut $p:ident) => {{
        let p = $p;
        // SAFETY: the function's contract: NULL or valid for the call and
        // used by this thread only.
        unsafe { p.as_mut() }
    }};
    (@null $p:ident) => {
        return $crate::boundary::null_argument(concat!("argument `", stringify!($p), "` is NULL"))
    };
}

/// `NullArgument`, with `message` kept for `botspace_last_error_message`.
pub(crate) fn null_argument(message: &'static str) -> botspace_status {
    fail(botspace_status::NullArgument, message)
}

/// An output argument: NULL, or room for a `T` the call writes.
///
/// # Safety
/// When non-NULL, `p` must be valid for writes of a `T` for `'a`.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Option<&'a mut MaybeUninit<T>> {
    // SAFETY: as documented above; `MaybeUninit` makes no claim on the
    // bytes there (the caller's variable may be uninitialized).
    unsafe { p.cast::<MaybeUninit<T>>().as_mut() }
}

/// The input bytes `ptr[0..len]`; NULL with length 0 is empty.
///
/// # Safety
/// When non-NULL, `ptr` must point at `len` readable bytes.
pub(crate) unsafe fn input<'a>(ptr: *const u8, len: usize, name: &str) -> Result<&'a [u8], botspace_status> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(fail(botspace_status::NullArgument, format!("argument `{name}` is NULL with a length of {len}")));
    }
    if len > isize::MAX as usize {
        return Err(fail(botspace_status::InvalidArgument, format!("length of `{name}` is larger than PTRDIFF_MAX")));
    }
    // SAFETY: the caller promises `len` readable bytes at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `user_data` a host gives with a callback, passed back unchanged.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);
// SAFETY: the host promises, with each callback it registers
// (`botspace_service_set_wake_callback`, `_set_log_callback`,
// `_set_output_callback`, `botspace_output_set_records_callback`), that
// its pointer may be used from any thread.
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}
impl UserData {
    /// The pointer; a method, so a closure captures the whole `UserData`
    /// (and its `Send`), not the bare pointer.
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

/// An opaque handle: C holds a pointer to a `Box<Self>`, made by the call
/// that creates it ([`Handle::into_raw`]), borrowed by the calls that take
/// it ([`arg!`]) and released by its `_free` ([`Handle::free`]).
pub(crate) trait Handle: Sized {
    /// Gives `self` to C.
    fn into_raw(self) -> *mut Self {
        Box::into_raw(Box::new(self))
    }

    /// What `_free` does besides dropping the handle (the service
    /// unregisters its callbacks first).
    fn release(self: Box<Self>) {}

    /// Takes back the handle `*handle` points at and sets `*handle` to
    /// NULL; `None` for NULL and for a pointer to NULL.
    ///
    /// # Safety
    /// `handle` must be NULL, or point at NULL or at a pointer from
    /// [`Handle::into_raw`] that was not released through another copy.
    unsafe fn take(handle: *mut *mut Self) -> Option<Box<Self>> {
        if handle.is_null() {
            return None;
        }
        // SAFETY: a non-NULL pointer to a handle pointer (the caller's contract).
        let p = unsafe { std::ptr::replace(handle, std::ptr::null_mut()) };
        // SAFETY: from `into_raw`, released once (the caller's contract).
        (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
    }

    /// The `_free` of every handle: releases it and sets `*handle` to
    /// NULL, so a second free of the same variable does nothing; NULL and
    /// a pointer to NULL are accepted; a panic while releasing stays here.
    ///
    /// # Safety
    /// As [`Handle::take`].
    unsafe fn free(handle: *mut *mut Self) {
        ffi_boundary!(on_panic = (); {
            // SAFETY: the caller's contract.
            if let Some(h) = unsafe { Self::take(handle) } {
                h.release();
            }
        })
    }
}
