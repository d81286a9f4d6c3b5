//! Messages as stored, and how each store numbers them.
//!
//! A chat's messages are numbered 1, 2, 3... with no gap; a deleted message
//! keeps its number (its row stays, marked deleted). The two stores take
//! the next number by different algorithms ([`Numbering`]), both behind
//! [`reserve`] and [`finish`], so `methods::messages::post` is one path
//! and the shared vectors check both.

use super::{Conn, Dialect, Optional, Row, StoreResult};
use crate::model::{Chat, StoredMessage};
use crate::params;

/// How a store takes a chat's next message number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering {
    /// SQLite: one plus the chat's highest `message_id`, read from the index
    /// page the new row is about to be written to, so the chat's row is
    /// not rewritten (one page less per chat in a group commit). The one
    /// writer makes it race-free. `chats.last_message_id` is not
    /// maintained (it stays 0).
    MaxPlusOne,
    /// PostgreSQL: `chats.last_message_id`, whose row the transaction
    /// locks. Several nodes write at once: the row lock orders them. The
    /// first message of a transaction to a chat bumps it and writes the
    /// message in one statement (one round trip), unless the group read
    /// it ahead ([`Counters`]); the chat's next messages in the
    /// transaction are numbered in memory and written without a round
    /// trip of their own.
    ChatCounter,
}

impl Numbering {
    pub fn of(conn: &Conn) -> Numbering {
        match conn.dialect() {
            Dialect::Sqlite => Numbering::MaxPlusOne,
            Dialect::Postgres => Numbering::ChatCounter,
        }
    }
}

const NEXT_NUMBER: &str = "SELECT coalesce(max(message_id), 0) + 1 FROM messages WHERE chat_id = ?1";

/// SQLite's message row, written after its events: it keeps the id of its
/// `message_created` update (`created_update`, see `store::events`).
const INSERT_NUMBERED: &str = "INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, \
     reply_to, created_update) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

const END_CHAT_ACTION: &str = "DELETE FROM chat_actions WHERE chat_id = ?1 AND bot_id = ?2";

/// PostgreSQL: the counter, the message and the end of the sender bot's
/// chat action in one statement.
const INSERT_COUNTED: &str = "WITH n AS (UPDATE chats SET last_message_id = last_message_id + 1 WHERE id = ?1 \
     RETURNING last_message_id), \
     a AS (DELETE FROM chat_actions WHERE chat_id = ?1 AND bot_id = ?2 AND ?3 = 1) \
     INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to) \
     SELECT ?1, last_message_id, ?2, ?3, ?4, ?5, ?6 FROM n RETURNING message_id";

/// PostgreSQL: messages numbered in memory (see [`Counters`]), a JSON array
/// of rows (`?1`), with their chats' counters set to the highest and the
/// sender bots' chat actions ended, in one statement that waits for the
/// next round trip; `$more` is one more CTE of the statement (or none).
/// It waits for no other transaction: the chats' rows are locked already,
/// and a chat action another transaction is setting right now is left to
/// it (that action comes after this message).
macro_rules! insert_at {
    ($more:literal) => {
        concat!(
            "WITH t AS (SELECT * FROM json_to_recordset(?1::text::json) \
             AS t(chat text, id bigint, sender text, bot bigint, text text, date bigint, reply bigint)), \
             n AS (UPDATE chats c SET last_message_id = x.id FROM (SELECT chat, max(id) AS id FROM t GROUP BY chat) x \
             WHERE c.id = x.chat), \
             a AS (DELETE FROM chat_actions WHERE (chat_id, bot_id) IN (SELECT chat_id, bot_id FROM chat_actions \
             WHERE (chat_id, bot_id) IN (SELECT chat, sender FROM t WHERE bot = 1) FOR UPDATE SKIP LOCKED))",
            $more,
            " INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to) \
             SELECT chat, id, sender, bot, text, date, reply FROM t"
        )
    };
}

