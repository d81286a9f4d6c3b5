//! The SQLite store: schema, migrations and connection setup.
//!
//! The schema version lives in `PRAGMA user_version`; each entry of
//! [`MIGRATIONS`] moves it up by one inside a transaction, so opening an old
//! database upgrades it and opening a new one with an old library is refused.

use super::error::StoreError;
use crate::config::{Config, Synchronous};
use rusqlite::Connection;

/// WAL pages after which a checkpoint is due (20 MiB at 2 KiB pages): a
/// page that many commits rewrite (a chat's last messages page) is copied
/// into the database once per checkpoint, so rare checkpoints write fewer
/// bytes in all. `wal_autocheckpoint` is set to it here, and the WAL
/// hook (`wal.rs`) checkpoints by it.
pub const CHECKPOINT_PAGES: i64 = 10_000;

/// Schema migrations, applied in order. Never edit a released entry; append.
pub const MIGRATIONS: &[&str] = &[
    // 1: initial schema.
    r#"
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        handle TEXT,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE bots (
        id TEXT PRIMARY KEY,
        token_hash BLOB NOT NULL UNIQUE,
        op_token BLOB,
        display_name TEXT NOT NULL,
        handle TEXT NOT NULL,
        avatar_key TEXT,
        status TEXT NOT NULL DEFAULT 'active',
        verified INTEGER NOT NULL DEFAULT 0,
        official INTEGER NOT NULL DEFAULT 0,
        quota_tier TEXT NOT NULL DEFAULT 'free',
        gateway_connection_limit INTEGER,
        last_seq INTEGER NOT NULL DEFAULT 0,
        acked_seq INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE chats (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL CHECK (type IN ('private', 'group')),
        title TEXT,
        user_id TEXT,
        bot_id TEXT,
        started INTEGER NOT NULL DEFAULT 0,
        blocked_by_user INTEGER NOT NULL DEFAULT 0,
        blocked_by_bot INTEGER NOT NULL DEFAULT 0,
        bots_can_send INTEGER NOT NULL DEFAULT 1,
        dissolved INTEGER NOT NULL DEFAULT 0,
        last_message_id INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX chats_private_pair ON chats (user_id, bot_id) WHERE type = 'private';

    -- active = 0 keeps a former member, so the chat stays visible to it
    -- (not_member rather than chat_not_found).
    CREATE TABLE members (
        chat_id TEXT NOT NULL,
        member_id TEXT NOT NULL,
        is_bot INTEGER NOT NULL,
        active INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (chat_id, member_id)
    ) WITHOUT ROWID;
    -- Fan-out reads a chat's current bots on every message; a group of
    -- thousands of humans must not be scanned for them.
    CREATE INDEX members_current_bots ON members (chat_id, member_id) WHERE is_bot = 1 AND active = 1;

    CREATE TABLE messages (
        chat_id TEXT NOT NULL,
        message_id INTEGER NOT NULL,
        sender_id TEXT NOT NULL,
        sender_is_bot INTEGER NOT NULL,
        text TEXT,
        date INTEGER NOT NULL,
        edit_date INTEGER,
        reply_to INTEGER,
        deleted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (chat_id, message_id)
    ) WITHOUT ROWID;

    CREATE TABLE chat_actions (
        chat_id TEXT NOT NULL,
        bot_id TEXT NOT NULL,
        action TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (chat_id, bot_id)
    ) WITHOUT ROWID;

    CREATE TABLE idempotency (
        bot_id TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash BLOB NOT NULL,
        result TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (bot_id, key)
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_by_age ON idempotency (created_at_ms);

    -- Per-bot durable event log; seq is 1, 2, 3... per bot (bots.last_seq).
    CREATE TABLE bot_events (
        bot_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        -- The message an event carries, so deleting it can scrub its text.
        ref_chat TEXT,
        ref_message INTEGER,
        PRIMARY KEY (bot_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX bot_events_by_message ON bot_events (ref_chat, ref_message) WHERE ref_message IS NOT NULL;

    -- The service-wide stream behind the host's getUpdates.
    CREATE TABLE updates (
        update_id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at_ms INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message INTEGER
    );
    CREATE INDEX updates_by_message ON updates (ref_chat, ref_message) WHERE ref_message IS NOT NULL;

    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('updates_confirmed', 0);
    "#,
    // 2: every event of a bot up to pruned_seq is gone, so pruning starts
    // there; acknowledged events from pruned_seq + 1 on were written at
    // kept_since_ms or later, so pruning skips the bot until that is past
    // retention (store::events::prune).
    r#"
    ALTER TABLE bots ADD COLUMN pruned_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE bots ADD COLUMN kept_since_ms INTEGER NOT NULL DEFAULT 0;
    "#,
    // 3: a message's message_created update is found through the message
    // (created_update), not through updates_by_message: that index is keyed
    // by chat, so an entry per message dirtied one more page of the chat's
    // own, and a group commit over many chats wrote twice the pages. Rows
    // written before keep their index entries.
    //
    // From version 3 on SQLite numbers a chat's next message from its
    // last message row, and chats.last_message_id is no longer kept up to
    // date (see store::messages::Numbering, docs/schema.md); PostgreSQL uses
    // its counter.
    r#"
    ALTER TABLE messages ADD COLUMN created_update INTEGER;
    "#,
    // 4: the admin console's audit log and list indexes.
    super::schema::CONSOLE_SQLITE,
    // 5: bot handles are unique, compared case-insensitively; existing
    // bots get their keys from `claim_handle_keys` in the same transaction.
    super::schema::HANDLE_KEYS,
    // 6: bots' webhooks.
    super::schema::WEBHOOKS_SQLITE,
    // 7: bot commands, message keyboards and callback queries.
    super::schema::BUTTONS_SQLITE,
    // 8: the secret a webhook rotation replaced, for the overlap.
    super::schema::WEBHOOK_PREVIOUS_SECRET_SQLITE,
];

/// Opens (or creates) the database and brings its schema up to date.
pub fn open(config: &Config) -> Result<Connection, StoreError> {
    create_private(&config.database);
    let conn = Connection::open(&config.database)?;
    configure(&conn, config.synchronous, config.busy_timeout_ms)?;
    migrate(&conn)?;
    Ok(conn)
}

/// A read-only connection to a database file, for reads that must not
/// wait for the service's lock (the metrics' backlog gauges).
pub fn open_reader(path: &str) -> Result<Connection, StoreError> {
    use rusqlite::OpenFlags;
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    harden(&c)?;
    c.busy_timeout(std::time::Duration::from_millis(1000))?;
    Ok(c)
}

/// How much the readiness check writes next to a database whose disk was
/// full: about a group commit's worth of WAL frames.
pub const SPACE_PROBE_BYTES: usize = 64 * 1024;

/// Whether the file system under the database `path` takes
/// [`SPACE_PROBE_BYTES`] more: written to a scratch file beside it, then
/// removed. `ErrorKind::StorageFull` when it does not.
pub fn space_probe(path: &str) -> std::io::Result<()> {
    use std::io::Write;
    let scratch = format!("{path}-readyz");
    let written = std::fs::File::create(&scratch).and_then(|mut f| {
        f.write_all(&[0u8; SPACE_PROBE_BYTES])?;
        f.sync_data()
    });
    let _ = std::fs::remove_file(&scratch);
    written
}

/// Creates a database file that does not exist yet, empty and readable by
/// its owner only (0600): SQLite would create it 0644 (less the umask), and
/// it holds every message. SQLite gives its `-wal`, `-shm` and `-journal`
/// files the main file's permissions, so they are 0600 too. An existing
/// file keeps the mode it has; `:memory:` and `file:` URIs are left to
/// SQLite. Any failure here (a missing directory, say) is SQLite's to
/// report when it opens the path.
fn create_private(path: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if path.is_empty() || path == ":memory:" || path.starts_with("file:") {
            return;
        }
        let _ = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path);
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Settings for every connection, the live one and an import's scratch:
/// defensive mode (no writable schema, no shadow-table writes), schema
/// functions untrusted (a view or trigger can call no side-effecting SQL
/// function), and deleted content overwritten, so a deleted message's text
/// does not linger in free pages.
pub fn harden(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.execute_batch("PRAGMA secure_delete = ON;")
}

pub fn configure(conn: &Connection, sync: Synchronous, busy_timeout_ms: u32) -> Result<(), StoreError> {
    harden(conn)?;
    // The bundled SQLite has STAT4, which re-plans a statement with a range
    // on a bound parameter (`seq > ?`) at every execution. The query planner
    // stability guarantee keeps each prepared plan, which is what a cache of
    // prepared statements is for. Must precede the first prepare.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // A new file database gets 2 KiB pages: a group commit over many chats
    // writes each chat's dirtied page whole to the WAL, so smaller pages
    // write fewer bytes per message (+20 % durable sendMessage/s over HTTP
    // with a chat per connection, docs/benchmarks.md); 2 KiB keeps rows up
    // to ~480 bytes off overflow pages in WITHOUT ROWID tables. Has no
    // effect on an existing database.
    if conn.path().is_some_and(|p| !p.is_empty()) {
        conn.execute_batch("PRAGMA page_size = 2048;")?;
    }
    // WAL for file databases; :memory: reports "memory" and that is fine.
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    conn.execute_batch(match sync {
        Synchronous::Full => "PRAGMA synchronous = FULL;",
        Synchronous::Normal => "PRAGMA synchronous = NORMAL;",
    })?;
    conn.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;")?;
    // Checkpoint every 10 000 WAL pages, not SQLite's 1 000: a page that
    // many commits rewrite (a chat's last messages page) is copied into
    // the database once per checkpoint, so fewer checkpoints write fewer
    // bytes in all; group commits over many chats write half as much to
    // disk per message. A durable file database replaces this with
    // checkpoints outside the lock (crate::store::wal).
    conn.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)?;
    conn.busy_timeout(std::time::Duration::from_millis(busy_timeout_ms.into()))?;
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

pub fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    at_once(super::schema::migrate(&mut Migrator(conn), MIGRATIONS, version))?
}

/// SQLite's side of [`super::schema::migrate`]: each migration in a
/// transaction of its own, the version in `PRAGMA user_version`. Existing
/// bots get their handle keys ([`super::schema::claim_keys`]) with the
/// migration that makes handles unique; the bots left sharing a handle are
/// reported on stderr, once, for the operator (docs/decisions.md, "Bot
/// handles are unique").
struct Migrator<'c>(&'c Connection);

impl super::schema::Migrator for Migrator<'_> {
    type Error = rusqlite::Error;

    async fn begin(&mut self) -> rusqlite::Result<()> {
        self.0.execute_batch("BEGIN IMMEDIATE")
    }

    async fn execute(&mut self, sql: &str) -> rusqlite::Result<()> {
        self.0.execute_batch(sql)
    }

    async fn existing_handles(&mut self) -> rusqlite::Result<Vec<(String, String)>> {
        self.0
            .prepare(super::schema::EXISTING_HANDLES)?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()
    }

    async fn set_handle_keys(&mut self, claims: &[(&str, String)]) -> rusqlite::Result<()> {
        let mut set = self.0.prepare(super::schema::CLAIM_KEY)?;
        for (id, key) in claims {
            set.execute(rusqlite::params![key, id])?;
        }
        Ok(())
    }

    async fn set_version(&mut self, version: i64) -> rusqlite::Result<()> {
        self.0.execute_batch(&format!("PRAGMA user_version = {version}"))
    }

    async fn commit(&mut self) -> rusqlite::Result<()> {
        self.0.execute_batch("COMMIT")
    }

    async fn roll_back(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}

/// The output of `f`, whose every step completes at once ([`Migrator`]'s
/// calls are synchronous): polled once, with a waker nothing wakes.
fn at_once<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("a SQLite migration step waited"),
    }
}

/// Copies the WAL's pages back into the database file and truncates the
/// WAL (a no-op for `:memory:`): after `secure_delete` zeroed deleted text
/// in the pages just written, the WAL still holds the earlier page images.
/// A failure leaves the text until the next checkpoint, nothing worse.
pub fn checkpoint_truncate(c: &Connection) {
    let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// With the service's own WAL sync (`store::wal`): the transaction about
/// to start commits without an fsync (`deferred`), and every other write
/// afterwards with one. If `NORMAL` cannot be set the commit simply syncs
/// itself; `FULL` must come back, so an open transaction is rolled back
/// first.
pub fn defer_commit_sync(c: &Connection, deferred: bool) {
    let set = |sql| c.prepare_cached(sql).and_then(|mut st| st.execute([])).map(|_| ());
    if deferred {
        let _ = set("PRAGMA synchronous = NORMAL");
    } else if set("PRAGMA synchronous = FULL").is_err() && !c.is_autocommit() {
        let _ = c.execute_batch("ROLLBACK");
        let _ = set("PRAGMA synchronous = FULL");
    }
}

/// The database's page size, in bytes.
pub fn page_size(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("PRAGMA page_size", [], |r| r.get(0))
}
