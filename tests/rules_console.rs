//! The admin console's host methods and pages: the audit log records every
//! change with its peer and never a token or the secret, survives a
//! restart, and records nothing for a refused request; reading never
//! confirms the host's getUpdates stream; the page is served without
//! authentication, even to a throttled peer. Runs on both stores
//! (scripts/test-postgres.sh).

mod common;

use botspace::{ClockKind, Config, Service};
use common::{admin, admin_request, split};
use serde_json::{json, Value};

const SECRET: &str = "console-rules-secret-01";
const PEER: &str = "203.0.113.7";

fn open(database: &str) -> Service {
    Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.database = database.into();
        c.operational_key = Some([7; 32]);
    }))
    .unwrap()
}

/// An admin call from `PEER` that must answer 200: its result.
fn from_peer(svc: &Service, method: &str, body: Value) -> Value {
    let (status, v) = split(&common::from_peer(svc, &admin_request(SECRET, method, body.clone()), PEER));
    assert_eq!(status, 200, "{method} {body}: {v}");
    v["result"].clone()
}

#[test]
fn the_audit_log_names_the_peer_and_holds_no_token_or_secret() {
    let svc = open(&common::test_database());
    let created = from_peer(&svc, "createBot", json!({"display_name": "Ops", "handle": "ops", "official": true}));
    let bot = created["bot"]["id"].as_str().unwrap().to_string();
    let rotated = from_peer(&svc, "rotateBotToken", json!({"bot_id": bot}));
    let op = from_peer(&svc, "getOperationalToken", json!({"bot_id": bot}));
    assert_eq!(op["token"], rotated["token"]);
    // A wrong secret and a refused change write no entry.
    let wrong = admin_request("not-the-secret-at-all", "updateBot", json!({"bot_id": bot, "status": "suspended"}));
    assert_eq!(split(&common::from_peer(&svc, &wrong, PEER)).0, 401);
    let (status, v) = split(&common::from_peer(
        &svc,
        &admin_request(SECRET, "updateBot", json!({"bot_id": bot, "status": "gone"})),
        PEER,
    ));
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_field")));
    // A host that names no peer is recorded without one.
    admin(&svc, SECRET, "updateBot", json!({"bot_id": bot, "verified": true}));

    let log = admin(&svc, SECRET, "getAuditLog", json!({}));
    let t = 1_767_225_600i64;
    let entry = |id: i64, method: &str, peer: Value, detail: Value| {
        json!({"id": id, "date": t, "at_ms": t * 1000, "method": method, "target": bot, "actor": "admin",
               "peer": peer, "detail": detail})
    };
    assert_eq!(
        log,
        json!({"entries": [
            entry(4, "updateBot", Value::Null, json!({"bot_id": bot, "verified": true})),
            entry(3, "getOperationalToken", json!(PEER), json!({"bot_id": bot})),
            entry(2, "rotateBotToken", json!(PEER), json!({"bot_id": bot})),
            entry(1, "createBot", json!(PEER), json!({"display_name": "Ops", "handle": "ops", "official": true})),
        ], "next_before": null})
    );
    let text = log.to_string();
    for secret in [created["token"].as_str().unwrap(), rotated["token"].as_str().unwrap(), SECRET] {
        assert!(!text.contains(secret));
    }
}

#[test]
fn the_audit_log_survives_a_restart() {
    let dir = common::TempDir::new("console-audit");
    let database = match std::env::var("BOTSPACE_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => common::test_database(),
        _ => dir.0.join("botspace.db").to_string_lossy().into_owned(),
    };
    let user = {
        let svc = open(&database);
        admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string()
    };
    let svc = open(&database);
    let log = admin(&svc, SECRET, "getAuditLog", json!({}));
    assert_eq!(log["entries"].as_array().unwrap().len(), 1);
    assert_eq!(log["entries"][0]["method"], "createUser");
    assert_eq!(log["entries"][0]["target"], user.as_str());
}

#[test]
fn reading_for_the_console_never_confirms_updates() {
    let svc = open(&common::test_database());
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].clone();
    let bot = admin(&svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b"}))["bot"]["id"].clone();
    let chat = admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].clone();
    admin(&svc, SECRET, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": "hi"}));
    let before = admin(&svc, SECRET, "getUpdates", json!({}));
    assert_eq!(before.as_array().unwrap().len(), 2, "{before}");
    for (method, body) in [
        ("listBots", json!({})),
        ("listUsers", json!({})),
        ("listChats", json!({"member_id": bot})),
        ("getBot", json!({"bot_id": bot})),
        ("getBotActivity", json!({"bot_id": bot})),
        ("getChatMembers", json!({"chat_id": chat})),
        ("getChatHistory", json!({"chat_id": chat})),
        ("getAuditLog", json!({})),
        ("getStats", json!({})),
    ] {
        admin(&svc, SECRET, method, body);
    }
    assert_eq!(admin(&svc, SECRET, "getUpdates", json!({})), before);
}

