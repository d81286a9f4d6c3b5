//! The service: one SQLite connection behind a mutex, the request pipeline
//! (transport → auth → method), transactions with group commit, and the
//! effects that may only happen after a commit (wake-ups, gateway closes).

use crate::auth;
use crate::clock::Clock;
use crate::config::{ClockKind, Config};
use crate::error::{ApiError, ApiResult};
use crate::http::{self, Request};
use crate::methods;
use crate::model::Bot;
use crate::ratelimit::RateLimiter;
use crate::storage::{self, StorageError};
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Called with a bot id after a commit that gave that bot new events, or
/// closed its gateway connections. It runs on the thread that made the
/// change, after the service's lock is released, and must not block.
pub type WakeHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Why a service could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Effects of the current transaction, applied only after it commits.
#[derive(Default)]
pub(crate) struct TxEffects {
    /// Bots that got events.
    pub woken: Vec<String>,
    /// Bots whose gateway connections must close with 4004.
    pub revoked: Vec<String>,
    /// A bot row changed: the auth cache must be dropped if this rolls back.
    pub bots_touched: bool,
}

pub(crate) struct Inner {
    pub conn: Connection,
    /// Token hash → bot, for authentication without a query.
    pub bot_cache: auth::DigestMap<Arc<Bot>>,
    pub rate: RateLimiter,
    pub fx: TxEffects,
    pub last_prune_ms: u64,
}

/// Everything a method needs while it runs inside a transaction.
pub(crate) struct Ctx<'a> {
    pub conn: &'a Connection,
    pub cfg: &'a Config,
    pub clock: &'a Clock,
    pub now_ms: u64,
    pub rate: &'a mut RateLimiter,
    pub fx: &'a mut TxEffects,
    pub bot_cache: &'a mut auth::DigestMap<Arc<Bot>>,
}

impl Ctx<'_> {
    /// Unix seconds, the unit of message dates.
    pub fn now_s(&self) -> i64 {
        (self.now_ms / 1000) as i64
    }

    /// Logs an event of this transaction (see [`crate::events::emit`]).
    pub fn emit(&mut self, ev: crate::events::Event<'_>) -> ApiResult<()> {
        crate::events::emit(self.conn, self.now_ms, ev, &mut self.fx.woken)
    }
}

/// Shared state the gateway reads without the database lock.
#[derive(Default)]
pub(crate) struct GatewayState {
    /// Open connections per bot.
    pub open: HashMap<String, u32>,
    /// Bumped when a bot's token rotates or it is suspended; connections
    /// opened under an older epoch close with 4004.
    pub epoch: HashMap<String, u64>,
    /// Bumped when the whole database is replaced: every connection closes.
    pub generation: u64,
}

impl GatewayState {
    /// What a connection must still see to stay open.
    pub fn epoch_of(&self, bot_id: &str) -> (u64, u64) {
        (self.generation, self.epoch.get(bot_id).copied().unwrap_or(0))
    }
}

/// A botspace service. `Send + Sync`: share it behind an `Arc` and call it
/// from any number of threads; writes are serialized on one SQLite connection.
pub struct Service {
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) wake: RwLock<Option<WakeHook>>,
    pub(crate) gateway: Mutex<GatewayState>,
    /// SHA-256 of the admin secret, compared in constant time.
    admin_hash: [u8; 32],
}

/// A parsed request, routed and past the transport checks.
pub(crate) struct Routed<'a> {
    pub req: Request<'a>,
    pub admin: bool,
    pub name: &'a str,
}

const PRUNE_EVERY_MS: u64 = 60_000;

impl Service {
    /// Opens a service with the clock the configuration names.
    pub fn open(config: Config) -> Result<Service, OpenError> {
        let clock = match config.clock {
            ClockKind::System => Clock::System,
            ClockKind::Manual => Clock::manual(),
        };
        Service::open_with_clock(config, clock)
    }

