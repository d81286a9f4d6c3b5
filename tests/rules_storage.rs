//! Storage rules: tokens are stored only as SHA-256, file databases persist,
//! export/import round-trips and refuses garbage without changing state, and
//! deleted text is no longer served anywhere.

mod common;

use botspace::{ClockKind, Config, GatewayOutput, Service};
use common::{admin, bot_call, TempDir};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

const SECRET: &str = "rules-admin-secret-0001";
const OP_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn open(database: &str) -> Service {
    let cfg = json!({"database": database, "admin_secret": SECRET, "clock": "manual", "operational_key": OP_KEY});
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

/// All bytes of every file in `dir` (database, WAL, shared memory).
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            out.extend(std::fs::read(&p).unwrap());
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn tokens_are_stored_only_as_sha256() {
    let dir = TempDir::new("tokens");
    let db = dir.0.join("bots.db");
    let db_s = db.to_str().unwrap().to_string();
    let mut tokens = Vec::new();
    let (free_id, free_tok, off_tok);
    {
        let svc = open(&db_s);
        let free = admin(&svc, SECRET, "createBot", json!({"display_name": "F", "handle": "f"}));
        let off = admin(
            &svc,
            SECRET,
            "createBot",
            json!({"display_name": "O", "handle": "o", "quota_tier": "official", "official": true}),
        );
        free_id = free["bot"]["id"].as_str().unwrap().to_string();
        let old = free["token"].as_str().unwrap().to_string();
        tokens.push(old.clone());
        let rotated =
            admin(&svc, SECRET, "rotateBotToken", json!({"bot_id": free_id}))["token"].as_str().unwrap().to_string();
        tokens.push(rotated.clone());
        free_tok = rotated;
        off_tok = off["token"].as_str().unwrap().to_string();
        tokens.push(off_tok.clone());
        // While the service is open (data may still sit in the WAL) ...
        let bytes = all_bytes(&dir.0);
        for t in &tokens {
            assert!(!contains(&bytes, t.as_bytes()), "token {t} appears in the database files");
            assert!(
                !contains(&bytes, &t.as_bytes()[4..]),
                "the random part of token {t} appears in the database files"
            );
        }
        assert!(contains(&bytes, &Sha256::digest(free_tok.as_bytes())), "the SHA-256 of the current token is stored");
        assert!(
            contains(&bytes, &Sha256::digest(off_tok.as_bytes())),
            "the SHA-256 of the official bot's token is stored"
        );
        assert!(!contains(&bytes, SECRET.as_bytes()), "the admin secret is not stored");
        assert!(!contains(&bytes, OP_KEY.as_bytes()), "the operational key is not stored");
        assert!(!contains(&bytes, &hex32(OP_KEY)), "the operational key is not stored");
    }
    // ... and after it closed.
    let bytes = all_bytes(&dir.0);
    for t in &tokens {
        assert!(!contains(&bytes, t.as_bytes()), "token {t} appears in the closed database files");
    }
    assert!(contains(&bytes, &Sha256::digest(free_tok.as_bytes())));
    // Reopened, the database still authenticates the current tokens only, and
    // the official bot's operational copy still opens.
    let svc = open(&db_s);
    assert_eq!(bot_call(&svc, &free_tok, "getMe", json!({})).0, 200);
    assert_eq!(bot_call(&svc, &tokens[0], "getMe", json!({})).1["error"], "invalid_token");
    assert_eq!(bot_call(&svc, &off_tok, "getMe", json!({})).0, 200);
    let off_id = bot_call(&svc, &off_tok, "getMe", json!({})).1["result"]["id"].as_str().unwrap().to_string();
    assert_eq!(admin(&svc, SECRET, "getOperationalToken", json!({"bot_id": off_id}))["token"], off_tok.as_str());
    assert_eq!(admin(&svc, SECRET, "getBot", json!({"bot_id": free_id}))["id"], free_id.as_str());
}

fn hex32(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A populated service: (bot token, private chat, group).
fn populate(svc: &Service) -> (String, String, String) {
    let u = admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b", "quota_tier": "standard"}));
    let tok = b["token"].as_str().unwrap().to_string();
    let bot_id = b["bot"]["id"].as_str().unwrap().to_string();
    let c = admin(svc, SECRET, "startBot", json!({"user_id": u, "bot_id": bot_id}))["id"].as_str().unwrap().to_string();
    let g = admin(svc, SECRET, "createGroup", json!({"title": "G", "member_ids": [u, bot_id]}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 1..=5 {
        assert_eq!(bot_call(svc, &tok, "sendMessage", json!({"chat_id": c, "text": format!("m{i} é😀")})).0, 200);
    }
    admin(svc, SECRET, "sendUserMessage", json!({"user_id": u, "chat_id": g, "text": "hello group"}));
    assert_eq!(bot_call(svc, &tok, "deleteMessage", json!({"chat_id": c, "message_id": "2"})).0, 200);
    assert_eq!(
        bot_call(svc, &tok, "editMessageText", json!({"chat_id": c, "message_id": "3", "text": "edited"})).0,
        200
    );
    (tok, c, g)
}

fn snapshot(svc: &Service, c: &str, g: &str) -> Value {
    json!({
        "private": admin(svc, SECRET, "getChatHistory", json!({"chat_id": c})),
        "group": admin(svc, SECRET, "getChatHistory", json!({"chat_id": g})),
        "chat": admin(svc, SECRET, "getChat", json!({"chat_id": c})),
    })
}

#[test]
fn export_import_round_trip() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let image = a.export_database().unwrap();
    assert!(image.len() > 1024);
    let before = snapshot(&a, &c, &g);

    let b = open(":memory:");
    b.import_database(&image).unwrap();
    assert_eq!(snapshot(&b, &c, &g), before);
    // The token works in the new service, and numbering continues.
    assert_eq!(bot_call(&b, &tok, "getMe", json!({})).0, 200);
    let (s, v) = bot_call(&b, &tok, "sendMessage", json!({"chat_id": c, "text": "after import"}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["message_id"], "6");
    // Importing over a populated service replaces its state entirely.
    let other = open(":memory:");
    let (other_tok, _, _) = populate(&other);
    other.import_database(&image).unwrap();
    assert_eq!(snapshot(&other, &c, &g), before);
    assert_eq!(bot_call(&other, &other_tok, "getMe", json!({})).1["error"], "invalid_token");
    assert_eq!(bot_call(&other, &tok, "getMe", json!({})).0, 200);

    // A file database exports and imports too, and stays a file.
    let dir = TempDir::new("export");
    let path = dir.0.join("f.db");
    {
        let f = open(path.to_str().unwrap());
        f.import_database(&image).unwrap();
        assert_eq!(snapshot(&f, &c, &g), before);
        let again = f.export_database().unwrap();
        let m = open(":memory:");
        m.import_database(&again).unwrap();
        assert_eq!(snapshot(&m, &c, &g), before);
    }
    let f = open(path.to_str().unwrap());
    assert_eq!(snapshot(&f, &c, &g), before, "the imported state persisted in the file");
}

/// One request's status, headers (lower-case names) and body.
fn http(svc: &Service, path: &str, auth: &str, content_type: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let out = svc.handle_request(&req);
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(out[..end].to_vec()).unwrap().to_ascii_lowercase();
    (head[9..12].parse().unwrap(), head, out[end + 4..].to_vec())
}

#[test]
fn export_and_import_over_http_round_trip_the_whole_state() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let before = snapshot(&a, &c, &g);
    let auth = format!("Admin {SECRET}");
    let (status, head, image) = http(&a, "/admin/exportDatabase", &auth, "application/json", b"{}");
    assert_eq!(status, 200);
    assert!(head.contains("\r\ncontent-type: application/vnd.sqlite3\r\n"), "{head}");
    assert!(head.contains("\r\ncache-control: no-store"), "{head}");
    assert!(image.starts_with(b"SQLite format 3\0"));

    // An image larger than max_body_bytes (4 KiB here) is taken on this
    // path: its limit is max_import_bytes.
    let cfg = json!({"admin_secret": SECRET, "clock": "manual", "max_body_bytes": 4096});
    let b = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    assert!(image.len() > 4096);
    let (status, _, body) = http(&b, "/admin/importDatabase", &auth, "application/vnd.sqlite3", &image);
    assert_eq!((status, serde_json::from_slice::<Value>(&body).unwrap()), (200, json!({"ok": true, "result": true})));
    assert_eq!(snapshot(&b, &c, &g), before);
    assert_eq!(bot_call(&b, &tok, "getMe", json!({})).0, 200);
    // Another path keeps max_body_bytes.
    let (status, _, body) = http(&b, "/admin/getStats", &auth, "application/json", &image);
    assert_eq!(
        (status, serde_json::from_slice::<Value>(&body).unwrap()["error"].clone()),
        (413, json!("payload_too_large"))
    );
    // A wrong secret changes nothing.
    let c2 = open(":memory:");
    let (status, _, body) =
        http(&c2, "/admin/importDatabase", "Admin wrong-secret-0000000000", "application/vnd.sqlite3", &image);
    assert_eq!(
        (status, serde_json::from_slice::<Value>(&body).unwrap()["error"].clone()),
        (401, json!("invalid_token"))
    );
    assert_eq!(admin(&c2, SECRET, "getStats", json!({}))["bots"], 0);

    // The body limit a host that reads bodies whole asks for: the image's
    // only with the host credential.
    assert_eq!(b.body_limit("/admin/importDatabase", Some(auth.as_bytes())), 1 << 30);
    assert_eq!(b.body_limit("/admin/importDatabase", Some(b"Admin wrong-secret-0000000000")), 4096);
    assert_eq!(b.body_limit("/admin/importDatabase", None), 4096);
    assert_eq!(b.body_limit("/admin/getStats", Some(auth.as_bytes())), 4096);

    // getStorageStats reports the host's own figures under `host`.
    b.set_host_stats(Some(Arc::new(|| vec![("alarms".to_string(), 3)])));
    let (status, _, body) = http(&b, "/admin/getStorageStats", &auth, "application/json", b"");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, &v["result"]["host"]), (200, &json!({"alarms": 3})));
    assert!(v["result"]["requests"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn garbage_images_are_refused_without_changing_state() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let good = a.export_database().unwrap();
    let before = snapshot(&a, &c, &g);
    let before_updates = admin(&a, SECRET, "getUpdates", json!({"limit": 1000}));

    let mut flipped = good.clone();
    for i in (good.len() / 2..good.len()).step_by(97) {
        flipped[i] ^= 0x5a;
    }
    let foreign = {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('x');",
        )
        .unwrap();
        conn.serialize(rusqlite::MAIN_DB).unwrap().to_vec()
    };
    let candidates: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("text", b"garbage".to_vec()),
        ("random", (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("header only", good[..100].to_vec()),
        ("corrupted pages", flipped),
        ("another SQLite database", foreign),
    ];
    for (what, bytes) in candidates {
        assert!(a.import_database(&bytes).is_err(), "a {what} image was accepted");
        assert_eq!(snapshot(&a, &c, &g), before, "state changed after refusing a {what} image");
        assert_eq!(bot_call(&a, &tok, "getMe", json!({})).0, 200, "token lost after refusing a {what} image");
    }
    assert_eq!(admin(&a, SECRET, "getUpdates", json!({"limit": 1000})), before_updates);
    // Still writable, numbering intact.
    let (s, v) = bot_call(&a, &tok, "sendMessage", json!({"chat_id": c, "text": "still here"}));
    assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("6")), "{v}");
}

/// `image` copied into a new database of another page size (an in-memory
/// database cannot be vacuumed to one).
fn with_page_size(image: &[u8], size: u32) -> Vec<u8> {
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch(&format!("PRAGMA page_size = {size}; ATTACH ':memory:' AS src;")).unwrap();
    conn.deserialize_read_exact(c"src", image, image.len(), true).unwrap();
    let tables: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM src.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (name, sql) in &tables {
        conn.execute_batch(sql).unwrap();
        conn.execute_batch(&format!("INSERT INTO main.{name} SELECT * FROM src.{name};")).unwrap();
    }
    let others: Vec<String> = conn
        .prepare("SELECT sql FROM src.sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for sql in others {
        conn.execute_batch(&sql).unwrap();
    }
    let version: i64 = conn.query_row("PRAGMA src.user_version", [], |r| r.get(0)).unwrap();
    conn.execute_batch(&format!("DELETE FROM main.sqlite_sequence; INSERT INTO main.sqlite_sequence SELECT * FROM src.sqlite_sequence; PRAGMA main.user_version = {version}; DETACH src;")).unwrap();
    conn.serialize(rusqlite::MAIN_DB).unwrap().to_vec()
}

/// `image` with its schema rewritten by `sql` (in a scratch connection).
fn rewrite_image(image: &[u8], sql: &str) -> Vec<u8> {
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.deserialize_read_exact(rusqlite::MAIN_DB, image, image.len(), false).unwrap();
    conn.execute_batch(sql).unwrap();
    conn.serialize(rusqlite::MAIN_DB).unwrap().to_vec()
}

#[test]
fn an_image_from_a_newer_library_is_refused_without_changing_state() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let before = snapshot(&a, &c, &g);
    let newer = rewrite_image(&a.export_database().unwrap(), "PRAGMA user_version = 99;");
    let e = a.import_database(&newer).unwrap_err();
    assert_eq!((e.status(), e.code()), (400, botspace::ErrorCode::InvalidRequest));
    assert_eq!(e.description(), "database image refused: it has schema version 99; this library reads up to 8");
    assert_eq!(snapshot(&a, &c, &g), before);
    assert_eq!(bot_call(&a, &tok, "getMe", json!({})).0, 200);
}

