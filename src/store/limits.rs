//! Where a bot's rate buckets live, and the one place that knows: in the
//! process when the store is this process's own, in the database's
//! `rate_buckets` on a shared store (every node must see the same
//! bucket). The arithmetic is the caller's (`ratelimit`).

use super::{Conn, StoreResult};
use crate::params;

/// Takes from a bot's bot-wide and chat buckets. On a store of this
/// process the buckets are the caller's, in the process: `local()`. On a
/// shared store the two buckets' theoretical arrival times (µs, 0 for a
/// full bucket) are read with row locks held until the transaction ends
/// and handed to `decide`, which returns the outcome and the new times to
/// store (`None`: unchanged); they are written in the transaction of the
/// write they limit, so a rollback gives the slot back.
pub fn take<T>(
    conn: &Conn,
    bot_id: &str,
    chat_id: &str,
    local: impl FnOnce() -> T,
    decide: impl FnOnce(u64, u64) -> (T, Option<u64>, Option<u64>),
) -> StoreResult<T> {
    if !conn.is_shared() {
        return Ok(local());
    }
    let bot_key = format!("b:{bot_id}");
    let chat_key = format!("c:{bot_id}:{chat_id}");
    let (bot_tat, chat_tat) = take_buckets(conn, &bot_key, &chat_key)?;
    let (out, bot_next, chat_next) = decide(bot_tat, chat_tat);
    if let Some(next) = bot_next {
        put_bucket(conn, &bot_key, next)?;
    }
    if let Some(next) = chat_next {
        put_bucket(conn, &chat_key, next)?;
    }
    Ok(out)
}

/// Both rows exist before they are locked, so two nodes using a bucket
/// for the first time at once queue on its row instead of both reading
/// "absent".
const ENSURE: &str = "INSERT INTO rate_buckets (key, tat) VALUES (?1, 0), (?2, 0) ON CONFLICT (key) DO NOTHING";

const LOCK: &str = "SELECT key, tat FROM rate_buckets WHERE key = ?1 OR key = ?2 ORDER BY key FOR UPDATE";

const PUT: &str =
    "INSERT INTO rate_buckets (key, tat) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat";

/// Takes the two buckets (row locks until the transaction ends) and
/// returns their theoretical arrival times, 0 for a full bucket.
fn take_buckets(conn: &Conn, first: &str, second: &str) -> StoreResult<(u64, u64)> {
    // An inserted row is a full bucket: no state changed, so it does not
    // count as a write (a refusal after it still wrote nothing).
    conn.prepare_cached(ENSURE)?.execute_uncounted(params![first, second])?;
    let (mut a, mut b) = (0u64, 0u64);
    conn.prepare_cached(LOCK)?.query_each(params![first, second], |r| {
        let tat = u64::try_from(r.get::<i64>(1)?).unwrap_or(0);
        if r.get_str(0)? == first {
            a = tat;
        } else {
            b = tat;
        }
        Ok(true)
    })?;
    Ok((a, b))
}

/// Stores a bucket's new theoretical arrival time.
fn put_bucket(conn: &Conn, key: &str, tat: u64) -> StoreResult<()> {
    conn.prepare_cached(PUT)?.execute(params![key, tat as i64])?;
    Ok(())
}
