//! Bots' webhooks: where each bot's events are delivered, the secret they
//! are signed with, and what the last failed delivery said, so that
//! `getWebhookInfo` answers the same on every node.

use super::{Conn, Optional, StoreResult};
use crate::params;

/// A webhook as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRow {
    pub bot_id: String,
    pub url: String,
    pub secret: Vec<u8>,
    pub sealed: bool,
    pub max_connections: u32,
    /// A JSON array of event types, when the bot chose some.
    pub allowed_updates: Option<String>,
    pub last_error_at_ms: Option<i64>,
    pub last_error: Option<String>,
    pub next_attempt_at_ms: Option<i64>,
    /// The secret the last rotation replaced, while deliveries still
    /// carry its signature.
    pub previous: Option<PreviousSecret>,
}

/// A replaced webhook secret, stored as `secret` is (sealed or as is),
/// and the end of its overlap (Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousSecret {
    pub secret: Vec<u8>,
    pub sealed: bool,
    pub until_ms: i64,
}

const COLUMNS: &str = "bot_id, url, secret, sealed, max_connections, allowed_updates, last_error_at_ms, last_error, \
     next_attempt_at_ms, previous_secret, previous_sealed, previous_until_ms";

fn row(r: &super::Row<'_>) -> StoreResult<WebhookRow> {
    Ok(WebhookRow {
        bot_id: r.get(0)?,
        url: r.get(1)?,
        secret: r.get(2)?,
        sealed: r.get::<i64>(3)? != 0,
        max_connections: r.get::<i64>(4)?.clamp(1, 100) as u32,
        allowed_updates: r.get(5)?,
        last_error_at_ms: r.get(6)?,
        last_error: r.get(7)?,
        next_attempt_at_ms: r.get(8)?,
        previous: match (r.get::<Option<Vec<u8>>>(9)?, r.get::<Option<i64>>(10)?, r.get::<Option<i64>>(11)?) {
            (Some(secret), Some(sealed), Some(until_ms)) => {
                Some(PreviousSecret { secret, sealed: sealed != 0, until_ms })
            }
            _ => None,
        },
    })
}

/// The bot's webhook, if one is set.
pub fn get(conn: &Conn, bot_id: &str) -> StoreResult<Option<WebhookRow>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM webhooks WHERE bot_id = ?1"))?
        .query_row([bot_id], row)
        .optional()
}

/// Every webhook, in bot order (a node loads them when it starts
/// delivering).
pub fn all(conn: &Conn) -> StoreResult<Vec<WebhookRow>> {
    let mut out = Vec::new();
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM webhooks ORDER BY bot_id"))?.query_each((), |r| {
        out.push(row(r)?);
        Ok(true)
    })?;
    Ok(out)
}

/// What `setWebhook` writes.
pub struct SetWebhook<'a> {
    pub bot_id: &'a str,
    pub url: &'a str,
    pub secret: &'a [u8],
    pub sealed: bool,
    pub max_connections: u32,
    pub allowed_updates: Option<&'a str>,
    pub now_ms: u64,
    /// The replaced secret kept for the overlap, or none.
    pub previous: Option<&'a PreviousSecret>,
}

/// Sets (or replaces) the bot's webhook. A new URL starts with no error
/// on record.
pub fn set(conn: &Conn, w: SetWebhook<'_>) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO webhooks (bot_id, url, secret, sealed, max_connections, allowed_updates, set_at_ms, \
         previous_secret, previous_sealed, previous_until_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (bot_id) DO UPDATE SET \
         last_error_at_ms = CASE WHEN webhooks.url = excluded.url THEN webhooks.last_error_at_ms END, \
         last_error = CASE WHEN webhooks.url = excluded.url THEN webhooks.last_error END, \
         next_attempt_at_ms = NULL, url = excluded.url, secret = excluded.secret, sealed = excluded.sealed, \
         max_connections = excluded.max_connections, allowed_updates = excluded.allowed_updates, \
         set_at_ms = excluded.set_at_ms, previous_secret = excluded.previous_secret, \
         previous_sealed = excluded.previous_sealed, previous_until_ms = excluded.previous_until_ms",
    )?
    .execute(params![
        w.bot_id,
        w.url,
        w.secret,
        w.sealed as i64,
        w.max_connections as i64,
        w.allowed_updates,
        w.now_ms as i64,
        w.previous.map(|p| p.secret.as_slice()),
        w.previous.map(|p| p.sealed as i64),
        w.previous.map(|p| p.until_ms)
    ])?;
    Ok(())
}

/// Removes the bot's webhook and its secret. False when none was set.
pub fn delete(conn: &Conn, bot_id: &str) -> StoreResult<bool> {
    Ok(conn.prepare_cached("DELETE FROM webhooks WHERE bot_id = ?1")?.execute([bot_id])? == 1)
}

/// Records a failed delivery and when the next attempt is due (`None`:
/// nothing waits).
pub fn record_error(conn: &Conn, bot_id: &str, at_ms: u64, message: &str, next_ms: Option<u64>) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE webhooks SET last_error_at_ms = ?1, last_error = ?2, next_attempt_at_ms = ?3 WHERE bot_id = ?4",
    )?
    .execute(params![at_ms as i64, message, next_ms.map(|t| t as i64), bot_id])?;
    Ok(())
}

/// PostgreSQL: takes, or renews, this node's lease on every webhook whose
/// lease is free, lapsed or already this node's, until `expires_at_ms`;
/// returns the bots whose webhooks this node now delivers. One statement,
/// so two nodes never both hold one.
pub fn claim_leases(conn: &Conn, node: &str, now_ms: u64, expires_at_ms: u64) -> StoreResult<Vec<String>> {
    let mut held = Vec::new();
    conn.prepare_cached(
        "INSERT INTO webhook_leases (bot_id, node, expires_at_ms) SELECT bot_id, ?1, ?3 FROM webhooks \
         ON CONFLICT (bot_id) DO UPDATE SET node = excluded.node, expires_at_ms = excluded.expires_at_ms \
         WHERE webhook_leases.node = excluded.node OR webhook_leases.expires_at_ms <= ?2 RETURNING bot_id",
    )?
    .query_each(params![node, now_ms as i64, expires_at_ms as i64], |r| {
        held.push(r.get(0)?);
        Ok(true)
    })?;
    Ok(held)
}

/// Records that no retry waits any more.
pub fn clear_next_attempt(conn: &Conn, bot_id: &str) -> StoreResult<()> {
    conn.prepare_cached("UPDATE webhooks SET next_attempt_at_ms = NULL WHERE bot_id = ?1")?.execute([bot_id])?;
    Ok(())
}