/// See [`insert_at`].
const INSERT_AT: &str = insert_at!("");

/// PostgreSQL: [`INSERT_AT`] and, in the same statement, the transaction's
/// host-stream rows (`?2`, as `store::events` writes them at COMMIT: new
/// rows, numbered by `seq` in their order `i`), when the messages are the
/// last write queued before the COMMIT: one statement less per group.
pub(super) const INSERT_AT_AND_PENDING: &str = insert_at!(
    ", p AS (INSERT INTO updates_pending (created_at_ms, type, data, ref_chat, ref_message) \
     SELECT u.at, u.kind, u.data, u.chat, u.message FROM json_to_recordset(?2::text::json) \
     AS u(i bigint, at bigint, kind text, data text, chat text, message bigint) ORDER BY u.i)"
);

/// The messages the open transaction queued last, as [`INSERT_AT`]'s JSON
/// array, taken back from the queue when nothing was queued after them
/// (see `Conn::take_last_rows`): the caller writes them with
/// [`INSERT_AT_AND_PENDING`].
pub(super) fn take_queued(conn: &Conn) -> Option<String> {
    conn.take_last_rows(INSERT_AT)
}

/// A row of [`INSERT_AT`].
#[derive(serde::Serialize)]
struct AtRow<'a> {
    chat: &'a str,
    id: i64,
    sender: &'a str,
    bot: i64,
    text: &'a str,
    date: i64,
    reply: Option<i64>,
}

const LOAD: &str = "SELECT message_id, sender_id, sender_is_bot, text, date, edit_date, reply_to, deleted \
     FROM messages WHERE chat_id = ?1 AND message_id = ?2";

/// [`LOAD`] and the message's current keyboard, in one statement: what an
/// edit compares its change with.
const LOAD_WITH_KEYBOARD: &str = "SELECT m.message_id, m.sender_id, m.sender_is_bot, m.text, m.date, m.edit_date, \
     m.reply_to, m.deleted, k.keyboard FROM messages m \
     LEFT JOIN message_keyboards k ON k.chat_id = m.chat_id AND k.message_id = m.message_id \
     WHERE m.chat_id = ?1 AND m.message_id = ?2";

/// SQLite: the chat and `?2`'s membership (as `chats::load_with_member`
/// reads them) with the message `?3` and its keyboard (as
/// [`LOAD_WITH_KEYBOARD`]): an edit's reads in one statement.
const LOAD_FOR_MEMBER_SQLITE: &str = "SELECT c.id, c.type, c.title, c.user_id, c.bot_id, c.started, \
     c.blocked_by_user, c.blocked_by_bot, c.bots_can_send, c.dissolved, m.active, g.message_id, g.sender_id, g.sender_is_bot, g.text, g.date, g.edit_date, g.reply_to, g.deleted, k.keyboard \
     FROM chats c LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = ?2 \
     LEFT JOIN messages g ON g.chat_id = c.id AND g.message_id = ?3 \
     LEFT JOIN message_keyboards k ON k.chat_id = c.id AND k.message_id = ?3 WHERE c.id = ?1";

const HISTORY: &str = "SELECT message_id, sender_id, sender_is_bot, text, date, edit_date, reply_to, deleted \
     FROM messages WHERE chat_id = ?1 AND message_id > ?2 ORDER BY message_id LIMIT ?3";

const EDIT: &str = "UPDATE messages SET text = ?1, edit_date = ?2 WHERE chat_id = ?3 AND message_id = ?4";

const SET_EDIT_DATE: &str = "UPDATE messages SET edit_date = ?1 WHERE chat_id = ?2 AND message_id = ?3";

const MARK_DELETED: &str = "UPDATE messages SET deleted = 1, text = NULL WHERE chat_id = ?1 AND message_id = ?2";

