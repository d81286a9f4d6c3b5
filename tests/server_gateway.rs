//! Gateway scenarios (docs/gateway.md) against a real server process over
//! TCP with tungstenite's client (see `tests/wire`). `BOTSPACE_SERVER_CMD`
//! runs them against another server implementation.

mod wire;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};
use wire::*;

/// Asserts `text` is exactly the event frame a human message gives the bot:
/// the documented field order up to `data`, then `{"message": <message>}`.
fn message_event(text: &str, seq: i64, message: &Value) {
    let prefix = format!("{{\"op\":\"event\",\"seq\":{seq},\"type\":\"message_created\",\"data\":");
    assert!(text.starts_with(&prefix), "expected {prefix}..., got {text}");
    same_json(text, &json!({"op": "event", "seq": seq, "type": "message_created", "data": {"message": message}}));
}

fn same_json(text: &str, expected: &Value) {
    let got: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(&got, expected, "frame {text}");
}

#[test]
fn hello_then_replay_of_bot_started() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    let h = gw.hello();
    assert!(h["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{h}");
    assert_eq!(h["heartbeat_interval_ms"], json!(HEARTBEAT_MS));
    assert_eq!(h["bot"], w.bot);
    assert_eq!(h["replay_from"], json!(1));
    assert_eq!(h["replay_truncated"], json!(false));
    let t = gw.text();
    assert!(t.starts_with("{\"op\":\"event\",\"seq\":1,\"type\":\"bot_started\",\"data\":"), "{t}");
    same_json(&t, &w.bot_started());
    // Two sessions get different ids.
    gw.close();
    let mut again = srv.gateway(&w.token, "");
    assert_ne!(again.hello()["session_id"], h["session_id"]);
}

#[test]
fn live_delivery_of_a_human_message() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    same_json(&gw.text(), &w.bot_started());
    let m = srv.say(&w.user_id, &w.chat, "hello bot");
    message_event(&gw.text(), 2, &m);
    assert_eq!(
        m,
        json!({"message_id": "1", "chat": {"id": w.chat, "type": "private"}, "date": MANUAL_START_S, "text": "hello bot",
               "from": {"id": w.user_id, "is_bot": false}})
    );
    // The bot's own messages are not echoed back; the next human one is seq 3.
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "hi"}));
    assert_eq!(r.status, 200);
    let m2 = srv.say(&w.user_id, &w.chat, "again");
    message_event(&gw.text(), 3, &m2);
}

#[test]
fn every_connection_of_a_bot_receives_every_event() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut a = srv.gateway(&w.token, "");
    let mut b = srv.gateway(&w.token, "");
    for gw in [&mut a, &mut b] {
        gw.hello();
        same_json(&gw.text(), &w.bot_started());
    }
    let m = srv.say(&w.user_id, &w.chat, "to both");
    message_event(&a.text(), 2, &m);
    message_event(&b.text(), 2, &m);
}

#[test]
fn many_bots_and_connections_at_once() {
    let srv = Server::start();
    let worlds: Vec<World> = (0..25).map(|_| srv.world("standard")).collect();
    let mut conns: Vec<(usize, Gw)> = Vec::new();
    for (i, w) in worlds.iter().enumerate() {
        for _ in 0..2 {
            let mut gw = srv.gateway(&w.token, "");
            assert_eq!(gw.hello()["bot"], w.bot);
            same_json(&gw.text(), &w.bot_started());
            conns.push((i, gw));
        }
    }
    let msgs: Vec<Value> =
        worlds.iter().enumerate().map(|(i, w)| srv.say(&w.user_id, &w.chat, &format!("for bot {i}"))).collect();
    // Each connection gets its own bot's message and nothing else.
    for (i, gw) in conns.iter_mut() {
        message_event(&gw.text(), 2, &msgs[*i]);
        gw.send("{\"op\":\"heartbeat\"}");
        assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    }
}

