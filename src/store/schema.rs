//! Schema changes that the tables' modules would own, named by both
//! backends' migration lists (`sqlite.rs`, `postgres/migrate.rs`): the
//! admin console's audit log (version 4), unique bot handles (5) and
//! bots' webhooks (6), with the handle key the handles' migration
//! computes. They live here, below the backends, because the tables'
//! modules use the connection, which is above them.

use super::error::StoreError;

/// What makes two handles the same: their Unicode lowercase
/// (`str::to_lowercase`), computed here for both stores, never by the
/// database (SQLite's `lower()` folds ASCII only, PostgreSQL's follows the
/// database's locale). Stored as `bots.handle_key`, unique among the bots
/// that hold one.
pub fn handle_key(handle: &str) -> String {
    handle.to_lowercase()
}

/// The schema change that makes handles unique, the same text for both
/// stores: a key column and a unique index over it. NULL keys do not
/// conflict (in SQLite and PostgreSQL alike), so the bots of a database
/// written before it that share a handle keep working: [`claim_keys`]
/// gives the key to the first of them only.
pub const HANDLE_KEYS: &str = r#"
    ALTER TABLE bots ADD COLUMN handle_key TEXT;
    CREATE UNIQUE INDEX bots_handle_key ON bots (handle_key);
    -- The bots left without a key (sharing an older bot's handle), for
    -- pass_on_handle_key; empty on a database that never had duplicates.
    CREATE INDEX bots_without_handle_key ON bots (created_at, id) WHERE handle_key IS NULL;
    "#;

/// The existing bots' rows, for [`claim_keys`], oldest first.
pub const EXISTING_HANDLES: &str = "SELECT id, handle FROM bots ORDER BY created_at, id";

/// Sets one bot's key during [`HANDLE_KEYS`] (SQLite's spelling;
/// the PostgreSQL migration binds `$1`, `$2`).
pub const CLAIM_KEY: &str = "UPDATE bots SET handle_key = ?1 WHERE id = ?2";

/// Which existing bots get their handle's key when handles become unique:
/// of bots (oldest first) that share a handle case-insensitively, the
/// oldest; the others keep their handle with no key (it stays theirs to
/// show, and no new bot can take it) until `updateBot` gives them a free
/// one. Returns (bot id, key) to set, and the ids left without one.
pub fn claim_keys(bots: &[(String, String)]) -> (Vec<(&str, String)>, Vec<&str>) {
    let mut seen = std::collections::HashSet::new();
    let (mut claims, mut unclaimed) = (Vec::new(), Vec::new());
    for (id, handle) in bots {
        let key = handle_key(handle);
        if seen.insert(key.clone()) {
            claims.push((id.as_str(), key));
        } else {
            unclaimed.push(id.as_str());
        }
    }
    (claims, unclaimed)
}

/// Tells the operator (`log::warn!`) which bots were left sharing a
/// handle when handles became unique (nothing when none were).
pub fn report_unclaimed(ids: &[&str]) {
    if !ids.is_empty() {
        log::warn!(
            "botspace: {} bot(s) share a handle with an older bot and keep it without owning it: {}; \
             give each a handle of its own with updateBot (see docs/decisions.md, \"Bot handles are unique\")",
            ids.len(),
            ids.join(", ")
        );
    }
}

/// Schema version 4 after the audit log's key and time columns, whose
/// types differ between the stores: the same text in both.
macro_rules! console_rest {
    () => {
        r#"
        method TEXT NOT NULL,
        target TEXT,
        actor TEXT NOT NULL,
        peer TEXT,
        detail TEXT NOT NULL
    );
    CREATE INDEX audit_log_by_target ON audit_log (target, id);
    CREATE INDEX bots_by_created ON bots (created_at, id);
    CREATE INDEX users_by_created ON users (created_at, id);
    CREATE INDEX chats_by_created ON chats (created_at, id);
    "#
    };
}

/// SQLite schema version 4: the audit log, and list order indexes.
pub const CONSOLE_SQLITE: &str = concat!(
    r#"
    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,"#,
    console_rest!()
);

