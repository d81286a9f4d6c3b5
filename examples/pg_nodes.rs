//! Two nodes on one PostgreSQL database against one node: durable
//! sendMessage throughput and latency while every message wakes a gateway
//! session, in process (no HTTP), so the figures are the library's.
//!
//!   scripts/with-postgres.sh cargo run --release --features postgres --example pg_nodes -- 5 "16 64" 2
//!
//! Arguments: SECONDS per measurement (5), a list of THREADS ("16 64"),
//! ROUNDS (2), BOTS (64); a `postgres://` argument anywhere names the
//! server, otherwise `BOTSPACE_TEST_POSTGRES` does (set by
//! scripts/with-postgres.sh). The run makes a schema of its own there and
//! drops it at the end, so runs never see each other's rows. The server
//! must have `fsync` and `synchronous_commit` on (the run checks), as
//! scripts/with-postgres.sh's has.
//!
//! Setup: BOTS official sender bots (no rate limits), each in a group of
//! its own with a listener bot, so every message gives exactly one bot one
//! event. Each measurement opens its node(s) afresh and a gateway session
//! for every listener, driven on the node's own host thread as a host
//! drives it (wake hook, `poll_timeout`/`handle_timeout`, `poll_transmit`
//! until it has nothing, an ack at most every 250 ms), with a second thread
//! running `wait_store_notifications` (LISTEN/NOTIFY, on by default).
//! THREADS client threads each loop `handle_request(sendMessage)` for their
//! own sender, one request in flight each, for SECONDS.
//!
//! - `one`: one node holds every client thread and every session.
//! - `two`: two `Service`s on the same database; client thread k runs on
//!   node k mod 2, and listener i's session on node A when i mod 4 < 2, so
//!   half of the wake-ups cross from one node to the other.
//!
//! After the clients stop, the hosts drain until every listener has had
//! its events, then the run checks that each listener got exactly the
//! messages its sender had answered 200 for, once each, in order, with
//! gapless seqs; anything else fails the run. Modes alternate (one, two,
//! one, two, ...) for ROUNDS; the table holds the best round of each
//! (mode, threads) by requests/s. Round trips (PostgreSQL) per group and
//! per request are `Service::commit_stats` deltas over the clients' time,
//! summed over the node(s): every statement on a node's connections, so
//! the sessions' event reads, acks and row checks in that time count too
//! (the listening connection's traffic does not).

use botspace::{Config, GatewayOutput, GatewaySession, Service};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SECRET: &str = "pg-nodes-admin-secret";
/// How long the hosts may take to deliver the last events once the
/// clients stop.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// A listener acks at most this often (and once more at the end).
const ACK_EVERY_MS: u64 = 250;

