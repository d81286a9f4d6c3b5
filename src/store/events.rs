//! The two event logs as stored: the service-wide `updates` stream (the
//! host's getUpdates) and each bot's `bot_events` log (the gateway),
//! numbered per bot from `bots.last_seq`; the getUpdates cursor; text
//! scrubbing; and pruning.
//!
//! The stores append differently, each for its cost model: SQLite writes
//! each row at once (no round trips to save), PostgreSQL writes a bot's
//! events in one statement per event and the host stream in one statement
//! at COMMIT ([`PendingUpdates`]).

use super::{Conn, Dialect, Optional, StoreError, StoreResult};
use crate::params;

/// Every event type as an SQL list, for checking imported logs.
pub const KNOWN_TYPES_SQL: &str = "'message_created', 'message_edited', 'message_deleted', 'bot_started', \
    'blocked', 'unblocked', 'member_added', 'member_removed', 'chat_permissions_changed', 'chat_dissolved', \
    'chat_action', 'callback_query', 'callback_answered', 'callback_expired'";

/// PostgreSQL: every bot's event with its next seq, in one statement (one
/// round trip). `?1` is the bots' ids, comma-joined.
const APPEND_TO_BOTS_POSTGRES: &str = "WITH s AS (UPDATE bots SET last_seq = last_seq + 1 \
     WHERE id = ANY(string_to_array(?1, ',')) RETURNING id, last_seq) \
     INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, ref_message) \
     SELECT id, last_seq, ?2, ?3, ?4, ?5, ?6 FROM s";

/// PostgreSQL: one bot's event and seq in one statement.
const APPEND_TO_BOT_POSTGRES: &str = "WITH s AS (UPDATE bots SET last_seq = last_seq + 1 WHERE id = ?1 \
     RETURNING last_seq) \
     INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, ref_message) \
     SELECT ?1, last_seq, ?2, ?3, ?4, ?5, ?6 FROM s RETURNING seq";

const NEXT_SEQ: &str = "UPDATE bots SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq";

const INSERT_BOT_EVENT: &str = "INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data, ref_chat, \
     ref_message) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// PostgreSQL: the transaction's host-stream rows, unnumbered, in the order
/// they were written (`seq`). No row is locked: see [`NUMBER_UPDATES`].
/// `messages::INSERT_AT_AND_PENDING` writes them the same way, with
/// messages.
const WRITE_PENDING: &str = "INSERT INTO updates_pending (created_at_ms, type, data, ref_chat, ref_message) \
     SELECT t.at, t.kind, t.data, t.chat, t.message \
     FROM json_to_recordset(?1::text::json) AS t(i bigint, at bigint, kind text, data text, chat text, message bigint) \
     ORDER BY t.i";

/// PostgreSQL: every committed unnumbered row moves to `updates` with the
/// next ids, in `seq` order, in one statement run before anything reads
/// `updates`. Ids follow the order rows were numbered in, and a row is
/// numbered only once committed: a reader never sees a higher id before a
/// lower one that commits later. Numberers queue on the `meta` row; the
/// one that waited adds to the value the other left (the UPDATE reads the
/// newest row version) and skips the rows the other moved (its DELETE
/// waits for them and finds them gone). A missing counter makes every id
/// NULL and the statement fail.
const NUMBER_UPDATES: &str = "WITH moved AS (DELETE FROM updates_pending \
     RETURNING seq, created_at_ms, type, data, ref_chat, ref_message), \
     n AS (UPDATE meta SET value = value + (SELECT count(*) FROM moved) WHERE key = 'last_update_id' RETURNING value) \
     INSERT INTO updates (update_id, created_at_ms, type, data, ref_chat, ref_message) \
     SELECT (SELECT value FROM n) - (SELECT count(*) FROM moved) + row_number() OVER (ORDER BY seq), \
     created_at_ms, type, data, ref_chat, ref_message FROM moved";

/// SQLite: a `message_created` update without its message reference (see
/// [`append_update`]).
const INSERT_UPDATE_UNREFERENCED: &str = "INSERT INTO updates (created_at_ms, type, data, ref_chat, ref_message) \
     VALUES (?1, ?2, ?3, NULL, NULL) RETURNING update_id";

const INSERT_UPDATE: &str =
    "INSERT INTO updates (created_at_ms, type, data, ref_chat, ref_message) VALUES (?1, ?2, ?3, ?4, ?5)";

