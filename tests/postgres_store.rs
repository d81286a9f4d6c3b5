//! Several nodes, one PostgreSQL database: two `Service`s opened on the same
//! schema share nothing in memory, exactly like two host processes, so what
//! holds here holds across nodes. Run by `scripts/test-postgres.sh`
//! (feature `pg-tests`, a throwaway cluster from scripts/with-postgres.sh).

mod common;

use botspace::{ClockKind, Config, GatewayOutput, GatewaySession, Service};
use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const SECRET: &str = "postgres-admin-secret-1";

/// Tests that restart the server must run alone.
static SERIAL: Mutex<()> = Mutex::new(());

/// The notification payloads `raw` (a LISTENing client) receives until
/// `ms` pass without one.
fn payloads_within(raw: &mut postgres::Client, ms: u64) -> Vec<String> {
    use postgres::fallible_iterator::FallibleIterator;
    let mut n = raw.notifications();
    let mut it = n.timeout_iter(std::time::Duration::from_millis(ms));
    let mut out = Vec::new();
    while let Some(x) = it.next().unwrap() {
        // The bots it names; the sender's clock (`t<µs>`, for the lag
        // metric) is checked to be there once and left out.
        if x.payload().is_empty() {
            // "Re-read everything": no list, no clock.
            out.push(String::new());
            continue;
        }
        let items: Vec<&str> = x.payload().split(',').collect();
        let is_clock =
            |i: &str| i.strip_prefix('t').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(items.iter().filter(|i| is_clock(i)).count(), 1, "one clock in {:?}", x.payload());
        out.push(items.into_iter().filter(|i| !is_clock(i)).collect::<Vec<_>>().join(","));
    }
    out
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn node(database: &str) -> Arc<Service> {
    let cfg = Config::default().with(|c| {
        c.database = database.into();
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
    });
    Arc::new(Service::open(cfg).expect("the node opens on the shared database"))
}

fn two_nodes() -> (Arc<Service>, Arc<Service>) {
    let db = test_database();
    assert!(db.starts_with("postgres://"), "BOTSPACE_TEST_POSTGRES must be set (scripts/with-postgres.sh)");
    (node(&db), node(&db))
}

struct World {
    user: String,
    bot: String,
    token: String,
    chat: String,
}

fn world(svc: &Service, tier: &str) -> World {
    let user = admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    // Handles are unique, and several worlds share a database.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let handle = format!("echo_{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let b = admin(svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": handle, "quota_tier": tier}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    let chat =
        admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    World { user, bot, token, chat }
}

fn upgrade(token: &str) -> Vec<u8> {
    format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// Everything the session sends now, as text messages and a close.
fn drain(s: &mut GatewaySession) -> (Vec<Value>, Option<u16>) {
    let (mut texts, mut close) = (Vec::new(), None);
    while let Some(o) = s.poll_transmit() {
        match o {
            GatewayOutput::Text(t) => texts.push(serde_json::from_str(&t).unwrap()),
            GatewayOutput::Close { code, .. } => close = Some(code),
        }
    }
    (texts, close)
}

#[test]
fn an_event_committed_on_node_a_reaches_a_session_on_node_b_at_its_next_poll() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "official");
    let now = b.now_ms();
    let mut s = b.accept_gateway_session(&upgrade(&w.token), now).unwrap();
    let (hello, _) = drain(&mut s);
    assert_eq!(hello[0]["op"], "hello");
    assert_eq!(hello.len(), 2, "hello and the replayed bot_started: {hello:?}");
    // The poll interval is part of the session's timeout on a shared store.
    assert_eq!(s.poll_timeout(), Some(now + 50));
    let sent = admin(&a, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "from A"}));
    // Node B was told nothing; its next check finds the event.
    assert_eq!(drain(&mut s).0, Vec::<Value>::new());
    s.handle_timeout(now + 50);
    let (events, close) = drain(&mut s);
    assert_eq!(close, None);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "message_created");
    assert_eq!(events[0]["data"]["message"]["message_id"], sent["message_id"]);
    assert_eq!(events[0]["data"]["message"]["text"], "from A");
}

#[test]
fn rotating_the_token_on_node_a_closes_node_b_sessions_with_4004() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "official");
    let now = b.now_ms();
    let mut s = b.accept_gateway_session(&upgrade(&w.token), now).unwrap();
    drain(&mut s);
    admin(&a, SECRET, "rotateBotToken", json!({"bot_id": w.bot}));
    s.handle_timeout(now + 50);
    assert_eq!(drain(&mut s).1, Some(4004));
    // And node B no longer takes the old token (no stale cache).
    let (status, body) = bot_call(&b, &w.token, "getMe", json!({}));
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_token")));
}

#[test]
fn the_connection_limit_holds_across_nodes_and_a_closed_session_frees_its_lease() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "free"); // limit 1
    let first = a.accept_gateway_session(&upgrade(&w.token), a.now_ms()).unwrap();
    let refused = b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).err().expect("the limit is shared");
    let (status, body) = split(&refused);
    assert_eq!((status, body["error"].as_str()), (429, Some("connection_limit")));
    assert_eq!(body["description"], "this bot already has 1 of 1 gateway connections open");
    drop(first);
    assert!(b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).is_ok());
}

#[test]
fn a_dead_nodes_lease_lapses_after_the_lease_ttl() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "free");
    let s = a.accept_gateway_session(&upgrade(&w.token), a.now_ms()).unwrap();
    // A node that dies never deletes its lease: forget the session.
    std::mem::forget(s);
    let now = b.now_ms();
    assert!(b.accept_gateway_session(&upgrade(&w.token), now + botspace::gateway::LEASE_TTL_MS - 1).is_err());
    assert!(b.accept_gateway_session(&upgrade(&w.token), now + botspace::gateway::LEASE_TTL_MS).is_ok());
}

#[test]
fn an_idempotency_key_used_on_node_a_then_node_b_writes_once() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "official");
    let req = |svc: &Service| {
        let raw = request(
            "/bot/sendMessage",
            &format!("Bot {}", w.token),
            "Idempotency-Key: k-1\r\n",
            json!({"chat_id": w.chat, "text": "once"}).to_string().as_bytes(),
        );
        split(&svc.handle_request(&raw))
    };
    let (s1, m1) = req(&a);
    let (s2, m2) = req(&b);
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(m1, m2);
    let history = admin(&b, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
}

