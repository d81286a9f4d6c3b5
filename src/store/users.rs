//! Users (the humans of the host service), as stored.

use super::{Conn, Optional, StoreResult};
use crate::params;

const EXISTS: &str = "SELECT 1 FROM users WHERE id = ?1";
const NAME: &str = "SELECT display_name, handle FROM users WHERE id = ?1";
const INSERT: &str = "INSERT INTO users (id, display_name, handle, created_at) VALUES (?1, ?2, ?3, ?4)";

pub fn exists(conn: &Conn, id: &str) -> StoreResult<bool> {
    conn.prepare_cached(EXISTS)?.exists([id])
}

/// The user's display name and handle; `None` when there is no such user.
pub fn name(conn: &Conn, id: &str) -> StoreResult<Option<(String, Option<String>)>> {
    conn.prepare_cached(NAME)?.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional()
}

pub fn insert(conn: &Conn, id: &str, display_name: &str, handle: Option<&str>, created_at: i64) -> StoreResult<()> {
    conn.prepare_cached(INSERT)?.execute(params![id, display_name, handle, created_at])?;
    Ok(())
}
