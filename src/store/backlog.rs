//! The backlogs a scrape reports (docs/operations.md): gateway events not
//! yet acknowledged, and host updates not yet confirmed.
//!
//! Host updates: two index seeks (update ids are contiguous from the first
//! unconfirmed one to the newest; the backlog cap drops from the oldest).
//!
//! Gateway events live in the bot rows (`last_seq - acked_seq`), one per
//! bot: a pass over `bots` is the only exact reading, and at 100 000 bots
//! it takes tens of milliseconds. So a scrape reads at most
//! [`CHUNK`] bots in primary-key order, carrying its sums to the next
//! scrape, and the gauges show the last completed pass ([`Scan`]). Up to
//! `CHUNK` bots, every scrape completes a pass of its own.

use super::{Conn, StoreResult};
use crate::params;

/// Bots read per scrape.
pub const CHUNK: i64 = 5_000;

/// One chunk of bots after `?1`: how many, the last id, the backlog's
/// sum and largest, and the creation time of the oldest unacknowledged
/// event still in the log (pruning may have dropped a capped bot's oldest
/// ones: `seq > acked_seq` finds the first kept one). Only bots with a
/// backlog have their log read.
const EVENTS_CHUNK: &str =
    "WITH chunk AS (SELECT id, last_seq, acked_seq FROM bots WHERE id > ?1 ORDER BY id LIMIT ?2) \
     SELECT count(*), max(id), \
     CAST(coalesce(sum(CASE WHEN last_seq > acked_seq THEN last_seq - acked_seq ELSE 0 END), 0) AS BIGINT), \
     CAST(coalesce(max(CASE WHEN last_seq > acked_seq THEN last_seq - acked_seq ELSE 0 END), 0) AS BIGINT), \
     min(CASE WHEN last_seq > acked_seq THEN (SELECT e.created_at_ms FROM bot_events e \
         WHERE e.bot_id = chunk.id AND e.seq > chunk.acked_seq ORDER BY e.seq LIMIT 1) END) \
     FROM chunk";

/// Whether any bot comes after `?1`.
const MORE_BOTS: &str = "SELECT count(*) FROM (SELECT 1 FROM bots WHERE id > ?1 LIMIT 1) AS more";

/// The first unconfirmed update and the newest one (`updates_confirmed`:
/// ids below it are confirmed).
const UPDATES: &str = "SELECT (SELECT min(update_id) FROM updates WHERE update_id >= m.value), \
     (SELECT max(update_id) FROM updates), 0 FROM meta m WHERE m.key = 'updates_confirmed'";

/// PostgreSQL: [`UPDATES`], and the rows not numbered yet (see
/// `store::events`), all unconfirmed.
const UPDATES_POSTGRES: &str = "SELECT (SELECT min(update_id) FROM updates WHERE update_id >= m.value), \
     (SELECT max(update_id) FROM updates), (SELECT count(*) FROM updates_pending) \
     FROM meta m WHERE m.key = 'updates_confirmed'";

/// The event backlog of a set of bots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events {
    /// Events written and not acknowledged, all bots together.
    pub total: i64,
    /// The largest backlog of one bot.
    pub max: i64,
    /// When the oldest unacknowledged event in the log was written (Unix
    /// ms), if there is one.
    pub oldest_ms: Option<i64>,
}

