//! Both example servers holding their ground, over real TCP: a flood of
//! half-open connections under the OS default file limit (`ulimit -n 1024`,
//! not raised by the test), a thousand clients that pipeline requests and
//! never read the answers (bounded memory), a client that reads nothing
//! for the library's write timeout (30 s) dropped, a stop (SIGTERM) that answers
//! every request already sent, and a full disk answered with 503
//! `storage_full` (and `/readyz` with it) and recovered from without a
//! restart. Each scenario runs
//! against the Rust server (`rust::`) and the C server (`c::`).

#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wire::*;

servers! {
    two_thousand_half_open_connections_under_the_default_file_limit_leave_get_me_within_100_ms,
    a_thousand_clients_pipelining_without_reading_keep_the_server_under_256_mb_and_get_me_within_100_ms,
    a_client_that_reads_none_of_its_answers_for_the_write_timeout_is_dropped,
    a_stop_answers_every_request_already_sent_and_closes_gateways_with_1001,
    a_full_disk_answers_503_storage_full_writes_nothing_and_recovers_once_space_is_freed,
}

/// `GET path` (no credential): status and JSON body.
fn get(srv: &Server, path: &str) -> (u16, Value) {
    let mut r = agent().get(format!("{}{}", srv.base, path)).call().unwrap_or_else(|e| panic!("GET {path}: {e}"));
    (r.status().as_u16(), serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
}

/// `(soft, hard)` "Max open files" of a process.
fn file_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc/PID/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("Max open files");
    let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (f[0], f[1])
}

/// Every message of `chat`, in order, by the host API (pages of 100).
fn history(srv: &Server, chat: &str) -> Vec<Value> {
    let mut all: Vec<Value> = Vec::new();
    loop {
        let after = all.last().map(|m| m["message_id"].clone()).unwrap_or(json!("0"));
        let page = srv.admin("getChatHistory", &json!({"chat_id": chat, "after_message_id": after, "limit": 100}));
        let page = page.as_array().expect("an array").clone();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

fn texts(srv: &Server, chat: &str) -> Vec<String> {
    history(srv, chat).iter().filter_map(|m| m["text"].as_str().map(str::to_string)).collect()
}

fn send(token: &str, chat: &str, text: &str) -> Vec<u8> {
    bot_request(token, "sendMessage", Some(&json!({"chat_id": chat, "text": text})))
}

// ---------------------------------------------------------------------------
// The default file limit

fn two_thousand_half_open_connections_under_the_default_file_limit_leave_get_me_within_100_ms(bin: &Path) {
    // The test's own side of 2 000 connections needs more than 1 024 files;
    // the server's limit is set by its shell below.
    let own = raise_nofile(20_000);
    assert!(own >= 2_200, "this test needs 2 200 files of its own (hard limit {own})");
    // Soft and hard limit 1 024 (nothing to raise), then soft 1 024 under a
    // hard 4 096 (raised at start: the whole flood is held).
    for (setup, limits) in [("ulimit -n 1024", (1024, 1024)), ("ulimit -Sn 1024 && ulimit -Hn 4096", (4096, 4096))] {
        let srv = Server::start_in_shell(&[], setup, &[], bin, &["--db", ":memory:", "--admin-secret", SECRET]);
        assert_eq!(file_limits(srv.pid()), limits, "{setup}");
        let w = srv.world("official");
        let half: Vec<TcpStream> = (0..2000)
            .map(|_| {
                let mut s = TcpStream::connect(srv.addr).expect("connect");
                let _ = s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHo");
                s
            })
            .collect();
        // Let the server accept and read them all.
        std::thread::sleep(Duration::from_millis(500));
        let t0 = Instant::now();
        let mut s = srv.connect();
        s.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
        let r = read_response(&mut s, &mut Vec::new());
        let took = t0.elapsed();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.result()["id"], json!(w.bot_id));
        eprintln!("getMe past 2 000 half-open connections ({setup}): {took:?}");
        assert!(took < Duration::from_millis(100), "took {took:?}");
        drop(half);
    }
}

// ---------------------------------------------------------------------------
// Pipelining without reading

/// A `/proc/PID/status` figure in bytes (`VmRSS:`, `VmHWM:`: kB there).
fn vm_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    kb * 1024
}

/// A connection whose receive buffer is 4 KiB, set before the handshake
/// so that the window it offers is that small.
fn connect_with_small_receive_buffer(addr: std::net::SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let std::net::SocketAddr::V4(v4) = addr else { panic!("the servers listen on 127.0.0.1") };
    // SAFETY: plain socket calls on a descriptor owned here, then handed to
    // TcpStream (which closes it).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let size: libc::c_int = 4096;
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        stream
    }
}