/// SQLite: the message's own update, found through `messages.created_update`.
const SCRUB_CREATED_UPDATE_SQLITE: &str =
    "UPDATE updates SET data = json_remove(data, '$.message.text', '$.message.command', '$.message.reply_markup') \
     WHERE update_id = (SELECT created_update FROM messages WHERE chat_id = ?1 AND message_id = ?2)";
const SCRUB_UPDATES_SQLITE: &str =
    "UPDATE updates SET data = json_remove(data, '$.message.text', '$.message.command', '$.message.reply_markup') WHERE ref_chat = ?1 AND ref_message = ?2";
const SCRUB_BOT_EVENTS_SQLITE: &str =
    "UPDATE bot_events SET data = json_remove(data, '$.message.text', '$.message.command', '$.message.reply_markup') WHERE ref_chat = ?1 AND ref_message = ?2";
/// jsonb keeps the JSON's meaning, not its key order or spacing.
const SCRUB_PENDING_POSTGRES: &str = "UPDATE updates_pending SET data = (data::jsonb #- '{message,text}' #- '{message,command}' #- '{message,reply_markup}')::text \
     WHERE ref_chat = ?1 AND ref_message = ?2";
const SCRUB_UPDATES_POSTGRES: &str = "UPDATE updates SET data = (data::jsonb #- '{message,text}' #- '{message,command}' #- '{message,reply_markup}')::text \
     WHERE ref_chat = ?1 AND ref_message = ?2";
const SCRUB_BOT_EVENTS_POSTGRES: &str = "UPDATE bot_events SET data = (data::jsonb #- '{message,text}' #- '{message,command}' #- '{message,reply_markup}')::text \
     WHERE ref_chat = ?1 AND ref_message = ?2";

const UPDATES_CONFIRMED: &str = "SELECT value FROM meta WHERE key = 'updates_confirmed'";
const SET_UPDATES_CONFIRMED: &str = "UPDATE meta SET value = ?1 WHERE key = 'updates_confirmed'";
const UPDATES_DROPPED_THROUGH: &str = "SELECT value FROM meta WHERE key = 'updates_dropped_through'";
const UPDATES_FROM: &str =
    "SELECT update_id, type, data FROM updates WHERE update_id >= ?1 ORDER BY update_id LIMIT ?2";

const PRUNE_DUE_BOTS: &str =
    "SELECT id, pruned_seq, acked_seq FROM bots WHERE acked_seq > pruned_seq AND kept_since_ms < ?1";
const FIRST_YOUNG_EVENT: &str = "SELECT seq, created_at_ms FROM bot_events \
     WHERE bot_id = ?1 AND seq > ?2 AND seq <= ?3 AND created_at_ms >= ?4 ORDER BY seq LIMIT 1";
const DELETE_BOT_EVENTS: &str = "DELETE FROM bot_events WHERE bot_id = ?1 AND seq > ?2 AND seq <= ?3";
const MARK_PRUNED: &str = "UPDATE bots SET pruned_seq = ?2, kept_since_ms = ?3 WHERE id = ?1";
const FIRST_YOUNG_UPDATE: &str =
    "SELECT update_id FROM updates WHERE update_id < ?1 AND created_at_ms >= ?2 ORDER BY update_id LIMIT 1";
const DELETE_UPDATES_BELOW: &str = "DELETE FROM updates WHERE update_id < ?1";
const DELETE_OLD_IDEMPOTENCY: &str = "DELETE FROM idempotency WHERE created_at_ms < ?1";
/// A bucket whose arrival time has passed is full: the same as none.
const DELETE_FULL_BUCKETS: &str = "DELETE FROM rate_buckets WHERE tat < ?1";
/// Expired leases of dead nodes.
const DELETE_EXPIRED_LEASES: &str = "DELETE FROM gateway_leases WHERE expires_at_ms < ?1";

const BOTS_OVER_CAP: &str = "SELECT id, last_seq - ?1 FROM bots \
     WHERE last_seq - CASE WHEN acked_seq > pruned_seq THEN acked_seq ELSE pruned_seq END > ?1";
const DROP_UNACKED: &str =
    "DELETE FROM bot_events WHERE bot_id = ?1 AND seq > (SELECT pruned_seq FROM bots WHERE id = ?1) AND seq <= ?2";
