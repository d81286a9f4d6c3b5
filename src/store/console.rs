//! The console's queries: lists with cursor paging and a filter, a bot's
//! live figures, and the audit log, as typed rows. Portable SQL, run by
//! both stores; the gateway sessions of a bot come from the leases on a
//! shared store (every node's), and from the caller (this process's)
//! otherwise ([`BotLive::leased`] is `None`).
//!
//! Lists are newest first, keyed by `(created_at, id)`: the cursor is the
//! last row's pair, so a page never repeats or skips a row that existed
//! when the first page was read.

use super::chats::read_chat;
use super::{Conn, Dialect, Row, StoreResult};
use crate::model::{Bot, Chat};
use crate::params;

/// A bot as the console lists it.
#[derive(Debug, Clone)]
pub struct BotLive {
    pub bot: Bot,
    pub created_at: i64,
    /// Events logged and not yet acknowledged.
    pub unacked: i64,
    /// Open gateway leases of every node, on a shared store; `None` where
    /// sessions are counted by this process alone.
    pub leased: Option<u32>,
}

/// A user as the console lists it.
#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: String,
    pub display_name: String,
    pub handle: Option<String>,
    pub created_at: i64,
}

/// A chat as the console lists it (the fields of the other kind are as
/// stored).
#[derive(Debug, Clone)]
pub struct ChatRow {
    pub chat: Chat,
    pub created_at: i64,
    /// Current members.
    pub member_count: i64,
}

/// A chat's current member with a name.
#[derive(Debug, Clone)]
pub struct MemberRow {
    pub id: String,
    pub is_bot: bool,
    pub display_name: Option<String>,
    pub handle: Option<String>,
}

/// One audit log entry as stored.
#[derive(Debug, Clone)]
pub struct AuditRow {
    pub id: i64,
    pub at_ms: i64,
    pub method: String,
    pub target: Option<String>,
    pub actor: String,
    pub peer: Option<String>,
    /// The JSON object of the request's non-secret fields.
    pub detail: String,
}

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

/// The bot columns of the model, then `created_at`, the unacknowledged
/// events, and the open gateway leases (0 where there are none).
fn bot_live_sql(conn: &Conn, filter: &str, now: &str) -> String {
    format!(
        "SELECT {}, created_at, last_seq - acked_seq, {} FROM bots WHERE {filter}",
        super::bots::BOT_COLUMNS,
        leases(conn, now)
    )
}

fn read_bot_live(conn: &Conn, r: &Row<'_>) -> StoreResult<BotLive> {
    let leased: i64 = r.get(11)?;
    Ok(BotLive {
        bot: super::bots::read_bot(r, 0)?,
        created_at: r.get(9)?,
        unacked: r.get(10)?,
        leased: conn.is_shared().then(|| u32::try_from(leased).unwrap_or(u32::MAX)),
    })
}

/// A page of bots, newest first, whose handle or name contains `query`.
pub fn list_bots(
    conn: &Conn,
    query: &str,
    after: Option<&Cursor>,
    limit: u32,
    now_ms: u64,
) -> StoreResult<Vec<BotLive>> {
    let sql = bot_live_sql(
        conn,
        &format!(
            "(?1 = '' OR lower(handle) LIKE ?1 ESCAPE '\\' OR lower(display_name) LIKE ?1 ESCAPE '\\') \
             AND {PAGE} AND ?5 >= 0 ORDER BY created_at DESC, id DESC LIMIT ?4"
        ),
        "?5",
    );
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(&sql)?
        .query_vec(params![contains_pattern(query), t, id, i64::from(limit), now_ms as i64], |r| read_bot_live(conn, r))
}

