//! Commands and buttons: the bot methods setMyCommands, getMyCommands,
//! deleteMyCommands, editMessageReplyMarkup and answerCallbackQuery, and
//! the host methods getChatCommands and pressButton. The rules are
//! `rules::commands` and `rules::keyboard`; what is stored is
//! `store::buttons`'.

use super::params::Body;
use super::requests::body;
use super::requests::{self, MessageId};
use super::to_json;
use crate::error::{ApiError, ApiResult};
use crate::http::Request;
use crate::model::{Bot, Chat, StoredMessage};
use crate::protocol::EventKind;
use crate::rules::commands::{self, Scope};
use crate::rules::idempotency::{self, Decision};
use crate::rules::keyboard;
use crate::rules::permissions::{self, Act};
use crate::store::{self, buttons::CallbackQuery};
use crate::txn::Ctx;
use serde_json::{json, Value};

/// The chat a chat scope names must be one the bot can see (a member
/// now or once): else `chat_not_found`, as for every chat a bot names.
fn check_scope(ctx: &mut Ctx<'_>, bot: &Bot, scope: Scope<'_>) -> ApiResult<()> {
    if let Scope::Chat(chat_id) = scope {
        match ctx.chat_with_member(chat_id, bot)? {
            Some((_, Some(_))) => {}
            _ => return Err(ApiError::chat_not_found()),
        }
    }
    Ok(())
}

/// setMyCommands: replaces the list of one scope; an empty list removes
/// it, so the next wider scope's list applies again.
pub fn set_my_commands(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let list = commands::parse_list(body.get("commands"))?;
    let scope = commands::parse_scope(body.get("scope"))?;
    check_scope(ctx, bot, scope)?;
    let (kind, chat) = scope.key();
    if list.is_empty() {
        store::buttons::delete_commands(ctx.conn, &bot.id, kind, chat)?;
    } else {
        let json = String::from_utf8(to_json(&list)?).unwrap_or_default();
        store::buttons::set_commands(ctx.conn, &bot.id, kind, chat, &json)?;
    }
    Ok(b"true".to_vec())
}

/// getMyCommands: the list of exactly that scope, `[]` when none.
pub fn get_my_commands(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let scope = commands::parse_scope(body.get("scope"))?;
    check_scope(ctx, bot, scope)?;
    let (kind, chat) = scope.key();
    Ok(store::buttons::commands(ctx.conn, &bot.id, kind, chat)?.unwrap_or_else(|| "[]".into()).into_bytes())
}

/// deleteMyCommands: removes the list of that scope (none is no error).
pub fn delete_my_commands(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let scope = commands::parse_scope(body.get("scope"))?;
    check_scope(ctx, bot, scope)?;
    let (kind, chat) = scope.key();
    store::buttons::delete_commands(ctx.conn, &bot.id, kind, chat)?;
    Ok(b"true".to_vec())
}

/// getChatCommands (host): for each bot that could send in the chat
/// now, by handle, the list of the narrowest scope that has one (`[]`
/// when none applies).
pub fn get_chat_commands(ctx: &mut Ctx<'_>, chat: &Chat) -> ApiResult<Value> {
    let mut bots = Vec::new();
    store::chats::current_bots(ctx.conn, &chat.id, &mut bots)?;
    let mut out = Vec::new();
    for bot_id in bots {
        let Some(bot) = store::bots::by_id(ctx.conn, &bot_id)? else { continue };
        if !bot.active || permissions::check(Act::BotSends, chat, true).is_err() {
            continue;
        }
        let lists = store::buttons::commands_for_chat(ctx.conn, &bot.id, &chat.id)?;
        let list: Value = commands::pick(&lists, &chat.id, chat.kind)
            .and_then(|l| serde_json::from_slice(l.as_bytes()).ok())
            .unwrap_or_else(|| json!([]));
        out.push((bot.handle.clone(), json!({"bot_id": bot.id, "handle": bot.handle, "commands": list})));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Value::Array(out.into_iter().map(|(_, v)| v).collect()))
}

/// getBotCommands (host, the console's): every list a bot set, with its
/// scope as setMyCommands takes it.
pub fn get_bot_commands(ctx: &mut Ctx<'_>, bot: &Bot) -> ApiResult<Value> {
    let lists = store::buttons::all_commands(ctx.conn, &bot.id)?;
    let out = lists
        .into_iter()
        .map(|((kind, chat), list)| {
            let scope = if kind == "chat" { json!({"type": kind, "chat_id": chat}) } else { json!({"type": kind}) };
            let commands: Value = serde_json::from_slice(list.as_bytes()).unwrap_or_else(|_| json!([]));
            json!({"scope": scope, "commands": commands})
        })
        .collect();
    Ok(Value::Array(out))
}

body! {
    /// editMessageReplyMarkup's body, in check order.
    struct EditMarkup<'a> {
        chat_id: &'a str,
        message_id: MessageId,
    }
}