const SET_PRUNED_SEQ: &str = "UPDATE bots SET pruned_seq = ?2 WHERE id = ?1";
const NEWEST_UPDATE: &str = "SELECT max(update_id) FROM updates";
const DELETE_UPDATES_THROUGH: &str = "DELETE FROM updates WHERE update_id <= ?1";
const NOTE_UPDATES_DROPPED: &str = "INSERT INTO meta (key, value) VALUES ('updates_dropped_through', ?1) \
     ON CONFLICT (key) DO UPDATE SET value = CASE WHEN meta.value > excluded.value THEN meta.value \
     ELSE excluded.value END";

/// One event as it enters a log.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    pub at_ms: u64,
    pub kind: &'a str,
    /// The JSON payload.
    pub data: &'a str,
    /// The message the payload carries, if any, so its text can be scrubbed.
    pub message: Option<(&'a str, i64)>,
}

/// Appends `e` to the log of every bot in `bots`, each with its next seq.
pub fn append_to_bots(conn: &Conn, bots: &[String], e: Entry<'_>) -> StoreResult<()> {
    match conn.dialect() {
        Dialect::Sqlite => {
            for bot in bots {
                append_to_bot(conn, bot, e)?;
            }
        }
        Dialect::Postgres if !bots.is_empty() => {
            let (chat, message) = (e.message.map(|m| m.0), e.message.map(|m| m.1));
            // Written with the transaction's next call; a missing bot fails
            // the transaction before it can commit.
            conn.prepare_cached(APPEND_TO_BOTS_POSTGRES)?.defer(
                params![bots.join(","), e.at_ms as i64, e.kind, e.data, chat, message],
                super::Deferral::changing(bots.len(), "a chat member bot is missing"),
            )?;
        }
        Dialect::Postgres => {}
    }
    Ok(())
}

/// Appends one event to a bot's log with the next sequence number.
pub fn append_to_bot(conn: &Conn, bot_id: &str, e: Entry<'_>) -> StoreResult<i64> {
    let (chat, message) = (e.message.map(|m| m.0), e.message.map(|m| m.1));
    if conn.dialect() == Dialect::Postgres {
        // Both writes in one round trip.
        return conn
            .prepare_cached(APPEND_TO_BOT_POSTGRES)?
            .query_row(params![bot_id, e.at_ms as i64, e.kind, e.data, chat, message], |r| r.get(0));
    }
    let seq: i64 = conn.prepare_cached(NEXT_SEQ)?.query_row([bot_id], |r| r.get(0))?;
    conn.prepare_cached(INSERT_BOT_EVENT)?.execute(params![
        bot_id,
        seq,
        e.at_ms as i64,
        e.kind,
        e.data,
        chat,
        message
    ])?;
    Ok(seq)
}

/// Host-stream rows of the open transaction not yet written (a database
/// server only): written unnumbered in one statement with the COMMIT, or
/// before anything in the transaction reads or changes `updates`
/// ([`flush_updates`]). They get their ids when read ([`NUMBER_UPDATES`]),
/// so a commit holds no row that every other commit needs.
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

    fn push(&mut self, row: &PendingRow<'_>) -> StoreResult<()> {
        self.json.push(if self.n == 0 { b'[' } else { b',' });
        serde_json::to_writer(&mut self.json, row)
            .map_err(|_| StoreError::Inconsistent("a pending update could not be serialized"))?;
        self.n += 1;
        Ok(())
    }
}

/// Before something in the transaction reads or changes `updates`: on a
/// database server, writes the transaction's pending host-stream rows and
/// numbers every committed one (one round trip; see [`NUMBER_UPDATES`]).
/// The numbering holds the `meta` row until the transaction ends, as long
/// as a reader's transaction lasts. Nothing on SQLite, which writes and
/// numbers each row at once.
pub fn flush_updates(conn: &Conn, pending: &mut PendingUpdates) -> StoreResult<()> {
    if conn.dialect() == Dialect::Sqlite {
        return Ok(());
    }
    write_pending(conn, pending)?;
    conn.prepare_cached(NUMBER_UPDATES)?.execute(())?;
    Ok(())
}

