//! The host API (`/admin/<method>`, docs/api.md): how the embedding
//! service tells botspace about users, bots and chats, and reads everything
//! that happened.

use super::console;
use super::messages;
use super::params::{self, Body};
use super::requests::body;
use super::requests::{
    self, ByteBounds, Bytes, Choice, Choices, Handle, MessageId, MessageIdOrZero, Name, Number, NumberBounds,
    ParseMode, Patch, Strings, Text, Uint, Why,
};
use super::requests::{BotIdBody, ChatIdBody};
use super::to_json;
use crate::auth;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::http::Request;
use crate::model::{Bot, Chat, ChatKind, Tier};
use crate::protocol::{BlockedBy, BotStatus, EventKind};
use crate::route::AdminMethod;
use crate::rules::limits::{
    MAX_AVATAR_KEY_BYTES, MAX_DISPLAY_NAME_CHARS as NAME, MAX_GATEWAY_CONNECTION_LIMIT, MAX_HISTORY_PAGE,
    MAX_HOST_UPDATES, MAX_TITLE_CHARS as TITLE,
};
use crate::rules::permissions::{self, Act};
use crate::store::{self, bots::Field, chats::Blocker};
use crate::txn::Ctx;
use serde_json::{json, Value};

body! {
    struct UserAndBot<'a> {
        user_id: &'a str,
        bot_id: &'a str,
    }
}

body! {
    struct MemberIdBody<'a> {
        member_id: &'a str,
    }
}

