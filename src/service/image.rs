//! The whole database as bytes: export and import (SQLite only).

use super::Service;
use crate::error::ApiError;
use crate::ratelimit::RateLimiter;
use crate::txn::TxEffects;

impl Service {
    /// Serializes the whole database (SQLite's serialize), e.g. to persist a
    /// WASM service in IndexedDB or a KV store.
    /// The JS face (wasm: `exportDatabase`) calls it.
    pub fn export_database(&self) -> Result<Vec<u8>, ApiError> {
        let mut inner = self.lock();
        let data = crate::store::import::export(&mut inner.conn).map_err(import_error)?;
        let seen = self.seen();
        drop(inner);
        if let Some(wal) = &self.db.wal {
            wal.sync_to(seen).map_err(|e| ApiError::commit_outcome_unknown(&e))?;
        }
        Ok(data)
    }

    /// Replaces the whole database with bytes from [`Service::export_database`].
    /// The image is untrusted: it must hold exactly botspace's schema (no
    /// extra triggers, views or tables), pass SQLite's integrity check, stay
    /// within `max_import_bytes` and hold only well-formed events; a page
    /// size other than the live one is converted. It is migrated before it
    /// replaces anything. Any refusal is a 400 and changes nothing.
    /// The JS face (wasm: `importDatabase`) calls it.
    pub fn import_database(&self, bytes: &[u8]) -> Result<(), ApiError> {
        let page_size: i64 = {
            let inner = self.lock();
            crate::store::import::live_page_size(&inner.conn).map_err(import_error)?
        };
        let scratch =
            crate::store::import::prepare(bytes, page_size, self.config.max_import_bytes).map_err(import_error)?;
        let mut guard = self.lock();
        let inner = &mut *guard;
        // Copy into the live connection so a file database stays a file.
        crate::store::import::replace_live(&scratch, &mut inner.conn).map_err(import_error)?;
        drop(scratch);
        inner.bot_cache.clear();
        inner.rate = RateLimiter::default();
        // Open gateway connections belong to the old database: close them
        // all (4004, reconnect) and wake their hosts.
        let bots = self.gateway.reset();
        drop(guard);
        self.apply_effects(TxEffects { revoked: bots, ..TxEffects::default() });
        Ok(())
    }
}

/// Export and import are SQLite's serialize and backup; a PostgreSQL
/// store is dumped and restored with its own tools.
fn sqlite_only() -> ApiError {
    ApiError::invalid_request(
        "export_database and import_database work on SQLite stores only; use pg_dump and pg_restore for PostgreSQL",
    )
}

/// A refused image is the host's mistake (400); a failure on this side
/// answers as any storage failure does.
fn import_error(e: crate::store::import::ImportError) -> ApiError {
    use crate::store::import::ImportError;
    match e {
        ImportError::Refused(why) => ApiError::invalid_request(why),
        ImportError::Database(e) => ApiError::from(crate::store::StorageError::from(e)),
        ImportError::Internal(why) => ApiError::internal(why),
        ImportError::NoImage => sqlite_only(),
    }
}