#[test]
fn writers_on_two_nodes_into_one_group_keep_message_ids_gapless() {
    let _g = serial();
    let (a, b) = two_nodes();
    let user = admin(&a, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let group = admin(&a, SECRET, "createGroup", json!({"title": "G"}))["id"].as_str().unwrap().to_string();
    admin(&a, SECRET, "addMember", json!({"chat_id": group, "member_id": user}));
    let mut tokens = Vec::new();
    for i in 0..4 {
        let bt = admin(
            &a,
            SECRET,
            "createBot",
            json!({"display_name": "B", "handle": format!("b{i}"), "quota_tier": "official"}),
        );
        admin(&a, SECRET, "addMember", json!({"chat_id": group, "member_id": bt["bot"]["id"]}));
        tokens.push(bt["token"].as_str().unwrap().to_string());
    }
    let per_thread = 50;
    let threads: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let svc = if i % 2 == 0 { a.clone() } else { b.clone() };
            let (t, group) = (t.clone(), group.clone());
            std::thread::spawn(move || {
                (0..per_thread)
                    .map(|n| {
                        let (status, m) =
                            bot_call(&svc, &t, "sendMessage", json!({"chat_id": group, "text": format!("{n}")}));
                        assert_eq!(status, 200, "{m}");
                        m["result"]["message_id"].as_str().expect("message_id").parse::<u64>().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    ids.sort_unstable();
    let n = (tokens.len() * per_thread) as u64;
    assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "ids are 1..{n}, each once");
}

#[test]
fn while_postgres_is_down_requests_get_503_and_the_service_recovers_by_itself() {
    let _g = serial();
    let (a, _b) = two_nodes();
    let w = world(&a, "official");
    let send = |text: &str| bot_call(&a, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": text}));
    assert_eq!(send("before").0, 200);
    let down = pg_stop("fast");
    let (status, body) = send("while down");
    down.start();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "storage_unavailable");
    assert_eq!(body["description"], "the database is unreachable, nothing was written; retry later");
    // Back by itself: a new connection on the next request.
    let (status, body) = send("after");
    assert_eq!(status, 200, "{body}");
    let history = admin(&a, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    let texts: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["before", "after"], "nothing of the refused request was written");
}

#[test]
fn rate_limits_hold_across_nodes() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "free"); // private chat: 1/s, burst 5
    for i in 0..5 {
        let svc = if i % 2 == 0 { &a } else { &b };
        let (status, body) = bot_call(svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": format!("{i}")}));
        assert_eq!(status, 200, "{body}");
    }
    // The sixth, on either node, finds the shared bucket empty.
    for svc in [&a, &b] {
        let (status, body) = bot_call(svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "6"}));
        assert_eq!((status, body["error"].as_str()), (429, Some("rate_limited")), "{body}");
        assert_eq!(body["parameters"]["scope"], "chat");
        assert_eq!(body["parameters"]["retry_after_ms"], 1000);
    }
    // A second later one slot is back, for whichever node asks first.
    admin(&a, SECRET, "advanceClock", json!({"seconds": 1}));
    admin(&b, SECRET, "advanceClock", json!({"seconds": 1}));
    assert_eq!(bot_call(&b, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "7"})).0, 200);
    assert_eq!(bot_call(&a, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "8"})).0, 429);
}

#[test]
fn sslmode_require_verifies_the_server_certificate() {
    let _g = serial();
    let plain = test_database();
    let ca = std::env::var("BOTSPACE_PG_CA").expect("BOTSPACE_PG_CA (scripts/with-postgres.sh)");
    let tls = plain.replace("sslmode=disable", "sslmode=require");
    // With the server's CA: TLS, and the service works.
    let svc = node(&format!("{tls}&sslrootcert={ca}"));
    let w = world(&svc, "official");
    assert_eq!(bot_call(&svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "over TLS"})).0, 200);
    // The platform's roots do not know that CA: refused, unlike libpq's
    // unverified `require`.
    let cfg = Config::default().with(|c| {
        c.database = tls;
        c.admin_secret = SECRET.into();
    });
    let err = Service::open(cfg).expect_err("an unverifiable certificate is refused").to_string();
    assert!(err.contains("postgres"), "{err}");
}

#[test]
fn concurrent_first_sends_on_two_nodes_never_exceed_the_burst() {
    let _g = serial();
    let (a, b) = two_nodes();
    let w = world(&a, "free"); // private chat: burst 5, a bucket never used yet
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let svc = if t % 2 == 0 { a.clone() } else { b.clone() };
            let (token, chat, barrier) = (w.token.clone(), w.chat.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..4)
                    .map(|i| {
                        bot_call(&svc, &token, "sendMessage", json!({"chat_id": chat, "text": format!("{t}-{i}")})).0
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let statuses: Vec<u16> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 27, "{statuses:?}");
}

#[test]
fn a_connection_lost_during_commit_is_503_commit_outcome_unknown_and_a_keyed_retry_writes_once() {
    let _g = serial();
    let db = test_database();
    let svc = node(&db);
    let w = world(&svc, "official");
    // A deferred trigger ends the server process at COMMIT, once (a
    // sequence is not rolled back): the client sees the connection go
    // while it waits for COMMIT's answer.
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    pg.batch_execute(
        "CREATE SEQUENCE die_once;
         CREATE FUNCTION die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.text = 'cut' AND nextval('die_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
           RETURN NEW;
         END $$;
         CREATE CONSTRAINT TRIGGER die AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW EXECUTE FUNCTION die_at_commit();",
    )
    .unwrap();
    let send = || {
        let raw = request(
            "/bot/sendMessage",
            &format!("Bot {}", w.token),
            "Idempotency-Key: cut-1\r\n",
            json!({"chat_id": w.chat, "text": "cut"}).to_string().as_bytes(),
        );
        split_with_headers(&svc.handle_request(&raw))
    };
    let (status, headers, body) = send();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "commit_outcome_unknown");
    assert_eq!(
        body["description"],
        "the commit could not be confirmed (the database connection was lost while committing, or the disk sync failed): the request may or may not have been written; retry with the same Idempotency-Key"
    );
    assert!(headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("retry-after") && v == "1"), "{headers:?}");
    // The retry reconnects and, with the same key, writes the message once.
    let (status, _, body) = send();
    assert_eq!(status, 200, "{body}");
    let (status, _, again) = send();
    assert_eq!((status, &again), (200, &body));
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
}

// ---------------------------------------------------------------------------
// LISTEN/NOTIFY: a commit on one node is a hint to the others.

/// A node whose sessions poll rarely (every 5 s, the most the lease
/// renewal allows) and never within these tests, whose clock does not
/// move: only a hint can explain a delivery.
fn slow_polling_node(database: &str) -> Arc<Service> {
    let cfg = Config::default().with(|c| {
        c.database = database.into();
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.gateway_poll_interval_ms = 60_000;
    });
    Arc::new(Service::open(cfg).expect("the node opens on the shared database"))
}

/// Node A, node B polling slowly, a bot made on A and its gateway session
/// on B (not yet drained).
fn a_bot_on_a_with_a_session_on_slow_b(db: &str) -> (Arc<Service>, Arc<Service>, World, GatewaySession) {
    let (a, b) = (node(db), slow_polling_node(db));
    let w = world(&a, "official");
    let s = b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).unwrap();
    (a, b, w, s)
}

/// The bot ids node `svc`'s wake hook is called with, as they come.
fn wake_channel(svc: &Service) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    svc.set_wake_hook(Some(Arc::new(move |bot: &str| {
        let _ = tx.lock().unwrap().send(bot.to_string());
    })));
    rx
}