/// What the servers may hold for the whole flood (docs/reliability.md,
/// "Memory per connection"): the C server keeps at most the library's
/// 64 KiB budget of unsent answers per connection plus the 28 KB answer
/// that crossed it (about 90 MB for 1 000), hyper at most two answers;
/// the rest is room for the process itself and the ASan build's allocator.
/// Before the budget, the C server held 2.7 GB here.
const FLOOD_RSS_BOUND: u64 = 256 << 20;

/// The bound the run checks. The release servers are held to
/// `FLOOD_RSS_BOUND` itself. The C server's AddressSanitizer build runs the
/// same flood to find memory errors under it, but its resident memory is
/// not the server's: ASan adds shadow memory, redzones around every
/// allocation, a quarantine of freed blocks and a new block on every
/// `realloc`, and its documentation gives a typical overhead of 3x.
/// The C server is held to half of it: its connection drops what the
/// socket took from its output buffer (before, the sent part stayed until
/// the client had read everything, so each connection also held what its
/// kernel send buffer took, which grows with the kernel's autotuning).
/// Measured here, the flood peaks at 55-84 MB in the C server's release
/// build and at 122-135 MB under ASan.
fn flood_rss_bound(bin: &Path) -> u64 {
    let name = bin.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let own = if name.starts_with("botspace-server") { FLOOD_RSS_BOUND / 2 } else { FLOOD_RSS_BOUND };
    if name.ends_with("-asan") {
        3 * own
    } else {
        own
    }
}

fn a_thousand_clients_pipelining_without_reading_keep_the_server_under_256_mb_and_get_me_within_100_ms(bin: &Path) {
    // The test's own side needs more than 1 024 files; the server's is set
    // to 1 024 (soft and hard) by its shell. 1 000 clients, the probe and
    // the set-up's connections fit its 1 024 descriptors, not the default
    // cap (the limit less 64), hence --max-connections.
    let own = raise_nofile(20_000);
    assert!(own >= 1_200, "this test needs 1 200 files of its own (hard limit {own})");
    let args = ["--db", ":memory:", "--admin-secret", SECRET, "--max-connections", "1010"];
    let srv = Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &args);
    assert_eq!(file_limits(srv.pid()), (1024, 1024));
    let w = srv.world("official");
    let mut probe = srv.connect();
    probe.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
    assert_eq!(read_response(&mut probe, &mut Vec::new()).status, 200);
    // 100 requests for the console's script (28 KB answers, no credentials
    // needed) on each of 1 000 connections with a 4 KiB receive buffer:
    // 2.8 GB of answers that nobody reads.
    let one = b"GET /admin/console/app.js HTTP/1.1\r\nHost: x\r\n\r\n";
    let pipeline = one.repeat(100);
    let flood: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = connect_with_small_receive_buffer(srv.addr);
            s.write_all(&pipeline).expect("send the pipeline");
            s
        })
        .collect();
    // The server reads them all and answers as far as it may.
    std::thread::sleep(Duration::from_millis(1500));
    let rss = vm_bytes(srv.pid(), "VmRSS:");
    // Five getMe on fresh connections, 50 ms apart, while the server still
    // works through what the kernel takes of the flood's answers; the
    // median must be within 100 ms (as in tests/server_hardening.rs: the
    // machine that runs the tests is shared).
    let mut took: Vec<Duration> = (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            let t0 = Instant::now();
            let mut s = srv.connect();
            s.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
            let r = read_response(&mut s, &mut Vec::new());
            let took = t0.elapsed();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.result()["id"], json!(w.bot_id));
            took
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let peak = vm_bytes(srv.pid(), "VmHWM:");
    eprintln!(
        "1 000 clients pipelining without reading: RSS {} MB (peak {} MB, bound {} MB), five getMe {took:?}",
        rss >> 20,
        peak >> 20,
        flood_rss_bound(bin) >> 20
    );
    assert!(peak < flood_rss_bound(bin), "peak resident memory {} MB", peak >> 20);
    took.sort();
    assert!(took[2] < Duration::from_millis(100), "median getMe {:?}", took[2]);
    // Held back, not dropped: a client that reads gets all 100 answers, in
    // order, the held-back ones framed as its reading drains the rest.
    let mut first = flood.into_iter().next().unwrap();
    let mut buf = Vec::new();
    for i in 0..100 {
        let r = read_response(&mut first, &mut buf);
        assert_eq!(r.status, 200, "answer {i}");
        assert_eq!(r.header("content-type"), Some("text/javascript; charset=utf-8"), "answer {i}");
        assert!(r.body == include_bytes!("../src/console/app.js"), "answer {i}: {} bytes", r.body.len());
    }
}

