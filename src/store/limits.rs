//! Where a bot's rate buckets live, and the one place that knows: in the
//! process when the store is this process's own, in the database's
//! `rate_buckets` on a shared store (every node must see the same
//! bucket). The arithmetic is the caller's (`ratelimit`).

use super::{Conn, StoreResult};
use crate::params;
use std::collections::HashMap;

/// The buckets a transaction on a shared store holds: key → theoretical
/// arrival time (µs), read with the row locked (by the group ahead, see
/// `store::group`, or by the bucket's first use in the transaction) and
/// kept up to date as the transaction takes from it. It lives as long as
/// its transaction.
#[derive(Default, Debug)]
pub struct Held {
    tats: HashMap<Box<str>, u64>,
    /// The two keys of the take under way, one after the other (see
    /// [`push_keys`]): a take looks its buckets up and writes them with
    /// slices of this, instead of making two new strings each time.
    scratch: String,
}

/// Appends a bot's bot-wide bucket key to `out`.
fn push_bot_key(out: &mut String, bot_id: &str) {
    out.push_str("b:");
    out.push_str(bot_id);
}

/// Appends a bot's bucket key in one chat to `out`.
fn push_chat_key(out: &mut String, bot_id: &str, chat_id: &str) {
    out.push_str("c:");
    out.push_str(bot_id);
    out.push(':');
    out.push_str(chat_id);
}

/// Makes `out` the bot-wide key followed by the chat key; returns where
/// the second starts.
fn push_keys(out: &mut String, bot_id: &str, chat_id: &str) -> usize {
    out.clear();
    push_bot_key(out, bot_id);
    let split = out.len();
    push_chat_key(out, bot_id, chat_id);
    split
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
    let Held { tats, scratch } = held;
    let split = push_keys(scratch, bot_id, chat_id);
    let (bot_key, chat_key) = scratch.split_at(split);
    if !tats.contains_key(bot_key) || !tats.contains_key(chat_key) {
        lock(conn, &[bot_key, chat_key], tats)?;
    }
    let tat = |k: &str| tats.get(k).copied().unwrap_or(0);
    let (out, bot_next, chat_next) = decide(tat(bot_key), tat(chat_key));
    for (key, next) in [(bot_key, bot_next), (chat_key, chat_next)] {
        if let Some(next) = next {
            // Its row was locked when it was read.
            conn.prepare_cached(PUT)?
                .defer(params![key, next as i64], super::Deferral::on_held_rows("a rate bucket was not written"))?;
            match tats.get_mut(key) {
                Some(tat) => *tat = next,
                None => {
                    tats.insert(key.into(), next);
                }
            }
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
    let mut both = String::new();
    let split = push_keys(&mut both, bot_id, chat_id);
    let chat = both.split_off(split);
    [both, chat]
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
    keep(&mut held.tats, key.into(), tat);
}

fn keep(tats: &mut HashMap<Box<str>, u64>, key: Box<str>, tat: i64) {
    tats.insert(key, u64::try_from(tat).unwrap_or(0));
}

/// Locks the buckets `keys` and keeps their times in `tats`.
fn lock(conn: &Conn, keys: &[&str], tats: &mut HashMap<Box<str>, u64>) -> StoreResult<()> {
    let (sql, joined) = lock_read(conn, keys)?;
    conn.prepare_cached(sql)?.query_each(params![joined], |r| {
        keep(tats, r.get_str(0)?.into(), r.get::<i64>(1)?);
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_keys_are_written_one_after_the_other_as_keys_makes_them() {
        let mut scratch = String::from("left over from the last take");
        let split = push_keys(&mut scratch, "bot_x", "chat:1");
        assert_eq!(scratch.split_at(split), ("b:bot_x", "c:bot_x:chat:1"));
        assert_eq!(keys("bot_x", "chat:1"), ["b:bot_x".to_string(), "c:bot_x:chat:1".to_string()]);
        let split = push_keys(&mut scratch, "b", "");
        assert_eq!(scratch.split_at(split), ("b:b", "c:b:"));
    }

    #[test]
    fn a_take_on_a_store_of_this_process_takes_from_the_process_buckets() {
        let config = crate::Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into());
        let conn = super::super::open(&config).unwrap();
        let mut held = Held::default();
        let out = take(&conn, &mut held, "bot_x", "chat", || "local", |_, _| ("shared", Some(1), Some(1))).unwrap();
        assert_eq!(out, "local");
        assert!(held.tats.is_empty());
    }

    #[test]
    fn a_held_time_is_found_by_its_key_and_a_negative_one_reads_as_a_full_bucket() {
        let mut held = Held::default();
        hold(&mut held, "b:bot_x".into(), 42);
        hold(&mut held, "c:bot_x:chat".into(), -5);
        assert_eq!(held.tats.get("b:bot_x"), Some(&42));
        assert_eq!(held.tats.get("c:bot_x:chat"), Some(&0));
        hold(&mut held, "b:bot_x".into(), 43);
        assert_eq!(held.tats.get("b:bot_x"), Some(&43));
        assert_eq!(held.tats.len(), 2);
    }
}
