#![no_main]
//! Accept a gateway connection, then feed arbitrary bytes split by the
//! first byte; interleave timeouts and drain output and events.
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "common.rs"]
mod common;

static WORLD: OnceLock<common::World> = OnceLock::new();

/// Checks that `out` is a sequence of whole unmasked server frames.
fn check_frames(mut out: &[u8]) {
    while !out.is_empty() {
        assert!(out.len() >= 2, "truncated frame header");
        let op = out[0] & 0x0f;
        assert!(matches!(op, 0x1 | 0x2 | 0x8 | 0x9 | 0xA), "bad opcode {op}");
        assert_eq!(out[1] & 0x80, 0, "server frames are never masked");
        let (len, hdr) = match out[1] & 0x7f {
            126 => (u16::from_be_bytes([out[2], out[3]]) as usize, 4),
            127 => (u64::from_be_bytes(out[2..10].try_into().unwrap()) as usize, 10),
            n => (n as usize, 2),
        };
        assert!(out.len() >= hdr + len, "frame longer than output");
        if op == 0x1 {
            std::str::from_utf8(&out[hdr..hdr + len]).expect("text frame is UTF-8");
        }
        out = &out[hdr + len..];
    }
}

fuzz_target!(|data: &[u8]| {
    let w = WORLD.get_or_init(common::world);
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        w.token
    );
    let mut now = w.svc.now_ms();
    let accept = w.svc.accept_gateway(req.as_bytes(), now);
    let mut conn = accept.connection.expect("gateway accepts the seeded bot");
    let step = data.first().map_or(1, |b| (*b as usize % 64) + 1);
    let mut out = Vec::new();
    for chunk in data.get(1..).unwrap_or(&[]).chunks(step) {
        conn.handle_input(chunk, now);
        if chunk[0] & 1 == 1 {
            now += 10_000;
            conn.handle_timeout(now);
        }
        while conn.poll_transmit(&mut out) > 0 {}
        while conn.poll_event().is_some() {}
        if conn.is_closed() {
            break;
        }
    }
    check_frames(&out);
    // The connection drops here and frees its slot.
});
