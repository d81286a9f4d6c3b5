//! A seeded service shared by the targets: :memory:, manual clock and a
//! fixed random seed, so every run starts from the same ids and tokens.
#![allow(dead_code)]

use botspace::{ClockKind, Config, Service};
use serde_json::{json, Value};

pub const SECRET: &str = "fuzz-admin-secret";

pub struct World {
    pub svc: Service,
    pub token: String,
}

fn call(svc: &Service, method: &str, body: Value) -> Value {
    let body = body.to_string();
    let req = format!(
        "POST /admin/{method} HTTP/1.1\r\nHost: t\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let resp = svc.handle_request(req.as_bytes());
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("response head") + 4;
    assert!(resp.starts_with(b"HTTP/1.1 200 "), "seeding {method} failed: {}", String::from_utf8_lossy(&resp));
    let v: Value = serde_json::from_slice(&resp[at..]).expect("json body");
    v["result"].clone()
}

pub fn world() -> World {
    let cfg = Config::default().with(|c| {c.admin_secret = SECRET.into(); c.clock = ClockKind::Manual; c.random_seed = Some(7); c.max_body_bytes = 4096;});
    let svc = Service::open(cfg).expect("open");
    let user = call(&svc, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = call(&svc, "createBot", json!({"display_name": "Echo", "handle": "echo", "quota_tier": "standard"}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    call(&svc, "startBot", json!({"user_id": user, "bot_id": bot}));
    World { svc, token }
}

pub fn get_me(w: &World) -> Vec<u8> {
    let req = format!(
        "POST /bot/getMe HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nContent-Length: 0\r\n\r\n",
        w.token
    );
    w.svc.handle_request(req.as_bytes())
}

/// Checks one HTTP/1.1 response: status line, CRLF head, Content-Length
/// matching the body. Returns the status.
pub fn check_response(resp: &[u8]) -> u16 {
    assert!(resp.starts_with(b"HTTP/1.1 "), "not HTTP/1.1: {:?}", String::from_utf8_lossy(resp));
    let status: u16 = std::str::from_utf8(&resp[9..12]).unwrap().parse().expect("status code");
    assert!((100..600).contains(&status));
    let end = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("head terminator") + 4;
    let head = std::str::from_utf8(&resp[..end]).expect("ascii head");
    let len = head
        .split("\r\n")
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()));
    if status != 101 {
        assert_eq!(len, Some(resp.len() - end), "content-length does not match body");
    }
    status
}
