//! The gateway output budget over the wire, against both example servers
//! (`rust::` and `c::`) at the OS default file limit (`ulimit -n 1024`): a
//! bot that sends pings and heartbeats and reads nothing costs the server a
//! bounded amount of memory (it stops reading the bot once the replies it
//! owes fill the library's budget, so the bot's own socket blocks), and it
//! is closed with 4008 `slow_consumer` once its output has stayed over the
//! budget for two heartbeat intervals (the manual clock, moved by
//! `/admin/advanceClock`); that rule is the only one for a gateway socket: a
//! bot that heartbeats but reads nothing for 45 s of real time (past the
//! 30 s write timeout of HTTP connections) keeps its session and then reads
//! every event. That scenario takes about a minute of wall time.

#[macro_use]
mod wire;
#[path = "support/ws_frame.rs"]
mod ws_frame;

use serde_json::json;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use wire::*;

servers! {
    a_bot_that_floods_pings_and_heartbeats_and_reads_nothing_stays_bounded_and_gets_4008,
    a_bot_that_heartbeats_but_reads_nothing_for_45_s_keeps_its_session_and_reads_every_event,
}

/// What the bot tries to send: far more than the kernel buffers of a
/// loopback connection hold, and than the bound below.
const FLOOD_BYTES: usize = 100 << 20;
/// How much the server's resident memory may grow under the flood: the
/// library's budgets (256 KiB of output, 64 KiB of replies) plus read
/// buffers and allocator slack; without the budget it grows by about what
/// the bot sends.
const RSS_GROWTH_BOUND_KB: u64 = 32 * 1024;

fn vm_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn soft_file_limit(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc/PID/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("Max open files");
    line.split_whitespace().find_map(|w| w.parse().ok()).unwrap()
}

/// A masked client frame.
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    f.extend_from_slice(&key);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    f
}

/// A gateway upgrade on a raw socket; returns it and what followed the 101.
fn raw_gateway(srv: &Server, token: &str) -> (TcpStream, Vec<u8>) {
    let mut s = srv.connect();
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n",
        srv.addr
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            assert!(buf.starts_with(b"HTTP/1.1 101 "), "{:?}", String::from_utf8_lossy(&buf));
            buf.drain(..end + 4);
            return (s, buf);
        }
        let n = read_some(&mut s, &mut chunk).expect("101");
        assert!(n > 0, "closed before the 101");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads server frames (from `buf`, then the socket) until a close frame:
