//! Event logs. Every change appends, inside the change's own transaction,
//! one row to the service-wide `updates` stream (the host's getUpdates) and
//! one row per concerned bot to `bot_events` (the gateway), numbered per bot
//! from `bots.last_seq` so the sequence has no gaps.

use crate::error::ApiResult;
use crate::model;
use crate::params;
use crate::store::{Conn, Dialect, Optional};

/// Event types delivered to bots (docs/gateway.md) plus `chat_action`,
/// which only the host stream carries.
pub const MESSAGE_CREATED: &str = crate::EventKind::MessageCreated.as_str();
pub const MESSAGE_EDITED: &str = crate::EventKind::MessageEdited.as_str();
pub const MESSAGE_DELETED: &str = crate::EventKind::MessageDeleted.as_str();
pub const BOT_STARTED: &str = crate::EventKind::BotStarted.as_str();
pub const BLOCKED: &str = crate::EventKind::Blocked.as_str();
pub const UNBLOCKED: &str = crate::EventKind::Unblocked.as_str();
pub const MEMBER_ADDED: &str = crate::EventKind::MemberAdded.as_str();
pub const MEMBER_REMOVED: &str = crate::EventKind::MemberRemoved.as_str();
pub const CHAT_PERMISSIONS_CHANGED: &str = crate::EventKind::ChatPermissionsChanged.as_str();
pub const CHAT_DISSOLVED: &str = crate::EventKind::ChatDissolved.as_str();
pub const CHAT_ACTION: &str = crate::EventKind::ChatAction.as_str();

/// Every type above as an SQL list, for checking imported logs.
pub const KNOWN_TYPES_SQL: &str = "'message_created', 'message_edited', 'message_deleted', 'bot_started', \
    'blocked', 'unblocked', 'member_added', 'member_removed', 'chat_permissions_changed', 'chat_dissolved', \
    'chat_action'";

/// One change in a chat, as it enters the logs.
pub struct Event<'a> {
    pub chat_id: &'a str,
    pub kind: &'a str,
    /// The JSON payload.
    pub data: &'a [u8],
    /// A bot not to tell (the sender of its own message).
    pub exclude: Option<&'a str>,
    /// A bot to tell although it is no longer a member (it was just removed).
    pub extra: Option<&'a str>,
    /// The message the payload carries, if any, so its text can be scrubbed.
    pub message: Option<i64>,
}

impl<'a> Event<'a> {
    pub fn new(chat_id: &'a str, kind: &'a str, data: &'a [u8]) -> Self {
        Event { chat_id, kind, data, exclude: None, extra: None, message: None }
    }
}

/// Appends an event to the host stream and to every current bot member of
/// the chat, minus `exclude`, plus `extra`. Bots that got an event are
/// pushed to `woken`; host-stream rows may wait in `pending`. `members` is
/// the chat's current bots when the caller already read them. Returns the
/// host-stream update's id when the message row must keep it (see
/// `insert_update`).
pub fn emit(
    conn: &Conn,
    now_ms: u64,
    ev: Event<'_>,
    members: Option<&[String]>,
    woken: &mut Vec<String>,
    pending: &mut PendingUpdates,
) -> ApiResult<Option<i64>> {
    let Event { chat_id, kind, data, exclude, extra, message } = ev;
    let data = std::str::from_utf8(data).unwrap_or("{}");
    let msg_ref = message.map(|m| (chat_id, m));
    let mut bots = Vec::new();
    match members {
        Some(m) => bots.extend_from_slice(m),
        None => model::bot_members(conn, chat_id, &mut bots)?,
    }
    let update = append_update(conn, now_ms, kind, data, msg_ref, pending)?;
    if let Some(e) = extra {
        if !bots.iter().any(|b| b == e) {
            bots.push(e.to_string());
        }
    }
    bots.retain(|b| Some(b.as_str()) != exclude);
    match conn.dialect() {
        Dialect::Sqlite => {
            for bot in &bots {
                append_bot_event(conn, now_ms, bot, kind, data, msg_ref)?;
            }
        }
        // Every bot's event and seq in one statement: one round trip.
        Dialect::Postgres if !bots.is_empty() => {
            let n = conn
                .prepare_cached(
                    "WITH s AS (UPDATE bots SET last_seq = last_seq + 1 WHERE id = ANY(string_to_array(?1, ',')) \
                     RETURNING id, last_seq) \
                     INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, ref_message) \
                     SELECT id, last_seq, ?2, ?3, ?4, ?5, ?6 FROM s",
                )?
                .execute(params![
                    bots.join(","),
                    now_ms as i64,
                    kind,
                    data,
                    msg_ref.map(|m| m.0),
                    msg_ref.map(|m| m.1)
                ])?;
            if n != bots.len() {
                return Err(crate::error::ApiError::internal("a chat member bot is missing"));
            }
        }
        Dialect::Postgres => {}
    }
    woken.append(&mut bots);
    Ok(update)
}

