#![no_main]
//! Framing over arbitrary bytes with a small body limit: never panics,
//! `Complete(n)` stays within the buffer, `Invalid` carries an HTTP answer.
use botspace::{frame_request, Framing};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    match frame_request(data, 64) {
        Framing::Complete { len: n, .. } => assert!(n > 0 && n <= data.len()),
        Framing::Incomplete => {}
        Framing::Invalid(resp) => {
            let status = common::check_response(&resp);
            assert!((400..500).contains(&status), "framing answered {status}");
        }
    }
});