/// editMessageReplyMarkup: sets the keyboard (absent or `null` removes
/// it), with editMessageText's rules; the text stays. A change is a
/// `message_edited` with the edit date; the same keyboard again changes
/// nothing.
pub fn edit_reply_markup(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let EditMarkup { chat_id, message_id: MessageId(message_id) } = requests::parse(body)?;
    let markup = keyboard::parse(body.get("reply_markup"))?;
    let (chat, msg) = super::messages::owned_message(ctx, bot, chat_id, message_id)?;
    set_markup(ctx, bot, &chat, msg, None, markup.map(|k| k.0))
}

/// Writes a bot's edit of its message (as [`super::messages::owned_message`]
/// read it, with its current keyboard): new text (`Some`), and the
/// keyboard it will have; emits `message_edited` when either changed.
pub fn set_markup(
    ctx: &mut Ctx<'_>,
    bot: &Bot,
    chat: &Chat,
    mut msg: StoredMessage,
    text: Option<&str>,
    keyboard: Option<String>,
) -> ApiResult<Vec<u8>> {
    let text_changes = text.is_some_and(|t| msg.text.as_deref() != Some(t));
    let keyboard_changes = keyboard != msg.reply_markup;
    if !text_changes && !keyboard_changes {
        // Nothing changes: success, no event.
        return to_json(&super::messages::message_json(&msg, chat.reference()));
    }
    let edit_date = ctx.now_s();
    if let Some(t) = text.filter(|_| text_changes) {
        store::messages::edit(ctx.conn, &chat.id, msg.message_id, t, edit_date)?;
        msg.text = Some(t.to_string());
    } else {
        store::messages::set_edit_date(ctx.conn, &chat.id, msg.message_id, edit_date)?;
    }
    if keyboard_changes {
        store::buttons::set_keyboard(ctx.conn, &chat.id, msg.message_id, keyboard.as_deref())?;
        msg.reply_markup = keyboard;
    }
    msg.edit_date = Some(edit_date);
    let json = to_json(&super::messages::message_json(&msg, chat.reference()))?;
    super::messages::emit_message(ctx, chat, EventKind::MessageEdited, msg.message_id, &json, Some(&bot.id))?;
    Ok(json)
}

body! {
    /// pressButton's body, in check order.
    struct Press<'a> {
        user_id: &'a str,
        chat_id: &'a str,
        message_id: MessageId,
        callback_data: &'a str,
    }
}

/// pressButton (host): a user presses a keyboard button. The user is held
/// to sendUserMessage's rules; the button must be on the message's current
/// keyboard, and the bot that showed it still a member. The bot gets
/// `callback_query` in its log (the host's stream too); an outcome
/// (`callback_answered` or `callback_expired`) follows on the host's
/// stream. An `Idempotency-Key` is kept per user, as a bot's on
/// sendMessage.
pub fn press_button(ctx: &mut Ctx<'_>, body: &Body, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    let Press { user_id, chat_id, message_id: MessageId(message_id), callback_data } = requests::parse(body)?;
    let key = idempotency::key(req.header("idempotency-key"))?;
    let hash = key.map(|_| idempotency::request_hash(body));
    if let (Some(key), Some(hash)) = (key, &hash) {
        let prior =
            store::idempotency::lookup(ctx.conn, &ctx.fx.ahead.keys, user_id, key, idempotency::cutoff(ctx.now_ms))?;
        if let Some((prior_hash, result)) = prior {
            if let Decision::Replay(result) = idempotency::decide(Some((&prior_hash[..], result)), hash)? {
                return Ok(result.into_bytes());
            }
        }
    }
    if !store::users::exists(ctx.conn, user_id)? {
        return Err(ApiError::user_not_found());
    }
    let chat = store::chats::load(ctx.conn, chat_id)?.ok_or_else(ApiError::chat_not_found)?;
    let member = store::chats::membership(ctx.conn, &chat.id, user_id)? == Some(true);
    permissions::check(Act::UserSends, &chat, member)?;
    let msg = match store::messages::load(ctx.conn, &chat.id, message_id)? {
        Some(m) if !m.deleted && m.sender_is_bot => m,
        _ => return Err(ApiError::button_not_found()),
    };
    let shown = store::buttons::keyboard(ctx.conn, &chat.id, message_id)?;
    if !shown.as_deref().is_some_and(|k| keyboard::has_callback(k, callback_data)) {
        return Err(ApiError::button_not_found());
    }
    // The bot that showed the keyboard must still hear the chat.
    if store::chats::membership(ctx.conn, &chat.id, &msg.sender_id)? != Some(true) {
        return Err(ApiError::button_not_found());
    }
    let (display_name, handle) = store::users::name(ctx.conn, user_id)?.ok_or_else(ApiError::user_not_found)?;
    let id = crate::auth::new_id(ctx.random, "cbq_")?;
    let deadline_ms = ctx.now_ms + ctx.cfg.callback_answer_timeout_s * 1000;
    let query = CallbackQuery {
        id: id.clone(),
        bot_id: msg.sender_id.clone(),
        user_id: user_id.to_string(),
        chat_id: chat.id.clone(),
        message_id,
        deadline_ms,
        outcome: None,
    };
    store::buttons::insert_query(ctx.conn, &query, ctx.now_ms)?;
    let data = json!({
        "id": id,
        "from": {"id": user_id, "is_bot": false, "display_name": display_name, "handle": handle},
        "message": {"message_id": message_id.to_string(), "chat": chat.reference()},
        "data": callback_data,
    })
    .to_string();
    // Only the bot whose keyboard it is hears the press.
    let entry =
        store::events::Entry { at_ms: ctx.now_ms, kind: EventKind::CallbackQuery.as_str(), data: &data, message: None };
    store::events::append_update(ctx.conn, entry, false, &mut ctx.fx.updates)?;
    store::events::append_to_bot(ctx.conn, &msg.sender_id, entry)?;
    ctx.fx.woken.push(msg.sender_id.clone());
    ctx.fx.callback_due = Some(ctx.fx.callback_due.map_or(deadline_ms, |d| d.min(deadline_ms)));
    let out = to_json(&json!({"callback_query_id": id}))?;
    if let (Some(key), Some(hash)) = (key, hash) {
        let result = std::str::from_utf8(&out).unwrap_or("");
        store::idempotency::remember(ctx.conn, &mut ctx.fx.ahead.keys, user_id, key, &hash, result, ctx.now_ms as i64)?;
    }
    Ok(out)
}

