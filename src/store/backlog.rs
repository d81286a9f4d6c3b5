//! The backlogs a scrape reports (docs/operations.md): gateway events not
//! yet acknowledged, and host updates not yet confirmed. One statement
//! each, on both stores.
//!
//! The event backlog is read from the bot rows (`last_seq - acked_seq`),
//! visiting only bots that have one for the oldest event's age: a full
//! pass over `bots`, without touching `bot_events` for bots that are up to
//! date. The update backlog is a range count on `updates`' primary key.

use super::{Conn, StoreResult};

/// Bots with a backlog: its size, and the first unacknowledged event still
/// in the log (pruning may have dropped the oldest ones of a bot over the
/// cap; `e.seq > acked_seq` finds the first kept one).
const EVENTS: &str = "SELECT CAST(coalesce(sum(b.last_seq - b.acked_seq), 0) AS BIGINT), \
     CAST(coalesce(max(b.last_seq - b.acked_seq), 0) AS BIGINT), \
     min((SELECT e.created_at_ms FROM bot_events e WHERE e.bot_id = b.id AND e.seq > b.acked_seq ORDER BY e.seq LIMIT 1)) \
     FROM bots b WHERE b.last_seq > b.acked_seq";

/// Update ids from `updates_confirmed` on are unconfirmed.
const UPDATES: &str = "SELECT count(*) FROM updates \
     WHERE update_id >= (SELECT value FROM meta WHERE key = 'updates_confirmed')";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Events written and not acknowledged, all bots together.
    pub unacked_total: i64,
    /// The largest backlog of one bot.
    pub unacked_max: i64,
    /// Age of the oldest unacknowledged event in the log, 0 when none.
    pub oldest_age_ms: u64,
    /// Host updates not yet confirmed.
    pub updates_unconfirmed: i64,
}

pub fn read(conn: &Conn, now_ms: u64) -> StoreResult<Backlog> {
    let (total, max, oldest) = conn.prepare_cached(EVENTS)?.query_row((), |r| {
        Ok((r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<Option<i64>>(2)?))
    })?;
    let updates = conn.prepare_cached(UPDATES)?.query_row((), |r| r.get::<i64>(0))?;
    let oldest_age_ms = oldest.map_or(0, |t| now_ms.saturating_sub(u64::try_from(t).unwrap_or(0)));
    Ok(Backlog { unacked_total: total, unacked_max: max, oldest_age_ms, updates_unconfirmed: updates })
}