    /// Opens a service reading time from `clock` (e.g. `Date.now()` in WASM).
    pub fn open_with_clock(config: Config, clock: Clock) -> Result<Service, OpenError> {
        config.validate()?;
        let conn = storage::open(&config)?;
        let admin_hash = auth::sha256(config.admin_secret.as_bytes());
        Ok(Service {
            inner: Mutex::new(Inner {
                conn,
                bot_cache: auth::DigestMap::default(),
                rate: RateLimiter::default(),
                fx: TxEffects::default(),
                last_prune_ms: 0,
            }),
            config,
            clock,
            wake: RwLock::new(None),
            gateway: Mutex::new(GatewayState::default()),
            admin_hash,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Current time of the service's clock, Unix milliseconds. Hosts pass it
    /// to gateway `poll` so a manual clock drives heartbeats too.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Registers (or with `None` removes) the wake-up hook.
    pub fn set_wake_hook(&self, hook: Option<WakeHook>) {
        *self.wake.write().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Where the next request in `buf` ends (see [`http::Framing`]).
    pub fn frame_request(&self, buf: &[u8]) -> http::Framing {
        match http::frame_request(buf, self.config.max_body_bytes) {
            http::Framing::Invalid(resp) => {
                // A wrong method (405) outranks the length checks framing
                // makes from the head alone (411/413), as in handle_request.
                if let Some(Err(e)) = http::request_target(buf).map(|(m, p)| check_target(m, p)) {
                    if e.status == 405 {
                        return http::Framing::Invalid(e.into_response());
                    }
                }
                http::Framing::Invalid(resp)
            }
            f => f,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                // A panic inside a transaction: make sure nothing half-done survives.
                let mut g = poisoned.into_inner();
                if !g.conn.is_autocommit() {
                    let _ = g.conn.execute_batch("ROLLBACK");
                }
                g.bot_cache.clear();
                g.fx = TxEffects::default();
                g
            }
        }
    }

    /// One complete HTTP/1.1 request in, one complete HTTP/1.1 response out.
    pub fn handle_request(&self, request: &[u8]) -> Vec<u8> {
        let routed = match self.route(request) {
            Ok(r) => r,
            Err(e) => return e.into_response(),
        };
        let mut inner = self.lock();
        let out = self.run_one(&mut inner, &routed);
        let fx = self.take_effects(&mut inner);
        drop(inner);
        self.apply_effects(fx);
        out
    }

    /// Many requests, committed together in one transaction (group commit).
    /// Each gets exactly the answer it would get alone. Methods validate
    /// before they write, so a refused request has written nothing and needs
    /// no savepoint (savepoints would cost a third of the batch). A request
    /// that fails *after* writing can only be a storage failure: then the
    /// whole group rolls back and every request that had succeeded, and that
    /// one, answer 500 — nothing was committed, all are safe to retry.
    pub fn handle_batch(&self, requests: &[&[u8]]) -> Vec<Vec<u8>> {
        let routed: Vec<Result<Routed<'_>, ApiError>> = requests.iter().map(|r| self.route(r)).collect();
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(requests.len());
        let mut guard = self.lock();
        let inner = &mut *guard;
        let now_ms = self.clock.now_ms();
        if let Err(e) = exec(&inner.conn, "BEGIN IMMEDIATE") {
            let e = ApiError::from(e);
            // A request refused by routing gets that refusal, as alone.
            return routed.iter().map(|r| r.as_ref().err().unwrap_or(&e).clone().into_response()).collect();
        }
        let mut ok = Vec::with_capacity(requests.len());
        let mut failure: Option<ApiError> = None;
        for r in &routed {
            let routed = match r {
                Err(e) => {
                    out.push(e.clone().into_response());
                    ok.push(false);
                    continue;
                }
                Ok(routed) => routed,
            };
            let mark = inner.rate.mark();
            let touched = inner.fx.bots_touched;
            let (w, v) = (inner.fx.woken.len(), inner.fx.revoked.len());
            let changes = inner.conn.total_changes();
            match self.dispatch(inner, routed, now_ms) {
                Ok(body) => {
                    out.push(body);
                    ok.push(true);
                }
                // SQLite may end the transaction itself on an error (FULL,
                // IOERR, RAISE(ROLLBACK)...), undoing the group's earlier
                // writes: later requests would then commit one by one.
                Err(e) if inner.conn.total_changes() != changes || inner.conn.is_autocommit() => {
                    // Failed after writing: only the whole group can be undone.
                    out.push(Vec::new());
                    ok.push(true);
                    failure = Some(if e.status == 500 { e } else { ApiError::internal(e.description) });
                    break;
                }
                Err(e) => {
                    inner.rate.rollback_to(mark);
                    inner.fx.woken.truncate(w);
                    inner.fx.revoked.truncate(v);
                    if inner.fx.bots_touched && !touched {
                        inner.bot_cache.clear();
                    }
                    out.push(e.into_response());
                    ok.push(false);
                }
            }
        }
        let result = match failure {
            Some(e) => {
                self.abort(inner);
                Err(e)
            }
            None => self.commit(inner, now_ms),
        };
        match result {
            Ok(()) => {
                let fx = self.take_effects(inner);
                // Hooks run without the lock: a hook may poll a connection.
                drop(guard);
                self.apply_effects(fx);
            }
            Err(e) => {
                for (slot, succeeded) in out.iter_mut().zip(ok) {
                    if succeeded {
                        *slot = e.clone().into_response();
                    }
                }
                // Requests after the failing one were never run.
                let e = ApiError::internal("an earlier request of the batch failed in storage; nothing was written");
                while out.len() < requests.len() {
                    let own = routed[out.len()].as_ref().err();
                    out.push(own.unwrap_or(&e).clone().into_response());
                }
            }
        }
        out
    }

    /// Transport checks (405 → 411/413 → 415) and routing.
    pub(crate) fn route<'a>(&self, request: &'a [u8]) -> ApiResult<Routed<'a>> {
        let req = http::parse_request(request, self.config.max_body_bytes)?;
        let (admin, name) = check_target(req.method, req.path)?;
        if let Some(e) = &req.body_error {
            return Err(e.clone());
        }
        if !req.body.is_empty() || req.header("content-type").is_some() {
            let ct = req.header_str("content-type").unwrap_or("");
            let mime = ct.split(';').next().unwrap_or("").trim();
            if !mime.eq_ignore_ascii_case("application/json") {
                return Err(ApiError::new(415, "unsupported_media_type", "Content-Type must be application/json"));
            }
        }
        let known = if admin { methods::admin::exists(name) } else { name == "gateway" || methods::bot::exists(name) };
        if !known {
            return Err(ApiError::new(404, "method_not_found", format!("unknown method {name}")));
        }
        Ok(Routed { req, admin, name })
    }

    /// Runs one routed request in its own transaction.
    fn run_one(&self, inner: &mut Inner, routed: &Routed<'_>) -> Vec<u8> {
        // getMe reads a cached identity: no transaction, and no clock (a
        // host clock may be a call out of WebAssembly); it reads no time.
        if !routed.admin && routed.name == "getMe" {
            return match self.dispatch(inner, routed, 0) {
                Ok(b) => b,
                Err(e) => e.into_response(),
            };
        }
        let now_ms = self.clock.now_ms();
        if let Err(e) = exec(&inner.conn, "BEGIN IMMEDIATE") {
            return ApiError::from(e).into_response();
        }
        let mark = inner.rate.mark();
        let changes = inner.conn.total_changes();
        match self.dispatch(inner, routed, now_ms) {
            Ok(body) => match self.commit(inner, now_ms) {
                Ok(()) => body,
                Err(e) => e.into_response(),
            },
            Err(e) => {
                // handle_batch relies on this: a refusal writes nothing.
                debug_assert!(
                    e.status == 500 || inner.conn.total_changes() == changes,
                    "{} wrote before refusing with {}",
                    routed.name,
                    e.code
                );
                let _ = exec(&inner.conn, "ROLLBACK");
                inner.rate.rollback_to(mark);
                if inner.fx.bots_touched {
                    inner.bot_cache.clear();
                }
                inner.fx = TxEffects::default();
                e.into_response()
            }
        }
    }

    /// Commits, pruning old rows now and then first. On failure rolls back
    /// everything, including rate-limit slots and caches.
    fn commit(&self, inner: &mut Inner, now_ms: u64) -> ApiResult<()> {
        if now_ms.saturating_sub(inner.last_prune_ms) >= PRUNE_EVERY_MS {
            inner.last_prune_ms = now_ms;
            let retention = self.config.event_retention_s.saturating_mul(1000);
            if let Err(e) = crate::events::prune(&inner.conn, now_ms, retention) {
                self.abort(inner);
                return Err(e);
            }
        }
        match exec(&inner.conn, "COMMIT") {
            Ok(()) => {
                inner.rate.commit();
                Ok(())
            }
            Err(e) => {
                self.abort(inner);
                Err(e.into())
            }
        }
    }

    fn abort(&self, inner: &mut Inner) {
        let _ = exec(&inner.conn, "ROLLBACK");
        inner.rate.rollback_to(0);
        inner.bot_cache.clear();
        inner.fx = TxEffects::default();
    }

    /// Runs a method, catching a panic so it becomes a 500 and a rollback
    /// instead of crossing the API boundary.
    fn dispatch(&self, inner: &mut Inner, routed: &Routed<'_>, now_ms: u64) -> ApiResult<Vec<u8>> {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ctx = Ctx {
                conn: &inner.conn,
                cfg: &self.config,
                clock: &self.clock,
                now_ms,
                rate: &mut inner.rate,
                fx: &mut inner.fx,
                bot_cache: &mut inner.bot_cache,
            };
            if routed.admin {
                self.check_admin(&routed.req)?;
                methods::admin::call(&mut ctx, routed.name, &routed.req)
            } else if routed.name == "gateway" {
                let bot = authenticate(&mut ctx, &routed.req)?;
                Err(crate::gateway::precheck(self, &routed.req, &bot, false).err().unwrap_or_else(|| {
                    ApiError::new(
                        426,
                        "upgrade_required",
                        "handle_request cannot switch protocols: pass gateway upgrades to accept_gateway",
                    )
                    .with_header("Upgrade", "websocket".into())
                }))
            } else {
                let bot = authenticate(&mut ctx, &routed.req)?;
                methods::bot::call(&mut ctx, &bot, routed.name, &routed.req)
            }
        }));
        match result {
            Ok(r) => r.map(|res| http::ok_response(&res)),
            Err(_) => Err(ApiError::internal("a bug was caught; the request was rolled back")),
        }
    }

    fn check_admin(&self, req: &Request<'_>) -> ApiResult<()> {
        let cred = auth::credential(req.header("authorization"), "Admin")?;
        if auth::constant_time_eq(&auth::sha256(cred), &self.admin_hash) {
            Ok(())
        } else {
            Err(ApiError::invalid_token())
        }
    }

    /// Takes what the last commit changed. Called with the database lock
    /// held, so revocations take effect before any later request can open
    /// a gateway connection: one opened with a new token is never closed for
    /// the rotation that issued it.
    pub(crate) fn take_effects(&self, inner: &mut Inner) -> TxEffects {
        let fx = std::mem::take(&mut inner.fx);
        if !fx.revoked.is_empty() {
            let mut gw = self.gateway.lock().unwrap_or_else(|e| e.into_inner());
            for bot in &fx.revoked {
                *gw.epoch.entry(bot.clone()).or_insert(0) += 1;
            }
        }
        fx
    }

    /// Calls the wake hook for what a commit changed; without the lock.
    pub(crate) fn apply_effects(&self, mut fx: TxEffects) {
        if fx.woken.is_empty() && fx.revoked.is_empty() {
            return;
        }
        fx.woken.append(&mut fx.revoked);
        fx.woken.sort_unstable();
        fx.woken.dedup();
        let hook = self.wake.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(hook) = hook {
            for bot in &fx.woken {
                hook(bot);
            }
        }
    }

    /// Serializes the whole database (SQLite's serialize), e.g. to persist a
    /// WASM service in IndexedDB or a KV store.
    pub fn export_database(&self) -> Result<Vec<u8>, ApiError> {
        let mut inner = self.lock();
        let data = inner.conn.serialize(rusqlite::MAIN_DB)?;
        Ok(data.to_vec())
    }

    /// Replaces the whole database with bytes from [`Service::export_database`].
    /// The bytes are checked and migrated; on any error the current database
    /// stays as it was.
    pub fn import_database(&self, bytes: &[u8]) -> Result<(), ApiError> {
        // An image of a WAL file says so in header bytes 18-19; an in-memory
        // copy must read it as a rollback-journal database.
        let mut image_bytes = bytes.to_vec();
        if image_bytes.len() >= 100 && image_bytes[18] == 2 && image_bytes[19] == 2 {
            image_bytes[18] = 1;
            image_bytes[19] = 1;
        }
        let bytes = &image_bytes[..];
        // Validate in a scratch connection first so a bad image changes nothing.
        let mut scratch = Connection::open_in_memory()?;
        scratch
            .deserialize_read_exact(rusqlite::MAIN_DB, bytes, bytes.len(), false)
            .map_err(|e| ApiError::invalid_request(format!("not a botspace database image: {e}")))?;
        let check: String = scratch
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| ApiError::invalid_request(format!("not a botspace database image: {e}")))?;
        if check != "ok" {
            return Err(ApiError::invalid_request(format!("database image fails its integrity check: {check}")));
        }
        let has_bots: i64 = scratch
            .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'bots'", [], |r| r.get(0))
            .map_err(|e| ApiError::invalid_request(format!("not a botspace database image: {e}")))?;
        let version: i64 = scratch.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if has_bots == 0 || version < 1 {
            return Err(ApiError::invalid_request("not a botspace database image"));
        }
        let supported = storage::MIGRATIONS.len() as i64;
        if version > supported {
            return Err(ApiError::invalid_request(format!(
                "the database image has schema version {version}; this library reads up to {supported}"
            )));
        }
        // Bring the image up to date before it replaces anything, so a
        // failed migration leaves the live database as it was.
        storage::migrate(&scratch).map_err(ApiError::internal)?;
        let mut guard = self.lock();
        let inner = &mut *guard;
        // Copy into the live connection so a file database stays a file.
        {
            let backup = rusqlite::backup::Backup::new(&scratch, &mut inner.conn)?;
            backup.run_to_completion(1024, std::time::Duration::ZERO, None)?;
        }
        drop(scratch);
        inner.bot_cache.clear();
        inner.rate = RateLimiter::default();
        // Open gateway connections belong to the old database: close them
        // all (4004, reconnect) and wake their hosts.
        let bots: Vec<String> = {
            let mut gw = self.gateway.lock().unwrap_or_else(|e| e.into_inner());
            gw.generation += 1;
            gw.open.keys().cloned().collect()
        };
        drop(guard);
        self.apply_effects(TxEffects { revoked: bots, ..TxEffects::default() });
        Ok(())
    }
}