/// Node B's host thread: waits for notifications until told to stop.
struct WaitLoop {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl WaitLoop {
    fn start(svc: &Arc<Service>) -> WaitLoop {
        assert!(svc.has_store_notifications());
        // The first call opens the listening connection (and wakes every
        // bot with a session here): from then on nothing is missed.
        assert_eq!(svc.wait_store_notifications(0).unwrap(), 0);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (svc, flag) = (svc.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut heard = 0;
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                heard += svc.wait_store_notifications(50).expect("the listening connection stays up");
            }
            heard
        });
        WaitLoop { stop, thread: Some(thread) }
    }

    /// Stops the loop; how many notifications it handled.
    fn stop(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for WaitLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The next wake-up, within 5 s, and how long it took.
fn next_wake(rx: &std::sync::mpsc::Receiver<String>) -> (String, std::time::Duration) {
    let t = std::time::Instant::now();
    let bot = rx.recv_timeout(std::time::Duration::from_secs(5)).expect("a wake-up within 5 s");
    (bot, t.elapsed())
}

#[test]
fn a_send_on_node_a_wakes_node_b_through_a_notification_long_before_its_poll() {
    let _g = serial();
    let db = test_database();
    let (a, b, w, mut s) = a_bot_on_a_with_a_session_on_slow_b(&db);
    // Accepted at this instant: the manual clock does not move.
    let now = b.now_ms();
    assert_eq!(drain(&mut s).0.len(), 2, "hello and bot_started");
    // 60 s configured; sessions still check every 5 s to renew their leases.
    assert_eq!(s.poll_timeout(), Some(now + 5_000), "the next poll is seconds away");
    let wakes = wake_channel(&b);
    let listening = WaitLoop::start(&b);
    // Opening the listening connection woke the bot with a session here.
    assert_eq!(next_wake(&wakes).0, w.bot);
    assert_eq!(drain(&mut s), (vec![], None), "a hint with nothing new sends nothing");
    for i in 0..3 {
        let text = format!("from A {i}");
        let sent = admin(&a, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": text}));
        let (bot, took) = next_wake(&wakes);
        assert_eq!(bot, w.bot);
        assert!(took < std::time::Duration::from_secs(1), "woken after {took:?}");
        // No handle_timeout, the manual clock never moved: the hint alone
        // made the session read the database.
        let (events, close) = drain(&mut s);
        assert_eq!(close, None);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["type"], "message_created");
        assert_eq!(events[0]["data"]["message"]["message_id"], sent["message_id"]);
        assert_eq!(events[0]["data"]["message"]["text"], text);
    }
    assert_eq!(listening.stop(), 3, "one notification per commit");
    assert!(wakes.try_recv().is_err(), "one wake-up per commit");
}

#[test]
fn rotating_the_token_on_node_a_closes_node_b_sessions_with_4004_through_a_notification() {
    let _g = serial();
    let db = test_database();
    let (a, b, w, mut s) = a_bot_on_a_with_a_session_on_slow_b(&db);
    drain(&mut s);
    let wakes = wake_channel(&b);
    let listening = WaitLoop::start(&b);
    assert_eq!(next_wake(&wakes).0, w.bot);
    admin(&a, SECRET, "rotateBotToken", json!({"bot_id": w.bot}));
    let (bot, took) = next_wake(&wakes);
    assert_eq!(bot, w.bot);
    assert!(took < std::time::Duration::from_secs(1), "woken after {took:?}");
    assert_eq!(drain(&mut s), (vec![], Some(4004)));
    assert_eq!(b.gateway_connections(&w.bot), 0);
    listening.stop();
}

#[test]
fn notifications_naming_unknown_bots_or_nothing_do_no_harm() {
    let _g = serial();
    let db = test_database();
    let (a, b, w, mut s) = a_bot_on_a_with_a_session_on_slow_b(&db);
    drain(&mut s);
    let wakes = wake_channel(&b);
    assert_eq!(b.wait_store_notifications(0).unwrap(), 0);
    assert_eq!(next_wake(&wakes).0, w.bot);
    let mut raw = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    // Ids nobody has, empty items, a bot with no session on B: no wake-up,
    // the session sends nothing and stays open.
    raw.batch_execute("SELECT pg_notify('botspace', 'bot_nobody,,'); NOTIFY botspace, 'x,y'").unwrap();
    let mut heard = 0;
    while heard < 2 {
        heard += b.wait_store_notifications(5_000).unwrap();
    }
    assert_eq!(heard, 2);
    assert!(wakes.try_recv().is_err(), "no bot of those has a session here");
    assert_eq!(drain(&mut s), (vec![], None));
    // An empty payload means "anything may have changed": every bot with a
    // session here is woken, and finds nothing new.
    raw.batch_execute("NOTIFY botspace").unwrap();
    assert_eq!(b.wait_store_notifications(5_000).unwrap(), 1);
    assert_eq!(next_wake(&wakes).0, w.bot);
    assert_eq!(drain(&mut s), (vec![], None));
    // Other channels are not ours.
    raw.batch_execute("LISTEN elsewhere; NOTIFY elsewhere, 'x'").unwrap();
    assert_eq!(b.wait_store_notifications(200).unwrap(), 0);
    // And a real commit still gets through.
    admin(&a, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "still here"}));
    assert_eq!(b.wait_store_notifications(5_000).unwrap(), 1);
    assert_eq!(next_wake(&wakes).0, w.bot);
    let (events, close) = drain(&mut s);
    assert_eq!((events.len(), close), (1, None), "{events:?}");
    assert_eq!(events[0]["data"]["message"]["text"], "still here");
}

#[test]
fn a_commit_notifies_once_with_the_bots_it_affected_and_only_then() {
    let _g = serial();
    let db = test_database();
    let a = node(&db);
    let w = world(&a, "official");
    let mut raw = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    raw.batch_execute("LISTEN botspace").unwrap();
    let mut heard = || payloads_within(&mut raw, 300);
    // Writes that wake nobody send nothing.
    admin(&a, SECRET, "createUser", json!({"display_name": "Bo"}));
    assert_eq!(bot_call(&a, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "to the user"})).0, 200);
    assert_eq!(heard(), Vec::<String>::new());
    // A user's message wakes the bot: one notification naming it.
    admin(&a, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "hi"}));
    assert_eq!(heard(), vec![w.bot.clone()]);
    // A refused request sends nothing; a rotation names the bot.
    assert_eq!(bot_call(&a, "bot_nope", "sendMessage", json!({"chat_id": w.chat, "text": "x"})).0, 401);
    admin(&a, SECRET, "rotateBotToken", json!({"bot_id": w.bot}));
    assert_eq!(heard(), vec![w.bot.clone()]);
    // A group commit of several requests sends one notification for all.
    let (u2, b2) = {
        let u = admin(&a, SECRET, "createUser", json!({"display_name": "Cy"}))["id"].as_str().unwrap().to_string();
        let b = admin(&a, SECRET, "createBot", json!({"display_name": "B2", "handle": "b2", "quota_tier": "official"}));
        (u, b["bot"]["id"].as_str().unwrap().to_string())
    };
    let c2 = admin(&a, SECRET, "startBot", json!({"user_id": u2, "bot_id": b2}))["id"].as_str().unwrap().to_string();
    heard();
    let reqs: Vec<Vec<u8>> = [(&w.user, &w.chat), (&u2, &c2), (&w.user, &w.chat)]
        .iter()
        .map(|(u, c)| admin_request(SECRET, "sendUserMessage", json!({"user_id": u, "chat_id": c, "text": "g"})))
        .collect();
    let refs: Vec<&[u8]> = reqs.iter().map(Vec::as_slice).collect();
    assert_eq!(statuses(&common::batch(&a, &refs)), [200, 200, 200]);
    let mut both = [w.bot.clone(), b2.clone()];
    both.sort();
    assert_eq!(heard(), [both.join(",")]);
    // With listen_notify off (engines without LISTEN) nothing is sent, and
    // there is nothing to wait for.
    let quiet = Service::open(Config::default().with(|c| {
        c.database = db.clone();
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.listen_notify = false;
    }))
    .unwrap();
    admin(&quiet, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "quiet"}));
    assert_eq!(heard(), Vec::<String>::new());
    assert!(!quiet.has_store_notifications());
    let t = std::time::Instant::now();
    assert_eq!(quiet.wait_store_notifications(5_000).unwrap(), 0);
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "returns at once");
}

