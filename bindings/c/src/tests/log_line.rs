//! `botspace_log_line` and `botspace_log_level`.

use crate::bytes::{botspace_bytes, botspace_bytes_free};
use crate::log_line::{botspace_log_level, botspace_log_line};
use crate::status::botspace_status;

/// The C calls give the library's line and level; a level outside 0..=3
/// is InvalidArgument with nothing written.
#[test]
fn log_line_and_level() {
    let mut out = botspace_bytes::EMPTY;
    let (msg, block) = ("a \"b\"", "x: 1\ny\n");
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_log_line(1, msg.as_ptr().cast(), msg.len(), std::ptr::null(), 0, 1_000, &mut out) };
    assert_eq!(st, botspace_status::Ok);
    // SAFETY: written by botspace_log_line.
    let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    assert_eq!(line, br#"{"ts":"1970-01-01T00:00:01.000Z","level":"warn","msg":"a \"b\""}"#);
    // SAFETY: from botspace_log_line.
    unsafe { botspace_bytes_free(&mut out) };
    // SAFETY: valid pointers and lengths.
    let st = unsafe { botspace_log_line(2, c"demo".as_ptr(), 4, block.as_ptr().cast(), block.len(), 0, &mut out) };
    assert_eq!(st, botspace_status::Ok);
    // SAFETY: written by botspace_log_line.
    let line = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
    assert_eq!(line, br#"{"ts":"1970-01-01T00:00:00.000Z","level":"info","msg":"demo","lines":["x: 1","y"]}"#);
    // SAFETY: from botspace_log_line.
    unsafe { botspace_bytes_free(&mut out) };
    // SAFETY: valid pointers.
    let st = unsafe { botspace_log_line(4, std::ptr::null(), 0, std::ptr::null(), 0, 0, &mut out) };
    assert_eq!((st, out.len), (botspace_status::InvalidArgument, 0));
    // SAFETY: NULL is unset; the others point at their bytes.
    unsafe {
        assert_eq!(botspace_log_level(std::ptr::null(), 0), 2);
        assert_eq!(botspace_log_level(c"Error".as_ptr(), 5), 0);
        assert_eq!(botspace_log_level(c"debug".as_ptr(), 5), 3);
    }
}
