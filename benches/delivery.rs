//! How fast a bot hears of a human message, by each way of hearing, and
//! what 10 000 parked polls cost: the release example server (or the C
//! server) over real TCP on loopback.
//!
//!     cargo bench --bench delivery                      # the Rust server
//!     BOTSPACE_C_SERVER=examples/c-server/build/botspace-server cargo bench --bench delivery -- c
//!
//! **Latency.** One group holds a user and three official bots: one on the
//! gateway, one long polling (getUpdates, `timeout` 50, offset after each
//! answer), one with a webhook to a receiver in this process. Four threads
//! send the user's messages through the host API at 1 000 a second in all,
//! on keep-alive connections, for 5 s; the server's database is a file with
//! `synchronous = full`. For each message and each bot: from the moment
//! its sendUserMessage request starts being written (so the figure
//! includes the commit and its fsync) to the moment the bot has the event.
//!
//! **Parked polls.** 10 000 connections each park a getUpdates of one bot
//! (`timeout` 50) on a server whose file limit is raised for it; the
//! server's resident memory before and after, then one message answers all
//! of them.

#[path = "../tests/wire/mod.rs"]
mod wire;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::*;

const MESSAGES: usize = 5_000;
const RATE_PER_S: usize = 1_000;
const SENDERS: usize = 4;
const PARKED: usize = 10_000;

fn main() {
    let which = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_else(|| "rust".into());
    let bin = if which == "c" { c_binary() } else { example_binary() };
    println!("server: {}", bin.display());
    latency(&bin);
    parked_polls(&bin);
}

/// Received instants per message number, for one way of hearing.
type Seen = Arc<Mutex<Vec<Option<Instant>>>>;

fn seen() -> Seen {
    Arc::new(Mutex::new(vec![None; MESSAGES]))
}

/// The message number in `m<n>` texts.
fn number(update_data: &Value) -> Option<usize> {
    update_data["message"]["text"].as_str()?.strip_prefix('m')?.parse().ok()
}

fn mark(seen: &Seen, data: &Value) {
    if let Some(n) = number(data) {
        let mut s = seen.lock().unwrap();
        if n < s.len() && s[n].is_none() {
            s[n] = Some(Instant::now());
        }
    }
}

