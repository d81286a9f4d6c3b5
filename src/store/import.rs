//! Checking a database image before it replaces the live database.
//!
//! An image is untrusted input: whoever hands it to `import_database` must
//! not be able to smuggle in a trigger (which would run with the service's
//! authority on every later write), a view, a dropped table, or event JSON
//! that is not JSON. So an image is opened in a scratch connection with
//! SQLite's defensive settings, and accepted only when its schema is
//! exactly the one the migrations build, its pages pass the integrity
//! check, and its stored events parse. Every refusal is a 400 and leaves
//! the live database as it was.

use crate::store::events;
use crate::store::sqlite as storage;
use rusqlite::Connection;

/// One row of `sqlite_master`: type, name, table, SQL.
type SchemaRow = (String, String, String, Option<String>);

/// Why an image was not imported.
#[derive(Debug)]
pub enum ImportError {
    /// The image is not acceptable (the host's mistake): what is wrong.
    Refused(String),
    /// The database failed while checking or copying it.
    Database(rusqlite::Error),
    /// Anything else that failed on this side.
    Internal(String),
    /// The store is not a SQLite database (a database server): it has no
    /// image to export or replace.
    NoImage,
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        ImportError::Database(e)
    }
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportError::Refused(why) | ImportError::Internal(why) => f.write_str(why),
            ImportError::Database(e) => e.fmt(f),
            ImportError::NoImage => f.write_str("the store is not a SQLite database"),
        }
    }
}

type ImportResult<T> = Result<T, ImportError>;

fn refuse(why: impl std::fmt::Display) -> ImportError {
    ImportError::Refused(format!("database image refused: {why}"))
}

/// The whole database as one SQLite image (serialize).
pub fn export(conn: &mut super::Conn) -> ImportResult<Vec<u8>> {
    let conn = conn.sqlite().ok_or(ImportError::NoImage)?;
    Ok(conn.serialize(rusqlite::MAIN_DB)?.to_vec())
}

/// The live database's page size, which an image is converted to.
pub fn live_page_size(conn: &super::Conn) -> ImportResult<i64> {
    Ok(storage::page_size(conn.sqlite_ref().ok_or(ImportError::NoImage)?)?)
}

/// Copies a checked image ([`prepare`]) over the live database.
pub fn replace_live(scratch: &Connection, live: &mut super::Conn) -> ImportResult<()> {
    copy_into(scratch, live.sqlite().ok_or(ImportError::NoImage)?)
}

/// The objects a database of schema `version` holds, as the migrations
/// build them (internal `sqlite_` objects such as autoindexes included).
fn reference_schema(version: usize) -> ImportResult<Vec<SchemaRow>> {
    let conn = Connection::open_in_memory()?;
    for sql in &storage::MIGRATIONS[..version] {
        conn.execute_batch(sql)?;
    }
    schema_of(&conn)
}

