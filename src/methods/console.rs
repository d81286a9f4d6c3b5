//! The host methods the admin console reads with: lists with paging and a
//! filter, a bot's live figures and activity, a chat's members by name, and
//! the audit log; and the audit entry every change through the host API
//! writes. None of them confirms the host's `getUpdates` stream.

use super::params::Body;
use super::requests::body;
use super::requests::{self, Uint};
use super::requests::{BotIdBody, ChatIdBody};
use crate::error::{ApiError, ApiResult};
use crate::model::ChatKind;
use crate::route::AdminMethod;
use crate::rules::limits;
use crate::store::bots;
use crate::store::console::{self as q, Cursor};
use crate::txn::Ctx;
use serde_json::{json, Map, Value};

const DEFAULT_PAGE: u64 = 50;
const MAX_PAGE: u64 = 100;

body! {
    /// A list's paging fields, in check order.
    struct Page<'a> {
        query: Option<&'a str>,
        cursor: Option<&'a str>,
        limit: Option<Uint<MAX_PAGE>>,
    }
}

body! {
    /// listChats' filter, read after the paging fields.
    struct MemberFilter<'a> {
        member_id: Option<&'a str>,
    }
}

fn page_args(b: &Body) -> ApiResult<(String, Option<Cursor>, u32)> {
    let page: Page<'_> = requests::parse(b)?;
    let query = page.query.unwrap_or("");
    if query.chars().count() > limits::MAX_QUERY_CHARS {
        return Err(ApiError::invalid_field(
            "query",
            &format!("must be at most {} characters", limits::MAX_QUERY_CHARS),
        ));
    }
    let cursor = match page.cursor {
        None | Some("") => None,
        Some(c) => Some(
            Cursor::parse(c)
                .ok_or_else(|| ApiError::invalid_field("cursor", "must be a next_cursor value from an earlier page"))?,
        ),
    };
    let limit = page.limit.map_or(DEFAULT_PAGE, |l| l.0).max(1) as u32;
    Ok((query.to_string(), cursor, limit))
}

fn next_cursor(len: usize, limit: u32, last: Option<(i64, &str)>) -> Value {
    match last {
        Some((t, id)) if len == limit as usize => Value::String(Cursor::encode(t, id)),
        _ => Value::Null,
    }
}

/// A bot of [`q::list_bots`]: the identity, with `created_at` and a
/// `live` object. Gateway sessions are every node's leases on a shared
/// store, else this process's.
fn bot_json(ctx: &Ctx<'_>, row: &q::BotLive) -> Value {
    let bot = &row.bot;
    let sessions = row.leased.unwrap_or_else(|| ctx.host.sessions.map_or(0, |f| f(&bot.id)));
    let last = ctx.host.activity.map_or(0, |a| a.last_request_ms(&bot.id));
    let mut v: Value = serde_json::from_slice(bot.identity_json.as_bytes()).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("created_at".into(), row.created_at.into());
        m.insert(
            "live".into(),
            json!({
                "gateway_sessions": sessions,
                "gateway_connection_limit": bot.connection_limit,
                "unacked_events": row.unacked.max(0),
                "last_request_at": if last == 0 { Value::Null } else { (last / 1000).into() },
            }),
        );
    }
    v
}

pub fn list_bots(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let rows = q::list_bots(ctx.conn, &query, cursor.as_ref(), limit, ctx.now_ms)?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|r| (r.created_at, r.bot.id.as_str())));
    Ok(json!({"bots": rows.iter().map(|r| bot_json(ctx, r)).collect::<Vec<_>>(), "next_cursor": next}))
}

pub fn get_bot(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let BotIdBody { bot_id } = requests::parse(b)?;
    let row = q::bot_live(ctx.conn, bot_id, ctx.now_ms)?;
    row.map(|r| bot_json(ctx, &r)).ok_or_else(ApiError::bot_not_found)
}

pub fn list_users(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let rows = q::list_users(ctx.conn, &query, cursor.as_ref(), limit)?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|u| (u.created_at, u.id.as_str())));
    let users: Vec<Value> = rows
        .into_iter()
        .map(|u| json!({"id": u.id, "display_name": u.display_name, "handle": u.handle, "created_at": u.created_at}))
        .collect();
    Ok(json!({"users": users, "next_cursor": next}))
}

pub fn list_chats(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let member = requests::parse::<MemberFilter<'_>>(b)?.member_id.unwrap_or("");
    let rows = q::list_chats(ctx.conn, &query, member, cursor.as_ref(), limit)?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|c| (c.created_at, c.chat.id.as_str())));
    let chats: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            let c = row.chat;
            let mut v =
                json!({"id": c.id, "type": c.kind, "created_at": row.created_at, "member_count": row.member_count});
            let m = v.as_object_mut().expect("an object");
            if c.kind == ChatKind::Private {
                m.insert("user_id".into(), c.user_id.into());
                m.insert("bot_id".into(), c.bot_id.into());
                m.insert("started".into(), c.started.into());
                m.insert("blocked_by_user".into(), c.blocked_by_user.into());
                m.insert("blocked_by_bot".into(), c.blocked_by_bot.into());
            } else {
                m.insert("title".into(), c.title.into());
                m.insert("bots_can_send".into(), c.bots_can_send.into());
                m.insert("dissolved".into(), c.dissolved.into());
            }
            v
        })
        .collect();
    Ok(json!({"chats": chats, "next_cursor": next}))
}