fn latency(bin: &std::path::Path) {
    let dir = temp_dir("bench-delivery");
    let db = dir.join("botspace.db");
    let srv = Server::start_in_shell(
        &[],
        "true",
        &[],
        bin,
        &[
            "--db",
            db.to_str().unwrap(),
            "--admin-secret",
            SECRET,
            "--webhook-allow-http",
            "--webhook-allow-private-addresses",
        ],
    );
    let user = srv.admin("createUser", &json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let group = srv.admin("createGroup", &json!({"title": "Load"}))["id"].as_str().unwrap().to_string();
    srv.admin("addMember", &json!({"chat_id": group, "member_id": user}));
    let mut tokens = Vec::new();
    for name in ["gw_bot", "poll_bot", "hook_bot"] {
        let b = srv.admin("createBot", &json!({"display_name": name, "handle": name, "quota_tier": "official"}));
        srv.admin("addMember", &json!({"chat_id": group, "member_id": b["bot"]["id"]}));
        tokens.push(b["token"].as_str().unwrap().to_string());
    }
    let (by_gateway, by_poll, by_webhook) = (seen(), seen(), seen());

    // The gateway bot.
    let mut gw = srv.gateway(&tokens[0], "");
    let hello = gw.hello();
    let mut acked = hello["replay_from"].as_i64().unwrap_or(1) - 1;
    {
        let by_gateway = by_gateway.clone();
        std::thread::spawn(move || {
            // Until the server goes away at the end.
            while let Ok(tungstenite::Message::Text(t)) = gw.ws.read() {
                let e: Value = serde_json::from_str(&t).unwrap();
                if e["op"] != "event" {
                    continue;
                }
                mark(&by_gateway, &e["data"]);
                let seq = e["seq"].as_i64().unwrap();
                if seq - acked >= 100 {
                    let ack = json!({"op": "ack", "seq": seq}).to_string();
                    if gw.ws.send(tungstenite::Message::text(ack)).is_err() {
                        return;
                    }
                    acked = seq;
                }
            }
        });
    }
    // The long-polling bot.
    {
        let (base, token, by_poll) = (srv.base.clone(), tokens[1].clone(), by_poll.clone());
        std::thread::spawn(move || {
            let agent = agent();
            let mut offset = 0i64;
            loop {
                let r = agent
                    .post(format!("{base}/bot/getUpdates"))
                    .header("Authorization", format!("Bot {token}"))
                    .content_type("application/json")
                    .send(json!({"offset": offset, "timeout": 50}).to_string());
                let Ok(mut r) = r else { return };
                let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
                for u in v["result"].as_array().into_iter().flatten() {
                    mark(&by_poll, &u["data"]);
                    offset = offset.max(u["update_id"].as_i64().unwrap() + 1);
                }
            }
        });
    }
    // The webhook bot's receiver: answers 200 at once, keep-alive.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let hook_url = format!("http://{}/hook", listener.local_addr().unwrap());
    {
        let by_webhook = by_webhook.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let by_webhook = by_webhook.clone();
                std::thread::spawn(move || receive(conn, &by_webhook));
            }
        });
    }
    let set = srv.bot(&tokens[2], "setWebhook", &json!({"url": hook_url, "max_connections": 100}));
    assert_eq!(set.status, 200, "{}", set.body);

    // The senders: message n leaves at start + n ms.
    let sent: Seen = seen();
    let start = Instant::now() + Duration::from_millis(200);
    let senders: Vec<_> = (0..SENDERS)
        .map(|t| {
            let (base, user, group, sent) = (srv.base.clone(), user.clone(), group.clone(), sent.clone());
            std::thread::spawn(move || {
                let agent = agent();
                for n in (t..MESSAGES).step_by(SENDERS) {
                    let at = start + Duration::from_micros((n as u64) * 1_000_000 / RATE_PER_S as u64);
                    if let Some(wait) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    sent.lock().unwrap()[n] = Some(Instant::now());
                    let r = agent
                        .post(format!("{base}/admin/sendUserMessage"))
                        .header("Authorization", format!("Admin {SECRET}"))
                        .content_type("application/json")
                        .send(json!({"user_id": user, "chat_id": group, "text": format!("m{n}")}).to_string())
                        .unwrap();
                    assert_eq!(r.status().as_u16(), 200);
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let took = start.elapsed();
    let until = Instant::now() + Duration::from_secs(60);
    for (name, s) in [("gateway", &by_gateway), ("parked poll", &by_poll), ("webhook", &by_webhook)] {
        while s.lock().unwrap().iter().any(Option::is_none) {
            assert!(Instant::now() < until, "{name}: not every message arrived in 60 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    println!(
        "latency, human message sent → bot has it, {MESSAGES} messages at {:.0}/s (file database, synchronous = full):",
        MESSAGES as f64 / took.as_secs_f64()
    );
    let sent = sent.lock().unwrap().clone();
    for (name, s) in [("gateway", &by_gateway), ("parked poll", &by_poll), ("webhook", &by_webhook)] {
        let got = s.lock().unwrap().clone();
        let mut ms: Vec<f64> = sent
            .iter()
            .zip(&got)
            .map(|(a, b)| b.unwrap().saturating_duration_since(a.unwrap()).as_secs_f64() * 1000.0)
            .collect();
        ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |q: f64| ms[((ms.len() as f64 * q) as usize).min(ms.len() - 1)];
        println!("  {name:<12} p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms", p(0.50), p(0.99), p(1.0));
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

/// Reads HTTP/1.1 requests from `conn` and answers each 200.
fn receive(mut conn: TcpStream, seen: &Seen) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
        mark(seen, &body["data"]);
        buf.drain(..end + 4 + len);
        if conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_err() {
            return;
        }
    }
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap()
}

fn metric(srv: &Server, series: &str) -> f64 {
    let mut r = agent()
        .get(format!("{}/admin/metrics", srv.base))
        .header("Authorization", format!("Admin {SECRET}"))
        .call()
        .unwrap();
    let text = r.body_mut().read_to_string().unwrap();
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' '))).unwrap().parse().unwrap()
}

fn parked_polls(bin: &std::path::Path) {
    let own = raise_nofile(PARKED as u64 + 1_000);
    if own < PARKED as u64 + 200 {
        println!("parked polls: not measured: this process may open {own} files, {} are needed", PARKED + 200);
        return;
    }
    let limit = PARKED + 1_000;
    let setup = format!("ulimit -n {limit}");
    let max = (PARKED + 100).to_string();
    let srv = Server::start_in_shell(
        &[],
        &setup,
        &[],
        bin,
        &["--db", ":memory:", "--admin-secret", SECRET, "--max-connections", &max],
    );
    // A bot parks at most MAX_PARKED_POLLS_PER_BOT polls (its next one
    // supersedes its oldest), so the polls are spread over as many bots,
    // all members of one group: one message there answers every poll.
    let bots = PARKED / botspace::MAX_PARKED_POLLS_PER_BOT;
    let (user, group, tokens) = group_of_writers(&[&srv], "everyone", bots);
    // Past what each bot has already (the group's joins): every poll parks.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    let requests: Vec<Vec<u8>> = tokens
        .iter()
        .map(|token| {
            let mut next = 0;
            loop {
                s.write_all(&bot_request(token, "getUpdates", Some(&json!({"offset": next, "timeout": 0})))).unwrap();
                let seen = read_response(&mut s, &mut Vec::new()).result();
                match seen.as_array().unwrap().last() {
                    Some(u) => next = u["update_id"].as_i64().unwrap() + 1,
                    None => break,
                }
            }
            bot_request(token, "getUpdates", Some(&json!({"offset": next, "timeout": 50})))
        })
        .collect();
    let before = rss_kb(srv.pid());
    let mut conns = Vec::with_capacity(PARKED);
    for i in 0..PARKED {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(&requests[i % bots]).unwrap();
        conns.push(s);
    }
    let until = Instant::now() + Duration::from_secs(60);
    while metric(&srv, "botspace_parked_polls") < PARKED as f64 {
        assert!(Instant::now() < until, "only {} parked", metric(&srv, "botspace_parked_polls"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = rss_kb(srv.pid());
    let t0 = Instant::now();
    srv.say(&user, &group, "for everyone");
    for s in &mut conns {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let r = read_response(s, &mut Vec::new());
        assert_eq!(r.status, 200);
    }
    let all = t0.elapsed();
    println!(
        "parked polls: {PARKED} parked grew the server's resident memory from {} MB to {} MB ({:.1} KB a poll); one message answered all of them in {:.0} ms",
        before / 1024,
        after / 1024,
        (after.saturating_sub(before)) as f64 / PARKED as f64,
        all.as_secs_f64() * 1000.0
    );
}
