//! Durable sendMessage from many threads, in process: N threads, each its
//! own official bot writing into its own private chat through
//! `Service::handle_request` on a file database with `synchronous = full`.
//! What the library's group commit reaches without HTTP, and the bytes it
//! writes per message (from /proc/self/io).
//!
//!   cargo run --release --example durable_threads -- [seconds] [threads] [database]
//!
//! Defaults: 4 seconds, 64 threads, a fresh file in the temp directory.

use botspace::{Config, Service, Synchronous};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECRET: &str = "durable-threads-secret-0123";

fn request(path: &str, auth: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn admin(svc: &Service, method: &str, body: Value) -> Value {
    let r = svc.handle_request(&request(&format!("/admin/{method}"), &format!("Admin {SECRET}"), &body.to_string()));
    let at = r.windows(4).position(|w| w == b"\r\n\r\n").expect("response head") + 4;
    let v: Value = serde_json::from_slice(&r[at..]).expect("JSON body");
    assert_eq!(v["ok"], true, "{method}: {v}");
    v["result"].clone()
}

/// Bytes this process has had written to storage, and written by syscalls.
fn io_bytes() -> (u64, u64) {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field =
        |name: &str| io.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (field("write_bytes:"), field("wchar:"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    let db = args.next().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("durable-threads-{}.db", std::process::id())).to_string_lossy().into_owned()
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{suffix}"));
    }
    let svc = Arc::new(
        Service::open(Config::default().with(|c| {
            c.database = db.clone();
            c.admin_secret = SECRET.into();
            c.synchronous = Synchronous::Full;
        }))
        .expect("open service"),
    );
    let user = admin(&svc, "createUser", json!({"display_name": "u"}));
    let sends: Vec<Vec<u8>> = (0..threads)
        .map(|i| {
            let b = admin(
                &svc,
                "createBot",
                json!({"display_name": format!("b{i}"), "handle": format!("b_{i}"), "quota_tier": "official"}),
            );
            let c = admin(&svc, "startBot", json!({"user_id": user["id"], "bot_id": b["bot"]["id"]}));
            let token = b["token"].as_str().expect("token");
            let body = json!({"chat_id": c["id"], "text": "benchmark message"}).to_string();
            request("/bot/sendMessage", &format!("Bot {token}"), &body)
        })
        .collect();
    let before = svc.commit_stats();
    let (disk0, wchar0) = io_bytes();
    let ops = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = sends
        .into_iter()
        .map(|r| {
            let (svc, ops) = (svc.clone(), ops.clone());
            std::thread::spawn(move || {
                while start.elapsed() < Duration::from_secs(secs) {
                    let out = svc.handle_request(&r);
                    assert!(out.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&out));
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let st = svc.commit_stats();
    let (disk, wchar) = io_bytes();
    let n = ops.load(Ordering::Relaxed);
    let groups = (st.groups - before.groups).max(1);
    println!(
        "{threads} threads: {:.0} sendMessage/s, {:.1} per group, {:.2} groups per fsync, {:.0} B/message to disk ({:.0} B written)",
        n as f64 / elapsed,
        (st.requests - before.requests) as f64 / groups as f64,
        groups as f64 / (st.syncs - before.syncs).max(1) as f64,
        (disk - disk0) as f64 / n.max(1) as f64,
        (wchar - wchar0) as f64 / n.max(1) as f64,
    );
    drop(svc);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{suffix}"));
    }
}
