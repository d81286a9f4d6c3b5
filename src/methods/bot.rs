//! The bot methods, with checks in the order of docs/errors.md:
//! bot status → tier gate → fields → chat visible → permission rules →
//! message ownership → rate limit → write.

use super::buttons;
use super::messages::{self, owned_message, visible_chat};
use super::params::{self, Body};
use super::requests::body;
use super::requests::{self, Choice, Choices, MessageId, ParseMode, Text};
use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::http::Request;
use crate::model::{Bot, Chat, StoredMessage};
use crate::protocol::{ChatAction, EventKind};
use crate::route::BotMethod;
use crate::rules;
use crate::rules::idempotency::{self, Decision};
use crate::rules::permissions::{self, Act};
use crate::store;
use crate::txn::Ctx;

/// How long a chat action shows unless the bot sends a message first.
pub const CHAT_ACTION_TTL_MS: u64 = 5_000;

pub fn call(ctx: &mut Ctx<'_>, bot: &Bot, method: BotMethod, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    rules::auth::bot_status(bot)?;
    match method {
        BotMethod::GetMe => {
            // No fields, but the body rules of every method still hold.
            params::parse_body(&req.body)?;
            Ok(bot.identity_json.as_bytes().to_vec())
        }
        BotMethod::SendMessage => send_message(ctx, bot, req),
        BotMethod::SendChatAction => send_chat_action(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::EditMessageText => edit_message_text(ctx, bot, &tier_gate(bot, method, req)?),
        BotMethod::DeleteMessage => delete_message(ctx, bot, &tier_gate(bot, method, req)?),
        BotMethod::GetUpdates => get_updates(ctx, bot, req),
        BotMethod::SetWebhook => super::webhook::set_webhook(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::DeleteWebhook => super::webhook::delete_webhook(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::GetWebhookInfo => super::webhook::get_webhook_info(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::SetMyCommands => buttons::set_my_commands(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::GetMyCommands => buttons::get_my_commands(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::DeleteMyCommands => buttons::delete_my_commands(ctx, bot, &params::parse_body(&req.body)?),
        BotMethod::EditMessageReplyMarkup => buttons::edit_reply_markup(ctx, bot, &tier_gate(bot, method, req)?),
        BotMethod::AnswerCallbackQuery => buttons::answer_callback_query(ctx, bot, &params::parse_body(&req.body)?),
    }
}

/// getUpdates (docs/delivery.md): acknowledges what `offset` says, then
/// reads the log after the cursor. Not rate-limited: it is a read (its
/// acknowledgement only moves the cursor forward). With nothing to return
/// and a `timeout`, it leaves the request in the effects for the service
/// to park.
fn get_updates(ctx: &mut Ctx<'_>, bot: &Bot, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    let poll = super::updates::parse(&params::parse_body(&req.body)?)?;
    // A bot hears its events one way at a time: while a webhook is set,
    // they go there (and getUpdates would race its cursor).
    if crate::store::webhooks::get(ctx.conn, &bot.id)?.is_some() {
        return Err(ApiError::webhook_active());
    }
    super::updates::acknowledge(ctx.conn, &bot.id, poll.offset)?;
    let read = super::updates::read(ctx.conn, &bot.id, &poll)?;
    if read.count == 0 && poll.timeout_s > 0 {
        ctx.fx.park = Some((bot.id.clone(), poll));
    }
    Ok(read.json.into_bytes())
}

/// The tier gate comes before the body is read.
fn tier_gate(bot: &Bot, method: BotMethod, req: &Request<'_>) -> ApiResult<Body> {
    rules::tier::check(bot.tier, method)?;
    params::parse_body(&req.body)
}

fn rate_limit(ctx: &mut Ctx<'_>, bot: &Bot, chat: &Chat) -> ApiResult<()> {
    let limits = rules::ratelimit::of_tier(&ctx.cfg.limits, bot.tier);
    let (bot_rate, chat_rate) = rules::ratelimit::buckets(limits, chat.kind);
    let now_ms = ctx.now_ms;
    let checked = if bot_rate.is_none() && chat_rate.is_none() {
        Ok(None)
    } else {
        let local = &mut *ctx.rate;
        store::limits::take(
            ctx.conn,
            &mut ctx.fx.ahead.buckets,
            &bot.id,
            &chat.id,
            || local.check(&bot.id, &chat.id, bot_rate, chat_rate, now_ms),
            |b, c| crate::ratelimit::decide_stored(b, c, bot_rate, chat_rate, now_ms),
        )?
    };
    // The response carries the nearest bucket as X-RateLimit-* headers.
    ctx.rate_status = rules::ratelimit::outcome(checked)?;
    Ok(())
}

body! {
    /// sendMessage's body, in check order.
    struct SendMessage<'a> {
        chat_id: &'a str,
        text: Text<'a>,
        _parse_mode as "parse_mode": ParseMode,
        reply_to_message_id: Option<MessageId>,
    }
}

fn send_message(ctx: &mut Ctx<'_>, bot: &Bot, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    let body = params::parse_body(&req.body)?;
    let SendMessage { chat_id, text: Text(text), reply_to_message_id, .. } = requests::parse(&body)?;
    let keyboard = rules::keyboard::parse(body.get("reply_markup"))?;
    let reply_to = reply_to_message_id.map(|m| m.0);
    let key = idempotency::key(req.header("idempotency-key"))?;
    let hash = key.map(|_| idempotency::request_hash(&body));
    if let (Some(key), Some(hash)) = (key, &hash) {
        let prior =
            store::idempotency::lookup(ctx.conn, &ctx.fx.ahead.keys, &bot.id, key, idempotency::cutoff(ctx.now_ms))?;
        if let Some((prior_hash, result)) = prior {
            if let Decision::Replay(result) = idempotency::decide(Some((&prior_hash[..], result)), hash)? {
                return Ok(result.into_bytes());
            }
        }
    }
    let (chat, member) = visible_chat(ctx, bot, chat_id)?;
    permissions::check(Act::BotSends, &chat, member)?;
    messages::check_reply_target(ctx, &chat, reply_to)?;
    rate_limit(ctx, bot, &chat)?;
    let json = messages::post(ctx, &chat, &bot.id, true, text, reply_to, keyboard.as_ref().map(|k| k.0.as_str()))?;
    if let (Some(key), Some(hash)) = (key, hash) {
        let result = std::str::from_utf8(&json).unwrap_or("");
        store::idempotency::remember(ctx.conn, &mut ctx.fx.ahead.keys, &bot.id, key, &hash, result, ctx.now_ms as i64)?;
    }
    Ok(json)
}

/// The refusal names every word of the table (checked by
/// `tests::the_chat_action_refusal_lists_the_table`).
impl Choices for ChatAction {
    const WHY: &'static str = "must be one of typing, upload_photo, upload_document, record_voice, upload_voice";
    fn parse(s: &str) -> Option<Self> {
        ChatAction::parse(s)
    }
}

body! {
    /// sendChatAction's body, in check order.
    struct SendChatAction<'a> {
        chat_id: &'a str,
        action: Choice<ChatAction>,
    }
}

fn send_chat_action(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let SendChatAction { chat_id, action: Choice(action) } = requests::parse(body)?;
    let (chat, member) = visible_chat(ctx, bot, chat_id)?;
    permissions::check(Act::BotSends, &chat, member)?;
    rate_limit(ctx, bot, &chat)?;
    let expires = ctx.now_ms + CHAT_ACTION_TTL_MS;
    store::chats::set_action(ctx.conn, &chat.id, &bot.id, action.as_str(), expires as i64)?;
    let data = serde_json::json!({
        "chat": chat.reference(),
        "from": {"id": bot.id, "is_bot": true},
        "action": action,
        "expires_at_ms": expires,
    });
    events::append_update(ctx.conn, ctx.now_ms, EventKind::ChatAction, &data.to_string(), &mut ctx.fx.updates)?;
    Ok(b"true".to_vec())
}

body! {
    /// editMessageText's body, in check order.
    struct EditMessageText<'a> {
        chat_id: &'a str,
        message_id: MessageId,
        text: Text<'a>,
        _parse_mode as "parse_mode": ParseMode,
    }
}

body! {
    /// deleteMessage's body.
    struct DeleteMessage<'a> {
        chat_id: &'a str,
        message_id: MessageId,
    }
}

fn edit_message_text(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let EditMessageText { chat_id, message_id: MessageId(message_id), text: Text(text), .. } = requests::parse(body)?;
    let markup = rules::keyboard::parse(body.get("reply_markup"))?;
    let (chat, msg) = owned_message(ctx, bot, chat_id, message_id)?;
    rate_limit(ctx, bot, &chat)?;
    // Without reply_markup the keyboard stays; with one it is replaced.
    let keyboard = match markup {
        Some(k) => Some(k.0),
        None => msg.reply_markup.clone(),
    };
    buttons::set_markup(ctx, bot, &chat, msg, Some(text), keyboard)
}

fn delete_message(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let DeleteMessage { chat_id, message_id: MessageId(message_id) } = requests::parse(body)?;
    let (chat, msg) = owned_message(ctx, bot, chat_id, message_id)?;
    delete_stored(ctx, &chat, &msg, Some(&bot.id))?;
    Ok(b"true".to_vec())
}

/// Marks a message deleted (its number stays taken), drops its text
/// everywhere it is stored and emits `message_deleted`.
pub fn delete_stored(ctx: &mut Ctx<'_>, chat: &Chat, msg: &StoredMessage, exclude: Option<&str>) -> ApiResult<()> {
    let message_id = msg.message_id;
    store::messages::mark_deleted(ctx.conn, &chat.id, message_id)?;
    // Its keyboard goes with it: no press can name it any more.
    store::buttons::set_keyboard(ctx.conn, &chat.id, message_id, None)?;
    events::scrub_message_text(ctx.conn, &chat.id, message_id, &mut ctx.fx.updates)?;
    ctx.fx.scrubbed = true;
    if msg.sender_is_bot {
        // An idempotent retry of the send must not bring the text back.
        store::idempotency::scrub_text(ctx.conn, &msg.sender_id, &chat.id, message_id)?;
    }
    let data = serde_json::json!({"chat": chat.reference(), "message_id": message_id.to_string()});
    ctx.emit(Event { exclude, ..Event::new(&chat.id, EventKind::MessageDeleted, data.to_string().as_bytes()) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chat_action_refusal_lists_the_table() {
        let names: Vec<&str> = ChatAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(<ChatAction as Choices>::WHY, format!("must be one of {}", names.join(", ")));
    }
}
