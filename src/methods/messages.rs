//! The one write path for messages: a bot's sendMessage and a human's
//! sendUserMessage both go through [`post`], so both see the same rules
//! and the same numbering (each store's algorithm is named in
//! `store::messages::Numbering`).

use super::to_json;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::model::{Bot, Chat, ChatRef, MessageJson, Sender, StoredMessage};
use crate::protocol::EventKind;
use crate::rules::permissions::{self, Act};
use crate::store::messages::{self as stored, NewMessage};
use crate::txn::Ctx;

/// A stored message's JSON, with the command its text starts with.
pub fn message_json<'a>(m: &'a StoredMessage, chat: ChatRef<'a>) -> MessageJson<'a> {
    let mut j = m.json(chat);
    j.command = crate::rules::commands::command_of(j.text);
    j
}

/// The chat, if this bot is or was ever a member; otherwise chat_not_found
/// (a chat the bot never saw does not exist for it).
pub fn visible_chat(ctx: &mut Ctx<'_>, bot: &Bot, chat_id: &str) -> ApiResult<(Chat, bool)> {
    match ctx.chat_with_member(chat_id, bot)? {
        Some((chat, Some(active))) => Ok((chat, active)),
        _ => Err(ApiError::chat_not_found()),
    }
}

/// Chat, membership and the message (with its current keyboard), checked
/// for edit and delete, once their fields are read.
pub fn owned_message(ctx: &mut Ctx<'_>, bot: &Bot, chat_id: &str, message_id: i64) -> ApiResult<(Chat, StoredMessage)> {
    // One read; the checks in their order (as `visible_chat`, then the message's).
    let (chat, member, msg) = match ctx.chat_with_message(chat_id, bot, message_id)? {
        Some((chat, Some(active), msg)) => (chat, active, msg),
        _ => return Err(ApiError::chat_not_found()),
    };
    permissions::check(Act::BotEdits, &chat, member)?;
    let msg = match msg {
        Some(m) if !m.deleted => m,
        _ => return Err(ApiError::message_not_found()),
    };
    if msg.sender_id != bot.id {
        return Err(ApiError::not_message_owner());
    }
    Ok((chat, msg))
}

/// `reply_to_message_id` must name a live message of the same chat.
pub fn check_reply_target(ctx: &Ctx<'_>, chat: &Chat, reply_to: Option<i64>) -> ApiResult<()> {
    if let Some(r) = reply_to {
        match stored::load(ctx.conn, &chat.id, r)? {
            Some(m) if !m.deleted => {}
            _ => return Err(ApiError::reply_target_not_found()),
        }
    }
    Ok(())
}

/// Stores a message with the chat's next number (and its keyboard, if
/// any), emits `message_created` and returns the message JSON.
pub fn post(
    ctx: &mut Ctx<'_>,
    chat: &Chat,
    sender_id: &str,
    sender_is_bot: bool,
    text: &str,
    reply_to: Option<i64>,
    keyboard: Option<&str>,
) -> ApiResult<Vec<u8>> {
    let date = ctx.now_s();
    let new = NewMessage { chat_id: &chat.id, sender_id, sender_is_bot, text, date, reply_to };
    let message_id = stored::reserve(ctx.conn, &mut ctx.fx.ahead.counters, &new)?;
    let msg = MessageJson {
        message_id: message_id.to_string(),
        chat: chat.reference(),
        date,
        text,
        command: crate::rules::commands::command_of(text),
        from: Sender { id: sender_id, is_bot: sender_is_bot },
        reply_to_message_id: reply_to.map(|r| r.to_string()),
        edit_date: None,
        reply_markup: crate::model::keyboard_value(keyboard),
    };
    let json = to_json(&msg)?;
    let update =
        emit_message(ctx, chat, EventKind::MessageCreated, message_id, &json, sender_is_bot.then_some(sender_id))?;
    // On SQLite the row comes after the events: it keeps its update's id.
    stored::finish(ctx.conn, &new, message_id, update)?;
    if keyboard.is_some() {
        crate::store::buttons::set_keyboard(ctx.conn, &chat.id, message_id, keyboard)?;
    }
    Ok(json)
}

/// Emits `{"message": <json>}` as `kind`.
pub fn emit_message(
    ctx: &mut Ctx<'_>,
    chat: &Chat,
    kind: EventKind,
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
