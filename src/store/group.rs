//! What a group of bot requests reads before any of them runs, so that a
//! group of any size costs the same round trips on a database server:
//!
//! 1. [`read`]: each request's bot with the chat it names (see
//!    `bots::by_token_hash_with_chat`), and the message counters of the
//!    chats the group posts in, their rows locked (`messages::Counters`);
//! 2. [`read_limits`], only when a request needs it: the rate buckets the
//!    group takes from, their rows locked (`limits::Held`), and the
//!    Idempotency-Keys it names (`idempotency::Held`).
//!
//! Each is one round trip. The requests then run in memory against what
//! was read ([`Ahead`]), their writes wait for the COMMIT, and all go out
//! with it in one more.

use super::{bots, idempotency, limits, messages, Conn, StoreResult, Val};
use crate::model::{Bot, ChatPrefetch};

/// What a transaction read ahead and holds: it lives as long as the
/// transaction (dropped when the next one begins).
#[derive(Default, Debug)]
pub struct Ahead {
    pub counters: messages::Counters,
    pub buckets: limits::Held,
    pub keys: idempotency::Held,
}

/// PostgreSQL: the group's read, one statement. First, for every
/// `(i, h, c)` of the JSON array `?1` (`h`: the token hash in hex), the
/// row of `bots::BOT_WITH_CHAT` ending with its `i` (column 21), each bot
/// found through the token-hash index; then `$lock`, the rows of
/// [`READ_LOCKING`] (or none, [`READ_BOTS`]).
macro_rules! read_statement {
    ($lock:literal) => {
        concat!(
            "SELECT ",
            bot_with_chat_columns!(),
            ", k.i, NULL::bigint FROM json_to_recordset(?1::text::json) AS k(i bigint, h text, c text) \
             CROSS JOIN LATERAL (SELECT * FROM bots WHERE token_hash = decode(k.h, 'hex')) b \
             LEFT JOIN chats c ON c.id = k.c LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = b.id",
            $lock
        )
    };
}

/// [`read`]'s statement when the group posts in no chat.
const READ_BOTS: &str = read_statement!("");

/// [`read`]'s statement when the group posts: after the bots, for each
/// chat of `?2` (ids, comma-joined), a row with its id (column 9) and its
/// `last_message_id` (column 22, NULL in the bots' rows), the chat's row
/// locked until the transaction ends. The rows are sorted by id and then
/// locked (the subquery's ORDER BY runs below its FOR UPDATE): one order
/// on every node, so two groups never each hold a chat the other waits
/// for. The bots are read before any chat is locked, as two statements in
/// that order would.
const READ_LOCKING: &str = read_statement!(
    " UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, l.id, \
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, l.last_message_id \
     FROM (SELECT id, last_message_id FROM chats WHERE id = ANY(string_to_array(?2, ',')) \
     ORDER BY id FOR UPDATE) l"
);

/// Reads, for each `(token hash, chat id)`, the bot and the chat; and
/// locks the counters of `send_to` (chats a request of the group may post
/// in), holding them in `ahead`. Per key asked, in order: the bot and its
/// chat, if the token is known. One statement ([`READ_LOCKING`], or
/// [`READ_BOTS`] when there is nothing to lock): a group reads ahead only
/// on a shared store (on SQLite each request reads for itself, in the
/// process).
pub fn read(
    conn: &Conn,
    keys: &[([u8; 32], &str)],
    send_to: &[&str],
    ahead: &mut Ahead,
) -> StoreResult<Vec<Option<(Bot, ChatPrefetch)>>> {
    let mut chats: Vec<&str> = send_to.iter().copied().filter(|c| messages::lockable(c)).collect();
    chats.sort_unstable();
    chats.dedup();
    let (json, chats) = (keys_json(keys)?, chats.join(","));
    let mut found: Vec<Option<(Bot, ChatPrefetch)>> = keys.iter().map(|_| None).collect();
    let mut held = Vec::new();
    let run = match chats.is_empty() {
        true => (READ_BOTS, vec![Val::Text(&json)]),
        false => (READ_LOCKING, vec![Val::Text(&json), Val::Text(&chats)]),
    };
    conn.query_pipelined(&[run], |_, r| {
        if let Some(last) = r.get::<Option<i64>>(22)? {
            held.push((r.get::<String>(9)?, last));
            return Ok(());
        }
        // The key a row answers: its `i`.
        let i = usize::try_from(r.get::<i64>(21)?).map_err(|_| super::StoreError::Type(21))?;
        if let Some((_, chat)) = keys.get(i) {
            found[i] = Some(bots::bot_with_chat(r, chat)?);
        }
        Ok(())
    })?;
    for (chat, last) in held {
        ahead.counters.hold(chat, last);
    }
    Ok(found)
}

/// `keys` as [`read`]'s statement takes them: `[{"i","h","c"}, ...]`,
/// serialized straight from borrowed fields (no JSON tree per key).
fn keys_json(keys: &[([u8; 32], &str)]) -> StoreResult<String> {
    #[derive(serde::Serialize)]
    struct Key<'a> {
        i: usize,
        h: String,
        c: &'a str,
    }
    let rows: Vec<Key<'_>> = keys.iter().enumerate().map(|(i, (h, c))| Key { i, h: crate::hex::lower(h), c }).collect();
    serde_json::to_string(&rows).map_err(|_| super::StoreError::Inconsistent("a group's keys could not be serialized"))
}

/// Locks the rate buckets `buckets` (keys from `limits::keys`) and looks
/// up the Idempotency-Keys `lookups` (bot, key) kept since `since_ms`, in
/// one round trip; what was read goes into `ahead`. Nothing is sent when
/// both are empty.
pub fn read_limits(
    conn: &Conn,
    buckets: &[&str],
    lookups: &[(&str, &str)],
    since_ms: i64,
    ahead: &mut Ahead,
) -> StoreResult<()> {
    if !conn.is_shared() || (buckets.is_empty() && lookups.is_empty()) {
        return Ok(());
    }
    let mut runs: Vec<(&str, Vec<Val<'_>>)> = Vec::new();
    for (bot, key) in lookups {
        let (sql, vals) = idempotency::lookup_read(bot, key, since_ms);
        runs.push((sql, vals));
    }
    let lock = match buckets.is_empty() {
        true => None,
        false => Some(limits::lock_read(conn, buckets)?),
    };
    if let Some((sql, joined)) = &lock {
        runs.push((sql, vec![Val::Text(joined)]));
    }
    let mut found = vec![false; lookups.len()];
    conn.query_pipelined(&runs, |i, r| {
        match lookups.get(i) {
            Some((bot, key)) => {
                found[i] = true;
                idempotency::hold(&mut ahead.keys, bot, key, Some(r))?;
            }
            None => limits::hold(&mut ahead.buckets, r.get_str(0)?.to_string(), r.get::<i64>(1)?),
        }
        Ok(())
    })?;
    for (i, (bot, key)) in lookups.iter().enumerate() {
        if !found[i] {
            idempotency::hold(&mut ahead.keys, bot, key, None)?;
        }
    }
    Ok(())
}