#[test]
fn a_failing_pg_notify_loses_only_the_hint_and_the_commit_stands() {
    let _g = serial();
    let db = test_database();
    let a = node(&db);
    let w = world(&a, "official");
    // A role that may not call pg_notify (superusers always may).
    let role = format!("nonotify_{}", std::process::id());
    let mut raw = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let schema: String = raw.query_one("SELECT current_schema()", &[]).unwrap().get(0);
    raw.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
         GRANT USAGE, CREATE ON SCHEMA {schema} TO {role};
         GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role};
         GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role};
         REVOKE EXECUTE ON FUNCTION pg_notify(text, text) FROM PUBLIC;"
    ))
    .unwrap();
    struct Restore(postgres::Client, String, String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = self.0.batch_execute(&format!(
                "GRANT EXECUTE ON FUNCTION pg_notify(text, text) TO PUBLIC; DROP OWNED BY {0}; DROP ROLE {0};",
                self.1
            ));
            let _ = &self.2;
        }
    }
    let _restore = Restore(raw, role.clone(), schema);
    let limited = node(&db.replacen("postgres@", &format!("{role}@"), 1));
    // A write that wakes nobody needs no pg_notify.
    assert_eq!(bot_call(&limited, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "fine"})).0, 200);
    let mut listening = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    listening.batch_execute("LISTEN botspace").unwrap();
    let mut listener_heard = || payloads_within(&mut listening, 300);
    // One that wakes the bot commits first; its hint then fails, which
    // costs other nodes only the wake-up (their polls find the event).
    let resp = limited.handle_request(&admin_request(
        SECRET,
        "sendUserMessage",
        json!({"user_id": w.user, "chat_id": w.chat, "text": "kept"}),
    ));
    let (status, body) = split(&resp);
    assert_eq!(status, 200, "{body}");
    let history = admin(&a, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    let texts: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["fine", "kept"], "the commit stands");
    // The bot gets the event: it was committed with the message.
    let updates = bot_call(&limited, &w.token, "getUpdates", json!({})).1;
    let got: Vec<&str> =
        updates["result"].as_array().unwrap().iter().filter_map(|u| u["data"]["message"]["text"].as_str()).collect();
    assert_eq!(got, ["kept"], "{updates}");
    assert_eq!(listener_heard(), Vec::<String>::new(), "the hint was refused");
    // The node goes on serving.
    assert_eq!(bot_call(&limited, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "after"})).0, 200);
}

/// Deadlocks PostgreSQL has broken in the current database so far.
fn deadlocks(db: &str) -> i64 {
    let mut c = postgres::Client::connect(db, postgres::NoTls).unwrap();
    c.query_one("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()", &[]).unwrap().get(0)
}

#[test]
fn groups_on_two_nodes_lock_private_chats_in_one_order_and_never_deadlock() {
    let _g = serial();
    let db = test_database();
    let (a, b) = (node(&db), node(&db));
    // Bots with private chats, each written from both nodes by several
    // threads at once: each node's groups hold several chats' rows at a
    // time, and the two nodes' groups want the same rows.
    // Free-tier bots lock their rate buckets too (and, on a manual clock,
    // are soon refused); official ones write every message.
    let worlds: Vec<World> = (0..6).map(|i| world(&a, if i % 2 == 0 { "free" } else { "official" })).collect();
    let worlds = Arc::new(worlds);
    let before = deadlocks(&db);
    let per_thread = 36;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let svc = if t % 2 == 0 { a.clone() } else { b.clone() };
            let worlds = worlds.clone();
            std::thread::spawn(move || {
                let mut sent = vec![0u64; worlds.len()];
                for n in 0..per_thread {
                    // Node A's threads walk the chats one way, B's the other.
                    let k = worlds.len();
                    let i = if t % 2 == 0 { (n + t) % k } else { (k * per_thread + t - n) % k };
                    let w = &worlds[i];
                    let (status, m) =
                        bot_call(&svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": format!("{t}-{n}")}));
                    if status == 200 {
                        sent[i] += 1;
                    } else {
                        // The free tier's limits refuse some: nothing written.
                        assert_eq!((status, m["error"].as_str()), (429, Some("rate_limited")), "{m}");
                    }
                }
                sent
            })
        })
        .collect();
    let mut sent = vec![0u64; worlds.len()];
    for t in threads {
        for (i, n) in t.join().unwrap().into_iter().enumerate() {
            sent[i] += n;
        }
    }
    assert_eq!(deadlocks(&db) - before, 0, "no deadlock between the two nodes' groups");
    for (w, n) in worlds.iter().zip(sent) {
        let history = admin(&a, SECRET, "getChatHistory", json!({"chat_id": w.chat, "limit": 100}));
        let ids: Vec<u64> =
            history.as_array().unwrap().iter().map(|m| m["message_id"].as_str().unwrap().parse().unwrap()).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert!(n < 100, "one page holds them all");
        assert_eq!(sorted, (1..=n).collect::<Vec<_>>(), "every 200 is stored, ids gapless");
    }
}