#[test]
fn unacknowledged_events_are_replayed_after_reconnect() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    let mut frames = vec![gw.text()];
    let msgs: Vec<Value> = (1..=3).map(|i| srv.say(&w.user_id, &w.chat, &format!("m{i}"))).collect();
    for (i, m) in msgs.iter().enumerate() {
        let t = gw.text();
        message_event(&t, i as i64 + 2, m);
        frames.push(t);
    }
    // Dropped without a closing handshake and without acks.
    gw.cut();
    let mut gw = eventually("a new connection after the cut", || srv.try_gateway(&w.token, "").ok());
    let h = gw.hello();
    assert_eq!((h["replay_from"].clone(), h["replay_truncated"].clone()), (json!(1), json!(false)));
    for f in &frames {
        assert_eq!(&gw.text(), f, "replayed frames are identical");
    }
    // Then live events continue the numbering.
    let m = srv.say(&w.user_id, &w.chat, "live");
    message_event(&gw.text(), 5, &m);
}

#[test]
fn acknowledged_events_are_not_replayed() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    gw.event();
    let msgs: Vec<Value> = (1..=3).map(|i| srv.say(&w.user_id, &w.chat, &format!("m{i}"))).collect();
    for (i, m) in msgs.iter().enumerate() {
        message_event(&gw.text(), i as i64 + 2, m);
    }
    gw.ack(3);
    gw.close();
    // Acked up to 3: replay starts at 4.
    let mut gw = srv.gateway(&w.token, "");
    let h = gw.hello();
    assert_eq!(h["replay_from"], json!(4));
    message_event(&gw.text(), 4, &msgs[2]);
    gw.ack(4);
    // Nothing else is queued: a heartbeat is answered next.
    gw.send("{\"op\":\"heartbeat\"}");
    assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    gw.close();
    let mut gw = srv.gateway(&w.token, "");
    let h = gw.hello();
    assert_eq!(h["replay_from"], json!(5));
    gw.send("{\"op\":\"heartbeat\"}");
    assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    let m = srv.say(&w.user_id, &w.chat, "new");
    message_event(&gw.text(), 5, &m);
}

#[test]
fn after_query_sets_the_replay_start() {
    let srv = Server::start();
    let w = srv.world("standard");
    let msgs: Vec<Value> = (1..=3).map(|i| srv.say(&w.user_id, &w.chat, &format!("m{i}"))).collect();
    // Events: 1 bot_started, 2..4 the messages. after=2 → 3 and 4.
    let mut gw = srv.gateway(&w.token, "?after=2");
    let h = gw.hello();
    assert_eq!((h["replay_from"].clone(), h["replay_truncated"].clone()), (json!(3), json!(false)));
    message_event(&gw.text(), 3, &msgs[1]);
    message_event(&gw.text(), 4, &msgs[2]);
    gw.ack(4);
    gw.close();
    // after=0 replays everything even after an ack.
    let mut gw = srv.gateway(&w.token, "?after=0");
    assert_eq!(gw.hello()["replay_from"], json!(1));
    same_json(&gw.text(), &w.bot_started());
    message_event(&gw.text(), 2, &msgs[0]);
    gw.close();
    // A bad value is refused before the upgrade.
    srv.raw_upgrade(&w.token, "?after=x").assert_error(400, "invalid_field");
}

#[test]
fn connection_limit_of_the_free_tier() {
    let srv = Server::start();
    let w = srv.world("free");
    assert_eq!(w.bot["gateway_connection_limit"], json!(1));
    let mut first = srv.gateway(&w.token, "");
    first.hello();
    let r = srv.raw_upgrade(&w.token, "");
    r.assert_error(429, "connection_limit");
    assert_eq!(r.json()["parameters"], json!({"retry_after": 1, "retry_after_ms": 1000}));
    assert_eq!(r.header("retry-after"), Some("1"));
    first.close();
    // The slot frees once the server has seen the close; poll, bounded.
    let mut second = eventually("the freed slot", || srv.try_gateway(&w.token, "").ok());
    assert_eq!(second.hello()["bot"], w.bot);
    // A cut (no closing handshake) frees the slot as well.
    second.cut();
    let mut third = eventually("the slot freed by a cut", || srv.try_gateway(&w.token, "").ok());
    third.hello();
}

