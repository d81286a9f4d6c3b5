#![no_main]
//! Arbitrary bytes into a seeded service: the answer is well-formed
//! HTTP/1.1 and never 5xx.
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "common.rs"]
mod common;

static WORLD: OnceLock<common::World> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let w = WORLD.get_or_init(common::world);
    let resp = w.svc.handle_request(data);
    let status = common::check_response(&resp);
    assert!(status < 500, "5xx for input: {}", String::from_utf8_lossy(&resp));
});
