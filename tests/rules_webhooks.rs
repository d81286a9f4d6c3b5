//! Webhook deliveries through the core's host calls, on a manual clock and
//! the store the suite runs on: `poll_webhook` hands out the request the
//! library built (exact body and headers), `webhook_outcome` retries a
//! failure when the backoff says and moves the cursor on a 2xx, and
//! `poll_webhook_in_memory` answers without the store only when nothing is
//! to be read or written, and the pump (`WebhookPump`) hands a loop what
//! memory holds and leaves the store's part to its turns.

mod common;

use botspace::webhook::{signature, Outcome};
use botspace::{Config, Service, WebhookPoll};
use common::{admin, bot_request, split};
use serde_json::{json, Value};

const SECRET: &str = "rules-admin-secret-0001";

fn open() -> Service {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual",
                     "webhook_allow_http": true, "webhook_allow_private_addresses": true});
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

fn bot(svc: &Service, token: &str, method: &str, body: Value) -> (u16, Value) {
    split(&svc.handle_request(&bot_request(token, method, body)))
}

#[test]
fn a_delivery_is_built_by_the_library_retried_and_acknowledged() {
    let svc = open();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo_bot"}));
    let (bot_id, token) = (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string());
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot_id}))["id"].as_str().unwrap().to_string();
    let (status, set) = bot(&svc, &token, "setWebhook", json!({"url": "http://127.0.0.1:9/hook"}));
    assert_eq!(status, 200);
    let secret = set["result"]["secret"].as_str().unwrap().to_string();
    let now = svc.now_ms();
    // Not loaded yet: the first poll reads the store.
    assert!(matches!(svc.poll_webhook_in_memory(now), WebhookPoll::NeedsStore));
    let r = svc.poll_webhook(now).expect("bot_started is due");
    assert_eq!(r.bot_id, bot_id);
    assert_eq!(r.url, "http://127.0.0.1:9/hook");
    assert_eq!(r.attempt.attempt, 1);
    let body: Value = serde_json::from_str(&r.attempt.body).unwrap();
    assert_eq!(
        body,
        json!({"update_id": 1, "type": "bot_started", "data": {"chat": {"id": chat, "type": "private"}, "user": {"id": user, "display_name": "Ann", "handle": null}}})
    );
    let id = format!("msg_{bot_id}_1");
    let key = signature::key_of_secret(&secret).unwrap();
    assert_eq!(
        r.attempt.headers(),
        [
            ("content-type", "application/json".to_string()),
            ("webhook-id", id.clone()),
            ("webhook-timestamp", (now / 1000).to_string()),
            ("webhook-signature", signature::sign(&key, &id, now / 1000, r.attempt.body.as_bytes())),
        ]
    );
    // Nothing else is due, and nothing is to be read or written.
    assert!(matches!(svc.poll_webhook_in_memory(now), WebhookPoll::Idle));
    // A 503 with Retry-After: 30 waits 30 s.
    svc.webhook_outcome(r.id, Outcome::Answered { status: 503, retry_after_s: Some(30) }, now);
    assert!(matches!(svc.poll_webhook_in_memory(now), WebhookPoll::NeedsStore), "the failure is to be written");
    assert!(svc.poll_webhook(now).is_none());
    assert_eq!(svc.webhook_timeout(), Some(now + 30_000));
    let (_, info) = bot(&svc, &token, "getWebhookInfo", json!({}));
    assert_eq!(info["result"]["last_error_message"], "the receiver answered 503");
    assert_eq!(info["result"]["next_attempt_date"], json!((now + 30_000) / 1000));
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 30}));
    let later = svc.now_ms();
    let again = svc.poll_webhook(later).expect("the retry is due");
    assert_eq!((again.attempt.attempt, again.attempt.webhook_id.as_str()), (2, id.as_str()));
    // A 2xx acknowledges: written at the next poll, the cursor moves.
    svc.webhook_outcome(again.id, Outcome::Answered { status: 204, retry_after_s: None }, later);
    assert!(svc.poll_webhook(later).is_none());
    let (_, info) = bot(&svc, &token, "getWebhookInfo", json!({}));
    assert_eq!(info["result"]["pending_update_count"], 0);
    assert_eq!(info["result"]["next_attempt_date"], Value::Null);
    assert_eq!(svc.webhook_timeout(), None);
    // An outcome reported twice, or for an unknown id, changes nothing.
    svc.webhook_outcome(again.id, Outcome::TimedOut, later);
    svc.webhook_outcome(999, Outcome::TimedOut, later);
    assert!(matches!(svc.poll_webhook_in_memory(later), WebhookPoll::Idle));
}