#[test]
fn the_console_page_needs_no_secret_and_a_throttled_peer_still_gets_it() {
    let svc = open(&common::test_database());
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    for _ in 0..11 {
        common::from_peer(&svc, &wrong, PEER);
    }
    assert_eq!(split(&common::from_peer(&svc, &wrong, PEER)).0, 429);
    let page = common::from_peer(&svc, b"GET /admin/console HTTP/1.1\r\nHost: x\r\n\r\n", PEER);
    let text = String::from_utf8(page).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"), "{text}");
    assert!(text.contains("<script src=\"/admin/console/app.js\" defer></script>"));
    // A batch (two requests or more; one alone is a request) serves no pages.
    let page = b"GET /admin/console HTTP/1.1\r\nHost: x\r\n\r\n".as_slice();
    let out = common::batch(&svc, &[page, page]);
    assert_eq!((split(&out[0]).0, split(&out[1]).0), (404, 404));
}

fn upgrade(token: &str) -> Vec<u8> {
    format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn get_bot_counts_open_gateway_sessions_and_on_postgres_every_nodes() {
    let db = common::test_database();
    let svc = open(&db);
    let created =
        admin(&svc, SECRET, "createBot", json!({"display_name": "G", "handle": "g", "quota_tier": "standard"}));
    let (bot, token) = (created["bot"]["id"].clone(), created["token"].as_str().unwrap().to_string());
    let live = |s: &Service| admin(s, SECRET, "getBot", json!({"bot_id": bot}))["live"].clone();
    assert_eq!(
        live(&svc),
        json!({"gateway_sessions": 0, "gateway_connection_limit": 4, "unacked_events": 0, "last_request_at": null})
    );
    let _one = svc.accept_gateway_session(&upgrade(&token), svc.now_ms()).unwrap();
    assert_eq!(live(&svc)["gateway_sessions"], 1);
    assert_eq!(admin(&svc, SECRET, "listBots", json!({}))["bots"][0]["live"]["gateway_sessions"], 1);
    if db.starts_with("postgres") {
        // Another node sees this node's session (leases), and its own.
        let other = open(&db);
        assert_eq!(live(&other)["gateway_sessions"], 1);
        let _two = other.accept_gateway_session(&upgrade(&token), other.now_ms()).unwrap();
        assert_eq!(live(&svc)["gateway_sessions"], 2);
        assert_eq!(live(&other)["gateway_sessions"], 2);
    }
}

#[test]
fn activity_counts_429s_by_code_and_only_sent_messages() {
    // The manual clock starts on a minute: everything below is in the last of the 60 slots.
    let last_slot = |n: u64| -> Vec<u64> { (0..60).map(|i| if i == 59 { n } else { 0 }).collect() };
    let svc = open(&common::test_database());
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].clone();
    let created = admin(&svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b"}));
    let (bot, token) = (created["bot"]["id"].clone(), created["token"].as_str().unwrap().to_string());
    let chat = admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].clone();
    // A free bot's private chat takes a burst of 5, then 429.
    let statuses: Vec<u16> = (0..7)
        .map(|i| common::bot_call(&svc, &token, "sendMessage", json!({"chat_id": chat, "text": format!("m{i}")})).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert_eq!(common::bot_call(&svc, "bot_not-a-token", "getMe", json!({})).0, 401);
    assert_eq!(
        admin(&svc, SECRET, "getBotActivity", json!({"bot_id": bot})),
        json!({"bot_id": bot, "window_s": 3600, "requests": 7, "refused": 2, "refusals": {"rate_limited": 2},
               "messages_sent": 5, "last_request_at": 1_767_225_600,
               "per_minute": {"start": 1_767_225_600 - 59 * 60, "requests": last_slot(7), "refused": last_slot(2),
                              "messages_sent": last_slot(5)}})
    );
    // An hour later the window is empty; the last request is still known.
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 3600}));
    assert_eq!(
        admin(&svc, SECRET, "getBotActivity", json!({"bot_id": bot})),
        json!({"bot_id": bot, "window_s": 3600, "requests": 0, "refused": 0, "refusals": {},
               "messages_sent": 0, "last_request_at": 1_767_225_600,
               "per_minute": {"start": 1_767_225_600 + 60, "requests": last_slot(0), "refused": last_slot(0),
                              "messages_sent": last_slot(0)}})
    );
}