/// A client that pipelines requests for 2.8 MB of answers and reads
/// none of them: the server's writes stall, and the library's HTTP
/// connection drops it at its write timeout (30 s; `Expired::Write`,
/// which both servers act on through `poll_timeout`/`handle_timeout`, no
/// timer of their own). Held, it would get every answer once it reads.
/// About 31 s of wall time.
fn a_client_that_reads_none_of_its_answers_for_the_write_timeout_is_dropped(bin: &Path) {
    let args = ["--db", ":memory:", "--admin-secret", SECRET];
    let srv = Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &args);
    let w = srv.world("official");
    let one = b"GET /admin/console/app.js HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut s = connect_with_small_receive_buffer(srv.addr);
    s.write_all(&one.repeat(100)).expect("send the pipeline");
    std::thread::sleep(Duration::from_millis(
        botspace::connection::limits::WRITE_TIMEOUT_MS + botspace::connection::limits::TICK_MS + 1000,
    ));
    // Dropped: what the kernels had buffered for it, then the end (EOF, or
    // a reset). An open connection would give every answer and then wait
    // (keep-alive): the read would time out.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0usize;
    let mut chunk = [0u8; 64 * 1024];
    let end = loop {
        match std::io::Read::read(&mut s, &mut chunk) {
            Ok(0) => break "eof",
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("the connection is still open after the write timeout: {e} after {got} bytes"),
        }
    };
    eprintln!("a client that read nothing for the write timeout: {end} after {got} bytes buffered for it");
    let all = 100 * include_bytes!("../src/console/app.js").len();
    assert!(got < all, "{got} bytes of {all}: every answer came");
    // The server goes on serving.
    let mut probe = srv.connect();
    probe.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
    assert_eq!(read_response(&mut probe, &mut Vec::new()).status, 200);
}

// ---------------------------------------------------------------------------
// Stop