/// Bot ids from node `svc`'s wake channel until none comes for 300 ms,
/// sorted.
fn wakes_now(rx: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(bot) = rx.recv_timeout(std::time::Duration::from_millis(300)) {
        out.push(bot);
    }
    out.sort();
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn a_commit_naming_more_bots_than_a_payload_holds_notifies_empty_and_wakes_every_session_on_node_b() {
    let _g = serial();
    let db = test_database();
    let (a, b) = (node(&db), slow_polling_node(&db));
    // Bot ids are "bot_" and 22 characters: 300 of them comma-joined are
    // 8099 bytes, over the 7900 a payload may carry.
    const BOTS: usize = 300;
    let user = admin(&a, SECRET, "createUser", json!({"display_name": "Many"}))["id"].as_str().unwrap().to_string();
    let creates: Vec<Vec<u8>> = (0..BOTS)
        .map(|i| {
            let body = json!({"display_name": format!("B{i}"), "handle": format!("many{i}"), "quota_tier": "official"});
            admin_request(SECRET, "createBot", body)
        })
        .collect();
    let created = common::batch(&a, &creates.iter().map(Vec::as_slice).collect::<Vec<_>>());
    let bots: Vec<(String, String)> = created
        .iter()
        .map(|r| {
            let (status, body) = split(r);
            assert_eq!(status, 200, "{body}");
            let bot = &body["result"];
            (bot["bot"]["id"].as_str().unwrap().to_string(), bot["token"].as_str().unwrap().to_string())
        })
        .collect();
    let joined = bots.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(",");
    assert_eq!(joined.len(), BOTS * 27 - 1);
    assert!(joined.len() > 7900);
    // Sessions on B: two bots of the big commit, and one outside it, which
    // only an empty payload ("anything may have changed") can wake.
    let outside = world(&a, "official");
    let (first, last) = (&bots[0], &bots[BOTS - 1]);
    let mut s_first = b.accept_gateway_session(&upgrade(&first.1), b.now_ms()).unwrap();
    let mut s_last = b.accept_gateway_session(&upgrade(&last.1), b.now_ms()).unwrap();
    let mut s_outside = b.accept_gateway_session(&upgrade(&outside.token), b.now_ms()).unwrap();
    for s in [&mut s_first, &mut s_last, &mut s_outside] {
        assert_eq!(drain(s).0[0]["op"], "hello");
    }
    let here = sorted(vec![first.0.clone(), last.0.clone(), outside.bot.clone()]);
    let wakes = wake_channel(&b);
    assert_eq!(b.wait_store_notifications(0).unwrap(), 0);
    assert_eq!(wakes_now(&wakes), here, "opening the listener wakes every session");
    let mut raw = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    raw.batch_execute("LISTEN botspace").unwrap();
    // One commit gives all 300 bots an event (bot_started).
    let starts: Vec<Vec<u8>> =
        bots.iter().map(|(id, _)| admin_request(SECRET, "startBot", json!({"user_id": user, "bot_id": id}))).collect();
    let started = common::batch(&a, &starts.iter().map(Vec::as_slice).collect::<Vec<_>>());
    assert_eq!(statuses(&started), vec![200; BOTS]);
    // What went out: one notification, with the empty payload.
    let payloads = payloads_within(&mut raw, 500);
    assert_eq!(payloads, [""]);
    // Node B hears it as "everything": every session here is woken, the
    // one outside the commit too, each once.
    assert_eq!(b.wait_store_notifications(5_000).unwrap(), 1);
    assert_eq!(wakes_now(&wakes), here);
    for s in [&mut s_first, &mut s_last] {
        let (events, close) = drain(s);
        assert_eq!(close, None);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["type"], "bot_started");
    }
    assert_eq!(drain(&mut s_outside), (vec![], None), "woken, and nothing new for it");
}

#[test]
fn the_listening_connection_reconnects_after_a_postgres_restart_and_hears_node_a_again() {
    let _g = serial();
    let db = test_database();
    let (a, b) = (node(&db), slow_polling_node(&db));
    let (w, w2) = (world(&a, "official"), world(&a, "official"));
    let mut s = b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).unwrap();
    let mut s2 = b.accept_gateway_session(&upgrade(&w2.token), b.now_ms()).unwrap();
    assert_eq!(drain(&mut s).0.len(), 2, "hello and bot_started");
    assert_eq!(drain(&mut s2).0.len(), 2, "hello and bot_started");
    let both = sorted(vec![w.bot.clone(), w2.bot.clone()]);
    let wakes = wake_channel(&b);
    assert_eq!(b.wait_store_notifications(0).unwrap(), 0);
    assert_eq!(wakes_now(&wakes), both);
    // The server restarts between two calls: the listening connection is
    // dead when the next call comes.
    pg_stop("fast").start();
    let mut errors = Vec::new();
    let heard = loop {
        match b.wait_store_notifications(100) {
            Ok(n) => break n,
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                errors.push(e.to_string());
                assert!(errors.len() <= 3, "still failing after the restart: {errors:?}");
            }
        }
    };
    // Reported once; the next call reconnects, which is no notification
    // but wakes every session here (what was sent meanwhile is lost).
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(heard, 0);
    assert_eq!(wakes_now(&wakes), both);
    // Woken, the sessions look at the database (through B's main
    // connection, which the restart broke too) and find nothing new.
    assert_eq!(drain(&mut s), (vec![], None));
    assert_eq!(drain(&mut s2), (vec![], None));
    // A commit on A after the restart reaches B through the new listener,
    // long before the sessions' 5 s poll (the clock does not move).
    let listening = WaitLoop::start(&b);
    assert_eq!(wakes_now(&wakes), Vec::<String>::new(), "connected already: no wake-up");
    // A's own connection died with the restart as well: its first request
    // may be refused with 503 (nothing written), the next reconnects.
    let send = admin_request(SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "after"}));
    let (mut status, mut sent) = split(&a.handle_request(&send));
    if status == 503 {
        assert_eq!(sent["error"], "storage_unavailable", "{sent}");
        (status, sent) = split(&a.handle_request(&send));
    }
    assert_eq!(status, 200, "{sent}");
    let sent = &sent["result"];
    let (bot, took) = next_wake(&wakes);
    assert_eq!(bot, w.bot);
    assert!(took < std::time::Duration::from_secs(1), "woken after {took:?}");
    let (events, close) = drain(&mut s);
    assert_eq!(close, None);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["data"]["message"]["message_id"], sent["message_id"]);
    assert_eq!(events[0]["data"]["message"]["text"], "after");
    assert_eq!(drain(&mut s2), (vec![], None));
    assert_eq!(listening.stop(), 1, "one notification, from A's commit");
    assert!(wakes.try_recv().is_err());
}

/// A sendMessage of `w`'s bot into its chat, with `extra` headers.
fn send_request(w: &World, text: &str, extra: &str) -> Vec<u8> {
    request(
        "/bot/sendMessage",
        &format!("Bot {}", w.token),
        extra,
        json!({"chat_id": w.chat, "text": text}).to_string().as_bytes(),
    )
}

/// Runs `requests` as one group; its round trips, and the answers.
fn group_round_trips(svc: &Service, requests: &[Vec<u8>]) -> (u64, Vec<(u16, Value)>) {
    let refs: Vec<&[u8]> = requests.iter().map(Vec::as_slice).collect();
    let before = svc.commit_stats().round_trips;
    let answers = common::batch(&svc, &refs);
    let trips = svc.commit_stats().round_trips - before;
    (trips, answers.iter().map(|a| split(a)).collect())
}

/// The message ids the answers carry, each a 200.
fn message_ids(answers: &[(u16, Value)]) -> Vec<u64> {
    answers
        .iter()
        .map(|(status, v)| {
            assert_eq!(*status, 200, "{v}");
            v["result"]["message_id"].as_str().expect("message_id").parse().unwrap()
        })
        .collect()
}

