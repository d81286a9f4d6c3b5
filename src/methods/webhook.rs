//! setWebhook, deleteWebhook and getWebhookInfo: a bot chooses where its
//! events are delivered. The deliveries themselves are `crate::webhook`'s.

use super::requests::{self, body, Body, Bounded, Bounds, Field, FromField};
use super::to_json;
use crate::auth;
use crate::error::{ApiError, ApiResult};
use crate::model::Bot;
use crate::protocol::EventKind;
use crate::store;
use crate::txn::Ctx;
use crate::webhook::{self, signature, TargetPolicy, UrlRefusal};
use serde_json::{json, Value};

/// `max_connections` when setWebhook leaves it out.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 40;

/// The policy of this service's configuration.
pub fn target_policy(cfg: &crate::Config) -> TargetPolicy {
    TargetPolicy { allow_http: cfg.webhook_allow_http, allow_private_addresses: cfg.webhook_allow_private_addresses }
}

/// `allowed_updates`: a list of event types, kept as given (deduplicated)
/// in JSON. An empty list means every type, as in Telegram.
pub struct AllowedUpdates(pub Option<Vec<EventKind>>);

impl<'a> FromField<'a> for AllowedUpdates {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let Value::Array(items) = f.present()? else {
            return Err(f.invalid("must be an array of event types"));
        };
        let bad = || f.invalid("must list only event types bots receive");
        let mut out: Vec<EventKind> = Vec::new();
        for item in items {
            let kind = item.as_str().and_then(|s| s.parse::<EventKind>().ok()).filter(|k| k.reaches_bots());
            let kind = kind.ok_or_else(bad)?;
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        Ok(AllowedUpdates((!out.is_empty()).then_some(out)))
    }
}

fn check_url(ctx: &Ctx<'_>, url: &str) -> ApiResult<()> {
    match webhook::check_url(url, target_policy(ctx.cfg)) {
        Ok(_) => Ok(()),
        Err(UrlRefusal::Invalid(why)) => Err(ApiError::invalid_webhook_url(why)),
        Err(UrlRefusal::Forbidden(class)) => Err(ApiError::webhook_address_forbidden(class.describe())),
    }
}

/// Acknowledges every event the bot has so far.
fn drop_pending(ctx: &mut Ctx<'_>, bot_id: &str) -> ApiResult<()> {
    let bounds = store::gateway::log_bounds(ctx.conn, bot_id)?;
    if bounds.last > bounds.acked {
        store::gateway::write_ack(ctx.conn, bot_id, bounds.last)?;
    }
    Ok(())
}

body! {
    /// setWebhook's `url`, read and checked before its other fields.
    struct SetWebhookUrl<'a> {
        url: &'a str,
    }
}

struct MaxConnections;
impl Bounds for MaxConnections {
    const MIN: u64 = 1;
    const MAX: u64 = crate::webhook::schedule::MAX_CONNECTIONS as u64;
    const WHY: &'static str = "must be an integer from 1 to 100";
}

body! {
    /// setWebhook's other fields, in check order.
    struct SetWebhook {
        max_connections: Option<Bounded<MaxConnections>>,
        allowed_updates: Option<AllowedUpdates>,
        drop_pending_updates: Option<bool>,
        rotate_secret: Option<bool>,
    }
}

body! {
    /// deleteWebhook's body.
    struct DeleteWebhook {
        drop_pending_updates: Option<bool>,
    }
}

pub fn set_webhook(ctx: &mut Ctx<'_>, bot: &Bot, b: &Body) -> ApiResult<Vec<u8>> {
    let SetWebhookUrl { url } = requests::parse(b)?;
    check_url(ctx, url)?;
    let f: SetWebhook = requests::parse(b)?;
    let max_connections = f.max_connections.map_or(DEFAULT_MAX_CONNECTIONS, |m| m.0 as u32);
    let allowed = f.allowed_updates.and_then(|a| a.0);
    let drop = f.drop_pending_updates.unwrap_or(false);
    let rotate = f.rotate_secret.unwrap_or(false);
    let existing = store::webhooks::get(ctx.conn, &bot.id)?;
    // The secret stays across setWebhook calls (a new URL included) unless
    // the bot asks for a new one, so a receiver keeps verifying.
    // A rotation keeps the secret it replaces for the overlap, so
    // receivers still on it verify until they have the new one; a second
    // rotation keeps only the one it replaces. Without a rotation the
    // overlap under way goes on.
    let previous = match &existing {
        Some(row) if rotate && ctx.cfg.webhook_secret_overlap_s > 0 => Some(store::webhooks::PreviousSecret {
            secret: row.secret.clone(),
            sealed: row.sealed,
            until_ms: ctx.now_ms.saturating_add(ctx.cfg.webhook_secret_overlap_s.saturating_mul(1000)) as i64,
        }),
        Some(row) if !rotate => row.previous.clone(),
        _ => None,
    };
    let (stored, sealed, new_secret) = match existing {
        Some(row) if !rotate => (row.secret, row.sealed, None),
        _ => {
            let mut key = [0u8; signature::SECRET_KEY_BYTES];
            ctx.random.fill(&mut key)?;
            let secret = signature::secret_from_key(&key);
            let (stored, sealed) = match &ctx.cfg.operational_key {
                Some(k) => (auth::seal_token(ctx.random, k, &bot.id, &secret)?, true),
                None => (secret.as_bytes().to_vec(), false),
            };
            (stored, sealed, Some(secret))
        }
    };
    let allowed_json = allowed.as_ref().map(|a| serde_json::to_string(a).unwrap_or_default());
    store::webhooks::set(
        ctx.conn,
        store::webhooks::SetWebhook {
            bot_id: &bot.id,
            url,
            secret: &stored,
            sealed,
            max_connections,
            allowed_updates: allowed_json.as_deref(),
            now_ms: ctx.now_ms,
            previous: previous.as_ref(),
        },
    )?;
    if drop {
        drop_pending(ctx, &bot.id)?;
    }
    // The deliveries learn of the change after the commit, and the host
    // hears of it through the wake hook, as of a bot that got events.
    ctx.fx.webhooks_changed.push(bot.id.clone());
    ctx.fx.woken.push(bot.id.clone());
    let mut out = json!({ "url": url });
    if let Some(s) = new_secret {
        out["secret"] = Value::String(s);
    }
    to_json(&out)
}