#[test]
fn upgrade_refusals_are_json_errors() {
    let srv = Server::start();
    let w = srv.world("standard");
    srv.raw_upgrade("bot_wrong", "").assert_error(401, "invalid_token");
    // No upgrade headers: 426.
    let r = agent()
        .get(format!("{}/bot/gateway", srv.base))
        .header("Authorization", format!("Bot {}", w.token))
        .call()
        .unwrap();
    Resp::from_ureq(r).assert_error(426, "upgrade_required");
    // Suspended: 403.
    srv.admin("updateBot", &json!({"bot_id": w.bot_id, "status": "suspended"}));
    srv.raw_upgrade(&w.token, "").assert_error(403, "bot_suspended");
}

#[test]
fn token_rotation_closes_with_4004() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    gw.event();
    let rotated = srv.admin("rotateBotToken", &json!({"bot_id": w.bot_id}));
    let new_token = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(new_token, w.token);
    assert_eq!(gw.closed(), (4004, "authentication_failed".to_string()));
    // The old token is refused at the upgrade and for REST.
    srv.raw_upgrade(&w.token, "").assert_error(401, "invalid_token");
    srv.bot(&w.token, "getMe", &json!({})).assert_error(401, "invalid_token");
    // The new one works, and the unacknowledged event is still there.
    let mut gw = srv.gateway(&new_token, "");
    assert_eq!(gw.hello()["replay_from"], json!(1));
    same_json(&gw.text(), &w.bot_started());
    // Suspension closes with 4004 too.
    srv.admin("updateBot", &json!({"bot_id": w.bot_id, "status": "suspended"}));
    assert_eq!(gw.closed(), (4004, "authentication_failed".to_string()));
}

#[test]
fn heartbeat_is_acknowledged() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    gw.event();
    for _ in 0..3 {
        gw.send("{\"op\":\"heartbeat\"}");
        assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    }
}

#[test]
fn heartbeat_timeout_under_the_manual_clock() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    gw.event();
    // Heartbeats keep the session: 60 s, heartbeat, another 60 s (120 s
    // since the connect, more than two intervals) and the server has had
    // time to look at the clock.
    srv.advance(60.0);
    gw.send("{\"op\":\"heartbeat\"}");
    assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    srv.advance(60.0);
    std::thread::sleep(Duration::from_millis(1500));
    gw.send("{\"op\":\"heartbeat\"}");
    assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    // No heartbeat for more than 2 × 41.25 s: closed with 4009, without any
    // traffic from the bot to wake the server.
    let started = Instant::now();
    srv.advance((2 * HEARTBEAT_MS) as f64 / 1000.0 + 1.0);
    assert_eq!(gw.closed(), (4009, "session_timeout".to_string()));
    assert!(started.elapsed() < Duration::from_secs(5), "noticed after {:?}", started.elapsed());
}

/// CPU seconds (user + system) the server process used so far (Linux).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

#[test]
fn exactly_two_intervals_is_not_yet_a_timeout_and_nothing_spins() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    gw.event();
    // The clock stands exactly on the session's deadline for a while.
    srv.advance((2 * HEARTBEAT_MS) as f64 / 1000.0);
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_seconds(srv.pid());
    std::thread::sleep(Duration::from_millis(1000));
    let after = cpu_seconds(srv.pid());
    if let (Some(a), Some(b)) = (before, after) {
        assert!(b - a < 0.5, "the server used {:.2} s of CPU in 1 s while idle", b - a);
    }
    // Still open; a heartbeat keeps it; one millisecond past two intervals
    // after that heartbeat closes it.
    gw.send("{\"op\":\"heartbeat\"}");
    assert_eq!(gw.text(), "{\"op\":\"heartbeat_ack\"}");
    srv.advance((2 * HEARTBEAT_MS + 1) as f64 / 1000.0);
    assert_eq!(gw.closed(), (4009, "session_timeout".to_string()));
}

