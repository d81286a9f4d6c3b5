//! Where a bot's rate buckets live, and the one place that knows: in the
//! process when the store is this process's own, in the database's
//! `rate_buckets` on a shared store (every node must see the same
//! bucket). The arithmetic is the caller's (`ratelimit`).

use super::{Conn, StoreResult};
use crate::params;

/// The buckets a transaction on a shared store holds: key → theoretical
/// arrival time (µs), read with the row locked (by the group ahead, see
/// `store::group`, or by the bucket's first use in the transaction) and
/// kept up to date as the transaction takes from it. It lives as long as
/// its transaction.
#[derive(Default, Debug)]
pub struct Held(std::collections::HashMap<String, u64>);

/// A bot's bot-wide bucket key.
fn bot_key(bot_id: &str) -> String {
    format!("b:{bot_id}")
}

/// A bot's bucket key in one chat.
fn chat_key(bot_id: &str, chat_id: &str) -> String {
    format!("c:{bot_id}:{chat_id}")
}

/// Takes from a bot's bot-wide and chat buckets. On a store of this
/// process the buckets are the caller's, in the process: `local()`. On a
/// shared store the two buckets' theoretical arrival times (µs, 0 for a
/// full bucket) are read with row locks held until the transaction ends
/// (unless `held` has them already) and handed to `decide`, which returns
/// the outcome and the new times to store (`None`: unchanged); they are
/// written in the transaction of the write they limit, so a rollback gives
/// the slot back. The writes wait for the transaction's next round trip.
pub fn take<T>(
    conn: &Conn,
    held: &mut Held,
    bot_id: &str,
    chat_id: &str,
    local: impl FnOnce() -> T,
    decide: impl FnOnce(u64, u64) -> (T, Option<u64>, Option<u64>),
) -> StoreResult<T> {
    if !conn.is_shared() {
        return Ok(local());
    }
    let (bot_key, chat_key) = (bot_key(bot_id), chat_key(bot_id, chat_id));
    if !held.0.contains_key(&bot_key) || !held.0.contains_key(&chat_key) {
        lock(conn, &[bot_key.as_str(), chat_key.as_str()], held)?;
    }
    let tat = |k: &str| held.0.get(k).copied().unwrap_or(0);
    let (out, bot_next, chat_next) = decide(tat(&bot_key), tat(&chat_key));
    for (key, next) in [(bot_key, bot_next), (chat_key, chat_next)] {
        if let Some(next) = next {
            // Its row was locked when it was read.
            conn.prepare_cached(PUT)?
                .defer(params![key, next as i64], super::Deferral::on_held_rows("a rate bucket was not written"))?;
            held.0.insert(key, next);
        }
    }
    Ok(out)
}

/// Every row exists before it is locked, so two nodes using a bucket for
/// the first time at once queue on its row instead of both reading
/// "absent". In key order, as the locks are taken (`?1`: the keys,
/// comma-joined; bot and chat ids hold no comma).
const ENSURE: &str = "INSERT INTO rate_buckets (key, tat) SELECT k, 0 FROM unnest(string_to_array(?1, ',')) AS k \
     ORDER BY k ON CONFLICT (key) DO NOTHING";

const LOCK: &str =
    "SELECT key, tat FROM rate_buckets WHERE key = ANY(string_to_array(?1, ',')) ORDER BY key FOR UPDATE";

const PUT: &str =
    "INSERT INTO rate_buckets (key, tat) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat";

/// The keys of the buckets a send by `bot_id` into `chat_id` takes from.
pub fn keys(bot_id: &str, chat_id: &str) -> [String; 2] {
    [bot_key(bot_id), chat_key(bot_id, chat_id)]
}

/// The read that locks `keys` (their rows made first, without a round
/// trip of their own): its SQL and the comma-joined keys, for a group to
/// pipeline with its other reads; its rows go to [`hold`].
pub(super) fn lock_read(conn: &Conn, keys: &[&str]) -> StoreResult<(&'static str, String)> {
    let mut keys: Vec<&str> = keys.iter().copied().filter(|k| !k.contains(',')).collect();
    keys.sort_unstable();
    keys.dedup();
    let joined = keys.join(",");
    // An inserted row is a full bucket: no state changed, so it does not
    // count as a write (a refusal after it still wrote nothing).
    conn.prepare_cached(ENSURE)?.defer_uncounted(params![joined])?;
    Ok((LOCK, joined))
}

/// Keeps a row of [`lock_read`]'s read.
pub(super) fn hold(held: &mut Held, key: String, tat: i64) {
    held.0.insert(key, u64::try_from(tat).unwrap_or(0));
}

/// Locks the buckets `keys` and keeps their times in `held`.
fn lock(conn: &Conn, keys: &[&str], held: &mut Held) -> StoreResult<()> {
    let (sql, joined) = lock_read(conn, keys)?;
    conn.prepare_cached(sql)?.query_each(params![joined], |r| {
        hold(held, r.get_str(0)?.to_string(), r.get::<i64>(1)?);
        Ok(true)
    })
}
