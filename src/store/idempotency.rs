//! sendMessage's idempotency keys: the answer of a send, kept per bot and
//! key for a retry to get again.

use super::{Conn, Dialect, Optional, StoreResult};
use crate::params;

const LOOKUP: &str =
    "SELECT request_hash, result FROM idempotency WHERE bot_id = ?1 AND key = ?2 AND created_at_ms >= ?3";

const REMEMBER: &str = "INSERT INTO idempotency (bot_id, key, request_hash, result, created_at_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (bot_id, key) DO UPDATE SET request_hash = excluded.request_hash, \
     result = excluded.result, created_at_ms = excluded.created_at_ms";

const SCRUB_TEXT_SQLITE: &str =
    "UPDATE idempotency SET result = json_remove(result, '$.text', '$.command', '$.reply_markup') WHERE bot_id = ?1 \
     AND json_extract(result, '$.chat.id') = ?2 AND json_extract(result, '$.message_id') = ?3";

/// jsonb keeps the JSON's meaning, not its key order or spacing.
const SCRUB_TEXT_POSTGRES: &str =
    "UPDATE idempotency SET result = (result::jsonb - 'text' - 'command' - 'reply_markup')::text WHERE bot_id = ?1 \
     AND result::jsonb #>> '{chat,id}' = ?2 AND result::jsonb ->> 'message_id' = ?3";

/// What a lookup finds: the request hash and the answer kept.
pub type Kept = Option<(Vec<u8>, String)>;

/// Keys a group on a shared store read ahead (see `store::group`):
/// bot → key → what [`lookup`] would find, kept up to date as the
/// transaction remembers. It lives as long as its transaction. Nested by
/// bot so that a lookup borrows the request's strings instead of copying
/// them into a key.
#[derive(Default, Debug)]
pub struct Held(std::collections::HashMap<Box<str>, std::collections::HashMap<Box<str>, Kept>>);

impl Held {
    fn get(&self, bot_id: &str, key: &str) -> Option<&Kept> {
        self.0.get(bot_id)?.get(key)
    }

    fn get_mut(&mut self, bot_id: &str, key: &str) -> Option<&mut Kept> {
        self.0.get_mut(bot_id)?.get_mut(key)
    }
}

/// The request hash and answer kept under `key` since `since_ms` (read
/// ahead, or now).
pub fn lookup(conn: &Conn, held: &Held, bot_id: &str, key: &str, since_ms: i64) -> StoreResult<Kept> {
    if let Some(found) = held.get(bot_id, key) {
        return Ok(found.clone());
    }
    conn.prepare_cached(LOOKUP)?.query_row(params![bot_id, key, since_ms], read_kept).optional()
}

fn read_kept(r: &super::Row<'_>) -> StoreResult<(Vec<u8>, String)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The read that looks `key` up for `bot_id`, for a group to pipeline
/// with its other reads; its row (if any) goes to [`hold`].
pub(super) fn lookup_read<'a>(bot_id: &'a str, key: &'a str, since_ms: i64) -> (&'static str, Vec<super::Val<'a>>) {
    (LOOKUP, vec![super::Val::Text(bot_id), super::Val::Text(key), super::Val::Int(since_ms)])
}

/// Keeps what [`lookup_read`] found (`row`: its row, if one came).
pub(super) fn hold(held: &mut Held, bot_id: &str, key: &str, row: Option<&super::Row<'_>>) -> StoreResult<()> {
    let kept = row.map(read_kept).transpose()?;
    let keys = match held.0.get_mut(bot_id) {
        Some(keys) => keys,
        None => held.0.entry(bot_id.into()).or_default(),
    };
    keys.insert(key.into(), kept);
    Ok(())
}

/// Keeps `result` under `key` (replacing an expired entry); on a database
/// server it goes out with the transaction's next round trip.
pub fn remember(
    conn: &Conn,
    held: &mut Held,
    bot_id: &str,
    key: &str,
    hash: &[u8; 32],
    result: &str,
    now_ms: i64,
) -> StoreResult<()> {
    conn.prepare_cached(REMEMBER)?.defer(
        params![bot_id, key, &hash[..], result, now_ms],
        // Another node may be keeping the same key right now.
        super::Deferral::waits("an idempotency key was not kept"),
    )?;
    if let Some(kept) = held.get_mut(bot_id, key) {
        *kept = Some((hash.to_vec(), result.to_string()));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(hash: &[u8; 32], result: &str) -> Kept {
        Some((hash.to_vec(), result.to_string()))
    }

    #[test]
    fn what_was_read_ahead_answers_by_bot_and_key_and_follows_remember() {
        let config = crate::Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into());
        let conn = super::super::open(&config).unwrap();
        let (h1, h2) = ([1u8; 32], [2u8; 32]);
        remember(&conn, &mut Held::default(), "a", "k", &h1, r#"{"a":1}"#, 1000).unwrap();
        remember(&conn, &mut Held::default(), "b", "k", &h1, r#"{"b":1}"#, 1000).unwrap();
        // Nothing read ahead: the database answers, by bot, key and age.
        let nothing = Held::default();
        assert_eq!(lookup(&conn, &nothing, "a", "k", 1000).unwrap(), kept(&h1, r#"{"a":1}"#));
        assert_eq!(lookup(&conn, &nothing, "a", "j", 0).unwrap(), None);
        assert_eq!(lookup(&conn, &nothing, "a", "k", 1001).unwrap(), None);
        // Read ahead (a row for b, none for a): the held answer wins, and
        // only for the very bot and key it was read for.
        let mut held = Held::default();
        hold(&mut held, "a", "k", None).unwrap();
        conn.prepare_cached(LOOKUP)
            .unwrap()
            .query_each(params!["b", "k", 0i64], |r| {
                hold(&mut held, "b", "k", Some(r))?;
                Ok(true)
            })
            .unwrap();
        assert_eq!(held.get("a", "k"), Some(&None));
        assert_eq!(held.get("b", "k"), Some(&kept(&h1, r#"{"b":1}"#)));
        assert_eq!(held.get("a", "j"), None);
        assert_eq!(held.get("c", "k"), None);
        assert_eq!(lookup(&conn, &held, "a", "k", 0).unwrap(), None);
        assert_eq!(lookup(&conn, &held, "b", "k", 0).unwrap(), kept(&h1, r#"{"b":1}"#));
        // Remembering updates a held key; one not held stays unheld (a
        // lookup of it reads the database, which has it).
        remember(&conn, &mut held, "a", "k", &h2, r#"{"a":2}"#, 2000).unwrap();
        assert_eq!(lookup(&conn, &held, "a", "k", 0).unwrap(), kept(&h2, r#"{"a":2}"#));
        remember(&conn, &mut held, "b", "j", &h2, r#"{"b":2}"#, 2000).unwrap();
        assert_eq!(held.get("b", "j"), None);
        assert_eq!(lookup(&conn, &held, "b", "j", 0).unwrap(), kept(&h2, r#"{"b":2}"#));
        // Holding again replaces what was held.
        hold(&mut held, "b", "k", None).unwrap();
        assert_eq!(lookup(&conn, &held, "b", "k", 0).unwrap(), None);
    }
}
