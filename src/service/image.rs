//! The whole database as bytes: export and import (SQLite only).

use super::Service;
use crate::error::ApiError;
use crate::ratelimit::RateLimiter;
use crate::route::{AdminMethod, IMAGE_MEDIA_TYPE};
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

impl Service {
    /// Sets the host's own storage figures that `POST
    /// /admin/getStorageStats` reports under `host` (replacing any earlier
    /// hook; `None` reports none).
    pub fn set_host_stats(&self, hook: Option<super::HostStats>) {
        *self.ops.host_stats.write().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// The answer to a host method on the whole database
    /// ([`AdminMethod::whole_database`]) whose credential was checked:
    /// outside any transaction, as the library calls are.
    ///
    /// - `exportDatabase` (body: empty or `{}`): 200 with the image,
    ///   `Content-Type: application/vnd.sqlite3`;
    /// - `importDatabase` (body: the image, `Content-Type:
    ///   application/vnd.sqlite3` or `application/octet-stream`, at most
    ///   `max_import_bytes`): `{"ok":true,"result":true}`, or 400
    ///   `invalid_request` naming why the image was refused, nothing
    ///   changed;
    /// - `getStorageStats` (body: empty or `{}`): the commit figures since
    ///   the service opened and the host's own (`host`, see
    ///   [`Service::set_host_stats`]).
    pub(super) fn answer_whole_database(&self, method: AdminMethod, req: &crate::http::Request<'_>) -> Vec<u8> {
        let out = match method {
            AdminMethod::ExportDatabase => crate::methods::params::parse_body(&req.body)
                .and_then(|_| self.export_database())
                .map(|image| crate::http::typed_response(IMAGE_MEDIA_TYPE, &[("Cache-Control", "no-store")], &image)),
            AdminMethod::ImportDatabase => self.import_database(&req.body).map(|()| crate::http::ok_response(b"true")),
            AdminMethod::GetStorageStats => crate::methods::params::parse_body(&req.body)
                .and_then(|_| crate::methods::to_json(&self.storage_stats()))
                .map(|json| crate::http::ok_response(&json)),
            _ => Err(ApiError::method_not_found()),
        };
        out.unwrap_or_else(ApiError::into_response)
    }

    /// The most body bytes a host that reads a body whole before the core
    /// sees it (the WASM fetch adapter) reads of a request for `path` with
    /// this `Authorization` header: `max_body_bytes`, except for
    /// `importDatabase` with the host credential, whose image may be as
    /// large as `max_import_bytes`. The credential is checked before such
    /// a body is read, so nobody without it makes the host hold more than
    /// `max_body_bytes`. (The servers' framers hold every body to
    /// `max_body_bytes`: they import images up to that size.)
    pub fn body_limit(&self, path: &str, authorization: Option<&[u8]>) -> usize {
        let max = self.config.max_body_bytes;
        if path == crate::route::IMPORT_PATH && crate::rules::auth::admin(authorization, &self.admin_hash).is_ok() {
            self.config.max_import_bytes.max(max)
        } else {
            max
        }
    }

    /// The result of `getStorageStats`.
    fn storage_stats(&self) -> serde_json::Value {
        let c = self.commit_stats();
        let hook = self.ops.host_stats.read().unwrap_or_else(|e| e.into_inner()).clone();
        // A host hook that panics reports nothing rather than failing the call.
        let host: serde_json::Map<String, serde_json::Value> = hook
            .and_then(|h| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h())).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::from(v)))
            .collect();
        serde_json::json!({
            "requests": c.requests,
            "transactions": c.groups,
            "durable_commits": c.durable_commits,
            "round_trips": c.round_trips,
            "host": host,
        })
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
        ImportError::Database(e) => ApiError::from(crate::store::StoreError::from(e)),
        ImportError::Internal(why) => ApiError::internal(why),
        ImportError::NoImage => sqlite_only(),
    }
}
