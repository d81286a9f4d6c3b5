//! sendMessage's idempotency keys: the answer of a send, kept per bot and
//! key for a retry to get again.

use super::{Conn, Dialect, Optional, StoreResult};
use crate::params;

const LOOKUP: &str =
    "SELECT request_hash, result FROM idempotency WHERE bot_id = ?1 AND key = ?2 AND created_at_ms >= ?3";

const REMEMBER: &str = "INSERT INTO idempotency (bot_id, key, request_hash, result, created_at_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (bot_id, key) DO UPDATE SET request_hash = excluded.request_hash, \
     result = excluded.result, created_at_ms = excluded.created_at_ms";

const SCRUB_TEXT_SQLITE: &str = "UPDATE idempotency SET result = json_remove(result, '$.text') WHERE bot_id = ?1 \
     AND json_extract(result, '$.chat.id') = ?2 AND json_extract(result, '$.message_id') = ?3";

/// jsonb keeps the JSON's meaning, not its key order or spacing.
const SCRUB_TEXT_POSTGRES: &str = "UPDATE idempotency SET result = (result::jsonb - 'text')::text WHERE bot_id = ?1 \
     AND result::jsonb #>> '{chat,id}' = ?2 AND result::jsonb ->> 'message_id' = ?3";

/// The request hash and answer kept under `key` since `since_ms`.
pub fn lookup(conn: &Conn, bot_id: &str, key: &str, since_ms: i64) -> StoreResult<Option<(Vec<u8>, String)>> {
    conn.prepare_cached(LOOKUP)?.query_row(params![bot_id, key, since_ms], |r| Ok((r.get(0)?, r.get(1)?))).optional()
}

/// Keeps `result` under `key` (replacing an expired entry).
pub fn remember(conn: &Conn, bot_id: &str, key: &str, hash: &[u8; 32], result: &str, now_ms: i64) -> StoreResult<()> {
    conn.prepare_cached(REMEMBER)?.execute(params![bot_id, key, &hash[..], result, now_ms])?;
    Ok(())
}

/// Drops a deleted message's text from the kept answer that sent it, so
/// a retry does not bring the text back.
pub fn scrub_text(conn: &Conn, bot_id: &str, chat_id: &str, message_id: i64) -> StoreResult<()> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => SCRUB_TEXT_SQLITE,
        Dialect::Postgres => SCRUB_TEXT_POSTGRES,
    };
    conn.prepare_cached(sql)?.execute(params![bot_id, chat_id, message_id.to_string()])?;
    Ok(())
}
