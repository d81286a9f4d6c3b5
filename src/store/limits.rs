//! Where a bot's rate buckets live: in the process on a store of its own
//! ([`RateLimiter`]), in the database on a shared store (every node must
//! see the same bucket). The GCRA arithmetic is `ratelimit`'s.

use super::{Conn, StoreResult};
use crate::config::Rate;
use crate::params;
use crate::ratelimit::{decide, Checked, RateLimiter, Scope};

/// Checks the bot-wide and the chat bucket at `now_ms` and, if both
/// allow, takes one from each (see [`RateLimiter::check`]): from `local`
/// (undone with the transaction by its undo log) on a store of this
/// process, from the database's `rate_buckets` (row-locked, written in the
/// transaction of the write they limit) on a shared store.
pub fn take(
    conn: &Conn,
    local: &mut RateLimiter,
    bot_id: &str,
    chat_id: &str,
    bot_rate: Option<&Rate>,
    chat_rate: Option<(&Rate, Scope)>,
    now_ms: u64,
) -> StoreResult<Checked> {
    if conn.is_shared() {
        check_shared(conn, bot_id, chat_id, bot_rate, chat_rate, now_ms)
    } else {
        Ok(local.check(bot_id, chat_id, bot_rate, chat_rate, now_ms))
    }
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
pub fn take_buckets(conn: &Conn, first: &str, second: &str) -> StoreResult<(u64, u64)> {
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
pub fn put_bucket(conn: &Conn, key: &str, tat: u64) -> StoreResult<()> {
    conn.prepare_cached(PUT)?.execute(params![key, tat as i64])?;
    Ok(())
}

/// [`RateLimiter::check`] with the buckets in the database's
/// `rate_buckets`, read with a row lock and written in the transaction of
/// the write they limit: exact across nodes.
fn check_shared(
    conn: &Conn,
    bot_id: &str,
    chat_id: &str,
    bot_rate: Option<&Rate>,
    chat_rate: Option<(&Rate, Scope)>,
    now_ms: u64,
) -> StoreResult<Checked> {
    if bot_rate.is_none() && chat_rate.is_none() {
        return Ok(Ok(None));
    }
    let now = now_ms * 1000;
    let bot_key = format!("b:{bot_id}");
    let chat_key = format!("c:{bot_id}:{chat_id}");
    let (bot_tat, chat_tat) = take_buckets(conn, &bot_key, &chat_key)?;
    let (checked, bot_next, chat_next) =
        decide(bot_rate.map(|r| (bot_tat, r)), chat_rate.map(|(r, s)| (chat_tat, r, s)), now);
    if let Some(next) = bot_next {
        put_bucket(conn, &bot_key, next)?;
    }
    if let Some(next) = chat_next {
        put_bucket(conn, &chat_key, next)?;
    }
    Ok(checked)
}
