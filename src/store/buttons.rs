//! Commands and buttons as stored: each bot's command lists by scope,
//! the current keyboard of each message that has one, and every press
//! (a callback query) with its one outcome. The outcome is written by a
//! conditional UPDATE (`... WHERE outcome IS NULL`), so of an answer and
//! an expiry, on one node or several, exactly one takes effect; the
//! caller writes the outcome's event in the same transaction only when
//! the UPDATE changed the row.

use super::{Conn, Optional, StoreResult};
use crate::params;

const SET_COMMANDS: &str = "INSERT INTO bot_commands (bot_id, scope, chat_id, commands) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (bot_id, scope, chat_id) DO UPDATE SET commands = excluded.commands";
const DELETE_COMMANDS: &str = "DELETE FROM bot_commands WHERE bot_id = ?1 AND scope = ?2 AND chat_id = ?3";
const GET_COMMANDS: &str = "SELECT commands FROM bot_commands WHERE bot_id = ?1 AND scope = ?2 AND chat_id = ?3";
const COMMANDS_FOR_CHAT: &str = "SELECT scope, chat_id, commands FROM bot_commands \
     WHERE bot_id = ?1 AND (chat_id = '' OR (scope = 'chat' AND chat_id = ?2))";

/// Replaces a bot's list of one scope (`chat_id` `""` for the scopes
/// that name no chat) with `commands` (its JSON).
pub fn set_commands(conn: &Conn, bot_id: &str, scope: &str, chat_id: &str, commands: &str) -> StoreResult<()> {
    conn.prepare_cached(SET_COMMANDS)?.execute(params![bot_id, scope, chat_id, commands])?;
    Ok(())
}

/// Removes a bot's list of one scope (nothing when it has none).
pub fn delete_commands(conn: &Conn, bot_id: &str, scope: &str, chat_id: &str) -> StoreResult<()> {
    conn.prepare_cached(DELETE_COMMANDS)?.execute(params![bot_id, scope, chat_id])?;
    Ok(())
}

/// A bot's list of exactly one scope (its JSON), if it set one.
pub fn commands(conn: &Conn, bot_id: &str, scope: &str, chat_id: &str) -> StoreResult<Option<String>> {
    conn.prepare_cached(GET_COMMANDS)?.query_row(params![bot_id, scope, chat_id], |r| r.get(0)).optional()
}