fn raw(path: &str, auth: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn status(resp: &[u8]) -> u16 {
    std::str::from_utf8(&resp[9..12]).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn admin(svc: &Service, method: &str, body: serde_json::Value) -> serde_json::Value {
    let resp = svc.handle_request(&raw(&format!("/admin/{method}"), &format!("Admin {SECRET}"), &body.to_string()));
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
    let v: serde_json::Value = serde_json::from_slice(&resp[at..]).expect("a JSON body");
    assert_eq!(v["ok"], true, "{method} {body}: {v}");
    v["result"].clone()
}

fn open(url: &str) -> Arc<Service> {
    Arc::new(
        Service::open(Config::default().with(|c| {
            c.database = url.into();
            c.admin_secret = SECRET.into();
        }))
        .expect("open on PostgreSQL"),
    )
}

/// A sender (token, its group) and its group's listener (bot id, token).
struct Pair {
    sender_token: String,
    chat: String,
    listener_id: String,
    listener_token: String,
}

fn setup(svc: &Service, bots: usize) -> Vec<Pair> {
    (0..bots)
        .map(|i| {
            let bot = |handle: String| {
                admin(
                    svc,
                    "createBot",
                    serde_json::json!({"display_name": handle, "handle": handle, "quota_tier": "official"}),
                )
            };
            let (s, l) = (bot(format!("sender{i}")), bot(format!("listener{i}")));
            let chat = admin(
                svc,
                "createGroup",
                serde_json::json!({"title": format!("g{i}"), "member_ids": [s["bot"]["id"], l["bot"]["id"]]}),
            )["id"]
                .as_str()
                .unwrap()
                .to_string();
            Pair {
                sender_token: s["token"].as_str().unwrap().into(),
                chat,
                listener_id: l["bot"]["id"].as_str().unwrap().into(),
                listener_token: l["token"].as_str().unwrap().into(),
            }
        })
        .collect()
}

/// One listener's session on a host thread, and what it has seen.
struct Listener {
    index: usize,
    session: GatewaySession,
    /// The seq the next event must carry (from `hello`'s `replay_from`).
    next_seq: i64,
    /// The next message number expected from this listener's sender.
    next_n: u64,
    acked: i64,
    acked_at: u64,
}

impl Listener {
    /// Everything the session has to send now, checked; panics on a gap,
    /// a repeat, a message out of order or a closed session.
    fn drain(&mut self, tag: &str, delivered: &AtomicU64) {
        while let Some(out) = self.session.poll_transmit() {
            let GatewayOutput::Text(t) = out else {
                panic!("listener {}: the session closed: {out:?}", self.index);
            };
            let v: serde_json::Value = serde_json::from_str(&t).expect("a JSON frame");
            match v["op"].as_str() {
                Some("hello") => {
                    self.next_seq = v["replay_from"].as_i64().expect("replay_from");
                    self.acked = self.next_seq - 1;
                }
                Some("event") => {
                    let seq = v["seq"].as_i64().expect("seq");
                    assert_eq!(seq, self.next_seq, "listener {}: seqs must be gapless: {t}", self.index);
                    self.next_seq += 1;
                    if v["type"] == "message_created" {
                        let text = v["data"]["message"]["text"].as_str().expect("a text message");
                        let want = format!("{tag}/{}", self.next_n);
                        assert_eq!(text, want, "listener {}: each message once, in order", self.index);
                        self.next_n += 1;
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        }
    }

    /// Acks what it has seen when there is something new and it is time
    /// (or whenever, with `now_too`: the first and the last ack).
    fn ack(&mut self, now_ms: u64, now_too: bool, tag: &str, delivered: &AtomicU64) {
        let last = self.next_seq - 1;
        if last <= self.acked || (!now_too && now_ms < self.acked_at + ACK_EVERY_MS) {
            return;
        }
        self.session.handle_text(&format!(r#"{{"op":"ack","seq":{last}}}"#), now_ms);
        self.acked = last;
        self.acked_at = now_ms;
        self.drain(tag, delivered); // writes the ack
    }
}

/// A node: its service, its host thread driving its sessions, and its
/// notification thread.
struct Node {
    svc: Arc<Service>,
    stop: Arc<AtomicBool>,
    host: JoinHandle<()>,
    listen: Option<JoinHandle<()>>,
}

/// Opens a node with sessions for the listeners `mine` (indices into
/// `pairs`); each listener's delivered message events are counted in
/// `delivered`.
fn start_node(url: &str, pairs: &[Pair], mine: Vec<usize>, tag: &str, delivered: Arc<Vec<AtomicU64>>) -> Node {
    let svc = open(url);
    let stop = Arc::new(AtomicBool::new(false));
    // The wake hook only signals, as the docs ask; the host thread polls
    // the woken bot's session.
    let (wake_tx, wake_rx) = mpsc::channel::<String>();
    svc.set_wake_hook(Some(Arc::new(move |bot: &str| {
        let _ = wake_tx.send(bot.to_string());
    })));
    let listen = svc.has_store_notifications().then(|| {
        svc.wait_store_notifications(0).expect("LISTEN");
        let (svc, stop) = (svc.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                svc.wait_store_notifications(100).expect("the listening connection stays up");
            }
        })
    });
    let mut listeners: Vec<Listener> = mine
        .into_iter()
        .map(|i| {
            let token = &pairs[i].listener_token;
            let upgrade = format!(
                "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            );
            let session = svc.accept_gateway_session(upgrade.as_bytes(), svc.now_ms()).unwrap_or_else(|e| {
                panic!("listener {i}: no session: {}", String::from_utf8_lossy(&e))
            });
            let mut l = Listener { index: i, session, next_seq: 0, next_n: 0, acked: 0, acked_at: 0 };
            l.drain(tag, &delivered[i]); // hello, and the setup's events on the first run
            l.ack(svc.now_ms(), true, tag, &delivered[i]);
            l
        })
        .collect();
    let by_bot: HashMap<String, usize> =
        listeners.iter().enumerate().map(|(k, l)| (pairs[l.index].listener_id.clone(), k)).collect();
    let host = {
        let (svc, stop, tag) = (svc.clone(), stop.clone(), tag.to_string());
        std::thread::spawn(move || {
            let mut beat = Instant::now();
            let mut woken = vec![false; listeners.len()];
            while !stop.load(Ordering::Relaxed) {
                let now = svc.now_ms();
                let until = listeners.iter().filter_map(|l| l.session.poll_timeout()).min().unwrap_or(now + 100);
                let wait = Duration::from_millis(until.saturating_sub(now).clamp(1, 100));
                if let Ok(bot) = wake_rx.recv_timeout(wait) {
                    for bot in std::iter::once(bot).chain(wake_rx.try_iter()) {
                        if let Some(&k) = by_bot.get(&bot) {
                            woken[k] = true;
                        }
                    }
                }
                let now = svc.now_ms();
                let heartbeat = beat.elapsed() > Duration::from_secs(10);
                for (k, l) in listeners.iter_mut().enumerate() {
                    if heartbeat {
                        l.session.handle_text(r#"{"op":"heartbeat"}"#, now);
                    }
                    if l.session.poll_timeout().is_some_and(|t| t <= now) {
                        l.session.handle_timeout(now);
                        woken[k] = true;
                    }
                    if std::mem::take(&mut woken[k]) || heartbeat {
                        l.drain(&tag, &delivered[l.index]);
                    }
                    l.ack(now, false, &tag, &delivered[l.index]);
                }
                if heartbeat {
                    beat = Instant::now();
                }
            }
            let now = svc.now_ms();
            for l in &mut listeners {
                l.drain(&tag, &delivered[l.index]);
                l.ack(now, true, &tag, &delivered[l.index]);
            }
            // Dropping the sessions frees their slots and leases.
        })
    };
    Node { svc, stop, host, listen }
}

struct Measured {
    requests: u64,
    secs: f64,
    /// Latencies in microseconds, sorted.
    lat: Vec<u32>,
    round_trips: u64,
    groups: u64,
    stat_requests: u64,
    delivered: u64,
}

fn measure(url: &str, pairs: &[Pair], two: bool, threads: usize, secs: u64, tag: &str) -> Measured {
    let delivered: Arc<Vec<AtomicU64>> = Arc::new((0..pairs.len()).map(|_| AtomicU64::new(0)).collect());
    let node_of_listener = |i: usize| usize::from(two && i % 4 >= 2);
    let nodes: Vec<Node> = (0..if two { 2 } else { 1 })
        .map(|n| {
            let mine = (0..pairs.len()).filter(|&i| node_of_listener(i) == n).collect();
            start_node(url, pairs, mine, tag, delivered.clone())
        })
        .collect();
    let before: Vec<_> = nodes.iter().map(|n| n.svc.commit_stats()).collect();
    let barrier = Arc::new(Barrier::new(threads + 1));
    let clients: Vec<JoinHandle<(u64, Vec<u32>)>> = (0..threads)
        .map(|k| {
            let svc = nodes[k % nodes.len()].svc.clone();
            let barrier = barrier.clone();
            let auth = format!("Bot {}", pairs[k].sender_token);
            let chat = pairs[k].chat.clone();
            let tag = tag.to_string();
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(1 << 14);
                barrier.wait();
                let start = Instant::now();
                let end = start + Duration::from_secs(secs);
                let mut n = 0u64;
                while Instant::now() < end {
                    let body = format!(r#"{{"chat_id":"{chat}","text":"{tag}/{n}"}}"#);
                    let req = raw("/bot/sendMessage", &auth, &body);
                    let t = Instant::now();
                    let resp = svc.handle_request(&req);
                    lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    let s = status(&resp);
                    assert_eq!(s, 200, "sendMessage: {}", String::from_utf8_lossy(&resp));
                    n += 1;
                }
                (n, lat)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let mut sent = vec![0u64; pairs.len()];
    let mut lat = Vec::new();
    for (k, c) in clients.into_iter().enumerate() {
        let (n, l) = c.join().expect("a client thread failed");
        sent[k] = n;
        lat.extend(l);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let after: Vec<_> = nodes.iter().map(|n| n.svc.commit_stats()).collect();
    // Every event reaches its listener, within DRAIN_LIMIT.
    let drain_start = Instant::now();
    while (0..pairs.len()).any(|i| delivered[i].load(Ordering::Relaxed) < sent[i]) {
        // A host thread that stopped early failed a check: its join says which.
        if nodes.iter().any(|n| n.host.is_finished()) {
            break;
        }
        if drain_start.elapsed() > DRAIN_LIMIT {
            let missing: Vec<String> = (0..pairs.len())
                .filter(|&i| delivered[i].load(Ordering::Relaxed) < sent[i])
                .map(|i| format!("listener {i}: {} of {}", delivered[i].load(Ordering::Relaxed), sent[i]))
                .collect();
            panic!("events missing {DRAIN_LIMIT:?} after the clients stopped: {}", missing.join(", "));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for n in &nodes {
        n.stop.store(true, Ordering::Relaxed);
    }
    for n in nodes {
        n.host.join().expect("a host thread failed its checks");
        if let Some(l) = n.listen {
            l.join().expect("a notification thread failed");
        }
    }
    // Exactly: nothing beyond what was sent arrived either.
    for (i, s) in sent.iter().enumerate() {
        let d = delivered[i].load(Ordering::Relaxed);
        assert_eq!(d, *s, "listener {i}: {d} events for {s} messages");
    }
    lat.sort_unstable();
    let delta =
        |f: fn(&botspace::CommitStats) -> u64| -> u64 { before.iter().zip(&after).map(|(b, a)| f(a) - f(b)).sum() };
    Measured {
        requests: sent.iter().sum(),
        secs: elapsed,
        lat,
        round_trips: delta(|s| s.round_trips),
        groups: delta(|s| s.groups),
        stat_requests: delta(|s| s.requests),
        delivered: delivered.iter().map(|d| d.load(Ordering::Relaxed)).sum(),
    }
}

/// A schema of the run's own on `url`: the URL that uses it, and a
/// client to drop it with.
fn fresh_schema(url: &str) -> (String, String, postgres::Client) {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let schema = format!("bench_nodes_{}_{nanos}", std::process::id());
    let mut c = postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot reach the PostgreSQL server (plain TCP) to make a schema: {e}"));
    // Durable means what it says: every commit waits for its WAL flush.
    for setting in ["fsync", "synchronous_commit"] {
        let v: String = c.query_one(&format!("SHOW {setting}"), &[]).expect("SHOW").get(0);
        assert_eq!(v, "on", "the server must run with {setting} = on for durable figures");
    }
    c.batch_execute(&format!("CREATE SCHEMA {schema}")).expect("CREATE SCHEMA");
    let sep = if url.contains('?') { '&' } else { '?' };
    (format!("{url}{sep}options=-c%20search_path%3D{schema}"), schema, c)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let url = match args.iter().position(|a| a.starts_with("postgres://") || a.starts_with("postgresql://")) {
        Some(at) => args.remove(at),
        None => std::env::var("BOTSPACE_TEST_POSTGRES")
            .expect("a postgres:// argument or BOTSPACE_TEST_POSTGRES (run under scripts/with-postgres.sh)"),
    };
    let secs: u64 = args.first().map(|a| a.parse().expect("SECONDS")).unwrap_or(5);
    let threads: Vec<usize> = args
        .get(1)
        .map(|a| a.split_whitespace().map(|t| t.parse().expect("THREADS")).collect())
        .unwrap_or_else(|| vec![16, 64]);
    let rounds: usize = args.get(2).map(|a| a.parse().expect("ROUNDS")).unwrap_or(2);
    let bots: usize = args.get(3).map(|a| a.parse().expect("BOTS")).unwrap_or(64);
    assert!(secs > 0 && rounds > 0, "SECONDS and ROUNDS must be at least 1");
    assert!(threads.iter().all(|&t| (1..=bots).contains(&t)), "each thread needs a sender: 1 to BOTS ({bots}) threads");

    let (db, schema, mut client) = fresh_schema(&url);
    eprintln!("[pg_nodes] schema {schema}: {bots} senders and {bots} listeners");
    let pairs = setup(&open(&db), bots);
    // Best round (by requests/s) of each (mode, threads).
    let mut best: HashMap<(bool, usize), Measured> = HashMap::new();
    for round in 0..rounds {
        for &t in &threads {
            for two in [false, true] {
                let mode = if two { "two" } else { "one" };
                let m = measure(&db, &pairs, two, t, secs, &format!("r{round}t{t}{mode}"));
                let rps = m.requests as f64 / m.secs;
                eprintln!(
                    "[pg_nodes] round {} {mode} {t} threads: {rps:.0} requests/s, {} events delivered",
                    round + 1,
                    m.delivered
                );
                let slot = best.entry((two, t));
                match slot {
                    std::collections::hash_map::Entry::Occupied(mut o) => {
                        if rps > o.get().requests as f64 / o.get().secs {
                            o.insert(m);
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(m);
                    }
                }
            }
        }
    }
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).expect("DROP SCHEMA");

    println!("| nodes | threads | requests/s | p50 ms | p99 ms | round trips per group | round trips per request | requests per group | events delivered |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &t in &threads {
        for two in [false, true] {
            let m = &best[&(two, t)];
            let at = |q: f64| m.lat[((m.lat.len() as f64 * q) as usize).min(m.lat.len() - 1)] as f64 / 1000.0;
            let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            println!(
                "| {} | {t} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
                if two { "two" } else { "one" },
                m.requests as f64 / m.secs,
                at(0.50),
                at(0.99),
                per(m.round_trips, m.groups),
                per(m.round_trips, m.stat_requests),
                per(m.stat_requests, m.groups),
                m.delivered
            );
        }
    }
}
