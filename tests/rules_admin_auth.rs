//! Admin logins are throttled per client when the host names the peer
//! (`Service::handle` with `Incoming::from_peer`): per address and per /24 or /64, never
//! forgetting a guesser, and behind `trusted_proxies` per forwarded client.

mod common;

use botspace::{ClockKind, Config, Service};
use common::{admin_request, split};
use serde_json::json;

const SECRET: &str = "throttle-admin-secret-1";

/// A service on the manual clock, with the test database.
fn service() -> Service {
    Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.database = common::test_database();
    }))
    .unwrap()
}

#[test]
fn ten_failures_then_the_peer_waits_whatever_it_sends_and_other_peers_do_not() {
    let svc = service();
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    let right = admin_request(SECRET, "getStats", json!({}));
    for i in 0..10 {
        let (status, v) = split(&common::from_peer(&svc, &wrong, "203.0.113.7"));
        assert_eq!((status, v["error"].as_str()), (401, Some("invalid_token")), "attempt {i}");
    }
    let throttled = json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": "too many requests; retry after 6 s",
        "parameters": {"retry_after": 6, "retry_after_ms": 6000, "scope": "admin_auth"}});
    // Even the right secret is refused now: a right guess must look like a wrong one.
    assert_eq!(split(&common::from_peer(&svc, &right, "203.0.113.7")), (429, throttled.clone()));
    assert_eq!(split(&common::from_peer(&svc, &wrong, "203.0.113.7")), (429, throttled));
    // Another peer, and bot methods of this one, are not affected.
    assert_eq!(split(&common::from_peer(&svc, &right, "198.51.100.1")).0, 200);
    let get_me = common::request("/bot/getMe", "Bot nope", "", b"");
    assert_eq!(split(&common::from_peer(&svc, &get_me, "203.0.113.7")).0, 401);
    // One more attempt per 6 s.
    svc.handle_request(&admin_request(SECRET, "advanceClock", json!({"seconds": 6})));
    assert_eq!(split(&common::from_peer(&svc, &right, "203.0.113.7")).0, 200);
    // A success does not refill: the next failure empties the bucket again.
    assert_eq!(split(&common::from_peer(&svc, &wrong, "203.0.113.7")).0, 401);
    assert_eq!(split(&common::from_peer(&svc, &right, "203.0.113.7")).0, 429);
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

fn open_with(trusted_proxies: &[&str]) -> Service {
    Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.database = common::test_database();
        c.trusted_proxies = trusted_proxies.iter().map(|s| s.to_string()).collect();
    }))
    .unwrap()
}

/// An admin request carrying `headers` (each `Name: value\r\n`).
fn admin_with(secret: &str, method: &str, headers: &str) -> Vec<u8> {
    common::request(&format!("/admin/{method}"), &format!("Admin {secret}"), headers, b"{}")
}

fn throttled_for(secs: u64) -> serde_json::Value {
    json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": format!("too many requests; retry after {secs} s"),
        "parameters": {"retry_after": secs, "retry_after_ms": secs * 1000, "scope": "admin_auth"}})
}

#[test]
fn a_throttled_client_is_refused_before_its_credential_is_read() {
    let svc = open_with(&[]);
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    for _ in 0..10 {
        assert_eq!(split(&common::from_peer(&svc, &wrong, "203.0.113.7")).0, 401);
    }
    // No credential, a malformed one, the right one, the wrong one: one
    // answer, so a 429 says nothing about the secret.
    let none =
        b"POST /admin/getStats HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec();
    let malformed = common::request("/admin/getStats", "Basic Zm9v", "", b"{}");
    let right = admin_request(SECRET, "getStats", json!({}));
    for req in [&none, &malformed, &right, &wrong] {
        assert_eq!(common::from_peer(&svc, req, "203.0.113.7"), common::from_peer(&svc, &wrong, "203.0.113.7"));
        assert_eq!(split(&common::from_peer(&svc, req, "203.0.113.7")), (429, throttled_for(6)));
    }
}