fn schema_of(conn: &Connection) -> ImportResult<Vec<SchemaRow>> {
    let mut st = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Opens `image` in a scratch connection, checks it, converts its page size
/// to `page_size` and migrates it. Returns the connection to copy from.
pub fn prepare(image: &[u8], page_size: i64, max_bytes: usize) -> ImportResult<Connection> {
    if image.len() > max_bytes {
        return Err(refuse(format!("it is larger than max_import_bytes ({max_bytes} bytes)")));
    }
    if image.len() < 100 || &image[..16] != b"SQLite format 3\0" {
        return Err(refuse("not a SQLite database"));
    }
    // An image of a WAL file says so in header bytes 18-19; an in-memory
    // copy must read it as a rollback-journal database.
    let mut bytes = image.to_vec();
    if bytes[18] == 2 && bytes[19] == 2 {
        bytes[18] = 1;
        bytes[19] = 1;
    }
    let mut scratch = Connection::open_in_memory()?;
    storage::harden(&scratch)?;
    scratch
        .deserialize_read_exact(rusqlite::MAIN_DB, &bytes[..], bytes.len(), false)
        .map_err(|e| refuse(format!("not a SQLite database ({e})")))?;
    // Nothing is read from the image's tables before its pages are known
    // to be sound.
    let check: String = scratch
        .query_row("PRAGMA integrity_check(1)", [], |r| r.get(0))
        .map_err(|e| refuse(format!("not a SQLite database ({e})")))?;
    if check != "ok" {
        return Err(refuse(format!("it fails SQLite's integrity check: {check}")));
    }
    let version: i64 = scratch.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let supported = storage::MIGRATIONS.len() as i64;
    if version < 1 {
        return Err(refuse("not a botspace database (no schema version)"));
    }
    if version > supported {
        return Err(refuse(format!("it has schema version {version}; this library reads up to {supported}")));
    }
    let found = schema_of(&scratch).map_err(|_| refuse("its schema cannot be read"))?;
    let expected = reference_schema(version as usize)?;
    if found != expected {
        let extra: Vec<&str> = found.iter().filter(|r| !expected.contains(r)).map(|r| r.1.as_str()).collect();
        let missing: Vec<&str> = expected.iter().filter(|r| !found.contains(r)).map(|r| r.1.as_str()).collect();
        return Err(refuse(format!(
            "its schema differs from botspace schema version {version} (unexpected or altered: [{}]; missing: [{}])",
            extra.join(", "),
            missing.join(", ")
        )));
    }
    // Stored events are spliced into gateway frames and getUpdates answers
    // as they are: each must be a JSON object of a known type.
    let bad: i64 = scratch.query_row(
        &format!(
            "SELECT (SELECT count(*) FROM bot_events WHERE json_valid(data) = 0 OR json_type(data) != 'object' OR type NOT IN ({k})) \
                  + (SELECT count(*) FROM updates WHERE json_valid(data) = 0 OR json_type(data) != 'object' OR type NOT IN ({k}))",
            k = events::KNOWN_TYPES_SQL
        ),
        [],
        |r| r.get(0),
    )?;
    if bad > 0 {
        return Err(refuse(format!("{bad} stored events are not JSON objects of a known type")));
    }
    let image_page_size: i64 = scratch.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if image_page_size != page_size {
        // The live database is copied page by page, so the sizes must agree;
        // an in-memory image cannot be vacuumed to another size: copy its
        // rows into a new database of the live size instead.
        drop(scratch);
        // The refusal names the conversion, not SQLite's inner failure
        // (an in-memory copy fails only on a bug or no memory).
        scratch = convert_page_size(&bytes, version as usize, &expected, page_size).map_err(|_| {
            refuse(format!(
                "its page size {image_page_size} cannot be converted to {page_size} \
                 (internal error, nothing was written; safe to retry)"
            ))
        })?;
    }
    // Bring the image up to date before it replaces anything, so a failed
    // migration leaves the live database as it was.
    storage::migrate(&scratch).map_err(|e| ImportError::Internal(e.to_string()))?;
    Ok(scratch)
}

/// A copy of `image` (already checked to hold the schema `schema` of
/// `version`) in a new in-memory database of `page_size`.
fn convert_page_size(image: &[u8], version: usize, schema: &[SchemaRow], page_size: i64) -> ImportResult<Connection> {
    let mut conv = Connection::open_in_memory()?;
    storage::harden(&conv)?;
    // The page size of an empty database is set by the first write.
    conv.execute_batch(&format!("PRAGMA page_size = {page_size};"))?;
    for sql in &storage::MIGRATIONS[..version] {
        conv.execute_batch(sql)?;
    }
    conv.execute_batch("ATTACH ':memory:' AS img;")?;
    conv.deserialize_read_exact(c"img", image, image.len(), true)?;
    let tx = conv.transaction()?;
    for (kind, name, _, _) in schema {
        if kind == "table" {
            // Names come from the reference schema, never from the image.
            tx.execute_batch(&format!(
                "DELETE FROM main.\"{name}\"; INSERT INTO main.\"{name}\" SELECT * FROM img.\"{name}\";"
            ))?;
        }
    }
    tx.execute_batch(&format!("PRAGMA main.user_version = {version};"))?;
    tx.commit()?;
    conv.execute_batch("DETACH img;")?;
    Ok(conv)
}

/// Copies the checked `scratch` database over `live` page by page (SQLite's
/// backup), so a file database stays a file. All pages go in one step:
/// `Backup::run_to_completion` sleeps between steps, and `thread::sleep`
/// panics on wasm32-unknown-unknown ("can't sleep"), which made every image
/// over its first 1024 pages impossible to import in the WASM build. The
/// live connection is the service's own and held under its lock, so the
/// step is never busy; if it ever is, that is an error, not a wait.
pub fn copy_into(scratch: &Connection, live: &mut Connection) -> ImportResult<()> {
    use rusqlite::backup::{Backup, StepResult};
    let backup = Backup::new(scratch, live)?;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More => continue,
            StepResult::Busy | StepResult::Locked => {
                return Err(ImportError::Internal("the live database is locked; the image was not copied".into()));
            }
            _ => return Err(ImportError::Internal("unexpected result of SQLite backup step".into())),
        }
    }
}
