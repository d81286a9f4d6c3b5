//! The Rust tests of the C ABI, one file per module they test, apart from
//! the implementation; they call the exported functions as C does.

mod admission;
mod boundary;
mod gateway;
mod log_line;
mod output;
mod route;
mod server_options;
mod service;
mod webhook;

use crate::status::{botspace_last_error_message, botspace_status};
use std::ffi::c_char;

/// The calling thread's last error message, as a C host reads it.
fn last_error() -> String {
    let mut buf = [0 as c_char; 256];
    let mut n = 0;
    assert_eq!(unsafe { botspace_last_error_message(buf.as_mut_ptr(), buf.len(), &mut n) }, botspace_status::Ok);
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}