/// The spray: a guesser fails 10 times, then 20 000 clients (10 000 IPv4
/// /24s, 10 000 IPv6 /64s, each its own network) send one wrong secret
/// each, at one instant. The global bound checks 200 wrong secrets at once
/// (the guesser's 10 among them) and refuses the rest unread; the guesser
/// stays refused; an operator who logged in before the spray is still
/// checked; a brand-new address waits for the next global token (75 ms).
#[test]
fn a_spray_over_twenty_thousand_networks_is_checked_200_times_and_the_operator_still_gets_in() {
    let svc = open_with(&[]);
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    let right = admin_request(SECRET, "getStats", json!({}));
    assert_eq!(split(&common::from_peer(&svc, &right, "203.0.113.1")).0, 200, "the operator, before the spray");
    for _ in 0..10 {
        assert_eq!(split(&common::from_peer(&svc, &wrong, "198.51.100.7")).0, 401);
    }
    let spray_wait = json!({"ok": false, "error_code": 429, "error": "rate_limited",
        "description": "too many requests; retry after 1 s",
        "parameters": {"retry_after": 1, "retry_after_ms": 75, "scope": "admin_auth"}});
    let (mut checked, mut refused) = (0, 0);
    for i in 0..20_000u32 {
        let peer = if i < 10_000 {
            format!("10.{}.{}.1", i / 256, i % 256)
        } else {
            format!("2001:db8:{:x}:{:x}::1", i / 65_536, i % 65_536)
        };
        match split(&common::from_peer(&svc, &wrong, &peer)) {
            (401, v) => {
                assert_eq!(v["error"], "invalid_token");
                checked += 1;
            }
            (429, v) => {
                assert_eq!(v, spray_wait, "{peer}");
                refused += 1;
            }
            other => panic!("{peer}: {other:?}"),
        }
    }
    assert_eq!((checked, refused), (190, 19_810));
    // The guesser: its own wait, the right secret unread.
    assert_eq!(split(&common::from_peer(&svc, &right, "198.51.100.7")), (429, throttled_for(6)));
    // A brand-new address with the right secret meets the spray's wait.
    assert_eq!(split(&common::from_peer(&svc, &right, "192.0.2.200")), (429, spray_wait));
    // The operator is checked (and moves the clock 75 ms on)...
    let tick = admin_request(SECRET, "advanceClock", json!({"seconds": 0.075}));
    assert_eq!(split(&common::from_peer(&svc, &tick, "203.0.113.1")).0, 200);
    // ...and then the newcomer has a token.
    assert_eq!(split(&common::from_peer(&svc, &right, "192.0.2.200")).0, 200);
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_throttle() {
    let svc = open_with(&["10.0.0.0/8"]);
    let from = |secret: &str, xff: &str, peer: &str| {
        let headers = if xff.is_empty() { String::new() } else { format!("X-Forwarded-For: {xff}\r\n") };
        split(&common::from_peer(&svc, &admin_with(secret, "getStats", &headers), peer))
    };
    let wrong = "not-the-secret-at-all";
    for i in 0..10 {
        assert_eq!(from(wrong, "203.0.113.7", "10.0.0.5").0, 401, "attempt {i}");
    }
    assert_eq!(from(SECRET, "203.0.113.7", "10.0.0.5"), (429, throttled_for(6)));
    // Another client behind the same proxy gets in; so does the proxy's own.
    assert_eq!(from(SECRET, "198.51.100.9", "10.0.0.5").0, 200);
    assert_eq!(from(SECRET, "", "10.0.0.5").0, 200);
    // Naming another client in front of its own address does not help.
    assert_eq!(from(SECRET, "198.51.100.9, 203.0.113.7", "10.0.0.5"), (429, throttled_for(6)));
    // The Forwarded header works alike.
    let fwd = admin_with(SECRET, "getStats", "Forwarded: for=203.0.113.7;proto=https\r\n");
    assert_eq!(split(&common::from_peer(&svc, &fwd, "10.0.0.5")), (429, throttled_for(6)));
    // A peer that is no trusted proxy is its own client, whatever it claims.
    for _ in 0..10 {
        assert_eq!(from(wrong, "198.51.100.9", "192.0.2.1").0, 401);
    }
    assert_eq!(from(SECRET, "198.51.100.9", "192.0.2.1"), (429, throttled_for(6)));
    assert_eq!(from(SECRET, "198.51.100.9", "10.0.0.5").0, 200);
    // The audit log names the forwarded client.
    let user = common::request(
        "/admin/createUser",
        &format!("Admin {SECRET}"),
        "X-Forwarded-For: 198.51.100.9\r\n",
        br#"{"display_name":"U","handle":"u_forwarded"}"#,
    );
    assert_eq!(split(&common::from_peer(&svc, &user, "10.0.0.5")).0, 200);
    let log = split(&svc.handle_request(&admin_request(SECRET, "getAuditLog", json!({}))));
    assert_eq!(log.1["result"]["entries"][0]["peer"], "198.51.100.9", "{log:?}");
}

#[test]
fn trusted_proxies_that_are_not_blocks_refuse_to_open() {
    let opened = Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.trusted_proxies = vec!["10.0.0.0/8".into(), "proxy.internal".into()];
    }));
    let Err(e) = opened else { panic!("opened with a trusted proxy that is not a block") };
    assert_eq!(e.to_string(), r#"trusted_proxies: "proxy.internal" is not an IP address or CIDR block"#);
}

