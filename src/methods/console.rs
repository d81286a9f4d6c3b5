//! The host methods the admin console reads with: lists with paging and a
//! filter, a bot's live figures and activity, a chat's members by name, and
//! the audit log; and the audit entry every change through the host API
//! writes. None of them confirms the host's `getUpdates` stream.

use super::admin::{BotIdBody, ChatIdBody};
use super::params::Body;
use super::requests::{self, Uint};
use crate::error::{ApiError, ApiResult};
use crate::route::AdminMethod;
use crate::rules::limits;
use crate::store::bots::{self, BOT_COLUMNS};
use crate::store::console::{self as q, Cursor};
use crate::store::Row;
use crate::txn::Ctx;
use serde::Deserialize;
use serde_json::{json, Map, Value};

const DEFAULT_PAGE: u64 = 50;
const MAX_PAGE: u64 = 100;

/// A list's paging fields, in check order.
#[derive(Deserialize)]
struct Page<'a> {
    query: Option<&'a str>,
    cursor: Option<&'a str>,
    limit: Option<Uint<MAX_PAGE>>,
}

/// listChats' filter, read after the paging fields.
#[derive(Deserialize)]
struct MemberFilter<'a> {
    member_id: Option<&'a str>,
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

/// A bot row of [`q::list_bots`]: the identity, with `created_at` and a
/// `live` object.
fn bot_row(ctx: &Ctx<'_>, r: &Row<'_>) -> crate::store::StoreResult<(Value, i64, String)> {
    let bot = bots::read_bot(r, 0)?;
    let created_at: i64 = r.get(9)?;
    let unacked: i64 = r.get(10)?;
    let leased: i64 = r.get(11)?;
    let sessions = match ctx.conn.dialect() {
        crate::store::Dialect::Sqlite => ctx.host.sessions.map_or(0, |f| f(&bot.id)),
        crate::store::Dialect::Postgres => leased as u32,
    };
    let last = ctx.host.activity.map_or(0, |a| a.last_request_ms(&bot.id));
    let mut v: Value = serde_json::from_str(&bot.identity_json).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("created_at".into(), created_at.into());
        m.insert(
            "live".into(),
            json!({
                "gateway_sessions": sessions,
                "gateway_connection_limit": bot.connection_limit,
                "unacked_events": unacked.max(0),
                "last_request_at": if last == 0 { Value::Null } else { (last / 1000).into() },
            }),
        );
    }
    Ok((v, created_at, bot.id))
}

pub fn list_bots(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let c: &Ctx<'_> = ctx;
    let rows = q::list_bots(c.conn, BOT_COLUMNS, &query, cursor.as_ref(), limit, c.now_ms, |r| bot_row(c, r))?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|(_, t, id)| (*t, id.as_str())));
    Ok(json!({"bots": rows.into_iter().map(|(v, _, _)| v).collect::<Vec<_>>(), "next_cursor": next}))
}

pub fn get_bot(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let BotIdBody { bot_id } = requests::parse(b)?;
    let c: &Ctx<'_> = ctx;
    let row = q::bot_live(c.conn, BOT_COLUMNS, bot_id, c.now_ms, |r| bot_row(c, r))?;
    row.map(|(v, _, _)| v).ok_or_else(ApiError::bot_not_found)
}

pub fn list_users(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let rows = q::list_users(ctx.conn, &query, cursor.as_ref(), limit, |r| {
        let (id, created_at): (String, i64) = (r.get(0)?, r.get(3)?);
        let v = json!({"id": id, "display_name": r.get::<String>(1)?, "handle": r.get::<Option<String>>(2)?,
                       "created_at": created_at});
        Ok((v, created_at, id))
    })?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|(_, t, id)| (*t, id.as_str())));
    Ok(json!({"users": rows.into_iter().map(|(v, _, _)| v).collect::<Vec<_>>(), "next_cursor": next}))
}

pub fn list_chats(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let (query, cursor, limit) = page_args(b)?;
    let member = requests::parse::<MemberFilter<'_>>(b)?.member_id.unwrap_or("");
    let rows = q::list_chats(ctx.conn, &query, member, cursor.as_ref(), limit, |r| {
        let (id, kind, created_at): (String, String, i64) = (r.get(0)?, r.get(1)?, r.get(10)?);
        let mut v = json!({"id": id, "type": kind, "created_at": created_at, "member_count": r.get::<i64>(11)?});
        let m = v.as_object_mut().expect("an object");
        if kind == "private" {
            m.insert("user_id".into(), r.get::<Option<String>>(3)?.into());
            m.insert("bot_id".into(), r.get::<Option<String>>(4)?.into());
            m.insert("started".into(), r.get::<bool>(5)?.into());
            m.insert("blocked_by_user".into(), r.get::<bool>(6)?.into());
            m.insert("blocked_by_bot".into(), r.get::<bool>(7)?.into());
        } else {
            m.insert("title".into(), r.get::<Option<String>>(2)?.into());
            m.insert("bots_can_send".into(), r.get::<bool>(8)?.into());
            m.insert("dissolved".into(), r.get::<bool>(9)?.into());
        }
        Ok((v, created_at, id))
    })?;
    let next = next_cursor(rows.len(), limit, rows.last().map(|(_, t, id)| (*t, id.as_str())));
    Ok(json!({"chats": rows.into_iter().map(|(v, _, _)| v).collect::<Vec<_>>(), "next_cursor": next}))
}

pub fn chat_members(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let ChatIdBody { chat_id } = requests::parse(b)?;
    if crate::store::chats::load(ctx.conn, chat_id)?.is_none() {
        return Err(ApiError::chat_not_found());
    }
    let rows = q::chat_members(ctx.conn, chat_id, |r| {
        Ok(json!({"id": r.get::<String>(0)?, "is_bot": r.get::<bool>(1)?,
                  "display_name": r.get::<Option<String>>(2)?, "handle": r.get::<Option<String>>(3)?}))
    })?;
    Ok(Value::Array(rows))
}

pub fn bot_activity(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let BotIdBody { bot_id } = requests::parse(b)?;
    if bots::by_id(ctx.conn, bot_id)?.is_none() {
        return Err(ApiError::bot_not_found());
    }
    let s = ctx.host.activity.map(|a| a.summary(bot_id, ctx.now_ms)).unwrap_or_default();
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
    }))
}

/// getAuditLog's body, in check order.
#[derive(Deserialize)]
struct AuditLog<'a> {
    before: Option<Uint<{ i64::MAX as u64 }>>,
    target: Option<&'a str>,
    limit: Option<Uint<MAX_PAGE>>,
}

pub fn audit_log(ctx: &mut Ctx<'_>, b: &Body) -> ApiResult<Value> {
    let AuditLog { before, target, limit } = requests::parse(b)?;
    let before = before.map(|v| v.0 as i64);
    let target = target.unwrap_or("");
    let limit = limit.map_or(DEFAULT_PAGE, |l| l.0).max(1) as u32;
    let rows = q::audit_log(ctx.conn, before, target, limit, |r| {
        let at_ms: i64 = r.get(1)?;
        let detail: String = r.get(6)?;
        Ok(json!({
            "id": r.get::<i64>(0)?,
            "date": at_ms / 1000,
            "at_ms": at_ms,
            "method": r.get::<String>(2)?,
            "target": r.get::<Option<String>>(3)?,
            "actor": r.get::<String>(4)?,
            "peer": r.get::<Option<String>>(5)?,
            "detail": serde_json::from_str::<Value>(&detail).unwrap_or(Value::Null),
        }))
    })?;
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
