//! Native requests per second for the shapes the WASM bench measures
//! (`wasm/bench/bench.mjs` runs this first, so both sides come from one run):
//! getMe, sendMessage one per transaction, sendMessage in batches of 64, on
//! `:memory:` with an official (unlimited) bot in a started private chat.
//!
//!     cargo run --release --example req_rate -- [seconds per case]
//!
//! Prints one JSON object: {"getMe": r, "sendMessage": r, "sendMessageBatch64": r}.

use botspace::{Config, Service};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "bench-admin-secret-00001";

fn request(path: &str, auth: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn admin(svc: &Service, method: &str, body: Value) -> Value {
    let resp = svc.handle_request(&request(&format!("/admin/{method}"), &format!("Admin {SECRET}"), &body.to_string()));
    let start = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("response head") + 4;
    let v: Value = serde_json::from_slice(&resp[start..]).expect("JSON body");
    assert_eq!(v["ok"], true, "{method}: {v}");
    v["result"].clone()
}

fn check(resp: &[u8]) {
    assert!(resp.starts_with(b"HTTP/1.1 200 "), "{}", String::from_utf8_lossy(resp));
}

/// Calls `f` (which serves `per_call` requests) for `secs`, after a warm-up.
fn rate(secs: f64, per_call: u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..200 {
        f();
    }
    let end = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < end {
        for _ in 0..100 {
            f();
        }
        n += 100 * per_call;
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let svc = Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
    }))
    .expect("open");
    let user = admin(&svc, "createUser", json!({"display_name": "Bench user"}));
    let created =
        admin(&svc, "createBot", json!({"display_name": "Bench", "handle": "bench_bot", "quota_tier": "official"}));
    let chat = admin(&svc, "startBot", json!({"user_id": user["id"], "bot_id": created["bot"]["id"]}));
    let auth = format!("Bot {}", created["token"].as_str().expect("token"));
    let get_me = request("/bot/getMe", &auth, "");
    let send = request(
        "/bot/sendMessage",
        &auth,
        &json!({"chat_id": chat["id"], "text": "hello from the benchmark"}).to_string(),
    );
    let batch: Vec<&[u8]> = (0..64).map(|_| send.as_slice()).collect();
    let get_me_rate = rate(secs, 1, || check(&svc.handle_request(&get_me)));
    let send_rate = rate(secs, 1, || check(&svc.handle_request(&send)));
    let batch_rate = rate(secs, 64, || handle_all(&svc, &batch).iter().for_each(|r| check(r)));
    println!("{}", json!({"getMe": get_me_rate, "sendMessage": send_rate, "sendMessageBatch64": batch_rate}));
}

/// Many requests through the one way in, each answered at once.
fn handle_all<R: AsRef<[u8]>>(svc: &botspace::Service, requests: &[R]) -> Vec<Vec<u8>> {
    let reqs: Vec<botspace::Incoming<'_>> =
        requests.iter().map(|r| botspace::Incoming::bytes(r.as_ref()).at_once()).collect();
    svc.handle(&reqs, svc.now_ms()).into_iter().map(|a| a.now_or_failed(svc)).collect()
}
