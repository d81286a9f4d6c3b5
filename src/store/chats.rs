//! Chats, their members and the bots' chat actions, as stored.

use super::{Conn, Dialect, Optional, Row, StoreResult};
use crate::model::{Chat, ChatKind};
use crate::params;

const LOAD: &str = "SELECT id, type, title, user_id, bot_id, started, blocked_by_user, blocked_by_bot, \
     bots_can_send, dissolved FROM chats WHERE id = ?1";

const LOAD_WITH_MEMBER: &str = "SELECT c.id, c.type, c.title, c.user_id, c.bot_id, c.started, c.blocked_by_user, \
     c.blocked_by_bot, c.bots_can_send, c.dissolved, m.active FROM chats c \
     LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = ?2 WHERE c.id = ?1";

const CURRENT_MEMBERS: &str =
    "SELECT member_id, is_bot FROM members WHERE chat_id = ?1 AND active = 1 ORDER BY member_id";

const MEMBERSHIP: &str = "SELECT active FROM members WHERE chat_id = ?1 AND member_id = ?2";

const MEMBER_IS_BOT: &str = "SELECT is_bot FROM members WHERE chat_id = ?1 AND member_id = ?2";

/// SQLite is told the partial index: its planner would pick the primary
/// key and scan a group's human members too.
const CURRENT_BOTS_SQLITE: &str = "SELECT member_id FROM members INDEXED BY members_current_bots \
     WHERE chat_id = ?1 AND is_bot = 1 AND active = 1";
const CURRENT_BOTS_POSTGRES: &str = "SELECT member_id FROM members WHERE chat_id = ?1 AND is_bot = 1 AND active = 1";

const PRIVATE_CHAT_OF: &str = "SELECT id FROM chats WHERE type = 'private' AND user_id = ?1 AND bot_id = ?2";

const INSERT_PRIVATE: &str =
    "INSERT INTO chats (id, type, user_id, bot_id, created_at) VALUES (?1, 'private', ?2, ?3, ?4)";

const INSERT_GROUP: &str =
    "INSERT INTO chats (id, type, title, bots_can_send, created_at) VALUES (?1, 'group', ?2, ?3, ?4)";

/// Adds a member, or makes a former one current again; changes nothing
/// for a current member.
const ADD_MEMBER: &str = "INSERT INTO members (chat_id, member_id, is_bot, active) VALUES (?1, ?2, ?3, 1) \
     ON CONFLICT (chat_id, member_id) DO UPDATE SET active = 1 WHERE members.active = 0";

const REMOVE_MEMBER: &str = "UPDATE members SET active = 0 WHERE chat_id = ?1 AND member_id = ?2";

const SET_STARTED: &str = "UPDATE chats SET started = 1 WHERE id = ?1";
const SET_BLOCKED_BY_USER: &str = "UPDATE chats SET blocked_by_user = ?1 WHERE id = ?2";
const SET_BLOCKED_BY_BOT: &str = "UPDATE chats SET blocked_by_bot = ?1 WHERE id = ?2";
const SET_BOTS_CAN_SEND: &str = "UPDATE chats SET bots_can_send = ?1 WHERE id = ?2";
const SET_DISSOLVED: &str = "UPDATE chats SET dissolved = 1 WHERE id = ?1";

const SET_ACTION: &str = "INSERT INTO chat_actions (chat_id, bot_id, action, expires_at_ms) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (chat_id, bot_id) DO UPDATE SET action = excluded.action, expires_at_ms = excluded.expires_at_ms";

const LIVE_ACTIONS: &str = "SELECT bot_id, action, expires_at_ms FROM chat_actions \
     WHERE chat_id = ?1 AND expires_at_ms > ?2 ORDER BY bot_id";

/// A chat from its ten columns starting at column `at`.
pub fn read_chat(r: &Row<'_>, at: usize) -> StoreResult<Chat> {
    let kind: String = r.get(at + 1)?;
    Ok(Chat {
        id: r.get(at)?,
        kind: if kind == "private" { ChatKind::Private } else { ChatKind::Group },
        title: r.get(at + 2)?,
        user_id: r.get(at + 3)?,
        bot_id: r.get(at + 4)?,
        started: r.get(at + 5)?,
        blocked_by_user: r.get(at + 6)?,
        blocked_by_bot: r.get(at + 7)?,
        bots_can_send: r.get(at + 8)?,
        dissolved: r.get(at + 9)?,
    })
}

pub fn load(conn: &Conn, id: &str) -> StoreResult<Option<Chat>> {
    conn.prepare_cached(LOAD)?.query_row([id], |r| read_chat(r, 0)).optional()
}

/// The chat and `member_id`'s membership in it (as [`membership`]), in
/// one query: every bot method needs both, and on a database server each
/// query is a round trip.
pub fn load_with_member(conn: &Conn, id: &str, member_id: &str) -> StoreResult<Option<(Chat, Option<bool>)>> {
    conn.prepare_cached(LOAD_WITH_MEMBER)?
        .query_row([id, member_id], |r| Ok((read_chat(r, 0)?, r.get::<Option<bool>>(10)?)))
        .optional()
}