#[test]
fn invalid_payloads_close_with_4001() {
    let srv = Server::start();
    let w = srv.world("standard");
    type Act = Box<dyn Fn(&mut Gw)>;
    let cases: [(&str, Act); 4] = [
        ("binary frame", Box::new(|gw: &mut Gw| gw.ws.send(tungstenite::Message::binary(vec![1u8, 2, 3])).unwrap())),
        ("not JSON", Box::new(|gw: &mut Gw| gw.send("hello?"))),
        ("unknown op", Box::new(|gw: &mut Gw| gw.send("{\"op\":\"subscribe\"}"))),
        ("ack beyond the last event", Box::new(|gw: &mut Gw| gw.ack(99))),
    ];
    for (what, act) in cases {
        let mut gw = eventually("a free slot", || srv.try_gateway(&w.token, "").ok());
        gw.hello();
        gw.event();
        act(&mut gw);
        assert_eq!(gw.closed(), (4001, "invalid_payload".to_string()), "{what}");
    }
}

/// 10 000 human messages in a group, delivered across a reconnect: none
/// lost, seq strictly increasing within each connection, duplicates only
/// where the second connection replays what the first did not acknowledge.
#[test]
fn ten_thousand_events_in_order_across_a_reconnect() {
    const N: usize = 10_000;
    let srv = Server::start();
    let w = srv.world("free");
    let group = srv.admin("createGroup", &json!({"title": "load", "member_ids": [w.user_id, w.bot_id]}));
    let group_id = group["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(240);

    // Post all messages from another thread, pipelined 100 at a time.
    let poster = {
        let (addr, user_id, group_id) = (srv.addr, w.user_id.clone(), group_id.clone());
        std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut buf = Vec::new();
            for batch in 0..N / 100 {
                let reqs: Vec<u8> = (batch * 100..batch * 100 + 100)
                    .flat_map(|i| {
                        admin_request(
                            "sendUserMessage",
                            &json!({"user_id": user_id, "chat_id": group_id, "text": format!("n{i}")}),
                        )
                    })
                    .collect();
                s.write_all(&reqs).unwrap();
                for i in 0..100 {
                    let r = read_response(&mut s, &mut buf);
                    assert_eq!(r.status, 200, "message {}: {:?}", batch * 100 + i, String::from_utf8_lossy(&r.body));
                }
            }
        })
    };

    // seq → message index, per connection.
    let mut seen: Vec<Vec<(i64, Option<usize>)>> = Vec::new();
    let index_of = |e: &Value| -> Option<usize> {
        if e["type"] != json!("message_created") {
            return None;
        }
        let m = &e["data"]["message"];
        if m["chat"]["id"] != json!(group_id) {
            return None;
        }
        m["text"].as_str().and_then(|t| t.strip_prefix('n')).and_then(|n| n.parse().ok())
    };

    // First connection: read until message 4000, ack what was read up to
    // message 3000, then cut the connection.
    let mut gw = srv.gateway(&w.token, "");
    assert_eq!(gw.hello()["replay_from"], json!(1));
    let mut a = Vec::new();
    let mut acked = 0;
    loop {
        assert!(Instant::now() < deadline, "first connection too slow");
        let e = gw.event();
        let seq = e["seq"].as_i64().unwrap();
        let idx = index_of(&e);
        a.push((seq, idx));
        if idx == Some(3000) {
            acked = seq;
            gw.ack(seq);
        }
        if idx == Some(4000) {
            break;
        }
    }
    // Make sure the ack is recorded before the cut: a heartbeat after it is
    // processed after it (events may still arrive in between).
    gw.send("{\"op\":\"heartbeat\"}");
    loop {
        let t = gw.text();
        if t == "{\"op\":\"heartbeat_ack\"}" {
            break;
        }
        let e: Value = serde_json::from_str(&t).unwrap();
        a.push((e["seq"].as_i64().unwrap(), index_of(&e)));
    }
    gw.cut();
    seen.push(a);

    // Second connection: replays from acked+1 and runs to the last message.
    let mut gw = eventually("reconnect", || srv.try_gateway(&w.token, "").ok());
    let h = gw.hello();
    assert_eq!(h["replay_from"], json!(acked + 1));
    assert_eq!(h["replay_truncated"], json!(false));
    let mut b = Vec::new();
    let last_seq;
    loop {
        assert!(Instant::now() < deadline, "second connection too slow");
        let e = gw.event();
        let seq = e["seq"].as_i64().unwrap();
        let idx = index_of(&e);
        b.push((seq, idx));
        if idx == Some(N - 1) {
            last_seq = seq;
            break;
        }
    }
    poster.join().expect("poster");
    seen.push(b);

    for (c, frames) in seen.iter().enumerate() {
        for pair in frames.windows(2) {
            assert!(pair[0].0 < pair[1].0, "connection {c}: seq {} then {}", pair[0].0, pair[1].0);
            if let (Some(x), Some(y)) = (pair[0].1, pair[1].1) {
                assert!(x < y, "connection {c}: message n{x} then n{y}");
            }
        }
    }
    assert_eq!(seen[1][0].0, acked + 1, "the second connection starts right after the ack");
    let seqs: BTreeSet<i64> = seen.iter().flatten().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=last_seq).collect::<BTreeSet<i64>>(), "every seq in 1..={last_seq} was delivered");
    let idxs: BTreeSet<usize> = seen.iter().flatten().filter_map(|(_, i)| *i).collect();
    assert_eq!(idxs.len(), N, "every message was delivered");
    // Duplicates only in the replayed range (acked, end of the first connection].
    let first_max = seen[0].last().unwrap().0;
    let dups: Vec<i64> = seen[1].iter().map(|(s, _)| *s).filter(|s| *s <= first_max).collect();
    assert!(dups.iter().all(|s| *s > acked), "a duplicate at or below the ack");
    assert_eq!(dups.len() as i64, first_max - acked);
    eprintln!(
        "10k: first connection {} frames, acked {acked}, second {} frames, {} duplicates",
        seen[0].len(),
        seen[1].len(),
        dups.len()
    );
}