fn chat_id(b: &Body) -> ApiResult<&str> {
    Ok(requests::parse::<ChatIdBody<'_>>(b)?.chat_id)
}

fn bot_id(b: &Body) -> ApiResult<&str> {
    Ok(requests::parse::<BotIdBody<'_>>(b)?.bot_id)
}

pub fn call(ctx: &mut Ctx<'_>, method: AdminMethod, req: &Request<'_>) -> ApiResult<Vec<u8>> {
    let b = params::parse_body(&req.body)?;
    let out = match method {
        // The only host method that reads a header (Idempotency-Key).
        AdminMethod::PressButton => super::buttons::press_button(ctx, &b, req)?,
        _ => run(ctx, method, &b)?,
    };
    // Every change leaves an audit entry, committed with it.
    if console::audited(method) {
        console::record(ctx, method, &b, &out)?;
    }
    Ok(out)
}

fn run(ctx: &mut Ctx<'_>, method: AdminMethod, b: &Body) -> ApiResult<Vec<u8>> {
    use AdminMethod as M;
    let v: Value = match method {
        M::CreateUser => create_user(ctx, b)?,
        M::CreateBot => create_bot(ctx, b)?,
        M::UpdateBot => update_bot(ctx, b)?,
        M::GetBot => console::get_bot(ctx, b)?,
        M::ListBots => console::list_bots(ctx, b)?,
        M::ListUsers => console::list_users(ctx, b)?,
        M::ListChats => console::list_chats(ctx, b)?,
        M::GetChatMembers => console::chat_members(ctx, b)?,
        M::GetBotActivity => console::bot_activity(ctx, b)?,
        M::GetAuditLog => console::audit_log(ctx, b)?,
        M::RotateBotToken => rotate_token(ctx, b)?,
        M::GetOperationalToken => operational_token(ctx, b)?,
        M::CreatePrivateChat => create_private_chat(ctx, b)?,
        M::StartBot => start_bot(ctx, b)?,
        M::SetBlocked => set_blocked(ctx, b)?,
        M::CreateGroup => create_group(ctx, b)?,
        M::AddMember => add_member(ctx, b)?,
        M::RemoveMember => remove_member(ctx, b)?,
        M::SetGroupPermissions => set_group_permissions(ctx, b)?,
        M::DissolveGroup => dissolve_group(ctx, b)?,
        M::SendUserMessage => return send_user_message(ctx, b),
        M::DeleteUserMessage => delete_user_message(ctx, b)?,
        M::GetChat => chat_json(ctx, &load_chat(ctx, chat_id(b)?)?)?,
        M::GetChatHistory => return chat_history(ctx, b),
        M::GetChatActions => chat_actions(ctx, b)?,
        M::GetUpdates => return get_updates(ctx, b),
        M::GetStats => stats(ctx)?,
        M::GetWebhookInfo => {
            let bot = load_bot(ctx, bot_id(b)?)?;
            return super::webhook::info(ctx, &bot.id);
        }
        M::DeleteWebhook => {
            let bot = load_bot(ctx, bot_id(b)?)?;
            return super::webhook::delete(ctx, &bot.id, b);
        }
        M::AdvanceClock => advance_clock(ctx, b)?,
        M::GetChatCommands => {
            let chat = load_chat(ctx, chat_id(b)?)?;
            super::buttons::get_chat_commands(ctx, &chat)?
        }
        M::GetBotCommands => {
            let bot = load_bot(ctx, bot_id(b)?)?;
            super::buttons::get_bot_commands(ctx, &bot)?
        }
        M::PressButton => return Err(ApiError::internal("pressButton is answered by admin::call")),
        // The service answers these outside a transaction (see
        // `AdminMethod::whole_database`); a group serves none of them.
        M::ExportDatabase | M::ImportDatabase | M::GetStorageStats => {
            return Err(ApiError::method_not_found());
        }
    };
    to_json(&v)
}

fn user_not_found() -> ApiError {
    ApiError::user_not_found()
}

fn bot_not_found() -> ApiError {
    ApiError::bot_not_found()
}

fn load_bot(ctx: &Ctx<'_>, id: &str) -> ApiResult<Bot> {
    store::bots::by_id(ctx.conn, id)?.ok_or_else(bot_not_found)
}

fn load_chat(ctx: &Ctx<'_>, id: &str) -> ApiResult<Chat> {
    store::chats::load(ctx.conn, id)?.ok_or_else(ApiError::chat_not_found)
}

/// The chat as the host API returns it, with its current members.
fn chat_json(ctx: &Ctx<'_>, chat: &Chat) -> ApiResult<Value> {
    Ok(chat.to_json(store::chats::current_members(ctx.conn, &chat.id)?))
}

fn user_exists(ctx: &Ctx<'_>, id: &str) -> ApiResult<bool> {
    Ok(store::users::exists(ctx.conn, id)?)
}

fn user_json(ctx: &Ctx<'_>, id: &str) -> ApiResult<Value> {
    let (display_name, handle) = store::users::name(ctx.conn, id)?.ok_or_else(user_not_found)?;
    Ok(json!({"id": id, "display_name": display_name, "handle": handle}))
}

body! {
    struct CreateUser<'a> {
        display_name: Name<'a, NAME>,
        handle: Option<Handle<'a>>,
    }
}

fn create_user(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let CreateUser { display_name: Name(display_name), handle } = requests::parse(b)?;
    let handle = handle.map(|h| h.0);
    let id = auth::new_id(ctx.random, "usr_")?;
    store::users::insert(ctx.conn, &id, display_name, handle, ctx.now_s())?;
    Ok(json!({"id": id, "display_name": display_name, "handle": handle}))
}

impl Choices for Tier {
    const WHY: &'static str = "must be free, standard or official";
    fn parse(s: &str) -> Option<Tier> {
        Tier::parse(s)
    }
}

struct AvatarKey;
impl ByteBounds for AvatarKey {
    const MIN: usize = 1;
    const MAX: usize = MAX_AVATAR_KEY_BYTES;
    const WHY: &'static str = "must be a string of 1 to 256 bytes, or null";
}

body! {
    /// createBot's body, in check order.
    struct CreateBot<'a> {
        quota_tier: Option<Choice<Tier>>,
        avatar_key: Patch<Bytes<'a, AvatarKey>>,
        gateway_connection_limit: Patch<Uint<MAX_GATEWAY_CONNECTION_LIMIT>>,
        display_name: Name<'a, NAME>,
        handle: Handle<'a>,
        verified: Option<bool>,
        official: Option<bool>,
    }
}

impl Choices for BotStatus {
    const WHY: &'static str = "must be active or suspended";
    fn parse(s: &str) -> Option<BotStatus> {
        BotStatus::parse(s)
    }
}

body! {
    /// updateBot's body, in check order: createBot's fields, each optional.
    struct UpdateBot<'a> {
        bot_id: &'a str,
        quota_tier: Option<Choice<Tier>>,
        avatar_key: Patch<Bytes<'a, AvatarKey>>,
        gateway_connection_limit: Patch<Uint<MAX_GATEWAY_CONNECTION_LIMIT>>,
        display_name: Option<Name<'a, NAME>>,
        handle: Option<Handle<'a>>,
        verified: Option<bool>,
        official: Option<bool>,
        status: Option<Choice<BotStatus>>,
    }
}

