//! Long polling through the core's parking entry points, on the store the
//! suite runs on (`:memory:` here, PostgreSQL under
//! scripts/with-postgres.sh): `answer_request` parks a getUpdates with a
//! timeout and nothing to return, a commit makes it due, `poll_parked`
//! answers it with the events (or `[]` at the deadline), a poll whose
//! types did not come stays parked, a revoked token's poll gets `[]`,
//! `cancel_parked` forgets, and the cap answers at once.

mod common;

use botspace::{Config, Handled, PollId, Service};
use common::{admin, bot_request, split};
use serde_json::{json, Value};

const SECRET: &str = "rules-admin-secret-0001";

fn open(extra: Value) -> Service {
    let mut cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual"});
    cfg.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

struct World {
    user: String,
    bot: String,
    token: String,
    chat: String,
}

fn world(svc: &Service) -> World {
    let user = admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo_bot"}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    let chat =
        admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    World { user, bot, token, chat }
}

fn say(svc: &Service, w: &World, text: &str) -> Value {
    admin(svc, SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.chat, "text": text}))
}

fn poll(svc: &Service, w: &World, body: Value, now: u64) -> Handled {
    common::answer(svc, &bot_request(&w.token, "getUpdates", body), "192.0.2.1", now)
}

fn parked(a: Handled) -> PollId {
    match a {
        Handled::Parked(id) => id,
        Handled::Now(out) => panic!("answered at once: {}", String::from_utf8_lossy(&out)),
    }
}

fn result(out: &[u8]) -> Value {
    let (status, v) = split(out);
    assert_eq!(status, 200, "{v}");
    v["result"].clone()
}

fn created(seq: i64, message: &Value) -> Value {
    json!({"update_id": seq, "type": "message_created", "data": {"message": message}})
}

#[test]
fn a_parked_poll_is_answered_by_the_commit_that_gives_its_bot_an_event() {
    let svc = open(json!({}));
    let w = world(&svc);
    let now = svc.now_ms();
    assert_eq!(svc.parked_timeout(), None);
    let id = parked(poll(&svc, &w, json!({"offset": 2, "timeout": 30}), now));
    assert_eq!(svc.parked_count(), 1);
    assert_eq!(svc.parked_timeout(), Some(now + 30_000));
    assert!(svc.poll_parked(now).is_empty());
    let m = say(&svc, &w, "hi");
    assert_eq!(svc.parked_timeout(), Some(0));
    let ready = svc.poll_parked(now);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, id);
    assert_eq!(result(&ready[0].1), json!([created(2, &m)]));
    assert_eq!(svc.parked_count(), 0);
    // The offset acknowledged event 1 durably, parked or not.
    let (_, v) = split(&svc.handle_request(&bot_request(&w.token, "getUpdates", json!({}))));
    assert_eq!(v["result"], json!([created(2, &m)]));
}

#[test]
fn a_poll_whose_types_did_not_come_waits_for_its_deadline() {
    let svc = open(json!({}));
    let w = world(&svc);
    let now = svc.now_ms();
    let id = parked(poll(&svc, &w, json!({"offset": 2, "timeout": 5, "allowed_updates": ["blocked"]}), now));
    let other = parked(poll(&svc, &w, json!({"offset": 2, "timeout": 5}), now));
    let m = say(&svc, &w, "hi");
    let ready = svc.poll_parked(now + 1);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, other);
    assert_eq!(result(&ready[0].1), json!([created(2, &m)]));
    // Still parked, same id and deadline.
    assert_eq!(svc.parked_count(), 1);
    assert_eq!(svc.parked_timeout(), Some(now + 5_000));
    assert!(svc.poll_parked(now + 4_999).is_empty());
    let ready = svc.poll_parked(now + 5_000);
    assert_eq!(ready.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![id]);
    assert_eq!(result(&ready[0].1), json!([]));
}

#[test]
fn a_rotated_token_s_poll_is_answered_empty_and_a_cancelled_one_never() {
    let svc = open(json!({}));
    let w = world(&svc);
    let now = svc.now_ms();
    let id = parked(poll(&svc, &w, json!({"offset": 2, "timeout": 30}), now));
    let gone = parked(poll(&svc, &w, json!({"offset": 2, "timeout": 30}), now));
    assert!(svc.cancel_parked(gone));
    assert!(!svc.cancel_parked(gone));
    admin(&svc, SECRET, "rotateBotToken", json!({"bot_id": w.bot}));
    let ready = svc.poll_parked(now);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, id);
    assert_eq!(result(&ready[0].1), json!([]));
    // The old token is refused at once, parked or not.
    let (status, v) = split(&svc.handle_request(&bot_request(&w.token, "getUpdates", json!({"timeout": 5}))));
    assert_eq!((status, v["error"].clone()), (401, json!("invalid_token")));
    match poll(&svc, &w, json!({"timeout": 5}), now) {
        Handled::Now(out) => assert_eq!(split(&out).0, 401),
        Handled::Parked(_) => panic!("a refused poll parked"),
    }
}

