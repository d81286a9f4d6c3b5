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

/// Reads, for each `(token hash, chat id)`, the bot and the chat; and
/// locks the counters of `send_to` (chats a request of the group may post
/// in), holding them in `ahead`. Per key asked, in order: the bot and its
/// chat, if the token is known.
pub fn read(
    conn: &Conn,
    keys: &[([u8; 32], &str)],
    send_to: &[&str],
    ahead: &mut Ahead,
) -> StoreResult<Vec<Option<(Bot, ChatPrefetch)>>> {
    // On a database server one statement reads every bot and chat.
    let many = (conn.dialect() == super::Dialect::Postgres).then(|| keys_json(keys));
    let mut runs: Vec<(&str, Vec<Val<'_>>)> = match &many {
        Some(json) => vec![(bots::BOTS_WITH_CHATS, vec![Val::Text(json)])],
        None => keys.iter().map(|(h, c)| (bots::BOT_WITH_CHAT, vec![Val::Blob(&h[..]), Val::Text(c)])).collect(),
    };
    let lookups = runs.len();
    let mut chats: Vec<&str> = send_to.iter().copied().filter(|c| messages::lockable(c)).collect();
    chats.sort_unstable();
    chats.dedup();
    let lock = messages::lock_counters(&chats);
    if !chats.is_empty() && conn.is_shared() {
        runs.push((lock.0, vec![Val::Text(&lock.1)]));
    }
    let mut found: Vec<Option<(Bot, ChatPrefetch)>> = keys.iter().map(|_| None).collect();
    let mut held = Vec::new();
    conn.query_pipelined(&runs, |run, r| {
        if run >= lookups {
            held.push((r.get::<String>(0)?, r.get::<i64>(1)?));
            return Ok(());
        }
        // The key a row answers: its run, or its `i` in the one statement.
        let i = match many {
            Some(_) => usize::try_from(r.get::<i64>(21)?).map_err(|_| super::StorageError::Type(21))?,
            None => run,
        };
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

/// `keys` as [`bots::BOTS_WITH_CHATS`] takes them.
fn keys_json(keys: &[([u8; 32], &str)]) -> String {
    let rows: Vec<serde_json::Value> = keys
        .iter()
        .enumerate()
        .map(|(i, (h, c))| serde_json::json!({"i": i, "h": crate::hex::lower(h), "c": c}))
        .collect();
    serde_json::Value::Array(rows).to_string()
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
