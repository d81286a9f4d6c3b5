//! Command-line options of the example servers, over real TCP:
//! `--admin-secret-file`, `--operational-key`, `--max-connections`,
//! `--request-timeout`, `--admin-addr`, the idle timeout, the gateway's
//! slow-consumer close, `--gateway-poll-interval-ms` (its range) and the same
//! options from `BOTSPACE_*` variables and a `--config` file (precedence, errors).
//! Each scenario takes the server's start function and
//! runs against the Rust server (`rust::`) and the C server (`c::`; see
//! `Server::start_c_with`); the list at the end says which run where.

#[macro_use]
mod wire;

use serde_json::json;
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use tungstenite::Message;
use wire::*;

/// `Server::start_rust_with` or `Server::start_c_with`.
type Start = fn(&[&str]) -> Server;

servers! {
    both: [
        the_admin_secret_can_come_from_a_file,
        the_operational_key_gives_official_bots_their_copy,
        past_max_connections_a_new_connection_gets_503_and_a_freed_slot_serves_again,
        a_request_trickled_past_the_request_timeout_gets_408_and_the_connection_closes,
        bare_lf_requests_get_their_answer,
        half_open_connections_past_the_cap_make_room_for_a_real_request,
        an_idle_keep_alive_connection_is_closed_after_the_idle_timeout,
        the_gateway_poll_interval_is_taken_from_10_to_60000_ms,
        two_thousand_half_open_connections_leave_get_me_within_100_ms,
        with_admin_addr_each_listener_serves_its_own_paths,
        a_gateway_reader_that_stays_behind_gets_4008_and_resumes_after_its_ack,
    ],
    // Scenarios the Rust server does not pass yet: none since its rebuild
    // on hyper.
    c_only: [],
    binary: [
        out_of_files_a_waiting_connection_makes_room_and_nothing_spins,
        a_gateway_poll_interval_outside_10_to_60000_ms_is_refused_with_a_message_and_a_non_zero_exit,
        a_database_timeout_outside_100_to_600000_ms_is_refused_and_one_inside_is_taken,
        an_admin_secret_under_16_characters_is_refused_at_start_naming_the_option_and_the_rule,
        the_tour_gives_a_working_token_however_often_the_server_starts,
        every_flag_in_help_names_its_environment_variable,
        a_server_configured_only_through_the_environment_serves,
        a_production_start_from_the_environment_creates_no_bot_and_prints_no_token,
        the_start_up_lines_say_the_bound_addresses_then_the_generated_secret_and_the_clock,
        a_flag_beats_the_environment_which_beats_the_config_file,
        a_bad_value_from_the_environment_or_the_file_names_its_source,
        the_operational_key_can_come_from_a_file_named_by_the_environment,
        with_log_format_json_every_line_is_json_and_no_secret_token_or_text_is_logged,
        with_log_format_json_a_start_error_is_a_json_line_on_stderr,
        the_librarys_log_records_are_printed_as_the_servers_own_lines,
        the_level_is_botspace_log_else_rust_log,
    ],
}

