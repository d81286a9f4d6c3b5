//! Group commit when storage itself fails. A request that fails in storage
//! after the group has written is undone with the whole group: every
//! request of the group is answered 500 and nothing is committed. One that
//! fails before writing anything is answered 500 alone, as any refusal.
//!
//! SQLite is made to fail where the test wants by a trigger, created through
//! a second connection to the same database file.

mod common;

use botspace::{Config, Service};
use common::{admin, bot_call, bot_request, split, TempDir};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::PathBuf;

const SECRET: &str = "batch-storage-secret-001";

struct World {
    _dir: TempDir,
    db: PathBuf,
    svc: Service,
    token: String,
    chat: String,
}

fn world(tag: &str) -> World {
    let dir = TempDir::new(tag);
    let db = dir.0.join("bots.db");
    let cfg = json!({"database": db.to_str().unwrap(), "admin_secret": SECRET, "clock": "manual"});
    let svc = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b", "quota_tier": "official"}));
    let token = b["token"].as_str().unwrap().to_string();
    let chat = admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": b["bot"]["id"]}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    World { _dir: dir, db, svc, token, chat }
}

impl World {
    fn send(&self, text: &str) -> Vec<u8> {
        bot_request(&self.token, "sendMessage", json!({"chat_id": self.chat, "text": text}))
    }

    fn sql(&self, sql: &str) {
        Connection::open(&self.db).unwrap().execute_batch(sql).unwrap();
    }

    /// (messages, bot events, host updates) rows.
    fn rows(&self) -> (i64, i64, i64) {
        let c = Connection::open(&self.db).unwrap();
        let n = |t: &str| c.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0)).unwrap();
        (n("messages"), n("bot_events"), n("updates"))
    }
}

fn error(status: u16, code: &str, description: &str) -> (u16, Value) {
    (status, json!({"ok": false, "error_code": status, "error": code, "description": description}))
}

const BOOM: &str = "internal error, nothing was written; safe to retry (boom)";
const NOT_RUN: &str = "internal error, nothing was written; safe to retry \
                       (an earlier request of the batch failed in storage; nothing was written)";

#[test]
fn a_storage_failure_after_a_write_undoes_the_whole_group() {
    let w = world("batch-mid");
    // The message insert fails after the chat's message counter moved.
    w.sql(
        "CREATE TRIGGER boom BEFORE INSERT ON messages WHEN NEW.text = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
    );
    let before = w.rows();
    let reqs = [w.send("a"), w.send("boom"), w.send("c")];
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let out: Vec<(u16, Value)> = w.svc.handle_batch(&refs).iter().map(|r| split(r)).collect();
    assert_eq!(
        out,
        vec![
            error(500, "internal_error", BOOM),
            error(500, "internal_error", BOOM),
            error(500, "internal_error", NOT_RUN),
        ]
    );
    assert_eq!(w.rows(), before, "nothing of the group was committed");
    // Numbering was not consumed, and the service goes on.
    let (s, v) = bot_call(&w.svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "d"}));
    assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("1")), "{v}");
    assert_eq!(bot_call(&w.svc, &w.token, "getMe", json!({})).0, 200);
}

#[test]
fn a_storage_failure_in_the_first_request_after_its_write_undoes_the_group() {
    let w = world("batch-first");
    w.sql(
        "CREATE TRIGGER boom BEFORE INSERT ON messages WHEN NEW.text = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
    );
    let before = w.rows();
    let reqs = [w.send("boom"), w.send("b")];
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let out: Vec<(u16, Value)> = w.svc.handle_batch(&refs).iter().map(|r| split(r)).collect();
    assert_eq!(out, vec![error(500, "internal_error", BOOM), error(500, "internal_error", NOT_RUN)]);
    assert_eq!(w.rows(), before);
}

#[test]
fn a_storage_failure_before_any_write_fails_that_request_alone() {
    let w = world("batch-nowrite");
    // The very first write of the second message (its number) fails, so
    // SQLite undoes that statement and the request has written nothing.
    w.sql(
        "CREATE TRIGGER boom BEFORE UPDATE OF last_message_id ON chats WHEN NEW.last_message_id = 2 \
         BEGIN SELECT RAISE(ABORT, 'boom'); END;",
    );
    let before = w.rows();
    let reqs = [w.send("a"), w.send("b"), w.send("c")];
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    let out: Vec<(u16, Value)> = w.svc.handle_batch(&refs).iter().map(|r| split(r)).collect();
    assert_eq!(out[1], error(500, "internal_error", BOOM));
    assert_eq!((out[0].0, out[0].1["result"]["message_id"].as_str()), (200, Some("1")), "{:?}", out[0]);
    // "c" takes number 2 again, which the trigger refuses too: alone as well.
    assert_eq!(out[2], error(500, "internal_error", BOOM));
    let after = w.rows();
    assert_eq!(after.0, before.0 + 1, "only \"a\" was stored");
    w.sql("DROP TRIGGER boom;");
    let (s, v) = bot_call(&w.svc, &w.token, "sendMessage", json!({"chat_id": w.chat, "text": "d"}));
    assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("2")), "{v}");
}
