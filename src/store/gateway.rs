//! The gateway's storage, in the gateway's words: where a session's replay
//! starts, the events after a cursor, the bot's durable ack, and on a
//! shared store (PostgreSQL) the connection leases and the bots' rows other
//! nodes may change. The gateway's state machine (`gateway::session`)
//! holds no handle to any of this; its driver calls these functions when
//! the session asks (docs/architecture.md, "The gateway").

use super::{Conn, Optional, StoreResult};
use crate::params;
use std::collections::HashMap;

/// Where a bot's log stands when a session opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBounds {
    /// The bot's durable ack.
    pub acked: i64,
    /// The bot's last event ever written.
    pub last: i64,
    /// The oldest event still kept (`None` when none is kept).
    pub oldest: Option<i64>,
}

pub fn log_bounds(conn: &Conn, bot_id: &str) -> StoreResult<LogBounds> {
    let (acked, last) = conn
        .prepare_cached("SELECT acked_seq, last_seq FROM bots WHERE id = ?1")?
        .query_row([bot_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let oldest: Option<i64> = conn
        .prepare_cached("SELECT min(seq) FROM bot_events WHERE bot_id = ?1")?
        .query_row([bot_id], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(LogBounds { acked, last, oldest })
}

/// Streams the bot's events after `after` in order, at most `limit`, as
/// `(seq, type, data)` borrowed from the row, until `f` returns false.
pub fn read_events_after(
    conn: &Conn,
    bot_id: &str,
    after: i64,
    limit: usize,
    mut f: impl FnMut(i64, &str, &str) -> bool,
) -> StoreResult<()> {
    conn.prepare_cached("SELECT seq, type, data FROM bot_events WHERE bot_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?
        .query_each(params![bot_id, after, limit as i64], |r| Ok(f(r.get(0)?, r.get_str(1)?, r.get_str(2)?)))
}

/// Moves the bot's durable cursor to `seq` (never backwards). False when
/// `seq` is beyond the last event the bot was ever given.
pub fn write_ack(conn: &Conn, bot_id: &str, seq: i64) -> StoreResult<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE bots SET acked_seq = CASE WHEN acked_seq > ?1 THEN acked_seq ELSE ?1 END WHERE id = ?2 AND last_seq >= ?1",
        )?
        .execute(params![seq, bot_id])?;
    Ok(n == 1)
}

/// What [`take_lease`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    Taken,
    /// The bot already holds `open` live leases, its limit or more.
    Full {
        open: u32,
    },
}

/// Takes a lease on one of the bot's connections across every node of a
/// shared store, valid until `expires_at_ms`, unless `limit` live ones are
/// held. The bot's row is locked meanwhile, so two nodes cannot both take
/// the last one; leases lapsed by `now_ms` are deleted first.
pub fn take_lease(
    conn: &Conn,
    bot_id: &str,
    session_id: &str,
    limit: u32,
    now_ms: u64,
    expires_at_ms: u64,
) -> StoreResult<Lease> {
    conn.begin()?;
    let taken = (|| -> StoreResult<Lease> {
        conn.prepare_cached("SELECT id FROM bots WHERE id = ?1 FOR UPDATE")?.exists([bot_id])?;
        conn.prepare_cached("DELETE FROM gateway_leases WHERE bot_id = ?1 AND expires_at_ms <= ?2")?
            .execute(params![bot_id, now_ms as i64])?;
        let open: i64 = conn
            .prepare_cached("SELECT count(*) FROM gateway_leases WHERE bot_id = ?1")?
            .query_row([bot_id], |r| r.get(0))?;
        let open = u32::try_from(open).unwrap_or(u32::MAX);
        if open >= limit {
            return Ok(Lease::Full { open });
        }
        conn.prepare_cached("INSERT INTO gateway_leases (session_id, bot_id, expires_at_ms) VALUES (?1, ?2, ?3)")?
            .execute(params![session_id, bot_id, expires_at_ms as i64])?;
        Ok(Lease::Taken)
    })();
    match taken {
        Ok(Lease::Taken) => {
            conn.commit()?;
            Ok(Lease::Taken)
        }
        other => {
            let _ = conn.rollback();
            other
        }
    }
}

/// Renews (or takes again, when it lapsed) every lease of this node in one
/// statement: `sessions` are (session id, bot id) pairs.
pub fn renew_leases(conn: &Conn, sessions: &[(&str, &str)], expires_at_ms: u64) -> StoreResult<()> {
    let sids: Vec<&str> = sessions.iter().map(|(s, _)| *s).collect();
    let bids: Vec<&str> = sessions.iter().map(|(_, b)| *b).collect();
    conn.prepare_cached(
        "INSERT INTO gateway_leases (session_id, bot_id, expires_at_ms) \
         SELECT s, b, ?3 FROM unnest(string_to_array(?1, ','), string_to_array(?2, ',')) AS t(s, b) \
         ON CONFLICT (session_id) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
    )?
    .execute(params![sids.join(","), bids.join(","), expires_at_ms as i64])?;
    Ok(())
}

pub fn free_lease(conn: &Conn, session_id: &str) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM gateway_leases WHERE session_id = ?1")?.execute([session_id])?;
    Ok(())
}

/// A bot's row as a session on a shared store watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotRow {
    pub last_seq: i64,
    pub token_hash: Vec<u8>,
    pub active: bool,
}

/// The rows of `bot_ids` (PostgreSQL: one round trip); a bot that is gone
/// has none.
pub fn bot_rows(conn: &Conn, bot_ids: &[String]) -> StoreResult<HashMap<String, BotRow>> {
    let mut bots = HashMap::with_capacity(bot_ids.len());
    conn.prepare_cached("SELECT id, last_seq, token_hash, status FROM bots WHERE id = ANY(string_to_array(?1, ','))")?
        .query_each([bot_ids.join(",")], |r| {
            let active = r.get_str(3)? == "active";
            bots.insert(r.get::<String>(0)?, BotRow { last_seq: r.get(1)?, token_hash: r.get(2)?, active });
            Ok(true)
        })?;
    Ok(bots)
}
