//! Buttons over real TCP, against both example servers: a press reaches
//! the bot by getUpdates, the gateway and a webhook (the event is in the
//! bot's durable log like every other); an unanswered press expires on
//! time with no request in between (the hosts' existing webhook timer
//! drives it: the database file is read directly, so no request to the
//! server can be what wrote the outcome); and a server killed with
//! SIGKILL between a press and its deadline writes exactly one outcome
//! per press after it restarts. Neither server has a line of its own for
//! any of it.

mod webhooks;
#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use webhooks::*;
use wire::*;

servers! {
    on_binary: [
        a_press_reaches_the_bot_by_get_updates_and_the_gateway_and_its_answer_reaches_the_host,
        a_press_reaches_the_bot_by_its_webhook,
        an_unanswered_press_expires_on_time_with_no_request_in_between,
        a_server_killed_between_press_and_expiry_writes_exactly_one_outcome_per_press_after_restart,
    ],
}

/// The server over `db` with `extra` options, waiting for `botspace
/// ready`.
fn start_with(bin: &Path, db: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--db", db, "--admin-secret", SECRET];
    args.extend_from_slice(extra);
    Server::start_in_shell(&[], "true", &[], bin, &args)
}

/// The same on the manual clock.
fn start(bin: &Path, db: &str, extra: &[&str]) -> Server {
    start_with(bin, db, &[&["--manual-clock"], extra].concat())
}

fn keyboard() -> Value {
    json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "No", "callback_data": "no"}]]})
}

/// The bot's message with the keyboard; returns its message_id.
fn show_keyboard(srv: &Server, w: &World) -> String {
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "Choose", "reply_markup": keyboard()}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["reply_markup"], keyboard());
    r.body["result"]["message_id"].as_str().unwrap().to_string()
}

/// pressButton; returns the callback query's id.
fn press(srv: &Server, w: &World, message_id: &str, data: &str) -> String {
    let r = srv.admin(
        "pressButton",
        &json!({"user_id": w.user_id, "chat_id": w.chat, "message_id": message_id, "callback_data": data}),
    );
    let id = r["callback_query_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cbq_"), "{id}");
    id
}

/// The callback_query event's data as the bot hears it.
fn query_data(w: &World, id: &str, message_id: &str, data: &str) -> Value {
    json!({"id": id, "from": {"id": w.user_id, "is_bot": false, "display_name": "Ann", "handle": "ann"},
           "message": {"message_id": message_id, "chat": {"id": w.chat, "type": "private"}}, "data": data})
}

/// Every update of the host's stream (unconfirmed), by type and data.
fn host_stream(srv: &Server) -> Vec<(String, Value)> {
    let all = srv.admin("getUpdates", &json!({"limit": 1000}));
    all.as_array().unwrap().iter().map(|u| (u["type"].as_str().unwrap().to_string(), u["data"].clone())).collect()
}

fn a_press_reaches_the_bot_by_get_updates_and_the_gateway_and_its_answer_reaches_the_host(bin: &Path) {
    let srv = start(bin, ":memory:", &[]);
    let w = srv.world("standard");
    let mid = show_keyboard(&srv, &w);
    // Seq 1 is bot_started: the gateway resumes after it.
    let mut gw = srv.gateway(&w.token, "?after=1");
    assert_eq!(gw.hello()["replay_from"], 2);
    let q = press(&srv, &w, &mid, "yes");
    let ev = gw.event();
    assert_eq!(ev, json!({"op": "event", "seq": 2, "type": "callback_query", "data": query_data(&w, &q, &mid, "yes")}));
    let polled = srv.bot(&w.token, "getUpdates", &json!({"offset": 2, "allowed_updates": ["callback_query"]}));
    assert_eq!(
        polled.body["result"],
        json!([{"update_id": 2, "type": "callback_query", "data": query_data(&w, &q, &mid, "yes")}])
    );
    let r = srv.bot(&w.token, "answerCallbackQuery", &json!({"callback_query_id": q, "text": "Saved"}));
    assert_eq!((r.status, r.body["result"].clone()), (200, json!(true)), "{}", r.body);
    let outcomes: Vec<(String, Value)> =
        host_stream(&srv).into_iter().filter(|(t, _)| t.starts_with("callback_")).collect();
    assert_eq!(
        outcomes,
        [
            ("callback_query".to_string(), query_data(&w, &q, &mid, "yes")),
            (
                "callback_answered".to_string(),
                json!({"callback_query_id": q, "user_id": w.user_id, "chat_id": w.chat, "message_id": mid,
                       "text": "Saved", "show_alert": false})
            )
        ]
    );
    srv.bot(&w.token, "answerCallbackQuery", &json!({"callback_query_id": q}))
        .assert_error(400, "callback_query_answered");
}