/// Host-stream rows of the open transaction not yet written (a database
/// server only): written in one statement at commit, or before anything
/// in the transaction reads or changes `updates` ([`flush_updates`]).
/// Update ids follow commit order, so the row that hands them out stays
/// locked from the moment it is taken until COMMIT: taken last, it is held
/// for one statement and the commit instead of the whole group.
#[derive(Default)]
pub struct PendingUpdates {
    /// A JSON array of the rows, without its closing bracket.
    json: Vec<u8>,
    n: usize,
}

#[derive(serde::Serialize)]
struct PendingRow<'a> {
    i: usize,
    at: u64,
    kind: &'a str,
    data: &'a str,
    chat: Option<&'a str>,
    message: Option<i64>,
}

impl PendingUpdates {
    pub fn len(&self) -> usize {
        self.n
    }

    /// The row count and the closed JSON array; leaves `self` empty.
    fn take(&mut self) -> (usize, String) {
        self.json.push(b']');
        let json = String::from_utf8(std::mem::take(&mut self.json)).unwrap_or_default();
        (std::mem::replace(&mut self.n, 0), json)
    }

    fn push(&mut self, row: &PendingRow<'_>) -> ApiResult<()> {
        self.json.push(if self.n == 0 { b'[' } else { b',' });
        serde_json::to_writer(&mut self.json, row).map_err(|e| crate::error::ApiError::internal(e.to_string()))?;
        self.n += 1;
        Ok(())
    }
}

/// The pending rows with consecutive update ids from the `meta` row. A
/// missing counter makes every id NULL and the statement fail.
const FLUSH_UPDATES: &str =
    "WITH n AS (UPDATE meta SET value = value + ?1 WHERE key = 'last_update_id' RETURNING value) \
     INSERT INTO updates (update_id, created_at_ms, type, data, ref_chat, ref_message) \
     SELECT (SELECT value FROM n) - ?1 + t.i, t.at, t.kind, t.data, t.chat, t.message \
     FROM json_to_recordset(?2::text::json) AS t(i bigint, at bigint, kind text, data text, chat text, message bigint)";

/// Writes the pending host-stream rows now (something in the transaction
/// is about to read or change `updates`).
pub fn flush_updates(conn: &Conn, pending: &mut PendingUpdates) -> ApiResult<()> {
    if pending.n == 0 {
        return Ok(());
    }
    let (n, json) = pending.take();
    conn.prepare_cached(FLUSH_UPDATES)?.execute(params![n as i64, json])?;
    Ok(())
}

/// Commits the open transaction (with `notify`, see
/// [`Conn::commit_notifying`]), the pending host-stream rows written in the
/// same round trip as the COMMIT.
pub fn commit_with_updates(conn: &Conn, pending: &mut PendingUpdates, notify: Option<&str>) -> ApiResult<()> {
    if pending.n == 0 {
        return Ok(conn.commit_notifying(notify)?);
    }
    let (n, json) = pending.take();
    conn.execute_then_commit(FLUSH_UPDATES, params![n as i64, json], notify)?;
    Ok(())
}

/// Appends to the service-wide stream: at once on SQLite, at commit on a
/// database server. The id as `insert_update` says.
pub fn append_update(
    conn: &Conn,
    now_ms: u64,
    kind: &str,
    data: &str,
    msg: Option<(&str, i64)>,
    pending: &mut PendingUpdates,
) -> ApiResult<Option<i64>> {
    match conn.dialect() {
        Dialect::Sqlite => insert_update(conn, now_ms, kind, data, msg),
        Dialect::Postgres => pending
            .push(&PendingRow {
                i: pending.n + 1,
                at: now_ms,
                kind,
                data,
                chat: msg.map(|m| m.0),
                message: msg.map(|m| m.1),
            })
            .map(|()| None),
    }
}