/// Every statement a group uses, prepared on both of the node's
/// connections (one runs a group while the other commits), with a prune
/// done: what is measured next is the steady state.
fn warm(svc: &Service, worlds: &[World], extra: &dyn Fn(usize) -> String) {
    for round in 0..2 {
        let requests: Vec<Vec<u8>> =
            worlds.iter().enumerate().map(|(i, w)| send_request(w, &format!("warm {round}"), &extra(i))).collect();
        let (_, answers) = group_round_trips(svc, &requests[..2]);
        message_ids(&answers);
        let (_, answers) = group_round_trips(svc, &requests[2..3]);
        message_ids(&answers);
        assert_eq!(
            bot_call(svc, &worlds[3].token, "sendMessage", json!({"chat_id": worlds[3].chat, "text": "w"})).0,
            200
        );
    }
}

#[test]
fn a_group_of_sends_costs_two_round_trips_at_every_size() {
    let _g = serial();
    let svc = node(&test_database());
    let worlds: Vec<World> = (0..64).map(|_| world(&svc, "official")).collect();
    warm(&svc, &worlds, &|_| String::new());
    // Messages so far per chat: two warm-up rounds in the first four.
    let mut sent: Vec<u64> = (0..64).map(|i| if i < 4 { 2 } else { 0 }).collect();
    for size in [1usize, 8, 64] {
        let requests: Vec<Vec<u8>> = worlds[..size].iter().map(|w| send_request(w, "hi", "")).collect();
        let statements = svc.database_statements();
        let (trips, answers) = group_round_trips(&svc, &requests);
        // BEGIN with every bot, chat and counter read; every message with
        // its updates and the COMMIT. One statement each: the read, the
        // write.
        assert_eq!((trips, svc.database_statements() - statements), (2, 2), "a group of {size}");
        for n in &mut sent[..size] {
            *n += 1;
        }
        assert_eq!(message_ids(&answers), sent[..size].to_vec(), "a group of {size}");
    }
    // Eight into one chat: numbered in memory, in order, without a gap.
    let requests: Vec<Vec<u8>> = (0..8).map(|i| send_request(&worlds[9], &format!("{i}"), "")).collect();
    let statements = svc.database_statements();
    let (trips, answers) = group_round_trips(&svc, &requests);
    assert_eq!((trips, svc.database_statements() - statements), (2, 2));
    assert_eq!(message_ids(&answers), (2..=9).collect::<Vec<u64>>());
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": worlds[9].chat}));
    let texts: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["hi", "0", "1", "2", "3", "4", "5", "6", "7"]);
    // Alone, through the group commit: the same two.
    let (before, statements) = (svc.commit_stats().round_trips, svc.database_statements());
    let (status, v) = bot_call(&svc, &worlds[5].token, "sendMessage", json!({"chat_id": worlds[5].chat, "text": "1"}));
    let cost = (svc.commit_stats().round_trips - before, svc.database_statements() - statements);
    assert_eq!((status, cost), (200, (2, 2)), "{v}");
    assert_eq!(v["result"]["message_id"], "3");
}

#[test]
fn rate_limited_keyed_sends_cost_four_round_trips_at_every_size() {
    let _g = serial();
    let svc = node(&test_database());
    let worlds: Vec<World> = (0..64).map(|_| world(&svc, "standard")).collect();
    // A key per warm-up send.
    let n = std::sync::atomic::AtomicUsize::new(0);
    let key = |_: usize| format!("Idempotency-Key: warm-{}\r\n", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    warm(&svc, &worlds, &key);
    let mut sent: Vec<u64> = (0..64).map(|i| if i < 4 { 2 } else { 0 }).collect();
    for size in [1usize, 8, 64] {
        let requests: Vec<Vec<u8>> = worlds[..size]
            .iter()
            .enumerate()
            .map(|(i, w)| send_request(w, "hi", &format!("Idempotency-Key: k{size}-{i}\r\n")))
            .collect();
        let (trips, answers) = group_round_trips(&svc, &requests);
        // Bots, chats and counters; buckets and keys; the kept answers
        // (another node may be keeping the same key: written before the
        // COMMIT goes out without the lock); the rest with the COMMIT.
        assert_eq!(trips, 4, "a group of {size}");
        for n in &mut sent[..size] {
            *n += 1;
        }
        assert_eq!(message_ids(&answers), sent[..size].to_vec(), "a group of {size}");
    }
    // A key used twice in one group: the second gets the first's answer,
    // and one message is written.
    let twice = vec![send_request(&worlds[0], "once", "Idempotency-Key: same\r\n"); 2];
    let (trips, answers) = group_round_trips(&svc, &twice);
    assert_eq!(trips, 4);
    assert_eq!(message_ids(&answers), [6, 6]);
    assert_eq!(answers[0].1, answers[1].1);
    let (_, v) = bot_call(&svc, &worlds[0].token, "sendMessage", json!({"chat_id": worlds[0].chat, "text": "next"}));
    assert_eq!(v["result"]["message_id"], "7");
    // The private chat's bucket (a burst of 10 for the standard tier, the
    // clock standing still) is held and taken from in memory across the
    // group: with one send in the chat already, the tenth of a group is
    // refused, and no message is written for it.
    let w = &worlds[20];
    let burst: Vec<Vec<u8>> = (0..10).map(|i| send_request(w, &format!("{i}"), "")).collect();
    let (trips, answers) = group_round_trips(&svc, &burst);
    // Without keys: bots, chats and counters; buckets; the writes and COMMIT.
    assert_eq!(trips, 3);
    assert_eq!(message_ids(&answers[..9]), (2..=10).collect::<Vec<u64>>());
    assert_eq!(answers[9].0, 429, "{}", answers[9].1);
    assert_eq!(answers[9].1["error"], "rate_limited");
    assert_eq!(answers[9].1["parameters"]["scope"], "chat");
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    assert_eq!(history.as_array().unwrap().len(), 10, "{history}");
}

#[test]
fn a_write_that_fails_with_the_commit_fails_the_whole_group_and_commits_nothing() {
    let _g = serial();
    let db = test_database();
    let svc = node(&db);
    let worlds: Vec<World> = (0..4).map(|_| world(&svc, "official")).collect();
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    // A message "boom" fails when its row is written: with the group's
    // other writes, in the COMMIT's round trip (the URL names the test's
    // own schema).
    pg.batch_execute(
        "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.text = 'boom' THEN RAISE EXCEPTION 'refused'; END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_boom BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
    )
    .unwrap();
    let texts = ["one", "two", "boom", "four"];
    let requests: Vec<Vec<u8>> = worlds.iter().zip(texts).map(|(w, t)| send_request(w, t, "")).collect();
    let (_, answers) = group_round_trips(&svc, &requests);
    for (status, v) in &answers {
        assert_eq!(*status, 500, "{v}");
        assert_eq!(v["error"], "internal_error", "{v}");
        assert_eq!(v["description"], "internal error, nothing was written; safe to retry", "{v}");
    }
    for w in &worlds {
        let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
        assert_eq!(history, json!([]), "nothing of the group was committed");
    }
    // The node goes on: the next group numbers from 1, without a gap.
    let requests: Vec<Vec<u8>> = worlds.iter().map(|w| send_request(w, "after", "")).collect();
    let (_, answers) = group_round_trips(&svc, &requests);
    assert_eq!(message_ids(&answers), [1, 1, 1, 1]);
}

#[test]
fn a_send_into_a_chat_with_other_bots_costs_three_round_trips_and_tells_each() {
    let _g = serial();
    let svc = node(&test_database());
    let group = admin(&svc, SECRET, "createGroup", json!({"title": "G"}))["id"].as_str().unwrap().to_string();
    let mut tokens = Vec::new();
    for i in 0..3 {
        let bt = admin(
            &svc,
            SECRET,
            "createBot",
            json!({"display_name": "B", "handle": format!("rt{i}"), "quota_tier": "official"}),
        );
        admin(&svc, SECRET, "addMember", json!({"chat_id": group, "member_id": bt["bot"]["id"]}));
        tokens.push(bt["token"].as_str().unwrap().to_string());
    }
    let to_group = |t: &str, text: &str| {
        request(
            "/bot/sendMessage",
            &format!("Bot {t}"),
            "",
            json!({"chat_id": group, "text": text}).to_string().as_bytes(),
        )
    };
    for round in 0..4 {
        let requests: Vec<Vec<u8>> = tokens.iter().map(|t| to_group(t, &format!("{round}"))).collect();
        let (trips, answers) = group_round_trips(&svc, &requests);
        assert_eq!(message_ids(&answers), [1, 2, 3].map(|n| n + 3 * round).to_vec());
        // The first two prepare their statements on the node's two
        // connections.
        if round >= 2 {
            // The reads; the writes, checked for every member bot's event
            // before anything can commit; the COMMIT.
            assert_eq!(trips, 3, "round {round}");
        }
    }
    // Each bot heard the other two bots' messages of every round, in order.
    for (i, t) in tokens.iter().enumerate() {
        let (status, v) = bot_call(&svc, t, "getUpdates", json!({}));
        assert_eq!(status, 200, "{v}");
        let heard: Vec<u64> = v["result"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["type"] == "message_created")
            .map(|u| u["data"]["message"]["message_id"].as_str().unwrap().parse().unwrap())
            .collect();
        let expected: Vec<u64> = (1..=12).filter(|n| (n - 1) % 3 != i as u64).collect();
        assert_eq!(heard, expected, "{v}");
    }
}

#[test]
fn a_session_whose_check_meets_a_database_outage_looks_again_within_a_second() {
    let _g = serial();
    let b = slow_polling_node(&test_database());
    let w = world(&b, "official");
    let mut s = b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).unwrap();
    drain(&mut s);
    // A check that reads the database: the next one a whole interval on.
    let due = s.poll_timeout().unwrap();
    s.handle_timeout(due);
    let interval = s.poll_timeout().unwrap() - due;
    assert!(interval > 1000, "{interval}");
    // A check while the database is down: the next one within a second.
    let down = pg_stop("fast");
    let due = due + interval;
    s.handle_timeout(due);
    assert_eq!(s.poll_timeout().unwrap() - due, 1000);
    assert_eq!(drain(&mut s), (vec![], None), "the outage closes nothing");
    down.start();
    // Back: the retry reads (reconnecting; a first failure retries again)
    // and the interval returns.
    let mut due = due + 1000;
    s.handle_timeout(due);
    if s.poll_timeout().unwrap() - due == 1000 {
        due += 1000;
        s.handle_timeout(due);
    }
    assert_eq!(s.poll_timeout().unwrap() - due, interval);
}

