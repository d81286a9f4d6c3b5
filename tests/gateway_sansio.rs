//! Sans-IO gateway tests at the byte level: what the shared vectors
//! (`tests/vectors/gateway.json`, run on both Rust shapes by
//! `tests/vectors.rs`) cannot say — exact frame bytes, split and fragmented
//! frames, ping/pong, closes from the bot, broken framing, transmit bounds,
//! `poll_timeout` values, wake-ups and database import.

mod common;
#[path = "support/ws_frame.rs"]
mod ws_frame;

use botspace::{ClockKind, CloseCode, Config, GatewayConnection, GatewayEvent, Service};
use common::{admin, call, split};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const SECRET: &str = "gateway-admin-secret-01";

fn service(cfg: Config) -> Arc<Service> {
    // A test that names no database runs on the store under test.
    let database =
        if cfg.database == Config::default().database { common::test_database() } else { cfg.database.clone() };
    Arc::new(
        Service::open(cfg.with(|c| {
            c.admin_secret = SECRET.into();
            c.clock = ClockKind::Manual;
            c.database = database;
        }))
        .unwrap(),
    )
}

struct World {
    svc: Arc<Service>,
    user: String,
    bot: String,
    token: String,
    chat: String,
}

fn world(tier: &str, cfg: Config) -> World {
    let svc = service(cfg);
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo", "quota_tier": tier}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    World { svc, user, bot, token, chat }
}

fn upgrade(token: &str, query: &str) -> Vec<u8> {
    format!(
        "GET /bot/gateway{query} HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// One host round, as a poll loop runs it: time passes to `now`, then
/// everything there is to send is collected.
trait Round {
    fn feed(&mut self, bytes: &[u8], now: u64);
    fn poll(&mut self, now: u64) -> Vec<u8>;
}

impl Round for GatewayConnection {
    fn feed(&mut self, bytes: &[u8], now: u64) {
        self.handle_input(bytes, now);
    }
    fn poll(&mut self, now: u64) -> Vec<u8> {
        self.handle_timeout(now);
        let mut out = Vec::new();
        while self.poll_transmit(&mut out) > 0 {}
        out
    }
}

fn connect(w: &World, query: &str) -> GatewayConnection {
    let acc = w.svc.accept_gateway(&upgrade(&w.token, query), w.svc.now_ms());
    let head = String::from_utf8_lossy(&acc.response).to_string();
    assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
    // RFC 6455 section 1.3's sample key and accept value.
    assert!(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), "{head}");
    acc.connection.unwrap()
}

/// A masked client frame, as RFC 6455 requires of clients.
fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n < 65536 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

fn text(s: &str) -> Vec<u8> {
    client_frame(true, 0x1, s.as_bytes())
}

/// The exact bytes of an unmasked server frame.
fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n < 65536 => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason.as_bytes());
    server_frame(0x8, &p)
}

/// Splits server output into (opcode, payload) frames, each unmasked.
fn frames(b: &[u8]) -> Vec<(u8, Vec<u8>)> {
    ws_frame::server_frames(b)
}

fn texts(b: &[u8]) -> Vec<Value> {
    frames(b)
        .into_iter()
        .map(|(op, p)| {
            assert_eq!(op, 1, "text frame expected");
            serde_json::from_slice(&p).unwrap()
        })
        .collect()
}

#[test]
fn replayed_event_frame_bytes_are_exact() {
    let w = world("official", Config::default());
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    let out = c.poll(now);
    let fs = frames(&out);
    assert_eq!(fs.len(), 2, "hello and bot_started");
    assert_eq!(fs[0].0, 1, "hello is a text frame");
    let event = format!(
        r#"{{"op":"event","seq":1,"type":"bot_started","data":{{"chat":{{"id":"{}","type":"private"}},"user":{{"display_name":"Ann","handle":null,"id":"{}"}}}}}}"#,
        w.chat, w.user
    );
    assert_eq!(out[out.len() - server_frame(1, event.as_bytes()).len()..], server_frame(1, event.as_bytes())[..]);
    // Nothing more until something happens.
    assert!(c.poll(now).is_empty());
}