/// Authenticates `Authorization: Bot <token>` against the cache, then the
/// database. The lookup is by SHA-256 of the presented token, so what an
/// index lookup may leak in timing is about a hash, not the token.
pub(crate) fn authenticate(ctx: &mut Ctx<'_>, req: &Request<'_>) -> ApiResult<Arc<Bot>> {
    let token = auth::credential(req.header("authorization"), "Bot")?;
    let hash = auth::sha256(token);
    if let Some(b) = ctx.bot_cache.get(&hash) {
        return Ok(b.clone());
    }
    match Bot::by_token_hash(ctx.conn, &hash)? {
        Some(bot) => {
            let bot = Arc::new(bot);
            if ctx.bot_cache.len() > 100_000 {
                ctx.bot_cache.clear();
            }
            ctx.bot_cache.insert(hash, bot.clone());
            Ok(bot)
        }
        None => Err(ApiError::invalid_token()),
    }
}

/// The route of a request target and the transport's first check: unknown
/// paths are 404, a method other than POST (GET for the gateway) is 405.
fn check_target<'a>(method: &str, path: &'a str) -> ApiResult<(bool, &'a str)> {
    let (admin, name) = if let Some(n) = path.strip_prefix("/bot/") {
        (false, n)
    } else if let Some(n) = path.strip_prefix("/admin/") {
        (true, n)
    } else {
        return Err(ApiError::new(404, "method_not_found", format!("no method at {path}")));
    };
    if !admin && name == "gateway" {
        if method != "GET" {
            return Err(ApiError::new(
                405,
                "method_not_allowed",
                "the gateway is opened with GET and a WebSocket upgrade",
            )
            .with_header("Allow", "GET".into()));
        }
    } else if method != "POST" {
        return Err(ApiError::new(405, "method_not_allowed", format!("{name} accepts POST only"))
            .with_header("Allow", "POST".into()));
    }
    Ok((admin, name))
}

pub(crate) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("database", &self.config.database).finish_non_exhaustive()
    }
}