#[test]
fn past_the_cap_a_poll_is_answered_at_once_and_other_requests_never_park() {
    let svc = open(json!({"max_parked_polls": 1}));
    let w = world(&svc);
    let now = svc.now_ms();
    parked(poll(&svc, &w, json!({"offset": 2, "timeout": 30}), now));
    match poll(&svc, &w, json!({"offset": 2, "timeout": 30}), now) {
        Handled::Now(out) => assert_eq!(result(&out), json!([])),
        Handled::Parked(_) => panic!("parked past the cap"),
    }
    // A poll with events, a poll without a timeout, a bad poll and getMe
    // are answered now.
    for (method, body, status) in [
        ("getUpdates", json!({"timeout": 30}), 200),
        ("getUpdates", json!({"offset": 2}), 200),
        ("getUpdates", json!({"timeout": 51}), 400),
        ("getMe", json!({}), 200),
    ] {
        match common::answer(&svc, &bot_request(&w.token, method, body.clone()), "192.0.2.1", now) {
            Handled::Now(out) => assert_eq!(split(&out).0, status, "{method} {body}"),
            Handled::Parked(_) => panic!("{method} {body} parked"),
        }
    }
    assert_eq!(svc.parked_count(), 1);
}

/// One bot may hold `MAX_PARKED_POLLS_PER_BOT` (16) parked polls: its next
/// one parks and its own oldest is answered 409 `poll_superseded`, so it
/// cannot take the shared `max_parked_polls` from the other bots.
#[test]
fn a_bot_over_its_own_cap_has_its_oldest_poll_answered_409_and_others_still_park() {
    assert_eq!(botspace::MAX_PARKED_POLLS_PER_BOT, 16);
    let svc = open(json!({"max_parked_polls": 17}));
    let w = world(&svc);
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "Other", "handle": "other_bot"}));
    let other = World {
        user: w.user.clone(),
        bot: b["bot"]["id"].as_str().unwrap().to_string(),
        token: b["token"].as_str().unwrap().to_string(),
        chat: String::new(),
    };
    let now = svc.now_ms();
    let body = json!({"offset": 2, "timeout": 30});
    let mine: Vec<PollId> = (0..16).map(|i| parked(poll(&svc, &w, body.clone(), now + i))).collect();
    assert_eq!(svc.parked_timeout(), Some(now + 30_000));
    // The 17th parks; the first is ready now, with the error.
    let seventeenth = parked(poll(&svc, &w, body.clone(), now + 16));
    assert_eq!(svc.parked_count(), 17);
    assert_eq!(svc.parked_timeout(), Some(0));
    let ready = svc.poll_parked(now + 16);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, mine[0]);
    let superseded = json!({"ok": false, "error_code": 409, "error": "poll_superseded",
        "description": "terminated by a newer getUpdates of this bot: at most 16 may wait at once; run one poller per bot"});
    assert_eq!(split(&ready[0].1), (409, superseded.clone()));
    // The other bot parks in the one place left of the shared 17...
    let theirs = parked(poll(&svc, &other, json!({"timeout": 30}), now + 17));
    // ...a third poll of anyone under its own cap finds the shared cap
    // full and is answered at once...
    match poll(&svc, &other, json!({"timeout": 30}), now + 17) {
        Handled::Now(out) => assert_eq!(split(&out), (200, json!({"ok": true, "result": []}))),
        Handled::Parked(_) => panic!("parked past the shared cap"),
    }
    // ...and the first bot, at its own cap, still parks in place of its
    // oldest: the total stays 17.
    parked(poll(&svc, &w, body.clone(), now + 18));
    let ready = svc.poll_parked(now + 18);
    assert_eq!(ready.iter().map(|r| r.0).collect::<Vec<_>>(), vec![mine[1]]);
    assert_eq!(split(&ready[0].1), (409, superseded));
    assert_eq!(svc.parked_count(), 17);
    // An event for the other bot answers its poll; nothing of the first's.
    let u = admin(&svc, SECRET, "createUser", json!({"display_name": "Bo"}))["id"].as_str().unwrap().to_string();
    admin(&svc, SECRET, "startBot", json!({"user_id": u, "bot_id": other.bot}));
    let ready = svc.poll_parked(now + 19);
    assert_eq!(ready.iter().map(|r| r.0).collect::<Vec<_>>(), vec![theirs]);
    assert_eq!(split(&ready[0].1).0, 200);
    assert!(svc.cancel_parked(seventeenth));
    assert_eq!(svc.parked_count(), 15);
}

