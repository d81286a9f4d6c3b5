//! The operations paths through the library's entry points, on the store
//! the suite runs on (`:memory:` here, PostgreSQL under
//! scripts/with-postgres.sh): `/healthz`, `/readyz` and the graceful stop,
//! `/admin/metrics` and its backlog gauges read from the store, and the
//! operations paths inside a host batch.

mod common;

use botspace::{Config, Service};
use common::{admin, bot_call, split, split_with_headers, test_database};
use serde_json::json;

const SECRET: &str = "rules-admin-secret-0001";

fn open() -> Service {
    let cfg = json!({"database": test_database(), "admin_secret": SECRET, "clock": "manual"});
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

fn get(path: &str, auth: Option<&str>) -> Vec<u8> {
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").into_bytes()
}

/// The exposition's samples, series text → value.
fn scrape(svc: &Service) -> Vec<(String, f64)> {
    let resp = svc.handle_request(&get("/admin/metrics", Some(&format!("Admin {SECRET}"))));
    let text = String::from_utf8(resp).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{head}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn sample(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(k, _)| k == series).map(|(_, v)| *v)
}

/// A user, an official bot and their started private chat: (token, chat, user).
fn world(svc: &Service) -> (String, String, String) {
    let user = admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}));
    let bot =
        admin(svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b_bot", "quota_tier": "official"}));
    let token = bot["token"].as_str().unwrap().to_string();
    let user_id = user["id"].as_str().unwrap().to_string();
    let chat =
        admin(svc, SECRET, "startBot", json!({"user_id": user_id, "bot_id": bot["bot"]["id"].as_str().unwrap()}));
    (token, chat["id"].as_str().unwrap().to_string(), user_id)
}

