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
