//! What a trickling client costs the framer: a chunked body in 1-byte
//! chunks, read one byte at a time, framed after every read.
//!
//!     cargo run --release --example framing_cost
//!
//! Prints the CPU time for a body and for one ten times longer, with the
//! resuming `RequestFramer` and with the stateless `frame_request` (which
//! rescans the buffer from the start on every read). Linear cost means
//! the ten-times body takes about ten times as long.

use botspace::{frame_request, Framing, RequestFramer};
use std::time::{Duration, Instant};

fn request(chunks: usize) -> Vec<u8> {
    let mut r = b"POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..chunks {
        r.extend_from_slice(b"1\r\na\r\n");
    }
    r.extend_from_slice(b"0\r\n\r\n");
    r
}

/// Frames `req` after each byte, as a host reading one byte per read does.
fn cost(req: &[u8], mut frame: impl FnMut(&[u8]) -> Framing) -> Duration {
    let t = Instant::now();
    for end in 1..req.len() {
        assert_eq!(frame(&req[..end]), Framing::Incomplete);
    }
    assert_eq!(frame(req).complete_len(), Some(req.len()));
    t.elapsed()
}

fn main() {
    let max = 1 << 20;
    let (small, large) = (request(1_000), request(10_000));
    let mut rows = Vec::new();
    for (name, resuming) in [("RequestFramer", true), ("frame_request", false)] {
        let run = |req: &[u8]| {
            if resuming {
                let mut f = RequestFramer::new(max);
                cost(req, |b| f.frame(b))
            } else {
                cost(req, |b| frame_request(b, max))
            }
        };
        // Best of three, so one preemption does not decide the figure (the
        // quadratic baseline once: it takes seconds).
        let tries = if resuming { 3 } else { 1 };
        let best = |req: &[u8]| (0..tries).map(|_| run(req)).min().unwrap();
        let (a, b) = (best(&small), best(&large));
        rows.push((name, a, b));
    }
    println!("| framer | {} B | {} B (10x) | ratio |", small.len(), large.len());
    println!("|---|---|---|---|");
    for (name, a, b) in rows {
        println!("| {name} | {:.2} ms | {:.2} ms | {:.1}x |", ms(a), ms(b), b.as_secs_f64() / a.as_secs_f64());
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
