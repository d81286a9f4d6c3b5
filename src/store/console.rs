//! The console's queries: lists with cursor paging and a filter, a bot's
//! live figures, and the audit log. Portable SQL, run by both stores; the
//! gateway sessions of a bot come from the leases on PostgreSQL (every
//! node's) and from the caller (this process's) on SQLite.
//!
//! Lists are newest first, keyed by `(created_at, id)`: the cursor is the
//! last row's pair, so a page never repeats or skips a row that existed
//! when the first page was read.

use super::{Conn, Dialect, Row, StoreResult};
use crate::params;

/// Where a page starts: after `(created_at, id)` in newest-first order.
#[derive(Debug, Clone, Default)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
}

impl Cursor {
    /// `"<created_at>.<id>"`, as handed out in `next_cursor`.
    pub fn parse(s: &str) -> Option<Cursor> {
        let (t, id) = s.split_once('.')?;
        let created_at = t.parse().ok()?;
        (!id.is_empty() && id.len() <= 64).then(|| Cursor { created_at, id: id.to_string() })
    }

    pub fn encode(created_at: i64, id: &str) -> String {
        format!("{created_at}.{id}")
    }

    /// The first page: after everything.
    fn bounds(c: Option<&Cursor>) -> (i64, &str) {
        c.map_or((i64::MAX, ""), |c| (c.created_at, c.id.as_str()))
    }
}

