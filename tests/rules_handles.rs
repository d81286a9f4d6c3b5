//! Bot handles are unique, compared case-insensitively (lowercase; new
//! handles are ASCII, src/rules/names.rs): createBot and updateBot answer 409 `handle_taken` and
//! change nothing; a suspended bot keeps its handle; a bot may change the
//! case of its own. A database written before handles were unique, with
//! bots that share one, opens and keeps them working: the oldest owns the
//! handle, the others keep theirs until renamed. Runs on both stores
//! (scripts/test-postgres.sh).

mod common;

use botspace::{ClockKind, Config, Service};
use common::{admin, admin_request, bot_call, split};
use serde_json::{json, Value};

const SECRET: &str = "handle-rules-secret-01";

fn open(database: &str) -> Service {
    Service::open(Config::default().with(|c| {
        c.admin_secret = SECRET.into();
        c.clock = ClockKind::Manual;
        c.database = database.into();
    }))
    .unwrap()
}

fn call(svc: &Service, method: &str, body: Value) -> (u16, Value) {
    split(&svc.handle_request(&admin_request(SECRET, method, body)))
}

fn taken() -> Value {
    json!({"ok": false, "error_code": 409, "error": "handle_taken",
           "description": "another bot already has this handle (handles compare case-insensitively)",
           "parameters": {"field": "handle"}})
}

/// (bot id, token) of a new bot.
fn create(svc: &Service, name: &str, handle: &str) -> (String, String) {
    let b = admin(svc, SECRET, "createBot", json!({"display_name": name, "handle": handle}));
    (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string())
}

#[test]
fn create_bot_refuses_a_taken_handle_in_any_case_and_writes_nothing() {
    let svc = open(&common::test_database());
    let (a, _) = create(&svc, "Echo", "Echo_Bot");
    let before = admin(&svc, SECRET, "getStats", json!({}));
    for h in ["Echo_Bot", "echo_bot", "ECHO_BOT", "eCHO_bOT"] {
        assert_eq!(call(&svc, "createBot", json!({"display_name": "Other", "handle": h})), (409, taken()), "{h}");
    }
    // Handles are ASCII letters, digits and `_` (src/rules/names.rs): a
    // letter outside a-z is refused before the handle is looked up.
    assert_eq!(
        call(&svc, "createBot", json!({"display_name": "x", "handle": "ÜBERBOT"})),
        (
            400,
            json!({"ok": false, "error_code": 400, "error": "invalid_field",
                   "description": "field handle may contain only letters a-z, digits 0-9 and _ (found U+00DC)",
                   "parameters": {"field": "handle"}})
        )
    );
    assert_eq!(admin(&svc, SECRET, "getStats", json!({}))["bots"], before["bots"]);
    // A refused createBot leaves no audit entry.
    let log = admin(&svc, SECRET, "getAuditLog", json!({}));
    let creates = log["entries"].as_array().unwrap().iter().filter(|e| e["method"] == "createBot").count();
    assert_eq!(creates, 1, "{log}");
    // A different handle is fine; the bot keeps its own spelling.
    let (_, tok) = create(&svc, "Echo 2", "echo_bot_2");
    assert_eq!(bot_call(&svc, &tok, "getMe", json!({})).1["result"]["handle"], "echo_bot_2");
    let got = admin(&svc, SECRET, "getBot", json!({"bot_id": a}));
    assert_eq!(got["handle"], "Echo_Bot", "{got}");
}

#[test]
fn update_bot_refuses_a_taken_handle_and_changes_nothing() {
    let svc = open(&common::test_database());
    let (a, _) = create(&svc, "A", "alpha");
    let (b, tok_b) = create(&svc, "B", "beta");
    // The refusal comes before any field is written: display_name stays.
    assert_eq!(
        call(&svc, "updateBot", json!({"bot_id": b, "display_name": "Renamed", "handle": "ALPHA"})),
        (409, taken())
    );
    let me = bot_call(&svc, &tok_b, "getMe", json!({})).1["result"].clone();
    assert_eq!((me["display_name"].as_str(), me["handle"].as_str()), (Some("B"), Some("beta")));
    // A bot may change the case of its own handle.
    let (s, v) = call(&svc, "updateBot", json!({"bot_id": b, "handle": "Beta"}));
    assert_eq!((s, v["result"]["handle"].as_str()), (200, Some("Beta")), "{v}");
    // A freed handle can be taken: a renames, then b takes a's old one.
    admin(&svc, SECRET, "updateBot", json!({"bot_id": a, "handle": "alpha_2"}));
    let (s, v) = call(&svc, "updateBot", json!({"bot_id": b, "handle": "alpha"}));
    assert_eq!((s, v["result"]["handle"].as_str()), (200, Some("alpha")), "{v}");
    assert_eq!(call(&svc, "createBot", json!({"display_name": "C", "handle": "Beta"})).0, 200, "beta is free again");
    // An unknown bot is 404 before the handle is looked at.
    let (s, v) = call(&svc, "updateBot", json!({"bot_id": "bot_nope", "handle": "alpha"}));
    assert_eq!((s, v["error"].as_str()), (404, Some("bot_not_found")));
}

#[test]
fn a_suspended_bot_keeps_its_handle() {
    let svc = open(&common::test_database());
    let (a, _) = create(&svc, "A", "keeper");
    admin(&svc, SECRET, "updateBot", json!({"bot_id": a, "status": "suspended"}));
    assert_eq!(call(&svc, "createBot", json!({"display_name": "B", "handle": "KEEPER"})), (409, taken()));
    admin(&svc, SECRET, "updateBot", json!({"bot_id": a, "status": "active"}));
    assert_eq!(admin(&svc, SECRET, "getBot", json!({"bot_id": a}))["handle"], "keeper");
}

