//! Hardening of the Rust example server, over real TCP: the host
//! API on its own listener (`--admin-addr`), the gateway's unsent-byte
//! budget (close 4008 `slow_consumer`) with heartbeats and acks still
//! handled while output waits, and 2 000 half-open connections.

mod wire;
#[path = "support/ws_frame.rs"]
mod ws_frame;

use serde_json::{json, Value};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use wire::*;

// ---------------------------------------------------------------------------
// --admin-addr

/// One request on a fresh connection to `addr`; the answer byte for byte.
fn raw(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(req).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .split("\r\n")
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.truncate(end + 4 + len);
                return buf;
            }
        }
        let n = read_some(&mut s, &mut chunk).expect("read");
        assert!(n > 0, "closed before a whole answer: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The library's answer for a path without a method, byte for byte
/// (`ApiError::method_not_found`, docs/errors.md): the same for every
/// path, which it never repeats.
fn not_found() -> Vec<u8> {
    answer_404("method_not_found", "no method at this path (method names are case-sensitive)")
}

/// A 404 the library writes, byte for byte.
fn answer_404(code: &str, description: &str) -> Vec<u8> {
    let body = format!(r#"{{"ok":false,"error_code":404,"error":"{code}","description":"{description}"}}"#);
    format!("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

fn admin_addr(srv: &Server) -> SocketAddr {
    let lines = srv.lines();
    let line = lines
        .iter()
        .find_map(|l| l.strip_prefix("botspace admin listening on http://"))
        .unwrap_or_else(|| panic!("no admin listening line in {lines:?}"));
    line.parse().unwrap()
}

#[test]
fn admin_addr_serves_the_host_api_alone_and_takes_it_off_the_public_port() {
    let mut srv = Server::start_rust_with(&["--admin-secret", SECRET, "--admin-addr", "127.0.0.1:0"]);
    // The second line names the admin listener, right after the first.
    assert!(srv.lines()[1].starts_with("botspace admin listening on http://"), "{:?}", srv.lines());
    let admin = admin_addr(&srv);
    assert_ne!(admin, srv.addr);
    let public = srv.addr;

    // The host API works on the admin listener only.
    let stats = admin_request("getStats", &json!({}));
    let ok = {
        let mut s = TcpStream::connect(admin).unwrap();
        s.write_all(&stats).unwrap();
        read_response(&mut s, &mut Vec::new())
    };
    assert_eq!(ok.result()["bots"], json!(1), "the demo bot");
    assert_eq!(raw(public, &stats), not_found());
    // Whatever the method, the credential or the query.
    assert_eq!(raw(public, b"GET /admin/getStats?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"), not_found());
    // The same bytes the library answers for an unknown host method.
    let unknown = b"POST /admin/noSuchMethod HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}";
    assert_eq!(raw(public, unknown), raw(admin, unknown));
    assert_eq!(raw(admin, unknown), not_found());

    // Bot methods and the gateway are on the public listener only.
    let created = {
        let mut s = TcpStream::connect(admin).unwrap();
        s.write_all(&admin_request("createBot", &json!({"display_name": "B", "handle": "b_bot"}))).unwrap();
        read_response(&mut s, &mut Vec::new()).result()
    };
    let token = created["token"].as_str().unwrap().to_string();
    let get_me = bot_request(&token, "getMe", None);
    let me = {
        let mut s = TcpStream::connect(public).unwrap();
        s.write_all(&get_me).unwrap();
        read_response(&mut s, &mut Vec::new())
    };
    assert_eq!(me.result()["id"], created["bot"]["id"]);
    assert_eq!(raw(admin, &get_me), not_found());
    let upgrade = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n"
    );
    assert_eq!(raw(admin, upgrade.as_bytes()), not_found());
    let mut gw = srv.gateway(&token, "");
    gw.hello();
    // A path the library has no method at answers the same on both.
    let nowhere = b"POST /nowhere HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(raw(admin, nowhere), not_found());
    assert_eq!(raw(public, nowhere), not_found());
    // A Telegram-style client puts the token in the path: both listeners
    // name the mistake and neither repeats the token (a client library
    // puts the description in its error, and logs print that).
    let in_path = format!("GET /bot{token}/getMe HTTP/1.1\r\nHost: x\r\n\r\n");
    let named = answer_404(
        "token_in_path",
        "botspace takes the bot token in the header Authorization: Bot <token>, not in the path; call POST /bot/<method>",
    );
    for listener in [public, admin] {
        let answer = raw(listener, in_path.as_bytes());
        assert_eq!(answer, named, "{}", String::from_utf8_lossy(&answer));
        let other = format!("POST /bot/{token}/getMe HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        let answer = raw(listener, other.as_bytes());
        assert!(!String::from_utf8_lossy(&answer).contains(&token), "{}", String::from_utf8_lossy(&answer));
    }

    // A 404 leaves the connection usable, pipelined answers in order.
    let mut s = srv.connect();
    let answers = srv.pipeline(&mut s, &[stats.clone(), get_me.clone()]);
    answers[0].assert_error(404, "method_not_found");
    assert_eq!(answers[1].result()["id"], created["bot"]["id"]);
    let mut s = TcpStream::connect(admin).unwrap();
    let answers = srv.pipeline(&mut s, &[get_me, stats]);
    answers[0].assert_error(404, "method_not_found");
    assert_eq!(answers[1].result()["bots"], json!(2));
    drop((s, gw));

    // A stop ends both listeners' accept loops.
    assert!(srv.interrupt().success());
    assert!(srv.lines().iter().any(|l| l.starts_with("botspace stopped")), "{:?}", srv.lines());
    assert!(TcpStream::connect(admin).is_err(), "the admin listener outlived the stop");
}

#[test]
fn without_admin_addr_one_listener_serves_everything() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET]);
    assert!(!srv.lines().iter().any(|l| l.contains("admin listening")), "{:?}", srv.lines());
    assert_eq!(srv.admin("getStats", &json!({}))["bots"], json!(1));
    let unknown = b"POST /admin/noSuchMethod HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(raw(srv.addr, unknown), not_found());
}

#[test]
fn the_usage_text_names_admin_addr() {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|p| p.parent()).unwrap().join("examples").join("server");
    // Built by the harness (Server::start_rust_with builds it once).
    drop(Server::start_rust_with(&["--admin-secret", SECRET]));
    let out = std::process::Command::new(bin).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("\n      --admin-addr <HOST:PORT>\n"), "{text}");
    assert!(text.contains("[env: BOTSPACE_ADMIN_ADDR]"), "{text}");
}