#[test]
fn an_image_of_an_older_schema_is_migrated_on_import() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let before = snapshot(&a, &c, &g);
    let v1 = rewrite_image(
        &a.export_database().unwrap(),
        "DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; DROP TABLE webhooks; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; ALTER TABLE bots DROP COLUMN handle_key; \
         DROP TABLE audit_log; DROP INDEX bots_by_created; DROP INDEX users_by_created; DROP INDEX chats_by_created; \
         ALTER TABLE messages DROP COLUMN created_update; ALTER TABLE bots DROP COLUMN pruned_seq; \
         ALTER TABLE bots DROP COLUMN kept_since_ms; PRAGMA user_version = 1;",
    );
    let b = open(":memory:");
    b.import_database(&v1).unwrap();
    assert_eq!(snapshot(&b, &c, &g), before);
    let (s, v) = bot_call(&b, &tok, "sendMessage", json!({"chat_id": c, "text": "after import"}));
    assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("6")), "{v}");
    let exported = b.export_database().unwrap();
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.deserialize_read_exact(rusqlite::MAIN_DB, &exported[..], exported.len(), true).unwrap();
    assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 8);
    assert_eq!(conn.query_row("SELECT count(pruned_seq) FROM bots", [], |r| r.get::<_, i64>(0)).unwrap(), 1);
}

