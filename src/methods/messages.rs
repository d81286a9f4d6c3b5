//! The one write path for messages: a bot's sendMessage and a human's
//! sendUserMessage both go through [`post`], so both see the same rules
//! and the same numbering (each store's algorithm is named in
//! `store::messages::Numbering`).

use super::to_json;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::model::{Chat, MessageJson, Sender};
use crate::store::messages::{self as stored, NewMessage};
use crate::txn::Ctx;
use crate::words::EventKind;

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