/// Writes the transaction's pending host-stream rows, unnumbered, with its
/// next round trip.
fn write_pending(conn: &Conn, pending: &mut PendingUpdates) -> StoreResult<()> {
    if pending.n > 0 {
        let (_, json) = pending.take();
        // New rows, in a table nobody locks.
        conn.prepare_cached(WRITE_PENDING)?
            .defer(params![json], super::Deferral::on_held_rows("host-stream rows were not written"))?;
    }
    Ok(())
}

/// Commits the open transaction (with `notify`, see
/// [`Conn::commit_notifying`]), the pending host-stream rows written in the
/// same round trip as the COMMIT: in one statement with the messages
/// queued last, if any (`messages::INSERT_AT_AND_PENDING`).
pub fn commit_with_updates(conn: &Conn, pending: &mut PendingUpdates, notify: Option<&str>) -> StoreResult<()> {
    if pending.n == 0 {
        return conn.commit_notifying(notify);
    }
    let (_, json) = pending.take();
    // The messages queued last go out in the same statement.
    match super::messages::take_queued(conn) {
        Some(rows) => conn.execute_then_commit(super::messages::INSERT_AT_AND_PENDING, params![rows, json], notify)?,
        None => conn.execute_then_commit(WRITE_PENDING, params![json], notify)?,
    };
    Ok(())
}

/// Appends to the service-wide stream: at once on SQLite, at commit on a
/// database server.
///
/// On SQLite a `message_created` update (`kind` is `created_kind`) is
/// written without its message reference and its id is returned, for the
/// message row to keep (`messages.created_update`): the reference's index
/// is keyed by chat, and an entry per sent message would dirty one more
/// page of each chat's own. Otherwise `None`.
pub fn append_update(
    conn: &Conn,
    e: Entry<'_>,
    created_kind: bool,
    pending: &mut PendingUpdates,
) -> StoreResult<Option<i64>> {
    let (chat, message) = (e.message.map(|m| m.0), e.message.map(|m| m.1));
    match conn.dialect() {
        Dialect::Sqlite if created_kind && e.message.is_some() => Ok(Some(
            conn.prepare_cached(INSERT_UPDATE_UNREFERENCED)?
                .query_row(params![e.at_ms as i64, e.kind, e.data], |r| r.get(0))?,
        )),
        Dialect::Sqlite => {
            conn.prepare_cached(INSERT_UPDATE)?.execute(params![e.at_ms as i64, e.kind, e.data, chat, message])?;
            Ok(None)
        }
        Dialect::Postgres => pending
            .push(&PendingRow { i: pending.n + 1, at: e.at_ms, kind: e.kind, data: e.data, chat, message })
            .map(|()| None),
    }
}

/// Removes a deleted message's text from every stored event that carried
/// it, so deleted text is served nowhere, not even in a replay.
pub fn scrub_message_text(
    conn: &Conn,
    chat_id: &str,
    message_id: i64,
    pending: &mut PendingUpdates,
) -> StoreResult<()> {
    // The message's own update may still be waiting for the commit.
    write_pending(conn, pending)?;
    let (updates, bot_events) = match conn.dialect() {
        Dialect::Sqlite => {
            conn.prepare_cached(SCRUB_CREATED_UPDATE_SQLITE)?.execute(params![chat_id, message_id])?;
            (SCRUB_UPDATES_SQLITE, SCRUB_BOT_EVENTS_SQLITE)
        }
        Dialect::Postgres => {
            conn.prepare_cached(SCRUB_PENDING_POSTGRES)?.execute(params![chat_id, message_id])?;
            (SCRUB_UPDATES_POSTGRES, SCRUB_BOT_EVENTS_POSTGRES)
        }
    };
    conn.prepare_cached(updates)?.execute(params![chat_id, message_id])?;
    conn.prepare_cached(bot_events)?.execute(params![chat_id, message_id])?;
    Ok(())
}

/// getUpdates' cursor: update ids below it have been confirmed.
pub fn updates_confirmed(conn: &Conn) -> StoreResult<i64> {
    conn.prepare_cached(UPDATES_CONFIRMED)?.query_row((), |r| r.get(0))
}

pub fn set_updates_confirmed(conn: &Conn, upto: i64) -> StoreResult<()> {
    conn.prepare_cached(SET_UPDATES_CONFIRMED)?.execute([upto])?;
    Ok(())
}

/// The last unconfirmed update the backlog cap dropped, if any ever was.
pub fn updates_dropped_through(conn: &Conn) -> StoreResult<Option<i64>> {
    conn.prepare_cached(UPDATES_DROPPED_THROUGH)?.query_row((), |r| r.get(0)).optional()
}