/// The operational copy, kept only for official bots and only when the host
/// configured an operational key.
fn sealed_copy(ctx: &Ctx<'_>, official: bool, bot_id: &str, token: &str) -> ApiResult<Option<Vec<u8>>> {
    match (official, &ctx.cfg.operational_key) {
        (true, Some(key)) => Ok(Some(auth::seal_token(ctx.random, key, bot_id, token)?)),
        _ => Ok(None),
    }
}

fn create_bot(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let f: CreateBot<'_> = requests::parse(b)?;
    ensure_handle_free(ctx, f.handle.0, "")?;
    let id = auth::new_id(ctx.random, "bot_")?;
    let token = auth::new_token(ctx.random)?;
    let official = f.official.unwrap_or(false);
    let sealed = sealed_copy(ctx, official, &id, &token)?;
    let new = store::bots::NewBot {
        id: &id,
        token_hash: &auth::sha256(token.as_bytes()),
        sealed: sealed.as_deref(),
        display_name: Some(f.display_name.0),
        handle: Some(f.handle.0),
        avatar_key: f.avatar_key.change().flatten().map(|k| k.0),
        verified: f.verified.unwrap_or(false),
        official,
        tier: f.quota_tier.map_or(Tier::Free, |t| t.0),
        connection_limit: f.gateway_connection_limit.change().flatten().map(|v| v.0 as i64),
        created_at: ctx.now_s(),
    };
    store::bots::insert(ctx.conn, &new)?;
    let bot = load_bot(ctx, &id)?;
    Ok(json!({"bot": raw(&bot.identity_json), "token": token}))
}

/// Handles are unique among bots, compared case-insensitively
/// (`store::bots::handle_key`); a suspended bot keeps its handle. `except`
/// is the bot being renamed, which may change the case of its own.
fn ensure_handle_free(ctx: &Ctx<'_>, handle: &str, except: &str) -> ApiResult<()> {
    match store::bots::handle_holder(ctx.conn, handle, except)? {
        Some(_) => Err(ApiError::handle_taken()),
        None => Ok(()),
    }
}

fn raw(json_text: &str) -> Value {
    serde_json::from_slice(json_text.as_bytes()).unwrap_or(Value::Null)
}

/// Drops cached credentials of a bot after its row changed.
fn forget_bot(ctx: &mut Ctx<'_>, bot_id: &str) {
    ctx.fx.bots_touched = true;
    ctx.bot_cache.retain(|_, b| b.id != bot_id);
}

fn update_bot(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let f: UpdateBot<'_> = requests::parse(b)?;
    let bot_id = f.bot_id;
    let status = f.status.map(|s| s.0);
    let handle = f.handle.map(|h| h.0);
    let before = load_bot(ctx, bot_id)?;
    // Checked before anything is written: a refused update changes nothing.
    if let Some(h) = handle {
        ensure_handle_free(ctx, h, bot_id)?;
    }
    let c = ctx.conn;
    let set = |field: Field, v: &dyn crate::store::ToVal| -> ApiResult<()> {
        Ok(store::bots::set_field(c, bot_id, field, v)?)
    };
    if let Some(Name(v)) = f.display_name {
        set(Field::DisplayName, &v)?;
    }
    if let Some(v) = handle {
        store::bots::set_handle(c, bot_id, v)?;
        // A bot that shared the old handle (before handles were unique)
        // now holds it.
        let old_key = store::bots::handle_key(&before.handle);
        if old_key != store::bots::handle_key(v) {
            store::bots::pass_on_handle_key(c, &old_key)?;
        }
    }
    if let Some(Choice(v)) = f.quota_tier {
        set(Field::QuotaTier, &v.as_str())?;
    }
    if let Some(v) = f.verified {
        set(Field::Verified, &v)?;
    }
    if let Some(v) = f.official {
        set(Field::Official, &v)?;
        if !v {
            // No longer managed by the service: its operational copy goes.
            set(Field::OpToken, &Option::<Vec<u8>>::None)?;
        }
    }
    if let Some(v) = f.avatar_key.change() {
        set(Field::AvatarKey, &v.map(|k| k.0))?;
    }
    if let Some(v) = f.gateway_connection_limit.change() {
        set(Field::ConnectionLimit, &v.map(|v| v.0 as i64))?;
    }
    if let Some(v) = status {
        set(Field::Status, &v.as_str())?;
        if v == BotStatus::Suspended && before.active {
            ctx.fx.revoked.push(bot_id.to_string());
        }
    }
    forget_bot(ctx, bot_id);
    let bot = load_bot(ctx, bot_id)?;
    Ok(raw(&bot.identity_json))
}