#[test]
fn a_message_sent_before_version_3_is_still_scrubbed_when_deleted() {
    let a = open(":memory:");
    let (tok, c, _) = populate(&a);
    let secret = "written-by-version-2-scrub-me";
    let (s, v) = bot_call(&a, &tok, "sendMessage", json!({"chat_id": c, "text": secret}));
    assert_eq!(s, 200, "{v}");
    let mid = v["result"]["message_id"].as_str().unwrap().to_string();
    // What version 2 wrote: the update found through its reference
    // columns, no created_update on the message.
    let v2 = rewrite_image(
        &a.export_database().unwrap(),
        "UPDATE updates SET ref_chat = json_extract(data, '$.message.chat.id'), \
         ref_message = CAST(json_extract(data, '$.message.message_id') AS INTEGER) WHERE type = 'message_created'; \
         DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; \
         DROP TABLE webhooks; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; ALTER TABLE bots DROP COLUMN handle_key; \
         DROP TABLE audit_log; DROP INDEX bots_by_created; DROP INDEX users_by_created; DROP INDEX chats_by_created; \
         ALTER TABLE messages DROP COLUMN created_update; PRAGMA user_version = 2;",
    );
    let b = open(":memory:");
    b.import_database(&v2).unwrap();
    let ups = admin(&b, SECRET, "getUpdates", json!({"offset": 0, "limit": 1000})).to_string();
    assert!(ups.contains(secret), "the test must see the text before deleting it");
    assert_eq!(bot_call(&b, &tok, "deleteMessage", json!({"chat_id": c, "message_id": mid})).0, 200);
    let ups = admin(&b, SECRET, "getUpdates", json!({"offset": 0, "limit": 1000})).to_string();
    assert!(!ups.contains(secret), "an update written by version 2 still serves deleted text: {ups}");
}