/// A message about to be stored.
pub struct NewMessage<'a> {
    pub chat_id: &'a str,
    pub sender_id: &'a str,
    pub sender_is_bot: bool,
    pub text: &'a str,
    pub date: i64,
    pub reply_to: Option<i64>,
}

/// The message counters a PostgreSQL transaction holds: chat → its last
/// number, read with the chat's row locked (by the group ahead, see
/// `store::group`, or by the chat's first message of the transaction).
/// The transaction's next messages to that chat are numbered from it
/// without a round trip. Empty on SQLite; it lives as long as its
/// transaction.
#[derive(Default, Debug)]
pub struct Counters(std::collections::HashMap<String, i64>);

impl Counters {
    /// Keeps `last` as the chat's last number, read under the row lock.
    pub fn hold(&mut self, chat_id: String, last: i64) {
        self.0.insert(chat_id, last);
    }

    /// The chat's next number, if its counter is held.
    fn take_next(&mut self, chat_id: &str) -> Option<i64> {
        let last = self.0.get_mut(chat_id)?;
        *last += 1;
        Some(*last)
    }
}

/// The chats whose counters a group can read ahead (`store::group::read`):
/// ids that can be named in its comma-joined list.
pub fn lockable(chat_id: &str) -> bool {
    !chat_id.is_empty() && !chat_id.contains(',')
}

/// Takes the chat's next number for `m`. With [`Numbering::ChatCounter`]
/// the message is written now, or queued for the next round trip when
/// `counters` holds the chat's counter (a sending bot's chat action ends
/// with it); with [`Numbering::MaxPlusOne`] only the number is read, and
/// [`finish`] writes the row once its update id is known.
pub fn reserve(conn: &Conn, counters: &mut Counters, m: &NewMessage<'_>) -> StoreResult<i64> {
    match Numbering::of(conn) {
        Numbering::MaxPlusOne => conn.prepare_cached(NEXT_NUMBER)?.query_row([m.chat_id], |r| r.get(0)),
        Numbering::ChatCounter => match counters.take_next(m.chat_id) {
            Some(n) => {
                let row = AtRow {
                    chat: m.chat_id,
                    id: n,
                    sender: m.sender_id,
                    bot: i64::from(m.sender_is_bot),
                    text: m.text,
                    date: m.date,
                    reply: m.reply_to,
                };
                let row = serde_json::to_string(&row)
                    .map_err(|_| super::StoreError::Inconsistent("a message could not be serialized"))?;
                conn.defer_row(INSERT_AT, &row, super::Deferral::on_held_rows("a message was not written"))?;
                Ok(n)
            }
            None => {
                let n: i64 = conn
                    .prepare_cached(INSERT_COUNTED)?
                    .query_row(params![m.chat_id, m.sender_id, m.sender_is_bot, m.text, m.date, m.reply_to], |r| {
                        r.get(0)
                    })?;
                counters.hold(m.chat_id.to_string(), n);
                Ok(n)
            }
        },
    }
}

/// Completes what [`reserve`] began, after the message's events:
/// `update` is the id of its `message_created` update when the store
/// keeps it on the row.
pub fn finish(conn: &Conn, m: &NewMessage<'_>, message_id: i64, update: Option<i64>) -> StoreResult<()> {
    if Numbering::of(conn) == Numbering::ChatCounter {
        return Ok(());
    }
    conn.prepare_cached(INSERT_NUMBERED)?.execute(params![
        m.chat_id,
        message_id,
        m.sender_id,
        m.sender_is_bot,
        m.text,
        m.date,
        m.reply_to,
        update
    ])?;
    if m.sender_is_bot {
        // A message ends the bot's chat action in that chat.
        conn.prepare_cached(END_CHAT_ACTION)?.execute([m.chat_id, m.sender_id])?;
    }
    Ok(())
}

fn read_message(r: &Row<'_>) -> StoreResult<StoredMessage> {
    read_message_at(r, 0)
}

