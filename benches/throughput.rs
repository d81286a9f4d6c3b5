//! Throughput benchmark: `cargo bench --bench throughput` (add `-- --quick`
//! for a shorter, noisier run). See docs/benchmarks.md.
//!
//! Every service figure is printed next to a baseline measured in the same
//! run — bare rusqlite (and, for the gateway, bare tungstenite framing) doing
//! the same rows' work with no service around — so the ratio stays
//! meaningful on a noisy, shared machine. Service and baseline run in
//! interleaved rounds; each side reports its best round.
//!
//! All bots are `official` tier: no rate limits, 16 gateway connections.

use botspace::{Config, GatewayConnection, Service, Synchronous};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tungstenite::protocol::{Role, WebSocketContext};
use tungstenite::Message;

const ADMIN_SECRET: &str = "bench-admin-secret-0123456789";
const BATCH: usize = 64;
const FANOUT_BOTS: usize = 100;
const REPLAY_EVENTS: usize = 100_000;
/// The gateway's read size per poll (botspace::gateway::EVENTS_PER_POLL).
const READ_LIMIT: i64 = 1024;
/// The baseline's event read (the gateway's read, limit written in).
const READ_SQL: &str = "SELECT seq, type, data FROM bot_events WHERE bot_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 1024";

// ---------------------------------------------------------------------------
// Timing

#[derive(Clone, Copy)]
struct Opts {
    warm: Duration,
    round: Duration,
    rounds: usize,
    replay_rounds: usize,
}

type Op<'a> = &'a mut dyn FnMut() -> u64;

/// Calls `f` until `d` has passed; `f` returns how many operations it did.
fn run_for(d: Duration, f: Op<'_>) -> (u64, Duration) {
    let t0 = Instant::now();
    let mut n = 0;
    loop {
        n += f();
        let e = t0.elapsed();
        if e >= d {
            return (n, e);
        }
    }
}

fn rate((n, e): (u64, Duration)) -> f64 {
    n as f64 / e.as_secs_f64()
}

/// Best ops/s of the service and of the baseline, in interleaved rounds.
fn measure(o: &Opts, svc: Op<'_>, base: Option<Op<'_>>) -> (f64, Option<f64>) {
    let mut base = base;
    run_for(o.warm, svc);
    if let Some(b) = base.as_mut() {
        run_for(o.warm, *b);
    }
    let (mut best_s, mut best_b) = (0f64, 0f64);
    for _ in 0..o.rounds {
        best_s = best_s.max(rate(run_for(o.round, svc)));
        if let Some(b) = base.as_mut() {
            best_b = best_b.max(rate(run_for(o.round, *b)));
        }
    }
    (best_s, base.map(|_| best_b))
}

// ---------------------------------------------------------------------------
// Results table

enum Target {
    None,
    /// ops/s at least this.
    Abs(f64),
    /// ops/s at least this fraction of the baseline.
    Ratio(f64),
}

struct Row {
    case: String,
    ops: f64,
    base: Option<f64>,
    target: Target,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        self.base.filter(|b| *b > 0.0).map(|b| self.ops / b)
    }
    fn verdict(&self) -> &'static str {
        match self.target {
            Target::None => "info",
            Target::Abs(t) => pass(self.ops >= t),
            Target::Ratio(t) => pass(self.ratio().is_some_and(|r| r >= t)),
        }
    }
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