pub fn chat_members(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let ChatIdBody { chat_id } = requests::parse(b)?;
    if crate::store::chats::load(ctx.conn, chat_id)?.is_none() {
        return Err(ApiError::chat_not_found());
    }
    let rows = q::chat_members(ctx.conn, chat_id)?;
    Ok(Value::Array(
        rows.into_iter()
            .map(|m| json!({"id": m.id, "is_bot": m.is_bot, "display_name": m.display_name, "handle": m.handle}))
            .collect(),
    ))
}

pub fn bot_activity(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let BotIdBody { bot_id } = requests::parse(b)?;
    if bots::by_id(ctx.conn, bot_id)?.is_none() {
        return Err(ApiError::bot_not_found());
    }
    let s = ctx.host.activity.map(|a| a.summary(bot_id, ctx.now_ms)).unwrap_or_default();
    let series = ctx
        .host
        .activity
        .map_or_else(|| crate::console::activity::Series::empty(ctx.now_ms), |a| a.series(bot_id, ctx.now_ms));
    let refusals: Map<String, Value> = s.refusals.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    let refused: u64 = s.refusals.values().sum();
    Ok(json!({
        "bot_id": bot_id,
        "window_s": 3600,
        "requests": s.requests,
        "refused": refused,
        "refusals": refusals,
        "messages_sent": s.messages_sent,
        "last_request_at": if s.last_request_ms == 0 { Value::Null } else { (s.last_request_ms / 1000).into() },
        // The same hour minute by minute, oldest first: what the console draws.
        "per_minute": {
            "start": series.start_ms / 1000,
            "requests": &series.requests[..],
            "refused": &series.refused[..],
            "messages_sent": &series.messages_sent[..],
        },
    }))
}

body! {
    /// getAuditLog's body, in check order.
    struct AuditLog<'a> {
        before: Option<Uint<{ i64::MAX as u64 }>>,
        target: Option<&'a str>,
        limit: Option<Uint<MAX_PAGE>>,
    }
}

pub fn audit_log(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let AuditLog { before, target, limit } = requests::parse(b)?;
    let before = before.map(|v| v.0 as i64);
    let target = target.unwrap_or("");
    let limit = limit.map_or(DEFAULT_PAGE, |l| l.0).max(1) as u32;
    let rows: Vec<Value> = q::audit_log(ctx.conn, before, target, limit)?
        .into_iter()
        .map(|e| {
            json!({
                "id": e.id,
                "date": e.at_ms / 1000,
                "at_ms": e.at_ms,
                "method": e.method,
                "target": e.target,
                "actor": e.actor,
                "peer": e.peer,
                "detail": serde_json::from_slice::<Value>(e.detail.as_bytes()).unwrap_or(Value::Null),
            })
        })
        .collect();
    let next = match rows.last() {
        Some(v) if rows.len() == limit as usize => v["id"].clone(),
        _ => Value::Null,
    };
    Ok(json!({"entries": rows, "next_before": next}))
}

/// Body fields an audit entry may copy: names, flags, ids and limits.
/// Never a token, a secret or a message text.
const AUDITED_FIELDS: &[&str] = &[
    "bot_id",
    "user_id",
    "chat_id",
    "member_id",
    "display_name",
    "handle",
    "quota_tier",
    "verified",
    "official",
    "avatar_key",
    "gateway_connection_limit",
    "status",
    "by",
    "blocked",
    "title",
    "member_ids",
    "bots_can_send",
    "message_id",
    "reply_to_message_id",
    "seconds",
];

/// Whether a host method is recorded in the audit log: every change, and
/// reading an operational token. `getUpdates` is not: it is the host's
/// own polling, and confirming its stream is bookkeeping, not a change
/// an operator made.
pub fn audited(m: AdminMethod) -> bool {
    use AdminMethod as M;
    !matches!(
        m,
        M::GetBot
            | M::GetChat
            | M::GetChatHistory
            | M::GetChatActions
            | M::GetUpdates
            | M::GetStats
            | M::ListBots
            | M::ListUsers
            | M::ListChats
            | M::GetChatMembers
            | M::GetBotActivity
            | M::GetAuditLog
            | M::GetWebhookInfo
            | M::GetChatCommands
            | M::GetBotCommands
    )
}

/// Writes the audit entry of a successful change, in its transaction.
pub fn record(ctx: &mut Ctx<'_>, m: AdminMethod, b: &Body, result: &[u8]) -> ApiResult<()> {
    let mut detail = Map::new();
    for f in AUDITED_FIELDS {
        if let Some(v) = b.get(*f) {
            detail.insert((*f).to_string(), v.clone());
        }
    }
    // What a create made, and a sent message's number, come from the result.
    let created: Option<String> = match m {
        AdminMethod::CreateUser | AdminMethod::CreateGroup | AdminMethod::CreatePrivateChat => {
            serde_json::from_slice::<Value>(result).ok().and_then(|v| v["id"].as_str().map(str::to_string))
        }
        AdminMethod::CreateBot => {
            serde_json::from_slice::<Value>(result).ok().and_then(|v| v["bot"]["id"].as_str().map(str::to_string))
        }
        AdminMethod::SendUserMessage => {
            if let Some(id) =
                serde_json::from_slice::<Value>(result).ok().and_then(|v| v["message_id"].as_str().map(str::to_string))
            {
                detail.insert("message_id".into(), id.into());
            }
            None
        }
        _ => None,
    };
    let target = created
        .or_else(|| ["bot_id", "chat_id", "user_id"].iter().find_map(|f| b.get(*f)?.as_str().map(str::to_string)));
    let detail = Value::Object(detail).to_string();
    q::audit(
        ctx.conn,
        &q::AuditEntry {
            at_ms: ctx.now_ms,
            method: m.name(),
            target: target.as_deref(),
            peer: ctx.host.peer,
            detail: &detail,
        },
    )?;
    Ok(())
}
