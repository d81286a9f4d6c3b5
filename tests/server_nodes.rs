//! Several nodes over real TCP: two Rust example servers on one PostgreSQL
//! database (scripts/test-postgres.sh, feature `pg-tests`), on the system
//! clock, each a process of its own.

mod common;
mod webhooks;
mod wire;

use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use wire::*;

/// The tests share one PostgreSQL cluster; the one that stops it runs alone.
static CLUSTER: RwLock<()> = RwLock::new(());

fn shared_cluster() -> RwLockReadGuard<'static, ()> {
    CLUSTER.read().unwrap_or_else(|e| e.into_inner())
}

fn whole_cluster() -> RwLockWriteGuard<'static, ()> {
    CLUSTER.write().unwrap_or_else(|e| e.into_inner())
}

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
    let _g = shared_cluster();
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
    // The pool's two connections (the listener's aside).
    assert_eq!(metric(&b, "botspace_database_connections"), 2.0);
    // B timed each of A's notifications from A's COMMIT: at least the five.
    let lag = metric(&b, "botspace_notification_lag_seconds_count");
    assert!(lag >= 5.0, "{lag} notification lags observed");
    assert_eq!(metric(&b, r#"botspace_notification_lag_seconds_bucket{le="+Inf"}"#), lag);
    assert!(metric(&b, "botspace_notification_lag_seconds_sum") < lag * 0.5, "a lag of half a second or more");
    // Held past a renewal interval (half the lease's 10 s), B's session
    // gets its lease renewed, and B counts the renewal.
    let before = metric(&b, "botspace_gateway_lease_renewals_total");
    let deadline = Instant::now() + Duration::from_secs(15);
    while metric(&b, "botspace_gateway_lease_renewals_total") <= before {
        assert!(Instant::now() < deadline, "no lease renewal within 15 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    a.admin("rotateBotToken", &json!({"bot_id": w.bot_id}));
    let t = Instant::now();
    assert_eq!(gw.closed(), (4004, "authentication_failed".to_string()));
    assert!(t.elapsed() < Duration::from_secs(1), "4004 after {:?}", t.elapsed());
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

#[test]
fn the_connection_limit_and_idempotency_keys_hold_across_servers() {
    let _g = shared_cluster();
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

/// The whole history of a chat, page by page, oldest first.
fn chat_history(srv: &Server, chat: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = 0u64;
    loop {
        let page =
            srv.admin("getChatHistory", &json!({"chat_id": chat, "after_message_id": after.to_string(), "limit": 100}));
        let page = page.as_array().unwrap().clone();
        let Some(last) = page.last() else { break };
        after = message_id(last);
        all.extend(page);
    }
    all
}

#[test]
fn a_killed_node_loses_no_acknowledged_write_and_its_leases_lapse() {
    let _g = shared_cluster();
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
    let all = chat_history(&b, &writer.chat);
    let ids: Vec<u64> = all.iter().map(message_id).collect();
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

/// One node at a time delivers a bot's webhooks; when it dies, another
/// takes them over once its lease lapses, from the durable cursor: every
/// event arrives, and only what was in flight at the kill arrives twice.
#[test]
fn a_bots_webhooks_are_delivered_by_one_node_and_handed_over_when_it_dies() {
    let _g = shared_cluster();
    let db = common::test_database();
    let dir = temp_dir("nodes-webhooks");
    let rx = webhooks::Receiver::start(&dir, 0);
    let flags = ["--db", &db, "--admin-secret", SECRET, "--webhook-allow-http", "--webhook-allow-private-addresses"];
    // A alone first: it takes the lease.
    let a = Server::start_rust_with(&flags);
    let w = a.world("official");
    let set = a.bot(&w.token, "setWebhook", &json!({"url": rx.url()}));
    assert_eq!(set.status, 200, "{}", set.body);
    rx.control(&json!({"secret": set.body["result"]["secret"]}));
    rx.wait_for(WAIT, "bot_started", |s| webhooks::delivered(s).contains(&1));
    // B joins; commits on B reach A's deliveries (by notification, or A's
    // next round of leases).
    let b = Server::start_rust_with(&flags);
    for i in 0..5 {
        b.say(&w.user_id, &w.chat, &format!("via b {i}"));
    }
    rx.wait_for(WAIT, "events 2..=6", |s| webhooks::delivered(s).contains(&6));
    let before_kill = rx.seen().len();
    let killed_at = Instant::now();
    drop(a); // SIGKILL
    for i in 0..5 {
        b.say(&w.user_id, &w.chat, &format!("after the kill {i}"));
    }
    // The lease lapses within 10 s; B claims at its next round (2 s).
    let seen =
        rx.wait_for(Duration::from_secs(30), "events 7..=11 through B", |s| webhooks::delivered(s).contains(&11));
    let took = killed_at.elapsed();
    assert!(took < Duration::from_secs(14), "handed over in {took:?}");
    // B resumes from the durable cursor, which A writes at most every
    // 50 ms: what A delivered since its last write comes again, in order,
    // with the same ids. Each node's deliveries keep per-chat order.
    webhooks::assert_per_chat_order(&seen[..before_kill]);
    webhooks::assert_per_chat_order(&seen[before_kill..]);
    let mut ids = webhooks::delivered(&seen);
    ids.sort();
    ids.dedup();
    assert_eq!(ids, (1..=11).collect::<Vec<_>>(), "every event arrived");
    // B delivers each event once; what it repeats is only what A had
    // delivered (A had nothing in flight: 7..=11 came after the kill).
    let by_b = webhooks::delivered(&seen[before_kill..]);
    let mut unique = by_b.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), by_b.len(), "B delivered an event twice: {by_b:?}");
    assert_eq!(by_b.iter().filter(|id| **id >= 7).count(), 5, "{by_b:?}");
    assert!(seen.len() > before_kill);
    for e in seen.iter().filter(|e| webhooks::answered_ok(e)) {
        assert_eq!(e["verified"], json!(true), "{e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_rust_node_and_a_c_node_serve_one_database() {
    let _g = shared_cluster();
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

/// A sendMessage with an Idempotency-Key over `s` (kept alive): the answer.
fn send_keyed(s: &mut std::net::TcpStream, token: &str, chat: &str, key: &str, text: &str) -> RawResponse {
    let body = json!({"chat_id": chat, "text": text}).to_string();
    let req = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {token}\r\nIdempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    std::io::Write::write_all(s, req.as_bytes()).expect("the server keeps the connection open");
    let mut buf = Vec::new();
    let r = read_response(s, &mut buf);
    assert!(buf.is_empty(), "bytes after the response: {:?}", String::from_utf8_lossy(&buf));
    // Kept open: the next request goes on the same connection.
    assert!(r.header("connection").is_none_or(|c| !c.eq_ignore_ascii_case("close")), "{r:?}");
    r
}

/// One request of a writer: its key and text (the same string), and how
/// it was answered.
struct Sent {
    text: String,
    outcome: Result<u64, &'static str>,
}

#[test]
fn a_postgres_restart_under_load_answers_503_writes_nothing_half_and_both_nodes_recover_by_themselves() {
    let _g = whole_cluster();
    let t0 = Instant::now();
    let (a, b) = two_servers();
    let nodes = [&a, &b];
    // One group, eight bots in it, each the writer of its own keep-alive
    // connection: four on A, four on B. (One chat: writers on two nodes
    // into several chats at once deadlock now and then — each node's group
    // commit locks the chats in its own order — and PostgreSQL takes a
    // second to notice; see docs/scale-out.md.)
    const WRITERS: usize = 8;
    let (_, group, tokens) = group_of_writers(&nodes, "restart", WRITERS);
    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let oks: Arc<Vec<AtomicUsize>> = Arc::new((0..WRITERS).map(|_| AtomicUsize::new(0)).collect());
    let refused: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let recovered: Arc<Vec<AtomicBool>> = Arc::new((0..WRITERS).map(|_| AtomicBool::new(false)).collect());
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let node = t % 2;
            let mut s = nodes[node].connect();
            let (token, group) = (tokens[t].clone(), group.clone());
            let (stop, restarted, oks, refused, recovered) =
                (stop.clone(), restarted.clone(), oks.clone(), refused.clone(), recovered.clone());
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let after_restart = restarted.load(Ordering::SeqCst);
                    let text = format!("w{t}-{n}");
                    let r = send_keyed(&mut s, &token, &group, &text, &text);
                    let outcome = write_outcome(&r, &text, "while the database restarts");
                    match outcome {
                        Ok(_) => {
                            oks[t].fetch_add(1, Ordering::SeqCst);
                            if after_restart {
                                recovered[t].store(true, Ordering::SeqCst);
                            }
                        }
                        Err(_) => {
                            refused[node].fetch_add(1, Ordering::SeqCst);
                            // A client's backoff: the 2 cores are for the restart.
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                    sent.push(Sent { text, outcome });
                }
                (t, sent)
            })
        })
        .collect();
    // Waits (bounded) for `cond`; a writer that failed ends the wait.
    let wait_for = |what: &str, limit: Duration, cond: &dyn Fn() -> bool| -> Duration {
        let t = Instant::now();
        while !cond() {
            if writers.iter().any(|w| w.is_finished()) {
                stop.store(true, Ordering::SeqCst);
                panic!("a writer failed while waiting for {what} (its panic is above)");
            }
            assert!(
                t.elapsed() < limit,
                "no {what} within {limit:?}; answers 200 per writer {:?}, 503 per node {:?}",
                oks.iter().map(|n| n.load(Ordering::SeqCst)).collect::<Vec<_>>(),
                refused.iter().map(|n| n.load(Ordering::SeqCst)).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        t.elapsed()
    };
    wait_for("20 answers 200 to every writer", WAIT, &|| oks.iter().all(|n| n.load(Ordering::SeqCst) >= 20));
    eprintln!("[{:?}] under load; stopping PostgreSQL", t0.elapsed());
    let down = common::pg_stop("fast");
    wait_for("503 on both nodes", WAIT, &|| refused.iter().all(|n| n.load(Ordering::SeqCst) > 0));
    // The writers keep going against a database that is not there.
    std::thread::sleep(Duration::from_secs(1));
    eprintln!("[{:?}] starting PostgreSQL", t0.elapsed());
    down.start();
    restarted.store(true, Ordering::SeqCst);
    // Neither node is restarted: each reconnects on a later request.
    let took = wait_for("answer 200 to every writer on both nodes after the restart", Duration::from_secs(10), &|| {
        recovered.iter().all(|r| r.load(Ordering::SeqCst))
    });
    stop.store(true, Ordering::SeqCst);
    let sent: Vec<(usize, Vec<Sent>)> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    let all = || sent.iter().flat_map(|(t, s)| s.iter().map(move |s| (*t, s)));
    let count = |o: fn(&Result<u64, &str>) -> bool| all().filter(|(_, s)| o(&s.outcome)).count();
    let (acked, unavailable, unknown) = (
        count(|o| o.is_ok()),
        count(|o| *o == Err("storage_unavailable")),
        count(|o| *o == Err("commit_outcome_unknown")),
    );
    eprintln!(
        "[{:?}] {} requests: {acked} × 200, {unavailable} × 503 storage_unavailable, \
         {unknown} × 503 commit_outcome_unknown; every writer answered 200 {took:?} after the restart",
        t0.elapsed(),
        acked + unavailable + unknown,
    );
    // An unknown outcome, retried with its key (on the other node): one
    // message, whether the first attempt had landed or not.
    let mut retried: HashMap<&str, u64> = HashMap::new();
    for (t, s) in all().filter(|(_, s)| s.outcome == Err("commit_outcome_unknown")) {
        let mut conn = nodes[(t + 1) % 2].connect();
        let r = send_keyed(&mut conn, &tokens[t], &group, &s.text, &s.text);
        let id = write_outcome(&r, &s.text, "while the database restarts")
            .unwrap_or_else(|code| panic!("the retry of {} got 503 {code}", s.text));
        retried.insert(&s.text, id);
    }
    // The database holds exactly what was answered 200 (at the id that
    // answer gave) and the retried unknowns, each once, ids 1..n.
    let history = chat_history(&a, &group);
    let ids: Vec<u64> = history.iter().map(message_id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "message ids are gapless");
    let stored: HashMap<&str, u64> =
        history.iter().map(|m| (m["text"].as_str().expect("text"), message_id(m))).collect();
    assert_eq!(stored.len(), history.len(), "a text is stored twice");
    let mut expected = HashSet::new();
    for (_, s) in all() {
        let text = s.text.as_str();
        match s.outcome {
            Ok(id) => assert_eq!(stored.get(text), Some(&id), "{text} was answered 200 with id {id}"),
            Err("storage_unavailable") => assert_eq!(stored.get(text), None, "{text} was refused, yet written"),
            Err(_) => assert_eq!(stored.get(text), retried.get(text), "{text}: the keyed retry's id"),
        }
        if s.outcome != Err("storage_unavailable") {
            expected.insert(text);
        }
    }
    let stored: HashSet<&str> = stored.into_keys().collect();
    assert_eq!(stored, expected, "what is stored is what was answered 200 or retried");
}

/// Button presses on two nodes, one of which dies: every press gets
/// exactly one outcome (answered or expired), written by whichever node
/// came first with the conditional UPDATE; the survivor expires the dead
/// node's presses by its own timer (read from the database, no request:
/// the outcomes are read from PostgreSQL directly), within the timeout
/// (15 s) and the timer's re-read (2 s) of the last press.
#[test]
fn button_presses_on_two_nodes_get_exactly_one_outcome_each_when_one_dies() {
    let _g = shared_cluster();
    let db = common::test_database();
    assert!(db.starts_with("postgres://"), "BOTSPACE_TEST_POSTGRES must be set (scripts/with-postgres.sh)");
    let start = || Server::start_rust_with(&["--db", &db, "--admin-secret", SECRET]);
    let (a, b) = (start(), start());
    let w = a.world("official");
    let kb = json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}]]});
    let sent = a.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "Choose", "reply_markup": kb}));
    assert_eq!(sent.status, 200, "{}", sent.body);
    let mid = sent.body["result"]["message_id"].as_str().unwrap().to_string();
    let press = |srv: &Server| -> String {
        let r = srv.admin(
            "pressButton",
            &json!({"user_id": w.user_id, "chat_id": w.chat, "message_id": mid, "callback_data": "yes"}),
        );
        r["callback_query_id"].as_str().unwrap().to_string()
    };
    let mut presses = Vec::new();
    for i in 0..10 {
        presses.push(press(if i % 2 == 0 { &a } else { &b }));
    }
    // Every third is answered, on the other node than it was pressed on.
    for (i, q) in presses.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        let on = if i % 2 == 0 { &b } else { &a };
        let r = on.bot(&w.token, "answerCallbackQuery", &json!({"callback_query_id": q}));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let last_press = Instant::now();
    drop(a); // SIGKILL: half the presses were made on it.
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let outcomes = |pg: &mut postgres::Client| -> Vec<(String, Option<String>)> {
        pg.query("SELECT id, outcome FROM callback_queries ORDER BY id", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    let deadline = Duration::from_secs(15 + 2 + 5);
    loop {
        let o = outcomes(&mut pg);
        if o.iter().all(|(_, out)| out.is_some()) {
            break;
        }
        assert!(last_press.elapsed() < deadline, "not every press expired in time: {o:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = last_press.elapsed();
    assert!(elapsed >= Duration::from_secs(14), "expired early: {elapsed:?}");
    eprintln!("the survivor expired every press {elapsed:?} after the last");
    // Exactly one outcome event per press on the host stream.
    let stream = b.admin("getUpdates", &json!({"limit": 1000}));
    for (i, q) in presses.iter().enumerate() {
        let kinds: Vec<&str> = stream
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["type"] != "callback_query" && u["data"]["callback_query_id"] == json!(q))
            .map(|u| u["type"].as_str().unwrap())
            .collect();
        let want = if i % 3 == 0 { "callback_answered" } else { "callback_expired" };
        assert_eq!(kinds, [want], "press {i}");
    }
}
