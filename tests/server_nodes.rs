//! Several nodes over real TCP: two Rust example servers on one PostgreSQL
//! database (scripts/test-postgres.sh, feature `pg-tests`), on the system
//! clock, each a process of its own.

mod common;
mod wire;

use serde_json::json;
use std::time::{Duration, Instant};
use wire::*;

fn two_servers() -> (Server, Server) {
    two_servers_with(&[])
}

fn two_servers_with(extra: &[&str]) -> (Server, Server) {
    let db = common::test_database();
    assert!(db.starts_with("postgres://"), "BOTSPACE_TEST_POSTGRES must be set (scripts/with-postgres.sh)");
    let start = || Server::start_rust_with(&[&["--db", &db, "--admin-secret", SECRET], extra].concat());
    (start(), start())
}

#[test]
fn a_message_sent_on_a_reaches_a_gateway_on_b_and_rotation_on_a_closes_it() {
    // Sessions poll every 5 s at the most (60 s asked, capped by the lease
    // renewal): prompt delivery and 4004 come from the notification.
    let (a, b) = two_servers_with(&["--gateway-poll-interval-ms", "60000"]);
    let w = a.world("official");
    let mut gw = b.gateway(&w.token, "");
    gw.hello();
    assert_eq!(gw.event()["type"], "bot_started");
    // Delivery from A's commit to B's socket, five times.
    let mut latencies = Vec::new();
    for i in 0..5 {
        let t = Instant::now();
        a.say(&w.user_id, &w.chat, &format!("hello {i}"));
        let ev = gw.event();
        latencies.push(t.elapsed());
        assert_eq!(ev["type"], "message_created");
        assert_eq!(ev["data"]["message"]["text"], format!("hello {i}"));
    }
    assert!(latencies.iter().all(|l| *l < Duration::from_millis(500)), "{latencies:?}");
    eprintln!("A → B delivery: {latencies:?}");
    a.admin("rotateBotToken", &json!({"bot_id": w.bot_id}));
    let t = Instant::now();
    assert_eq!(gw.closed(), (4004, "authentication_failed".to_string()));
    assert!(t.elapsed() < Duration::from_secs(1), "4004 after {:?}", t.elapsed());
}

#[test]
fn the_connection_limit_and_idempotency_keys_hold_across_servers() {
    let (a, b) = two_servers();
    let w = a.world("free"); // one gateway connection
    let mut first = a.gateway(&w.token, "");
    first.hello();
    let refused = b.try_gateway(&w.token, "").err().expect("B must see A's connection");
    refused.assert_error(429, "connection_limit");
    let send = |srv: &Server| {
        let mut s = srv.connect();
        let body = json!({"chat_id": w.chat, "text": "once"}).to_string();
        let req = format!(
            "POST /bot/sendMessage HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {}\r\nIdempotency-Key: k1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            w.token,
            body.len()
        );
        std::io::Write::write_all(&mut s, req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        read_response(&mut s, &mut buf)
    };
    let (r1, r2) = (send(&a), send(&b));
    assert_eq!((r1.status, r2.status), (200, 200));
    assert_eq!(r1.json(), r2.json());
    let history = b.admin("getChatHistory", &json!({"chat_id": w.chat}));
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
}

#[test]
fn a_killed_node_loses_no_acknowledged_write_and_its_leases_lapse() {
    let (a, b) = two_servers();
    let w = a.world("free");
    let writer = b.world("official");
    // A holds the free bot's only connection when it dies.
    let mut held = a.gateway(&w.token, "");
    held.hello();
    // Writers on both nodes; A is killed under them.
    let (token, chat) = (writer.token.clone(), writer.chat.clone());
    let (a_base, b_base) = (a.base.clone(), b.base.clone());
    let run = move |base: String, tag: &'static str| {
        let (token, chat) = (token.clone(), chat.clone());
        std::thread::spawn(move || {
            let agent = agent();
            let mut acked = Vec::new();
            for i in 0..400 {
                let text = format!("{tag}{i}");
                let r = agent
                    .post(&format!("{base}/bot/sendMessage"))
                    .header("Authorization", &format!("Bot {token}"))
                    .header("Content-Type", "application/json")
                    .send(json!({"chat_id": chat, "text": text}).to_string());
                match r {
                    Ok(resp) if resp.status().as_u16() == 200 => acked.push(text),
                    _ => {}
                }
            }
            acked
        })
    };
    let on_a = run(a_base, "a");
    let on_b = run(b_base, "b");
    std::thread::sleep(Duration::from_millis(300));
    drop(a); // SIGKILL
    drop(held);
    // The dead node's lease counts until it lapses (LEASE_TTL_MS, 10 s):
    // asked at once, since the writers below may take longer than that on
    // a loaded machine.
    b.try_gateway(&w.token, "")
        .err()
        .expect("the dead node's lease still counts")
        .assert_error(429, "connection_limit");
    let acked: Vec<String> = on_a.join().unwrap().into_iter().chain(on_b.join().unwrap()).collect();
    assert!(acked.iter().any(|t| t.starts_with('b')), "B kept serving");
    // Every acknowledged message is there, ids 1..n with no gap.
    let mut all = Vec::new();
    let mut after = 0u64;
    loop {
        let page = b.admin(
            "getChatHistory",
            &json!({"chat_id": writer.chat, "after_message_id": after.to_string(), "limit": 100}),
        );
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        after = page.last().unwrap()["message_id"].as_str().unwrap().parse().unwrap();
        all.extend(page);
    }
    let ids: Vec<u64> = all.iter().map(|m| m["message_id"].as_str().unwrap().parse().unwrap()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "gapless");
    let texts: std::collections::HashSet<&str> = all.iter().map(|m| m["text"].as_str().unwrap()).collect();
    for t in &acked {
        assert!(texts.contains(t.as_str()), "acknowledged {t} is missing");
    }
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        match b.try_gateway(&w.token, "") {
            Ok(mut g) => {
                g.hello();
                break;
            }
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(250)),
            Err(e) => panic!("the dead node's lease never lapsed: {}", e.status),
        }
    }
}

#[test]
fn a_rust_node_and_a_c_node_serve_one_database() {
    let db = common::test_database();
    let rust = Server::start_rust_with(&["--db", &db, "--admin-secret", SECRET]);
    let c = Server::start_c_with(&["--db", &db, "--admin-secret", SECRET]);
    let w = rust.world("official");
    // Rust commits, the C server's gateway delivers.
    let mut gw = c.gateway(&w.token, "");
    gw.hello();
    assert_eq!(gw.event()["type"], "bot_started");
    rust.say(&w.user_id, &w.chat, "from the Rust node");
    assert_eq!(gw.event()["data"]["message"]["text"], "from the Rust node");
    // The bot writes through the C node; the Rust node reads it.
    let sent = c.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "from the C node"}));
    assert_eq!(sent.status, 200);
    let history = rust.admin("getChatHistory", &json!({"chat_id": w.chat}));
    let texts: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["from the Rust node", "from the C node"]);
    // Rotation on the C node closes the C node's own session at once.
    c.admin("rotateBotToken", &json!({"bot_id": w.bot_id}));
    assert_eq!(gw.closed(), (4004, "authentication_failed".to_string()));
}