/// A `LIKE` pattern matching `q` anywhere, case-insensitively ('' for no
/// filter); `%`, `_` and `\` in `q` match themselves.
fn contains_pattern(q: &str) -> String {
    if q.is_empty() {
        return String::new();
    }
    let mut p = String::from("%");
    for c in q.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

const PAGE: &str = "(created_at < ?2 OR (created_at = ?2 AND id < ?3))";

/// Columns of a bot row: `bot_columns` (the model's), then `created_at`,
/// the unacknowledged events, and the open gateway leases (PostgreSQL;
/// 0 on SQLite).
pub fn list_bots<T>(
    conn: &Conn,
    bot_columns: &str,
    query: &str,
    after: Option<&Cursor>,
    limit: u32,
    now_ms: u64,
    f: impl FnMut(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let sql = format!(
        "SELECT {bot_columns}, created_at, last_seq - acked_seq, {} FROM bots \
         WHERE (?1 = '' OR lower(handle) LIKE ?1 ESCAPE '\\' OR lower(display_name) LIKE ?1 ESCAPE '\\') \
         AND {PAGE} AND ?5 >= 0 ORDER BY created_at DESC, id DESC LIMIT ?4",
        leases(conn, "?5")
    );
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(&sql)?.query_vec(params![contains_pattern(query), t, id, i64::from(limit), now_ms as i64], f)
}

/// One bot with the same columns as [`list_bots`].
pub fn bot_live<T>(
    conn: &Conn,
    bot_columns: &str,
    bot_id: &str,
    now_ms: u64,
    f: impl FnOnce(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    use super::Optional;
    let sql = format!(
        "SELECT {bot_columns}, created_at, last_seq - acked_seq, {} FROM bots WHERE id = ?1 AND ?2 >= 0",
        leases(conn, "?2")
    );
    conn.prepare_cached(&sql)?.query_row(params![bot_id, now_ms as i64], f).optional()
}

/// The open leases of the row's bot (`now`: the parameter holding the
/// time): every node's sessions. SQLite has no leases; its sessions are
/// the process's.
fn leases(conn: &Conn, now: &str) -> String {
    match conn.dialect() {
        Dialect::Sqlite => "0".into(),
        Dialect::Postgres => {
            format!("(SELECT count(*) FROM gateway_leases l WHERE l.bot_id = bots.id AND l.expires_at_ms > {now})")
        }
    }
}

/// Users: `id, display_name, handle, created_at`.
pub fn list_users<T>(
    conn: &Conn,
    query: &str,
    after: Option<&Cursor>,
    limit: u32,
    f: impl FnMut(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(
        "SELECT id, display_name, handle, created_at FROM users \
         WHERE (?1 = '' OR lower(coalesce(handle, '')) LIKE ?1 ESCAPE '\\' OR lower(display_name) LIKE ?1 ESCAPE '\\') \
         AND (created_at < ?2 OR (created_at = ?2 AND id < ?3)) ORDER BY created_at DESC, id DESC LIMIT ?4",
    )?
    .query_vec(params![contains_pattern(query), t, id, i64::from(limit)], f)
}

/// Chats: `id, type, title, user_id, bot_id, started, blocked_by_user,
/// blocked_by_bot, bots_can_send, dissolved, created_at, current members`.
/// `member` ('' for any) keeps the chats where that user or bot is a
/// current member.
pub fn list_chats<T>(
    conn: &Conn,
    query: &str,
    member: &str,
    after: Option<&Cursor>,
    limit: u32,
    f: impl FnMut(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(
        "SELECT id, type, title, user_id, bot_id, started, blocked_by_user, blocked_by_bot, bots_can_send, \
         dissolved, created_at, (SELECT count(*) FROM members m WHERE m.chat_id = chats.id AND m.active = 1) FROM chats \
         WHERE (?1 = '' OR lower(coalesce(title, '')) LIKE ?1 ESCAPE '\\') \
         AND (?5 = '' OR id IN (SELECT chat_id FROM members WHERE member_id = ?5 AND active = 1)) \
         AND (created_at < ?2 OR (created_at = ?2 AND id < ?3)) ORDER BY created_at DESC, id DESC LIMIT ?4",
    )?
    .query_vec(params![contains_pattern(query), t, id, i64::from(limit), member], f)
}

/// A chat's current members with their names: `id, is_bot, name, handle`.
pub fn chat_members<T>(conn: &Conn, chat_id: &str, f: impl FnMut(&Row<'_>) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    conn.prepare_cached(
        "SELECT m.member_id, m.is_bot, coalesce(u.display_name, b.display_name), coalesce(u.handle, b.handle) \
         FROM members m LEFT JOIN users u ON u.id = m.member_id LEFT JOIN bots b ON b.id = m.member_id \
         WHERE m.chat_id = ?1 AND m.active = 1 ORDER BY m.is_bot DESC, m.member_id",
    )?
    .query_vec([chat_id], f)
}

/// One audit entry, written in the transaction of the change it records.
pub struct AuditEntry<'a> {
    pub at_ms: u64,
    pub method: &'a str,
    pub target: Option<&'a str>,
    pub peer: Option<&'a str>,
    /// JSON object of the request's non-secret fields.
    pub detail: &'a str,
}

pub fn audit(conn: &Conn, e: &AuditEntry<'_>) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO audit_log (at_ms, method, target, actor, peer, detail) VALUES (?1, ?2, ?3, 'admin', ?4, ?5)",
    )?
    .execute(params![e.at_ms as i64, e.method, e.target, e.peer, e.detail])?;
    Ok(())
}

/// Audit entries newest first, before entry `before` (none: from the
/// newest): `id, at_ms, method, target, actor, peer, detail`. `target`
/// ('' for any) keeps one bot's, chat's or user's entries.
pub fn audit_log<T>(
    conn: &Conn,
    before: Option<i64>,
    target: &str,
    limit: u32,
    f: impl FnMut(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    conn.prepare_cached(
        "SELECT id, at_ms, method, target, actor, peer, detail FROM audit_log \
         WHERE id < ?1 AND (?2 = '' OR target = ?2) ORDER BY id DESC LIMIT ?3",
    )?
    .query_vec(params![before.unwrap_or(i64::MAX), target, i64::from(limit)], f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_wildcards_literally() {
        assert_eq!(contains_pattern("A_b%"), "%a\\_b\\%%");
        assert_eq!(contains_pattern(""), "");
        assert_eq!(Cursor::parse("17.bot_x").map(|c| (c.created_at, c.id)), Some((17, "bot_x".into())));
        assert!(Cursor::parse("x.bot").is_none());
        assert!(Cursor::parse("17.").is_none());
    }
}
