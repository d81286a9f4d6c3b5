//! A run of requests through `Service::handle` (group commit) answers every request exactly as
//! `handle_request` would one by one, and a failing request — alone or inside
//! a batch — leaves no partial write.

mod common;

use botspace::{Config, Service};
use common::{admin, admin_request, bot_call, bot_request, request, split, split_checked, statuses, TempDir};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const SECRET: &str = "rules-admin-secret-0001";

fn service() -> Service {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual"});
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

/// Ids and tokens of one service's world.
struct World {
    user: String,
    free_tok: String,
    std_tok: String,
    private_free: String,
    private_std: String,
    group: String,
}

fn world(svc: &Service) -> World {
    let user = admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let free = admin(svc, SECRET, "createBot", json!({"display_name": "Free", "handle": "free"}));
    let std =
        admin(svc, SECRET, "createBot", json!({"display_name": "Std", "handle": "std", "quota_tier": "standard"}));
    let free_id = free["bot"]["id"].as_str().unwrap().to_string();
    let std_id = std["bot"]["id"].as_str().unwrap().to_string();
    let private_free =
        admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": free_id}))["id"].as_str().unwrap().to_string();
    let private_std =
        admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": std_id}))["id"].as_str().unwrap().to_string();
    let group = admin(svc, SECRET, "createGroup", json!({"title": "G", "member_ids": [user, std_id]}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    World {
        user,
        free_tok: free["token"].as_str().unwrap().to_string(),
        std_tok: std["token"].as_str().unwrap().to_string(),
        private_free,
        private_std,
        group,
    }
}

/// The same sequence of requests for a world: successes, every kind of
/// failure, rate limiting, idempotency, and writes that fail half-way.
fn sequence(w: &World) -> Vec<Vec<u8>> {
    let mut r = Vec::new();
    r.push(bot_request(&w.std_tok, "getMe", json!({})));
    r.push(bot_request(&w.std_tok, "sendMessage", json!({"chat_id": w.private_std, "text": "one"})));
    r.push(bot_request(&w.std_tok, "sendMessage", json!({"chat_id": w.private_std, "text": ""})));
    r.push(bot_request(
        &w.std_tok,
        "sendMessage",
        json!({"chat_id": w.private_std, "text": "two", "reply_to_message_id": "1"}),
    ));
    r.push(bot_request(
        &w.std_tok,
        "sendMessage",
        json!({"chat_id": w.private_std, "text": "bad reply", "reply_to_message_id": "9"}),
    ));
    r.push(bot_request(&w.std_tok, "sendChatAction", json!({"chat_id": w.private_std, "action": "typing"})));
    r.push(bot_request(&w.std_tok, "sendChatAction", json!({"chat_id": w.private_std, "action": "dancing"})));
    r.push(bot_request(
        &w.std_tok,
        "editMessageText",
        json!({"chat_id": w.private_std, "message_id": "1", "text": "one!"}),
    ));
    r.push(bot_request(&w.std_tok, "deleteMessage", json!({"chat_id": w.private_std, "message_id": "2"})));
    r.push(bot_request(&w.std_tok, "deleteMessage", json!({"chat_id": w.private_std, "message_id": "2"})));
    r.push(bot_request(&w.std_tok, "sendMessage", json!({"chat_id": w.group, "text": "group hello"})));
    r.push(bot_request(
        &w.free_tok,
        "editMessageText",
        json!({"chat_id": w.private_free, "message_id": "1", "text": "x"}),
    ));
    r.push(bot_request("bot_nope", "sendMessage", json!({"chat_id": w.private_std, "text": "x"})));
    r.push(b"GET /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n".to_vec());
    r.push(request("/bot/sendMessage", &format!("Bot {}", w.std_tok), "", b"{not json"));
    r.push(request("/bot/sendMessage", &format!("Bot {}", w.std_tok), "", b"[1]"));
    r.push(bot_request(&w.std_tok, "nope", json!({})));
    // Free tier: burst of 5 then 429.
    for i in 0..7 {
        r.push(bot_request(&w.free_tok, "sendMessage", json!({"chat_id": w.private_free, "text": format!("f{i}")})));
    }
    // Idempotency: replay and conflict.
    let key = "Idempotency-Key: batch-key-1\r\n";
    let body = json!({"chat_id": w.private_std, "text": "idem"}).to_string();
    r.push(request("/bot/sendMessage", &format!("Bot {}", w.std_tok), key, body.as_bytes()));
    r.push(request("/bot/sendMessage", &format!("Bot {}", w.std_tok), key, body.as_bytes()));
    r.push(request(
        "/bot/sendMessage",
        &format!("Bot {}", w.std_tok),
        key,
        json!({"chat_id": w.private_std, "text": "other"}).to_string().as_bytes(),
    ));
    // A write that fails half-way: the group row and the first member_added
    // are written before the unknown member is found.
    r.push(admin_request(
        SECRET,
        "createGroup",
        json!({"title": "Half", "member_ids": [w.user, "usr_doesnotexist0000000"]}),
    ));
    r.push(admin_request(
        SECRET,
        "sendUserMessage",
        json!({"user_id": w.user, "chat_id": w.private_std, "text": "human"}),
    ));
    r.push(admin_request(SECRET, "setBlocked", json!({"chat_id": w.private_std, "by": "user", "blocked": true})));
    r.push(bot_request(&w.std_tok, "sendMessage", json!({"chat_id": w.private_std, "text": "blocked now"})));
    r.push(admin_request(SECRET, "setBlocked", json!({"chat_id": w.private_std, "by": "user", "blocked": false})));
    r.push(admin_request(SECRET, "getChatHistory", json!({"chat_id": w.private_std})));
    r.push(admin_request(SECRET, "getChatHistory", json!({"chat_id": w.private_free})));
    r.push(admin_request(SECRET, "getChatActions", json!({"chat_id": w.private_std})));
    r.push(admin_request(SECRET, "getUpdates", json!({"limit": 1000})));
    r
}

/// Replaces random ids and tokens (`bot_…`, `usr_…`, `spc_…`) by stable
/// names in order of first appearance, so two services' answers compare.
struct Normalizer(HashMap<String, String>);

impl Normalizer {
    fn norm(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let rest = &s[i..];
            if let Some(p) = ["bot_", "usr_", "spc_"].iter().find(|p| rest.starts_with(**p)) {
                let len =
                    rest[4..].bytes().take_while(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_').count();
                if len >= 20 {
                    let id = &rest[..4 + len];
                    let n = self.0.len();
                    let name = self.0.entry(id.to_string()).or_insert_with(|| format!("<{p}{n}>")).clone();
                    out.push_str(&name);
                    i += 4 + len;
                    continue;
                }
            }
            let ch = rest.chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
        out
    }
}

fn normalized(answers: &[Vec<u8>], seed: &[String]) -> Vec<String> {
    let mut n = Normalizer(HashMap::new());
    for s in seed {
        n.norm(s);
    }
    answers.iter().map(|a| n.norm(&String::from_utf8_lossy(a))).collect()
}

fn seed(w: &World) -> Vec<String> {
    vec![
        w.user.clone(),
        w.free_tok.clone(),
        w.std_tok.clone(),
        w.private_free.clone(),
        w.private_std.clone(),
        w.group.clone(),
    ]
}

#[test]
fn batch_answers_equal_one_by_one_answers() {
    let (a, b) = (service(), service());
    let (wa, wb) = (world(&a), world(&b));
    let one_by_one: Vec<Vec<u8>> = sequence(&wa).iter().map(|r| a.handle_request(r)).collect();
    let reqs_b = sequence(&wb);
    let refs: Vec<&[u8]> = reqs_b.iter().map(|r| r.as_slice()).collect();
    let batched = common::batch(&b, &refs);
    assert_eq!(batched.len(), refs.len());
    let na = normalized(&one_by_one, &seed(&wa));
    let nb = normalized(&batched, &seed(&wb));
    for (i, (x, y)) in na.iter().zip(&nb).enumerate() {
        assert_eq!(x, y, "answer {i} differs between handle_request and a batch through Service::handle");
    }
    // The sequence really exercised failures and successes.
    let statuses: Vec<&str> = na.iter().map(|s| &s[9..12]).collect();
    for s in ["200", "400", "401", "403", "404", "405", "409", "429"] {
        assert!(statuses.contains(&s), "sequence lacks a {s}: {statuses:?}");
    }
}

#[test]
fn batch_in_small_slices_equals_one_big_batch() {
    let (a, b) = (service(), service());
    let (wa, wb) = (world(&a), world(&b));
    let ra = sequence(&wa);
    let mut sliced = Vec::new();
    for chunk in ra.chunks(3) {
        let refs: Vec<&[u8]> = chunk.iter().map(|r| r.as_slice()).collect();
        sliced.extend(common::batch(&a, &refs));
    }
    let rb = sequence(&wb);
    let refs: Vec<&[u8]> = rb.iter().map(|r| r.as_slice()).collect();
    let whole = common::batch(&b, &refs);
    assert_eq!(normalized(&sliced, &seed(&wa)), normalized(&whole, &seed(&wb)));
}

fn updates(svc: &Service) -> Vec<Value> {
    admin(svc, SECRET, "getUpdates", json!({"limit": 1000})).as_array().unwrap().clone()
}

fn count_type(ups: &[Value], t: &str) -> usize {
    ups.iter().filter(|u| u["type"] == t).count()
}

#[test]
fn a_failing_request_leaves_no_partial_write() {
    let svc = service();
    let w = world(&svc);
    let before = updates(&svc);
    let chats_before = before.len();
    // createGroup writes the chat and a member_added for the user before it
    // meets the unknown member.
    let raw = svc.handle_request(&admin_request(
        SECRET,
        "createGroup",
        json!({"title": "Half", "member_ids": [w.user, "usr_doesnotexist0000000"]}),
    ));
    let (_, v) = split(&raw);
    assert!(raw.starts_with(b"HTTP/1.1 404"), "{v}");
    let after = updates(&svc);
    assert_eq!(after.len(), chats_before, "the failed createGroup left events behind: {:?}", &after[chats_before..]);
    // The same inside a batch, between two successful writes.
    let reqs = [
        admin_request(
            SECRET,
            "sendUserMessage",
            json!({"user_id": w.user, "chat_id": w.private_std, "text": "before"}),
        ),
        admin_request(
            SECRET,
            "createGroup",
            json!({"title": "Half", "member_ids": [w.user, "usr_doesnotexist0000000"]}),
        ),
        bot_request(&w.std_tok, "sendMessage", json!({"chat_id": w.private_std, "text": "x".repeat(5001)})),
        admin_request(SECRET, "sendUserMessage", json!({"user_id": w.user, "chat_id": w.private_std, "text": "after"})),
    ];
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let out = statuses(&common::batch(&svc, &refs));
    assert_eq!(out, vec![200, 404, 400, 200]);
    let ups = updates(&svc);
    assert_eq!(ups.len(), chats_before + 2, "only the two successful messages added events");
    assert_eq!(count_type(&ups, "member_added"), count_type(&before, "member_added"));
    let hist = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.private_std}));
    let texts: Vec<&str> = hist.as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, vec!["before", "after"]);
    let ids: Vec<&str> = hist.as_array().unwrap().iter().map(|m| m["message_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["1", "2"], "a rolled-back request takes no message number");
}

#[test]
fn a_rate_limited_request_in_a_batch_consumes_nothing_and_rollback_returns_slots() {
    let svc = service();
    let w = world(&svc);
    // Five sends fill the free private-chat burst; the refused ones after
    // them must not consume anything, in one batch or across batches.
    let send = |t: &str| bot_request(&w.free_tok, "sendMessage", json!({"chat_id": w.private_free, "text": t}));
    let reqs: Vec<Vec<u8>> = (0..8).map(|i| send(&format!("m{i}"))).collect();
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let out = common::batch(&svc, &refs);
    assert_eq!(statuses(&out), vec![200, 200, 200, 200, 200, 429, 429, 429]);
    // Each answer of the group has its own X-RateLimit-* figures, as alone.
    let remaining: Vec<(String, String)> = out
        .iter()
        .map(|r| {
            let (_, headers, _) = common::split_with_headers(r);
            let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default();
            assert_eq!(get("x-ratelimit-limit"), "5");
            assert_eq!(get("x-ratelimit-scope"), "chat");
            (get("x-ratelimit-remaining"), get("x-ratelimit-reset-after"))
        })
        .collect();
    let want: Vec<(String, String)> =
        ["4", "3", "2", "1", "0", "0", "0", "0"].iter().map(|r| (r.to_string(), "1".to_string())).collect();
    assert_eq!(remaining, want);
    admin(&svc, SECRET, "advanceClock", json!({"seconds": 1}));
    let reqs = [send("a"), send("b")];
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    assert_eq!(statuses(&common::batch(&svc, &refs)), vec![200, 429]);
    let hist = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": w.private_free}));
    assert_eq!(hist.as_array().unwrap().len(), 6);
}

#[test]
fn empty_batch_and_unroutable_requests() {
    let svc = service();
    assert!(common::batch::<&[u8]>(&svc, &[]).is_empty());
    let out = common::batch(&svc, &[&b"garbage"[..], b"GET /bot/getMe HTTP/1.1\r\n\r\n"]);
    assert_eq!(statuses(&out), vec![400, 405]);
}

// ---------------------------------------------------------------------------
// Group commit when storage itself fails. The failures are planted by a
// second connection to the same database file (a trigger, or the write lock).

/// A service on a database file, with one user, one official bot (no rate
/// limits) and their private chat; wake-ups are recorded.
struct FileWorld {
    _dir: TempDir,
    db: PathBuf,
    svc: Service,
    user: String,
    bot: String,
    token: String,
    chat: String,
    woken: Arc<Mutex<Vec<String>>>,
}

fn file_world(tag: &str) -> FileWorld {
    let dir = TempDir::new(tag);
    let db = dir.0.join("bots.db");
    let cfg = json!({"database": db.to_str().unwrap(), "admin_secret": SECRET, "clock": "manual"});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b", "quota_tier": "official"}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    let woken = Arc::new(Mutex::new(Vec::new()));
    let w2 = woken.clone();
    svc.set_wake_hook(Some(Arc::new(move |b: &str| w2.lock().unwrap().push(b.to_string()))));
    FileWorld { _dir: dir, db, svc, user, bot, token: b["token"].as_str().unwrap().to_string(), chat, woken }
}

/// What a committed write would change: (messages, bot events, host updates,
/// the chat's last message number, the bot's last event seq, the last
/// update id handed out).
type Footprint = (i64, i64, i64, i64, i64, i64);

impl FileWorld {
    fn send(&self, text: &str) -> Vec<u8> {
        bot_request(&self.token, "sendMessage", json!({"chat_id": self.chat, "text": text}))
    }

    fn user_says(&self, text: &str) -> Vec<u8> {
        admin_request(SECRET, "sendUserMessage", json!({"user_id": self.user, "chat_id": self.chat, "text": text}))
    }

    fn sql(&self, sql: &str) {
        Connection::open(&self.db).unwrap().execute_batch(sql).unwrap();
    }

    fn footprint(&self) -> Footprint {
        let c = Connection::open(&self.db).unwrap();
        let n = |q: &str, p: &[&str]| c.query_row(q, rusqlite::params_from_iter(p), |r| r.get(0)).unwrap();
        (
            n("SELECT count(*) FROM messages WHERE chat_id = ?1", &[&self.chat]),
            n("SELECT count(*) FROM bot_events WHERE bot_id = ?1", &[&self.bot]),
            n("SELECT count(*) FROM updates", &[]),
            n("SELECT coalesce(max(message_id), 0) FROM messages WHERE chat_id = ?1", &[&self.chat]),
            n("SELECT last_seq FROM bots WHERE id = ?1", &[&self.bot]),
            n("SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'updates'", &[]),
        )
    }

    fn woken(&self) -> Vec<String> {
        std::mem::take(&mut *self.woken.lock().unwrap())
    }

    /// `sendMessage "d"` alone must take message number 1 — the number the
    /// first message of the rolled-back group would have had — and answer
    /// exactly that message.
    fn next_send_takes_number_one(&self) {
        let (s, v) = bot_call(&self.svc, &self.token, "sendMessage", json!({"chat_id": self.chat, "text": "d"}));
        let message = json!({
            "message_id": "1",
            "chat": {"id": self.chat, "type": "private"},
            "date": self.svc.now_ms() / 1000,
            "text": "d",
            "from": {"id": self.bot, "is_bot": true},
        });
        assert_eq!((s, v), (200, json!({"ok": true, "result": message})));
    }
}

fn batch(svc: &Service, reqs: &[Vec<u8>]) -> Vec<(u16, Value)> {
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    common::batch(svc, &refs).iter().map(|r| split_checked(r)).collect()
}

fn error(status: u16, code: &str, description: &str) -> (u16, Value) {
    (status, json!({"ok": false, "error_code": status, "error": code, "description": description}))
}

/// The answer of the request that failed in storage, and of every request of
/// its group that had succeeded before it.
const BOOM: &str = "internal error, nothing was written; safe to retry";
/// The answer of the requests after it, which were never run.
const NOT_RUN: &str = "internal error, nothing was written; safe to retry";
/// Fails the insert of a message "boom", after its chat's counter moved.
const BOOM_ON_INSERT: &str =
    "CREATE TRIGGER boom BEFORE INSERT ON messages WHEN NEW.text = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;";

fn text_empty() -> (u16, Value) {
    (
        400,
        json!({"ok": false, "error_code": 400, "error": "text_empty",
               "description": "text must contain at least 1 character", "parameters": {"field": "text"}}),
    )
}

#[test]
fn a_storage_failure_after_earlier_writes_rolls_back_the_group_and_refusals_keep_their_answers() {
    let w = file_world("batch-storage-mid");
    w.sql(BOOM_ON_INSERT);
    let before = w.footprint();
    let garbage = b"garbage".to_vec();
    let alone = split_checked(&w.svc.handle_request(&garbage));
    assert_eq!(alone, error(400, "invalid_request", "incomplete HTTP request"));
    let out = batch(&w.svc, &[w.send("a"), w.send(""), w.user_says("u"), w.send("boom"), w.send("c"), garbage]);
    assert_eq!(
        out,
        vec![
            error(500, "internal_error", BOOM),
            text_empty(),
            error(500, "internal_error", BOOM),
            error(500, "internal_error", BOOM),
            error(500, "internal_error", NOT_RUN),
            // Refused by routing, which needs no run: its own answer.
            error(400, "invalid_request", "incomplete HTTP request"),
        ]
    );
    assert_eq!(w.footprint(), before, "nothing of the group was committed");
    assert_eq!(w.woken(), Vec::<String>::new(), "a rolled-back group wakes nobody");
    w.next_send_takes_number_one();
    assert_eq!(bot_call(&w.svc, &w.token, "getMe", json!({})).0, 200);
    // The same requests without the failure commit, and wake the bot.
    let out = batch(&w.svc, &[w.send("a"), w.send(""), w.user_says("u")]);
    assert_eq!(statuses_of(&out), vec![200, 400, 200]);
    assert_eq!(out[2].1["result"]["message_id"], "3");
    assert_eq!(w.woken(), vec![w.bot.clone()]);
}

#[test]
fn a_storage_failure_in_the_first_request_rolls_it_back_and_runs_none_of_the_rest() {
    let w = file_world("batch-storage-first");
    w.sql(BOOM_ON_INSERT);
    let before = w.footprint();
    let out = batch(&w.svc, &[w.send("boom"), w.send("a"), w.user_says("u"), w.send("")]);
    assert_eq!(
        out,
        vec![
            error(500, "internal_error", BOOM),
            error(500, "internal_error", NOT_RUN),
            error(500, "internal_error", NOT_RUN),
            // Never run, so not known to be a refusal: 500 like the rest.
            error(500, "internal_error", NOT_RUN),
        ]
    );
    assert_eq!(w.footprint(), before, "nothing of the group was committed");
    assert_eq!(w.woken(), Vec::<String>::new());
    w.next_send_takes_number_one();
    assert_eq!(bot_call(&w.svc, &w.token, "getMe", json!({})).0, 200);
}

#[test]
fn a_storage_failure_that_rolls_back_the_transaction_itself_commits_nothing_of_the_group() {
    // SQLite may end the transaction itself on an error (SQLITE_FULL,
    // SQLITE_IOERR...; RAISE(ROLLBACK) here), even in a statement that wrote
    // nothing: the group's earlier writes are gone and the connection is back
    // in autocommit, where later requests would commit one by one.
    let w = file_world("batch-storage-rollback");
    w.sql(
        "CREATE TRIGGER boom BEFORE INSERT ON updates WHEN json_extract(NEW.data, '$.message.message_id') = '2' \
         BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;",
    );
    let before = w.footprint();
    let out = batch(&w.svc, &[w.send("a"), w.send("b"), w.send("c"), w.user_says("u")]);
    assert_eq!(
        out,
        vec![
            error(500, "internal_error", BOOM),
            error(500, "internal_error", BOOM),
            error(500, "internal_error", NOT_RUN),
            error(500, "internal_error", NOT_RUN),
        ]
    );
    assert_eq!(w.footprint(), before, "nothing of the group was committed");
    assert_eq!(w.woken(), Vec::<String>::new());
    w.next_send_takes_number_one();
    assert_eq!(bot_call(&w.svc, &w.token, "getMe", json!({})).0, 200);
}

#[test]
fn a_storage_failure_before_any_write_fails_that_request_alone() {
    let w = file_world("batch-storage-nowrite");
    // The very first write of the second message (its update) fails, so
    // SQLite undoes that statement and the request has written nothing.
    w.sql(
        "CREATE TRIGGER boom BEFORE INSERT ON updates WHEN json_extract(NEW.data, '$.message.message_id') = '2' \
         BEGIN SELECT RAISE(ABORT, 'boom'); END;",
    );
    let before = w.footprint();
    let out = batch(&w.svc, &[w.send("a"), w.send("b"), w.send("c")]);
    assert_eq!(out[1], error(500, "internal_error", BOOM));
    assert_eq!((out[0].0, out[0].1["result"]["message_id"].as_str()), (200, Some("1")), "{:?}", out[0]);
    // "c" takes number 2 again, which the trigger refuses too: alone as well.
    assert_eq!(out[2], error(500, "internal_error", BOOM));
    assert_eq!(w.footprint().0, before.0 + 1, "only \"a\" was stored");
    w.sql("DROP TRIGGER boom;");
    let (s, v) = bot_call(&w.svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "d"}));
    assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("2")), "{v}");
}

#[test]
fn a_group_that_cannot_begin_answers_500_but_routing_refusals_as_alone() {
    let w = file_world("batch-storage-busy");
    let garbage = b"garbage".to_vec();
    let before = w.footprint();
    // Another writer holds the lock past the service's busy timeout.
    let other = Connection::open(&w.db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = batch(&w.svc, &[w.send("a"), garbage, w.user_says("u")]);
    other.execute_batch("ROLLBACK").unwrap();
    let busy = error(500, "internal_error", "internal error, nothing was written; safe to retry");
    assert_eq!(out, vec![busy.clone(), error(400, "invalid_request", "incomplete HTTP request"), busy]);
    assert_eq!(w.footprint(), before);
    w.next_send_takes_number_one();
}

fn statuses_of(out: &[(u16, Value)]) -> Vec<u16> {
    out.iter().map(|(s, _)| *s).collect()
}
