//! The PostgreSQL schema: its migrations, applied once by whichever node
//! starts first.

use super::conn::PgConn;
use crate::store::error::StoreResult;
use crate::store::schema;

/// Schema migrations, applied in order, versioned like SQLite's
/// (`botspace_schema.version` plays `PRAGMA user_version`). Never edit a
/// released entry; append. Integers are BIGINT and flags 0/1 BIGINT, as the
/// store reads them.
pub const MIGRATIONS: &[&str] = &[
    // 1: initial schema.
    r#"
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        handle TEXT,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE bots (
        id TEXT PRIMARY KEY,
        token_hash BYTEA NOT NULL UNIQUE,
        op_token BYTEA,
        display_name TEXT NOT NULL,
        handle TEXT NOT NULL,
        avatar_key TEXT,
        status TEXT NOT NULL DEFAULT 'active',
        verified BIGINT NOT NULL DEFAULT 0,
        official BIGINT NOT NULL DEFAULT 0,
        quota_tier TEXT NOT NULL DEFAULT 'free',
        gateway_connection_limit BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        acked_seq BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE chats (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL CHECK (type IN ('private', 'group')),
        title TEXT,
        user_id TEXT,
        bot_id TEXT,
        started BIGINT NOT NULL DEFAULT 0,
        blocked_by_user BIGINT NOT NULL DEFAULT 0,
        blocked_by_bot BIGINT NOT NULL DEFAULT 0,
        bots_can_send BIGINT NOT NULL DEFAULT 1,
        dissolved BIGINT NOT NULL DEFAULT 0,
        last_message_id BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL
    );
    CREATE UNIQUE INDEX chats_private_pair ON chats (user_id, bot_id) WHERE type = 'private';
    CREATE TABLE members (
        chat_id TEXT NOT NULL,
        member_id TEXT NOT NULL,
        is_bot BIGINT NOT NULL,
        active BIGINT NOT NULL DEFAULT 1,
        PRIMARY KEY (chat_id, member_id)
    );
    CREATE INDEX members_current_bots ON members (chat_id, member_id) WHERE is_bot = 1 AND active = 1;
    CREATE TABLE messages (
        chat_id TEXT NOT NULL,
        message_id BIGINT NOT NULL,
        sender_id TEXT NOT NULL,
        sender_is_bot BIGINT NOT NULL,
        text TEXT,
        date BIGINT NOT NULL,
        edit_date BIGINT,
        reply_to BIGINT,
        deleted BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (chat_id, message_id)
    );
    CREATE TABLE chat_actions (
        chat_id TEXT NOT NULL,
        bot_id TEXT NOT NULL,
        action TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        PRIMARY KEY (chat_id, bot_id)
    );
    CREATE TABLE idempotency (
        bot_id TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash BYTEA NOT NULL,
        result TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (bot_id, key)
    );
    CREATE INDEX idempotency_by_age ON idempotency (created_at_ms);
    CREATE TABLE bot_events (
        bot_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message BIGINT,
        PRIMARY KEY (bot_id, seq)
    );
    CREATE INDEX bot_events_by_message ON bot_events (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
    -- update_id comes from meta.last_update_id, taken in the writing
    -- transaction: a sequence would hand out ids out of commit order, and
    -- getUpdates would skip an update committed after a higher one.
    CREATE TABLE updates (
        update_id BIGINT PRIMARY KEY,
        created_at_ms BIGINT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message BIGINT
    );
    CREATE INDEX updates_by_message ON updates (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    );
    INSERT INTO meta (key, value) VALUES ('updates_confirmed', 0), ('last_update_id', 0);
    "#,
    // 2: pruning marks (see the SQLite migration 2).
    r#"
    ALTER TABLE bots ADD COLUMN pruned_seq BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE bots ADD COLUMN kept_since_ms BIGINT NOT NULL DEFAULT 0;
    "#,
    // 3: gateway connections of every node, for the per-bot limit. A lease
    // is renewed while its session lives and lapses when its node dies.
    r#"
    CREATE TABLE gateway_leases (
        session_id TEXT PRIMARY KEY,
        bot_id TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL
    );
    CREATE INDEX gateway_leases_by_bot ON gateway_leases (bot_id, expires_at_ms);
    -- Rate-limit buckets shared by the nodes: GCRA's theoretical arrival
    -- time (µs) per bucket, 'b:<bot>' or 'c:<bot>:<chat>'.
    CREATE TABLE rate_buckets (
        key TEXT PRIMARY KEY,
        tat BIGINT NOT NULL
    );
    CREATE INDEX rate_buckets_by_tat ON rate_buckets (tat);
    "#,
    // 4: the admin console's audit log and list indexes.
    crate::store::schema::CONSOLE_POSTGRES,
    // 5: bot handles are unique, compared case-insensitively (see the
    // SQLite migration 5); existing bots get their keys in the same
    // transaction.
    crate::store::schema::HANDLE_KEYS,
    // 6: bots' webhooks.
    crate::store::schema::WEBHOOKS_POSTGRES,
    // 7: host-stream rows are written unnumbered and numbered when read
    // (see `store::events::NUMBER_UPDATES`): no row is held from a write to
    // its COMMIT, so commits of all nodes no longer line up behind one.
    r#"
    CREATE TABLE updates_pending (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        created_at_ms BIGINT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        ref_chat TEXT,
        ref_message BIGINT
    );
    CREATE INDEX updates_pending_by_message ON updates_pending (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
    "#,
    // 8: bot commands, message keyboards and callback queries.
    crate::store::schema::BUTTONS_POSTGRES,
    // 9: the secret a webhook rotation replaced, for the overlap (SQLite's 8).
    crate::store::schema::WEBHOOK_PREVIOUS_SECRET_POSTGRES,
];

impl PgConn {
    /// Applies what is missing of [`MIGRATIONS`] under an advisory lock, so
    /// nodes starting together migrate once.
    pub(super) fn migrate(&self) -> StoreResult<()> {
        self.with(|rt, c| {
            rt.block_on(async {
                let r: Result<StoreResult<()>, postgres::Error> = async {
                    c.batch_execute("BEGIN").await?;
                    // A fixed key ("bots" in ASCII): only botspace migrations take it.
                    c.execute("SELECT pg_advisory_xact_lock(1651471475)", &[]).await?;
                    c.batch_execute("CREATE TABLE IF NOT EXISTS botspace_schema (version BIGINT NOT NULL)").await?;
                    let version: Option<i64> =
                        c.query_opt("SELECT version FROM botspace_schema", &[]).await?.map(|r| r.get(0));
                    let version = match version {
                        Some(v) => v,
                        None => {
                            c.execute("INSERT INTO botspace_schema (version) VALUES (0)", &[]).await?;
                            0
                        }
                    };
                    if let Err(e) = schema::migrate(&mut Migrator(c), MIGRATIONS, version).await? {
                        return Ok(Err(e));
                    }
                    c.batch_execute("COMMIT").await?;
                    Ok(Ok(()))
                }
                .await;
                if !matches!(r, Ok(Ok(()))) {
                    let _ = c.batch_execute("ROLLBACK").await;
                }
                r
            })
        })?
    }
}

/// PostgreSQL's side of [`schema::migrate`]: every migration in the one
/// transaction [`PgConn::migrate`] holds, the version in
/// `botspace_schema`.
struct Migrator<'c>(&'c tokio_postgres::Client);

impl schema::Migrator for Migrator<'_> {
    type Error = postgres::Error;

    async fn execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        self.0.batch_execute(sql).await
    }

    async fn existing_handles(&mut self) -> Result<Vec<(String, String)>, postgres::Error> {
        let rows = self.0.query(schema::EXISTING_HANDLES, &[]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn set_handle_keys(&mut self, claims: &[(&str, String)]) -> Result<(), postgres::Error> {
        let set = self.0.prepare("UPDATE bots SET handle_key = $1 WHERE id = $2").await?;
        for (id, key) in claims {
            let (id, key): (&str, &str) = (id, key);
            self.0.execute(&set, &[&key, &id]).await?;
        }
        Ok(())
    }

    async fn set_version(&mut self, version: i64) -> Result<(), postgres::Error> {
        self.0.execute("UPDATE botspace_schema SET version = $1", &[&version]).await?;
        Ok(())
    }
}