/// One bot as [`list_bots`] has it.
pub fn bot_live(conn: &Conn, bot_id: &str, now_ms: u64) -> StoreResult<Option<BotLive>> {
    use super::Optional;
    let sql = bot_live_sql(conn, "id = ?1 AND ?2 >= 0", "?2");
    conn.prepare_cached(&sql)?.query_row(params![bot_id, now_ms as i64], |r| read_bot_live(conn, r)).optional()
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

/// A page of users, newest first, whose handle or name contains `query`.
pub fn list_users(conn: &Conn, query: &str, after: Option<&Cursor>, limit: u32) -> StoreResult<Vec<UserRow>> {
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(
        "SELECT id, display_name, handle, created_at FROM users \
         WHERE (?1 = '' OR lower(coalesce(handle, '')) LIKE ?1 ESCAPE '\\' OR lower(display_name) LIKE ?1 ESCAPE '\\') \
         AND (created_at < ?2 OR (created_at = ?2 AND id < ?3)) ORDER BY created_at DESC, id DESC LIMIT ?4",
    )?
    .query_vec(params![contains_pattern(query), t, id, i64::from(limit)], |r| {
        Ok(UserRow { id: r.get(0)?, display_name: r.get(1)?, handle: r.get(2)?, created_at: r.get(3)? })
    })
}

/// A page of chats, newest first, whose title contains `query`. `member`
/// ('' for any) keeps the chats where that user or bot is a current
/// member.
pub fn list_chats(
    conn: &Conn,
    query: &str,
    member: &str,
    after: Option<&Cursor>,
    limit: u32,
) -> StoreResult<Vec<ChatRow>> {
    let (t, id) = Cursor::bounds(after);
    conn.prepare_cached(
        "SELECT id, type, title, user_id, bot_id, started, blocked_by_user, blocked_by_bot, bots_can_send, \
         dissolved, created_at, (SELECT count(*) FROM members m WHERE m.chat_id = chats.id AND m.active = 1) FROM chats \
         WHERE (?1 = '' OR lower(coalesce(title, '')) LIKE ?1 ESCAPE '\\') \
         AND (?5 = '' OR id IN (SELECT chat_id FROM members WHERE member_id = ?5 AND active = 1)) \
         AND (created_at < ?2 OR (created_at = ?2 AND id < ?3)) ORDER BY created_at DESC, id DESC LIMIT ?4",
    )?
    .query_vec(params![contains_pattern(query), t, id, i64::from(limit), member], |r| {
        Ok(ChatRow { chat: read_chat(r, 0)?, created_at: r.get(10)?, member_count: r.get(11)? })
    })
}

/// A chat's current members with their names, bots first.
pub fn chat_members(conn: &Conn, chat_id: &str) -> StoreResult<Vec<MemberRow>> {
    conn.prepare_cached(
        "SELECT m.member_id, m.is_bot, coalesce(u.display_name, b.display_name), coalesce(u.handle, b.handle) \
         FROM members m LEFT JOIN users u ON u.id = m.member_id LEFT JOIN bots b ON b.id = m.member_id \
         WHERE m.chat_id = ?1 AND m.active = 1 ORDER BY m.is_bot DESC, m.member_id",
    )?
    .query_vec([chat_id], |r| {
        Ok(MemberRow { id: r.get(0)?, is_bot: r.get(1)?, display_name: r.get(2)?, handle: r.get(3)? })
    })
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
/// newest). `target` ('' for any) keeps one bot's, chat's or user's
/// entries.
pub fn audit_log(conn: &Conn, before: Option<i64>, target: &str, limit: u32) -> StoreResult<Vec<AuditRow>> {
    conn.prepare_cached(
        "SELECT id, at_ms, method, target, actor, peer, detail FROM audit_log \
         WHERE id < ?1 AND (?2 = '' OR target = ?2) ORDER BY id DESC LIMIT ?3",
    )?
    .query_vec(params![before.unwrap_or(i64::MAX), target, i64::from(limit)], |r| {
        Ok(AuditRow {
            id: r.get(0)?,
            at_ms: r.get(1)?,
            method: r.get(2)?,
            target: r.get(3)?,
            actor: r.get(4)?,
            peer: r.get(5)?,
            detail: r.get(6)?,
        })
    })
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