body! {
    /// answerCallbackQuery's body, in check order.
    struct Answer<'a> {
        callback_query_id: &'a str,
        text: Option<&'a str>,
        show_alert: Option<bool>,
    }
}

/// answerCallbackQuery: only the bot the query went to, once, before its
/// deadline. The outcome is written by a conditional UPDATE with its
/// `callback_answered` event, so an expiry that came first (here or on
/// another node) wins and this answer is refused.
pub fn answer_callback_query(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let Answer { callback_query_id, text, show_alert } = requests::parse(body)?;
    if let Some(t) = text {
        keyboard::answer_text(t)?;
    }
    let q = store::buttons::load_query(ctx.conn, callback_query_id)?.ok_or_else(ApiError::callback_query_not_found)?;
    keyboard::may_answer(&q.bot_id, &bot.id, q.outcome.as_deref(), q.deadline_ms, ctx.now_ms)?;
    if !store::buttons::set_outcome(ctx.conn, &q.id, OUTCOME_ANSWERED)? {
        // Another outcome was written since the read: say which.
        let now = store::buttons::load_query(ctx.conn, callback_query_id)?;
        let outcome = now.as_ref().and_then(|q| q.outcome.as_deref());
        return Err(match outcome {
            Some(OUTCOME_ANSWERED) => ApiError::callback_query_answered(),
            _ => ApiError::callback_query_expired(),
        });
    }
    let data = json!({
        "callback_query_id": q.id,
        "user_id": q.user_id,
        "chat_id": q.chat_id,
        "message_id": q.message_id.to_string(),
        "text": text.unwrap_or(""),
        "show_alert": show_alert.unwrap_or(false),
    })
    .to_string();
    crate::events::append_update(ctx.conn, ctx.now_ms, EventKind::CallbackAnswered, &data, &mut ctx.fx.updates)?;
    Ok(b"true".to_vec())
}

/// The stored outcomes.
pub const OUTCOME_ANSWERED: &str = "answered";
pub const OUTCOME_EXPIRED: &str = "expired";

/// Presses expired per call of [`expire_due`]: a transaction's worth.
pub const EXPIRE_BATCH: i64 = 256;

/// Writes `callback_expired` for up to `limit` presses whose deadline is
/// at or before `now_ms` and that have no outcome yet, in the caller's
/// transaction: each outcome by a conditional UPDATE, its event only when
/// that UPDATE wrote it. How many were due (the caller calls again when
/// that is `limit`).
pub fn expire_due(
    conn: &store::Conn,
    now_ms: u64,
    limit: i64,
    pending: &mut crate::events::PendingUpdates,
) -> store::StoreResult<usize> {
    let due = store::buttons::due(conn, now_ms, limit)?;
    for q in &due {
        if store::buttons::set_outcome(conn, &q.id, OUTCOME_EXPIRED)? {
            let data = expired_json(q);
            let entry = store::events::Entry {
                at_ms: now_ms,
                kind: EventKind::CallbackExpired.as_str(),
                data: &data,
                message: None,
            };
            store::events::append_update(conn, entry, false, pending)?;
        }
    }
    Ok(due.len())
}

/// The host-stream event of a query that expired unanswered.
fn expired_json(q: &CallbackQuery) -> String {
    json!({
        "callback_query_id": q.id,
        "user_id": q.user_id,
        "chat_id": q.chat_id,
        "message_id": q.message_id.to_string(),
    })
    .to_string()
}