/// `botspace_commit_batch_size`'s count and sum: how many batches committed
/// and how many requests they held.
fn batches(svc: &Service) -> (u64, u64) {
    let req = format!("GET /admin/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Admin {SECRET}\r\n\r\n");
    let resp = String::from_utf8(svc.handle_request(req.as_bytes())).unwrap();
    let text = resp.split_once("\r\n\r\n").unwrap().1.to_string();
    let read = |name: &str| -> u64 {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    (read("botspace_commit_batch_size_count "), read("botspace_commit_batch_size_sum "))
}

/// Host calls with their clients in one slice of `handle` (the C server's
/// round gives each its peer) pass their doors one by one: a throttled
/// client is refused in place and writes nothing; the admitted ones commit
/// as one batch, each audited with its own client.
#[test]
fn host_calls_in_one_slice_commit_together_each_audited_with_its_client() {
    let svc = service();
    let wrong = admin_request("not-the-secret-at-all", "getStats", json!({}));
    for _ in 0..10 {
        assert_eq!(split(&common::from_peer(&svc, &wrong, "203.0.113.7")).0, 401);
    }
    let ann = admin_request(SECRET, "createUser", json!({"display_name": "Ann"}));
    let bob = admin_request(SECRET, "createUser", json!({"display_name": "Bob"}));
    let cy = admin_request(SECRET, "createUser", json!({"display_name": "Cy"}));
    let (count, sum) = batches(&svc);
    let answers: Vec<(u16, serde_json::Value)> = svc
        .handle(
            &[
                botspace::Incoming::bytes(&ann).from_peer("198.51.100.1"),
                botspace::Incoming::bytes(&bob).from_peer("203.0.113.7"),
                botspace::Incoming::bytes(&cy).from_peer("198.51.100.2"),
            ],
            svc.now_ms(),
        )
        .into_iter()
        .map(|a| split(&a.now_or_failed(&svc)))
        .collect();
    assert_eq!(answers[0].0, 200, "{}", answers[0].1);
    assert_eq!(answers[0].1["result"]["display_name"], "Ann");
    assert_eq!(
        answers[1],
        (
            429,
            json!({"ok": false, "error_code": 429, "error": "rate_limited",
                "description": "too many requests; retry after 6 s",
                "parameters": {"retry_after": 6, "retry_after_ms": 6000, "scope": "admin_auth"}})
        )
    );
    assert_eq!(answers[2].0, 200, "{}", answers[2].1);
    assert_eq!(answers[2].1["result"]["display_name"], "Cy");
    // Ann and Cy: one batch of two, one commit.
    assert_eq!(batches(&svc), (count + 1, sum + 2));
    let log = split(&svc.handle_request(&admin_request(SECRET, "getAuditLog", json!({})))).1;
    let created: Vec<(String, String)> = log["result"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "createUser")
        .map(|e| {
            (
                e["peer"].as_str().unwrap_or("").to_string(),
                e["detail"]["display_name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let mut created = created;
    created.sort();
    assert_eq!(
        created,
        vec![("198.51.100.1".to_string(), "Ann".to_string()), ("198.51.100.2".to_string(), "Cy".to_string())]
    );
    let users = split(&svc.handle_request(&admin_request(SECRET, "listUsers", json!({})))).1;
    let names: Vec<&str> =
        users["result"]["users"].as_array().unwrap().iter().filter_map(|u| u["display_name"].as_str()).collect();
    assert!(!names.contains(&"Bob"), "the refused call wrote nothing: {names:?}");
}
