//! The bot methods, with checks in the order of docs/errors.md:
//! bot status → tier gate → fields → chat visible → permission rules →
//! message ownership → rate limit → write.

use super::messages;
use super::params::{self, Body};
use super::to_json;
use crate::auth;
use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::http::Request;
use crate::model::{Bot, Chat, ChatKind, StoredMessage, Tier};
use crate::ratelimit::Scope;
use crate::route::BotMethod;
use crate::store;
use crate::txn::Ctx;

pub const CHAT_ACTIONS: &[&str] = &["typing", "upload_photo", "upload_document", "record_voice", "upload_voice"];

/// How long a chat action shows unless the bot sends a message first.
pub const CHAT_ACTION_TTL_MS: u64 = 5_000;

pub fn call(ctx: &mut Ctx<'_>, bot: &Bot, method: BotMethod, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    if !bot.active {
        return Err(ApiError::bot_suspended());
    }
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

/// Free-tier bots may not edit or delete; checked before the body is read.
fn tier_gate(bot: &Bot, method: BotMethod, req: &Request<'_>) -> ApiResult<Body> {
    if bot.tier == Tier::Free {
        return Err(ApiError::tier_forbidden(method.name()));
    }
    params::parse_body(&req.body)
}

/// The chat, if this bot is or was ever a member; otherwise chat_not_found
/// (a chat the bot never saw does not exist for it).
fn visible_chat(ctx: &mut Ctx<'_>, bot: &Bot, chat_id: &str) -> ApiResult<(Chat, bool)> {
    match ctx.chat_with_member(chat_id, bot)? {
        Some((chat, Some(active))) => Ok((chat, active)),
        _ => Err(ApiError::chat_not_found()),
    }
}

/// The sending permission rules, in the order of docs/errors.md (check 12)
/// and docs/decisions.md (private-chat permission order).
fn check_send_permission(chat: &Chat, member: bool) -> ApiResult<()> {
    match chat.kind {
        ChatKind::Private => {
            if !chat.started {
                return Err(ApiError::bot_not_started());
            }
            if chat.blocked_by_user {
                return Err(ApiError::blocked_by_user());
            }
            if chat.blocked_by_bot {
                return Err(ApiError::user_blocked_by_bot());
            }
            if !member {
                return Err(ApiError::not_member());
            }
        }
        ChatKind::Group => {
            if !member {
                return Err(ApiError::not_member());
            }
            if chat.dissolved {
                return Err(ApiError::chat_dissolved());
            }
            if !chat.bots_can_send {
                return Err(ApiError::bots_cannot_send());
            }
        }
    }
    Ok(())
}

/// Edit and delete need the chat still visible: a member, not dissolved.
fn check_still_visible(chat: &Chat, member: bool) -> ApiResult<()> {
    if !member {
        return Err(ApiError::not_member());
    }
    if chat.dissolved {
        return Err(ApiError::chat_dissolved());
    }
    Ok(())
}

fn rate_limit(ctx: &mut Ctx<'_>, bot: &Bot, chat: &Chat) -> ApiResult<()> {
    let limits = match bot.tier {
        Tier::Free => &ctx.cfg.limits.free,
        Tier::Standard => &ctx.cfg.limits.standard,
        Tier::Official => &ctx.cfg.limits.official,
    };
    let chat_rate = match chat.kind {
        ChatKind::Private => limits.private_chat.as_ref().map(|r| (r, Scope::Chat)),
        ChatKind::Group => limits.group.as_ref().map(|r| (r, Scope::Group)),
    };
    let (bot_rate, now_ms) = (limits.bot.as_ref(), ctx.now_ms);
    let checked = if bot_rate.is_none() && chat_rate.is_none() {
        Ok(None)
    } else {
        let local = &mut *ctx.rate;
        store::limits::take(
            ctx.conn,
            &bot.id,
            &chat.id,
            || local.check(&bot.id, &chat.id, bot_rate, chat_rate, now_ms),
            |b, c| crate::ratelimit::decide_stored(b, c, bot_rate, chat_rate, now_ms),
        )?
    };
    match checked {
        Ok(nearest) => {
            // The response carries it as X-RateLimit-* headers.
            ctx.rate_status = nearest;
            Ok(())
        }
        Err(bucket) => Err(ApiError::rate_limited_by(&bucket)),
    }
}

/// The Idempotency-Key header: 1 to 64 visible ASCII characters.
fn idempotency_key<'a>(req: &Request<'a>) -> ApiResult<Option<&'a str>> {
    let Some(raw) = req.header("idempotency-key") else {
        return Ok(None);
    };
    match std::str::from_utf8(raw) {
        Ok(k) if (1..=64).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(k)),
        _ => Err(ApiError::invalid_field("Idempotency-Key", "must be 1 to 64 visible ASCII characters")),
    }
}

/// SHA-256 of the body's canonical JSON (keys sorted, no whitespace), so a
/// retry that reorders fields is still the same request.
fn request_hash(body: &Body) -> [u8; 32] {
    let canon: std::collections::BTreeMap<&String, &serde_json::Value> = body.iter().collect();
    auth::sha256(&serde_json::to_vec(&canon).unwrap_or_default())
}