#[test]
fn deleted_text_is_no_longer_served_by_the_host_api() {
    let svc = open(":memory:");
    let (tok, c, _) = populate(&svc);
    let secret = "do-not-serve-me-0123";
    let (s, v) = bot_call(&svc, &tok, "sendMessage", json!({"chat_id": c, "text": secret}));
    assert_eq!(s, 200);
    let mid = v["result"]["message_id"].as_str().unwrap().to_string();
    let (s, v) = bot_call(
        &svc,
        &tok,
        "editMessageText",
        json!({"chat_id": c, "message_id": mid, "text": format!("{secret} (edited)")}),
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(bot_call(&svc, &tok, "deleteMessage", json!({"chat_id": c, "message_id": mid})).0, 200);
    let history = admin(&svc, SECRET, "getChatHistory", json!({"chat_id": c})).to_string();
    assert!(!history.contains(secret), "getChatHistory serves deleted text");
    let ups = admin(&svc, SECRET, "getUpdates", json!({"offset": 0, "limit": 1000})).to_string();
    assert!(!ups.contains(secret), "getUpdates still serves the text of a deleted message: {ups}");
}

#[test]
fn deleted_text_is_not_served_by_an_idempotent_retry() {
    let svc = open(":memory:");
    let (tok, c, _) = populate(&svc);
    let secret = "retry-must-not-leak-0123";
    let body = json!({"chat_id": c, "text": secret}).to_string();
    let send = |svc: &Service| {
        let raw = format!(
            "POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot {tok}\r\nIdempotency-Key: k1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let resp = svc.handle_request(raw.as_bytes());
        let end = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        serde_json::from_slice::<Value>(&resp[end + 4..]).unwrap()
    };
    let first = send(&svc);
    assert_eq!(first["result"]["text"], secret);
    let mid = first["result"]["message_id"].as_str().unwrap().to_string();
    assert_eq!(bot_call(&svc, &tok, "deleteMessage", json!({"chat_id": c, "message_id": mid})).0, 200);
    let again = send(&svc);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["result"]["message_id"], mid.as_str(), "the retry answers the original send");
    assert!(!again.to_string().contains(secret), "a retry serves deleted text: {again}");
}

#[test]
fn deleted_text_is_no_longer_served_by_the_gateway_replay() {
    let svc = Arc::new(open(":memory:"));
    let u = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let sender =
        admin(&svc, SECRET, "createBot", json!({"display_name": "S", "handle": "s", "quota_tier": "standard"}));
    let listener = admin(&svc, SECRET, "createBot", json!({"display_name": "L", "handle": "l"}));
    let g = admin(
        &svc,
        SECRET,
        "createGroup",
        json!({"title": "G", "member_ids": [u, sender["bot"]["id"], listener["bot"]["id"]]}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let stok = sender["token"].as_str().unwrap();
    let secret = "gateway-must-not-replay-4567";
    let (s, v) = bot_call(&svc, stok, "sendMessage", json!({"chat_id": g, "text": secret}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(bot_call(&svc, stok, "deleteMessage", json!({"chat_id": g, "message_id": "1"})).0, 200);
    // The listener connects after the deletion and replays its events.
    let ltok = listener["token"].as_str().unwrap();
    let upgrade = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {ltok}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let mut session = match svc.accept_gateway_session(upgrade.as_bytes(), svc.now_ms()) {
        Ok(s) => s,
        Err(resp) => panic!("gateway refused: {}", String::from_utf8_lossy(&resp)),
    };
    let mut frames = Vec::new();
    while let Some(o) = session.poll_transmit() {
        if let GatewayOutput::Text(t) = o {
            frames.push(t);
        }
    }
    let all = frames.join("\n");
    assert!(all.contains("message_deleted"), "the replay has the deletion: {all}");
    assert!(!all.contains(secret), "the gateway replays the text of a deleted message: {all}");
}

fn is_b64url(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

#[test]
fn ids_and_tokens_have_the_documented_shape() {
    let svc = open(":memory:");
    let mut seen = std::collections::HashSet::new();
    for i in 0..20 {
        let u = admin(&svc, SECRET, "createUser", json!({"display_name": format!("U{i}")}))["id"]
            .as_str()
            .unwrap()
            .to_string();
        let b = admin(&svc, SECRET, "createBot", json!({"display_name": "B", "handle": format!("b{i}")}));
        let bot_id = b["bot"]["id"].as_str().unwrap().to_string();
        let token = b["token"].as_str().unwrap().to_string();
        let chat = admin(&svc, SECRET, "createPrivateChat", json!({"user_id": u, "bot_id": bot_id}))["id"]
            .as_str()
            .unwrap()
            .to_string();
        for (id, prefix) in [(&u, "usr_"), (&bot_id, "bot_"), (&chat, "spc_")] {
            let rest = id.strip_prefix(prefix).unwrap_or_else(|| panic!("{id} lacks {prefix}"));
            assert!(is_b64url(rest) && rest.len() * 6 >= 80, "{id}: URL-safe and at least 80 bits");
            assert!(seen.insert(id.clone()), "{id} repeated");
        }
        let rest = token.strip_prefix("bot_").expect("token prefix bot_");
        assert_eq!(rest.len(), 43, "token is bot_ + 43 characters: {token}");
        assert!(is_b64url(rest));
        assert!(seen.insert(token.clone()));
        assert_ne!(token, bot_id);
    }
}

#[test]
fn a_seeded_service_makes_the_same_ids_twice_and_an_unseeded_one_does_not() {
    let open = |seed: Option<u64>| {
        Service::open(Config::default().with(|c| {
            c.admin_secret = "storage-admin-secret-1".into();
            c.clock = ClockKind::Manual;
            c.random_seed = seed;
        }))
        .unwrap()
    };
    let ids = |svc: &Service| {
        let b = admin(svc, "storage-admin-secret-1", "createBot", json!({"display_name": "A", "handle": "a"}));
        (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string())
    };
    assert_eq!(ids(&open(Some(1))), ids(&open(Some(1))));
    assert_ne!(ids(&open(Some(1))), ids(&open(Some(2))));
    assert_ne!(ids(&open(None)), ids(&open(None)));
}

#[test]
fn hostile_images_are_refused_with_400_and_change_nothing() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let image = a.export_database().unwrap();
    let before = snapshot(&a, &c, &g);
    let cases = [
        (
            "a trigger that adds a bot to every new chat",
            "CREATE TRIGGER spy AFTER INSERT ON chats BEGIN \
             INSERT INTO members (chat_id, member_id, is_bot) VALUES (NEW.id, 'bot_attacker', 1); END;",
            "unexpected or altered: [spy]; missing: []",
        ),
        (
            "a trigger that undoes a suspension",
            "CREATE TRIGGER unsuspend AFTER UPDATE OF status ON bots BEGIN \
             UPDATE bots SET status = 'active' WHERE id = NEW.id; END;",
            "unexpected or altered: [unsuspend]; missing: []",
        ),
        ("a view", "CREATE VIEW v AS SELECT * FROM bots;", "unexpected or altered: [v]; missing: []"),
        ("an extra table", "CREATE TABLE extra (x);", "unexpected or altered: [extra]; missing: []"),
        ("an extra index", "CREATE INDEX spy_idx ON messages (text);", "unexpected or altered: [spy_idx]; missing: []"),
        ("a dropped table", "DROP TABLE chat_actions;", "unexpected or altered: []; missing: [chat_actions]"),
    ];
    for (what, sql, detail) in cases {
        let e = a.import_database(&rewrite_image(&image, sql)).unwrap_err();
        assert_eq!((e.status(), e.code()), (400, botspace::ErrorCode::InvalidRequest), "{what}");
        assert_eq!(
            e.description(),
            format!("database image refused: its schema differs from botspace schema version 8 ({detail})"),
            "{what}"
        );
        assert_eq!(snapshot(&a, &c, &g), before, "state changed after refusing {what}");
        assert_eq!(bot_call(&a, &tok, "getMe", json!({})).0, 200, "{what}");
    }
    // Event JSON is spliced into frames as stored: it must be a JSON object.
    for (what, sql) in [
        ("an event that is not JSON", "UPDATE bot_events SET data = '{\"a\":' WHERE seq = 1;"),
        ("an event that is a JSON array", "UPDATE updates SET data = '[1]' WHERE update_id = 1;"),
        ("an event of an unknown type", "UPDATE bot_events SET type = 'x\",\"op\":\"hello' WHERE seq = 1;"),
    ] {
        let e = a.import_database(&rewrite_image(&image, sql)).unwrap_err();
        assert_eq!(
            (e.status(), e.description()),
            (400, "database image refused: 1 stored events are not JSON objects of a known type"),
            "{what}"
        );
        assert_eq!(snapshot(&a, &c, &g), before, "state changed after refusing {what}");
    }
}

#[test]
fn an_image_over_max_import_bytes_is_refused() {
    let cfg = json!({"admin_secret": SECRET, "clock": "manual", "max_import_bytes": 4096});
    let small = Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap();
    let image = open(":memory:").export_database().unwrap();
    assert!(image.len() > 4096);
    let e = small.import_database(&image).unwrap_err();
    assert_eq!(
        (e.status(), e.description()),
        (400, "database image refused: it is larger than max_import_bytes (4096 bytes)")
    );
}

#[test]
fn an_image_of_another_page_size_is_converted_into_a_file_database() {
    let a = open(":memory:");
    let (tok, c, g) = populate(&a);
    let before = snapshot(&a, &c, &g);
    for size in [1024, 8192, 65536] {
        let image = with_page_size(&a.export_database().unwrap(), size);
        assert_eq!(u16::from_be_bytes([image[16], image[17]]) as u32, if size == 65536 { 1 } else { size });
        let dir = TempDir::new("page-size");
        let b = open(dir.0.join("b.db").to_str().unwrap());
        b.import_database(&image).unwrap_or_else(|e| panic!("page size {size}: {}", e.description()));
        assert_eq!(snapshot(&b, &c, &g), before, "page size {size}");
        let (s, v) = bot_call(&b, &tok, "sendMessage", json!({"chat_id": c, "text": "after"}));
        assert_eq!((s, v["result"]["message_id"].as_str()), (200, Some("6")), "{v}");
    }
}

#[test]
fn deleted_text_leaves_the_database_files() {
    let dir = TempDir::new("scrub");
    let svc = open(dir.0.join("s.db").to_str().unwrap());
    let (tok, c, _) = populate(&svc);
    let secret = "scrub-me-7f3a9c-this-text-must-go";
    let (s, v) = bot_call(&svc, &tok, "sendMessage", json!({"chat_id": c, "text": secret}));
    assert_eq!(s, 200, "{v}");
    let id = v["result"]["message_id"].as_str().unwrap().to_string();
    assert!(contains(&all_bytes(&dir.0), secret.as_bytes()), "the test must see the text before deleting it");
    assert_eq!(bot_call(&svc, &tok, "deleteMessage", json!({"chat_id": c, "message_id": id})).0, 200);
    assert!(!contains(&all_bytes(&dir.0), secret.as_bytes()), "deleted text is still in the files (service open)");
    drop(svc);
    assert!(!contains(&all_bytes(&dir.0), secret.as_bytes()), "deleted text is still in the files (closed)");
}

#[test]
fn only_an_in_memory_database_has_calls_that_cannot_block() {
    assert!(!open(":memory:").calls_may_block());
    let dir = TempDir::new("may-block");
    let file = dir.0.join("b.db");
    assert!(open(file.to_str().unwrap()).calls_may_block());
}

/// A database file the library creates, and SQLite's WAL and shared memory
/// beside it, are readable by their owner only; an existing file keeps its
/// mode.
#[cfg(unix)]
#[test]
fn a_new_database_file_and_its_wal_and_shm_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = TempDir::new("mode");
    let db = dir.0.join("b.db");
    let svc = open(db.to_str().unwrap());
    admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}));
    for f in ["b.db", "b.db-wal", "b.db-shm"] {
        // The umask can only take bits away: 0600 or less, never more.
        assert_eq!(mode(&dir.0.join(f)) & !0o600, 0, "{f}: {:o}", mode(&dir.0.join(f)));
        assert_eq!(mode(&dir.0.join(f)) & 0o600, 0o600, "{f}");
    }
    drop(svc);
    // A file that exists is the operator's: its mode stays.
    let other = dir.0.join("shared.db");
    std::fs::write(&other, b"").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o640)).unwrap();
    let svc = open(other.to_str().unwrap());
    admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}));
    assert_eq!(mode(&other), 0o640);
    assert_eq!(mode(&dir.0.join("shared.db-wal")), 0o640, "SQLite copies the main file's mode");
}