/// Every list of a bot that may apply in `chat_id`: ((scope, chat id),
/// commands JSON).
pub fn commands_for_chat(conn: &Conn, bot_id: &str, chat_id: &str) -> StoreResult<Vec<((String, String), String)>> {
    conn.prepare_cached(COMMANDS_FOR_CHAT)?
        .query_vec(params![bot_id, chat_id], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
}

const ALL_COMMANDS: &str = "SELECT scope, chat_id, commands FROM bot_commands WHERE bot_id = ?1 \
     ORDER BY CASE scope WHEN 'default' THEN 0 WHEN 'all_private_chats' THEN 1 WHEN 'all_group_chats' THEN 2 ELSE 3 END, \
     chat_id";

/// Every list of a bot: ((scope, chat id), commands JSON), the default
/// first, then all private chats, all groups, and each chat by id.
pub fn all_commands(conn: &Conn, bot_id: &str) -> StoreResult<Vec<((String, String), String)>> {
    conn.prepare_cached(ALL_COMMANDS)?.query_vec([bot_id], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
}

const SET_KEYBOARD: &str = "INSERT INTO message_keyboards (chat_id, message_id, keyboard) VALUES (?1, ?2, ?3) \
     ON CONFLICT (chat_id, message_id) DO UPDATE SET keyboard = excluded.keyboard";
const DELETE_KEYBOARD: &str = "DELETE FROM message_keyboards WHERE chat_id = ?1 AND message_id = ?2";
const KEYBOARD: &str = "SELECT keyboard FROM message_keyboards WHERE chat_id = ?1 AND message_id = ?2";
const KEYBOARDS_AFTER: &str = "SELECT message_id, keyboard FROM message_keyboards \
     WHERE chat_id = ?1 AND message_id > ?2 AND message_id <= ?3";

/// Sets a message's keyboard (its JSON), or removes it (`None`).
pub fn set_keyboard(conn: &Conn, chat_id: &str, message_id: i64, keyboard: Option<&str>) -> StoreResult<()> {
    match keyboard {
        Some(k) => conn.prepare_cached(SET_KEYBOARD)?.execute(params![chat_id, message_id, k])?,
        None => conn.prepare_cached(DELETE_KEYBOARD)?.execute(params![chat_id, message_id])?,
    };
    Ok(())
}

/// A message's current keyboard (its JSON), if it has one.
pub fn keyboard(conn: &Conn, chat_id: &str, message_id: i64) -> StoreResult<Option<String>> {
    conn.prepare_cached(KEYBOARD)?.query_row(params![chat_id, message_id], |r| r.get(0)).optional()
}

/// The keyboards of a chat's messages numbered after `after` up to
/// `through`: (message id, keyboard JSON), for a page of history.
pub fn keyboards_between(conn: &Conn, chat_id: &str, after: i64, through: i64) -> StoreResult<Vec<(i64, String)>> {
    conn.prepare_cached(KEYBOARDS_AFTER)?.query_vec(params![chat_id, after, through], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// A press as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackQuery {
    pub id: String,
    pub bot_id: String,
    pub user_id: String,
    pub chat_id: String,
    pub message_id: i64,
    pub deadline_ms: u64,
    /// `answered` or `expired`; `None` while it waits.
    pub outcome: Option<String>,
}

const INSERT_QUERY: &str = "INSERT INTO callback_queries (id, bot_id, user_id, chat_id, message_id, pressed_at_ms, \
     deadline_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const LOAD_QUERY: &str = "SELECT id, bot_id, user_id, chat_id, message_id, deadline_ms, outcome \
     FROM callback_queries WHERE id = ?1";
const SET_OUTCOME: &str = "UPDATE callback_queries SET outcome = ?2 WHERE id = ?1 AND outcome IS NULL";
const DUE: &str = "SELECT id, bot_id, user_id, chat_id, message_id, deadline_ms, outcome \
     FROM callback_queries WHERE outcome IS NULL AND deadline_ms <= ?1 ORDER BY deadline_ms, id LIMIT ?2";
const NEXT_DEADLINE: &str = "SELECT min(deadline_ms) FROM callback_queries WHERE outcome IS NULL";

fn read_query(r: &super::Row<'_>) -> StoreResult<CallbackQuery> {
    let deadline: i64 = r.get(5)?;
    Ok(CallbackQuery {
        id: r.get(0)?,
        bot_id: r.get(1)?,
        user_id: r.get(2)?,
        chat_id: r.get(3)?,
        message_id: r.get(4)?,
        deadline_ms: deadline.max(0) as u64,
        outcome: r.get(6)?,
    })
}

/// Stores a press, waiting for its outcome until `deadline_ms`.
pub fn insert_query(conn: &Conn, q: &CallbackQuery, pressed_at_ms: u64) -> StoreResult<()> {
    conn.prepare_cached(INSERT_QUERY)?.execute(params![
        q.id,
        q.bot_id,
        q.user_id,
        q.chat_id,
        q.message_id,
        pressed_at_ms as i64,
        q.deadline_ms as i64
    ])?;
    Ok(())
}

pub fn load_query(conn: &Conn, id: &str) -> StoreResult<Option<CallbackQuery>> {
    conn.prepare_cached(LOAD_QUERY)?.query_row([id], read_query).optional()
}

/// Writes the query's outcome if it has none yet: whether this call wrote
/// it (false: another answer or expiry, here or on another node, came
/// first, and its event was written with it).
pub fn set_outcome(conn: &Conn, id: &str, outcome: &str) -> StoreResult<bool> {
    Ok(conn.prepare_cached(SET_OUTCOME)?.execute(params![id, outcome])? == 1)
}

/// Up to `limit` queries still waiting whose deadline is at or before
/// `now_ms`, earliest first.
pub fn due(conn: &Conn, now_ms: u64, limit: i64) -> StoreResult<Vec<CallbackQuery>> {
    conn.prepare_cached(DUE)?.query_vec(params![now_ms as i64, limit], read_query)
}

/// The earliest deadline of the queries still waiting, if any.
pub fn next_deadline(conn: &Conn) -> StoreResult<Option<u64>> {
    let d: Option<i64> = conn.prepare_cached(NEXT_DEADLINE)?.query_row((), |r| r.get(0))?;
    Ok(d.map(|d| d.max(0) as u64))
}

const PRUNE_QUERIES: &str = "DELETE FROM callback_queries WHERE outcome IS NOT NULL AND pressed_at_ms < ?1";

/// Forgets the presses that have their outcome and were made before
/// `before_ms` (pruning, with the event logs' retention): an answer to
/// one of them is then `callback_query_not_found`.
pub fn prune_queries(conn: &Conn, before_ms: i64) -> StoreResult<()> {
    conn.prepare_cached(PRUNE_QUERIES)?.execute([before_ms])?;
    Ok(())
}