// ---------------------------------------------------------------------------
// The gateway's unsent-byte budget

/// `n` human messages of 20 KB (5 000 four-byte characters, the longest
/// text) in the bot's chat, sent pipelined; the bot's events 2..=n+1.
fn backlog(srv: &Server, w: &World, n: usize) {
    let text = "😀".repeat(5000);
    let mut s = srv.connect();
    let req = admin_request("sendUserMessage", &json!({"user_id": w.user_id, "chat_id": w.chat, "text": text}));
    for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
        let reqs = vec![req.clone(); chunk.len()];
        for r in srv.pipeline(&mut s, &reqs) {
            assert_eq!(r.status, 200);
        }
    }
}

/// A gateway connection over a raw socket (tungstenite would read for us):
/// the stream and the bytes that came with the 101.
fn raw_gateway(srv: &Server, token: &str) -> (TcpStream, Vec<u8>) {
    let mut s = srv.connect();
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
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

/// A masked client text frame (the bot's side).
fn send_text(s: &mut TcpStream, text: &str) {
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let p = text.as_bytes();
    assert!(p.len() < 126);
    let mut f = vec![0x81, 0x80 | p.len() as u8];
    f.extend_from_slice(&key);
    f.extend(p.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    s.write_all(&f).unwrap();
}

/// The next server frame (from `buf`, then the socket): opcode and payload.
fn next_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u8, Vec<u8>) {
    let deadline = Instant::now() + WAIT;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        if let Some(f) = ws_frame::server_frame(buf) {
            let (op, payload, len) = (f.opcode(), f.payload.to_vec(), f.len);
            buf.drain(..len);
            return (op, payload);
        }
        assert!(Instant::now() < deadline, "no whole frame within {WAIT:?}");
        match read_some(s, &mut chunk) {
            Ok(0) => panic!("EOF where a frame was expected"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Reads server frames until a close frame; returns the text frames before
/// it and the close's code and reason.
fn read_until_close(s: &mut TcpStream, mut buf: Vec<u8>) -> (Vec<String>, (u16, String)) {
    let mut texts = Vec::new();
    loop {
        match next_frame(s, &mut buf) {
            (0x1, p) => texts.push(String::from_utf8(p).expect("UTF-8 text frame")),
            (0x8, p) => {
                let code = u16::from_be_bytes([p[0], p[1]]);
                return (texts, (code, String::from_utf8_lossy(&p[2..]).into_owned()));
            }
            (op, _) => panic!("unexpected opcode {op:#x} after {} text frames", texts.len()),
        }
    }
}

/// The text frames are the hello, then events 1, 2, 3… without a gap;
/// returns the last seq.
fn events_in_order(texts: &[String]) -> i64 {
    let hello: Value = serde_json::from_str(&texts[0]).unwrap();
    assert_eq!(hello["op"], json!("hello"));
    let mut last = 0;
    for t in &texts[1..] {
        let v: Value = serde_json::from_str(t).unwrap();
        assert_eq!(v["op"], json!("event"), "{t:.200}");
        assert_eq!(v["seq"], json!(last + 1));
        last += 1;
    }
    last
}

/// 800 events of 20 KB (16 MB, well past what the kernel buffers of a
/// loopback connection hold), a bot that connects and reads nothing.
fn stalled_gateway(srv: &Server, tier: &str) -> (World, TcpStream, Vec<u8>) {
    let w = srv.world(tier);
    backlog(srv, &w, 800);
    let (s, buf) = raw_gateway(srv, &w.token);
    // The server fills the socket and its own buffer past the mark.
    std::thread::sleep(Duration::from_millis(1000));
    (w, s, buf)
}

#[test]
fn a_bot_that_does_not_read_is_closed_with_4008_and_resumes_from_its_ack() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--manual-clock"]);
    // A free-tier bot: one connection at a time, so its slot shows whether
    // the server still holds the session.
    let (w, mut s, buf) = stalled_gateway(&srv, "free");
    let interval = HEARTBEAT_MS as f64 / 1000.0;
    // While output waits, the bot's ack and heartbeats are still taken: the
    // heartbeat at 60 s keeps the session past two intervals (82.5 s) of
    // the connect, so what closes it at 85 s is the budget, not 4009.
    send_text(&mut s, r#"{"op":"ack","seq":500}"#);
    srv.advance(60.0);
    send_text(&mut s, r#"{"op":"heartbeat"}"#);
    std::thread::sleep(Duration::from_millis(500));
    srv.advance(2.0 * interval - 60.0 - 1.0);
    // Over the mark for 81.5 s: not yet.
    std::thread::sleep(Duration::from_millis(500));
    srv.raw_upgrade(&w.token, "").assert_error(429, "connection_limit");
    srv.advance(3.0);
    // Closed while the bot still reads nothing: the slot is free.
    let mut next = eventually("the slot of the slow consumer", || srv.try_gateway(&w.token, "").ok());
    // The close went right after the frame being written; the bot has 1 s
    // to read its way to it.
    let (texts, close) = read_until_close(&mut s, buf);
    assert_eq!(close, (4008, "slow_consumer".to_string()));
    let last = events_in_order(&texts);
    assert!(last < 801, "the close came after every event ({last}): nothing was held back");
    eprintln!("slow consumer: {last} events written before the 4008 close");
    assert_eof(&mut s);
    // The new connection resumes right after the ack sent while output
    // waited.
    let hello = next.hello();
    assert_eq!(hello["replay_from"], json!(501), "{hello}");
    assert_eq!(next.event()["seq"], json!(501));
}

#[test]
fn the_heartbeat_deadline_holds_while_output_waits() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--manual-clock"]);
    // A free-tier bot: one connection at a time, so its slot shows when the
    // server has ended the session.
    let (w, mut s, buf) = stalled_gateway(&srv, "free");
    // No heartbeat: past two intervals the session times out while the
    // bot still reads nothing (a server stuck in its write would not look
    // at the clock, and would hold the slot).
    let t0 = Instant::now();
    srv.advance((2 * HEARTBEAT_MS + 1) as f64 / 1000.0);
    let mut next = eventually("the slot of the timed-out session", || srv.try_gateway(&w.token, "").ok());
    next.hello();
    // Its close went ahead of the output the bot was not reading.
    let (texts, close) = read_until_close(&mut s, buf);
    assert_eq!(close, (4009, "session_timeout".to_string()));
    events_in_order(&texts);
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert_eof(&mut s);
}

#[test]
fn a_bot_that_reads_slowly_but_steadily_is_not_closed() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--manual-clock"]);
    let (_w, mut s, mut buf) = stalled_gateway(&srv, "official");
    // 32 events (640 KB) per 30 s of the clock, for 240 s: far slower than
    // the server writes, yet output moves, so the budget never runs out.
    let mut seen = 0;
    let mut frames = 0;
    for _ in 0..8 {
        send_text(&mut s, r#"{"op":"heartbeat"}"#);
        let until = frames + 32;
        while frames < until {
            let (op, p) = next_frame(&mut s, &mut buf);
            assert_eq!(op, 0x1, "{:?}", String::from_utf8_lossy(&p));
            frames += 1;
            let v: Value = serde_json::from_slice(&p).unwrap();
            if v["op"] == json!("event") {
                seen += 1;
                assert_eq!(v["seq"], json!(seen));
            }
        }
        // The server sees the socket take bytes before the clock moves.
        std::thread::sleep(Duration::from_millis(200));
        srv.advance(30.0);
    }
    // Then it reads the rest at full speed: every event, no close on the way.
    while seen < 801 {
        let (op, p) = next_frame(&mut s, &mut buf);
        assert_eq!(op, 0x1, "{:?} after seq {seen}", String::from_utf8_lossy(&p));
        let v: Value = serde_json::from_slice(&p).unwrap();
        if v["op"] == json!("event") {
            seen += 1;
            assert_eq!(v["seq"], json!(seen));
        }
    }
}

// ---------------------------------------------------------------------------
// 2 000 half-open connections

#[cfg(target_os = "linux")]
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok()).unwrap()
}

#[cfg(target_os = "linux")]
/// 2 000 connections that send half a request head and stop, then five
/// getMe on fresh connections; returns their times.
fn get_me_past_2000_half_open(args: &[&str]) -> Vec<Duration> {
    let limit = raise_nofile(u64::MAX);
    assert!(limit >= 4500, "open-file limit {limit}: 2 000 connections need both ends in this process and the server");
    let srv = Server::start_rust_with(args);
    let w = srv.world("standard");
    let half: Vec<TcpStream> = (0..2000)
        .map(|_| {
            let mut s = srv.connect();
            s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    // Every one of them reached the server (one thread each, or evicted).
    std::thread::sleep(Duration::from_millis(500));
    let took: Vec<Duration> = (0..5)
        .map(|_| {
            let t0 = Instant::now();
            let mut s = srv.connect();
            s.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
            let r = read_response(&mut s, &mut Vec::new());
            let took = t0.elapsed();
            assert_eq!(r.result()["id"], json!(w.bot_id));
            took
        })
        .collect();
    eprintln!("getMe past 2000 half-open connections ({args:?}): {took:?}, server threads {}", threads(srv.pid()));
    drop(half);
    took
}

#[cfg(target_os = "linux")]
fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

#[cfg(target_os = "linux")]
#[test]
fn getme_answers_within_100_ms_with_2000_half_open_connections_held() {
    let took = get_me_past_2000_half_open(&["--admin-secret", SECRET, "--max-connections", "4096"]);
    // The issue's figure; the median of five, so one unlucky scheduling on
    // a shared machine does not decide it.
    assert!(median(took.clone()) < Duration::from_millis(100), "{took:?}");
}

#[cfg(target_os = "linux")]
#[test]
fn getme_answers_within_100_ms_with_2000_half_open_connections_past_the_default_cap() {
    // 1 024 slots: the half-open connections that waited longest are shut.
    let took = get_me_past_2000_half_open(&["--admin-secret", SECRET]);
    assert!(median(took.clone()) < Duration::from_millis(100), "{took:?}");
}
