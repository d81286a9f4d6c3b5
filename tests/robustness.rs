//! No input makes the service panic or abort: mutated and random bytes into
//! every entry point always produce a well-formed HTTP response (or, for the
//! gateway, bytes and a clean close).

mod common;

use botspace::{ClockKind, Config, Framing, Service};
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, so a failure reproduces.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn service() -> Arc<Service> {
    Arc::new(
        Service::open(Config::default().with(|c| {
            c.admin_secret = "robust-admin-secret-1".into();
            c.clock = ClockKind::Manual;
            c.max_body_bytes = 4096;
            c.database = common::test_database();
        }))
        .unwrap(),
    )
}

fn seeds() -> Vec<Vec<u8>> {
    let body = r#"{"chat_id":"spc_x","text":"hi","reply_to_message_id":"1","parse_mode":"plain"}"#;
    vec![
        format!("POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot bot_abc\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes(),
        b"POST /admin/createUser HTTP/1.1\r\nAuthorization: Admin robust-admin-secret-1\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n{\"display_name\":\"Ann\"}".to_vec(),
        b"POST /admin/getUpdates HTTP/1.1\r\nAuthorization: Admin robust-admin-secret-1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_vec(),
        b"GET /bot/gateway?after=3 HTTP/1.1\r\nAuthorization: Bot x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".to_vec(),
    ]
}

fn assert_http(resp: &[u8]) {
    assert!(
        resp.starts_with(b"HTTP/1.1 "),
        "not an HTTP response: {:?}",
        String::from_utf8_lossy(&resp[..resp.len().min(80)])
    );
    let status = common::status(resp);
    assert!((101..600).contains(&status));
    if status != 101 {
        let (_, v) = common::split(resp);
        assert!(v.get("ok").is_some());
    }
}

#[test]
fn mutated_requests_always_get_a_well_formed_response() {
    let svc = service();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let seeds = seeds();
    for _ in 0..20_000 {
        let mut req = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 if !req.is_empty() => {
                    let i = rng.below(req.len());
                    req[i] = rng.next() as u8;
                }
                1 if !req.is_empty() => {
                    let i = rng.below(req.len());
                    req.truncate(i);
                }
                2 => {
                    let i = rng.below(req.len() + 1);
                    req.insert(i, rng.next() as u8);
                }
                _ => {
                    let i = rng.below(req.len() + 1);
                    let j = rng.below(req.len() + 1);
                    let (a, b) = (i.min(j), i.max(j));
                    let dup = req[a..b].to_vec();
                    req.splice(a..a, dup);
                }
            }
        }
        assert_http(&svc.handle_request(&req));
        match svc.frame_request(&req) {
            Framing::Complete { len: n, .. } => assert!(n <= req.len()),
            Framing::Incomplete => {}
            Framing::Invalid(resp) => assert_http(&resp),
        }
        let acc = svc.accept_gateway(&req, svc.now_ms());
        assert_http(&acc.response);
    }
}

#[test]
fn random_bytes_everywhere() {
    let svc = service();
    let mut rng = Rng(42);
    for _ in 0..5_000 {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert_http(&svc.handle_request(&bytes));
        let refs = [bytes.as_slice(), b"".as_slice()];
        for r in common::batch(&svc, &refs) {
            assert_http(&r);
        }
    }
}

#[test]
fn random_bytes_into_a_gateway_connection_close_it_cleanly() {
    let svc = service();
    let admin = "Authorization: Admin robust-admin-secret-1\r\nContent-Type: application/json";
    let body = r#"{"display_name":"B","handle":"b","quota_tier":"official"}"#;
    let resp = svc.handle_request(
        format!("POST /admin/createBot HTTP/1.1\r\n{admin}\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
    );
    let i = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&resp[i + 4..]).unwrap();
    let token = v["result"]["token"].as_str().unwrap().to_string();
    let mut rng = Rng(7);
    for _ in 0..300 {
        let up = format!("GET /bot/gateway HTTP/1.1\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
        let now = svc.now_ms();
        let mut conn = svc.accept_gateway(up.as_bytes(), now).connection.expect("slot is free again");
        let mut out = Vec::new();
        while conn.poll_transmit(&mut out) > 0 {}
        for _ in 0..20 {
            let len = rng.below(64);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            conn.handle_input(&bytes, now);
            conn.handle_timeout(now);
            while conn.poll_transmit(&mut out) > 0 {}
            while conn.poll_event().is_some() {}
            if conn.is_closed() {
                break;
            }
        }
    }
}