// ---------------------------------------------------------------------------
// Deadlines: a server that stops answering without closing its connections.

/// A node whose database calls have a 1 s deadline.
fn node_with_deadline(database: &str, poll_interval_ms: u64) -> Arc<Service> {
    let cfg = Config::default().with(|c| {
        c.database = database.into();
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.gateway_poll_interval_ms = poll_interval_ms;
        c.database_timeout_ms = 1000;
    });
    Arc::new(Service::open(cfg).expect("the node opens on the shared database"))
}

const UNAVAILABLE: &str = "the database is unreachable, nothing was written; retry later";

#[test]
fn a_frozen_postgres_answers_503_within_the_deadline_and_the_node_serves_again_after_it_thaws() {
    let _g = serial();
    let db = test_database();
    let svc = node_with_deadline(&db, 60_000);
    let w = world(&svc, "official");
    let send = |text: &str| bot_call(&svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": text}));
    assert_eq!(send("before").0, 200);
    // The listening connection is open before the freeze.
    assert_eq!(svc.wait_store_notifications(0).unwrap(), 0);
    let frozen = pg_freeze();
    let deadline = std::time::Duration::from_millis(1000);
    // Open connection, no answer: the statements' deadline.
    let t = std::time::Instant::now();
    let (status, body) = send("while frozen");
    let took = t.elapsed();
    assert_eq!(
        (status, body["error"].as_str(), body["description"].as_str()),
        (503, Some("storage_unavailable"), Some(UNAVAILABLE)),
        "{body}"
    );
    assert!(took >= deadline && took < deadline + std::time::Duration::from_millis(1500), "answered after {took:?}");
    // The connection was dropped: the next request connects, and the
    // start-up that never answers has the deadline too.
    let t = std::time::Instant::now();
    let (status, body) = send("while frozen");
    let took = t.elapsed();
    assert_eq!((status, body["error"].as_str()), (503, Some("storage_unavailable")), "{body}");
    assert!(took >= deadline && took < deadline + std::time::Duration::from_millis(1500), "answered after {took:?}");
    // The listener's liveness check (once a second) has the deadline too.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let t = std::time::Instant::now();
    let e = svc.wait_store_notifications(100).unwrap_err();
    let took = t.elapsed();
    assert!(e.is_unavailable(), "{e}");
    assert!(e.to_string().contains("within database_timeout_ms (1000 ms)"), "{e}");
    assert!(took < deadline + std::time::Duration::from_millis(1500), "the wait took {took:?}");
    frozen.thaw();
    // Back by itself, without a restart: requests and the listener.
    let (status, body) = send("after");
    assert_eq!(status, 200, "{body}");
    assert_eq!(svc.wait_store_notifications(0).unwrap(), 0, "reconnected");
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    let texts: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["before", "after"], "nothing of the refused requests was written");
}

