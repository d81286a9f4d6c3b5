//! What retention pruning costs a commit: `cargo bench --bench prune`.
//!
//! Pruning runs inside an ordinary commit at most once a minute, under the
//! service lock, so its cost is a latency spike for whichever request
//! triggers it. The database here holds many acknowledged events still
//! inside retention (nothing to delete: the common steady state) over many
//! bots, and many confirmed host updates. Printed: a commit that prunes next
//! to one that does not, and, as the baseline from the same run, what the
//! earlier whole-table prune statements (schema version 1) took on the same
//! file.

use botspace::{Config, Service};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "bench-admin-secret-00001";

fn admin(svc: &Service, method: &str, body: Value) -> Value {
    let b = body.to_string();
    let req = format!(
        "POST /admin/{method} HTTP/1.1\r\nHost: b\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    let resp = svc.handle_request(req.as_bytes());
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let v: Value = serde_json::from_slice(&resp[at..]).unwrap();
    assert_eq!(v["ok"], true, "{method}: {v}");
    v["result"].clone()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (bots, per_bot, updates) = if quick { (200, 500, 100_000) } else { (1000, 1000, 1_000_000) };
    let dir = std::env::temp_dir().join(format!("botspace-prune-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("prune.db");
    let cfg =
        json!({"database": db.to_str().unwrap(), "admin_secret": SECRET, "clock": "manual", "synchronous": "normal"});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let user = admin(&svc, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let mut chat = String::new();
    for i in 0..bots {
        let b =
            admin(&svc, "createBot", json!({"display_name": "B", "handle": format!("b{i}"), "quota_tier": "official"}));
        let c = admin(&svc, "startBot", json!({"user_id": user, "bot_id": b["bot"]["id"]}));
        chat = c["id"].as_str().unwrap().to_string();
    }
    // Fill the logs directly: young, acknowledged events and confirmed updates.
    let now = svc.now_ms() as i64;
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch("BEGIN").unwrap();
        c.execute(
            "WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
             INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data)
             SELECT bots.id, n.i, ?3, 'message', '{}' FROM bots, n",
            rusqlite::params![2, per_bot, now],
        )
        .unwrap();
        c.execute("UPDATE bots SET last_seq = ?1, acked_seq = ?1", [per_bot]).unwrap();
        c.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO updates (created_at_ms, type, data) SELECT ?2, 'message', '{}' FROM n",
            rusqlite::params![updates, now],
        )
        .unwrap();
        c.execute("UPDATE meta SET value = (SELECT max(update_id) FROM updates) WHERE key = 'updates_confirmed'", [])
            .unwrap();
        c.execute_batch("COMMIT").unwrap();
    }
    let events: i64 =
        Connection::open(&db).unwrap().query_row("SELECT count(*) FROM bot_events", [], |r| r.get(0)).unwrap();
    let commit = |svc: &Service| -> Duration {
        let t = Instant::now();
        admin(svc, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": "tick"}));
        t.elapsed()
    };
    let mut with_prune = Vec::new();
    let mut without = Vec::new();
    let mut baseline = Vec::new();
    let rounds = if quick { 5 } else { 15 };
    for _ in 0..rounds {
        admin(&svc, "advanceClock", json!({"seconds": 61}));
        with_prune.push(commit(&svc));
        without.push(commit(&svc));
        // Schema 1's statements, on the same file, rolled back.
        let c = Connection::open(&db).unwrap();
        let cutoff = svc.now_ms() as i64 - 86_400_000;
        let t = Instant::now();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        c.execute(
            "DELETE FROM bot_events WHERE created_at_ms < ?1 AND seq <= (SELECT acked_seq FROM bots WHERE bots.id = bot_events.bot_id)",
            [cutoff],
        )
        .unwrap();
        c.execute(
            "DELETE FROM updates WHERE created_at_ms < ?1 AND update_id < (SELECT value FROM meta WHERE key = 'updates_confirmed')",
            [cutoff],
        )
        .unwrap();
        c.execute_batch("ROLLBACK").unwrap();
        baseline.push(t.elapsed());
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (p, n, b) = (med(&mut with_prune), med(&mut without), med(&mut baseline));
    let extra = p.saturating_sub(n);
    println!(
        "{events} young acknowledged events over {bots} bots, {updates} confirmed updates; median of {rounds} rounds"
    );
    println!("| commit | time |");
    println!("|---|---:|");
    println!("| without pruning | {:.1} µs |", n.as_secs_f64() * 1e6);
    println!("| with pruning | {:.1} µs |", p.as_secs_f64() * 1e6);
    println!("| pruning's share (difference) | {:.1} µs |", extra.as_secs_f64() * 1e6);
    println!("| baseline: schema 1's whole-table prune, same file | {:.1} µs |", b.as_secs_f64() * 1e6);
    println!("pruning now costs {:.4} of the whole-table prune", extra.as_secs_f64() / b.as_secs_f64());
    drop(svc);
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("kept {}", db.display());
    }
}