fn fmt_rate(v: f64) -> String {
    let s = format!("{:.0}", v);
    // thousands separators
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn print_table(rows: &[Row]) {
    let w = rows.iter().map(|r| r.case.chars().count()).max().unwrap_or(4).max(4);
    println!();
    println!(
        "| {:<w$} | {:>12} | {:>14} | {:>6} | {:>16} | {:<6} |",
        "case", "ops/s", "baseline ops/s", "ratio", "target", "result"
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|",
        "-".repeat(w + 2),
        "-".repeat(14),
        "-".repeat(16),
        "-".repeat(8),
        "-".repeat(18),
        "-".repeat(8)
    );
    for r in rows {
        let base = r.base.map(fmt_rate).unwrap_or_else(|| "—".into());
        let ratio = r.ratio().map(|x| format!("{:.0} %", x * 100.0)).unwrap_or_else(|| "—".into());
        let target = match r.target {
            Target::None => "—".to_string(),
            Target::Abs(t) => format!("≥ {}/s", fmt_rate(t)),
            Target::Ratio(t) => format!("≥ {:.0} % of base", t * 100.0),
        };
        println!(
            "| {:<w$} | {:>12} | {:>14} | {:>6} | {:>16} | {:<6} |",
            r.case,
            fmt_rate(r.ops),
            base,
            ratio,
            target,
            r.verdict()
        );
    }
    println!();
}

// ---------------------------------------------------------------------------
// Talking to the service

fn http(path: &str, auth: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn upgrade_request(token: &str) -> Vec<u8> {
    format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: bench\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

fn is_200(resp: &[u8]) -> bool {
    resp.starts_with(b"HTTP/1.1 200 ")
}

fn body_of(resp: &[u8]) -> &[u8] {
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("response head") + 4;
    &resp[at..]
}

#[track_caller]
fn expect_200(resp: &[u8]) {
    if !is_200(resp) {
        panic!("unexpected response: {}", String::from_utf8_lossy(resp));
    }
}

fn result_of(resp: &[u8]) -> Value {
    expect_200(resp);
    let v: Value = serde_json::from_slice(body_of(resp)).expect("JSON body");
    v["result"].clone()
}

fn admin(svc: &Service, method: &str, body: Value) -> Value {
    result_of(&svc.handle_request(&http(
        &format!("/admin/{method}"),
        &format!("Admin {ADMIN_SECRET}"),
        &body.to_string(),
    )))
}

/// One `handle_batch`, every answer a 200; the requests it ran.
fn batch_of_200s(svc: &Service, batch: &[&[u8]]) -> u64 {
    for r in handle_all(svc, batch) {
        if !is_200(&r) {
            expect_200(&r);
        }
    }
    batch.len() as u64
}

fn bot_call(token: &str, method: &str, body: &str) -> Vec<u8> {
    http(&format!("/bot/{method}"), &format!("Bot {token}"), body)
}

fn s(v: &Value) -> String {
    v.as_str().expect("string").to_string()
}

#[derive(Clone, Copy)]
enum Store {
    Memory,
    File(Synchronous),
}

impl Store {
    fn label(self) -> &'static str {
        match self {
            Store::Memory => ":memory:",
            Store::File(Synchronous::Full) => "file sync=full",
            Store::File(Synchronous::Normal) => "file sync=normal",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Store::Memory => "mem",
            Store::File(Synchronous::Full) => "full",
            Store::File(Synchronous::Normal) => "normal",
        }
    }
    fn sync(self) -> Synchronous {
        match self {
            Store::Memory => Synchronous::Full,
            Store::File(s) => s,
        }
    }
}

fn remove_db(p: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
}

fn open_service(store: Store, dir: &Path, name: &str) -> Arc<Service> {
    let database = match store {
        Store::Memory => ":memory:".to_string(),
        Store::File(_) => {
            let p = dir.join(format!("{name}.db"));
            remove_db(&p);
            p.to_string_lossy().into_owned()
        }
    };
    let config = Config::default().with(|c| {
        c.database = database;
        c.admin_secret = ADMIN_SECRET.into();
        c.synchronous = store.sync();
    });
    Arc::new(Service::open(config).expect("open service"))
}

struct Official {
    id: String,
    token: String,
}

fn create_official_bot(svc: &Service, n: usize) -> Official {
    let r = admin(
        svc,
        "createBot",
        json!({"display_name": format!("Bench bot {n}"), "handle": format!("bench_bot_{n}"), "quota_tier": "official"}),
    );
    Official { id: s(&r["bot"]["id"]), token: s(&r["token"]) }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

// ---------------------------------------------------------------------------
// Bare rusqlite: a copy of the service's database with the same pragmas

/// A bare connection holding a copy of the service's schema and rows,
/// configured as botspace configures its own (WAL, the same synchronous
/// level, page size and checkpoint interval, the same statement cache
/// size, the query planner stability guarantee so cached plans are kept).
fn bare_clone(svc: &Service, path: Option<&Path>, sync: Synchronous) -> Connection {
    let mut image = svc.export_database().expect("export");
    // A WAL database image must be read as a rollback-journal one in memory.
    if image.len() >= 100 && image[18] == 2 && image[19] == 2 {
        image[18] = 1;
        image[19] = 1;
    }
    let mut conn = match path {
        None => Connection::open_in_memory().unwrap(),
        Some(p) => {
            remove_db(p);
            Connection::open(p).unwrap()
        }
    };
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).unwrap();
    if path.is_some() {
        conn.execute_batch("PRAGMA page_size = 2048;").unwrap();
    }
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    conn.execute_batch(match sync {
        Synchronous::Full => "PRAGMA synchronous = FULL;",
        Synchronous::Normal => "PRAGMA synchronous = NORMAL;",
    })
    .unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF; PRAGMA busy_timeout = 5000; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 10000;",
    )
    .unwrap();
    conn.set_prepared_statement_cache_capacity(128);

    conn.execute_batch("ATTACH DATABASE ':memory:' AS img").unwrap();
    let len = image.len();
    conn.deserialize_read_exact("img", &image[..], len, true).unwrap();
    let objects: Vec<(String, String, String)> = conn
        .prepare("SELECT type, name, sql FROM img.sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let version: i64 = conn.query_row("PRAGMA img.user_version", [], |r| r.get(0)).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for (kind, name, sql) in &objects {
        if kind == "table" {
            conn.execute_batch(sql).unwrap();
            conn.execute_batch(&format!("INSERT INTO main.\"{name}\" SELECT * FROM img.\"{name}\"")).unwrap();
        }
    }
    let has_seq: bool = conn
        .query_row("SELECT count(*) FROM img.sqlite_master WHERE name = 'sqlite_sequence'", [], |r| r.get::<_, i64>(0))
        .unwrap()
        > 0;
    if has_seq {
        conn.execute_batch(
            "DELETE FROM main.sqlite_sequence; INSERT INTO main.sqlite_sequence SELECT * FROM img.sqlite_sequence",
        )
        .unwrap();
    }
    for (kind, _, sql) in &objects {
        if kind != "table" {
            conn.execute_batch(sql).unwrap();
        }
    }
    conn.execute_batch(&format!("PRAGMA main.user_version = {version}")).unwrap();
    conn.execute_batch("COMMIT; DETACH DATABASE img;").unwrap();
    conn
}

fn exec(conn: &Connection, sql: &str) {
    conn.prepare_cached(sql).unwrap().execute([]).unwrap();
}

#[allow(clippy::too_many_arguments)]
fn message_json(
    message_id: i64,
    chat_id: &str,
    chat_type: &str,
    date: i64,
    text: &str,
    from: &str,
    is_bot: bool,
    edit_date: Option<i64>,
) -> String {
    let mut m = format!(
        "{{\"message_id\":\"{message_id}\",\"chat\":{{\"id\":\"{chat_id}\",\"type\":\"{chat_type}\"}},\"date\":{date},\"text\":\"{text}\",\"from\":{{\"id\":\"{from}\",\"is_bot\":{is_bot}}}"
    );
    if let Some(e) = edit_date {
        m.push_str(&format!(",\"edit_date\":{e}"));
    }
    m.push('}');
    m
}

/// The rows a sendMessage writes in a private chat (schema 3): the next
/// number read from the chat's last message, the host-stream update, the
/// message keeping the update's id, the end of the bot's chat action. (A
/// private chat has no other bot member, so no bot events.)
fn bare_send(conn: &Connection, chat_id: &str, bot_id: &str, text: &str) {
    let now = now_ms();
    let date = now / 1000;
    let mid: i64 = conn
        .prepare_cached("SELECT coalesce(max(message_id), 0) + 1 FROM messages WHERE chat_id = ?1")
        .unwrap()
        .query_row([chat_id], |r| r.get(0))
        .unwrap();
    let data = format!("{{\"message\":{}}}", message_json(mid, chat_id, "private", date, text, bot_id, true, None));
    let update: i64 = conn
        .prepare_cached("INSERT INTO updates (created_at_ms, type, data) VALUES (?1, ?2, ?3) RETURNING update_id")
        .unwrap()
        .query_row(params![now, "message_created", data], |r| r.get(0))
        .unwrap();
    conn.prepare_cached(
        "INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to, created_update) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .unwrap()
    .execute(params![chat_id, mid, bot_id, true, text, date, Option::<i64>::None, update])
    .unwrap();
    conn.prepare_cached("DELETE FROM chat_actions WHERE chat_id = ?1 AND bot_id = ?2")
        .unwrap()
        .execute([chat_id, bot_id])
        .unwrap();
}

/// The rows an editMessageText writes: the new text and edit date, and the
/// host-stream update (no other bot member in a private chat).
fn bare_edit(conn: &Connection, chat_id: &str, bot_id: &str, message_id: i64, text: &str) {
    let now = now_ms();
    let date = now / 1000;
    conn.prepare_cached("UPDATE messages SET text = ?1, edit_date = ?2 WHERE chat_id = ?3 AND message_id = ?4")
        .unwrap()
        .execute(params![text, date, chat_id, message_id])
        .unwrap();
    let data = format!(
        "{{\"message\":{}}}",
        message_json(message_id, chat_id, "private", date, text, bot_id, true, Some(date))
    );
    conn.prepare_cached("INSERT INTO updates (created_at_ms, type, data) VALUES (?1, ?2, ?3)")
        .unwrap()
        .execute(params![now, "message_edited", data])
        .unwrap();
}

// ---------------------------------------------------------------------------
// WebSocket helpers

/// A Vec-backed stream for tungstenite: writes append, reads would block.
#[derive(Default)]
struct VecIo(Vec<u8>);

impl Read for VecIo {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

impl Write for VecIo {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Counts unmasked server text frames in `buf`.
fn count_text_frames(buf: &[u8]) -> u64 {
    let mut i = 0;
    let mut n = 0;
    while i + 2 <= buf.len() {
        let op = buf[i] & 0x0f;
        let mut len = (buf[i + 1] & 0x7f) as usize;
        let mut hdr = 2;
        if len == 126 {
            len = u16::from_be_bytes([buf[i + 2], buf[i + 3]]) as usize;
            hdr = 4;
        } else if len == 127 {
            len = u64::from_be_bytes(buf[i + 2..i + 10].try_into().unwrap()) as usize;
            hdr = 10;
        }
        if buf[i + 1] & 0x80 != 0 {
            hdr += 4;
        }
        if op == 1 {
            n += 1;
        }
        i += hdr + len;
    }
    n
}

/// The event frame exactly as the gateway builds it.
fn event_frame(seq: i64, kind: &str, data: &str) -> String {
    let mut f = String::with_capacity(40 + kind.len() + data.len());
    f.push_str("{\"op\":\"event\",\"seq\":");
    f.push_str(&seq.to_string());
    f.push_str(",\"type\":\"");
    f.push_str(kind);
    f.push_str("\",\"data\":");
    f.push_str(data);
    f.push('}');
    f
}

/// Bare read + framing of one bot's events after `cursor`, 1024 rows per
/// query; returns (frames, bytes) and moves the cursor.
fn bare_deliver(
    conn: &Connection,
    bot_id: &str,
    cursor: &mut i64,
    ws: &mut WebSocketContext,
    io: &mut VecIo,
) -> (u64, u64) {
    let mut frames = 0u64;
    let mut bytes = 0u64;
    loop {
        let mut st = conn.prepare_cached(READ_SQL).unwrap();
        let mut rows = st.query(params![bot_id, *cursor]).unwrap();
        let mut n = 0;
        while let Some(r) = rows.next().unwrap() {
            let seq: i64 = r.get(0).unwrap();
            let kind = r.get_ref(1).unwrap().as_str().unwrap();
            let data = r.get_ref(2).unwrap().as_str().unwrap();
            ws.write(io, Message::text(event_frame(seq, kind, data))).unwrap();
            *cursor = seq;
            n += 1;
        }
        ws.flush(io).unwrap();
        frames += n;
        bytes += io.0.len() as u64;
        // Hand the bytes to the "socket".
        io.0.clear();
        if n < READ_LIMIT as u64 {
            return (frames, bytes);
        }
    }
}

/// Polls a connection until it has nothing more to send right now;
/// returns (text frames, bytes).
fn drain(conn: &mut GatewayConnection, now: u64) -> (u64, u64) {
    let (mut frames, mut bytes) = (0, 0);
    conn.handle_timeout(now);
    let mut out = Vec::new();
    while conn.poll_transmit(&mut out) > 0 {
        frames += count_text_frames(&out);
        bytes += out.len() as u64;
        out.clear();
    }
    (frames, bytes)
}

// ---------------------------------------------------------------------------
// Cases

fn request_cases(o: &Opts, dir: &Path, store: Store, rows: &mut Vec<Row>) {
    let label = store.label();
    eprintln!("[bench] REST methods on {label}");
    let svc = open_service(store, dir, &format!("svc-{}", store.tag()));
    let user = admin(&svc, "createUser", json!({"display_name": "Bench user"}));
    let bot = create_official_bot(&svc, 0);
    let chat = admin(&svc, "startBot", json!({"user_id": user["id"], "bot_id": bot.id}));
    let chat_id = s(&chat["id"]);
    let bare_path = match store {
        Store::Memory => None,
        Store::File(_) => Some(dir.join(format!("bare-{}.db", store.tag()))),
    };
    let bare = bare_clone(&svc, bare_path.as_deref(), store.sync());

    // getMe: no baseline, an absolute target.
    let get_me = bot_call(&bot.token, "getMe", "");
    let (ops, _) = measure(
        o,
        &mut || {
            let r = svc.handle_request(&get_me);
            if !is_200(&r) {
                expect_200(&r);
            }
            1
        },
        None,
    );
    let target = if matches!(store, Store::Memory) { Target::Abs(200_000.0) } else { Target::None };
    rows.push(Row { case: format!("getMe [{label}]"), ops, base: None, target });

    // sendMessage, one request per transaction.
    let text = "benchmark message";
    let send = bot_call(&bot.token, "sendMessage", &json!({"chat_id": chat_id, "text": text}).to_string());
    let first = svc.handle_request(&send);
    let first_id: i64 = s(&result_of(&first)["message_id"]).parse().unwrap();
    let (ops, base) = measure(
        o,
        &mut || {
            let r = svc.handle_request(&send);
            if !is_200(&r) {
                expect_200(&r);
            }
            1
        },
        Some(&mut || {
            exec(&bare, "BEGIN IMMEDIATE");
            bare_send(&bare, &chat_id, &bot.id, text);
            exec(&bare, "COMMIT");
            1
        }),
    );
    let target = if matches!(store, Store::Memory) { Target::Ratio(0.40) } else { Target::None };
    rows.push(Row { case: format!("sendMessage [{label}]"), ops, base, target });

    // sendMessage, 64 per transaction (handle_batch vs bare 64 rows' writes per commit).
    let batch: Vec<&[u8]> = (0..BATCH).map(|_| &send[..]).collect();
    let (ops, base) = measure(
        o,
        &mut || batch_of_200s(&svc, &batch),
        Some(&mut || {
            exec(&bare, "BEGIN IMMEDIATE");
            for _ in 0..BATCH {
                bare_send(&bare, &chat_id, &bot.id, text);
            }
            exec(&bare, "COMMIT");
            BATCH as u64
        }),
    );
    let target = if matches!(store, Store::File(Synchronous::Full)) { Target::Ratio(0.40) } else { Target::None };
    rows.push(Row { case: format!("sendMessage batch {BATCH} [{label}]"), ops, base, target });

    // sendMessage, 64 per transaction, each from its own bot into its own
    // private chat: the load of scripts/bench-durable.sh, where every write
    // lands on its chat's own pages.
    let spread: Vec<(Official, String)> = (1..=BATCH)
        .map(|n| {
            let b = create_official_bot(&svc, n);
            let c = admin(&svc, "startBot", json!({"user_id": user["id"], "bot_id": b.id}));
            (b, s(&c["id"]))
        })
        .collect();
    let spread_bare =
        bare_clone(&svc, bare_path.as_deref().map(|p| p.with_extension("spread.db")).as_deref(), store.sync());
    let sends: Vec<Vec<u8>> = spread
        .iter()
        .map(|(b, c)| bot_call(&b.token, "sendMessage", &json!({"chat_id": c, "text": text}).to_string()))
        .collect();
    let batch: Vec<&[u8]> = sends.iter().map(Vec::as_slice).collect();
    let (ops, base) = measure(
        o,
        &mut || batch_of_200s(&svc, &batch),
        Some(&mut || {
            exec(&spread_bare, "BEGIN IMMEDIATE");
            for (b, c) in &spread {
                bare_send(&spread_bare, c, &b.id, text);
            }
            exec(&spread_bare, "COMMIT");
            BATCH as u64
        }),
    );
    rows.push(Row {
        case: format!("sendMessage batch {BATCH}, a chat each [{label}]"),
        ops,
        base,
        target: Target::None,
    });
    drop(spread_bare);
    if let Some(p) = &bare_path {
        remove_db(&p.with_extension("spread.db"));
    }

    // editMessageText: the bot edits its own first message, alternating two texts.
    let texts = ["edited text A", "edited text B"];
    let edits: Vec<Vec<u8>> = texts
        .iter()
        .map(|t| {
            bot_call(
                &bot.token,
                "editMessageText",
                &json!({"chat_id": chat_id, "message_id": first_id.to_string(), "text": t}).to_string(),
            )
        })
        .collect();
    let mut i = 0usize;
    let mut j = 0usize;
    let (ops, base) = measure(
        o,
        &mut || {
            i += 1;
            let r = svc.handle_request(&edits[i & 1]);
            if !is_200(&r) {
                expect_200(&r);
            }
            1
        },
        Some(&mut || {
            j += 1;
            exec(&bare, "BEGIN IMMEDIATE");
            bare_edit(&bare, &chat_id, &bot.id, first_id, texts[j & 1]);
            exec(&bare, "COMMIT");
            1
        }),
    );
    rows.push(Row { case: format!("editMessageText [{label}]"), ops, base, target: Target::None });

    drop(bare);
    drop(svc);
    if let Some(p) = bare_path {
        remove_db(&p);
    }
    if let Store::File(_) = store {
        remove_db(&dir.join(format!("svc-{}.db", store.tag())));
    }
}

/// Split timings of one fan-out round.
#[derive(Default, Clone, Copy)]
struct Split {
    events: u64,
    write: Duration,
    deliver: Duration,
}

fn fanout_case(o: &Opts, rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    eprintln!("[bench] gateway fan-out: 1 human message → group of {FANOUT_BOTS} bots");
    let svc = open_service(Store::Memory, Path::new("."), "");
    let user = admin(&svc, "createUser", json!({"display_name": "Fan-out user"}));
    let user_id = s(&user["id"]);
    let bots: Vec<Official> = (0..FANOUT_BOTS).map(|n| create_official_bot(&svc, n)).collect();
    let mut members = vec![user_id.clone()];
    members.extend(bots.iter().map(|b| b.id.clone()));
    let chat = admin(&svc, "createGroup", json!({"title": "Fan-out", "member_ids": members}));
    let chat_id = s(&chat["id"]);

    let mut conns: Vec<GatewayConnection> = bots
        .iter()
        .map(|b| {
            let acc = svc.accept_gateway(&upgrade_request(&b.token), svc.now_ms());
            assert!(acc.response.starts_with(b"HTTP/1.1 101 "), "{}", String::from_utf8_lossy(&acc.response));
            let mut c = acc.connection.unwrap();
            drain(&mut c, svc.now_ms());
            c
        })
        .collect();

    // The baseline: same rows, bare writes of what sendUserMessage writes,
    // then per bot a bare SELECT + tungstenite framing into its own buffer.
    let bare = bare_clone(&svc, None, Synchronous::Full);
    let mut cursors: Vec<i64> = bots
        .iter()
        .map(|b| bare.query_row("SELECT last_seq FROM bots WHERE id = ?1", [&b.id], |r| r.get(0)).unwrap())
        .collect();
    let mut sockets: Vec<(WebSocketContext, VecIo)> =
        bots.iter().map(|_| (WebSocketContext::new(Role::Server, None), VecIo::default())).collect();

    let text = "hello bots";
    let send = http(
        "/admin/sendUserMessage",
        &format!("Admin {ADMIN_SECRET}"),
        &json!({"user_id": user_id, "chat_id": chat_id, "text": text}).to_string(),
    );
    let svc_split = Rc::new(RefCell::new(Split::default()));
    let bare_split = Rc::new(RefCell::new(Split::default()));
    let mut svc_op = {
        let split = svc_split.clone();
        let svc = svc.clone();
        move || {
            let t0 = Instant::now();
            let r = svc.handle_request(&send);
            if !is_200(&r) {
                expect_200(&r);
            }
            let t1 = Instant::now();
            let now = svc.now_ms();
            let mut frames = 0;
            for c in conns.iter_mut() {
                frames += drain(c, now).0;
            }
            let t2 = Instant::now();
            assert_eq!(frames, FANOUT_BOTS as u64, "one event per bot per message");
            let mut sp = split.borrow_mut();
            sp.events += frames;
            sp.write += t1 - t0;
            sp.deliver += t2 - t1;
            frames
        }
    };
    let bot_ids: Vec<String> = bots.iter().map(|b| b.id.clone()).collect();
    let bare_conn = bare;
    let bare = &bare_conn;
    let mut bare_op = {
        let split = bare_split.clone();
        move || {
            let t0 = Instant::now();
            let now = now_ms();
            let date = now / 1000;
            exec(bare, "BEGIN IMMEDIATE");
            let mid: i64 = bare
                .prepare_cached(
                    "UPDATE chats SET last_message_id = last_message_id + 1 WHERE id = ?1 RETURNING last_message_id",
                )
                .unwrap()
                .query_row([&chat_id], |r| r.get(0))
                .unwrap();
            bare.prepare_cached(
                "INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .unwrap()
            .execute(params![chat_id, mid, user_id, false, text, date, Option::<i64>::None])
            .unwrap();
            let data =
                format!("{{\"message\":{}}}", message_json(mid, &chat_id, "group", date, text, &user_id, false, None));
            bare.prepare_cached("INSERT INTO updates (created_at_ms, type, data) VALUES (?1, ?2, ?3)")
                .unwrap()
                .execute(params![now, "message_created", data])
                .unwrap();
            for b in &bot_ids {
                let seq: i64 = bare
                    .prepare_cached("UPDATE bots SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq")
                    .unwrap()
                    .query_row([b], |r| r.get(0))
                    .unwrap();
                bare.prepare_cached(
                    "INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .unwrap()
                .execute(params![b, seq, now, "message_created", data])
                .unwrap();
            }
            exec(bare, "COMMIT");
            let t1 = Instant::now();
            let mut frames = 0;
            for ((b, cur), (ws, io)) in bot_ids.iter().zip(cursors.iter_mut()).zip(sockets.iter_mut()) {
                frames += bare_deliver(bare, b, cur, ws, io).0;
            }
            let t2 = Instant::now();
            assert_eq!(frames, FANOUT_BOTS as u64);
            let mut sp = split.borrow_mut();
            sp.events += frames;
            sp.write += t1 - t0;
            sp.deliver += t2 - t1;
            frames
        }
    };

    // Interleaved rounds; keep the split of each side's best round.
    run_for(o.warm, &mut svc_op);
    run_for(o.warm, &mut bare_op);
    let (mut best_s, mut best_b) = (Split::default(), Split::default());
    let total = |sp: &Split| sp.events as f64 / (sp.write + sp.deliver).as_secs_f64().max(1e-9);
    for _ in 0..o.rounds {
        *svc_split.borrow_mut() = Split::default();
        run_for(o.round, &mut svc_op);
        let sp = *svc_split.borrow();
        if total(&sp) > total(&best_s) {
            best_s = sp;
        }
        *bare_split.borrow_mut() = Split::default();
        run_for(o.round, &mut bare_op);
        let sp = *bare_split.borrow();
        if total(&sp) > total(&best_b) {
            best_b = sp;
        }
    }
    let deliver = |sp: &Split| sp.events as f64 / sp.deliver.as_secs_f64().max(1e-9);
    let write = |sp: &Split| sp.events as f64 / sp.write.as_secs_f64().max(1e-9);
    // The measure: events framed and written to the connections
    // after the message committed, against bare SELECT + framing of the
    // same rows.
    rows.push(Row {
        case: format!("gateway fan-out 1→{FANOUT_BOTS}: events delivered"),
        ops: deliver(&best_s),
        base: Some(deliver(&best_b)),
        target: Target::Ratio(0.50),
    });
    // End to end, the same work on both sides: writing the message and its
    // 100 events, then reading and framing them.
    rows.push(Row {
        case: format!("gateway fan-out 1→{FANOUT_BOTS}: write + deliver"),
        ops: total(&best_s),
        base: Some(total(&best_b)),
        target: Target::None,
    });
    rows.push(Row {
        case: format!("gateway fan-out 1→{FANOUT_BOTS}, write part only"),
        ops: write(&best_s),
        base: Some(write(&best_b)),
        target: Target::None,
    });
    notes.push(format!(
        "fan-out, per human message: service {:.1} µs write + {:.1} µs deliver; bare {:.1} µs write + {:.1} µs deliver",
        best_s.write.as_secs_f64() * 1e6 * FANOUT_BOTS as f64 / best_s.events.max(1) as f64,
        best_s.deliver.as_secs_f64() * 1e6 * FANOUT_BOTS as f64 / best_s.events.max(1) as f64,
        best_b.write.as_secs_f64() * 1e6 * FANOUT_BOTS as f64 / best_b.events.max(1) as f64,
        best_b.deliver.as_secs_f64() * 1e6 * FANOUT_BOTS as f64 / best_b.events.max(1) as f64,
    ));
}

fn replay_case(o: &Opts, rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    eprintln!("[bench] gateway replay: building {REPLAY_EVENTS} events for one bot");
    let svc = open_service(Store::Memory, Path::new("."), "");
    let user = admin(&svc, "createUser", json!({"display_name": "Replay user"}));
    let user_id = s(&user["id"]);
    let bot = create_official_bot(&svc, 0);
    // startBot gives the bot its first event (bot_started).
    let chat = admin(&svc, "startBot", json!({"user_id": user_id, "bot_id": bot.id}));
    let chat_id = s(&chat["id"]);
    let send = http(
        "/admin/sendUserMessage",
        &format!("Admin {ADMIN_SECRET}"),
        &json!({"user_id": user_id, "chat_id": chat_id, "text": "a message the bot has not acknowledged yet"})
            .to_string(),
    );
    let mut left = REPLAY_EVENTS - 1;
    while left > 0 {
        let n = left.min(1000);
        let batch: Vec<&[u8]> = (0..n).map(|_| &send[..]).collect();
        for r in handle_all(&svc, &batch) {
            expect_200(&r);
        }
        left -= n;
    }
    let bare = bare_clone(&svc, None, Synchronous::Full);
    let upgrade = upgrade_request(&bot.token);

    eprintln!("[bench] gateway replay: timing");
    let mut best_s = Duration::MAX;
    let mut best_b = Duration::MAX;
    let mut bytes_s = 0;
    let mut bytes_b = 0;
    for _ in 0..o.replay_rounds {
        let t0 = Instant::now();
        let acc = svc.accept_gateway(&upgrade, svc.now_ms());
        let mut conn = acc.connection.expect("101");
        let (frames, bytes) = drain(&mut conn, svc.now_ms());
        let t = t0.elapsed();
        assert_eq!(frames, REPLAY_EVENTS as u64 + 1, "hello + every event");
        drop(conn);
        if t < best_s {
            best_s = t;
            bytes_s = bytes;
        }

        let t0 = Instant::now();
        let mut ws = WebSocketContext::new(Role::Server, None);
        let mut io = VecIo::default();
        let mut cursor = 0;
        let (frames, bytes) = bare_deliver(&bare, &bot.id, &mut cursor, &mut ws, &mut io);
        let t = t0.elapsed();
        assert_eq!(frames, REPLAY_EVENTS as u64);
        if t < best_b {
            best_b = t;
            bytes_b = bytes;
        }
    }
    let ev = REPLAY_EVENTS as f64;
    rows.push(Row {
        case: format!("gateway replay {}k events on connect", REPLAY_EVENTS / 1000),
        ops: ev / best_s.as_secs_f64(),
        base: Some(ev / best_b.as_secs_f64()),
        target: Target::Ratio(0.50),
    });
    rows.push(Row {
        case: format!("gateway replay {}k events: {:.3} s (< 1 s)", REPLAY_EVENTS / 1000, best_s.as_secs_f64()),
        ops: ev / best_s.as_secs_f64(),
        base: None,
        target: Target::Abs(ev),
    });
    notes.push(format!(
        "replay: service {:.3} s, {:.1} MB written; bare {:.3} s, {:.1} MB",
        best_s.as_secs_f64(),
        bytes_s as f64 / 1e6,
        best_b.as_secs_f64(),
        bytes_b as f64 / 1e6
    ));
}

fn main() {
    // `cargo bench` passes `--bench`; other words select case groups.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let quick = args.iter().any(|a| a == "--quick");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let wanted = |group: &str| filters.is_empty() || filters.iter().any(|f| group.contains(f.as_str()));
    let mut o = if quick {
        Opts { warm: Duration::from_millis(50), round: Duration::from_millis(100), rounds: 3, replay_rounds: 2 }
    } else {
        Opts { warm: Duration::from_millis(200), round: Duration::from_millis(300), rounds: 4, replay_rounds: 3 }
    };
    if let Some(ms) = std::env::var("BOTSPACE_BENCH_ROUND_MS").ok().and_then(|v| v.parse().ok()) {
        o.round = Duration::from_millis(ms);
    }
    let dir = match std::env::var_os("BOTSPACE_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => option_env!("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join(format!("botspace-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).expect("bench directory");
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for store in [Store::Memory, Store::File(Synchronous::Full), Store::File(Synchronous::Normal)] {
        if wanted(&format!("rest-{}", store.tag())) {
            request_cases(&o, &dir, store, &mut rows);
        }
    }
    if wanted("gateway-fanout") {
        fanout_case(&o, &mut rows, &mut notes);
    }
    if wanted("gateway-replay") {
        replay_case(&o, &mut rows, &mut notes);
    }
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "\nbotspace throughput — one thread, best of {} rounds of {} ms per side (interleaved), official-tier bots (no rate limits)",
        o.rounds,
        o.round.as_millis()
    );
    print_table(&rows);
    for n in &notes {
        println!("note: {n}");
    }
    println!("file databases in {}; whole run {:.1} s", dir.display(), started.elapsed().as_secs_f64());
    let failed = rows.iter().filter(|r| r.verdict() == "FAIL").count();
    let targets = rows.iter().filter(|r| !matches!(r.target, Target::None)).count();
    println!("targets: {} of {} pass", targets - failed, targets);
}

/// Many requests through the one way in, each answered at once.
fn handle_all<R: AsRef<[u8]>>(svc: &botspace::Service, requests: &[R]) -> Vec<Vec<u8>> {
    let reqs: Vec<botspace::Incoming<'_>> =
        requests.iter().map(|r| botspace::Incoming::bytes(r.as_ref()).at_once()).collect();
    svc.handle(&reqs, svc.now_ms()).into_iter().map(|a| a.now_or_failed(svc)).collect()
}