/// The current members, by id: (id, is_bot).
pub fn current_members(conn: &Conn, chat_id: &str) -> StoreResult<Vec<(String, bool)>> {
    conn.prepare_cached(CURRENT_MEMBERS)?.query_vec([chat_id], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// Membership of `member_id` in `chat_id`: None if never a member, else
/// Some(true) for a current and Some(false) for a former member.
pub fn membership(conn: &Conn, chat_id: &str, member_id: &str) -> StoreResult<Option<bool>> {
    conn.prepare_cached(MEMBERSHIP)?.query_row([chat_id, member_id], |r| r.get(0)).optional()
}

/// Whether a (current or former) member is a bot.
pub fn member_is_bot(conn: &Conn, chat_id: &str, member_id: &str) -> StoreResult<bool> {
    conn.prepare_cached(MEMBER_IS_BOT)?.query_row([chat_id, member_id], |r| r.get(0))
}

/// Appends the ids of the bots currently in a chat to `out`.
pub fn current_bots(conn: &Conn, chat_id: &str, out: &mut Vec<String>) -> StoreResult<()> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => CURRENT_BOTS_SQLITE,
        Dialect::Postgres => CURRENT_BOTS_POSTGRES,
    };
    conn.prepare_cached(sql)?.query_each([chat_id], |r| {
        out.push(r.get(0)?);
        Ok(true)
    })
}

/// The id of the private chat of a user and a bot, if there is one.
pub fn private_chat_of(conn: &Conn, user_id: &str, bot_id: &str) -> StoreResult<Option<String>> {
    conn.prepare_cached(PRIVATE_CHAT_OF)?.query_row([user_id, bot_id], |r| r.get(0)).optional()
}

pub fn insert_private(conn: &Conn, id: &str, user_id: &str, bot_id: &str, created_at: i64) -> StoreResult<()> {
    conn.prepare_cached(INSERT_PRIVATE)?.execute(params![id, user_id, bot_id, created_at])?;
    Ok(())
}

pub fn insert_group(conn: &Conn, id: &str, title: &str, bots_can_send: bool, created_at: i64) -> StoreResult<()> {
    conn.prepare_cached(INSERT_GROUP)?.execute(params![id, title, bots_can_send, created_at])?;
    Ok(())
}

/// Makes `member_id` a current member; true when it was not one already.
pub fn add_member(conn: &Conn, chat_id: &str, member_id: &str, is_bot: bool) -> StoreResult<bool> {
    Ok(conn.prepare_cached(ADD_MEMBER)?.execute(params![chat_id, member_id, is_bot])? > 0)
}

/// Makes a current member a former one.
pub fn remove_member(conn: &Conn, chat_id: &str, member_id: &str) -> StoreResult<()> {
    conn.prepare_cached(REMOVE_MEMBER)?.execute([chat_id, member_id])?;
    Ok(())
}

pub fn set_started(conn: &Conn, chat_id: &str) -> StoreResult<()> {
    conn.prepare_cached(SET_STARTED)?.execute([chat_id])?;
    Ok(())
}

/// Who blocks in a private chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocker {
    User,
    Bot,
}

pub fn set_blocked(conn: &Conn, chat_id: &str, by: Blocker, blocked: bool) -> StoreResult<()> {
    let sql = match by {
        Blocker::User => SET_BLOCKED_BY_USER,
        Blocker::Bot => SET_BLOCKED_BY_BOT,
    };
    conn.prepare_cached(sql)?.execute(params![blocked, chat_id])?;
    Ok(())
}

pub fn set_bots_can_send(conn: &Conn, chat_id: &str, bots_can_send: bool) -> StoreResult<()> {
    conn.prepare_cached(SET_BOTS_CAN_SEND)?.execute(params![bots_can_send, chat_id])?;
    Ok(())
}

pub fn set_dissolved(conn: &Conn, chat_id: &str) -> StoreResult<()> {
    conn.prepare_cached(SET_DISSOLVED)?.execute([chat_id])?;
    Ok(())
}

/// A bot's chat action in a chat, until `expires_at_ms` (replacing the one before).
pub fn set_action(conn: &Conn, chat_id: &str, bot_id: &str, action: &str, expires_at_ms: i64) -> StoreResult<()> {
    conn.prepare_cached(SET_ACTION)?.execute(params![chat_id, bot_id, action, expires_at_ms])?;
    Ok(())
}

/// The chat actions not expired at `now_ms`: (bot id, action, expires_at_ms).
pub fn live_actions(conn: &Conn, chat_id: &str, now_ms: i64) -> StoreResult<Vec<(String, String, i64)>> {
    conn.prepare_cached(LIVE_ACTIONS)?.query_vec(params![chat_id, now_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
}