impl Events {
    fn merge(&mut self, o: Events) {
        self.total += o.total;
        self.max = self.max.max(o.max);
        self.oldest_ms = match (self.oldest_ms, o.oldest_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// What a scrape shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// The last completed pass over the bots.
    pub events: Events,
    /// When that pass began (Unix ms): the gauges are at most that old.
    pub pass_started_ms: u64,
    /// Host updates not yet confirmed (read by this scrape).
    pub updates_unconfirmed: i64,
}

/// A pass over the bots, carried from scrape to scrape.
#[derive(Debug)]
pub struct Scan {
    /// Bots per step ([`CHUNK`]).
    chunk: i64,
    /// The last bot id read by the pass under way ("" at its start).
    cursor: String,
    started_ms: u64,
    partial: Events,
    done: Option<(Events, u64)>,
}

impl Default for Scan {
    fn default() -> Scan {
        Scan { chunk: CHUNK, cursor: String::new(), started_ms: 0, partial: Events::default(), done: None }
    }
}

impl Scan {
    /// Reads the next chunk (completing the pass when it is the last) and
    /// the update backlog; the gauges, once a pass has completed.
    pub fn step(&mut self, conn: &Conn, now_ms: u64) -> StoreResult<Option<Backlog>> {
        if self.cursor.is_empty() {
            self.started_ms = now_ms;
            self.partial = Events::default();
        }
        let (n, last, chunk) =
            conn.prepare_cached(EVENTS_CHUNK)?.query_row(params![self.cursor.as_str(), self.chunk], |r| {
                let chunk = Events { total: r.get(2)?, max: r.get(3)?, oldest_ms: r.get(4)? };
                Ok((r.get::<i64>(0)?, r.get::<Option<String>>(1)?, chunk))
            })?;
        self.partial.merge(chunk);
        let last = last.unwrap_or_default();
        let more = n == self.chunk
            && conn.prepare_cached(MORE_BOTS)?.query_row(params![last.as_str()], |r| r.get::<i64>(0))? > 0;
        if more {
            self.cursor = last;
        } else {
            self.done = Some((self.partial, self.started_ms));
            self.cursor.clear();
        }
        let sql = match conn.dialect() {
            super::Dialect::Sqlite => UPDATES,
            super::Dialect::Postgres => UPDATES_POSTGRES,
        };
        let (first, newest, unnumbered) = conn
            .prepare_cached(sql)?
            .query_row((), |r| Ok((r.get::<Option<i64>>(0)?, r.get::<Option<i64>>(1)?, r.get::<i64>(2)?)))?;
        let updates_unconfirmed = unnumbered
            + match (first, newest) {
                (Some(f), Some(n)) if n >= f => n - f + 1,
                _ => 0,
            };
        Ok(self.done.map(|(events, pass_started_ms)| Backlog { events, pass_started_ms, updates_unconfirmed }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_carries_its_sums_across_steps_and_shows_only_when_complete() {
        let config = crate::Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into());
        let conn = crate::store::open(&config).unwrap();
        let c = conn.sqlite_ref().unwrap();
        // Five bots; b and d have backlogs of 3 and 1 (b's oldest kept
        // event is seq 6: seq 5 was dropped by the cap).
        for (id, last, acked) in [("a", 2, 2), ("b", 7, 4), ("c", 0, 0), ("d", 1, 0), ("e", 9, 9)] {
            c.execute(
                "INSERT INTO bots (id, token_hash, display_name, handle, last_seq, acked_seq, created_at) VALUES (?1, ?1, 'B', ?1, ?2, ?3, 0)",
                rusqlite::params![id, last, acked],
            )
            .unwrap();
        }
        for (bot, seq, at) in [("b", 4, 100), ("b", 6, 400), ("b", 7, 500), ("d", 1, 300), ("e", 9, 50)] {
            c.execute(
                "INSERT INTO bot_events (bot_id, seq, created_at_ms, type, data) VALUES (?1, ?2, ?3, 'message_created', '{}')",
                rusqlite::params![bot, seq, at],
            )
            .unwrap();
        }
        c.execute("INSERT INTO updates (created_at_ms, type, data) VALUES (1, 'message_created', '{}'), (2, 'message_created', '{}'), (3, 'message_created', '{}')", []).unwrap();
        c.execute("UPDATE meta SET value = 2 WHERE key = 'updates_confirmed'", []).unwrap();
        let want = Events { total: 4, max: 3, oldest_ms: Some(300) };
        // Two bots per step: a pass takes three steps, the third completes it.
        let mut scan = Scan { chunk: 2, ..Scan::default() };
        assert_eq!(scan.step(&conn, 1000).unwrap(), None);
        assert_eq!(scan.step(&conn, 2000).unwrap(), None);
        let done = Backlog { events: want, pass_started_ms: 1000, updates_unconfirmed: 2 };
        assert_eq!(scan.step(&conn, 3000).unwrap(), Some(done));
        // The next pass starts over; meanwhile the last one shows.
        assert_eq!(scan.step(&conn, 4000).unwrap(), Some(done));
        // Bots a multiple of the chunk: the pass ends without a step of none.
        let mut scan = Scan { chunk: 5, ..Scan::default() };
        assert_eq!(scan.step(&conn, 10).unwrap(), Some(Backlog { pass_started_ms: 10, ..done }));
        let mut scan = Scan::default();
        assert_eq!(scan.step(&conn, 10).unwrap(), Some(Backlog { pass_started_ms: 10, ..done }));
    }
}
