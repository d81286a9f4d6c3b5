//! What buttons cost: the release example server (or the C server) over
//! real TCP on loopback, on a database file with `synchronous = full`.
//!
//!     cargo bench --bench buttons                      # the Rust server
//!     BOTSPACE_C_SERVER=examples/c-server/build/botspace-server cargo bench --bench buttons -- c
//!     BOTSPACE_BENCH_PRESS_RATE=500 cargo bench --bench buttons    # another offered load
//!
//! **Presses.** A user, an official bot and their chat; the bot's message
//! has a one-button keyboard. Sender threads press it through the host API
//! (`pressButton`) 5 000 times at 1 000 a second, open loop: press n is due
//! at start + n ms whether or not earlier ones were answered, and its
//! latency counts from that due time (a press sent late is charged for
//! it). The bot hears the presses (a) on the gateway, (b) by a parked
//! getUpdates (`timeout` 50, the next one sent after each answer), one
//! fresh server each, and answers each with answerCallbackQuery at once
//! from a pool of threads. The host reads its stream with getUpdates back
//! to back (it has no long poll), confirming as it goes. Figures: press due
//! → the bot has the `callback_query`; answer request started → the host
//! has `callback_answered` (so both include the commit and its fsync; the
//! second also one stream poll's round trip at most).
//!
//! **Keyboards.** sendMessage at a fixed concurrency (16 official bots,
//! one request in flight each, their own chats) for 5 s, without and with
//! the largest keyboard accepted (10 rows of 8 buttons, each with 64 bytes
//! of `callback_data`); a fresh server each. Bytes per message: the growth
//! of the database's used pages (page_count − freelist_count, read by a
//! read-only connection beside the server, so WAL frames count) over the
//! run, divided by the messages sent: the message and the events it wrote.

#[path = "../tests/wire/mod.rs"]
mod wire;

use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::*;

