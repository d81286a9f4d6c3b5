//! Why a store operation failed ([`StoreError`]), for both stores: the
//! backends (`sqlite.rs`, `postgres/`) and the tables' modules return it,
//! and it sits below all of them (so does what a PostgreSQL error says,
//! which its message and availability read).

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[cfg(feature = "postgres")]
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("database schema version {found} is newer than this library supports ({supported})")]
    TooNew { found: i64, supported: i64 },
    /// A query that must return a row returned none.
    #[error("the query returned no rows")]
    NoRows,
    /// A column did not hold the type the code reads.
    #[error("column {0}: unexpected type")]
    Type(usize),
    /// The database named in the configuration needs a store this build
    /// does not have.
    #[error("{0}")]
    Unsupported(&'static str),
    /// The database server cannot be reached.
    #[error("{0}")]
    Unavailable(&'static str),
    /// The database server did not answer a call within
    /// `database_timeout_ms`; the connection was dropped.
    #[error("PostgreSQL did not answer {what} within database_timeout_ms ({ms} ms); the connection was dropped")]
    Deadline { what: &'static str, ms: u64 },
    /// The connection broke while COMMIT was under way: the outcome is
    /// unknown to this side.
    #[error("the connection was lost during COMMIT: {0}")]
    CommitLost(Box<StoreError>),
    /// The stored rows broke a rule the code relies on (a bug, or a
    /// database changed behind the service's back).
    #[error("{0}")]
    Inconsistent(&'static str),
    /// The transaction met an error earlier and can only roll back.
    #[error("the transaction was aborted by an earlier error")]
    Aborted,
}

impl StoreError {
    /// True when the database server is unreachable (down, restarting, the
    /// connection broken): the request is answered 503 and may be retried.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Unavailable(_) | StoreError::Deadline { .. } => true,
            #[cfg(feature = "postgres")]
            StoreError::Postgres(e) => is_unavailable(e),
            _ => false,
        }
    }

    /// True when SQLite refused the write because its disk is full.
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Sqlite(e) => sqlite_disk_full(e),
            StoreError::CommitLost(e) => e.is_full(),
            _ => false,
        }
    }
}

/// SQLITE_FULL: SQLite's unix VFS reports a write that met ENOSPC (or
/// EDQUOT) this way, and the statement or transaction was rolled back.
pub(crate) fn sqlite_disk_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

pub type StoreResult<T> = Result<T, StoreError>;

/// `query_row(...).optional()`: no row is `None`, not an error.
pub trait Optional<T> {
    fn optional(self) -> StoreResult<Option<T>>;
}

impl<T> Optional<T> for StoreResult<T> {
    fn optional(self) -> StoreResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(StoreError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What a PostgreSQL error says, cause included: tokio-postgres shows only
/// its kind ("db error", "error connecting to server"), and the cause is
/// what an operator needs (the server's message and SQLSTATE, the refused
/// connection, the read-only standby).
#[cfg(feature = "postgres")]
pub fn describe(e: &::postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// True for errors that say the server is not there (refused, closed,
/// shutting down, starting up), as opposed to a failing statement.
#[cfg(feature = "postgres")]
pub fn is_unavailable(e: &::postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            let c = c.code();
            c.starts_with("08") || c.starts_with("57P")
        }
        None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) || e.as_db_error().is_none(),
    }
}

/// Failures a test of how they are answered needs, made as the database
/// makes them.
#[cfg(test)]
impl StoreError {
    /// SQLite's full disk (SQLITE_FULL), as a write that met ENOSPC fails.
    pub(crate) fn test_disk_full() -> StoreError {
        StoreError::Sqlite(test_sqlite_failure(rusqlite::ffi::SQLITE_FULL))
    }

    /// Another SQLite failure (SQLITE_IOERR).
    pub(crate) fn test_io_error() -> StoreError {
        StoreError::Sqlite(test_sqlite_failure(rusqlite::ffi::SQLITE_IOERR))
    }
}

#[cfg(test)]
fn test_sqlite_failure(code: i32) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some("database or disk is full".into()))
}