fn rotate_token(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let bot = load_bot(ctx, bot_id(b)?)?;
    let token = auth::new_token(ctx.random)?;
    let sealed = sealed_copy(ctx, bot.official, &bot.id, &token)?;
    store::bots::set_token(ctx.conn, &bot.id, &auth::sha256(token.as_bytes()), sealed.as_deref())?;
    forget_bot(ctx, &bot.id);
    ctx.fx.revoked.push(bot.id.clone());
    ctx.fx.rotated.push(bot.id.clone());
    Ok(json!({"token": token}))
}

fn operational_token(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let bot_id = bot_id(b)?;
    let (official, sealed) = store::bots::operational_copy(ctx.conn, bot_id)?.ok_or_else(bot_not_found)?;
    if !official {
        return Err(ApiError::token_not_recoverable());
    }
    let (Some(sealed), Some(key)) = (sealed, &ctx.cfg.operational_key) else {
        return Err(ApiError::token_not_recoverable());
    };
    let token = auth::open_token(key, bot_id, &sealed).ok_or_else(ApiError::token_not_recoverable)?;
    Ok(json!({"token": token}))
}

fn add_membership(ctx: &Ctx<'_>, chat_id: &str, member_id: &str, is_bot: bool) -> ApiResult<bool> {
    // Returns true when the member was not already active.
    Ok(store::chats::add_member(ctx.conn, chat_id, member_id, is_bot)?)
}

fn private_chat_for(ctx: &mut Ctx<'_>, user_id: &str, bot_id: &str) -> ApiResult<(Chat, bool)> {
    if !user_exists(ctx, user_id)? {
        return Err(user_not_found());
    }
    load_bot(ctx, bot_id)?;
    let existing = store::chats::private_chat_of(ctx.conn, user_id, bot_id)?;
    if let Some(id) = existing {
        return Ok((load_chat(ctx, &id)?, false));
    }
    let id = auth::new_id(ctx.random, "spc_")?;
    store::chats::insert_private(ctx.conn, &id, user_id, bot_id, ctx.now_s())?;
    add_membership(ctx, &id, user_id, false)?;
    add_membership(ctx, &id, bot_id, true)?;
    Ok((load_chat(ctx, &id)?, true))
}

fn create_private_chat(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let UserAndBot { user_id, bot_id } = requests::parse(b)?;
    let (chat, _) = private_chat_for(ctx, user_id, bot_id)?;
    chat_json(ctx, &chat)
}

fn start_bot(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let UserAndBot { user_id, bot_id } = requests::parse(b)?;
    let (chat, _) = private_chat_for(ctx, user_id, bot_id)?;
    store::chats::set_started(ctx.conn, &chat.id)?;
    // Pressing start in a chat the bot was removed from brings it back.
    add_membership(ctx, &chat.id, bot_id, true)?;
    let data = json!({"chat": chat.reference(), "user": user_json(ctx, user_id)?});
    ctx.emit(Event::new(&chat.id, EventKind::BotStarted, data.to_string().as_bytes()))?;
    chat_json(ctx, &load_chat(ctx, &chat.id)?)
}

body! {
    /// setBlocked's fields after the chat is found.
    struct SetBlocked<'a> {
        by: &'a str,
        blocked: bool,
    }
}

/// setBlocked's refusal of a `by` that is no [`BlockedBy`] (read after the
/// chat is known to be private, so not a `Choice`).
const BY_WHY: &str = "must be user or bot";

fn set_blocked(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let SetBlocked { by, blocked } = requests::parse(b)?;
    if chat.kind != ChatKind::Private {
        return Err(ApiError::invalid_field("chat_id", "must name a private chat"));
    }
    let (blocker, current) = match BlockedBy::parse(by) {
        Some(BlockedBy::User) => (Blocker::User, chat.blocked_by_user),
        Some(BlockedBy::Bot) => (Blocker::Bot, chat.blocked_by_bot),
        None => return Err(ApiError::invalid_field("by", BY_WHY)),
    };
    if current != blocked {
        store::chats::set_blocked(ctx.conn, &chat.id, blocker, blocked)?;
        let kind = if blocked { EventKind::Blocked } else { EventKind::Unblocked };
        let data = json!({"chat": chat.reference(), "by": by});
        ctx.emit(Event::new(&chat.id, kind, data.to_string().as_bytes()))?;
    }
    Ok(Value::Bool(true))
}

