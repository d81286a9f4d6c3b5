//! Webhooks end to end, over real TCP, against the example servers: every
//! delivery lands on a real receiver (`tests/webhooks/receiver.py`) that
//! verifies it with the Standard Webhooks project's own Python library.
//! The receiver fails in every way a receiver fails — 500, 429 with
//! `Retry-After`, a hang past the deadline, a redirect, down — and every
//! event still arrives, in order per chat, with stable ids; a server killed
//! mid-delivery resumes from the durable cursor; setWebhook refuses
//! what a bot must not make the server reach; and 12 bots × 90 chats
//! pointed at a receiver that never answers hold at most the server's cap
//! of outgoing connections while its clients are served.

mod webhooks;
#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use webhooks::*;
use wire::*;

servers! {
    deliveries_are_signed_verified_by_the_standard_webhooks_library_and_move_the_cursor,
    after_rotate_secret_receivers_on_the_old_and_the_new_secret_both_verify_until_delete_webhook,
    with_a_short_secret_overlap_both_signatures_come_until_it_ends_then_the_new_one_alone,
    a_failing_receiver_gets_every_event_in_order_per_chat_once_it_recovers,
    a_server_killed_mid_delivery_resumes_from_the_durable_cursor_with_the_same_ids,
    set_webhook_refuses_addresses_the_server_must_not_reach,
    an_answer_with_a_body_past_64_kib_counts_by_its_status,
    deliveries_over_https_reach_a_receiver_whose_certificate_chains_to_ssl_cert_file,
    a_receiver_whose_certificate_is_untrusted_or_for_another_name_gets_nothing_and_the_event_waits,
    ssl_cert_dir_names_the_trusted_roots_as_well,
    bots_pointed_at_a_receiver_that_never_answers_stay_under_the_cap_and_clients_are_served,
}

/// The header names of a delivery, sorted, as the receiver sees them.
const DELIVERY_HEADERS: [&str; 7] =
    ["content-length", "content-type", "host", "user-agent", "webhook-id", "webhook-signature", "webhook-timestamp"];

const ALLOW: [&str; 2] = ["--webhook-allow-http", "--webhook-allow-private-addresses"];

fn start(bin: &Path, db: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--db", db, "--admin-secret", SECRET];
    args.extend_from_slice(extra);
    Server::start_in_shell(&[], "true", &[], bin, &args)
}

/// A server that trusts only the roots in `ca` (a PEM file): the operator's
/// `SSL_CERT_FILE`, which both servers honour. No `--webhook-allow-http`:
/// only https is delivered to; loopback is allowed since the receiver is on it.
fn start_trusting(bin: &Path, ca: &Path) -> Server {
    start_with_roots(bin, "SSL_CERT_FILE", ca)
}

/// A server with `var` (`SSL_CERT_FILE` or `SSL_CERT_DIR`) set to `path`.
fn start_with_roots(bin: &Path, var: &str, path: &Path) -> Server {
    let args = ["--db", ":memory:", "--admin-secret", SECRET, "--webhook-allow-private-addresses"];
    Server::start_in_shell(&[], "true", &[(var, path.to_str().unwrap())], bin, &args)
}

fn set_webhook(srv: &Server, token: &str, body: &Value) -> Value {
    let r = srv.bot(token, "setWebhook", body);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["result"].clone()
}