/// A message from its eight columns starting at column `at`.
fn read_message_at(r: &Row<'_>, at: usize) -> StoreResult<StoredMessage> {
    Ok(StoredMessage {
        message_id: r.get(at)?,
        sender_id: r.get(at + 1)?,
        sender_is_bot: r.get(at + 2)?,
        text: r.get(at + 3)?,
        date: r.get(at + 4)?,
        edit_date: r.get(at + 5)?,
        reply_to: r.get(at + 6)?,
        deleted: r.get(at + 7)?,
        reply_markup: None,
    })
}

pub fn load(conn: &Conn, chat_id: &str, message_id: i64) -> StoreResult<Option<StoredMessage>> {
    conn.prepare_cached(LOAD)?.query_row(params![chat_id, message_id], read_message).optional()
}

/// The message with its current keyboard (`reply_markup`), if it exists.
pub fn load_with_keyboard(conn: &Conn, chat_id: &str, message_id: i64) -> StoreResult<Option<StoredMessage>> {
    conn.prepare_cached(LOAD_WITH_KEYBOARD)?
        .query_row(params![chat_id, message_id], |r| Ok(StoredMessage { reply_markup: r.get(8)?, ..read_message(r)? }))
        .optional()
}

/// A chat, a member's membership in it (as `chats::membership`) and one
/// of its messages with its keyboard, if that exists.
pub type MessageInChat = (Chat, Option<bool>, Option<StoredMessage>);

/// What an edit or a delete reads: the chat, `member_id`'s membership and
/// the message with its keyboard, if the chat exists. One statement on
/// SQLite; on PostgreSQL the two of `chats::load_with_member` and
/// [`load_with_keyboard`].
pub fn load_for_member(
    conn: &Conn,
    chat_id: &str,
    member_id: &str,
    message_id: i64,
) -> StoreResult<Option<MessageInChat>> {
    if conn.dialect() == Dialect::Postgres {
        let Some((chat, member)) = super::chats::load_with_member(conn, chat_id, member_id)? else { return Ok(None) };
        let msg = load_with_keyboard(conn, &chat.id, message_id)?;
        return Ok(Some((chat, member, msg)));
    }
    conn.prepare_cached(LOAD_FOR_MEMBER_SQLITE)?
        .query_row(params![chat_id, member_id, message_id], |r| {
            let found: Option<i64> = r.get(11)?;
            let msg = match found {
                Some(_) => Some(StoredMessage { reply_markup: r.get(19)?, ..read_message_at(r, 11)? }),
                None => None,
            };
            Ok((super::chats::read_chat(r, 0)?, r.get::<Option<bool>>(10)?, msg))
        })
        .optional()
}

/// Up to `limit` messages after `after`, oldest first (deleted ones too).
pub fn history(conn: &Conn, chat_id: &str, after: i64, limit: i64) -> StoreResult<Vec<StoredMessage>> {
    conn.prepare_cached(HISTORY)?.query_vec(params![chat_id, after, limit], read_message)
}

pub fn edit(conn: &Conn, chat_id: &str, message_id: i64, text: &str, edit_date: i64) -> StoreResult<()> {
    conn.prepare_cached(EDIT)?.execute(params![text, edit_date, chat_id, message_id])?;
    Ok(())
}

/// Marks a message edited without changing its text (its keyboard
/// changed).
pub fn set_edit_date(conn: &Conn, chat_id: &str, message_id: i64, edit_date: i64) -> StoreResult<()> {
    conn.prepare_cached(SET_EDIT_DATE)?.execute(params![edit_date, chat_id, message_id])?;
    Ok(())
}

/// Marks a message deleted and drops its text (its number stays taken).
pub fn mark_deleted(conn: &Conn, chat_id: &str, message_id: i64) -> StoreResult<()> {
    conn.prepare_cached(MARK_DELETED)?.execute(params![chat_id, message_id])?;
    Ok(())
}
