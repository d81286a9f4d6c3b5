//! Rate buckets in the database (a shared PostgreSQL store: every node
//! must see the same bucket). The GCRA arithmetic is `ratelimit`'s.

use super::{Conn, StoreResult};
use crate::params;

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