#[test]
fn healthz_and_readyz_answer_without_credentials_and_readyz_turns_503_at_the_stop() {
    let svc = open();
    assert_eq!(split(&svc.handle_request(&get("/healthz", None))), (200, json!({"ok": true})));
    assert_eq!(split(&svc.handle_request(&get("/readyz", None))), (200, json!({"ok": true})));
    let (status, headers, body) =
        split_with_headers(&svc.handle_request(b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    assert_eq!((status, body["error"].clone()), (405, json!("method_not_allowed")));
    assert!(headers.contains(&("allow".to_string(), "GET".to_string())), "{headers:?}");
    assert!(!svc.is_shutting_down());
    svc.begin_shutdown();
    assert!(svc.is_shutting_down());
    assert_eq!(
        split(&svc.handle_request(&get("/readyz", None))),
        (
            503,
            json!({"ok": false, "error_code": 503, "error": "shutting_down",
                   "description": "the service is stopping; send new requests to another node"})
        )
    );
    // Alive, and every other request still answered.
    assert_eq!(split(&svc.handle_request(&get("/healthz", None))), (200, json!({"ok": true})));
    assert_eq!(admin(&svc, SECRET, "getStats", json!({}))["bots"], json!(0));
    let samples = scrape(&svc);
    assert_eq!(sample(&samples, "botspace_shutting_down"), Some(1.0));
    assert_eq!(sample(&samples, "botspace_ready"), Some(0.0));
}

#[test]
fn the_metrics_need_the_host_credential() {
    let svc = open();
    let (status, body) = split(&svc.handle_request(&get("/admin/metrics", None)));
    assert_eq!((status, body["error"].clone()), (401, json!("missing_authorization")));
    let (status, body) = split(&svc.handle_request(&get("/admin/metrics", Some("Admin wrong-secret-0000000"))));
    assert_eq!((status, body["error"].clone()), (401, json!("invalid_token")));
    let (status, body) = split(&common::from_peer(&svc, &get("/admin/metrics", Some("Bot x")), "10.0.0.1"));
    assert_eq!((status, body["error"].clone()), (401, json!("missing_authorization")));
    // Through a peer (`Incoming::from_peer`) as well.
    let ok = common::from_peer(&svc, &get("/admin/metrics", Some(&format!("Admin {SECRET}"))), "10.0.0.1");
    assert!(ok.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

#[test]
fn the_counters_and_the_backlog_gauges_follow_the_requests() {
    let svc = open();
    let (token, chat, user) = world(&svc);
    for i in 0..5 {
        assert_eq!(bot_call(&svc, &token, "sendMessage", json!({"chat_id": chat, "text": format!("m{i}")})).0, 200);
    }
    assert_eq!(bot_call(&svc, &token, "sendMessage", json!({"chat_id": chat, "text": ""})).0, 400);
    for i in 0..3 {
        admin(&svc, SECRET, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": format!("u{i}")}));
    }
    let s = scrape(&svc);
    let n = |series: &str| sample(&s, series).unwrap_or_else(|| panic!("{series} missing: {s:?}"));
    assert_eq!(n(r#"botspace_requests_total{method="sendMessage",status="200",error="none"}"#), 5.0);
    assert_eq!(n(r#"botspace_requests_total{method="sendMessage",status="400",error="text_empty"}"#), 1.0);
    assert_eq!(n(r#"botspace_requests_total{method="sendUserMessage",status="200",error="none"}"#), 3.0);
    // Latency is timed for one request in 16 on each thread, its first
    // included: 33 getMe on a thread of their own give 3 observations.
    std::thread::scope(|t| {
        t.spawn(|| (0..33).for_each(|_| assert_eq!(bot_call(&svc, &token, "getMe", json!({})).0, 200)));
    });
    let s = scrape(&svc);
    let n = |series: &str| sample(&s, series).unwrap_or_else(|| panic!("{series} missing: {s:?}"));
    assert_eq!(n(r#"botspace_requests_total{method="getMe",status="200",error="none"}"#), 33.0);
    assert_eq!(n(r#"botspace_request_duration_seconds_count{method="getMe"}"#), 3.0);
    assert_eq!(n(r#"botspace_request_duration_seconds_bucket{method="getMe",le="+Inf"}"#), 3.0);
    // bot_started and the user's three messages, none acknowledged.
    assert_eq!(n("botspace_unacked_events"), 4.0);
    assert_eq!(n("botspace_unacked_events_max_per_bot"), 4.0);
    assert_eq!(n("botspace_oldest_unacked_event_age_seconds"), 0.0, "the manual clock has not moved");
    // Updates for the host: the chat start and every message, none confirmed.
    let updates = admin(&svc, SECRET, "getUpdates", json!({"limit": 100}));
    let listed = updates.as_array().unwrap().len() as f64;
    assert_eq!(n("botspace_host_updates_unconfirmed"), listed);
    assert_eq!(n("botspace_backlog_scrape_errors"), 0.0);
    assert_eq!(n("botspace_gateway_sessions"), 0.0);
    assert_eq!(n("botspace_ready"), 1.0);
    // One connection on SQLite, the pool's two on PostgreSQL: as many as
    // the batches the host may run at once.
    let connections = if svc.store_is_shared() { 2.0 } else { 1.0 };
    assert_eq!(n("botspace_database_connections"), connections);
    assert_eq!(svc.database_connections() as f64, connections);
    assert_eq!(svc.batch_threads() as f64, connections);
    // Time passes: the oldest event ages; the host confirms its updates.
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 90}));
    let last = updates.as_array().unwrap().last().unwrap()["update_id"].as_i64().unwrap();
    admin(&svc, SECRET, "getUpdates", json!({"offset": last + 1, "limit": 1}));
    let s = scrape(&svc);
    assert_eq!(sample(&s, "botspace_oldest_unacked_event_age_seconds"), Some(90.0));
    assert_eq!(sample(&s, "botspace_host_updates_unconfirmed"), Some(0.0));
}

#[test]
fn the_operations_paths_in_a_host_batch_are_answered_in_place() {
    let svc = open();
    let (token, chat, _) = world(&svc);
    let send = common::bot_request(&token, "sendMessage", json!({"chat_id": chat, "text": "in a batch"}));
    let ready = get("/readyz", None);
    let health = get("/healthz", None);
    let metrics = get("/admin/metrics", Some(&format!("Admin {SECRET}")));
    let out = common::batch(&svc, &[&ready, &send, &health, &metrics, &send]);
    assert_eq!(split(&out[0]), (200, json!({"ok": true})));
    assert_eq!(split(&out[1]).1["result"]["text"], json!("in a batch"));
    assert_eq!(split(&out[2]), (200, json!({"ok": true})));
    assert!(out[3].starts_with(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4"));
    assert_eq!(split(&out[4]).1["result"]["text"], json!("in a batch"));
    let s = scrape(&svc);
    assert_eq!(sample(&s, r#"botspace_requests_total{method="sendMessage",status="200",error="none"}"#), Some(2.0));
    assert_eq!(sample(&s, r#"botspace_requests_total{method="readyz",status="200",error="none"}"#), Some(1.0));
}

#[test]
fn rate_limit_refusals_are_counted_by_scope() {
    let svc = open();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}));
    let bot = admin(&svc, SECRET, "createBot", json!({"display_name": "F", "handle": "f_bot", "quota_tier": "free"}));
    let token = bot["token"].as_str().unwrap();
    let chat = admin(&svc, SECRET, "startBot", json!({"user_id": user["id"], "bot_id": bot["bot"]["id"]}));
    // A free bot's private chat: a burst of 5, then 429 with scope chat.
    let statuses: Vec<u16> = (0..7)
        .map(|i| bot_call(&svc, token, "sendMessage", json!({"chat_id": chat["id"], "text": format!("{i}")})).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    // A peer that keeps failing the host credential: 10 failures, then 429 admin_auth.
    let wrong = get("/admin/metrics", Some("Admin not-the-secret-000000"));
    let statuses: Vec<u16> = (0..12).map(|_| split(&common::from_peer(&svc, &wrong, "10.0.0.9")).0).collect();
    assert_eq!(statuses, [[401; 10].as_slice(), &[429, 429]].concat());
    let s = scrape(&svc);
    assert_eq!(sample(&s, r#"botspace_rate_limited_total{scope="chat"}"#), Some(2.0));
    assert_eq!(sample(&s, r#"botspace_rate_limited_total{scope="admin_auth"}"#), Some(2.0));
    assert_eq!(sample(&s, r#"botspace_rate_limited_total{scope="bot"}"#), Some(0.0));
    assert_eq!(sample(&s, r#"botspace_requests_total{method="metrics",status="429",error="rate_limited"}"#), Some(2.0));
}

#[test]
fn a_connection_timeout_counts_its_408_once_and_nothing_else() {
    use botspace::connection::http::{ConnectionOptions, Expired, HttpConnection};
    use botspace::connection::Listener;
    let svc = open();
    let count = |svc: &Service| sample(&scrape(svc), "botspace_request_timeouts_total");
    let before = count(&svc);
    let opts = ConnectionOptions { request_timeout_ms: 1_000, idle_timeout_ms: 5_000 };
    let mut conn = HttpConnection::new(Listener::All, opts, svc.request_framer(), 0);
    // Half a head, then nothing: at the request deadline, the 408.
    conn.handle_input(b"POST /bot/sendMessage HTTP/1.1\r\nHo", 10);
    assert!(conn.poll_request(10).is_none(), "not whole");
    assert_eq!(svc.handle_connection_timeout(&mut conn, 500), Expired::Nothing);
    assert_eq!(count(&svc), before);
    assert_eq!(conn.poll_timeout(), Some(1_011), "strictly after the timeout");
    assert_eq!(svc.handle_connection_timeout(&mut conn, 1_011), Expired::Request);
    let sent = String::from_utf8(conn.poll_transmit().to_vec()).unwrap();
    assert!(sent.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{sent}");
    assert!(sent.ends_with(
        r#"{"ok":false,"error_code":408,"error":"request_timeout","description":"the request did not arrive in time"}"#
    ));
    assert_eq!(count(&svc), before.map(|n| n + 1.0));
    // An idle connection closes uncounted.
    let mut idle = HttpConnection::new(Listener::All, opts, svc.request_framer(), 0);
    let at = idle.poll_timeout().unwrap();
    assert_eq!(svc.handle_connection_timeout(&mut idle, at), Expired::Idle);
    assert_eq!(count(&svc), before.map(|n| n + 1.0));
}
