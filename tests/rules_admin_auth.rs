//! Failed admin authentication is throttled per peer when the host names
//! the peer (`Service::handle_request_from`).

mod common;

use botspace::{ClockKind, Config, Service};
use common::{admin_request, split};
use serde_json::json;

const SECRET: &str = "throttle-admin-secret-1";

#[test]
fn ten_failures_then_the_peer_waits_whatever_it_sends_and_other_peers_do_not() {
    let svc = Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.database = common::test_database();
    }))
    .unwrap();
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    let right = admin_request(SECRET, "getStats", json!({}));
    for i in 0..10 {
        let (status, v) = split(&svc.handle_request_from(&wrong, "203.0.113.7"));
        assert_eq!((status, v["error"].as_str()), (401, Some("invalid_token")), "attempt {i}");
    }
    let throttled = json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": "too many requests; retry after 6 s",
        "parameters": {"retry_after": 6, "retry_after_ms": 6000, "scope": "admin_auth"}});
    // Even the right secret is refused now: a right guess must look like a wrong one.
    assert_eq!(split(&svc.handle_request_from(&right, "203.0.113.7")), (429, throttled.clone()));
    assert_eq!(split(&svc.handle_request_from(&wrong, "203.0.113.7")), (429, throttled));
    // Another peer, and bot methods of this one, are not affected.
    assert_eq!(split(&svc.handle_request_from(&right, "198.51.100.1")).0, 200);
    let get_me = common::request("/bot/getMe", "Bot nope", "", b"");
    assert_eq!(split(&svc.handle_request_from(&get_me, "203.0.113.7")).0, 401);
    // One more attempt per 6 s.
    svc.handle_request(&admin_request(SECRET, "advanceClock", json!({"seconds": 6})));
    assert_eq!(split(&svc.handle_request_from(&right, "203.0.113.7")).0, 200);
    // A success does not refill: the next failure empties the bucket again.
    assert_eq!(split(&svc.handle_request_from(&wrong, "203.0.113.7")).0, 401);
    assert_eq!(split(&svc.handle_request_from(&right, "203.0.113.7")).0, 429);
}

#[test]
fn without_a_peer_nothing_is_throttled() {
    let svc = Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
    }))
    .unwrap();
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    for _ in 0..20 {
        assert_eq!(split(&svc.handle_request(&wrong)).0, 401);
    }
    assert_eq!(split(&svc.handle_request(&admin_request(SECRET, "getStats", json!({})))).0, 200);
}