fn info(srv: &Server, token: &str) -> Value {
    let r = srv.bot(token, "getWebhookInfo", &json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["result"].clone()
}

fn deliveries_are_signed_verified_by_the_standard_webhooks_library_and_move_the_cursor(bin: &Path) {
    let dir = temp_dir("webhooks-signed");
    let rx = Receiver::start(&dir, 0);
    let srv = start(bin, ":memory:", &ALLOW);
    let w = srv.world("standard");
    // Nothing set yet.
    assert_eq!(
        info(&srv, &w.token),
        json!({"url": "", "pending_update_count": 1, "max_connections": null, "allowed_updates": null,
               "last_error_date": null, "last_error_message": null, "next_attempt_date": null})
    );
    let set = set_webhook(&srv, &w.token, &json!({"url": rx.url()}));
    let secret = set["secret"].as_str().expect("a secret on the first setWebhook").to_string();
    assert_eq!(set, json!({"url": rx.url(), "secret": secret}));
    assert!(secret.starts_with("whsec_") && secret.len() == 6 + 44, "{secret}");
    rx.control(&json!({"secret": secret}));
    let m1 = srv.say(&w.user_id, &w.chat, "one");
    let m2 = srv.say(&w.user_id, &w.chat, "two");
    let seen = rx.wait_for(WAIT, "3 deliveries", |s| delivered(s).len() >= 3);
    assert_eq!(delivered(&seen), [1, 2, 3]);
    // Until the receiver had the secret it answered 503: those are retried.
    let seen: Vec<Value> = seen.into_iter().filter(answered_ok).collect();
    for e in &seen {
        assert_eq!(e["verified"], json!(true), "{e}");
        assert_eq!(e["content_type"], "application/json");
        assert_eq!(e["path"], "/hook");
        // The core's headers and the two a client library writes (Host,
        // Content-Length); nothing of the host's own (no Accept, Expect).
        assert_eq!(e["user_agent"], "botspace-webhooks");
        assert_eq!(e["header_names"], json!(DELIVERY_HEADERS), "{e}");
    }
    let ids: Vec<&str> = seen.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3].map(|n| format!("msg_{}_{n}", w.bot_id)));
    // The update is the gateway's event: update_id, type, data.
    assert_eq!(
        seen[0]["body"],
        json!({"update_id": 1, "type": "bot_started",
        "data": {"chat": {"id": w.chat, "type": "private"}, "user": w.user}})
    );
    assert_eq!(seen[1]["body"], json!({"update_id": 2, "type": "message_created", "data": {"message": m1}}));
    assert_eq!(seen[2]["body"], json!({"update_id": 3, "type": "message_created", "data": {"message": m2}}));
    // Acknowledged: nothing pending, and a gateway session starts after it.
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not move");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A delivery that came before the receiver had its secret was answered
    // 503 and retried: the last error says so, until then none.
    let mut now = info(&srv, &w.token);
    if rx.seen().iter().any(|e| e["step"] == "no secret") {
        assert!(now["last_error_date"].is_u64(), "{now}");
        assert_eq!(now["last_error_message"], "the receiver answered 503");
        now["last_error_date"] = Value::Null;
        now["last_error_message"] = Value::Null;
    }
    assert_eq!(
        now,
        json!({"url": rx.url(), "pending_update_count": 0, "max_connections": 40, "allowed_updates": null,
               "last_error_date": null, "last_error_message": null, "next_attempt_date": null})
    );
    let mut gw = srv.gateway(&w.token, "");
    assert_eq!(gw.hello()["replay_from"], 4);
    gw.close();
    // The same URL again keeps the secret; rotate_secret makes a new one.
    let again = set_webhook(
        &srv,
        &w.token,
        &json!({"url": rx.url(), "max_connections": 2,
        "allowed_updates": ["message_created", "message_created"]}),
    );
    assert_eq!(again, json!({"url": rx.url()}));
    assert_eq!(info(&srv, &w.token)["max_connections"], 2);
    assert_eq!(info(&srv, &w.token)["allowed_updates"], json!(["message_created"]));
    let rotated = set_webhook(&srv, &w.token, &json!({"url": rx.url(), "rotate_secret": true}));
    let new_secret = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    rx.control(&json!({"secret": new_secret}));
    srv.say(&w.user_id, &w.chat, "three");
    let seen = rx.wait_for(WAIT, "the 4th delivery", |s| delivered(s).len() >= 4);
    let last = seen.iter().rfind(|e| answered_ok(e)).unwrap();
    assert_eq!(last["verified"], json!(true), "signed with the rotated secret");
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not reach 4");
        std::thread::sleep(Duration::from_millis(20));
    }
    // deleteWebhook forgets it; events wait for another reader.
    let r = srv.bot(&w.token, "deleteWebhook", &json!({}));
    assert_eq!((r.status, r.body.clone()), (200, json!({"ok": true, "result": true})));
    let before = rx.seen().len();
    srv.say(&w.user_id, &w.chat, "four");
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(rx.seen().len(), before, "no delivery after deleteWebhook");
    assert_eq!(info(&srv, &w.token)["url"], "");
    assert_eq!(info(&srv, &w.token)["pending_update_count"], 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// Waits for update `n` answered 2xx and returns what the receiver recorded.
fn delivery_of(rx: &Receiver, n: i64) -> Value {
    let seen = rx.wait_for(WAIT, &format!("update {n}"), |s| delivered(s).contains(&n));
    seen.into_iter().rfind(|e| answered_ok(e) && e["body"]["update_id"] == n).unwrap()
}

/// A rotation without an outage: the server signs with the new and the old
/// secret (`webhook-signature: v1,<new> v1,<old>`) for
/// `webhook_secret_overlap_s` (a day here, the default; its end is
/// `tests/rules_webhooks.rs`'s, on a manual clock), so a receiver still on
/// the old secret and one already on the new both verify with the
/// Standard Webhooks library. deleteWebhook ends the overlap.
fn after_rotate_secret_receivers_on_the_old_and_the_new_secret_both_verify_until_delete_webhook(bin: &Path) {
    let dir = temp_dir("webhooks-rotate");
    let rx = Receiver::start(&dir, 0);
    let srv = start(bin, ":memory:", &ALLOW);
    let w = srv.world("standard");
    let first = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": first}));
    let e = delivery_of(&rx, 1);
    assert_eq!((e["verified"].clone(), e["signature"].as_str().unwrap().split(' ').count()), (json!(true), 1), "{e}");
    let rotated = set_webhook(&srv, &w.token, &json!({"url": rx.url(), "rotate_secret": true}));
    let second = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    // This receiver holds the new secret; another still holds the old one.
    rx.control(&json!({"secret": second, "others": [first]}));
    srv.say(&w.user_id, &w.chat, "during the overlap");
    let e = delivery_of(&rx, 2);
    assert_eq!((e["verified"].clone(), e["others_verified"].clone()), (json!(true), json!([true])), "{e}");
    let sig = e["signature"].as_str().unwrap();
    assert!(sig.split(' ').count() == 2 && sig.split(' ').all(|s| s.starts_with("v1,")), "{sig}");
    // A setWebhook without rotate_secret keeps the overlap going.
    assert_eq!(set_webhook(&srv, &w.token, &json!({"url": rx.url(), "max_connections": 3})), json!({"url": rx.url()}));
    srv.say(&w.user_id, &w.chat, "still overlapping");
    let e = delivery_of(&rx, 3);
    assert_eq!((e["verified"].clone(), e["others_verified"].clone()), (json!(true), json!([true])), "{e}");
    // deleteWebhook ends it: the next webhook's secret signs alone.
    let r = srv.bot(&w.token, "deleteWebhook", &json!({}));
    assert_eq!((r.status, r.body.clone()), (200, json!({"ok": true, "result": true})));
    let third = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": third, "others": [second, first]}));
    srv.say(&w.user_id, &w.chat, "after delete");
    let e = delivery_of(&rx, 4);
    assert_eq!(e["verified"], json!(true), "{e}");
    assert_eq!(e["signature"].as_str().unwrap().split(' ').count(), 1, "{e}");
    assert!(e["others_verified"].as_array().unwrap().iter().all(|v| v != &json!(true)), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--webhook-secret-overlap-s 3`: after a rotation, a delivery inside the
/// overlap carries both signatures, each verified by the Standard Webhooks
/// library with its own secret; once the overlap has ended, the new
/// secret's alone, which a receiver still on the old one refuses.
fn with_a_short_secret_overlap_both_signatures_come_until_it_ends_then_the_new_one_alone(bin: &Path) {
    const OVERLAP_S: f64 = 3.0;
    let dir = temp_dir("webhooks-overlap");
    let rx = Receiver::start(&dir, 0);
    let srv = start(bin, ":memory:", &[&ALLOW[..], &["--webhook-secret-overlap-s", "3"]].concat());
    let w = srv.world("standard");
    let first = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": first}));
    let e = delivery_of(&rx, 1);
    assert_eq!((e["verified"].clone(), e["signature"].as_str().unwrap().split(' ').count()), (json!(true), 1), "{e}");
    // The overlap starts when the server takes the rotation: after this
    // clock reading, before the answer's.
    let unix = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let asked = unix();
    let second = set_webhook(&srv, &w.token, &json!({"url": rx.url(), "rotate_secret": true}))["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let answered = unix();
    assert_ne!(second, first);
    rx.control(&json!({"secret": second, "others": [first]}));
    srv.say(&w.user_id, &w.chat, "inside the overlap");
    let e = delivery_of(&rx, 2);
    // The receiver's clock reading is after the signing.
    let after = e["at"].as_f64().unwrap() - asked;
    assert!(after < OVERLAP_S, "delivered {after:.2} s after the rotation: the test needs it inside the overlap");
    assert_eq!((e["verified"].clone(), e["others_verified"].clone()), (json!(true), json!([true])), "{e}");
    let sig = e["signature"].as_str().unwrap();
    assert!(sig.split(' ').count() == 2 && sig.split(' ').all(|s| s.starts_with("v1,")), "{sig}");
    // Past its end (measured from the answer, after the server's reading).
    std::thread::sleep(Duration::from_secs_f64((answered + OVERLAP_S + 0.2 - unix()).max(0.0)));
    srv.say(&w.user_id, &w.chat, "after the overlap");
    let e = delivery_of(&rx, 3);
    assert_eq!(e["verified"], json!(true), "{e}");
    assert_eq!(e["signature"].as_str().unwrap().split(' ').count(), 1, "{e}");
    assert!(e["others_verified"][0].is_string(), "the old secret no longer verifies: {e}");
    let _ = std::fs::remove_dir_all(dir);
}

fn a_failing_receiver_gets_every_event_in_order_per_chat_once_it_recovers(bin: &Path) {
    let dir = temp_dir("webhooks-failing");
    let mut rx = Receiver::start(&dir, 0);
    let srv = start(bin, ":memory:", &ALLOW);
    let w = srv.world("standard");
    // A second chat of the same bot.
    let bob = srv.admin("createUser", &json!({"display_name": "Bob"}));
    let bob_id = bob["id"].as_str().unwrap().to_string();
    let chat_b =
        srv.admin("startBot", &json!({"user_id": bob_id, "bot_id": w.bot_id}))["id"].as_str().unwrap().to_string();
    // The first three attempts fail, whatever they carry.
    rx.control(&json!({"script": ["500", "500", "429:1"]}));
    let secret = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": secret}));
    for i in 0..3 {
        srv.say(&w.user_id, &w.chat, &format!("a{i}"));
        srv.say(&bob_id, &chat_b, &format!("b{i}"));
    }
    // Events 1..=8: bot_started (chat A), bot_started (chat B), then a/b.
    let seen = rx.wait_for(Duration::from_secs(30), "8 deliveries", |s| delivered(s).len() >= 8);
    assert_per_chat_order(&seen);
    let info_now = info(&srv, &w.token);
    assert_eq!(info_now["last_error_message"], "the receiver answered 429", "{info_now}");
    // A receiver that hangs past the 10 s deadline.
    rx.control(&json!({"script": ["hang:12"]}));
    srv.say(&w.user_id, &w.chat, "slow");
    let seen = rx.wait_for(Duration::from_secs(30), "the hung event again", |s| delivered(s).contains(&9));
    let tries: Vec<&Value> = seen.iter().filter(|e| e["body"]["update_id"] == 9).collect();
    assert_eq!(tries.len(), 2, "{tries:#?}");
    assert_eq!(tries[0]["id"], tries[1]["id"], "the same webhook-id on a retry");
    let gap = tries[1]["at"].as_f64().unwrap() - tries[0]["at"].as_f64().unwrap();
    assert!(gap >= 10.0, "retried {gap} s after the first attempt, before its deadline");
    assert_eq!(info(&srv, &w.token)["last_error_message"], "no answer within 10 s");
    // A receiver that is down, then back on the same port.
    let port = rx.port;
    rx.stop();
    srv.say(&bob_id, &chat_b, "while down");
    let until = Instant::now() + WAIT;
    loop {
        let i = info(&srv, &w.token);
        let msg = i["last_error_message"].as_str().unwrap_or("").to_string();
        if msg.starts_with("could not connect") {
            assert!(i["next_attempt_date"].is_u64(), "{i}");
            break;
        }
        assert!(Instant::now() < until, "no failed connection recorded: {i}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rx = Receiver::start(&dir, port);
    rx.control(&json!({"secret": secret}));
    let seen = rx.wait_for(Duration::from_secs(30), "the event sent while down", |s| delivered(s).contains(&10));
    assert_per_chat_order(&seen);
    let mut all = delivered(&seen);
    all.sort();
    all.dedup();
    assert_eq!(all, (1..=10).collect::<Vec<_>>(), "every event arrived");
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not reach 10");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info(&srv, &w.token)["next_attempt_date"], Value::Null);
    // The metrics count every attempt the receiver saw, by result, and the
    // ones made while it was down.
    let m = |series: &str| metric(&srv, series);
    let seen = rx.seen();
    let count = |f: &dyn Fn(&Value) -> bool| seen.iter().filter(|e| f(e)).count() as f64;
    let unreachable = m(r#"botspace_webhook_attempts_total{result="unreachable"}"#);
    assert!(unreachable >= 1.0);
    assert_eq!(m(r#"botspace_webhook_attempts_total{result="delivered"}"#), count(&|e| answered_ok(e)));
    assert_eq!(m(r#"botspace_webhook_attempts_total{result="timed_out"}"#), count(&|e| e["step"] == "hang:12"));
    assert_eq!(
        m(r#"botspace_webhook_attempts_total{result="refused"}"#),
        count(&|e| !answered_ok(e) && e["step"] != "hang:12")
    );
    assert_eq!(m("botspace_webhook_retries_total"), seen.len() as f64 + unreachable - 10.0);
    assert_eq!(m("botspace_webhooks"), 1.0);
    assert_eq!(m("botspace_webhook_pending_events"), 0.0);
    assert_eq!(m("botspace_webhook_attempts_in_flight"), 0.0);
    let _ = std::fs::remove_dir_all(dir);
}

/// One series of `GET /admin/metrics`.
fn metric(srv: &Server, series: &str) -> f64 {
    let r = agent()
        .get(format!("{}/admin/metrics", srv.base))
        .header("Authorization", format!("Admin {SECRET}"))
        .call()
        .unwrap();
    let text = r.into_body().read_to_string().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} not in the exposition:\n{text}"))
        .parse()
        .unwrap()
}

fn a_server_killed_mid_delivery_resumes_from_the_durable_cursor_with_the_same_ids(bin: &Path) {
    let dir = temp_dir("webhooks-kill");
    let rx = Receiver::start(&dir, 0);
    let db = dir.join("botspace.db").to_string_lossy().into_owned();
    let srv = start(bin, &db, &ALLOW);
    let w = srv.world("standard");
    let secret = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": secret, "script": vec!["hang:0.3"; 40]}));
    for i in 0..20 {
        srv.say(&w.user_id, &w.chat, &format!("m{i}"));
    }
    rx.wait_for(WAIT, "a few deliveries", |s| delivered(s).len() >= 3);
    srv.signal("-KILL");
    drop(srv);
    let before = rx.seen();
    let srv = start(bin, &db, &ALLOW);
    let seen = rx.wait_for(Duration::from_secs(60), "all 21 events", |s| {
        let mut d = delivered(s);
        d.sort();
        d.dedup();
        d.len() == 21
    });
    assert!(seen.len() > before.len());
    assert_per_chat_order(&seen);
    for e in seen.iter().filter(|e| answered_ok(e)) {
        assert_eq!(e["verified"], json!(true), "the stored secret signs after the restart: {e}");
        let n = e["body"]["update_id"].as_i64().unwrap();
        assert_eq!(e["id"], format!("msg_{}_{n}", w.bot_id), "ids are stable across the restart");
    }
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not reach 21");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

fn set_webhook_refuses_addresses_the_server_must_not_reach(bin: &Path) {
    let dir = temp_dir("webhooks-ssrf");
    let mut rx = Receiver::start(&dir, 0);
    // The defaults: https only, public addresses only.
    let srv = start(bin, ":memory:", &[]);
    let w = srv.world("standard");
    let table = [
        ("https://127.0.0.1/hook", "a loopback address"),
        ("https://127.8.9.10:8443/", "a loopback address"),
        ("https://[::1]/hook", "a loopback address"),
        ("https://[::ffff:127.0.0.1]/hook", "a loopback address"),
        ("https://10.1.2.3/hook", "a private address"),
        ("https://192.168.0.1/hook", "a private address"),
        ("https://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("https://0.0.0.0/", "the unspecified address"),
        ("https://224.0.0.1/", "a multicast address"),
        // IPv6 forms that reach the IPv4 address inside them.
        ("https://[64:ff9b::127.0.0.1]/hook", "a loopback address"),
        ("https://[64:ff9b:1::a9fe:a9fe]/", "a link-local address"),
        ("https://[2002:a00:1::1]/hook", "a private address"),
        ("https://[::10.0.0.1]/hook", "a private address"),
        ("https://[2001:0:5db8:d70e::80ff:fffe]/hook", "a loopback address"),
    ];
    for (url, what) in table {
        let r = srv.bot(&w.token, "setWebhook", &json!({"url": url}));
        assert_eq!(r.status, 400, "{url}");
        assert_eq!(
            r.body,
            json!({"ok": false, "error_code": 400, "error": "webhook_address_forbidden",
                   "description": format!("the webhook URL points at {what}, which this server does not deliver to (a server started with --webhook-allow-private-addresses, or webhook_allow_private_addresses in its Config, delivers there)"),
                   "parameters": {"field": "url"}}),
            "{url}"
        );
    }
    let invalid = [
        (rx.url(), "must use https (a server started with --webhook-allow-http, or webhook_allow_http in its Config, also takes http)"),
        ("ftp://example.com/".into(), "must use https"),
        ("https://user:pw@example.com/".into(), "must not carry a user or password"),
        ("https://2130706433/".into(), "has no valid host"),
        ("example.com/hook".into(), "is not an absolute URL"),
        (format!("https://example.com/{}", "a".repeat(2048)), "is longer than 2048 characters"),
    ];
    for (url, why) in invalid {
        let r = srv.bot(&w.token, "setWebhook", &json!({"url": url}));
        assert_eq!(
            (r.status, r.body.clone()),
            (
                400,
                json!({"ok": false, "error_code": 400, "error": "invalid_webhook_url",
                         "description": format!("the webhook URL {why}"), "parameters": {"field": "url"}})
            ),
            "{url}"
        );
    }
    let r = srv.bot(&w.token, "setWebhook", &json!({"url": "https://example.com/", "max_connections": 0}));
    r.assert_error(400, "invalid_field");
    let r = srv.bot(&w.token, "setWebhook", &json!({"url": "https://example.com/", "allowed_updates": ["typing"]}));
    r.assert_error(400, "invalid_field");
    // Refused requests changed nothing.
    assert_eq!(info(&srv, &w.token)["url"], "");
    // A name is checked against what it resolves to, at each connection:
    // localhost is loopback, so nothing reaches the receiver on it.
    let url = format!("https://localhost:{}/hook", rx.port);
    set_webhook(&srv, &w.token, &json!({"url": url}));
    let until = Instant::now() + WAIT;
    loop {
        let i = info(&srv, &w.token);
        if i["last_error_message"]
            == "the host name resolves to a loopback address, which this server does not deliver to"
        {
            break;
        }
        assert!(Instant::now() < until, "no refusal recorded: {i}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(rx.seen().len(), 0, "nothing reached the receiver");
    drop(srv);
    // Redirects are not followed (with http and loopback allowed).
    let srv = start(bin, ":memory:", &ALLOW);
    let w = srv.world("standard");
    rx.control(&json!({"script": ["302"]}));
    let secret = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": secret}));
    let seen = rx.wait_for(WAIT, "the retry after the redirect", |s| delivered(s).contains(&1));
    assert!(seen.iter().all(|e| e.get("redirected").is_none()), "the redirect was followed: {seen:#?}");
    let steps: Vec<&str> = seen.iter().map(|e| e["step"].as_str().unwrap()).filter(|s| *s != "no secret").collect();
    assert_eq!(steps, ["302", "ok"]);
    assert_eq!(info(&srv, &w.token)["last_error_message"], "the receiver answered 302");
    rx.stop();
    let _ = std::fs::remove_dir_all(dir);
}

/// The answer's body is not used: a sender reads at most 64 KiB of it (the
/// C server stops the transfer there), and a 200 with a 1 MiB body is a
/// delivery like any other, not a failed connection retried.
fn an_answer_with_a_body_past_64_kib_counts_by_its_status(bin: &Path) {
    let dir = temp_dir("webhooks-big-answer");
    let rx = Receiver::start(&dir, 0);
    let srv = start(bin, ":memory:", &ALLOW);
    let w = srv.world("standard");
    rx.control(&json!({"script": ["big"]}));
    let secret = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": secret}));
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not move: {:#?}", rx.seen());
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = rx.seen();
    let steps: Vec<&str> = seen.iter().map(|e| e["step"].as_str().unwrap()).filter(|s| *s != "no secret").collect();
    assert_eq!(steps, ["big"], "delivered once, not retried");
    assert_eq!(delivered(&seen), [1]);
    // Only a delivery before the receiver had its secret may have failed.
    let i = info(&srv, &w.token);
    assert!(i["last_error_message"].is_null() || i["last_error_message"] == "the receiver answered 503", "{i}");
    let _ = std::fs::remove_dir_all(dir);
}

/// HTTPS end to end: a receiver serving a certificate for `localhost` (and
/// 127.0.0.1) issued by a throwaway CA, a server told to trust that CA by
/// `SSL_CERT_FILE`, and every delivery verified by the Standard Webhooks
/// library on the far side of the TLS connection.
fn deliveries_over_https_reach_a_receiver_whose_certificate_chains_to_ssl_cert_file(bin: &Path) {
    let dir = temp_dir("webhooks-https");
    let ca = TestCa::new(&dir, "ca");
    let (cert, key) = ca.issue("localhost", "DNS:localhost,IP:127.0.0.1");
    let rx = Receiver::start_tls(&dir, &cert, &key);
    let srv = start_trusting(bin, &ca.cert);
    let w = srv.world("standard");
    let url = format!("https://localhost:{}/hook", rx.port);
    assert_eq!(rx.url(), url);
    let set = set_webhook(&srv, &w.token, &json!({"url": url}));
    let secret = set["secret"].as_str().expect("a secret on the first setWebhook").to_string();
    assert_eq!(set, json!({"url": url, "secret": secret}));
    rx.control(&json!({"secret": secret}));
    let m1 = srv.say(&w.user_id, &w.chat, "over TLS");
    let seen = rx.wait_for(WAIT, "2 deliveries", |s| delivered(s).len() >= 2);
    assert_eq!(delivered(&seen), [1, 2]);
    // Until the receiver had the secret it answered 503: those are retried.
    let seen: Vec<Value> = seen.into_iter().filter(answered_ok).collect();
    for e in &seen {
        assert_eq!(e["verified"], json!(true), "{e}");
        assert_eq!(e["content_type"], "application/json");
        assert_eq!(e["path"], "/hook");
        // The core's headers and the two a client library writes (Host,
        // Content-Length); nothing of the host's own (no Accept, Expect).
        assert_eq!(e["user_agent"], "botspace-webhooks");
        assert_eq!(e["header_names"], json!(DELIVERY_HEADERS), "{e}");
    }
    let ids: Vec<&str> = seen.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [1, 2].map(|n| format!("msg_{}_{n}", w.bot_id)));
    assert_eq!(
        seen[0]["body"],
        json!({"update_id": 1, "type": "bot_started",
        "data": {"chat": {"id": w.chat, "type": "private"}, "user": w.user}})
    );
    assert_eq!(seen[1]["body"], json!({"update_id": 2, "type": "message_created", "data": {"message": m1}}));
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not move");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut now = info(&srv, &w.token);
    if rx.seen().iter().any(|e| e["step"] == "no secret") {
        assert_eq!(now["last_error_message"], "the receiver answered 503");
        now["last_error_date"] = Value::Null;
        now["last_error_message"] = Value::Null;
    }
    assert_eq!(
        now,
        json!({"url": url, "pending_update_count": 0, "max_connections": 40, "allowed_updates": null,
               "last_error_date": null, "last_error_message": null, "next_attempt_date": null})
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A certificate that does not chain to a trusted root, or that names
/// another host, is refused before any byte of the update is sent: the
/// receiver sees nothing, getWebhookInfo says "TLS failed: " (what follows
/// is the TLS library's own words, rustls's or OpenSSL's), the event stays
/// pending and is tried again, and it arrives once the URL points at a
/// receiver the server trusts.
fn a_receiver_whose_certificate_is_untrusted_or_for_another_name_gets_nothing_and_the_event_waits(bin: &Path) {
    let dir = temp_dir("webhooks-https-refused");
    let ca = TestCa::new(&dir, "ca");
    let (good_cert, good_key) = ca.issue("localhost", "DNS:localhost,IP:127.0.0.1");
    let (other_name_cert, other_name_key) = ca.issue("elsewhere", "DNS:elsewhere.example");
    // A CA the server was not told about, for the very name it connects to.
    let stranger = TestCa::new(&dir, "stranger");
    let (stranger_cert, stranger_key) = stranger.issue("localhost", "DNS:localhost,IP:127.0.0.1");
    let dirs = ["untrusted", "other-name", "good"].map(|d| {
        let d = dir.join(d);
        std::fs::create_dir_all(&d).unwrap();
        d
    });
    let untrusted = Receiver::start_tls(&dirs[0], &stranger_cert, &stranger_key);
    let other_name = Receiver::start_tls(&dirs[1], &other_name_cert, &other_name_key);
    let good = Receiver::start_tls(&dirs[2], &good_cert, &good_key);
    let srv = start_trusting(bin, &ca.cert);
    let w = srv.world("standard");
    let secret = set_webhook(&srv, &w.token, &json!({"url": untrusted.url()}))["secret"].as_str().unwrap().to_string();
    for rx in [&untrusted, &other_name, &good] {
        rx.control(&json!({"secret": secret}));
    }
    let unreachable = r#"botspace_webhook_attempts_total{result="unreachable"}"#;
    let mut tried = 0.0;
    for rx in [&untrusted, &other_name] {
        if rx.url() != info(&srv, &w.token)["url"] {
            set_webhook(&srv, &w.token, &json!({"url": rx.url()}));
        }
        // Two attempts on this URL (the first and its retry), both failed
        // in the handshake.
        let until = Instant::now() + WAIT;
        let i = loop {
            let i = info(&srv, &w.token);
            let msg = i["last_error_message"].as_str().unwrap_or("").to_string();
            if msg.starts_with("TLS failed: ") && metric(&srv, unreachable) >= tried + 2.0 {
                break i;
            }
            assert!(Instant::now() < until, "no second TLS failure recorded for {}: {i}", rx.url());
            std::thread::sleep(Duration::from_millis(50));
        };
        tried = metric(&srv, unreachable);
        assert_eq!(i["url"], rx.url());
        assert_eq!(i["pending_update_count"], 1, "the event waits: {i}");
        assert!(i["last_error_date"].is_u64() && i["next_attempt_date"].is_u64(), "{i}");
        assert_eq!(rx.seen(), Vec::<Value>::new(), "nothing reached {}", rx.url());
    }
    assert_eq!(metric(&srv, r#"botspace_webhook_attempts_total{result="delivered"}"#), 0.0);
    // The same event, once the URL points at a certificate the server trusts.
    set_webhook(&srv, &w.token, &json!({"url": good.url()}));
    let seen = good.wait_for(WAIT, "the waiting event", |s| delivered(s).contains(&1));
    let e = seen.iter().find(|e| answered_ok(e)).unwrap();
    assert_eq!(e["verified"], json!(true), "{e}");
    assert_eq!(e["id"], format!("msg_{}_1", w.bot_id));
    assert_eq!(e["body"]["update_id"], 1);
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not move");
        std::thread::sleep(Duration::from_millis(20));
    }
    for rx in [&untrusted, &other_name] {
        assert_eq!(rx.seen(), Vec::<Value>::new());
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `SSL_CERT_DIR` instead of `SSL_CERT_FILE`: a directory in OpenSSL's
/// hashed layout (`openssl rehash`, as /etc/ssl/certs is) holding the CA.
fn ssl_cert_dir_names_the_trusted_roots_as_well(bin: &Path) {
    let dir = temp_dir("webhooks-https-dir");
    let ca = TestCa::new(&dir, "ca");
    let (cert, key) = ca.issue("localhost", "DNS:localhost,IP:127.0.0.1");
    let roots = dir.join("roots");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::copy(&ca.cert, roots.join("test-ca.pem")).unwrap();
    let out = std::process::Command::new("openssl").arg("rehash").arg(&roots).output().unwrap();
    assert!(out.status.success(), "openssl rehash: {}", String::from_utf8_lossy(&out.stderr));
    let rx = Receiver::start_tls(&dir, &cert, &key);
    let srv = start_with_roots(bin, "SSL_CERT_DIR", &roots);
    let w = srv.world("standard");
    let secret = set_webhook(&srv, &w.token, &json!({"url": rx.url()}))["secret"].as_str().unwrap().to_string();
    rx.control(&json!({"secret": secret}));
    let seen = rx.wait_for(WAIT, "the first delivery", |s| delivered(s).contains(&1));
    let e = seen.iter().find(|e| answered_ok(e)).unwrap();
    assert_eq!(e["verified"], json!(true), "{e}");
    assert_eq!(e["id"], format!("msg_{}_1", w.bot_id));
    assert_eq!(e["body"]["type"], "bot_started");
    let until = Instant::now() + WAIT;
    while info(&srv, &w.token)["pending_update_count"] != 0 {
        assert!(Instant::now() < until, "the cursor did not move");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A receiver that accepts every connection and never answers: counts the
/// connections open at once (one is closed when its peer closes it) and
/// the most there ever were.
struct Silent {
    port: u16,
    open: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Silent {
    fn start() -> Silent {
        use std::io::Read;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, most, stop) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (o, m, st) = (open.clone(), most.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held: Vec<std::net::TcpStream> = Vec::new();
            let mut buf = [0u8; 4096];
            while !st.load(Ordering::SeqCst) {
                while let Ok((c, _)) = listener.accept() {
                    c.set_nonblocking(true).unwrap();
                    held.push(c);
                }
                // What a request sends is read and dropped; a closed one goes.
                held.retain_mut(|c| loop {
                    match c.read(&mut buf) {
                        Ok(0) => break false,
                        Ok(_) => continue,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                        Err(_) => break false,
                    }
                });
                o.store(held.len(), Ordering::SeqCst);
                m.fetch_max(held.len(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Silent { port, open, most, stop }
    }

    fn open(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn most(&self) -> usize {
        self.most.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Without a cap for the whole server, 12 bots × 90 chats (each bot's
/// `max_connections` at 100) pointed at a receiver that accepts and never
/// answers opened about 1 000 sockets, took every descriptor under
/// `ulimit -n 1024`, and clients got 503 until the attempts timed out. The
/// deliveries now hold at most a quarter of the connection budget (240 of
/// the default 960); the rest wait for a slot, counted by a gauge, and
/// clients are answered meanwhile.
fn bots_pointed_at_a_receiver_that_never_answers_stay_under_the_cap_and_clients_are_served(bin: &Path) {
    const BOTS: usize = 12;
    const USERS: usize = 90;
    const CAP: usize = 240;
    let rx = Silent::start();
    let mut args = vec!["--db", ":memory:", "--admin-secret", SECRET];
    args.extend_from_slice(&ALLOW);
    let srv = Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &args);
    let users: Vec<String> = (0..USERS)
        .map(|i| srv.admin("createUser", &json!({"display_name": format!("U{i}")}))["id"].as_str().unwrap().to_string())
        .collect();
    let mut bots = Vec::new();
    for b in 0..BOTS {
        let made = srv.admin("createBot", &json!({"display_name": "Hook", "handle": format!("hook_bot_{b}")}));
        let (id, token) = (made["bot"]["id"].clone(), made["token"].as_str().unwrap().to_string());
        // Each chat's bot_started is an event to deliver: 90 per bot.
        let chats: Vec<String> = users
            .iter()
            .map(|u| srv.admin("startBot", &json!({"user_id": u, "bot_id": id}))["id"].as_str().unwrap().to_string())
            .collect();
        bots.push((token, chats));
    }
    let url = format!("http://127.0.0.1:{}/hook", rx.port);
    for (token, _) in &bots {
        set_webhook(&srv, token, &json!({"url": url, "max_connections": 100}));
    }
    assert_eq!(metric(&srv, "botspace_webhook_connection_cap"), CAP as f64);
    // The deliveries fill the cap, and the rest wait for a slot.
    let until = Instant::now() + WAIT;
    while rx.open() < CAP || metric(&srv, "botspace_webhook_waiting_for_connection") == 0.0 {
        assert!(
            Instant::now() < until,
            "{} connections open, {} waiting",
            rx.open(),
            metric(&srv, "botspace_webhook_waiting_for_connection")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // While they hang (their 10 s deadline has not come), another client's
    // requests are answered, not refused 503.
    let (token, chats) = &bots[0];
    for (i, chat) in chats.iter().enumerate().take(20) {
        let me = srv.bot(token, "getMe", &json!({}));
        assert_eq!((me.status, me.body["ok"].clone()), (200, json!(true)), "{}", me.body);
        let sent = srv.bot(token, "sendMessage", &json!({"chat_id": chat, "text": format!("m{i}")}));
        assert_eq!((sent.status, sent.body["ok"].clone()), (200, json!(true)), "{}", sent.body);
        assert_eq!(sent.body["result"]["text"], format!("m{i}"));
    }
    let waiting = metric(&srv, "botspace_webhook_waiting_for_connection");
    assert!(waiting > 0.0, "{waiting}");
    assert_eq!(metric(&srv, "botspace_webhook_attempts_in_flight"), CAP as f64, "the waiting ones are not sent");
    println!(
        "{BOTS} bots × {USERS} chats at a silent receiver: at most {} connections open (cap {CAP}), {waiting} waiting",
        rx.most()
    );
    assert_eq!(rx.most(), CAP, "the outgoing connections never passed the cap");
}