#[test]
fn heartbeat_split_across_many_feeds_and_several_in_one_feed() {
    let w = world("official", Config::default());
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    c.poll(now);
    let ack = server_frame(1, br#"{"op":"heartbeat_ack"}"#);
    // One frame fed one byte at a time.
    let hb = text(r#"{"op":"heartbeat"}"#);
    for (i, b) in hb.iter().enumerate() {
        c.feed(std::slice::from_ref(b), now);
        let out = c.poll(now);
        if i + 1 < hb.len() {
            assert!(out.is_empty(), "nothing before the frame is whole (byte {i})");
        } else {
            assert_eq!(out, ack);
        }
    }
    // Three frames in one feed.
    let mut three = hb.clone();
    three.extend(&hb);
    three.extend(&hb);
    c.feed(&three, now);
    assert_eq!(c.poll(now), [ack.clone(), ack.clone(), ack].concat());
}

#[test]
fn fragmented_text_message_is_reassembled() {
    let w = world("official", Config::default());
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    c.poll(now);
    let mut bytes = client_frame(false, 0x1, br#"{"op":"#);
    bytes.extend(client_frame(false, 0x0, br#""heart"#));
    bytes.extend(client_frame(true, 0x0, br#"beat"}"#));
    c.feed(&bytes, now);
    assert_eq!(c.poll(now), server_frame(1, br#"{"op":"heartbeat_ack"}"#));
}

#[test]
fn ping_is_answered_with_pong() {
    let w = world("official", Config::default());
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    c.poll(now);
    c.feed(&client_frame(true, 0x9, b"abc"), now);
    assert_eq!(c.poll(now), server_frame(0xA, b"abc"));
}

#[test]
fn poll_timeout_is_two_intervals_and_a_millisecond_after_the_last_heartbeat() {
    // SQLite: no other node to look for (a shared store adds its poll
    // interval, tests/postgres_store.rs).
    let w = world(
        "official",
        Config::default().with(|c| {
            c.database = "file:poll-timeout?mode=memory".into();
        }),
    );
    let mut c = connect(&w, "");
    let t0 = w.svc.now_ms();
    c.poll(t0);
    assert_eq!(c.poll_timeout(), Some(t0 + 2 * 41_250 + 1));
    c.feed(&text(r#"{"op":"heartbeat"}"#), t0 + 80_000);
    assert_eq!(c.poll_timeout(), Some(t0 + 80_000 + 2 * 41_250 + 1), "the heartbeat moved it");
    let deadline = c.poll_timeout().unwrap();
    assert_eq!(
        c.poll(deadline),
        [server_frame(1, br#"{"op":"heartbeat_ack"}"#), close_frame(4009, "session_timeout")].concat()
    );
    assert!(c.is_closed());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rotation_wakes_the_host_which_then_sends_the_4004_close() {
    let w = world("official", Config::default());
    let woken = Arc::new(Mutex::new(Vec::<String>::new()));
    let w2 = woken.clone();
    w.svc.set_wake_hook(Some(Arc::new(move |b: &str| w2.lock().unwrap().push(b.to_string()))));
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    c.poll(now);
    let new_token =
        admin(&w.svc, SECRET, "rotateBotToken", json!({"bot_id": w.bot}))["token"].as_str().unwrap().to_string();
    assert_eq!(*woken.lock().unwrap(), vec![w.bot.clone()]);
    assert_eq!(c.poll(now), close_frame(4004, "authentication_failed"));
    assert!(c.is_closed());
    assert_eq!(w.svc.gateway_connections(&w.bot), 0);
    assert!(w.svc.accept_gateway(&upgrade(&new_token, ""), w.svc.now_ms()).connection.is_some());
}

/// Vectors always send a valid upgrade; these requests lack one.
#[test]
fn a_gateway_request_without_upgrade_is_426_after_status_and_before_after() {
    let w = world("official", Config::default());
    let plain = format!("GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\n\r\n", w.token);
    let r = w.svc.accept_gateway(plain.as_bytes(), w.svc.now_ms());
    assert_eq!(
        split(&r.response),
        (
            426,
            json!({"ok": false, "error_code": 426, "error": "upgrade_required",
        "description": "GET /bot/gateway needs a WebSocket upgrade (RFC 6455, version 13): connect with a WebSocket client"})
        )
    );
    // The plain entry point answers the same for a non-upgrade GET.
    assert_eq!(split(&w.svc.handle_request(plain.as_bytes())).0, 426);
    // The upgrade is checked before the after field, the bot's status before both.
    let bad_after = format!("GET /bot/gateway?after=x HTTP/1.1\r\nAuthorization: Bot {}\r\n\r\n", w.token);
    assert_eq!(split(&w.svc.accept_gateway(bad_after.as_bytes(), w.svc.now_ms()).response).0, 426);
    admin(&w.svc, SECRET, "updateBot", json!({"bot_id": w.bot, "status": "suspended"}));
    assert_eq!(split(&w.svc.accept_gateway(bad_after.as_bytes(), w.svc.now_ms()).response).0, 403);
    assert_eq!(w.svc.gateway_connections(&w.bot), 0, "a refused upgrade holds no slot");
}

#[test]
fn wake_hook_fires_once_per_committed_change_never_on_rollback() {
    let w = world("official", Config::default());
    let count = Arc::new(AtomicUsize::new(0));
    let c2 = count.clone();
    let bot = w.bot.clone();
    w.svc.set_wake_hook(Some(Arc::new(move |b: &str| {
        assert_eq!(b, bot);
        c2.fetch_add(1, Ordering::SeqCst);
    })));
    admin(&w.svc, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "one"}));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Refused: nothing committed, no wake-up.
    let (s, _) = call(
        &w.svc,
        "/admin/sendUserMessage",
        &format!("Admin {SECRET}"),
        json!({"user_id": w.user, "chat_id": w.chat, "text": ""}),
    );
    assert_eq!(s, 400);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // A change that does not concern the bot: no wake-up.
    let other = admin(&w.svc, SECRET, "createGroup", json!({"title": "humans", "member_ids": [w.user]}));
    admin(&w.svc, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": other["id"], "text": "hi"}));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // A batch is one commit: one wake-up for the bot.
    let reqs: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let b = json!({"user_id": w.user, "chat_id": w.chat, "text": format!("b{i}")}).to_string();
            format!("POST /admin/sendUserMessage HTTP/1.1\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}", b.len()).into_bytes()
        })
        .collect();
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let outs = common::batch(&w.svc, &refs);
    assert!(outs.iter().all(|o| o.starts_with(b"HTTP/1.1 200 ")));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn importing_a_database_closes_open_connections_with_4004() {
    // Export and import are SQLite's (a PostgreSQL store has pg_dump).
    let dir = common::TempDir::new("import-4004");
    let db = dir.0.join("g.db").to_string_lossy().into_owned();
    let w = world(
        "official",
        Config::default().with(|c| {
            c.database = db;
        }),
    );
    let image = w.svc.export_database().unwrap();
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    c.poll(now);
    w.svc.import_database(&image).unwrap();
    assert_eq!(c.poll(now), close_frame(4004, "authentication_failed"));
    // The same token still works against the imported state.
    assert!(w.svc.accept_gateway(&upgrade(&w.token, ""), w.svc.now_ms()).connection.is_some());
}

#[test]
fn close_reasons_are_reported_as_events() {
    let w = world("official", Config::default());
    let now = w.svc.now_ms();
    // The bot closes first: its code, and the close echoed.
    let mut c = connect(&w, "");
    c.poll(now);
    c.feed(&client_frame(true, 0x8, &1000u16.to_be_bytes()), now);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 1000, reason: CloseCode::ClosedByBot }));
    assert_eq!(c.poll(now), server_frame(0x8, &1000u16.to_be_bytes()));
    assert_eq!(w.svc.gateway_connections(&w.bot), 0, "the slot is free at once");
    // Broken framing (an unmasked client frame).
    let mut c = connect(&w, "");
    c.poll(now);
    c.feed(&[0x81, 0x02, b'h', b'i'], now);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 1002, reason: CloseCode::ProtocolError }));
    assert!(c.is_closed());
    // A close without a code: 1005.
    let mut c = connect(&w, "");
    c.poll(now);
    c.feed(&client_frame(true, 0x8, b""), now);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 1005, reason: CloseCode::ClosedByBot }));
    assert_eq!(c.poll_event(), None, "reported once");
}

#[test]
fn each_transmit_is_bounded_and_a_long_backlog_arrives_whole_and_in_order() {
    let w = world("official", Config::default());
    let body = "x".repeat(1000);
    let reqs: Vec<Vec<u8>> = (0..1500)
        .map(|_| {
            let b = json!({"user_id": w.user, "chat_id": w.chat, "text": body}).to_string();
            format!(
                "POST /admin/sendUserMessage HTTP/1.1\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            )
            .into_bytes()
        })
        .collect();
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    assert!(common::batch(&w.svc, &refs).iter().all(|o| o.starts_with(b"HTTP/1.1 200 ")));
    let mut c = connect(&w, "");
    let (mut all, mut calls) = (Vec::new(), 0);
    loop {
        let mut out = Vec::new();
        let n = c.poll_transmit(&mut out);
        assert_eq!(n, out.len());
        if n == 0 {
            break;
        }
        assert!(n < botspace::gateway::TRANSMIT_BATCH_BYTES + 2048, "one call appended {n} bytes");
        all.extend(out);
        calls += 1;
    }
    assert!(calls >= 6, "1.6 MB of events take several calls, took {calls}");
    let seqs: Vec<i64> = texts(&all)[1..].iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=1501).collect::<Vec<_>>());
}

#[test]
fn a_host_close_sends_its_frame_next_writes_the_ack_and_frees_the_slot() {
    let w = world("official", Config::default());
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    assert_eq!(texts(&c.poll(now)).len(), 2, "hello and bot_started");
    c.feed(&text(r#"{"op":"ack","seq":1}"#), now);
    // A code of the library's own is refused and changes nothing.
    assert!(!c.close(botspace::CloseCode::InvalidPayload));
    assert!(!c.is_closed());
    assert_eq!(c.poll_event(), None);
    // An event committed and not yet sent when the host closes is not sent.
    admin(&w.svc, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": "late"}));
    assert!(c.close(botspace::gateway::CLOSE_SLOW_CONSUMER));
    assert_eq!(w.svc.gateway_connections(&w.bot), 0, "the slot is free at once");
    assert_eq!(c.poll(now), close_frame(4008, "slow_consumer"));
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 4008, reason: botspace::CloseCode::SlowConsumer }));
    assert!(c.is_closed());
    assert!(!c.close(botspace::gateway::CLOSE_SERVER_SHUTDOWN), "an ended connection is not closed again");
    assert!(c.poll(now).is_empty());
    drop(c);
    // The ack fed before the close was written: the next session replays
    // from seq 2, the event the closed one never sent.
    let mut again = connect(&w, "");
    let t = texts(&again.poll(now));
    assert_eq!(t[0]["replay_from"], 2);
    assert_eq!(t[1]["seq"], 2);
    assert_eq!(t[1]["data"]["message"]["text"], "late");
}

// ---------------------------------------------------------------------------
// The output budget: a host that reports what it holds (`handle_unsent`).

/// Drains `c` as a host that has written everything before each call.
fn drain_reporting(c: &mut GatewayConnection, now: u64) -> Vec<u8> {
    let mut all = Vec::new();
    loop {
        c.handle_unsent(0, now);
        let mut out = Vec::new();
        if c.poll_transmit(&mut out) == 0 {
            return all;
        }
        all.extend(out);
    }
}

#[test]
fn pings_from_a_bot_that_reads_nothing_stop_at_the_reply_budget_and_none_is_lost() {
    use botspace::gateway::{OUTPUT_BUDGET, REPLY_BUDGET};
    // SQLite: the deadline asserted below is the heartbeat's alone (a
    // shared store adds its poll interval, tests/postgres_store.rs).
    let w = world(
        "official",
        Config::default().with(|c| {
            c.database = "file:reply-budget?mode=memory".into();
        }),
    );
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    assert_eq!(texts(&c.poll(now)).len(), 2, "hello and bot_started");
    // The host wrote those; from now on it writes nothing (the bot does
    // not read) and pulls after every read, as long as it is asked to read.
    c.handle_unsent(0, now);
    let ping = client_frame(true, 0x9, &[b'p'; 125]);
    let pong = server_frame(0xA, &[b'p'; 125]);
    let (mut fed, mut held) = (0, 0);
    while fed < 10_000 && c.wants_input() {
        c.handle_input(&ping.repeat(100), now);
        fed += 100;
        let mut out = Vec::new();
        while c.poll_transmit(&mut out) > 0 {}
        held += out.len();
        c.handle_unsent(held, now);
    }
    // Input stopped long before the 10 000 pings (1.3 MB): the host holds
    // its budget, at most a reply budget and two pongs past it (the one
    // that crossed the budget, and the one tungstenite had made).
    assert!(fed < 10_000, "all {fed} pings were taken");
    let reply_bound = REPLY_BUDGET + 2 * pong.len();
    assert!(held >= OUTPUT_BUDGET && held <= OUTPUT_BUDGET + reply_bound, "the host holds {held}");
    assert_eq!(held % pong.len(), 0);
    let mut out = Vec::new();
    assert_eq!(c.poll_transmit(&mut out), 0, "nothing more while the host holds its budget");
    assert!(!c.wants_input() && !c.wants_transmit());
    // A host that reads anyway: the bytes wait, unread (no pong is made).
    c.handle_input(&ping.repeat(1000), now);
    fed += 1000;
    assert_eq!(c.poll_transmit(&mut out), 0);
    assert!(!c.wants_input());
    // The bot reads everything: the replies held come first, then the
    // waiting pings are answered, one pong each, none lost.
    c.handle_unsent(0, now);
    assert!(c.wants_transmit());
    let first = c.poll_transmit(&mut out);
    assert!(first >= REPLY_BUDGET && first <= reply_bound, "replies held: {first}");
    let mut rest = drain_reporting(&mut c, now);
    while c.wants_input() && fed < 12_000 {
        c.handle_input(&ping.repeat(100), now);
        fed += 100;
        rest.extend(drain_reporting(&mut c, now));
    }
    let answered = (held + out.len() + rest.len()) / pong.len();
    assert_eq!(answered, fed);
    assert!(frames(&out).iter().chain(frames(&rest).iter()).all(|(op, p)| *op == 0xA && p[..] == [b'p'; 125]));
    assert!(!c.is_closed());
}

#[test]
fn heartbeats_from_a_bot_that_reads_nothing_are_taken_until_their_acks_fill_the_reply_budget() {
    use botspace::gateway::{OUTPUT_BUDGET, REPLY_BUDGET};
    // SQLite: the deadline asserted below is the heartbeat's alone (a
    // shared store adds its poll interval, tests/postgres_store.rs).
    let w = world(
        "official",
        Config::default().with(|c| {
            c.database = "file:reply-budget?mode=memory".into();
        }),
    );
    let mut c = connect(&w, "");
    let now = w.svc.now_ms();
    assert_eq!(texts(&c.poll(now)).len(), 2);
    // The host holds a whole budget the bot has not read.
    c.handle_unsent(OUTPUT_BUDGET, now);
    c.handle_input(&text(r#"{"op":"heartbeat"}"#).repeat(5000), now + 1000);
    assert!(!c.wants_input());
    let mut out = Vec::new();
    assert_eq!(c.poll_transmit(&mut out), 0);
    // Taken up to the reply budget: that many acks (22 bytes each) wait.
    c.handle_unsent(0, now + 1000);
    c.poll_transmit(&mut out);
    let ack = r#"{"op":"heartbeat_ack"}"#;
    assert_eq!(texts(&out).len(), REPLY_BUDGET.div_ceil(ack.len()));
    assert!(texts(&out).iter().all(|t| *t == json!({"op": "heartbeat_ack"})));
    // The rest are answered once the bot reads, none lost.
    let rest = drain_reporting(&mut c, now + 1000);
    assert_eq!(texts(&out).len() + texts(&rest).len(), 5000);
    // They counted as heartbeats: the deadline is two intervals after them.
    assert_eq!(c.poll_timeout(), Some(now + 1000 + 2 * 41_250 + 1));
}

#[test]
fn output_over_the_budget_for_two_heartbeat_intervals_closes_with_4008() {
    use botspace::gateway::OUTPUT_BUDGET;
    let slow = 2 * 41_250;
    // SQLite: the deadline asserted below is the slow consumer's alone (a
    // shared store adds its poll interval, tests/postgres_store.rs).
    let w = world(
        "free",
        Config::default().with(|c| {
            c.database = "file:output-budget?mode=memory".into();
        }),
    );
    let mut c = connect(&w, "");
    let t0 = w.svc.now_ms();
    assert_eq!(texts(&c.poll(t0)).len(), 2);
    c.handle_unsent(OUTPUT_BUDGET, t0);
    // Under the budget again for a while: the time over starts anew.
    c.handle_unsent(OUTPUT_BUDGET - 1, t0 + 10_000);
    c.handle_unsent(OUTPUT_BUDGET, t0 + 20_000);
    // A heartbeat keeps the session past two intervals of the connect;
    // the pings after it are taken up to the reply budget, the rest wait.
    let ping = client_frame(true, 0x9, &[b'p'; 125]);
    let mut input = text(r#"{"op":"heartbeat"}"#);
    input.extend(ping.repeat(1000));
    c.handle_input(&input, t0 + 60_000);
    assert!(!c.wants_input());
    assert_eq!(c.poll_timeout(), Some(t0 + 20_000 + slow + 1));
    c.handle_timeout(t0 + 20_000 + slow);
    let mut out = Vec::new();
    assert_eq!(c.poll_transmit(&mut out), 0, "the host still holds its budget");
    assert_eq!(c.poll_event(), None);
    assert_eq!(w.svc.gateway_connections(&w.bot), 1);
    c.handle_timeout(t0 + 20_000 + slow + 1);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 4008, reason: CloseCode::SlowConsumer }));
    assert_eq!(w.svc.gateway_connections(&w.bot), 0, "the slot is free at once");
    // The close frame is given whatever the host holds, after the pongs
    // held (a reply budget of them) and ahead of the heartbeat ack that
    // was queued (dropped: the bot reconnects from its ack); the pings
    // left are not answered.
    while c.poll_transmit(&mut out) > 0 {}
    let f = frames(&out);
    let (close, pongs) = f.split_last().unwrap();
    assert_eq!(*close, (0x8, close_frame(4008, "slow_consumer")[2..].to_vec()));
    assert!(pongs.iter().all(|(op, _)| *op == 0xA));
    let reply_budget = botspace::gateway::REPLY_BUDGET;
    assert!(pongs.len() * 127 >= reply_budget && pongs.len() * 127 <= reply_budget + 2 * 127, "{}", pongs.len());
    assert!(c.is_closed());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn with_both_deadlines_passed_a_silent_bot_gets_4009_and_one_that_heartbeated_4008() {
    use botspace::gateway::OUTPUT_BUDGET;
    let w = world("official", Config::default());
    let slow = 2 * 41_250;
    let t0 = w.svc.now_ms();
    // Silent since it connected, its output over the budget since then:
    // the same instant, and it never heartbeated: 4009.
    let mut c = connect(&w, "");
    c.poll(t0);
    c.handle_unsent(OUTPUT_BUDGET, t0);
    c.handle_timeout(t0 + slow + 1);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 4009, reason: CloseCode::SessionTimeout }));
    // Its output over the budget before it went silent: 4008.
    let mut c = connect(&w, "");
    c.poll(t0);
    c.handle_unsent(OUTPUT_BUDGET, t0);
    c.feed(&text(r#"{"op":"heartbeat"}"#), t0 + 1);
    c.handle_timeout(t0 + 1 + slow + 1);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 4008, reason: CloseCode::SlowConsumer }));
    // A heartbeat at the instant it went over: alive, not reading: 4008.
    let mut c = connect(&w, "");
    c.poll(t0);
    c.feed(&text(r#"{"op":"heartbeat"}"#), t0);
    c.handle_unsent(OUTPUT_BUDGET, t0);
    c.handle_timeout(t0 + slow + 1);
    assert_eq!(c.poll_event(), Some(GatewayEvent::Closed { code: 4008, reason: CloseCode::SlowConsumer }));
}