fn a_press_reaches_the_bot_by_its_webhook(bin: &Path) {
    let dir = temp_dir("buttons-webhook");
    let rx = Receiver::start(&dir, 0);
    let srv = start_with(bin, ":memory:", &["--webhook-allow-http", "--webhook-allow-private-addresses"]);
    let w = srv.world("standard");
    let mid = show_keyboard(&srv, &w);
    let set = srv.bot(&w.token, "setWebhook", &json!({"url": rx.url(), "allowed_updates": ["callback_query"]}));
    assert_eq!(set.status, 200, "{}", set.body);
    rx.control(&json!({"secret": set.body["result"]["secret"]}));
    let q = press(&srv, &w, &mid, "no");
    let seen = rx.wait_for(WAIT, "the callback_query delivery", |s| s.iter().any(answered_ok));
    let ok: Vec<&Value> = seen.iter().filter(|e| answered_ok(e)).collect();
    // bot_started (seq 1) is not asked for: only the press is delivered.
    // (The system clock: the receiver checks the signature's timestamp.)
    assert_eq!(ok.len(), 1, "{seen:?}");
    assert_eq!(ok[0]["verified"], json!(true));
    assert_eq!(
        ok[0]["body"],
        json!({"update_id": 2, "type": "callback_query", "data": query_data(&w, &q, &mid, "no")})
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The press's outcome and the host-stream events about it, read from
/// the database file (no request to the server).
fn outcome_in_file(db: &Path, id: &str) -> (Option<String>, Vec<String>) {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let outcome: Option<String> =
        c.query_row("SELECT outcome FROM callback_queries WHERE id = ?1", [id], |r| r.get(0)).unwrap();
    let mut st = c
        .prepare("SELECT type FROM updates WHERE json_extract(data, '$.callback_query_id') = ?1 ORDER BY update_id")
        .unwrap();
    let kinds = st.query_map([id], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    (outcome, kinds)
}

fn an_unanswered_press_expires_on_time_with_no_request_in_between(bin: &Path) {
    let dir = temp_dir("buttons-expiry");
    let db = dir.join("botspace.db");
    let srv = start(bin, db.to_str().unwrap(), &[]);
    let w = srv.world("standard");
    let mid = show_keyboard(&srv, &w);
    let q = press(&srv, &w, &mid, "yes");
    srv.advance(14.0);
    // Not yet due: nothing written, however long the server is left alone.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(outcome_in_file(&db, &q), (None, vec![]));
    srv.advance(1.0);
    // Due now. The next request to the server is only after the outcome
    // is in the file: the server's own timer wrote it.
    let at = Instant::now();
    let found = eventually("callback_expired in the database file", || {
        let o = outcome_in_file(&db, &q);
        o.0.is_some().then_some(o)
    });
    assert_eq!(found, (Some("expired".to_string()), vec!["callback_expired".to_string()]));
    // The hosts look at their webhook timer at least once a second.
    assert!(at.elapsed() < Duration::from_secs(3), "expired {:?} after the deadline", at.elapsed());
    eprintln!("expired {:?} after advanceClock passed the deadline", at.elapsed());
    let expired: Vec<Value> =
        host_stream(&srv).into_iter().filter(|(t, _)| t == "callback_expired").map(|(_, d)| d).collect();
    assert_eq!(expired, [json!({"callback_query_id": q, "user_id": w.user_id, "chat_id": w.chat, "message_id": mid})]);
    srv.bot(&w.token, "answerCallbackQuery", &json!({"callback_query_id": q}))
        .assert_error(400, "callback_query_expired");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_server_killed_between_press_and_expiry_writes_exactly_one_outcome_per_press_after_restart(bin: &Path) {
    let dir = temp_dir("buttons-kill");
    let db = dir.join("botspace.db");
    let srv = start(bin, db.to_str().unwrap(), &[]);
    let w = srv.world("standard");
    let mid = show_keyboard(&srv, &w);
    let waiting = press(&srv, &w, &mid, "yes");
    let answered = press(&srv, &w, &mid, "no");
    let r = srv.bot(&w.token, "answerCallbackQuery", &json!({"callback_query_id": answered}));
    assert_eq!(r.status, 200, "{}", r.body);
    srv.signal("-KILL");
    drop(srv);
    assert_eq!(outcome_in_file(&db, &waiting), (None, vec![]));
    assert_eq!(outcome_in_file(&db, &answered), (Some("answered".into()), vec!["callback_answered".into()]));
    // The restarted server's manual clock starts where the first did: the
    // press is due 15 s on, and the restarted timer finds it in the store.
    let srv = start(bin, db.to_str().unwrap(), &[]);
    srv.advance(15.0);
    let found = eventually("the restarted server's expiry", || {
        let o = outcome_in_file(&db, &waiting);
        o.0.is_some().then_some(o)
    });
    assert_eq!(found, (Some("expired".to_string()), vec!["callback_expired".to_string()]));
    // Once more past every deadline, and a second restart: still one each.
    srv.advance(60.0);
    srv.signal("-KILL");
    drop(srv);
    let srv = start(bin, db.to_str().unwrap(), &[]);
    srv.advance(120.0);
    let stream = host_stream(&srv);
    let of = |id: &str| -> Vec<&str> {
        stream
            .iter()
            .filter(|(t, d)| t != "callback_query" && d["callback_query_id"] == id)
            .map(|(t, _)| t.as_str())
            .collect()
    };
    assert_eq!(of(&waiting), ["callback_expired"]);
    assert_eq!(of(&answered), ["callback_answered"]);
    assert_eq!(outcome_in_file(&db, &waiting), (Some("expired".into()), vec!["callback_expired".into()]));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
