//! Row counts, e.g. for a host to tell a fresh database from a used one.

use super::{Conn, StoreResult};

const COUNT_USERS: &str = "SELECT count(*) FROM users";
const COUNT_BOTS: &str = "SELECT count(*) FROM bots";
const COUNT_CHATS: &str = "SELECT count(*) FROM chats";
const COUNT_MESSAGES: &str = "SELECT count(*) FROM messages";

pub struct RowCounts {
    pub users: i64,
    pub bots: i64,
    pub chats: i64,
    pub messages: i64,
}

pub fn row_counts(conn: &Conn) -> StoreResult<RowCounts> {
    let count = |sql: &str| -> StoreResult<i64> { conn.prepare_cached(sql)?.query_row((), |r| r.get(0)) };
    Ok(RowCounts {
        users: count(COUNT_USERS)?,
        bots: count(COUNT_BOTS)?,
        chats: count(COUNT_CHATS)?,
        messages: count(COUNT_MESSAGES)?,
    })
}

/// A write that changes nothing but must reach the disk: a no-op UPDATE,
/// committed. Fails with the store's error (SQLITE_FULL on a full disk).
pub fn probe_write(conn: &Conn) -> StoreResult<()> {
    conn.begin()?;
    let wrote = conn.prepare_cached(PROBE_WRITE).and_then(|mut s| s.execute(()));
    match wrote.and_then(|_| conn.commit()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = conn.rollback();
            Err(e)
        }
    }
}

const PROBE_WRITE: &str = "UPDATE meta SET value = value WHERE key = 'updates_confirmed'";