/// Whether `id` names a user or a bot; 404 for neither.
fn member_kind(ctx: &Ctx<'_>, id: &str) -> ApiResult<bool> {
    if id.starts_with("bot_") && store::bots::by_id(ctx.conn, id)?.is_some() {
        return Ok(true);
    }
    if user_exists(ctx, id)? {
        return Ok(false);
    }
    Err(ApiError::member_not_found(id))
}

fn member_event(
    ctx: &mut Ctx<'_>,
    chat: &Chat,
    member_id: &str,
    is_bot: bool,
    kind: EventKind,
    extra: Option<&str>,
) -> ApiResult<()> {
    let data = json!({"chat": chat.reference(), "member": {"id": member_id, "is_bot": is_bot}});
    ctx.emit(Event { extra, ..Event::new(&chat.id, kind, data.to_string().as_bytes()) })?;
    Ok(())
}

struct MemberIds;
impl Why for MemberIds {
    const WHY: &'static str = "must be an array of user and bot ids";
}

body! {
    /// createGroup's body, in check order.
    struct CreateGroup<'a> {
        title: Name<'a, TITLE>,
        bots_can_send: Option<bool>,
        member_ids: Option<Strings<'a, MemberIds>>,
    }
}

fn create_group(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let CreateGroup { title: Name(title), bots_can_send, member_ids } = requests::parse(b)?;
    let bots_can_send = bots_can_send.unwrap_or(true);
    let ids: Vec<&str> = member_ids.map(|m| m.0).unwrap_or_default();
    // Every id is checked before anything is written.
    let members: Vec<(&str, bool)> = ids.iter().map(|m| Ok((*m, member_kind(ctx, m)?))).collect::<ApiResult<_>>()?;
    let id = auth::new_id(ctx.random, "spc_")?;
    store::chats::insert_group(ctx.conn, &id, title, bots_can_send, ctx.now_s())?;
    let chat = load_chat(ctx, &id)?;
    for (m, is_bot) in members {
        if add_membership(ctx, &id, m, is_bot)? {
            member_event(ctx, &chat, m, is_bot, EventKind::MemberAdded, None)?;
        }
    }
    chat_json(ctx, &chat)
}

fn add_member(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let MemberIdBody { member_id } = requests::parse(b)?;
    let is_bot = member_kind(ctx, member_id)?;
    match chat.kind {
        ChatKind::Private
            if chat.bot_id.as_deref() != Some(member_id) && chat.user_id.as_deref() != Some(member_id) =>
        {
            return Err(ApiError::invalid_field("member_id", "a private chat holds only its user and its bot"));
        }
        ChatKind::Group if chat.dissolved => return Err(ApiError::chat_dissolved()),
        _ => {}
    }
    if add_membership(ctx, &chat.id, member_id, is_bot)? {
        member_event(ctx, &chat, member_id, is_bot, EventKind::MemberAdded, None)?;
    }
    Ok(Value::Bool(true))
}

fn remove_member(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let MemberIdBody { member_id } = requests::parse(b)?;
    let Some(active) = store::chats::membership(ctx.conn, &chat.id, member_id)? else {
        return Err(ApiError::member_not_found(member_id));
    };
    if active {
        let is_bot = store::chats::member_is_bot(ctx.conn, &chat.id, member_id)?;
        store::chats::remove_member(ctx.conn, &chat.id, member_id)?;
        // The removed bot still hears that it was removed.
        member_event(ctx, &chat, member_id, is_bot, EventKind::MemberRemoved, is_bot.then_some(member_id))?;
    }
    Ok(Value::Bool(true))
}

fn group(ctx: &Ctx<'_>, b: &Body) -> ApiResult<Chat> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    if chat.kind != ChatKind::Group {
        return Err(ApiError::invalid_field("chat_id", "must name a group"));
    }
    Ok(chat)
}

body! {
    struct BotsCanSend {
        bots_can_send: bool,
    }
}