/// (its code and reason, how many pongs came before it).
fn read_to_close(s: &mut TcpStream, mut buf: Vec<u8>) -> ((u16, String), usize) {
    let mut chunk = vec![0u8; 1 << 20];
    let mut pongs = 0;
    let mut at = 0;
    loop {
        while let Some(f) = ws_frame::server_frame(&buf[at..]) {
            let payload = f.payload;
            match f.opcode() {
                0x8 => {
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    return ((code, String::from_utf8_lossy(&payload[2..]).into_owned()), pongs);
                }
                0xA => pongs += 1,
                0x1 => {}
                op => panic!("unexpected opcode {op:#x} after {pongs} pongs"),
            }
            at += f.len;
        }
        buf.drain(..at);
        at = 0;
        match read_some(s, &mut chunk) {
            Ok(0) => panic!("EOF before the close frame ({pongs} pongs read)"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("read after {pongs} pongs, no close frame: {e}"),
        }
    }
}

fn a_bot_that_floods_pings_and_heartbeats_and_reads_nothing_stays_bounded_and_gets_4008(bin: &Path) {
    let args = ["--db", ":memory:", "--admin-secret", SECRET, "--manual-clock"];
    let srv = Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &args);
    assert_eq!(soft_file_limit(srv.pid()), 1024);
    // A free-tier bot: one connection at a time, so its slot shows whether
    // the server still holds the session.
    let w = srv.world("free");
    let (mut s, buf) = raw_gateway(&srv, &w.token);
    std::thread::sleep(Duration::from_millis(300));
    let before = vm_rss_kb(srv.pid());

    // 1 000 pings of 125 bytes and a heartbeat, again and again, until the
    // server stops taking them (the write blocks for 2 s) or 100 MB went.
    let ping = client_frame(0x9, &[b'p'; 125]);
    let heartbeat = client_frame(0x1, br#"{"op":"heartbeat"}"#);
    let mut block = ping.repeat(1000);
    block.extend_from_slice(&heartbeat);
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let (mut sent, mut peak) = (0usize, before);
    let blocked = loop {
        if sent >= FLOOD_BYTES {
            break false;
        }
        match s.write(&block) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break true,
            Err(e) => panic!("write after {sent} bytes: {e}"),
        }
        peak = peak.max(vm_rss_kb(srv.pid()));
    };
    std::thread::sleep(Duration::from_millis(500));
    peak = peak.max(vm_rss_kb(srv.pid()));
    eprintln!(
        "gateway flood: {} KB sent before the server stopped reading; VmRSS {before} KB -> peak {peak} KB",
        sent >> 10
    );
    assert!(blocked, "the server took all {sent} bytes of pings and heartbeats without reading back");
    assert!(
        peak - before < RSS_GROWTH_BOUND_KB,
        "VmRSS grew by {} KB (bound {RSS_GROWTH_BOUND_KB} KB) under {sent} bytes of pings",
        peak - before
    );

    // Still open just before the slow-consumer time (two heartbeat
    // intervals, 82.5 s; the heartbeats it took came before its output
    // went over the budget, so 4009 is not what ends it)...
    let interval = HEARTBEAT_MS as f64 / 1000.0;
    srv.advance(2.0 * interval - 1.5);
    std::thread::sleep(Duration::from_millis(600));
    srv.raw_upgrade(&w.token, "").assert_error(429, "connection_limit");
    assert!(vm_rss_kb(srv.pid()) - before < RSS_GROWTH_BOUND_KB);
    // ...and closed just after it, while the bot still reads nothing: the
    // slot is free at once.
    srv.advance(2.0);
    let t0 = Instant::now();
    let mut next = eventually("the slot of the flooding bot", || srv.try_gateway(&w.token, "").ok());
    // The bot has about a second to read its way to the close frame.
    let ((code, reason), pongs) = read_to_close(&mut s, buf);
    eprintln!("gateway flood: 4008 after {pongs} pongs read, {:?} after the clock moved", t0.elapsed());
    assert_eq!((code, reason.as_str()), (4008, "slow_consumer"));
    // The server still serves the bot.
    assert_eq!(next.hello()["op"], "hello");
}

/// How long the bot reads nothing: past the HTTP write timeout (30 s), which
/// is not a gateway socket's rule.
const PAUSE: Duration = Duration::from_secs(45);

fn a_bot_that_heartbeats_but_reads_nothing_for_45_s_keeps_its_session_and_reads_every_event(bin: &Path) {
    // The manual clock: the session's own rules (heartbeat timeout, slow
    // consumer) see no time pass; only the real 45 s do.
    let args = ["--db", ":memory:", "--admin-secret", SECRET, "--manual-clock"];
    let srv = Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &args);
    let w = srv.world("official");
    // 1 000 events of 20 KB (20 MB): more than the link's output budget plus
    // what the loopback sockets buffer, so the server's writes stall.
    let text = "😀".repeat(5000);
    for _ in 0..1000 {
        srv.say(&w.user_id, &w.chat, &text);
    }
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    let t0 = Instant::now();
    while t0.elapsed() < PAUSE {
        gw.send(r#"{"op":"heartbeat"}"#);
        std::thread::sleep(Duration::from_secs(5));
    }
    // Every event, in order (the bot_started event, then the 1 000
    // messages), with the heartbeats' acks between them.
    let (mut seq, mut acks) = (0, 0);
    while seq < 1001 {
        let frame = gw.json();
        match frame["op"].as_str() {
            Some("event") => {
                seq += 1;
                assert_eq!(frame["seq"], json!(seq), "{frame}");
            }
            Some("heartbeat_ack") => acks += 1,
            _ => panic!("unexpected frame after {seq} events: {frame}"),
        }
    }
    eprintln!("paused reader: {seq} events and {acks} heartbeat acks read after {:?}", t0.elapsed());
    // The session is still open: a message sent now reaches it.
    let message = srv.say(&w.user_id, &w.chat, "after the pause");
    loop {
        let frame = gw.json();
        if frame["op"] == json!("heartbeat_ack") {
            continue;
        }
        assert_eq!((&frame["op"], &frame["seq"]), (&json!("event"), &json!(1002)), "{frame}");
        assert_eq!(frame["data"]["message"], message, "{frame}");
        break;
    }
}