/// On SQLite a `message_created` update is written without its message
/// reference and its id is returned, for the message row to keep
/// (`messages.created_update`): the reference's index is keyed by chat, and
/// an entry per sent message would dirty one more page of each chat's own.
fn insert_update(conn: &Conn, now_ms: u64, kind: &str, data: &str, msg: Option<(&str, i64)>) -> ApiResult<Option<i64>> {
    if kind == MESSAGE_CREATED && msg.is_some() {
        let id = conn
            .prepare_cached(
                "INSERT INTO updates (created_at_ms, type, data, ref_chat, ref_message) VALUES (?1, ?2, ?3, NULL, NULL) RETURNING update_id",
            )?
            .query_row(params![now_ms as i64, kind, data], |r| r.get(0))?;
        return Ok(Some(id));
    }
    conn.prepare_cached(
        "INSERT INTO updates (created_at_ms, type, data, ref_chat, ref_message) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![now_ms as i64, kind, data, msg.map(|m| m.0), msg.map(|m| m.1)])?;
    Ok(None)
}

/// Removes a deleted message's text from every stored event that carried
/// it, so deleted text is served nowhere, not even in a replay.
pub fn scrub_message_text(conn: &Conn, chat_id: &str, message_id: i64, pending: &mut PendingUpdates) -> ApiResult<()> {
    // The message's own update may still be waiting for the commit.
    flush_updates(conn, pending)?;
    let (updates, bot_events) = match conn.dialect() {
        Dialect::Sqlite => {
            // The message's own update (see insert_update).
            conn.prepare_cached(
                "UPDATE updates SET data = json_remove(data, '$.message.text') \
                 WHERE update_id = (SELECT created_update FROM messages WHERE chat_id = ?1 AND message_id = ?2)",
            )?
            .execute(params![chat_id, message_id])?;
            (
                "UPDATE updates SET data = json_remove(data, '$.message.text') WHERE ref_chat = ?1 AND ref_message = ?2",
                "UPDATE bot_events SET data = json_remove(data, '$.message.text') WHERE ref_chat = ?1 AND ref_message = ?2",
            )
        }
        // jsonb keeps the JSON's meaning, not its key order or spacing.
        Dialect::Postgres => (
            "UPDATE updates SET data = (data::jsonb #- '{message,text}')::text WHERE ref_chat = ?1 AND ref_message = ?2",
            "UPDATE bot_events SET data = (data::jsonb #- '{message,text}')::text WHERE ref_chat = ?1 AND ref_message = ?2",
        ),
    };
    conn.prepare_cached(updates)?.execute(params![chat_id, message_id])?;
    conn.prepare_cached(bot_events)?.execute(params![chat_id, message_id])?;
    Ok(())
}

/// Appends one event to a bot's log with the next sequence number.
pub fn append_bot_event(
    conn: &Conn,
    now_ms: u64,
    bot_id: &str,
    kind: &str,
    data: &str,
    msg: Option<(&str, i64)>,
) -> ApiResult<i64> {
    let (chat, message) = (msg.map(|m| m.0), msg.map(|m| m.1));
    if conn.dialect() == Dialect::Postgres {
        // Both writes in one round trip.
        return Ok(conn
            .prepare_cached(
                "WITH s AS (UPDATE bots SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq) \
                 INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, ref_message) \
                 SELECT ?1, last_seq, ?2, ?3, ?4, ?5, ?6 FROM s RETURNING seq",
            )?
            .query_row(params![bot_id, now_ms as i64, kind, data, chat, message], |r| r.get(0))?);
    }
    let seq: i64 = conn
        .prepare_cached("UPDATE bots SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq")?
        .query_row([bot_id], |r| r.get(0))?;
    conn.prepare_cached(
        "INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, ref_message) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![bot_id, seq, now_ms as i64, kind, data, chat, message])?;
    Ok(seq)
}

/// Drops what retention allows: bot events acknowledged and older than
/// `retention_ms`, host updates confirmed by getUpdates and as old, and
/// idempotency keys older than `idempotency_ttl_ms`.
///
/// It runs inside a normal commit, under the service lock, so its cost must
/// not grow with what it keeps. Events and updates are numbered in the
/// order they were written, so each log is walked from its oldest row and
/// the walk stops at the first row still inside retention: the work is what
/// it deletes, plus one look at each bot whose oldest kept acknowledged
/// event (`bots.kept_since_ms`) has aged out since, and a scan of `bots`.
/// A clock stepping back can leave an older row behind a younger one; it is
/// kept until the younger one ages out, which retention ("at least")
/// allows.
pub fn prune(conn: &Conn, now_ms: u64, p: &Prune) -> ApiResult<()> {
    let cutoff = now_ms.saturating_sub(p.retention_ms) as i64;
    cap_backlogs(conn, p)?;
    // Bots with acknowledged events past their prune mark whose oldest kept
    // one may have aged out since the last look.
    let due: Vec<(String, i64, i64)> = conn
        .prepare_cached(
            "SELECT id, pruned_seq, acked_seq FROM bots WHERE acked_seq > pruned_seq AND kept_since_ms < ?1",
        )?
        .query_vec([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let mut first_young = conn.prepare_cached(
        "SELECT seq, created_at_ms FROM bot_events \
         WHERE bot_id = ?1 AND seq > ?2 AND seq <= ?3 AND created_at_ms >= ?4 ORDER BY seq LIMIT 1",
    )?;
    let mut delete = conn.prepare_cached("DELETE FROM bot_events WHERE bot_id = ?1 AND seq > ?2 AND seq <= ?3")?;
    let mut mark = conn.prepare_cached("UPDATE bots SET pruned_seq = ?2, kept_since_ms = ?3 WHERE id = ?1")?;
    for (bot, pruned, acked) in due {
        let young = first_young
            .query_row(params![bot, pruned, acked, cutoff], |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)))
            .optional()?;
        let (upto, kept_since) = young.map_or((acked, 0), |(seq, at)| (seq - 1, at));
        if upto > pruned {
            delete.execute(params![bot, pruned, upto])?;
        }
        mark.execute(params![bot, upto, kept_since])?;
    }
    // update_id below `updates_confirmed` has been confirmed.
    let confirmed: i64 =
        conn.prepare_cached("SELECT value FROM meta WHERE key = 'updates_confirmed'")?.query_row((), |r| r.get(0))?;
    let upto = conn
        .prepare_cached(
            "SELECT update_id FROM updates WHERE update_id < ?1 AND created_at_ms >= ?2 ORDER BY update_id LIMIT 1",
        )?
        .query_row([confirmed, cutoff], |r| r.get::<i64>(0))
        .optional()?
        .unwrap_or(confirmed);
    conn.prepare_cached("DELETE FROM updates WHERE update_id < ?1")?.execute([upto])?;
    conn.prepare_cached("DELETE FROM idempotency WHERE created_at_ms < ?1")?
        .execute([now_ms.saturating_sub(p.idempotency_ttl_ms) as i64])?;
    if conn.dialect() == Dialect::Postgres {
        // A bucket whose arrival time has passed is full: the same as none.
        // Expired leases of dead nodes go too.
        conn.prepare_cached("DELETE FROM rate_buckets WHERE tat < ?1")?.execute([(now_ms * 1000) as i64])?;
        conn.prepare_cached("DELETE FROM gateway_leases WHERE expires_at_ms < ?1")?.execute([now_ms as i64])?;
    }
    Ok(())
}

/// What pruning keeps.
pub struct Prune {
    pub retention_ms: u64,
    pub idempotency_ttl_ms: u64,
    pub max_unacked_events: u64,
    pub max_unconfirmed_updates: u64,
}

/// The type of the update getUpdates puts first when unconfirmed updates
/// were dropped by the cap: `data.dropped_through` is the last dropped id.
pub const UPDATES_DROPPED: &str = crate::EventKind::UpdatesDropped.as_str();

/// Drops the oldest events of a bot more than `max_unacked_events` behind,
/// and the oldest host updates past `max_unconfirmed_updates`, acknowledged
/// or not. A bot's gap shows as `replay_truncated` (its ack cursor stays
/// where it was, below the oldest kept event); the host's as
/// `meta.updates_dropped_through`.
fn cap_backlogs(conn: &Conn, p: &Prune) -> ApiResult<()> {
    let cap = p.max_unacked_events.min(i64::MAX as u64) as i64;
    let over: Vec<(String, i64)> = conn
        .prepare_cached("SELECT id, last_seq - ?1 FROM bots WHERE last_seq - CASE WHEN acked_seq > pruned_seq THEN acked_seq ELSE pruned_seq END > ?1")?
        .query_vec([cap], |r| Ok((r.get(0)?, r.get(1)?)))?;
    for (bot, upto) in over {
        conn.prepare_cached("DELETE FROM bot_events WHERE bot_id = ?1 AND seq > (SELECT pruned_seq FROM bots WHERE id = ?1) AND seq <= ?2")?
            .execute(params![bot, upto])?;
        conn.prepare_cached("UPDATE bots SET pruned_seq = ?2 WHERE id = ?1")?.execute(params![bot, upto])?;
    }
    let cap = p.max_unconfirmed_updates.min(i64::MAX as u64) as i64;
    let newest: Option<i64> = conn.prepare_cached("SELECT max(update_id) FROM updates")?.query_row((), |r| r.get(0))?;
    let Some(newest) = newest else { return Ok(()) };
    let upto = newest - cap;
    let confirmed: i64 =
        conn.prepare_cached("SELECT value FROM meta WHERE key = 'updates_confirmed'")?.query_row((), |r| r.get(0))?;
    // Only an unconfirmed update is a loss to report; confirmed ones go by
    // retention anyway.
    if upto >= confirmed {
        conn.prepare_cached("DELETE FROM updates WHERE update_id <= ?1")?.execute([upto])?;
        conn.prepare_cached(
            "INSERT INTO meta (key, value) VALUES ('updates_dropped_through', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = CASE WHEN meta.value > excluded.value THEN meta.value ELSE excluded.value END",
        )?
        .execute([upto])?;
    }
    Ok(())
}
