//! Command-line options of the Rust example server, over real TCP:
//! `--admin-secret-file`, `--operational-key`, `--max-connections`.

mod wire;

use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};
use wire::*;

#[test]
fn the_admin_secret_can_come_from_a_file() {
    let dir = temp_dir("secret-file");
    let path = dir.join("admin-secret");
    std::fs::write(&path, "from-a-file-secret-0001\n").unwrap();
    let srv = Server::start_rust_with(&["--admin-secret-file", path.to_str().unwrap()]);
    let ok = srv.post("/admin/getStats", Some("Admin from-a-file-secret-0001"), &json!({}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    // BOTSPACE_ADMIN_SECRET (set by the harness) loses to the file.
    srv.post("/admin/getStats", Some(&format!("Admin {SECRET}")), &json!({})).assert_error(401, "invalid_token");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_operational_key_gives_official_bots_their_copy() {
    let key: String = (0u8..32).map(|b| format!("{b:02x}")).collect();
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--operational-key", &key]);
    let b = srv.admin("createBot", &json!({"display_name": "Ops", "handle": "ops", "official": true}));
    let copy = srv.admin("getOperationalToken", &json!({"bot_id": b["bot"]["id"]}));
    assert_eq!(copy["token"], b["token"]);
}

#[test]
fn past_max_connections_a_new_connection_gets_503_and_a_freed_slot_serves_again() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--max-connections", "4"]);
    // Four connections that never send a byte hold every slot.
    let idle: Vec<_> = (0..4).map(|_| srv.connect()).collect();
    let until = Instant::now() + Duration::from_secs(5);
    let refused = loop {
        let mut s = srv.connect();
        let mut buf = Vec::new();
        let _ = s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = read_response(&mut s, &mut buf);
        // The accept loop counts a connection once its thread started.
        if r.status == 503 || Instant::now() > until {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    refused.assert_error(503, "server_busy");
    assert_eq!(refused.header("retry-after"), Some("1"));
    drop(idle);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let r = srv.post("/bot/getMe", None, &json!({}));
        if r.status == 401 {
            break; // served again (no token: 401, not 503)
        }
        assert!(Instant::now() < until, "still refused after the idle connections closed: {}", r.status);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_request_trickled_past_the_request_timeout_gets_408_and_the_connection_closes() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--request-timeout", "0.5"]);
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
    assert!(t0.elapsed() < Duration::from_secs(3), "closed after {:?}", t0.elapsed());
    assert_eof(&mut s);
}

#[test]
fn bare_lf_requests_get_their_answer() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET]);
    let mut s = srv.connect();
    s.write_all(b"POST /bot/getMe HTTP/1.1\nHost: x\n\n").unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf).assert_error(401, "missing_authorization");
}

#[test]
fn half_open_connections_past_the_cap_make_room_for_a_real_request() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET, "--max-connections", "50"]);
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
    drop(half);
}