/// The update ids of `requests`, in the order handed out.
fn update_ids(requests: &[botspace::webhook::WebhookRequest]) -> Vec<i64> {
    requests
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.attempt.body).unwrap()["update_id"].as_i64().unwrap())
        .collect()
}

#[test]
fn the_pump_takes_from_memory_and_leaves_the_store_to_its_turns() {
    use botspace_runtime::Pump;
    let svc = open();
    let ann = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let bob = admin(&svc, SECRET, "createUser", json!({"display_name": "Bob"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo_bot"}));
    let (bot_id, token) = (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string());
    // Events 1 and 2: each chat's bot_started; event 3: Ann's message.
    let chat_a =
        admin(&svc, SECRET, "startBot", json!({"user_id": ann, "bot_id": bot_id}))["id"].as_str().unwrap().to_string();
    admin(&svc, SECRET, "startBot", json!({"user_id": bob, "bot_id": bot_id}));
    admin(&svc, SECRET, "sendUserMessage", json!({"user_id": ann, "chat_id": chat_a, "text": "hi"}));
    assert_eq!(bot(&svc, &token, "setWebhook", json!({"url": "http://127.0.0.1:9/hook"})).0, 200);
    let pending =
        |svc: &Service| bot(svc, &token, "getWebhookInfo", json!({})).1["result"]["pending_update_count"].clone();
    let pump = Pump::new();
    let now = svc.now_ms();

    // Nothing loaded: due now, and only the store can find what is due.
    assert_eq!(pump.timeout(&svc, now), Some(now));
    assert!(pump.take(&svc, now).is_empty());
    assert!(pump.store_turn_wanted());
    assert_eq!(pump.timeout(&svc, now), None, "past due while a turn is wanted: the turn's end wakes the loop");
    // The turn reads the log: the first event of each chat; Ann's message
    // waits behind her first.
    assert!(pump.begin_store_turn());
    assert_eq!(pump.timeout(&svc, now), None, "past due while a turn runs");
    assert_eq!(pump.store_turn(&svc, now), 2);
    assert!(!pump.store_turn_wanted());
    let first = pump.take(&svc, now);
    assert_eq!(update_ids(&first), [1, 2]);
    assert!(first.iter().all(|r| r.bot_id == bot_id && r.attempt.attempt == 1));
    assert!(pump.take(&svc, now).is_empty(), "handed out once");
    assert!(!pump.store_turn_wanted());
    assert_eq!(pump.timeout(&svc, now), None, "both in flight: nothing waits");

    // A 2xx: the cursor move is the store's to write, now (nothing was
    // written yet); Ann's message is due in memory and chained at once.
    assert!(pump.report(&svc, first[0].id, Outcome::Answered { status: 204, retry_after_s: None }, now));
    assert!(pump.store_turn_wanted());
    let message = pump.next(&svc, now).expect("Ann's message is due");
    assert_eq!(update_ids(std::slice::from_ref(&message)), [3]);
    assert!(pump.next(&svc, now).is_none());
    assert_eq!(pending(&svc), 3, "reporting and taking never write");
    assert_eq!(pump.timeout(&svc, now), None);
    assert!(pump.begin_store_turn());
    assert_eq!(pump.store_turn(&svc, now), 0);
    assert_eq!(pending(&svc), 2, "the turn wrote the cursor over event 1");
    assert!(!pump.store_turn_wanted());
    assert_eq!(pump.timeout(&svc, now), None);

    // A 503 with Retry-After: 30 just after a write: no turn wanted; the
    // write is due 50 ms after the last one, the retry 30 s on.
    assert!(!pump.report(&svc, message.id, Outcome::Answered { status: 503, retry_after_s: Some(30) }, now));
    assert!(!pump.store_turn_wanted());
    assert_eq!(pump.timeout(&svc, now), Some(now + 50));
    assert!(pump.take(&svc, now + 49).is_empty());
    assert!(!pump.store_turn_wanted(), "not due yet: memory is not even asked");
    assert!(pump.take(&svc, now + 50).is_empty());
    assert!(pump.store_turn_wanted(), "the failure is due for writing");
    assert_eq!(pump.timeout(&svc, now + 50), None);
    assert!(pump.begin_store_turn());
    assert_eq!(pump.store_turn(&svc, now + 50), 0);
    assert_eq!(pump.timeout(&svc, now + 50), Some(now + 30_000));
    assert!(pump.take(&svc, now + 29_999).is_empty());
    assert!(!pump.store_turn_wanted());
    // The retry is memory's: handed out without a turn.
    let retry = pump.take(&svc, now + 30_000);
    assert_eq!(update_ids(&retry), [3]);
    assert_eq!(
        (retry[0].attempt.attempt, retry[0].attempt.webhook_id.as_str()),
        (2, message.attempt.webhook_id.as_str())
    );
    assert!(!pump.store_turn_wanted());
}

/// The address check a host makes on every address a delivery resolves
/// to: an IPv6 address that translates or tunnels to a non-public IPv4
/// address (NAT64, 6to4, Teredo, IPv4-mapped or -compatible) is refused
/// with the class of the IPv4 address inside, and a public one inside
/// passes.
#[test]
fn a_delivery_refuses_ipv6_addresses_that_carry_a_forbidden_ipv4_address() {
    let cfg = json!({"database": ":memory:", "admin_secret": SECRET, "clock": "manual"});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let refusal = |ip: &str| svc.webhook_address_allowed(ip.parse().unwrap()).map_err(|class| class.delivery_refusal());
    let loopback = "the host name resolves to a loopback address, which this server does not deliver to";
    let link_local = "the host name resolves to a link-local address, which this server does not deliver to";
    let private = "the host name resolves to a private address, which this server does not deliver to";
    for (ip, why) in [
        ("64:ff9b::7f00:1", loopback),
        ("64:ff9b::169.254.169.254", link_local),
        ("64:ff9b:1::a00:1", private),
        ("2002:a9fe:a9fe::1", link_local),
        ("2002:c0a8:0101::", private),
        ("::ffff:127.0.0.1", loopback),
        ("::127.0.0.1", loopback),
        ("2001:0:7f00:1::", loopback),
        ("2001:0:5db8:d70e::80ff:fffe", loopback),
    ] {
        assert_eq!(refusal(ip), Err(why.to_string()), "{ip}");
    }
    for ip in ["64:ff9b::93.184.215.14", "2002:5db8:d70e::1", "::ffff:93.184.215.14", "2606:4700::1111"] {
        assert_eq!(refusal(ip), Ok(()), "{ip}");
    }
}

/// Every delivery due now, each acknowledged at once: (signature, id,
/// timestamp, body). A rotation starts over from the durable cursor, which
/// the last acknowledgements may not have reached yet (they are written
/// at most every `WEBHOOK_FLUSH_MS`, and this clock stands still), so an
/// event may come again: all of them are signed alike.
fn due(svc: &Service) -> Vec<(String, String, u64, String)> {
    let now = svc.now_ms();
    let mut out = Vec::new();
    while let Some(r) = svc.poll_webhook(now) {
        let sig = r.attempt.headers().into_iter().find(|(n, _)| *n == "webhook-signature").unwrap().1;
        svc.webhook_outcome(r.id, Outcome::Answered { status: 200, retry_after_s: None }, now);
        out.push((sig, r.attempt.webhook_id.clone(), now / 1000, r.attempt.body.clone()));
        assert!(out.len() < 10, "deliveries without end");
    }
    assert!(!out.is_empty(), "a delivery is due");
    out
}

/// After `rotate_secret`, deliveries carry the new secret's signature and
/// the old one's (space-separated, new first) until
/// `webhook_secret_overlap_s` has passed, then the new one's alone; a
/// setWebhook without rotation keeps the overlap, a second rotation keeps
/// only the secret it replaced, and deleteWebhook ends it.
#[test]
fn a_rotated_secret_signs_beside_the_new_one_for_the_overlap_then_the_new_one_alone() {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual",
                     "webhook_allow_http": true, "webhook_allow_private_addresses": true,
                     "webhook_secret_overlap_s": 60});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo_bot"}));
    let (bot_id, token) = (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string());
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot_id}))["id"].as_str().unwrap().to_string();
    let say =
        |text: &str| admin(&svc, SECRET, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": text}));
    let set = |body: Value| {
        let (status, v) = bot(&svc, &token, "setWebhook", body);
        assert_eq!(status, 200, "{v}");
        v["result"]["secret"].as_str().map(|s| signature::key_of_secret(s).unwrap())
    };
    let sign =
        |key: &[u8], (_, id, ts, body): &(String, String, u64, String)| signature::sign(key, id, *ts, body.as_bytes());
    let url = "http://127.0.0.1:9/hook";
    let k1 = set(json!({"url": url})).unwrap();
    for d in due(&svc) {
        assert_eq!(d.0, sign(&k1, &d));
    }
    let k2 = set(json!({"url": url, "rotate_secret": true})).unwrap();
    say("one");
    for d in due(&svc) {
        assert_eq!(d.0, format!("{} {}", sign(&k2, &d), sign(&k1, &d)));
    }
    // Without rotate_secret the overlap goes on.
    assert_eq!(set(json!({"url": url, "max_connections": 2})), None);
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 59}));
    say("two");
    for d in due(&svc) {
        assert_eq!(d.0, format!("{} {}", sign(&k2, &d), sign(&k1, &d)));
    }
    // 60 s after the rotation: the new secret alone.
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 1}));
    say("three");
    for d in due(&svc) {
        assert_eq!(d.0, sign(&k2, &d));
    }
    // A second rotation keeps only the secret it replaced.
    let k3 = set(json!({"url": url, "rotate_secret": true})).unwrap();
    say("four");
    for d in due(&svc) {
        assert_eq!(d.0, format!("{} {}", sign(&k3, &d), sign(&k2, &d)));
    }
    // deleteWebhook ends the overlap: the next webhook signs alone.
    assert_eq!(bot(&svc, &token, "deleteWebhook", json!({})), (200, json!({"ok": true, "result": true})));
    let k4 = set(json!({"url": url})).unwrap();
    say("five");
    for d in due(&svc) {
        assert_eq!(d.0, sign(&k4, &d));
    }
}

/// With `webhook_secret_overlap_s` 0 a rotation takes effect alone at once.
#[test]
fn with_no_overlap_a_rotation_signs_with_the_new_secret_alone() {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual",
                     "webhook_allow_http": true, "webhook_allow_private_addresses": true,
                     "webhook_secret_overlap_s": 0});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo_bot"}));
    let (bot_id, token) = (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string());
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot_id}))["id"].as_str().unwrap().to_string();
    bot(&svc, &token, "setWebhook", json!({"url": "http://127.0.0.1:9/hook"}));
    due(&svc);
    let (_, v) = bot(&svc, &token, "setWebhook", json!({"url": "http://127.0.0.1:9/hook", "rotate_secret": true}));
    let key = signature::key_of_secret(v["result"]["secret"].as_str().unwrap()).unwrap();
    admin(&svc, SECRET, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": "one"}));
    for d in due(&svc) {
        assert_eq!(d.0, signature::sign(&key, &d.1, d.2, d.3.as_bytes()));
    }
}