fn send_message(ctx: &mut Ctx<'_>, bot: &Bot, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    let body = params::parse_body(&req.body)?;
    let chat_id = params::req_str(&body, "chat_id")?;
    let text = params::text(&body)?;
    params::parse_mode(&body)?;
    let reply_to = params::opt_message_id(&body, "reply_to_message_id")?;
    let key = idempotency_key(req)?;
    let hash = key.map(|_| request_hash(&body));
    if let (Some(key), Some(hash)) = (key, &hash) {
        let cutoff = ctx.now_ms.saturating_sub(super::IDEMPOTENCY_TTL_MS) as i64;
        let prior = store::idempotency::lookup(ctx.conn, &bot.id, key, cutoff)?;
        if let Some((prior_hash, result)) = prior {
            if auth::constant_time_eq(&prior_hash, hash) {
                return Ok(result.into_bytes());
            }
            return Err(ApiError::idempotency_key_reused());
        }
    }
    let (chat, member) = visible_chat(ctx, bot, chat_id)?;
    check_send_permission(&chat, member)?;
    messages::check_reply_target(ctx, &chat, reply_to)?;
    rate_limit(ctx, bot, &chat)?;
    let json = messages::post(ctx, &chat, &bot.id, true, text, reply_to)?;
    if let (Some(key), Some(hash)) = (key, hash) {
        let result = std::str::from_utf8(&json).unwrap_or("");
        store::idempotency::remember(ctx.conn, &bot.id, key, &hash, result, ctx.now_ms as i64)?;
    }
    Ok(json)
}

fn send_chat_action(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let chat_id = params::req_str(body, "chat_id")?;
    let action = params::req_str(body, "action")?;
    if !CHAT_ACTIONS.contains(&action) {
        return Err(ApiError::invalid_field(
            "action",
            "must be one of typing, upload_photo, upload_document, record_voice, upload_voice",
        ));
    }
    let (chat, member) = visible_chat(ctx, bot, chat_id)?;
    check_send_permission(&chat, member)?;
    rate_limit(ctx, bot, &chat)?;
    let expires = ctx.now_ms + CHAT_ACTION_TTL_MS;
    store::chats::set_action(ctx.conn, &chat.id, &bot.id, action, expires as i64)?;
    let data = serde_json::json!({
        "chat": chat.reference(),
        "from": {"id": bot.id, "is_bot": true},
        "action": action,
        "expires_at_ms": expires,
    });
    events::append_update(ctx.conn, ctx.now_ms, events::CHAT_ACTION, &data.to_string(), &mut ctx.fx.updates)?;
    Ok(b"true".to_vec())
}

/// Chat, membership and the message, checked for edit and delete. Callers
/// validate their other fields (text, parse_mode) first.
fn owned_message(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<(Chat, StoredMessage)> {
    let chat_id = params::req_str(body, "chat_id")?;
    let message_id = params::req_message_id(body, "message_id")?;
    let (chat, member) = visible_chat(ctx, bot, chat_id)?;
    check_still_visible(&chat, member)?;
    let msg = match store::messages::load(ctx.conn, &chat.id, message_id)? {
        Some(m) if !m.deleted => m,
        _ => return Err(ApiError::message_not_found()),
    };
    if msg.sender_id != bot.id {
        return Err(ApiError::not_message_owner());
    }
    Ok((chat, msg))
}

fn edit_message_text(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    params::req_str(body, "chat_id")?;
    params::req_message_id(body, "message_id")?;
    let text = params::text(body)?;
    params::parse_mode(body)?;
    let (chat, mut msg) = owned_message(ctx, bot, body)?;
    rate_limit(ctx, bot, &chat)?;
    if msg.text.as_deref() == Some(text) {
        // Same text: success, nothing changes, no event.
        return to_json(&msg.json(chat.reference()));
    }
    let edit_date = ctx.now_s();
    store::messages::edit(ctx.conn, &chat.id, msg.message_id, text, edit_date)?;
    msg.text = Some(text.to_string());
    msg.edit_date = Some(edit_date);
    let json = to_json(&msg.json(chat.reference()))?;
    messages::emit_message(ctx, &chat, events::MESSAGE_EDITED, msg.message_id, &json, Some(&bot.id))?;
    Ok(json)
}

fn delete_message(ctx: &mut Ctx<'_>, bot: &Bot, body: &Body) -> ApiResult<Vec<u8>> {
    let (chat, msg) = owned_message(ctx, bot, body)?;
    delete_stored(ctx, &chat, &msg, Some(&bot.id))?;
    Ok(b"true".to_vec())
}

/// Marks a message deleted (its number stays taken), drops its text
/// everywhere it is stored and emits `message_deleted`.
pub fn delete_stored(ctx: &mut Ctx<'_>, chat: &Chat, msg: &StoredMessage, exclude: Option<&str>) -> ApiResult<()> {
    let message_id = msg.message_id;
    store::messages::mark_deleted(ctx.conn, &chat.id, message_id)?;
    events::scrub_message_text(ctx.conn, &chat.id, message_id, &mut ctx.fx.updates)?;
    ctx.fx.scrubbed = true;
    if msg.sender_is_bot {
        // An idempotent retry of the send must not bring the text back.
        store::idempotency::scrub_text(ctx.conn, &msg.sender_id, &chat.id, message_id)?;
    }
    let data = serde_json::json!({"chat": chat.reference(), "message_id": message_id.to_string()});
    ctx.emit(Event { exclude, ..Event::new(&chat.id, events::MESSAGE_DELETED, data.to_string().as_bytes()) })?;
    Ok(())
}