#[test]
fn a_commit_unanswered_within_the_deadline_is_503_commit_outcome_unknown_and_a_keyed_retry_writes_once() {
    let _g = serial();
    let db = test_database();
    let svc = node_with_deadline(&db, 60_000);
    let w = world(&svc, "official");
    // A deferred trigger holds COMMIT for 2 s, once: COMMIT was sent and
    // does not answer within the 1 s deadline (the server still commits).
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    pg.batch_execute(
        "CREATE SEQUENCE slow_once;
         CREATE FUNCTION slow_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.text = 'slow' AND nextval('slow_once') = 1 THEN PERFORM pg_sleep(2); END IF;
           RETURN NEW;
         END $$;
         CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW EXECUTE FUNCTION slow_at_commit();",
    )
    .unwrap();
    let send = || {
        let raw = request(
            "/bot/sendMessage",
            &format!("Bot {}", w.token),
            "Idempotency-Key: slow-1\r\n",
            json!({"chat_id": w.chat, "text": "slow"}).to_string().as_bytes(),
        );
        split_with_headers(&svc.handle_request(&raw))
    };
    let t = std::time::Instant::now();
    let (status, headers, body) = send();
    let took = t.elapsed();
    assert_eq!((status, body["error"].as_str()), (503, Some("commit_outcome_unknown")), "{body}");
    assert!(headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("retry-after") && v == "1"), "{headers:?}");
    assert!(took < std::time::Duration::from_millis(2000), "answered after {took:?}, not at the deadline");
    // The server finishes the commit it was given; the retry, with the
    // same key, finds it (once the row's lock is free) and writes nothing.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (status, _, body) = send();
    assert_eq!(status, 200, "{body}");
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.chat}));
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
    assert_eq!(history[0]["message_id"], body["result"]["message_id"]);
}

#[test]
fn a_session_whose_node_cannot_reach_the_database_for_five_seconds_closes_with_4010() {
    let _g = serial();
    let b = node_with_deadline(&test_database(), 60_000);
    let w = world(&b, "official");
    let mut s = b.accept_gateway_session(&upgrade(&w.token), b.now_ms()).unwrap();
    drain(&mut s);
    let down = pg_stop("fast");
    // Failing checks once a second: open up to 5 s after the first.
    let first = s.poll_timeout().unwrap();
    let mut due = first;
    while due < first + botspace::gateway::STORAGE_CLOSE_AFTER_MS {
        s.handle_timeout(due);
        assert_eq!(drain(&mut s), (vec![], None), "open {} ms after the first failure", due - first);
        due = s.poll_timeout().unwrap();
        assert!(due - first <= botspace::gateway::STORAGE_CLOSE_AFTER_MS, "{}", due - first);
    }
    s.handle_timeout(due);
    assert_eq!(drain(&mut s), (vec![], Some(4010)));
    assert_eq!(
        s.poll_event(),
        Some(botspace::GatewayEvent::Closed { code: 4010, reason: botspace::CloseCode::StorageUnavailable })
    );
    down.start();
}

/// A node has two connections: while one group's COMMIT is under way
/// (awaited without the service's lock), the next group runs on the other
/// connection. A deferred trigger makes one COMMIT take 2 s; a send into
/// another chat meanwhile runs all its statements (its transaction has
/// written, and waits for its COMMIT) before the slow COMMIT returns. Its
/// update id comes after the slow one's (commit order), message ids stay
/// gapless, and neither answer leaves before its own COMMIT returned.
#[test]
fn the_next_group_runs_on_the_other_connection_while_a_commit_syncs_and_answers_wait_for_their_commit() {
    let _g = serial();
    let db = test_database();
    let svc = node(&db);
    let w = world(&svc, "official");
    let bob = admin(&svc, SECRET, "createUser", json!({"display_name": "Bob"}))["id"].as_str().unwrap().to_string();
    let chat_y =
        admin(&svc, SECRET, "startBot", json!({"user_id": bob, "bot_id": w.bot}))["id"].as_str().unwrap().to_string();
    let send = |chat: &str, text: &str| bot_call(&svc, &w.token, "sendMessage", json!({"chat_id": chat, "text": text}));
    // Both connections warm, so nothing below waits for a statement to be prepared.
    assert_eq!(send(&w.chat, "warm 1").0, 200);
    assert_eq!(send(&chat_y, "warm 2").0, 200);
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    pg.batch_execute(
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.text = 'slow' THEN PERFORM pg_sleep(2); END IF;
           RETURN NEW;
         END $$;
         CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW EXECUTE FUNCTION slow_commit();",
    )
    .unwrap();
    let slow_done = std::sync::atomic::AtomicBool::new(false);
    let fast_done = std::sync::atomic::AtomicBool::new(false);
    let start = std::time::Instant::now();
    let (slow, fast, seen_overlap) = std::thread::scope(|s| {
        let slow = s.spawn(|| {
            let r = send(&w.chat, "slow");
            slow_done.store(true, std::sync::atomic::Ordering::SeqCst);
            (r, start.elapsed())
        });
        // The slow COMMIT is under way once its trigger sleeps.
        let in_commit = |pg: &mut postgres::Client| {
            pg.query_one("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'", &[])
                .unwrap()
                .get::<_, i64>(0)
                == 1
        };
        while !in_commit(&mut pg) {
            assert!(start.elapsed().as_millis() < 1000, "the slow COMMIT never started");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let fast = s.spawn(|| {
            let r = send(&chat_y, "fast");
            fast_done.store(true, std::sync::atomic::Ordering::SeqCst);
            (r, start.elapsed())
        });
        // The fast send's statements all ran on the other connection: its
        // transaction has written and waits for COMMIT, while the slow
        // COMMIT still sleeps and neither has answered.
        let mut seen_overlap = false;
        while start.elapsed().as_millis() < 1800 {
            let waiting: i64 = pg
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                     AND state = 'idle in transaction' AND backend_xid IS NOT NULL",
                    &[],
                )
                .unwrap()
                .get(0);
            if waiting == 1 && in_commit(&mut pg) {
                assert!(!slow_done.load(std::sync::atomic::Ordering::SeqCst), "answered before its COMMIT returned");
                assert!(!fast_done.load(std::sync::atomic::Ordering::SeqCst), "answered before its COMMIT returned");
                seen_overlap = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        (slow.join().unwrap(), fast.join().unwrap(), seen_overlap)
    });
    pg.batch_execute("DROP TRIGGER slow ON messages; DROP FUNCTION slow_commit();").unwrap();
    assert!(seen_overlap, "the second group ran its statements while the first one's COMMIT was under way");
    let ((slow_status, slow_body), slow_at) = slow;
    let ((fast_status, fast_body), fast_at) = fast;
    assert_eq!((slow_status, fast_status), (200, 200), "{slow_body} {fast_body}");
    assert!(slow_at.as_millis() >= 2000, "the slow send answered after {slow_at:?}, before its COMMIT returned");
    assert!(fast_at.as_millis() >= 2000, "the fast send answered after {fast_at:?}, before its COMMIT could return");
    // Message ids per chat: gapless, each chat its own count.
    assert_eq!(slow_body["result"]["message_id"], "2");
    assert_eq!(fast_body["result"]["message_id"], "2");
    assert_eq!(send(&w.chat, "after").1["result"]["message_id"], "3");
    // Update ids: in commit order, without a gap. Rows get their ids when
    // the host stream is read.
    admin(&svc, SECRET, "getUpdates", json!({}));
    let ids: Vec<(i64, String)> = pg
        .query(
            "SELECT update_id, data::json#>>'{message,text}' FROM updates WHERE type = 'message_created' \
             AND data::json#>>'{message,text}' IN ('warm 2', 'slow', 'fast', 'after') ORDER BY update_id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let texts: Vec<&str> = ids.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["warm 2", "slow", "fast", "after"]);
    assert!(ids.windows(2).all(|p| p[1].0 == p[0].0 + 1), "gapless update ids: {ids:?}");
}