fn set_group_permissions(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = group(ctx, b)?;
    let BotsCanSend { bots_can_send } = requests::parse(b)?;
    if chat.dissolved {
        return Err(ApiError::chat_dissolved());
    }
    if chat.bots_can_send != bots_can_send {
        store::chats::set_bots_can_send(ctx.conn, &chat.id, bots_can_send)?;
        let data = json!({"chat": chat.reference(), "bots_can_send": bots_can_send});
        ctx.emit(Event::new(&chat.id, EventKind::ChatPermissionsChanged, data.to_string().as_bytes()))?;
    }
    Ok(Value::Bool(true))
}

fn dissolve_group(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = group(ctx, b)?;
    if !chat.dissolved {
        store::chats::set_dissolved(ctx.conn, &chat.id)?;
        let data = json!({"chat": chat.reference()});
        ctx.emit(Event::new(&chat.id, EventKind::ChatDissolved, data.to_string().as_bytes()))?;
    }
    Ok(Value::Bool(true))
}

body! {
    /// sendUserMessage's body, in check order.
    struct SendUserMessage<'a> {
        user_id: &'a str,
        chat_id: &'a str,
        text: Text<'a>,
        _parse_mode as "parse_mode": ParseMode,
        reply_to_message_id: Option<MessageId>,
    }
}