fn the_admin_secret_can_come_from_a_file(start: Start) {
    let dir = temp_dir("secret-file");
    let path = dir.join("admin-secret");
    std::fs::write(&path, "from-a-file-secret-0001\n").unwrap();
    let srv = start(&["--admin-secret-file", path.to_str().unwrap()]);
    let ok = srv.post("/admin/getStats", Some("Admin from-a-file-secret-0001"), &json!({}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    // BOTSPACE_ADMIN_SECRET (set by the harness) loses to the file.
    srv.post("/admin/getStats", Some(&format!("Admin {SECRET}")), &json!({})).assert_error(401, "invalid_token");
    let _ = std::fs::remove_dir_all(dir);
}

fn the_operational_key_gives_official_bots_their_copy(start: Start) {
    let key: String = (0u8..32).map(|b| format!("{b:02x}")).collect();
    let srv = start(&["--admin-secret", SECRET, "--operational-key", &key]);
    let b = srv.admin("createBot", &json!({"display_name": "Ops", "handle": "ops", "official": true}));
    let copy = srv.admin("getOperationalToken", &json!({"bot_id": b["bot"]["id"]}));
    assert_eq!(copy["token"], b["token"]);
}

/// At the cap with every connection busy, a new connection gets the core's
/// busy refusal: the 503 whether or not it wrote, EOF after it, a close
/// at the end of the refusal's linger; then a freed slot serves again.
fn past_max_connections_a_new_connection_gets_503_and_a_freed_slot_serves_again(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--max-connections", "4"]);
    let w = srv.world("standard");
    // Four gateway connections hold every slot: busy, so none makes room
    // (an idle or half-open connection would).
    let gws: Vec<_> = (0..4)
        .map(|_| {
            let mut g = srv.gateway(&w.token, "");
            g.hello();
            g
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(5);
    let refused = loop {
        // Nothing sent: the 503 comes unasked, and no unread request makes
        // the close a reset.
        let mut s = srv.connect();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf);
        // The Rust server counts a connection once its thread started, and
        // the fixtures' own connections may still be closing.
        if r.status == 503 || Instant::now() > until {
            assert_eof(&mut s);
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    refused.assert_error(503, "server_busy");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(
        refused.json(),
        json!({"ok": false, "error_code": 503, "error": "server_busy", "description": "too many connections; retry later"})
    );
    // A client that writes its request before it reads (several KiB of a
    // body no server takes at the cap) reads the whole 503 and then EOF,
    // not a reset: the core's refusal discards what it sends while it
    // lingers.
    let linger = Duration::from_millis(botspace::connection::limits::REFUSAL_LINGER_MS);
    let t0 = Instant::now();
    let mut s = srv.connect();
    let mut partial = b"POST /bot/sendMessage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n".to_vec();
    partial.resize(partial.len() + 24 * 1024, b'x');
    s.write_all(&partial).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match read_some(&mut s, &mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("the refused client got {e} (not EOF) after {:?}", String::from_utf8_lossy(&got)),
        }
    }
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&botspace::connection::server_busy()));
    let r = read_response(&mut s, &mut got);
    r.assert_error(503, "server_busy");
    assert_eq!(
        r.json(),
        json!({"ok": false, "error_code": 503, "error": "server_busy", "description": "too many connections; retry later"})
    );
    // Then the server closes the refused socket at the end of the linger:
    // what the client still writes is discarded until then, and meets a
    // closed socket (a reset) after; within the bound, not never.
    let ended = loop {
        if s.write_all(&[b'x'; 100]).is_err() {
            break t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "the refusal still takes bytes after {:?}", t0.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("a busy refusal closed {ended:?} after the connect");
    assert!(ended >= linger, "closed after {ended:?}, before the refusal's linger ({linger:?}) ended");
    assert!(ended < linger + Duration::from_millis(1500), "closed after {ended:?}");
    for g in gws {
        g.cut();
    }
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let r = srv.post("/bot/getMe", None, &json!({}));
        if r.status == 401 {
            break; // served again (no token: 401, not 503)
        }
        assert!(Instant::now() < until, "still refused after the gateway connections closed: {}", r.status);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn a_request_trickled_past_the_request_timeout_gets_408_and_the_connection_closes(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--request-timeout", "0.5"]);
    let mut s = srv.connect();
    let t0 = Instant::now();
    // One byte every 100 ms: never idle, never complete.
    for b in b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\nX-Slow: " {
        if s.write_all(&[*b]).is_err() {
            break; // closed on us: what we want
        }
        std::thread::sleep(Duration::from_millis(100));
        if t0.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf);
    r.assert_error(408, "request_timeout");
    assert_eq!(
        r.json(),
        json!({"ok": false, "error_code": 408, "error": "request_timeout", "description": "the request did not arrive in time"})
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "closed after {:?}", t0.elapsed());
    assert_eof(&mut s);
    // The server told the library: the 408 is in the metrics, and the
    // library's line in the log.
    assert_eq!(metric(&srv, "botspace_request_timeouts_total"), 1.0);
    assert_eq!(
        logged(&srv, "request_timeout", 1),
        ["request timed out: answered 408, it did not arrive whole in time event=request_timeout"]
    );
}

/// The library's operator lines for `event` the server printed (stdout
/// and stderr, text or JSON), waiting up to 5 s for at least `n`.
fn logged(srv: &Server, event: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found: Vec<String> = srv
            .lines()
            .into_iter()
            .chain(srv.errors())
            .filter(|l| l.contains(&format!(" event={event}")) || l.contains(&format!(r#""event":"{event}""#)))
            .collect();
        if found.len() >= n || Instant::now() >= deadline {
            assert!(found.len() >= n, "{n} `{event}` lines wanted, got {found:#?}");
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One sample of `GET /admin/metrics`, by its exact series text.
fn metric(srv: &Server, series: &str) -> f64 {
    let mut r = agent()
        .get(format!("{}/admin/metrics", srv.base))
        .header("Authorization", format!("Admin {SECRET}"))
        .call()
        .expect("GET /admin/metrics");
    assert_eq!(r.status(), 200);
    let text = r.body_mut().read_to_string().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} not in the exposition:\n{text}"))
        .parse()
        .unwrap()
}

fn bare_lf_requests_get_their_answer(start: Start) {
    let srv = start(&["--admin-secret", SECRET]);
    let mut s = srv.connect();
    s.write_all(b"POST /bot/getMe HTTP/1.1\nHost: x\n\n").unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf).assert_error(401, "missing_authorization");
}

fn half_open_connections_past_the_cap_make_room_for_a_real_request(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--max-connections", "50"]);
    // Three times the cap of connections that send half a head and stop.
    let half: Vec<_> = (0..150)
        .map(|_| {
            let mut s = srv.connect();
            let _ = s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHo");
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let mut s = srv.connect();
    s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf).assert_error(401, "missing_authorization");
    let took = t0.elapsed();
    eprintln!("getMe past 150 half-open connections (cap 50): {took:?}");
    // A liveness bound, not a benchmark: the answer must not wait for the
    // half-open connections' request timeout (30 s).
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Each connection past the cap evicted one that waited: the 100 past
    // it, the getMe's, and the scrape's own.
    assert_eq!(metric(&srv, "botspace_connection_evictions_total"), 102.0);
    let lines = logged(&srv, "connection_evicted", 102);
    assert_eq!(lines.len(), 102);
    assert!(lines.iter().all(|l| l == "connection evicted: the oldest waiting connection was closed to admit a new one at the connection limit event=connection_evicted"), "{lines:#?}");
    drop(half);
}

fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(start: Start) {
    // The default is 120 s; the test takes 2.
    let srv = start(&["--admin-secret", SECRET, "--idle-timeout", "2"]);
    let mut s = srv.connect();
    // Before the request: the server's idle time starts once it has
    // answered, which is after this and before the client reads the answer
    // (a server that wakes at the deadline closes within the transit time
    // of the answer, as measured from the read).
    let t0 = Instant::now();
    s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_response(&mut s, &mut Vec::new()).assert_error(401, "missing_authorization");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eof(&mut s);
    let idle = t0.elapsed();
    eprintln!("idle keep-alive connection closed after {idle:?}");
    // Both servers look at idle connections about once a second.
    assert!(idle >= Duration::from_secs(2) && idle < Duration::from_secs(5), "closed after {idle:?}");
}

fn two_thousand_half_open_connections_leave_get_me_within_100_ms(start: Start) {
    #[cfg(target_os = "linux")]
    {
        let limit = raise_nofile(20_000);
        assert!(limit >= 5_000, "the file limit ({limit}) is too low for 2 000 connections a side");
    }
    // The default cap (1 024): half the flood is evicted on the way; 4 096:
    // every half-open connection is held while getMe comes.
    for cap in ["1024", "4096"] {
        let srv = start(&["--admin-secret", SECRET, "--max-connections", cap]);
        let half: Vec<_> = (0..2000)
            .map(|_| {
                let mut s = srv.connect();
                let _ = s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHo");
                s
            })
            .collect();
        // Let the server accept and read them all.
        std::thread::sleep(Duration::from_millis(500));
        let t0 = Instant::now();
        let mut s = srv.connect();
        s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        read_response(&mut s, &mut Vec::new()).assert_error(401, "missing_authorization");
        let took = t0.elapsed();
        eprintln!("getMe past 2 000 half-open connections (--max-connections {cap}): {took:?}");
        assert!(took < Duration::from_millis(100), "took {took:?}");
        drop(half);
    }
}

fn with_admin_addr_each_listener_serves_its_own_paths(start: Start) {
    // A free port for the host API (bound, read, released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let admin_addr = format!("127.0.0.1:{port}");
    let srv = start(&["--admin-secret", SECRET, "--admin-addr", &admin_addr]);
    let admin_base = format!("http://{admin_addr}");
    let post = |base: &str, path: &str, auth: Option<&str>| {
        let mut req = agent().post(format!("{base}{path}"));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        Resp::from_ureq(req.content_type("application/json").send("{}").unwrap())
    };
    let admin_auth = format!("Admin {SECRET}");
    // The public listener: /admin/ is not there, whoever asks.
    let r = post(&srv.base, "/admin/getStats", Some(&admin_auth));
    r.assert_error(404, "method_not_found");
    assert_eq!(r.body["description"], json!("no method at this path (method names are case-sensitive)"));
    // The admin listener serves the host API, and only it.
    let r = post(&admin_base, "/admin/getStats", Some(&admin_auth));
    assert_eq!(r.status, 200, "{}", r.body);
    post(&admin_base, "/admin/getStats", Some("Admin wrong-secret-0000000")).assert_error(401, "invalid_token");
    let r = post(&admin_base, "/bot/getMe", None);
    r.assert_error(404, "method_not_found");
    assert_eq!(r.body["description"], json!("no method at this path (method names are case-sensitive)"));
    // Bots use the public one: getMe and the gateway.
    let created = {
        let body = json!({"display_name": "Pub", "handle": "pub_bot", "quota_tier": "standard"}).to_string();
        let req = agent().post(format!("{admin_base}/admin/createBot")).header("Authorization", &admin_auth);
        let r = Resp::from_ureq(req.content_type("application/json").send(body).unwrap());
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["result"].clone()
    };
    let token = created["token"].as_str().unwrap();
    assert_eq!(srv.bot(token, "getMe", &json!({})).status, 200);
    srv.gateway(token, "").hello();
    // The gateway path on the admin listener is a bot path: 404 too.
    let mut s = std::net::TcpStream::connect(&admin_addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut s, &mut Vec::new()).assert_error(404, "method_not_found");
}

/// Reads a gateway connection that stopped reading: every text frame,
/// then the close frame; returns (frames read, code, reason).
fn read_to_close(gw: &mut Gw) -> (usize, u16, String) {
    let mut n = 0;
    loop {
        match gw.ws.read() {
            Ok(Message::Text(_)) => n += 1,
            Ok(Message::Close(Some(f))) => return (n, u16::from(f.code), f.reason.as_str().to_string()),
            Ok(Message::Ping(_)) | Ok(Message::Pong(_)) => {}
            Ok(m) => panic!("after {n} frames: expected text or close, got {m:?}"),
            Err(e) => panic!("after {n} frames, no close frame: {e}"),
        }
    }
}

fn a_gateway_reader_that_stays_behind_gets_4008_and_resumes_after_its_ack(start: Start) {
    let srv = start(&["--admin-secret", SECRET, "--manual-clock"]);
    let w = srv.world("official");
    // 1 000 events of 20 KB (20 MB): more than the high-water mark plus
    // what the loopback sockets buffer.
    let text = "😀".repeat(5000);
    for _ in 0..1000 {
        srv.say(&w.user_id, &w.chat, &text);
    }
    // A reader that takes a few events, acks them, then reads nothing but
    // still heartbeats; another that reads nothing and sends nothing.
    let mut slow = srv.gateway(&w.token, "");
    slow.hello();
    assert_eq!(slow.event()["seq"], json!(1));
    let mut last = 0;
    for _ in 0..3 {
        last = slow.event()["seq"].as_i64().unwrap();
    }
    slow.ack(last);
    let mut mute = srv.gateway(&w.token, "");
    mute.hello();
    std::thread::sleep(Duration::from_millis(1000));
    // 60 s: under the heartbeat timeout (82.5 s) for both.
    srv.advance(60.0);
    slow.send(r#"{"op":"heartbeat"}"#);
    std::thread::sleep(Duration::from_millis(300));
    // 150 s: `slow` has stayed behind longer than the heartbeat timeout
    // (82.5 s; from 60 s at the latest: its heartbeat's segment may let its
    // kernel take a few more frames then) but heartbeated at 60 s; `mute`
    // missed its heartbeat deadline, which holds though its output is
    // pending.
    srv.advance(90.0);
    let t0 = Instant::now();
    let (frames, code, reason) = read_to_close(&mut slow);
    eprintln!("slow consumer: {frames} frames read after the decision, close in {:?}", t0.elapsed());
    assert_eq!((code, reason.as_str()), (4008, "slow_consumer"));
    // Then the server drops the connection (within about 1 s).
    let mut rest = [0u8; 4096];
    let stream = slow.ws.get_mut();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    loop {
        match read_some(stream, &mut rest) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server did not drop the slow consumer: {e}"),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "dropped after {:?}", t0.elapsed());
    let (_, code, reason) = read_to_close(&mut mute);
    assert_eq!((code, reason.as_str()), (4009, "session_timeout"));
    // Both ends are counted by reason; neither session is open any more.
    assert_eq!(metric(&srv, r#"botspace_gateway_closes_total{reason="slow_consumer"}"#), 1.0);
    assert_eq!(
        logged(&srv, "gateway_slow_consumer", 1),
        [format!(
            "gateway session closed: slow consumer event=gateway_slow_consumer bot_id={} close_code=4008",
            w.bot_id
        )]
    );
    assert_eq!(metric(&srv, r#"botspace_gateway_closes_total{reason="session_timeout"}"#), 1.0);
    assert_eq!(metric(&srv, "botspace_gateway_sessions"), 0.0);
    // The server still answers, and the reader resumes after its ack.
    assert_eq!(srv.bot(&w.token, "getMe", &json!({})).status, 200);
    let mut again = srv.gateway(&w.token, &format!("?after={last}"));
    let hello = again.hello();
    assert_eq!(hello["replay_from"], json!(last + 1), "{hello}");
    assert_eq!(again.event()["seq"], json!(last + 1));
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn out_of_files_a_waiting_connection_makes_room_and_nothing_spins(bin: std::path::PathBuf) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};
    // 48 files and a cap far above them: accept runs out of descriptors
    // long before the cap (the default cap would stay below the limit).
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 48 && exec "$0" "$@""#)
        .arg(&bin)
        .args(["--addr", "127.0.0.1:0", "--db", ":memory:", "--admin-secret", SECRET, "--max-connections", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = errors.clone();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(l);
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let pid = child.id();
    let _child = Kill(child);
    let first = out.next().expect("a first line");
    let addr = first.strip_prefix("botspace listening on http://").unwrap_or_else(|| panic!("{first:?}")).to_string();
    assert!(out.any(|l| l == "botspace ready"), "no `botspace ready`");
    std::thread::spawn(move || for _ in out {});
    // Far more silent connections than files.
    let conns: Vec<_> = (0..100).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = cpu_seconds(pid);
    let n0 = errors.lock().unwrap().len();
    // A real request gets in while all 100 are held open: out of files, the
    // connection waiting longest is closed to make room.
    let t0 = Instant::now();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let took = t0.elapsed();
    assert!(buf.starts_with(b"HTTP/1.1 401"), "{:?}", String::from_utf8_lossy(&buf));
    eprintln!("out of files: getMe past 100 silent connections under 48 files: {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    std::thread::sleep(Duration::from_millis(2500));
    let cpu = cpu_seconds(pid) - cpu0;
    let logged: Vec<String> = errors.lock().unwrap()[n0..].to_vec();
    eprintln!("out of files for 2.5 s: {cpu:.2} s of CPU, {} lines: {logged:?}", logged.len());
    assert!(cpu < 0.5, "the server used {cpu:.2} s of CPU in 2.5 s of EMFILE");
    // What is said about it is said at most once a second, and the
    // connection closed to make room is said once.
    assert!(logged.len() <= 4, "{logged:?}");
    let evicted = "connection evicted: the oldest waiting connection was closed to admit a new one at the connection limit event=connection_evicted";
    assert!(logged.iter().all(|l| l.starts_with("accept failed: ") || l == evicted), "{logged:?}");
    assert!(logged.iter().filter(|l| *l == evicted).count() <= 1, "{logged:?}");
    drop(conns);
}

fn the_gateway_poll_interval_is_taken_from_10_to_60000_ms(start: Start) {
    for ms in ["10", "50", "60000"] {
        let srv = start(&["--admin-secret", SECRET, "--gateway-poll-interval-ms", ms]);
        let r = srv.post("/admin/getStats", Some(&format!("Admin {SECRET}")), &json!({}));
        assert_eq!(r.status, 200, "--gateway-poll-interval-ms {ms}: {}", r.body);
    }
    // The `--name=value` form too.
    let srv = start(&["--admin-secret", SECRET, "--gateway-poll-interval-ms=60000"]);
    assert_eq!(srv.post("/admin/getStats", Some(&format!("Admin {SECRET}")), &json!({})).status, 200);
}

/// Runs `bin --addr 127.0.0.1:0 --db :memory: --admin-secret SECRET ARGS`,
/// which must exit by itself within 10 s: (exit code, stdout, stderr).
fn run_to_exit(bin: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .args(["--addr", "127.0.0.1:0", "--db", ":memory:", "--admin-secret", SECRET, "--demo"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let until = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: still running after 10 s (taken?); stdout {:?}", out.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), out.join().unwrap(), err.join().unwrap())
}

fn a_gateway_poll_interval_outside_10_to_60000_ms_is_refused_with_a_message_and_a_non_zero_exit(
    bin: std::path::PathBuf,
) {
    // A number out of range: the library refuses the configuration, the
    // server says so and exits 1 before it listens.
    for args in [
        &["--gateway-poll-interval-ms", "9"][..],
        &["--gateway-poll-interval-ms", "0"],
        &["--gateway-poll-interval-ms", "60001"],
        &["--gateway-poll-interval-ms=9"],
    ] {
        let (code, out, err) = run_to_exit(&bin, args);
        assert_eq!(code, Some(1), "{args:?}: stderr {err:?}");
        assert_eq!(
            err.lines().next(),
            Some("cannot open the service on :memory:: gateway_poll_interval_ms must be between 10 and 60000"),
            "{args:?}: stderr {err:?}"
        );
        assert_eq!(out, "", "{args:?}: nothing printed, nothing listening");
    }
    // Not a number of milliseconds: a usage error, exit 2, one line and
    // nothing else (not the usage).
    for value in ["", "abc", "-10", "1.5", "10ms"] {
        let (code, out, err) = run_to_exit(&bin, &["--gateway-poll-interval-ms", value]);
        assert_eq!(code, Some(2), "{value:?}: stderr {err:?}");
        assert_eq!(
            err,
            format!(
                "botspace: invalid value '{value}' for '--gateway-poll-interval-ms <MS>' \
                 (BOTSPACE_GATEWAY_POLL_INTERVAL_MS): expected a whole number of milliseconds; see --help\n"
            )
        );
        assert_eq!(out, "", "{value:?}");
    }
    // No value at all.
    let (code, _, err) = run_to_exit(&bin, &["--gateway-poll-interval-ms"]);
    assert_eq!(code, Some(2), "stderr {err:?}");
    assert_eq!(
        err,
        "botspace: '--gateway-poll-interval-ms <MS>' (BOTSPACE_GATEWAY_POLL_INTERVAL_MS) needs a value; see --help\n"
    );
}

fn an_admin_secret_under_16_characters_is_refused_at_start_naming_the_option_and_the_rule(bin: std::path::PathBuf) {
    // The option's own check (the runtime crate, with the library's
    // minimum): one line naming the option and the rule, never the secret,
    // exit 1 before anything listens.
    let tail = "must be at least 16 characters (this one has 15); omit it and the server generates one";
    let base = ["--addr", "127.0.0.1:0", "--db", ":memory:"];
    let (code, out, err) = run_env_to_exit(&bin, &[], &[&base[..], &["--admin-secret", "fifteen-chars-x"]].concat());
    assert_eq!(code, Some(1), "stderr {err:?}");
    assert_eq!(err.lines().collect::<Vec<_>>(), [format!("--admin-secret {tail}")], "one line");
    assert_eq!(out, "", "nothing printed, nothing listening");
    assert!(!err.contains("fifteen-chars-x"), "the secret is not echoed");
    let (code, out, err) = run_env_to_exit(&bin, &[("BOTSPACE_ADMIN_SECRET", "fifteen-chars-x")], &base);
    assert_eq!((code, out.as_str()), (Some(1), ""), "stderr {err:?}");
    assert_eq!(err.lines().next(), Some(format!("--admin-secret {tail}").as_str()));
    let dir = temp_dir("short-secret");
    let path = dir.join("admin-secret");
    std::fs::write(&path, "fifteen-chars-x\n").unwrap();
    let p = path.to_str().unwrap();
    let (code, out, err) = run_env_to_exit(&bin, &[], &[&base[..], &["--admin-secret-file", p]].concat());
    assert_eq!((code, out.as_str()), (Some(1), ""), "stderr {err:?}");
    assert_eq!(err.lines().next(), Some(format!("--admin-secret-file {p}: its first line {tail}").as_str()));
    let _ = std::fs::remove_dir_all(dir);
}

fn a_database_timeout_outside_100_to_600000_ms_is_refused_and_one_inside_is_taken(bin: std::path::PathBuf) {
    // The library checks the range (docs/scale-out.md "Deadlines"); the
    // server reports its refusal and exits 1 before it listens.
    for args in [&["--database-timeout-ms", "99"][..], &["--database-timeout-ms=600001"]] {
        let (code, out, err) = run_to_exit(&bin, args);
        assert_eq!(code, Some(1), "{args:?}: stderr {err:?}");
        assert_eq!(
            err.lines().next(),
            Some("cannot open the service on :memory:: database_timeout_ms must be between 100 and 600000"),
            "{args:?}: stderr {err:?}"
        );
        assert_eq!(out, "", "{args:?}: nothing printed, nothing listening");
    }
    for value in ["", "abc", "-100", "2.5"] {
        let (code, out, err) = run_to_exit(&bin, &["--database-timeout-ms", value]);
        assert_eq!(code, Some(2), "{value:?}: stderr {err:?}");
        assert_eq!(
            err,
            format!(
                "botspace: invalid value '{value}' for '--database-timeout-ms <MS>' (BOTSPACE_DATABASE_TIMEOUT_MS): \
                 expected a whole number of milliseconds; see --help\n"
            )
        );
        assert_eq!(out, "", "{value:?}");
    }
    // In range, the server starts and serves (the value only bounds
    // PostgreSQL calls; SQLite takes it and ignores it).
    let mut child = std::process::Command::new(&bin)
        .args(["--addr", "127.0.0.1:0", "--db", ":memory:", "--admin-secret", SECRET, "--database-timeout-ms", "100"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the server");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut ready = false;
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap_or(0) > 0 {
        if line.trim_end() == "botspace ready" {
            ready = true;
            break;
        }
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "--database-timeout-ms 100: the server did not get ready");
}

/// The `export BOTSPACE_TOKEN='…' …` line's values, by name.
fn exported(lines: &[String]) -> Option<std::collections::HashMap<String, String>> {
    let line = lines.iter().find(|l| l.starts_with("export "))?;
    Some(
        line["export ".len()..]
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect(),
    )
}

/// README's tour, twice and more on one database file: the first start
/// prints a token; a start with another admin secret and no flag prints no
/// token but a command that gets one, which works as printed; a start with
/// `--demo-token` prints a working one again. Both servers print the
/// library's lines (`botspace_runtime::demo::start`).
fn the_tour_gives_a_working_token_however_often_the_server_starts(bin: std::path::PathBuf) {
    let dir = temp_dir("tour");
    let db = dir.join("botspace.db");
    let db = db.to_str().unwrap();
    let start = |args: &[&str]| {
        let mut all = vec!["--db", db];
        all.extend_from_slice(args);
        let mut srv = Server::start_in_shell(&[], "true", &[], &bin, &all);
        let lines = srv.wait_line("botspace ready");
        (srv, lines)
    };
    let get_me = |srv: &Server, token: &str| srv.bot(token, "getMe", &json!({}));

    // 1. The first start on an empty file (the harness's secret), asking
    //    for the demo as the README's command does.
    let (srv, lines) = start(&["--demo"]);
    let first = exported(&lines).unwrap_or_else(|| panic!("no export line: {lines:#?}"));
    let token = first["BOTSPACE_TOKEN"].clone();
    let me = get_me(&srv, &token);
    assert_eq!((me.status, me.body["result"]["handle"].as_str()), (200, Some("demo_bot")), "{}", me.body);
    let bot_id = me.body["result"]["id"].clone();
    assert!(lines.contains(&format!("demo bot token: {token}")), "{lines:#?}");
    drop(srv);

    // 2. Again with the tour's secret and `--demo` alone: no token, an
    //    instruction.
    let tour = "tour-admin-secret-0001";
    let (srv, lines) = start(&["--admin-secret", tour, "--demo"]);
    assert!(!lines.iter().any(|l| l.contains("BOTSPACE_TOKEN")), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("demo bot token: shown only when it was made;") && l.contains("--demo-token")),
        "{lines:#?}"
    );
    let again = exported(&lines).unwrap_or_else(|| panic!("no export line: {lines:#?}"));
    assert_eq!((&again["BOTSPACE_CHAT"], &again["BOTSPACE_USER"]), (&first["BOTSPACE_CHAT"], &first["BOTSPACE_USER"]));
    assert_eq!(get_me(&srv, &token).status, 200, "the token still works until it is rotated");
    let curl = lines.iter().find(|l| l.trim_start().starts_with("curl ")).unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(curl.contains(&format!("{}/admin/rotateBotToken", srv.base)), "{curl}");
    let out = std::process::Command::new("sh")
        .args(["-c", curl.trim()])
        .env("BOTSPACE_ADMIN", tour)
        .output()
        .expect("run the printed curl (scripts/test-rust.sh installs curl)");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} {:?}", String::from_utf8_lossy(&out.stdout), out.status));
    assert_eq!(answer["ok"], json!(true), "{answer}");
    let rotated = answer["result"]["token"].as_str().unwrap().to_string();
    assert_eq!(get_me(&srv, &rotated).status, 200);
    get_me(&srv, &token).assert_error(401, "invalid_token");
    drop(srv);

    // 3. With --demo-token, as the tour runs it: a working token, every time.
    for _ in 0..2 {
        let (srv, lines) = start(&["--admin-secret", tour, "--demo-token"]);
        let e = exported(&lines).unwrap_or_else(|| panic!("no export line: {lines:#?}"));
        assert_eq!(e["BOTSPACE_CHAT"], first["BOTSPACE_CHAT"]);
        let me = get_me(&srv, &e["BOTSPACE_TOKEN"]);
        assert_eq!((me.status, &me.body["result"]["id"]), (200, &bot_id), "the same demo bot, a new token");
        get_me(&srv, &rotated).assert_error(401, "invalid_token");
        // The chat works for the bot as the tour uses it.
        let sent =
            srv.bot(&e["BOTSPACE_TOKEN"], "sendMessage", &json!({"chat_id": e["BOTSPACE_CHAT"], "text": "Hello"}));
        assert_eq!(sent.status, 200, "{}", sent.body);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `bin` with only `env` (no `BOTSPACE_*` from the test's environment) and
/// `args`, which must exit within 10 s: (exit code, stdout, stderr).
fn run_env_to_exit(bin: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(bin);
    for (k, _) in std::env::vars() {
        if k.starts_with("BOTSPACE_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.args(args).envs(env.iter().copied()).stdin(std::process::Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn every_flag_in_help_names_its_environment_variable(bin: std::path::PathBuf) {
    // A secret in the environment is named in the help, never shown.
    let secret = "help-must-not-show-this-secret-01";
    let (code, help, err) = run_env_to_exit(&bin, &[("BOTSPACE_ADMIN_SECRET", secret)], &["--help"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert!(!help.contains(secret), "{help}");
    // Each option's line ("      --flag <ARG>" or "      --switch[=<BOOL>]"),
    // then its description, which ends with its variable.
    let lines: Vec<&str> = help.lines().collect();
    let mut flags = Vec::new();
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.starts_with("      --")) {
        let flag = line.trim_start().split([' ', '[']).next().unwrap();
        let var = format!("BOTSPACE_{}", flag[2..].to_ascii_uppercase().replace('-', "_"));
        let about = lines.get(i + 1).copied().unwrap_or("");
        assert!(about.ends_with(&format!(" [env: {var}]")), "{flag}: its description does not name {var}: {about:?}");
        flags.push(flag.to_string());
    }
    // Every flag the text mentions has such a line (or is --help's).
    for word in help.split(|c: char| c.is_whitespace() || "[]|()`,;:.".contains(c)) {
        if word.starts_with("--") && word.len() > 2 && word != "--help" {
            assert!(flags.iter().any(|f| f == word), "{word} is mentioned but has no line of its own");
        }
    }
    assert!(lines.contains(&"  -h, --help"), "{help}");
    for expected in [
        "--addr",
        "--db",
        "--admin-secret-file",
        "--operational-key-file",
        "--config",
        "--trusted-proxy",
        "--webhook-secret-overlap-s",
    ] {
        assert!(flags.iter().any(|f| f == expected), "{expected} missing from {flags:?}");
    }
    assert_eq!(flags.len(), 22, "{flags:?}");
}

/// A production start (a unit file's environment, no `--demo`): on an empty
/// database the server creates nothing and prints no token, which would
/// otherwise reach the journal.
fn a_production_start_from_the_environment_creates_no_bot_and_prints_no_token(bin: std::path::PathBuf) {
    let dir = temp_dir("production");
    let db = dir.join("prod.db");
    let secret = "production-admin-secret-0001";
    let srv = Server::start_env(
        &bin,
        &[("BOTSPACE_ADDR", "127.0.0.1:0"), ("BOTSPACE_DB", db.to_str().unwrap()), ("BOTSPACE_ADMIN_SECRET", secret)],
        &[],
    );
    let lines = srv.lines();
    assert!(!lines.iter().any(|l| l.contains("token") || l.contains("demo")), "no demo, no token: {lines:#?}");
    let stats = srv.post("/admin/getStats", Some(&format!("Admin {secret}")), &json!({}));
    let counts = (stats.status, &stats.body["result"]["bots"], &stats.body["result"]["users"]);
    assert_eq!(counts, (200, &json!(0), &json!(0)), "{}", stats.body);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

fn a_server_configured_only_through_the_environment_serves(bin: std::path::PathBuf) {
    let dir = temp_dir("env-only");
    let secret = dir.join("admin-secret");
    std::fs::write(&secret, "secret-from-env-file-0001\n").unwrap();
    let db = dir.join("env.db");
    let srv = Server::start_env(
        &bin,
        &[
            ("BOTSPACE_ADDR", "127.0.0.1:0"),
            ("BOTSPACE_DB", db.to_str().unwrap()),
            ("BOTSPACE_ADMIN_SECRET_FILE", secret.to_str().unwrap()),
            ("BOTSPACE_MANUAL_CLOCK", "true"),
        ],
        &[],
    );
    let lines = srv.lines();
    assert!(lines.iter().any(|l| l.starts_with("clock: manual")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("admin secret:")), "a secret was given, none generated: {lines:?}");
    let ok = srv.post("/admin/getStats", Some("Admin secret-from-env-file-0001"), &json!({}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    let moved = srv.post("/admin/advanceClock", Some("Admin secret-from-env-file-0001"), &json!({"seconds": 1}));
    assert_eq!(moved.status, 200, "the manual clock moves: {}", moved.body);
    assert!(db.exists(), "the database is where BOTSPACE_DB says");
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

/// The start-up lines, exactly and in order: the bound address (a
/// wildcard one as bound), the admin listener's, the generated secret
/// (64 hex digits, shown once, and it opens the host API), the manual
/// clock; the demo's URLs are the loopback ones a local client reaches.
fn the_start_up_lines_say_the_bound_addresses_then_the_generated_secret_and_the_clock(bin: std::path::PathBuf) {
    let srv = Server::start_env(
        &bin,
        &[],
        &["--addr", "0.0.0.0:0", "--admin-addr", "127.0.0.1:0", "--db", ":memory:", "--manual-clock", "--demo"],
    );
    let lines = srv.lines();
    let port = srv.addr.port();
    assert_eq!(lines[0], format!("botspace listening on http://0.0.0.0:{port}"), "{lines:#?}");
    let admin: std::net::SocketAddr = lines[1]
        .strip_prefix("botspace admin listening on http://")
        .unwrap_or_else(|| panic!("{lines:#?}"))
        .parse()
        .unwrap();
    assert_eq!(admin.ip().to_string(), "127.0.0.1");
    let secret = lines[2].strip_prefix("admin secret: ").unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(secret.len() == 64 && secret.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')), "{secret:?}");
    assert_eq!(lines[3], "clock: manual (moves only through /admin/advanceClock)");
    assert_eq!(lines.iter().filter(|l| l.contains(secret)).count(), 1, "shown only now: {lines:#?}");
    let get_me = format!("  curl -s -X POST http://127.0.0.1:{port}/bot/getMe -H 'Authorization: Bot ");
    assert!(lines.iter().any(|l| l.starts_with(&get_me)), "the demo's URL is reachable: {lines:#?}");
    let stats = format!(
        "POST /admin/getStats HTTP/1.1\r\nHost: x\r\nAuthorization: Admin {secret}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.write_all(stats.as_bytes()).unwrap();
    assert_eq!(
        read_response(&mut s, &mut Vec::new()).result()["bots"],
        json!(1),
        "the demo bot, through the generated secret"
    );
}

fn a_flag_beats_the_environment_which_beats_the_config_file(bin: std::path::PathBuf) {
    let dir = temp_dir("config-file");
    let conf = dir.join("botspace.conf");
    std::fs::write(
        &conf,
        "# the file: lowest precedence\naddr = 127.0.0.1:0\ndb = :memory:\nadmin-secret = secret-from-the-file-0001\n\
         manual-clock = true\nmax-connections = 7\n",
    )
    .unwrap();
    let c = conf.to_str().unwrap();
    let auth = |s: &str| format!("Admin {s}");
    // The file alone: its secret, its manual clock.
    let srv = Server::start_env(&bin, &[("BOTSPACE_CONFIG", c)], &[]);
    assert!(srv.lines().iter().any(|l| l.starts_with("clock: manual")), "{:?}", srv.lines());
    assert_eq!(srv.post("/admin/getStats", Some(&auth("secret-from-the-file-0001")), &json!({})).status, 200);
    drop(srv);
    // The environment beats the file: its secret, and 0 turns the clock off.
    let srv = Server::start_env(
        &bin,
        &[("BOTSPACE_ADMIN_SECRET", "secret-from-the-env-0001"), ("BOTSPACE_MANUAL_CLOCK", "0")],
        &["--config", c],
    );
    assert!(!srv.lines().iter().any(|l| l.starts_with("clock: manual")), "{:?}", srv.lines());
    assert_eq!(srv.post("/admin/getStats", Some(&auth("secret-from-the-env-0001")), &json!({})).status, 200);
    srv.post("/admin/getStats", Some(&auth("secret-from-the-file-0001")), &json!({}))
        .assert_error(401, "invalid_token");
    drop(srv);
    // The flag beats both; a secret file given by a flag replaces a secret
    // given by the environment (no "not both" across sources).
    let secret = dir.join("secret");
    std::fs::write(&secret, "secret-from-the-flag-0001\n").unwrap();
    let srv = Server::start_env(
        &bin,
        &[
            ("BOTSPACE_CONFIG", c),
            ("BOTSPACE_ADMIN_SECRET", "secret-from-the-env-0001"),
            ("BOTSPACE_MANUAL_CLOCK", "0"),
        ],
        &["--admin-secret-file", secret.to_str().unwrap(), "--manual-clock"],
    );
    assert!(srv.lines().iter().any(|l| l.starts_with("clock: manual")), "{:?}", srv.lines());
    assert_eq!(srv.post("/admin/getStats", Some(&auth("secret-from-the-flag-0001")), &json!({})).status, 200);
    srv.post("/admin/getStats", Some(&auth("secret-from-the-env-0001")), &json!({})).assert_error(401, "invalid_token");
    drop(srv);
    // Trusted proxies come wholesale from the strongest source: the file's
    // bad block stops the start, the variable's list replaces it (no merge).
    std::fs::write(&conf, "addr = 127.0.0.1:0\ndb = :memory:\ntrusted-proxy = 10.0.0.0/8, 192.0.2.7/8\n").unwrap();
    let (code, out, err) = run_env_to_exit(&bin, &[], &["--config", c]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert_eq!(
        err.lines().next(),
        Some("cannot open the service on :memory:: trusted_proxies: \"192.0.2.7/8\" has bits set past /8; the block is 192.0.0.0/8")
    );
    let srv =
        Server::start_env(&bin, &[("BOTSPACE_CONFIG", c), ("BOTSPACE_TRUSTED_PROXY", "10.0.0.0/8,192.0.2.7")], &[]);
    assert_eq!(srv.post("/admin/getStats", Some(&auth("x".repeat(16).as_str())), &json!({})).status, 401);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

/// A bad option or variable is one line on stderr and exit 2: the option
/// and its variable (or the config file's line), the value as given (never
/// a secret), the form it takes, a pointer to --help; the same line for the
/// flag as for the variable, nothing on stdout, nothing listening.
fn a_bad_value_from_the_environment_or_the_file_names_its_source(bin: std::path::PathBuf) {
    let base = [("BOTSPACE_ADDR", "127.0.0.1:0"), ("BOTSPACE_DB", ":memory:")];
    let with = |extra: (&'static str, &'static str)| {
        let mut v = base.to_vec();
        v.push(extra);
        v
    };
    let refused = |env: &[(&str, &str)], args: &[&str], line: &str| {
        let (code, out, err) = run_env_to_exit(&bin, env, args);
        assert_eq!((code, out.as_str(), err.as_str()), (Some(2), "", format!("{line}\n").as_str()), "{env:?} {args:?}");
    };
    let cap = "botspace: invalid value 'many' for '--max-connections <N>' (BOTSPACE_MAX_CONNECTIONS): \
                expected a positive integer; see --help";
    refused(&with(("BOTSPACE_MAX_CONNECTIONS", "many")), &[], cap);
    refused(&base, &["--max-connections", "many"], cap);
    refused(&base, &["--max-connections=many"], cap);
    let switch = "botspace: invalid value 'yes' for '--demo-token[=<BOOL>]' (BOTSPACE_DEMO_TOKEN): \
                  expected 1, true, 0 or false; see --help";
    refused(&with(("BOTSPACE_DEMO_TOKEN", "yes")), &[], switch);
    refused(&base, &["--demo-token=yes"], switch);
    let overlap = "botspace: invalid value '2h' for '--webhook-secret-overlap-s <SECS>' \
                   (BOTSPACE_WEBHOOK_SECRET_OVERLAP_S): expected a whole number of seconds, 0 for none; see --help";
    refused(&with(("BOTSPACE_WEBHOOK_SECRET_OVERLAP_S", "2h")), &[], overlap);
    refused(&base, &["--webhook-secret-overlap-s", "2h"], overlap);
    // A secret is named with its form, never repeated.
    let key = "botspace: invalid value for '--operational-key <HEX64>' (BOTSPACE_OPERATIONAL_KEY): \
               expected 64 hex digits; see --help";
    refused(&with(("BOTSPACE_OPERATIONAL_KEY", "not-hex-secret-key")), &[], key);
    refused(&base, &["--operational-key", "not-hex-secret-key"], key);
    refused(&base, &["--listen", "127.0.0.1:0"], "botspace: unknown option '--listen'; see --help");
    // A variable is read, and refused, beside the flag that would beat it
    // and before --help.
    refused(
        &with(("BOTSPACE_IDLE_TIMEOUT", "soon")),
        &["--idle-timeout", "5", "--help"],
        "botspace: invalid value 'soon' for '--idle-timeout <SECS>' (BOTSPACE_IDLE_TIMEOUT): \
         expected seconds above 0 and below 86400 (decimals allowed); see --help",
    );
    let dir = temp_dir("bad-config");
    let conf = dir.join("bad.conf");
    let c = conf.to_str().unwrap();
    std::fs::write(&conf, "# comment\n\nrequest-timeout = never\n").unwrap();
    refused(
        &base,
        &["--config", c],
        &format!(
            "botspace: invalid value 'never' for '--request-timeout <SECS>' ({c} line 3): \
             expected seconds above 0 and below 86400 (decimals allowed); see --help"
        ),
    );
    std::fs::write(&conf, "listen = 1\n").unwrap();
    refused(&base, &["--config", c], &format!("botspace: unknown option 'listen' ({c} line 1); see --help"));
    let _ = std::fs::remove_dir_all(dir);
}

fn the_operational_key_can_come_from_a_file_named_by_the_environment(bin: std::path::PathBuf) {
    let dir = temp_dir("op-key-file");
    let path = dir.join("operational-key");
    let key: String = (0u8..32).map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, format!("{key}\n")).unwrap();
    let p = path.to_str().unwrap();
    let env = [
        ("BOTSPACE_ADDR", "127.0.0.1:0"),
        ("BOTSPACE_DB", ":memory:"),
        ("BOTSPACE_ADMIN_SECRET", SECRET),
        ("BOTSPACE_OPERATIONAL_KEY_FILE", p),
    ];
    let srv = Server::start_env(&bin, &env, &[]);
    let b = srv.admin("createBot", &json!({"display_name": "Ops", "handle": "ops", "official": true}));
    let copy = srv.admin("getOperationalToken", &json!({"bot_id": b["bot"]["id"]}));
    assert_eq!(copy["token"], b["token"]);
    drop(srv);
    // Without a key, official bots have no copy to give.
    let srv = Server::start_env(&bin, &env[..3], &[]);
    let b = srv.admin("createBot", &json!({"display_name": "Ops", "handle": "ops", "official": true}));
    let r = srv.admin_resp("getOperationalToken", &json!({"bot_id": b["bot"]["id"]}));
    r.assert_error(403, "token_not_recoverable");
    drop(srv);
    // A key that is not 64 hex digits stops the start.
    std::fs::write(&path, "not-a-key\n").unwrap();
    let (code, _, err) = run_env_to_exit(&bin, &env, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().next(), Some("the operational key must be 64 hex digits (32 bytes)"));
    let _ = std::fs::remove_dir_all(dir);
}

/// Checks that `line` is one JSON log line: `ts` (RFC 3339 UTC with
/// milliseconds), `level` (a level name) and `msg` first; returns it.
fn json_log_line(line: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line:?}"));
    let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
    assert!(
        ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T' && ts.as_bytes()[19] == b'.',
        "ts {ts:?} in {line}"
    );
    assert!(["error", "warn", "info", "debug"].contains(&v["level"].as_str().unwrap_or("")), "{line}");
    assert!(v["msg"].is_string(), "{line}");
    assert!(line.starts_with(r#"{"ts":"#), "ts, level, msg come first: {line}");
    v
}

/// `--log-format json`: every line on stdout and stderr is one JSON object
/// with ts, level and msg; the demo's block (its token, which the user
/// asked for) is one line whose `lines` hold the text lines. A run that
/// sends a message, rotates a token and is refused (401) never logs the
/// admin secret given by flag, the rotated token or the message text.
fn with_log_format_json_every_line_is_json_and_no_secret_token_or_text_is_logged(bin: std::path::PathBuf) {
    let secret = "logs-admin-secret-given-by-flag-0001";
    let text = "zebra-quartz-message-text-7731";
    let mut srv = Server::start_in_shell(
        &[],
        "true",
        &[],
        &bin,
        &[
            "--db",
            ":memory:",
            "--admin-secret",
            secret,
            "--log-format",
            "json",
            "--request-timeout",
            "0.5",
            "--max-connections",
            "8",
        ],
    );
    let lines = srv.lines();
    let demo = lines
        .iter()
        .map(|l| json_log_line(l))
        .find(|v| v["msg"] == "demo")
        .unwrap_or_else(|| panic!("no demo line: {lines:#?}"));
    let demo_lines: Vec<String> =
        demo["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect();
    let e = exported(&demo_lines).unwrap_or_else(|| panic!("no export line in {demo}"));
    let (token, chat) = (&e["BOTSPACE_TOKEN"], &e["BOTSPACE_CHAT"]);
    let bot_id = srv.bot(token, "getMe", &json!({})).body["result"]["id"].clone();
    let sent = srv.bot(token, "sendMessage", &json!({"chat_id": chat, "text": text}));
    assert_eq!(sent.status, 200, "{}", sent.body);
    let rotated = srv.post("/admin/rotateBotToken", Some(&format!("Admin {secret}")), &json!({"bot_id": bot_id}));
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let rotated = rotated.body["result"]["token"].as_str().unwrap().to_string();
    srv.bot(token, "getMe", &json!({})).assert_error(401, "invalid_token");
    srv.post("/admin/getStats", Some("Admin not-the-secret-0000000"), &json!({})).assert_error(401, "invalid_token");
    srv.bot(&rotated, "sendMessage", &json!({"chat_id": "spc_nope", "text": text}));
    // The library's own lines: the rotation (which bot, not the token), a
    // request that did not arrive whole (408), connections evicted at the
    // cap. (Slow-consumer closes: their own scenario above.)
    let line = json_log_line(&logged(&srv, "bot_token_rotated", 1).pop().unwrap());
    assert_eq!((&line["level"], &line["msg"], &line["bot_id"]), (&json!("info"), &json!("bot token rotated"), &bot_id));
    let mut s = srv.connect();
    s.write_all(b"POST /bot/sendMessage HTTP/1.1\r\nHost: x\r\nAuthorization: Bot ").unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf).assert_error(408, "request_timeout");
    let line = json_log_line(&logged(&srv, "request_timeout", 1)[0]);
    assert_eq!(line["level"], json!("info"));
    let half: Vec<_> = (0..12)
        .map(|_| {
            let mut s = srv.connect();
            let _ = s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHo");
            s
        })
        .collect();
    let line = json_log_line(&logged(&srv, "connection_evicted", 1)[0]);
    assert_eq!(line["level"], json!("warn"));
    // Each half-open one is evicted or, past the request timeout, answered
    // 408; either way the server closes it, and the stop finds nothing to
    // cut (an evicted connection is no longer counted).
    for mut s in half {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    }
    assert!(srv.interrupt().success());
    let out = srv.lines();
    let err = srv.errors();
    assert!(out.iter().any(|l| json_log_line(l)["msg"] == "botspace stopped"), "{out:#?}");
    for line in out.iter().chain(&err) {
        json_log_line(line);
        for (what, s) in
            [("the admin secret", secret), ("the rotated token", rotated.as_str()), ("the message text", text)]
        {
            assert!(!line.contains(s), "{what} logged: {line}");
        }
    }
}

/// A start that fails (an address that cannot be listened on) says why in
/// one JSON line on stderr, level error, and exits 1.
fn with_log_format_json_a_start_error_is_a_json_line_on_stderr(bin: std::path::PathBuf) {
    let (code, out, err) = run_to_exit(&bin, &["--addr", "256.0.0.1:1", "--log-format", "json"]);
    assert_eq!(code, Some(1), "stdout {out:?} stderr {err:?}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err:?}");
    let v = json_log_line(lines[0]);
    assert_eq!(v["level"], "error", "{err}");
    assert!(v["msg"].as_str().unwrap().starts_with("cannot listen on 256.0.0.1:1"), "{err}");
    for line in out.lines() {
        json_log_line(line);
    }
    // A usage error is plain text: the format it names was not taken.
    let (code, _, err) = run_to_exit(&bin, &["--log-format", "yaml"]);
    assert_eq!(
        (code, err.as_str()),
        (
            Some(2),
            "botspace: invalid value 'yaml' for '--log-format <text|json>' (BOTSPACE_LOG_FORMAT): expected text or json; see --help\n"
        )
    );
}

/// What the library logs through the `log` facade outside any request is
/// printed by each server as its own lines: here the migration that
/// made bot handles unique, on a database whose bots shared one, names the
/// bot left without it, and with `--log-format json` that is one JSON
/// line on stderr, level warn.
fn the_librarys_log_records_are_printed_as_the_servers_own_lines(bin: std::path::PathBuf) {
    let dir = temp_dir("library-log");
    let db = dir.join("bots.db");
    let db = db.to_str().unwrap();
    let mut srv = Server::start_in_shell(&[], "true", &[], &bin, &["--db", db]);
    let create = |handle: &str| {
        let r = srv.post(
            "/admin/createBot",
            Some(&format!("Admin {SECRET}")),
            &json!({"display_name": "B", "handle": handle}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["result"]["bot"]["id"].as_str().unwrap().to_string()
    };
    let (first, second) = (create("dup_first"), create("dup_second"));
    assert!(srv.interrupt().success());
    {
        // What schema version 4 held: nothing kept two bots from sharing a handle.
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch(
            "DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; DROP TABLE webhooks; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; \
             ALTER TABLE bots DROP COLUMN handle_key; PRAGMA user_version = 4;",
        )
        .unwrap();
        // The older bot keeps the handle; both were made within the same
        // second, so their ages are set apart here.
        for (id, h, at) in [(&first, "Dup", "1767225600"), (&second, "dup", "1767225601")] {
            conn.execute("UPDATE bots SET handle = ?1, created_at = ?3 WHERE id = ?2", [h, id.as_str(), at]).unwrap();
        }
    }
    let mut srv = Server::start_in_shell(&[], "true", &[], &bin, &["--db", db, "--log-format", "json"]);
    // Stderr is read by a thread of the harness: wait for the line.
    let deadline = Instant::now() + Duration::from_secs(5);
    let warned = loop {
        let warned: Vec<serde_json::Value> = srv
            .errors()
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|_| panic!("not a JSON line: {l}")))
            .filter(|v| v["msg"].as_str().is_some_and(|m| m.contains("share a handle")))
            .collect();
        if !warned.is_empty() || Instant::now() >= deadline {
            break warned;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(warned.len(), 1, "{:#?}", srv.errors());
    assert_eq!(warned[0]["level"], "warn");
    assert_eq!(
        warned[0]["msg"],
        format!(
            "botspace: 1 bot(s) share a handle with an older bot and keep it without owning it: {second}; \
             give each a handle of its own with updateBot (see docs/decisions.md, \"Bot handles are unique\")"
        )
    );
    assert!(srv.interrupt().success());
    let _ = std::fs::remove_dir_all(dir);
}

/// The level is `BOTSPACE_LOG` when set, else `RUST_LOG`, in both servers
/// (the library's rule): `BOTSPACE_LOG=info` beats `RUST_LOG=warn`, and
/// with `RUST_LOG=warn` alone no info line is printed, not the start-up
/// lines nor `botspace ready`/`stopping`/`stopped`, while the demo's
/// block, printed whatever the level, is.
fn the_level_is_botspace_log_else_rust_log(bin: std::path::PathBuf) {
    let args = ["--addr", "127.0.0.1:0", "--db", ":memory:", "--admin-secret", SECRET, "--demo"];
    let mut srv = Server::start_env(&bin, &[("BOTSPACE_LOG", "info"), ("RUST_LOG", "warn")], &args);
    assert!(srv.interrupt().success());
    let lines = srv.lines();
    let said: Vec<&String> = lines.iter().filter(|l| l.starts_with("botspace ")).collect();
    assert_eq!(said.len(), 4, "{lines:#?}");
    assert_eq!(*said[0], format!("botspace listening on http://{}", srv.addr));
    assert_eq!((said[1].as_str(), said[2].as_str()), ("botspace ready", "botspace stopping"));
    assert!(said[3].starts_with("botspace stopped"), "{lines:#?}");

    // RUST_LOG=warn alone: the server starts (the demo's export line shows
    // it is bound and ready) and says nothing at info.
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(&bin);
    for (k, _) in std::env::vars() {
        if k.starts_with("BOTSPACE_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut err = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = Vec::new();
    while !out.iter().any(|l: &String| l.starts_with("export ")) {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => out.push(l),
            Err(e) => {
                let _ = child.kill();
                panic!("no export line ({e}): {out:#?}");
            }
        }
    }
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "no exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    out.extend(rx.try_iter());
    let err = err.join().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!out.iter().any(|l| l.starts_with("botspace ")), "info lines under RUST_LOG=warn: {out:#?}");
    assert_eq!(err, "", "nothing went wrong");
}