pub fn delete_webhook(ctx: &mut Ctx<'_>, bot: &Bot, b: &Body) -> ApiResult<Vec<u8>> {
    delete(ctx, &bot.id, b)
}

/// deleteWebhook, for the bot and for the host API (`bot_id`).
pub fn delete(ctx: &mut Ctx<'_>, bot_id: &str, b: &Body) -> ApiResult<Vec<u8>> {
    let drop = requests::parse::<DeleteWebhook>(b)?.drop_pending_updates.unwrap_or(false);
    if store::webhooks::delete(ctx.conn, bot_id)? {
        ctx.fx.webhooks_changed.push(bot_id.to_string());
        ctx.fx.woken.push(bot_id.to_string());
    }
    if drop {
        drop_pending(ctx, bot_id)?;
    }
    Ok(b"true".to_vec())
}

pub fn get_webhook_info(ctx: &mut Ctx<'_>, bot: &Bot, _b: &Body) -> ApiResult<Vec<u8>> {
    info(ctx, &bot.id)
}

/// getWebhookInfo, for the bot and for the host API (`bot_id`).
pub fn info(ctx: &mut Ctx<'_>, bot_id: &str) -> ApiResult<Vec<u8>> {
    let bounds = store::gateway::log_bounds(ctx.conn, bot_id)?;
    let pending = (bounds.last - bounds.acked).max(0);
    let row = store::webhooks::get(ctx.conn, bot_id)?;
    to_json(&info_json(row.as_ref(), pending))
}

/// getWebhookInfo's object, for the bot method and the host API alike.
pub fn info_json(row: Option<&store::webhooks::WebhookRow>, pending: i64) -> Value {
    let secs = |ms: Option<i64>| ms.map(|t| Value::from(t.div_euclid(1000)));
    match row {
        None => json!({
            "url": "",
            "pending_update_count": pending,
            "max_connections": null,
            "allowed_updates": null,
            "last_error_date": null,
            "last_error_message": null,
            "next_attempt_date": null,
        }),
        Some(r) => json!({
            "url": r.url,
            "pending_update_count": pending,
            "max_connections": r.max_connections,
            "allowed_updates": r.allowed_updates.as_deref().and_then(|a| serde_json::from_slice::<Value>(a.as_bytes()).ok()),
            "last_error_date": secs(r.last_error_at_ms),
            "last_error_message": r.last_error,
            "next_attempt_date": r.next_attempt_at_ms.map(|t| Value::from((t + 999).div_euclid(1000))),
        }),
    }
}

/// The keys a bot's deliveries are signed with: its secret's key bytes,
/// and the replaced secret's while a rotation's overlap lasts; `None` when
/// the stored secret cannot be opened (sealed under another operational
/// key). A replaced secret that cannot be opened is left out.
pub fn signing_key(cfg: &crate::Config, row: &store::webhooks::WebhookRow) -> Option<signature::SigningKeys> {
    let open = |secret: &[u8], sealed: bool| -> Option<Vec<u8>> {
        let secret = if sealed {
            auth::open_token(cfg.operational_key.as_ref()?, &row.bot_id, secret)?
        } else {
            String::from_utf8(secret.to_vec()).ok()?
        };
        signature::key_of_secret(&secret)
    };
    let current = open(&row.secret, row.sealed)?;
    let previous =
        row.previous.as_ref().and_then(|p| Some((open(&p.secret, p.sealed)?, u64::try_from(p.until_ms).ok()?)));
    Some(signature::SigningKeys { current, previous })
}