fn a_stop_answers_every_request_already_sent_and_closes_gateways_with_1001(bin: &Path) {
    let dir = temp_dir("stop");
    let db = dir.join("botspace.db");
    let db = db.to_str().unwrap();
    let args = ["--db", db, "--admin-secret", SECRET];
    let mut srv = Server::start_in_shell(&[], "true", &[], bin, &args);
    let w = srv.world("official");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    assert_eq!(gw.event(), w.bot_started());
    gw.ack(1);
    // Idle keep-alive connections, each with a request answered.
    let mut conns: Vec<(TcpStream, Vec<u8>)> = (0..16)
        .map(|_| {
            let mut s = srv.connect();
            let mut buf = Vec::new();
            s.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
            assert_eq!(read_response(&mut s, &mut buf).status, 200);
            (s, buf)
        })
        .collect();
    // Frozen, the server cannot read: the requests wait in its sockets.
    srv.signal("-STOP");
    let mut sent: Vec<Vec<String>> = Vec::new();
    for (i, (s, _)) in conns.iter_mut().enumerate() {
        // The first connection pipelines three.
        let n = if i == 0 { 3 } else { 1 };
        let t: Vec<String> = (0..n).map(|k| format!("sent before the stop {i}.{k}")).collect();
        let bytes: Vec<u8> = t.iter().flat_map(|t| send(&w.token, &w.chat, t)).collect();
        s.write_all(&bytes).unwrap();
        sent.push(t);
    }
    std::thread::sleep(Duration::from_millis(200));
    srv.signal("-TERM");
    srv.signal("-CONT");
    let mut acked = Vec::new();
    for ((s, buf), t) in conns.iter_mut().zip(&sent) {
        for text in t {
            let r = read_response(s, buf);
            assert_eq!(r.status, 200, "{text}: {}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.result()["text"], json!(text));
            acked.push(text.clone());
        }
    }
    assert_eq!(gw.closed(), (1001, "server_shutdown".to_string()));
    let status = srv.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(srv.lines().iter().any(|l| l.starts_with("botspace stopped")), "{:?}", srv.lines());
    drop(srv);
    // Every answered request is there after a restart.
    let again = Server::start_in_shell(&[], "true", &[], bin, &args);
    // Connections were answered in whatever order the server took them.
    let mut stored = texts(&again, &w.chat);
    stored.sort();
    acked.sort();
    assert_eq!(stored, acked);
    drop(again);
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------------------
// A full disk

/// Writes into `path` until the file system says it is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![0x55u8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    let _ = f.sync_all();
}

fn a_full_disk_answers_503_storage_full_writes_nothing_and_recovers_once_space_is_freed(bin: &Path) {
    // A 4 MiB tmpfs mounted in the server's own mount namespace: nothing to
    // unmount afterwards, the namespace ends with the process.
    // As root `unshare -m`; otherwise in a user namespace of its own
    // (`unshare -r -m`), where the kernel allows unprivileged ones.
    let can = |wrapper: &[&str]| {
        std::process::Command::new("unshare")
            .args(wrapper)
            .args(["sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let Some(wrapper) = [&["-m"][..], &["-r", "-m"][..]].into_iter().find(|w| can(w)) else {
        eprintln!(
            "SKIPPED: cannot mount a tmpfs in a new mount namespace here (unshare -m and unshare -r -m both failed: no CAP_SYS_ADMIN, no user namespaces, or no unshare(1))"
        );
        return;
    };
    let wrapper: Vec<&str> = std::iter::once("unshare").chain(wrapper.iter().copied()).collect();
    let dir: PathBuf = temp_dir("full-disk");
    let mnt = dir.to_str().unwrap().to_string();
    let db = format!("{mnt}/botspace.db");
    let mut srv = Server::start_in_shell(
        &wrapper,
        r#"mount -t tmpfs -o size=4m tmpfs "$BOTSPACE_TEST_MNT""#,
        &[("BOTSPACE_TEST_MNT", &mnt)],
        bin,
        &["--db", &db, "--admin-secret", SECRET],
    );
    // The mount as the server sees it.
    let inside = PathBuf::from(format!("/proc/{}/root{mnt}", srv.pid()));
    assert!(inside.join("botspace.db").exists(), "the database is not on the tmpfs");
    let w = srv.world("official");
    let text = "x".repeat(3000);
    let mut acked: Vec<String> = Vec::new();
    let ok = |srv: &Server, t: String, acked: &mut Vec<String>| {
        let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": t}));
        assert_eq!(r.status, 200, "{}", r.body);
        acked.push(t);
    };
    for i in 0..5 {
        ok(&srv, format!("{i} before {text}"), &mut acked);
    }
    fill(&inside.join("filler"));
    // Writes are refused with the named error once the file system's last
    // pages are used up (SQLite may still fit a few in pages it holds).
    let mut refused = 0;
    let mut refused_texts = Vec::new();
    for i in 0..400 {
        let t = format!("{i} while full {text}");
        let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": t}));
        if r.status == 200 {
            assert_eq!(refused, 0, "a write succeeded after a refusal with the disk still full");
            acked.push(t);
            continue;
        }
        assert_eq!(
            r.body,
            json!({"ok": false, "error_code": 503, "error": "storage_full",
                   "description": "the database's disk is full, nothing was written; safe to retry once space is freed"})
        );
        assert_eq!(r.header("retry-after"), Some("5"));
        refused_texts.push(t);
        refused += 1;
        if refused == 20 {
            break;
        }
    }
    assert_eq!(refused, 20, "the disk never filled up");
    // A pipelined group: every answer is a 503 storage_full, none a 500.
    let mut s = srv.connect();
    let group: Vec<String> = (0..8).map(|i| format!("{i} in a full group {text}")).collect();
    let reqs: Vec<Vec<u8>> = group.iter().map(|t| send(&w.token, &w.chat, t)).collect();
    for r in srv.pipeline(&mut s, &reqs) {
        r.assert_error(503, "storage_full");
    }
    refused_texts.extend(group);
    // Reads go on.
    assert_eq!(srv.bot(&w.token, "getMe", &json!({})).status, 200);
    // Not ready while writes cannot be taken, alive all along.
    let full = json!({"ok": false, "error_code": 503, "error": "storage_full",
                      "description": "the database's disk is full, nothing was written; safe to retry once space is freed"});
    assert_eq!(get(&srv, "/readyz"), (503, full));
    assert_eq!(get(&srv, "/healthz"), (200, json!({"ok": true})));
    // Said once, not once per refusal.
    let said: Vec<String> = srv.errors().into_iter().filter(|l| l.starts_with("storage full:")).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    // Space back: writes succeed again, without a restart.
    std::fs::remove_file(inside.join("filler")).unwrap();
    // Ready again by itself: the readiness check's own write goes through.
    assert_eq!(get(&srv, "/readyz"), (200, json!({"ok": true})));
    for i in 0..5 {
        ok(&srv, format!("{i} after {text}"), &mut acked);
    }
    // Nothing acknowledged is lost, nothing refused was written.
    assert_eq!(texts(&srv, &w.chat), acked);
    srv.signal("-TERM");
    assert!(srv.wait_exit(Duration::from_secs(10)).success());
    let _ = std::fs::remove_dir_all(dir);
}