const PRESSES: usize = 5_000;
/// Presses a second; `BOTSPACE_BENCH_PRESS_RATE` overrides.
fn rate_per_s() -> u64 {
    std::env::var("BOTSPACE_BENCH_PRESS_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}
/// Sender threads (keep-alive connections) for the presses;
/// `BOTSPACE_BENCH_PRESS_SENDERS` overrides.
fn senders() -> usize {
    std::env::var("BOTSPACE_BENCH_PRESS_SENDERS").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}
const ANSWERERS: usize = 8;
const WRITERS: usize = 16;
const WRITE_SECS: u64 = 5;

fn main() {
    let which = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_else(|| "rust".into());
    let bin = if which == "c" { c_binary() } else { example_binary() };
    println!("server: {}", bin.display());
    println!(
        "presses: {PRESSES} at {}/s open loop ({:.0} s), {} sender threads; file database, synchronous = full",
        rate_per_s(),
        PRESSES as f64 / rate_per_s() as f64,
        senders()
    );
    presses(&bin, Way::Gateway);
    presses(&bin, Way::Poll);
    println!(
        "sendMessage: {WRITERS} bots, one request in flight each, {WRITE_SECS} s; file database, synchronous = full"
    );
    let plain = writes(&bin, None);
    let full = writes(&bin, Some(full_keyboard()));
    println!("  keyboard / plain: {:.2}× the rate, {:.1}× the bytes a message", full.0 / plain.0, full.1 / plain.1);
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Gateway,
    Poll,
}

/// Instants by callback query id.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// POSTs `body`; returns the status and the parsed answer.
fn send(agent: &ureq::Agent, url: &str, auth: &str, body: &Value) -> (u16, Value) {
    let mut r = agent
        .post(url)
        .header("Authorization", auth)
        .content_type("application/json")
        .send(body.to_string())
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
}

/// The same for a request that must succeed; returns its `result`.
fn post(agent: &ureq::Agent, url: &str, auth: &str, body: &Value) -> Value {
    let (status, v) = send(agent, url, auth, body);
    assert_eq!(status, 200, "{url} {body} → {v}");
    v["result"].clone()
}

fn presses(bin: &Path, way: Way) {
    let dir = temp_dir("bench-buttons");
    let db = dir.join("botspace.db");
    let srv = Server::start_in_shell(&[], "true", &[], bin, &["--db", db.to_str().unwrap(), "--admin-secret", SECRET]);
    let w = srv.world("official");
    let kb = json!({"inline_keyboard": [[{"text": "Go", "callback_data": "go"}]]});
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "Press", "reply_markup": kb}));
    assert_eq!(r.status, 200, "{}", r.body);
    let mid = r.body["result"]["message_id"].as_str().unwrap().to_string();

    // The host's stream from its current end.
    let mut offset = 0i64;
    loop {
        let got = srv.admin("getUpdates", &json!({"offset": offset, "limit": 1000}));
        let Some(last) = got.as_array().unwrap().last() else { break };
        offset = last["update_id"].as_i64().unwrap() + 1;
    }
    let done = Arc::new(AtomicBool::new(false));
    let (by_bot, answer_started, by_host): (Seen, Seen, Seen) = Default::default();
    // Presses whose answer came after callback_answer_timeout_s: refused
    // to the bot, callback_expired on the host's stream.
    let (refused, expired) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let host = {
        let (base, done, by_host, expired) = (srv.base.clone(), done.clone(), by_host.clone(), expired.clone());
        std::thread::spawn(move || {
            let agent = agent();
            let url = format!("{base}/admin/getUpdates");
            let auth = format!("Admin {SECRET}");
            let mut polls = 0u64;
            while !done.load(Ordering::Relaxed) {
                let got = post(&agent, &url, &auth, &json!({"offset": offset, "limit": 1000}));
                polls += 1;
                let now = Instant::now();
                for u in got.as_array().unwrap() {
                    offset = offset.max(u["update_id"].as_i64().unwrap() + 1);
                    if u["type"] == "callback_answered" {
                        let id = u["data"]["callback_query_id"].as_str().unwrap().to_string();
                        by_host.lock().unwrap().insert(id, now);
                    } else if u["type"] == "callback_expired" {
                        expired.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            polls
        })
    };

    // The answerers: answerCallbackQuery for each query the bot hears.
    let (to_answer, queue) = mpsc::channel::<String>();
    let queue = Arc::new(Mutex::new(queue));
    let answered = Arc::new(AtomicUsize::new(0));
    for _ in 0..ANSWERERS {
        let (base, token, queue, started, answered, refused) = (
            srv.base.clone(),
            w.token.clone(),
            queue.clone(),
            answer_started.clone(),
            answered.clone(),
            refused.clone(),
        );
        std::thread::spawn(move || {
            let agent = agent();
            let url = format!("{base}/bot/answerCallbackQuery");
            let auth = format!("Bot {token}");
            loop {
                let next = queue.lock().unwrap().recv();
                let Ok(id) = next else { return };
                started.lock().unwrap().insert(id.clone(), Instant::now());
                match send(&agent, &url, &auth, &json!({"callback_query_id": id, "text": "ok"})) {
                    (200, v) if v["result"] == json!(true) => answered.fetch_add(1, Ordering::Relaxed),
                    (400, v) if v["error"] == "callback_query_expired" => refused.fetch_add(1, Ordering::Relaxed),
                    (status, v) => panic!("answerCallbackQuery {id} → {status} {v}"),
                };
            }
        });
    }
    let heard = move |by_bot: &Seen, to_answer: &mpsc::Sender<String>, u: &Value| {
        if u["type"] == "callback_query" {
            let id = u["data"]["id"].as_str().unwrap().to_string();
            by_bot.lock().unwrap().insert(id.clone(), Instant::now());
            let _ = to_answer.send(id);
        }
    };

    match way {
        Way::Gateway => {
            // Seq 1 is bot_started.
            let mut gw = srv.gateway(&w.token, "?after=1");
            gw.hello();
            let (by_bot, to_answer) = (by_bot.clone(), to_answer.clone());
            std::thread::spawn(move || {
                let mut acked = 1;
                while let Ok(tungstenite::Message::Text(t)) = gw.ws.read() {
                    let e: Value = serde_json::from_str(&t).unwrap();
                    if e["op"] != "event" {
                        continue;
                    }
                    heard(&by_bot, &to_answer, &e);
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
        Way::Poll => {
            let (base, token, by_bot, to_answer) =
                (srv.base.clone(), w.token.clone(), by_bot.clone(), to_answer.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut offset = 2i64;
                loop {
                    let r = agent
                        .post(format!("{base}/bot/getUpdates"))
                        .header("Authorization", format!("Bot {token}"))
                        .content_type("application/json")
                        .send(
                            json!({"offset": offset, "timeout": 50, "allowed_updates": ["callback_query"]}).to_string(),
                        );
                    let Ok(mut r) = r else { return };
                    let Ok(text) = r.body_mut().read_to_string() else { return };
                    let v: Value = serde_json::from_str(&text).unwrap();
                    for u in v["result"].as_array().into_iter().flatten() {
                        heard(&by_bot, &to_answer, u);
                        offset = offset.max(u["update_id"].as_i64().unwrap() + 1);
                    }
                }
            });
        }
    }
    drop(to_answer);

    // The presses: press n is due at start + n ms.
    let due: Vec<Instant> = {
        let start = Instant::now() + Duration::from_millis(200);
        let rate = rate_per_s();
        (0..PRESSES as u64).map(|n| start + Duration::from_micros(n * 1_000_000 / rate)).collect()
    };
    let due = Arc::new(due);
    let ids = Arc::new(Mutex::new(vec![String::new(); PRESSES]));
    let late = Arc::new(AtomicUsize::new(0));
    let threads = senders();
    let senders: Vec<_> = (0..threads)
        .map(|t| {
            let (base, due, ids, late) = (srv.base.clone(), due.clone(), ids.clone(), late.clone());
            let body = json!({"user_id": w.user_id, "chat_id": w.chat, "message_id": mid, "callback_data": "go"});
            std::thread::spawn(move || {
                let agent = agent();
                let url = format!("{base}/admin/pressButton");
                let auth = format!("Admin {SECRET}");
                for n in (t..PRESSES).step_by(threads) {
                    match due[n].checked_duration_since(Instant::now()) {
                        Some(wait) => std::thread::sleep(wait),
                        None if due[n].elapsed() > Duration::from_millis(1) => {
                            late.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {}
                    }
                    let r = post(&agent, &url, &auth, &body);
                    ids.lock().unwrap()[n] = r["callback_query_id"].as_str().unwrap().to_string();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let took = due[0].elapsed();
    let until = Instant::now() + Duration::from_secs(60);
    while by_host.lock().unwrap().len() + expired.load(Ordering::Relaxed) < PRESSES {
        assert!(
            Instant::now() < until,
            "in 60 s: {} heard by the bot, {} answered, {} refused, {} answers and {} expiries on the host's stream",
            by_bot.lock().unwrap().len(),
            answered.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            by_host.lock().unwrap().len(),
            expired.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    done.store(true, Ordering::Relaxed);
    let polls = host.join().unwrap();

    let ids = ids.lock().unwrap().clone();
    let (by_bot, started, by_host) =
        (by_bot.lock().unwrap().clone(), answer_started.lock().unwrap().clone(), by_host.lock().unwrap().clone());
    let press: Vec<f64> =
        ids.iter().enumerate().map(|(n, id)| ms(by_bot[id].saturating_duration_since(due[n]))).collect();
    let answer: Vec<f64> =
        ids.iter().filter_map(|id| Some(ms(by_host.get(id)?.saturating_duration_since(started[id])))).collect();
    let (p, a) = (percentiles(press), percentiles(answer));
    println!(
        "  {:<12} press → bot: p50 {:>6.2} ms  p99 {:>7.2} ms  max {:>7.2} ms | answer → host's stream: p50 {:>6.2} ms  p99 {:>7.2} ms  max {:>7.2} ms | {:.0} presses/s, {} sent > 1 ms late, {} expired before their answer, {} stream polls",
        if way == Way::Gateway { "gateway" } else { "parked poll" },
        p.0,
        p.1,
        p.2,
        a.0,
        a.1,
        a.2,
        PRESSES as f64 / took.as_secs_f64(),
        late.load(Ordering::Relaxed),
        expired.load(Ordering::Relaxed),
        polls
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (p50, p99, max) of `v`.
fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    (p(0.50), p(0.99), p(1.0))
}

/// The largest keyboard the rules take: 10 rows of 8 buttons (8 a row is
/// the row limit, so 100 buttons cannot be laid out in 10 rows), each
/// button's `callback_data` 64 bytes.
fn full_keyboard() -> Value {
    let rows: Vec<Value> = (0..10)
        .map(|r| {
            let row: Vec<Value> = (0..8)
                .map(|b| json!({"text": format!("Option {r}.{b}"), "callback_data": format!("{r}{b}{}", "x".repeat(62))}))
                .collect();
            Value::Array(row)
        })
        .collect();
    json!({ "inline_keyboard": rows })
}

/// The database's used bytes, as a reader beside the server sees them.
fn used_bytes(db: &Path) -> u64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let q =
        |pragma: &str| -> u64 { c.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get::<_, i64>(0)).unwrap() as u64 };
    (q("page_count") - q("freelist_count")) * q("page_size")
}

/// sendMessage for WRITE_SECS from WRITERS bots; prints and returns
/// (messages/s, bytes a message).
fn writes(bin: &Path, keyboard: Option<Value>) -> (f64, f64) {
    let dir = temp_dir("bench-buttons-writes");
    let db = dir.join("botspace.db");
    let srv = Server::start_in_shell(&[], "true", &[], bin, &["--db", db.to_str().unwrap(), "--admin-secret", SECRET]);
    let user = srv.admin("createUser", &json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let bodies: Vec<(String, String)> = (0..WRITERS)
        .map(|i| {
            let handle = format!("writer_bot_{i}");
            let b =
                srv.admin("createBot", &json!({"display_name": handle, "handle": handle, "quota_tier": "official"}));
            let chat = srv.admin("startBot", &json!({"user_id": user, "bot_id": b["bot"]["id"]}));
            let token = b["token"].as_str().unwrap().to_string();
            let mut body = json!({"chat_id": chat["id"], "text": "Pizza or pasta? Choose one of the options below."});
            if let Some(kb) = &keyboard {
                body["reply_markup"] = kb.clone();
            }
            (token, body.to_string())
        })
        .collect();
    let request_bytes = bodies[0].1.len();
    let before = used_bytes(&db);
    let start = Instant::now();
    let end = start + Duration::from_secs(WRITE_SECS);
    let threads: Vec<_> = bodies
        .into_iter()
        .map(|(token, body)| {
            let base = srv.base.clone();
            std::thread::spawn(move || {
                let agent = agent();
                let url = format!("{base}/bot/sendMessage");
                let auth = format!("Bot {token}");
                let mut lat = Vec::new();
                while Instant::now() < end {
                    let t = Instant::now();
                    let r = agent
                        .post(&url)
                        .header("Authorization", &auth)
                        .content_type("application/json")
                        .send(body.as_str())
                        .unwrap();
                    assert_eq!(r.status().as_u16(), 200);
                    lat.push(ms(t.elapsed()));
                }
                lat
            })
        })
        .collect();
    let lat: Vec<f64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let took = start.elapsed();
    let sent = lat.len();
    let grown = used_bytes(&db) - before;
    let rate = sent as f64 / took.as_secs_f64();
    let per = grown as f64 / sent as f64;
    let (p50, p99, _) = percentiles(lat);
    println!(
        "  {:<12} {:>6.0} messages/s  p50 {:>6.2} ms  p99 {:>7.2} ms | {sent} messages, database +{} KB, {:.0} bytes a message | request body {request_bytes} bytes",
        if keyboard.is_some() { "80 buttons" } else { "no keyboard" },
        rate,
        p50,
        p99,
        grown / 1024,
        per
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
    (rate, per)
}