/// A webhook's signing secret is stored sealed under the operational key
/// when one is configured: neither the `whsec_` secret nor its key bytes
/// are in the database files, and the reopened service opens it and signs
/// the next delivery with it. Without a key it is stored as is (what a copy of the database
/// exposes, as the docs say).
#[test]
fn a_webhook_secret_is_stored_sealed_under_the_operational_key() {
    for sealed in [true, false] {
        let dir = TempDir::new(if sealed { "whsec-sealed" } else { "whsec-plain" });
        let db = dir.0.join("bots.db");
        let db_s = db.to_str().unwrap().to_string();
        let config = |db: &str| {
            let mut cfg = json!({"database": db, "admin_secret": SECRET, "clock": "manual"});
            if sealed {
                cfg["operational_key"] = json!(OP_KEY);
            }
            Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
        };
        let (token, secret);
        {
            let svc = config(&db_s);
            let bot = admin(&svc, SECRET, "createBot", json!({"display_name": "W", "handle": "w"}));
            token = bot["token"].as_str().unwrap().to_string();
            let (status, set) = bot_call(&svc, &token, "setWebhook", json!({"url": "https://hooks.example/in"}));
            assert_eq!(status, 200, "{set}");
            secret = set["result"]["secret"].as_str().unwrap().to_string();
            assert!(secret.starts_with("whsec_"), "{secret}");
        }
        let bytes = all_bytes(&dir.0);
        let key = &secret.as_bytes()["whsec_".len()..];
        assert_eq!(contains(&bytes, secret.as_bytes()), !sealed, "the secret in the files (sealed: {sealed})");
        assert_eq!(contains(&bytes, key), !sealed, "the secret's key in the files (sealed: {sealed})");
        // Reopened, the same secret signs: setWebhook again keeps it and
        // does not return it.
        let svc = config(&db_s);
        let (status, again) = bot_call(&svc, &token, "setWebhook", json!({"url": "https://hooks.example/in"}));
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["result"]["secret"], Value::Null, "{again}");
        let (_, info) = bot_call(&svc, &token, "getWebhookInfo", json!({}));
        assert_eq!(info["result"]["url"], "https://hooks.example/in");
        // The stored secret opens: the next delivery is signed with it.
        let bot_id = bot_call(&svc, &token, "getMe", json!({})).1["result"]["id"].as_str().unwrap().to_string();
        let user = admin(&svc, SECRET, "createUser", json!({"display_name": "U"}))["id"].as_str().unwrap().to_string();
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot_id}));
        let now = svc.now_ms();
        let r = svc.poll_webhook(now).expect("bot_started is due");
        let key = botspace::webhook::signature::key_of_secret(&secret).unwrap();
        let signed = botspace::webhook::signature::sign(
            &key,
            &r.attempt.webhook_id,
            r.attempt.timestamp_s,
            r.attempt.body.as_bytes(),
        );
        assert_eq!(r.attempt.signature, signed, "sealed: {sealed}");
    }
}