/// Resident memory of a process, from /proc (kB → bytes).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

#[test]
fn gateway_readers_that_never_read_cost_bounded_memory() {
    let dir = temp_dir("gw-memory");
    let mut srv = Server::start_on(&dir);
    srv.wait_line("botspace ready");
    let w = srv.world("official");
    // A backlog of 2 000 events of 20 KB (5 000 four-byte characters, the
    // longest text), 40 MB, that every connection of the bot replays.
    let text = "😀".repeat(5000);
    let agent = agent();
    for _ in 0..2000 {
        let r = agent
            .post(&format!("{}/admin/sendUserMessage", srv.base))
            .header("Authorization", &format!("Admin {SECRET}"))
            .header("Content-Type", "application/json")
            .send(json!({"user_id": w.user_id, "chat_id": w.chat, "text": text}).to_string())
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_bytes(srv.pid());
    // Four connections of the bot take the 101 and then read nothing: a
    // server that framed the backlog ahead of the socket would hold 160 MB.
    let silent: Vec<_> = (0..4)
        .map(|_| {
            let mut s = srv.connect();
            let req = format!(
                "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {}\r\n\r\n",
                w.token
            );
            s.write_all(req.as_bytes()).unwrap();
            s
        })
        .collect();
    // More events while they sit.
    for _ in 0..200 {
        srv.say(&w.user_id, &w.chat, &text);
    }
    std::thread::sleep(Duration::from_millis(1000));
    let grown = rss_bytes(srv.pid()).saturating_sub(before);
    assert!(grown < 64 << 20, "resident memory grew by {} MB", grown >> 20);
    // The server still answers.
    assert_eq!(srv.post("/bot/getMe", Some(&format!("Bot {}", w.token)), &json!({})).status, 200);
    drop(silent);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}