/// Streams up to `limit` updates from `from` on through `f` as (id, type,
/// JSON data), borrowed from the row.
pub fn each_update_from(conn: &Conn, from: i64, limit: i64, mut f: impl FnMut(i64, &str, &str)) -> StoreResult<()> {
    conn.prepare_cached(UPDATES_FROM)?.query_each(params![from, limit], |r| {
        f(r.get(0)?, r.get_str(1)?, r.get_str(2)?);
        Ok(true)
    })
}

/// What pruning keeps.
pub struct Prune {
    pub retention_ms: u64,
    pub idempotency_ttl_ms: u64,
    pub max_unacked_events: u64,
    pub max_unconfirmed_updates: u64,
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
pub fn prune(conn: &Conn, now_ms: u64, p: &Prune) -> StoreResult<()> {
    let cutoff = now_ms.saturating_sub(p.retention_ms) as i64;
    // Rows nobody has read are numbered, so the cap counts them too (this
    // transaction's own still wait in memory for its COMMIT).
    flush_updates(conn, &mut PendingUpdates::default())?;
    cap_backlogs(conn, p)?;
    // Bots with acknowledged events past their prune mark whose oldest kept
    // one may have aged out since the last look.
    let due: Vec<(String, i64, i64)> =
        conn.prepare_cached(PRUNE_DUE_BOTS)?.query_vec([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let mut first_young = conn.prepare_cached(FIRST_YOUNG_EVENT)?;
    let mut delete = conn.prepare_cached(DELETE_BOT_EVENTS)?;
    let mut mark = conn.prepare_cached(MARK_PRUNED)?;
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
    let confirmed = updates_confirmed(conn)?;
    let upto = conn
        .prepare_cached(FIRST_YOUNG_UPDATE)?
        .query_row([confirmed, cutoff], |r| r.get::<i64>(0))
        .optional()?
        .unwrap_or(confirmed);
    conn.prepare_cached(DELETE_UPDATES_BELOW)?.execute([upto])?;
    conn.prepare_cached(DELETE_OLD_IDEMPOTENCY)?.execute([now_ms.saturating_sub(p.idempotency_ttl_ms) as i64])?;
    super::buttons::prune_queries(conn, cutoff)?;
    if conn.dialect() == Dialect::Postgres {
        // Rate buckets and leases live in the database only on a shared store.
        conn.prepare_cached(DELETE_FULL_BUCKETS)?.execute([(now_ms * 1000) as i64])?;
        conn.prepare_cached(DELETE_EXPIRED_LEASES)?.execute([now_ms as i64])?;
    }
    Ok(())
}

/// Drops the oldest events of a bot more than `max_unacked_events` behind,
/// and the oldest host updates past `max_unconfirmed_updates`, acknowledged
/// or not. A bot's gap shows as `replay_truncated` (its ack cursor stays
/// where it was, below the oldest kept event); the host's as
/// `meta.updates_dropped_through`.
fn cap_backlogs(conn: &Conn, p: &Prune) -> StoreResult<()> {
    let cap = p.max_unacked_events.min(i64::MAX as u64) as i64;
    let over: Vec<(String, i64)> =
        conn.prepare_cached(BOTS_OVER_CAP)?.query_vec([cap], |r| Ok((r.get(0)?, r.get(1)?)))?;
    for (bot, upto) in over {
        conn.prepare_cached(DROP_UNACKED)?.execute(params![bot, upto])?;
        conn.prepare_cached(SET_PRUNED_SEQ)?.execute(params![bot, upto])?;
    }
    let cap = p.max_unconfirmed_updates.min(i64::MAX as u64) as i64;
    let newest: Option<i64> = conn.prepare_cached(NEWEST_UPDATE)?.query_row((), |r| r.get(0))?;
    let Some(newest) = newest else { return Ok(()) };
    let upto = newest - cap;
    let confirmed = updates_confirmed(conn)?;
    // Only an unconfirmed update is a loss to report; confirmed ones go by
    // retention anyway.
    if upto >= confirmed {
        conn.prepare_cached(DELETE_UPDATES_THROUGH)?.execute([upto])?;
        conn.prepare_cached(NOTE_UPDATES_DROPPED)?.execute([upto])?;
    }
    Ok(())
}