/// PostgreSQL schema version 4: as [`CONSOLE_SQLITE`], in PostgreSQL's
/// types.
#[cfg(feature = "postgres")]
pub const CONSOLE_POSTGRES: &str = concat!(
    r#"
    CREATE TABLE audit_log (
        id BIGSERIAL PRIMARY KEY,
        at_ms BIGINT NOT NULL,"#,
    console_rest!()
);

/// Migration 6: one row per bot with a webhook. `secret` holds the key
/// bytes, or (`sealed` = 1) those bytes sealed under the host's
/// operational key, as the operational token copies are.
pub const WEBHOOKS_SQLITE: &str = r#"
    CREATE TABLE webhooks (
        bot_id TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        secret BLOB NOT NULL,
        sealed INTEGER NOT NULL,
        max_connections INTEGER NOT NULL,
        allowed_updates TEXT,
        set_at_ms INTEGER NOT NULL,
        last_error_at_ms INTEGER,
        last_error TEXT,
        next_attempt_at_ms INTEGER
    ) WITHOUT ROWID;
"#;

/// [`WEBHOOKS_SQLITE`] in PostgreSQL's types.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const WEBHOOKS_POSTGRES: &str = r#"
    CREATE TABLE webhooks (
        bot_id TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        secret BYTEA NOT NULL,
        sealed BIGINT NOT NULL,
        max_connections BIGINT NOT NULL,
        allowed_updates TEXT,
        set_at_ms BIGINT NOT NULL,
        last_error_at_ms BIGINT,
        last_error TEXT,
        next_attempt_at_ms BIGINT
    );
    -- Which node delivers a bot's webhook, until when (several nodes on
    -- one database: one at a time; a dead node's leases lapse).
    CREATE TABLE webhook_leases (
        bot_id TEXT PRIMARY KEY,
        node TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL
    );
"#;

/// Migration 7 (SQLite; 8 on PostgreSQL): the secret a rotation replaced,
/// kept until `previous_until_ms` so deliveries carry its signature too
/// (`Config::webhook_secret_overlap_s`); sealed as `secret` is.
pub const WEBHOOK_PREVIOUS_SECRET_SQLITE: &str = r#"
    ALTER TABLE webhooks ADD COLUMN previous_secret BLOB;
    ALTER TABLE webhooks ADD COLUMN previous_sealed INTEGER;
    ALTER TABLE webhooks ADD COLUMN previous_until_ms INTEGER;
"#;

/// [`WEBHOOK_PREVIOUS_SECRET_SQLITE`] in PostgreSQL's types.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const WEBHOOK_PREVIOUS_SECRET_POSTGRES: &str = r#"
    ALTER TABLE webhooks ADD COLUMN previous_secret BYTEA;
    ALTER TABLE webhooks ADD COLUMN previous_sealed BIGINT;
    ALTER TABLE webhooks ADD COLUMN previous_until_ms BIGINT;
"#;

/// One store's side of applying its migrations ([`migrate`]). The calls
/// are async for PostgreSQL's client; SQLite's complete at once.
pub(crate) trait Migrator {
    type Error;
    /// Before each migration: SQLite runs each in a transaction of its
    /// own; PostgreSQL runs them all in the caller's.
    async fn begin(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Runs one migration's statements.
    async fn execute(&mut self, sql: &str) -> Result<(), Self::Error>;
    /// The bots with their handles ([`EXISTING_HANDLES`]).
    async fn existing_handles(&mut self) -> Result<Vec<(String, String)>, Self::Error>;
    /// Sets each bot's `handle_key` (the bot's id, its key).
    async fn set_handle_keys(&mut self, claims: &[(&str, String)]) -> Result<(), Self::Error>;
    /// Records the schema's new version, in the migration's transaction.
    async fn set_version(&mut self, version: i64) -> Result<(), Self::Error>;
    /// After a migration that went through.
    async fn commit(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// After a migration that failed.
    async fn roll_back(&mut self) {}
}

/// Brings a schema at `version` up to date with `migrations` (the
/// store's list; version n has the first n applied): each migration's
/// statements, then, with the handles' migration, the existing bots' keys,
/// then the new version. `Ok(Err(TooNew))` when the schema is newer than
/// this build knows.
pub(crate) async fn migrate<M: Migrator>(
    m: &mut M,
    migrations: &[&str],
    version: i64,
) -> Result<Result<(), StoreError>, M::Error> {
    let supported = migrations.len() as i64;
    if version > supported {
        return Ok(Err(StoreError::TooNew { found: version, supported }));
    }
    for (i, sql) in migrations.iter().enumerate().skip(version as usize) {
        m.begin().await?;
        match migrate_one(m, sql, i as i64 + 1).await {
            Ok(()) => m.commit().await?,
            Err(e) => {
                m.roll_back().await;
                return Err(e);
            }
        }
    }
    Ok(Ok(()))
}

/// One migration, up to the version it makes.
async fn migrate_one<M: Migrator>(m: &mut M, sql: &str, version: i64) -> Result<(), M::Error> {
    m.execute(sql).await?;
    if sql == HANDLE_KEYS {
        let bots = m.existing_handles().await?;
        let (claims, unclaimed) = claim_keys(&bots);
        m.set_handle_keys(&claims).await?;
        report_unclaimed(&unclaimed);
    }
    m.set_version(version).await
}

/// Commands and buttons' tables, the same text for both stores but for
/// the integer type: each bot's command lists by scope (`chat_id` is `''`
/// for the scopes that name no chat), the current keyboard of each
/// message that has one, and every press with its one outcome
/// (`outcome` NULL until `answered` or `expired` is written, by a
/// conditional UPDATE, with its host-stream event).
macro_rules! buttons_tables {
    ($int:literal, $without_rowid:literal) => {
        concat!(
            "CREATE TABLE bot_commands (
                bot_id TEXT NOT NULL,
                scope TEXT NOT NULL,
                chat_id TEXT NOT NULL,
                commands TEXT NOT NULL,
                PRIMARY KEY (bot_id, scope, chat_id)
            )",
            $without_rowid,
            ";
            CREATE TABLE message_keyboards (
                chat_id TEXT NOT NULL,
                message_id ",
            $int,
            " NOT NULL,
                keyboard TEXT NOT NULL,
                PRIMARY KEY (chat_id, message_id)
            )",
            $without_rowid,
            ";
            CREATE TABLE callback_queries (
                id TEXT PRIMARY KEY,
                bot_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                chat_id TEXT NOT NULL,
                message_id ",
            $int,
            " NOT NULL,
                pressed_at_ms ",
            $int,
            " NOT NULL,
                deadline_ms ",
            $int,
            " NOT NULL,
                outcome TEXT
            )",
            $without_rowid,
            ";
            -- The presses still waiting for an outcome, by deadline: what
            -- the expiry reads.
            CREATE INDEX callback_queries_open ON callback_queries (deadline_ms) WHERE outcome IS NULL;
            -- Those with their outcome, by age: what pruning removes.
            CREATE INDEX callback_queries_done ON callback_queries (pressed_at_ms) WHERE outcome IS NOT NULL;
            "
        )
    };
}

/// SQLite's migration for commands and buttons.
pub const BUTTONS_SQLITE: &str = buttons_tables!("INTEGER", " WITHOUT ROWID");

/// [`BUTTONS_SQLITE`] in PostgreSQL's types.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const BUTTONS_POSTGRES: &str = buttons_tables!("BIGINT", "");