fn send_user_message(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Vec<u8>> {
    let SendUserMessage { user_id, chat_id, text: Text(text), reply_to_message_id, .. } = requests::parse(b)?;
    let reply_to = reply_to_message_id.map(|m| m.0);
    if !user_exists(ctx, user_id)? {
        return Err(user_not_found());
    }
    let chat = load_chat(ctx, chat_id)?;
    let member = store::chats::membership(ctx.conn, chat_id, user_id)? == Some(true);
    permissions::check(Act::UserSends, &chat, member)?;
    messages::check_reply_target(ctx, &chat, reply_to)?;
    messages::post(ctx, &chat, user_id, false, text, reply_to, None)
}

body! {
    struct MessageIdBody {
        message_id: MessageId,
    }
}

fn delete_user_message(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let MessageIdBody { message_id: MessageId(message_id) } = requests::parse(b)?;
    let msg = match store::messages::load(ctx.conn, &chat.id, message_id)? {
        Some(m) if !m.deleted => m,
        _ => return Err(ApiError::message_not_found()),
    };
    // A moderated bot hears that its own message was removed.
    super::bot::delete_stored(ctx, &chat, &msg, None)?;
    Ok(Value::Bool(true))
}

body! {
    /// getChatHistory's fields after the chat is found.
    struct ChatHistory {
        after_message_id: Option<MessageIdOrZero>,
        limit: Option<Uint<MAX_HISTORY_PAGE>>,
    }
}

fn chat_history(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Vec<u8>> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let ChatHistory { after_message_id, limit } = requests::parse(b)?;
    let after = after_message_id.and_then(|a| a.0);
    let limit = limit.map_or(MAX_HISTORY_PAGE, |l| l.0).max(1);
    let mut rows = store::messages::history(ctx.conn, &chat.id, after.unwrap_or(0), limit as i64)?;
    if let Some(last) = rows.last().map(|m| m.message_id) {
        let keyboards = store::buttons::keyboards_between(ctx.conn, &chat.id, after.unwrap_or(0), last)?;
        for (id, k) in keyboards {
            if let Some(m) = rows.iter_mut().find(|m| m.message_id == id) {
                m.reply_markup = Some(k);
            }
        }
    }
    // Written as it goes, so messages keep the field order of sendMessage.
    let mut out = b"[".to_vec();
    for m in rows {
        if out.len() > 1 {
            out.push(b',');
        }
        if m.deleted {
            out.extend_from_slice(format!(r#"{{"message_id":"{}","deleted":true}}"#, m.message_id).as_bytes());
        } else {
            out.extend_from_slice(&to_json(&messages::message_json(&m, chat.reference()))?);
        }
    }
    out.push(b']');
    Ok(out)
}

fn chat_actions(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let chat = load_chat(ctx, chat_id(b)?)?;
    let rows = store::chats::live_actions(ctx.conn, &chat.id, ctx.now_ms as i64)?
        .into_iter()
        .map(|(bot_id, action, expires_at_ms)| json!({"bot_id": bot_id, "action": action, "expires_at_ms": expires_at_ms}))
        .collect();
    Ok(Value::Array(rows))
}

body! {
    /// The host's getUpdates body.
    struct HostUpdates {
        offset: Option<Uint<{ i64::MAX as u64 }>>,
        limit: Option<Uint<MAX_HOST_UPDATES>>,
    }
}

/// Telegram-style: returns updates from `offset` on (default: the first not
/// yet confirmed) and confirms everything before `offset`, durably.
fn get_updates(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Vec<u8>> {
    // Presses past their deadline are expired first, so the stream a host
    // reads after a deadline has the outcome whether or not its timer ran
    // (the timer writes it otherwise, `service/callbacks.rs`).
    let batch = super::buttons::EXPIRE_BATCH;
    while super::buttons::expire_due(ctx.conn, ctx.now_ms, batch, &mut ctx.fx.updates)? as i64 == batch {}
    // Updates of this transaction's earlier requests (a batch) included.
    crate::events::flush_updates(ctx.conn, &mut ctx.fx.updates)?;
    let HostUpdates { offset, limit } = requests::parse(b)?;
    let offset = offset.map(|o| o.0);
    let limit = limit.map_or(100, |l| l.0).max(1);
    let confirmed = store::events::updates_confirmed(ctx.conn)?;
    let from = match offset {
        Some(o) => {
            let o = o as i64;
            if o > confirmed {
                store::events::set_updates_confirmed(ctx.conn, o)?;
            }
            o
        }
        None => confirmed,
    };
    // Unconfirmed updates the backlog cap dropped: said first, as an update
    // of its own that the host confirms like any other.
    let dropped = store::events::updates_dropped_through(ctx.conn)?;
    let mut out = b"[".to_vec();
    let mut limit = limit as i64;
    if let Some(d) = dropped.filter(|d| *d >= from) {
        out.extend_from_slice(
            format!(r#"{{"update_id":{d},"type":"{}","data":{{"dropped_through":{d}}}}}"#, EventKind::UpdatesDropped)
                .as_bytes(),
        );
        limit -= 1;
    }
    // The stored payloads are JSON the service wrote: spliced in as they are.
    store::events::each_update_from(ctx.conn, from, limit, |id, kind, data| {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(format!(r#"{{"update_id":{id},"type":"{kind}","data":"#).as_bytes());
        out.extend_from_slice(data.as_bytes());
        out.push(b'}');
    })?;
    out.push(b']');
    Ok(out)
}

/// Row counts, e.g. for a host to tell a fresh database from a used one.
fn stats(ctx: &mut Ctx<'_>) -> ApiResult<Value> {
    let c = store::stats::row_counts(ctx.conn)?;
    Ok(json!({
        "users": c.users,
        "bots": c.bots,
        "chats": c.chats,
        "messages": c.messages,
        "schema_version": ctx.conn.schema_version()?,
    }))
}

struct Seconds;
impl NumberBounds for Seconds {
    const MIN: f64 = 0.0;
    const MAX: f64 = 1e9;
    const WHY: &'static str = "must be a number from 0 to 1e9";
}

body! {
    struct AdvanceClock {
        seconds: Number<Seconds>,
    }
}

fn advance_clock(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    // Routing offers advanceClock only on the manual clock.
    let AdvanceClock { seconds: Number(s, _) } = requests::parse(b)?;
    let ms = (s * 1000.0).round() as u64;
    ctx.clock.advance_ms(ms);
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refusal texts that are constants name the limits they enforce.
    #[test]
    fn refusal_texts_name_their_limits() {
        assert!(AvatarKey::WHY.contains(&format!("1 to {MAX_AVATAR_KEY_BYTES} bytes")));
        assert_eq!(AvatarKey::MAX, MAX_AVATAR_KEY_BYTES);
    }

    /// Refusal texts that list a table's words list all of them.
    #[test]
    fn refusal_texts_list_their_words() {
        fn either<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
            let w: Vec<&str> = all.iter().map(|w| name(*w)).collect();
            let (last, rest) = w.split_last().unwrap();
            format!("must be {} or {last}", rest.join(", "))
        }
        assert_eq!(<Tier as Choices>::WHY, either(Tier::ALL, Tier::as_str));
        assert_eq!(<BotStatus as Choices>::WHY, either(BotStatus::ALL, BotStatus::as_str));
        assert_eq!(BY_WHY, either(BlockedBy::ALL, BlockedBy::as_str));
    }
}