/// Three bots whose handles were made to clash (as a database written
/// before handles were unique could hold them): `ids` oldest first.
struct Clash {
    ids: Vec<String>,
    tokens: Vec<String>,
}

fn clashing_bots(svc: &Service) -> Clash {
    let mut c = Clash { ids: vec![], tokens: vec![] };
    for (i, h) in ["dup_one", "dup_two", "dup_three"].iter().enumerate() {
        let (id, tok) = create(svc, &format!("Dup {i}"), h);
        c.ids.push(id);
        c.tokens.push(tok);
        admin(svc, SECRET, "advanceClock", json!({"seconds": 1}));
    }
    c
}

/// The old database opened again: every bot still answers, the oldest owns
/// the shared handle, the others keep it until renamed.
fn check_after_migration(svc: &Service, c: &Clash) {
    for (i, tok) in c.tokens.iter().enumerate() {
        let (s, v) = bot_call(svc, tok, "getMe", json!({}));
        assert_eq!((s, v["result"]["handle"].as_str()), (200, Some(["Dup", "dup", "DUP"][i])), "{v}");
    }
    assert_eq!(call(svc, "createBot", json!({"display_name": "New", "handle": "dup"})), (409, taken()));
    // The bots without the key still change their other fields.
    let (s, v) = call(svc, "updateBot", json!({"bot_id": c.ids[1], "verified": true}));
    assert_eq!((s, v["result"]["handle"].as_str()), (200, Some("dup")), "{v}");
    // Keeping the shared handle under another case is refused; a free one is taken.
    assert_eq!(call(svc, "updateBot", json!({"bot_id": c.ids[2], "handle": "Dup"})), (409, taken()));
    let (s, v) = call(svc, "updateBot", json!({"bot_id": c.ids[2], "handle": "dup_renamed"}));
    assert_eq!((s, v["result"]["handle"].as_str()), (200, Some("dup_renamed")), "{v}");
    assert_eq!(call(svc, "createBot", json!({"display_name": "New", "handle": "DUP_RENAMED"})), (409, taken()));
    // The owner renames: the second bot, which still shows the handle,
    // takes it over, so it stays taken.
    admin(svc, SECRET, "updateBot", json!({"bot_id": c.ids[0], "handle": "dup_first"}));
    assert_eq!(call(svc, "createBot", json!({"display_name": "New", "handle": "DUP"})), (409, taken()));
    assert_eq!(call(svc, "updateBot", json!({"bot_id": c.ids[0], "handle": "dup"})), (409, taken()));
    // Once no bot shows it, it is free.
    admin(svc, SECRET, "updateBot", json!({"bot_id": c.ids[1], "handle": "dup_second"}));
    assert_eq!(call(svc, "createBot", json!({"display_name": "New", "handle": "dup"})).0, 200);
}

#[test]
fn a_sqlite_database_with_shared_handles_is_migrated_and_keeps_working() {
    let dir = common::TempDir::new("handles-migrate");
    let db = dir.0.join("bots.db");
    let db = db.to_str().unwrap();
    let svc = open(db);
    let c = clashing_bots(&svc);
    drop(svc);
    {
        // What schema version 4 held: no handle keys, and nothing kept
        // two bots from sharing a handle.
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch(
            "DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; DROP TABLE webhooks; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; ALTER TABLE bots DROP COLUMN handle_key; PRAGMA user_version = 4;",
        )
        .unwrap();
        for (id, h) in c.ids.iter().zip(["Dup", "dup", "DUP"]) {
            conn.execute("UPDATE bots SET handle = ?1 WHERE id = ?2", [h, id.as_str()]).unwrap();
        }
    }
    let svc = open(db);
    let conn = rusqlite::Connection::open(db).unwrap();
    assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 8);
    let keys: Vec<Option<String>> = c
        .ids
        .iter()
        .map(|id| conn.query_row("SELECT handle_key FROM bots WHERE id = ?1", [id], |r| r.get(0)).unwrap())
        .collect();
    assert_eq!(keys, vec![Some("dup".to_string()), None, None], "the oldest owns the handle");
    check_after_migration(&svc, &c);
}

/// Built only with the `pg-tests` feature, which scripts/test-postgres.sh
/// turns on with a server to run it against.
#[cfg(feature = "pg-tests")]
#[test]
fn a_postgres_database_with_shared_handles_is_migrated_and_keeps_working() {
    let url = common::test_database();
    assert!(url.starts_with("postgres://"), "BOTSPACE_TEST_POSTGRES must be set (scripts/with-postgres.sh)");
    let svc = open(&url);
    let c = clashing_bots(&svc);
    drop(svc);
    {
        let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        pg.batch_execute(
            "DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; DROP TABLE updates_pending; DROP TABLE webhooks; DROP TABLE webhook_leases; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; ALTER TABLE bots DROP COLUMN handle_key; UPDATE botspace_schema SET version = 4;",
        )
        .unwrap();
        for (id, h) in c.ids.iter().zip(["Dup", "dup", "DUP"]) {
            pg.execute("UPDATE bots SET handle = $1 WHERE id = $2", &[&h, id]).unwrap();
        }
    }
    let svc = open(&url);
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert_eq!(pg.query_one("SELECT version FROM botspace_schema", &[]).unwrap().get::<_, i64>(0), 9);
    let keys: Vec<Option<String>> = c
        .ids
        .iter()
        .map(|id| pg.query_one("SELECT handle_key FROM bots WHERE id = $1", &[id]).unwrap().get(0))
        .collect();
    assert_eq!(keys, vec![Some("dup".to_string()), None, None], "the oldest owns the handle");
    check_after_migration(&svc, &c);
}