/// A typed getUpdates, as a host whose HTTP stack parsed it passes it.
fn typed_poll(w: &World, body: Value) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method("POST")
        .uri("/bot/getUpdates")
        .header("host", "t")
        .header("authorization", format!("Bot {}", w.token))
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap()
}

/// A parsed request through the one way in.
fn answer_typed(svc: &Service, req: &http::Request<Vec<u8>>, peer: &str, now: u64) -> Handled {
    svc.handle(&[botspace::Incoming::http(req).from_peer(peer)], now).remove(0)
}

/// An answer's status, its headers in order and its body as text, read as
/// a host with its own HTTP stack reads it (`into_http_response`).
fn typed_parts(r: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let r = botspace::into_http_response(r.to_vec());
    let headers = r.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string())).collect();
    (r.status().as_u16(), headers, String::from_utf8(r.body().clone()).unwrap())
}

/// The headers of a JSON answer of `len` bytes.
fn json_headers(len: usize) -> Vec<(String, String)> {
    vec![("content-type".into(), "application/json".into()), ("content-length".into(), len.to_string())]
}

/// The body of the bytes twin's answer to the same getUpdates.
fn bytes_body(svc: &Service, w: &World, body: Value) -> String {
    let out = svc.handle_request(&bot_request(&w.token, "getUpdates", body));
    String::from_utf8(out[common::body_start(&out)..].to_vec()).unwrap()
}

#[test]
fn the_typed_entry_points_answer_long_polls_typed_now_woken_and_expired() {
    let svc = open(json!({}));
    let w = world(&svc);
    let now = svc.now_ms();
    let m = say(&svc, &w, "hi");
    // An answer given now: the core's response, typed, the same as the
    // bytes twin's.
    let now_answer = match answer_typed(&svc, &typed_poll(&w, json!({"offset": 2, "timeout": 30})), "192.0.2.1", now) {
        Handled::Now(r) => r,
        Handled::Parked(_) => panic!("a poll with an event parked"),
    };
    let (status, headers, body) = typed_parts(&now_answer);
    assert_eq!(body, bytes_body(&svc, &w, json!({"offset": 2})));
    assert_eq!((status, headers), (200, json_headers(body.len())));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"ok": true, "result": [created(2, &m)]}));
    // A refusal given now: the error envelope, typed.
    let refused = match answer_typed(&svc, &typed_poll(&w, json!({"timeout": 51})), "192.0.2.1", now) {
        Handled::Now(r) => r,
        Handled::Parked(_) => panic!("a bad poll parked"),
    };
    let (status, headers, body) = typed_parts(&refused);
    assert_eq!(body, bytes_body(&svc, &w, json!({"timeout": 51})));
    assert_eq!((status, headers), (400, json_headers(body.len())));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((v["error_code"].clone(), v["error"].clone()), (json!(400), json!("invalid_field")));

    // Woken: a poll past the event parks, the next event answers it.
    let woken = match answer_typed(&svc, &typed_poll(&w, json!({"offset": 3, "timeout": 30})), "192.0.2.1", now) {
        Handled::Parked(id) => id,
        Handled::Now(r) => panic!("answered at once: {:?}", typed_parts(&r)),
    };
    assert!(svc.poll_parked(now).is_empty());
    let m3 = say(&svc, &w, "again");
    let ready = svc.poll_parked(now);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, woken);
    let (status, headers, body) = typed_parts(&ready[0].1);
    assert_eq!(body, bytes_body(&svc, &w, json!({"offset": 3})));
    assert_eq!((status, headers), (200, json_headers(body.len())));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"ok": true, "result": [created(3, &m3)]}));

    // Expired: nothing comes, `[]` at the deadline and not before.
    let expired = match answer_typed(&svc, &typed_poll(&w, json!({"offset": 4, "timeout": 5})), "192.0.2.1", now) {
        Handled::Parked(id) => id,
        Handled::Now(r) => panic!("answered at once: {:?}", typed_parts(&r)),
    };
    assert!(svc.poll_parked(now + 4_999).is_empty());
    let ready = svc.poll_parked(now + 5_000);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].0, expired);
    assert_eq!(typed_parts(&ready[0].1), (200, json_headers(23), r#"{"ok":true,"result":[]}"#.to_string()));
    assert_eq!(svc.parked_count(), 0);
}
