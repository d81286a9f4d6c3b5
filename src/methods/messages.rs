//! The one write path for messages: a bot's sendMessage and a human's
//! sendUserMessage both go through [`post`], so both see the same rules
//! and the same numbering.

use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::model::{to_json, Chat, MessageJson, Sender, StoredMessage};
use crate::params;
use crate::store::Dialect;
use crate::txn::Ctx;

/// `reply_to_message_id` must name a live message of the same chat.
pub fn check_reply_target(ctx: &Ctx<'_>, chat: &Chat, reply_to: Option<i64>) -> ApiResult<()> {
    if let Some(r) = reply_to {
        match StoredMessage::load(ctx.conn, &chat.id, r)? {
            Some(m) if !m.deleted => {}
            _ => return Err(ApiError::reply_target_not_found()),
        }
    }
    Ok(())
}

/// Stores a message with the chat's next number, emits `message_created`
/// and returns the message JSON.
pub fn post(
    ctx: &mut Ctx<'_>,
    chat: &Chat,
    sender_id: &str,
    sender_is_bot: bool,
    text: &str,
    reply_to: Option<i64>,
) -> ApiResult<Vec<u8>> {
    let date = ctx.now_s();
    let sqlite = ctx.conn.dialect() == Dialect::Sqlite;
    let message_id: i64 = if sqlite {
        // The next number after the chat's last message (rows are never
        // removed, a deleted message keeps its number): read from the page
        // the message is about to be written to, so the chat's row is not
        // rewritten (one page less per chat in a group commit). The one
        // writer makes it race-free. The message row comes after the
        // events: it keeps its update's id.
        ctx.conn
            .prepare_cached("SELECT coalesce(max(message_id), 0) + 1 FROM messages WHERE chat_id = ?1")?
            .query_row([&chat.id], |r| r.get(0))?
    } else {
        // The counter, the message and the end of a chat action in one
        // statement: one round trip.
        ctx.conn
            .prepare_cached(
                "WITH n AS (UPDATE chats SET last_message_id = last_message_id + 1 WHERE id = ?1 RETURNING last_message_id), \
                 a AS (DELETE FROM chat_actions WHERE chat_id = ?1 AND bot_id = ?2 AND ?3 = 1) \
                 INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to) \
                 SELECT ?1, last_message_id, ?2, ?3, ?4, ?5, ?6 FROM n RETURNING message_id",
            )?
            .query_row(params![chat.id, sender_id, sender_is_bot, text, date, reply_to], |r| r.get(0))?
    };
    let msg = MessageJson {
        message_id: message_id.to_string(),
        chat: chat.reference(),
        date,
        text,
        from: Sender { id: sender_id, is_bot: sender_is_bot },
        reply_to_message_id: reply_to.map(|r| r.to_string()),
        edit_date: None,
    };
    let json = to_json(&msg)?;
    let update =
        emit_message(ctx, chat, events::MESSAGE_CREATED, message_id, &json, sender_is_bot.then_some(sender_id))?;
    if sqlite {
        ctx.conn
            .prepare_cached(
                "INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to, created_update) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![chat.id, message_id, sender_id, sender_is_bot, text, date, reply_to, update])?;
        if sender_is_bot {
            // A message ends the bot's chat action in that chat.
            ctx.conn
                .prepare_cached("DELETE FROM chat_actions WHERE chat_id = ?1 AND bot_id = ?2")?
                .execute([&chat.id, sender_id])?;
        }
    }
    Ok(json)
}

/// Emits `{"message": <json>}` as `kind`.
pub fn emit_message(
    ctx: &mut Ctx<'_>,
    chat: &Chat,
    kind: &str,
    message_id: i64,
    message_json: &[u8],
    exclude: Option<&str>,
) -> ApiResult<Option<i64>> {
    let mut data = Vec::with_capacity(message_json.len() + 12);
    data.extend_from_slice(b"{\"message\":");
    data.extend_from_slice(message_json);
    data.push(b'}');
    ctx.emit(Event { exclude, message: Some(message_id), ..Event::new(&chat.id, kind, &data) })
}
