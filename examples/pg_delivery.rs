//! Delivery latency across nodes on the PostgreSQL store: the time from a
//! message's commit on node A to its event leaving a gateway session on
//! node B (`poll_transmit`), with B driven the way a host drives it on its
//! own thread (wait for a wake-up or until `poll_timeout`, `handle_timeout`,
//! drain), and messages sent at random moments relative to B's checks.
//! With `listen_notify` on, a second thread on B runs
//! `wait_store_notifications`, whose wake-ups end B's wait early.
//!
//!   scripts/with-postgres.sh cargo run --release --features postgres --example pg_delivery -- 300
//!
//! Needs `BOTSPACE_TEST_POSTGRES` (set by scripts/with-postgres.sh). Prints
//! p50, p99 and max with notifications (poll 50 ms as the fallback), then
//! without them (the poll alone) at the default `gateway_poll_interval_ms`
//! (50) and at 10 ms.

use botspace::{Config, GatewayOutput, Service};
use std::time::{Duration, Instant};

const SECRET: &str = "pg-delivery-admin-secret";

fn call(svc: &Service, path: &str, auth: &str, body: &serde_json::Value) -> serde_json::Value {
    let b = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    let resp = svc.handle_request(req.as_bytes());
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
    let v: serde_json::Value = serde_json::from_slice(&resp[at..]).expect("a JSON body");
    assert_eq!(v["ok"], true, "{v}");
    v["result"].clone()
}

fn run(url: &str, listen: bool, poll_ms: u64, n: usize) -> Vec<Duration> {
    let open = || {
        Service::open(Config::default().with(|c| {
            c.database = url.into();
            c.admin_secret = SECRET.into();
            c.gateway_poll_interval_ms = poll_ms;
            c.listen_notify = listen;
        }))
        .expect("open on PostgreSQL")
    };
    let (a, b) = (open(), open());
    let admin = format!("Admin {SECRET}");
    let user = call(&a, "/admin/createUser", &admin, &serde_json::json!({"display_name": "U"}))["id"].clone();
    let bot = call(
        &a,
        "/admin/createBot",
        &admin,
        &serde_json::json!({"display_name": "B", "handle": "b", "quota_tier": "official"}),
    );
    let chat = call(&a, "/admin/startBot", &admin, &serde_json::json!({"user_id": user, "bot_id": bot["bot"]["id"]}))
        ["id"]
        .clone();
    let token = bot["token"].as_str().unwrap();
    let upgrade = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let mut s = b.accept_gateway_session(upgrade.as_bytes(), b.now_ms()).expect("a session on B");
    while s.poll_transmit().is_some() {} // hello, bot_started
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b = std::sync::Arc::new(b);
    // B's wake hook ends its host loop's wait, as a real host's does.
    let (wake_tx, wake_rx) = std::sync::mpsc::sync_channel::<()>(1);
    b.set_wake_hook(Some(std::sync::Arc::new(move |_: &str| {
        let _ = wake_tx.try_send(());
    })));
    let listener = listen.then(|| {
        assert!(b.has_store_notifications());
        b.wait_store_notifications(0).expect("LISTEN on B");
        let (b, stop) = (b.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                b.wait_store_notifications(100).expect("the listening connection stays up");
            }
        })
    });
    // Node B's host loop, on its own thread: wait for a wake-up or until
    // poll_timeout, handle_timeout, drain; note when each event leaves.
    let host = {
        let (b, stop) = (b.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut beat = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let now = b.now_ms();
                s.handle_timeout(now);
                while let Some(o) = s.poll_transmit() {
                    if matches!(&o, GatewayOutput::Text(t) if t.contains("\"message_created\"")) {
                        let _ = tx.send(Instant::now());
                    }
                }
                if beat.elapsed() > Duration::from_secs(10) {
                    s.handle_text(r#"{"op":"heartbeat"}"#, now);
                    beat = Instant::now();
                }
                let until = s.poll_timeout().unwrap_or(now + 1);
                let _ = wake_rx.recv_timeout(Duration::from_millis(until.saturating_sub(now).clamp(1, 100)));
            }
        })
    };
    let body = serde_json::json!({"user_id": user, "chat_id": chat, "text": "ping"});
    let mut lat = Vec::with_capacity(n);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..n {
        // Messages arrive at random times relative to B's checks.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(seed % (poll_ms * 1000)));
        call(&a, "/admin/sendUserMessage", &admin, &body);
        let committed = Instant::now();
        let out = rx.recv_timeout(Duration::from_secs(5)).expect("the event reaches node B");
        lat.push(out.saturating_duration_since(committed));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    host.join().unwrap();
    if let Some(l) = listener {
        l.join().unwrap();
    }
    lat.sort_unstable();
    lat
}

fn main() {
    let url =
        std::env::var("BOTSPACE_TEST_POSTGRES").expect("BOTSPACE_TEST_POSTGRES (run under scripts/with-postgres.sh)");
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    println!("| listen_notify | gateway_poll_interval_ms | events | p50 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (listen, poll) in [(true, 50), (false, 50), (false, 10)] {
        let lat = run(&url, listen, poll, n);
        let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0;
        println!("| {listen} | {poll} | {n} | {:.1} | {:.1} | {:.1} |", at(0.50), at(0.99), at(1.0));
    }
}
