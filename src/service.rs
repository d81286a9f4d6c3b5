//! The service: one SQLite connection behind a mutex, the request pipeline
//! (transport → auth → method), transactions with group commit, and the
//! effects that may only happen after a commit (wake-ups, gateway closes).

use crate::auth;
use crate::clock::Clock;
use crate::config::{ClockKind, Config};
use crate::error::{ApiError, ApiResult};
use crate::gateway::{self, GatewayAccept, GatewaySession, Registry};
use crate::http::{self, Request};
use crate::methods;
use crate::random::Random;
use crate::ratelimit::RateLimiter;
use crate::route::{BotMethod, Route, Target};
use crate::store;
use crate::txn::{Db, Inner, TxEffects};
use crate::ErrorCode;
use std::sync::{Arc, MutexGuard, RwLock};

/// Called with a bot id after a commit that gave that bot new events, or
/// closed its gateway connections. It runs on the thread that ran the
/// commit (with group commit, the thread of one of the grouped requests,
/// not always the one whose request gave the event), after the answers are
/// out and the service's lock is released, and must not block. A hook that
/// panics is caught: the other bots of the commit are still woken.
pub type WakeHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Why a service could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Storage(#[from] crate::error::StorageError),
}

/// A botspace service. `Send + Sync`: share it behind an `Arc` and call it
/// from any number of threads; writes are serialized on one SQLite connection.
pub struct Service {
    config: Config,
    clock: Clock,
    random: Random,
    db: Arc<Db>,
    wake: RwLock<Option<WakeHook>>,
    gateway: Arc<Registry>,
    group: crate::group::Group,
    admin_throttle: crate::throttle::AdminThrottle,
    /// Bot requests of the last hour, for the admin console.
    activity: crate::console::Activity,
    /// SHA-256 of the admin secret, compared in constant time.
    admin_hash: [u8; 32],
    /// A commit that wakes or revokes bots notifies the other nodes
    /// (PostgreSQL with `listen_notify`).
    notify: bool,
    /// A database server shared with other nodes: a group's requests run
    /// in lock order (see [`Service::lock_order`]).
    shared_store: bool,
    /// Where other nodes' notifications are received (same condition).
    #[cfg(feature = "postgres")]
    listen: Option<Listen>,
}

/// The listening side of LISTEN/NOTIFY.
#[cfg(feature = "postgres")]
struct Listen {
    listener: std::sync::Mutex<store::postgres::Listener>,
    /// The main connection's server process: its notifications are this
    /// node's own commits, already applied.
    own_pid: Arc<std::sync::atomic::AtomicI32>,
}

/// A parsed request, routed and past the transport checks.
pub(crate) struct Routed<'a> {
    pub req: Request<'a>,
    pub route: Route,
    /// Who sent it, when the host said (the audit log records it).
    pub peer: Option<&'a str>,
}

const PRUNE_EVERY_MS: u64 = 60_000;

/// Reruns of a transaction that met a serialization failure or deadlock.
const MAX_RETRIES: u32 = 8;

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
        let conn = store::open(&config)?;
        let admin_hash = auth::sha256(config.admin_secret.as_bytes());
        let shared_store = conn.dialect() == store::Dialect::Postgres;
        let notify = shared_store && config.listen_notify;
        #[cfg(feature = "postgres")]
        let listen = match &conn {
            store::Conn::Postgres(pg) if notify => Some(Listen {
                listener: std::sync::Mutex::new(store::postgres::Listener::new(&config)),
                own_pid: pg.backend_pid(),
            }),
            _ => None,
        };
        Ok(Service {
            db: Arc::new(Db::new(conn, config.synchronous)),
            random: config.random_seed.map_or(Random::Os, Random::seeded),
            config,
            clock,
            wake: RwLock::new(None),
            gateway: Arc::new(Registry::default()),
            group: crate::group::Group::default(),
            admin_throttle: crate::throttle::AdminThrottle::default(),
            activity: crate::console::Activity::default(),
            admin_hash,
            notify,
            shared_store,
            #[cfg(feature = "postgres")]
            listen,
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
        http::frame_request(buf, self.config.max_body_bytes)
    }

    /// A framer for one connection, with this service's body limit: it
    /// resumes where its last call stopped (see [`http::RequestFramer`]).
    pub fn request_framer(&self) -> http::RequestFramer {
        http::RequestFramer::new(self.config.max_body_bytes)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.db.lock()
    }

    /// One complete HTTP/1.1 request in, one complete HTTP/1.1 response out.
    ///
    /// Requests that arrive from several threads while a commit is under
    /// way are committed together, in one transaction and one fsync (group
    /// commit, see [`crate::group`]); each is answered exactly as if it ran
    /// alone. A request that finds nothing under way runs at once.
    pub fn handle_request(&self, request: &[u8]) -> Vec<u8> {
        match self.route(request) {
            Ok(Routed { route: Route::Console(asset), req, .. }) => asset.response(req.header_str("if-none-match")),
            Ok(routed) => self.handle_routed(request, routed),
            Err(e) => e.into_response(),
        }
    }

    /// [`Service::handle_request`] for a host that knows who sent the
    /// request (`peer`: an IP address, or any stable client key): failed
    /// admin authentication is then throttled per peer — 10 failures at
    /// once, then one every 6 s; beyond that 429 `rate_limited` with scope
    /// `admin_auth`, whatever the credential. A host-API change is recorded
    /// in the audit log with `peer`; host requests here run in their own
    /// transaction, not in a group commit.
    pub fn handle_request_from(&self, request: &[u8], peer: &str) -> Vec<u8> {
        let mut routed = match self.route(request) {
            Ok(Routed { route: Route::Console(asset), req, .. }) => {
                return asset.response(req.header_str("if-none-match"));
            }
            Ok(r) => r,
            Err(e) => return e.into_response(),
        };
        if let Route::Admin(_) = routed.route {
            let now_ms = self.clock.now_ms();
            if let Err(wait_ms) = self.admin_throttle.check(peer, now_ms) {
                return ApiError::rate_limited(wait_ms, "admin_auth").into_response();
            }
            if let Err(e) = self.check_admin(&routed.req) {
                self.admin_throttle.failed(peer, now_ms);
                return e.into_response();
            }
            // The audit log names the peer: the request runs alone, in its
            // own transaction (a group carries request bytes only). Host
            // calls are few; group commit is for bot traffic.
            routed.peer = Some(peer);
            let mut inner = self.lock();
            let out = self.run_one(&mut inner, &routed);
            let fx = self.take_effects(&mut inner);
            drop(inner);
            let mut outs = [out];
            self.settle(fx.seen, &mut outs);
            self.apply_effects(fx);
            let [out] = outs;
            return out;
        }
        self.handle_routed(request, routed)
    }

    fn handle_routed(&self, request: &[u8], routed: Routed<'_>) -> Vec<u8> {
        // getMe reads a cached identity and needs no transaction: it never
        // waits for a group.
        if routed.route == Route::Bot(BotMethod::GetMe) {
            let mut inner = self.lock();
            let mut out = [self.run_one(&mut inner, &routed)];
            let seen = self.seen();
            drop(inner);
            self.settle(seen, &mut out);
            let [out] = out;
            return out;
        }
        crate::group::submit(&self.group, self, request, || {
            let mut inner = self.lock();
            let out = self.run_one(&mut inner, &routed);
            (out, self.take_effects(&mut inner))
        })
    }

    /// One request in its own transaction; the effects to apply once the
    /// caller has published the answer.
    pub(crate) fn run_alone(&self, request: &[u8]) -> (Vec<u8>, TxEffects) {
        let routed = match self.route(request) {
            Ok(r) => r,
            Err(e) => return (e.into_response(), TxEffects::default()),
        };
        let mut inner = self.lock();
        let out = self.run_one(&mut inner, &routed);
        let fx = self.take_effects(&mut inner);
        (out, fx)
    }

    /// Holds every `handle_request` back until the returned guard is
    /// dropped; what queued meanwhile then commits as one group. A seam for
    /// tests that must form a group deterministically, not by timing.
    #[doc(hidden)]
    pub fn pause_commits(&self) -> CommitPause<'_> {
        self.group.pause();
        CommitPause(&self.group)
    }

    /// Counts of commits, for hosts' metrics: how many requests were
    /// written, in how many transactions, and the database round trips.
    pub fn commit_stats(&self) -> crate::group::CommitStats {
        let round_trips = self.lock().conn.round_trips();
        let (durable_commits, syncs) = self.db.wal.as_ref().map_or((0, 0), |w| w.counts());
        crate::group::CommitStats { round_trips, durable_commits, syncs, ..self.group.stats() }
    }

    /// Many requests, committed together in one transaction (group commit).
    /// Each gets exactly the answer it would get alone. Methods validate
    /// before they write, so a refused request has written nothing and needs
    /// no savepoint (savepoints would cost a third of the batch). A request
    /// that fails *after* writing can only be a storage failure: then the
    /// whole group rolls back and every request that had succeeded, and that
    /// one, answer 500 — nothing was committed, all are safe to retry.
    pub fn handle_batch(&self, requests: &[&[u8]]) -> Vec<Vec<u8>> {
        let (mut out, fx) = self.run_batch(requests);
        self.settle(fx.seen, &mut out);
        self.apply_effects(fx);
        out
    }

    /// [`Service::handle_batch`] without calling the wake hook: returns the
    /// effects to apply once the answers are out.
    pub(crate) fn run_batch(&self, requests: &[&[u8]]) -> (Vec<Vec<u8>>, TxEffects) {
        let mut attempt = 0;
        loop {
            let (out, fx, retry) = self.run_batch_once(requests);
            if retry && attempt < MAX_RETRIES {
                attempt += 1;
                continue;
            }
            return (out, fx);
        }
    }

    /// One attempt at a batch; `true` when it failed on a serialization
    /// failure or deadlock and may be rerun whole.
    fn run_batch_once(&self, requests: &[&[u8]]) -> (Vec<Vec<u8>>, TxEffects, bool) {
        let routed: Vec<Result<Routed<'_>, ApiError>> = requests.iter().map(|r| self.route(r)).collect();
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(requests.len());
        let mut guard = self.lock();
        let inner = &mut *guard;
        let now_ms = self.clock.now_ms();
        self.defer_sync(inner, true);
        if let Err(e) = inner.conn.begin() {
            self.defer_sync(inner, false);
            let e = ApiError::from(e);
            // A request refused by routing gets that refusal, as alone.
            let out = routed.iter().map(|r| r.as_ref().err().unwrap_or(&e).clone().into_response()).collect();
            return (out, TxEffects::default(), false);
        }
        let mut ok = Vec::with_capacity(requests.len());
        let mut failure: Option<ApiError> = None;
        let mut preauth = self.preauth(inner, &routed).into_iter();
        for r in &routed {
            let pre = preauth.next().flatten();
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
            let pending = inner.fx.updates.len();
            match self.dispatch(inner, routed, now_ms, pre) {
                Ok(body) => {
                    out.push(body);
                    ok.push(true);
                }
                // SQLite may end the transaction itself on an error (FULL,
                // IOERR, RAISE(ROLLBACK)...), undoing the group's earlier
                // writes: later requests would then commit one by one.
                Err(e)
                    if inner.conn.total_changes() != changes
                        || inner.fx.updates.len() != pending
                        || inner.conn.transaction_lost() =>
                {
                    // Failed after writing: only the whole group can be undone.
                    out.push(Vec::new());
                    ok.push(true);
                    // A lost database connection stays 503 storage_unavailable
                    // (nothing was committed); any other refusal after a
                    // write is a storage failure.
                    failure = Some(if matches!(e.status, 500 | 503) { e } else { ApiError::internal(e.description) });
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
        self.defer_sync(inner, false);
        let mut fx = TxEffects::default();
        match result {
            Ok(()) => {
                // Hooks run later, without the lock: a hook may poll a connection.
                fx = self.take_effects(inner);
            }
            Err(e) => {
                for (slot, succeeded) in out.iter_mut().zip(ok) {
                    if succeeded {
                        *slot = e.clone().into_response();
                    }
                }
                // Requests after the failing one were never run: the
                // database being unreachable is their answer too.
                let e = if matches!(e.code, ErrorCode::StorageUnavailable | ErrorCode::StorageFull) {
                    e
                } else {
                    ApiError::internal("an earlier request of the batch failed in storage; nothing was written")
                };
                while out.len() < requests.len() {
                    let own = routed[out.len()].as_ref().err();
                    out.push(own.unwrap_or(&e).clone().into_response());
                }
            }
        }
        let retry = guard.conn.take_retryable();
        drop(guard);
        (out, fx, retry)
    }

    /// On a shared store, what each bot request of a group will read
    /// first (its bot, and the chat it names with the bot's membership),
    /// read for the whole group in one round trip. Only for a group of bot
    /// requests: they change no bot, chat or membership, so reading it all
    /// before any of them runs reads what each would have read itself.
    /// Empty when it does not apply or the read failed (each request then
    /// reads for itself and meets the failure there).
    fn preauth(&self, inner: &Inner, routed: &[Result<Routed<'_>, ApiError>]) -> Vec<Option<crate::txn::Preauth>> {
        if !self.shared_store || routed.len() < 2 {
            return Vec::new();
        }
        let mut keys: Vec<Option<([u8; 32], String)>> = Vec::with_capacity(routed.len());
        for r in routed {
            keys.push(match r {
                Ok(Routed { route: Route::Bot(BotMethod::GetMe), .. }) | Err(_) => None,
                Ok(Routed { route: Route::Bot(_), req, .. }) => {
                    match (
                        auth::credential(req.header("authorization"), "Bot"),
                        methods::params::peek_chat_id(&req.body),
                    ) {
                        (Ok(token), Some(chat)) => Some((auth::sha256(token), chat)),
                        _ => None,
                    }
                }
                Ok(_) => return Vec::new(),
            });
        }
        let wanted: Vec<([u8; 32], &str)> = keys.iter().flatten().map(|(h, c)| (*h, c.as_str())).collect();
        if wanted.len() < 2 {
            return Vec::new();
        }
        let Ok(mut found) = crate::model::Bot::by_token_hashes_with_chats(&inner.conn, &wanted) else {
            return Vec::new();
        };
        let mut found = found.drain(..);
        keys.into_iter().map(|k| k.map(|(h, _)| (h, found.next().flatten()))).collect()
    }

    /// Transport checks (405 → 411/413 → 415) and routing.
    pub(crate) fn route<'a>(&self, request: &'a [u8]) -> ApiResult<Routed<'a>> {
        let req = http::parse_request(request, self.config.max_body_bytes)?;
        let target = Target::check(req.method, req.path)?;
        if let Some(e) = &req.body_error {
            return Err(e.clone());
        }
        if !req.body.is_empty() || req.header("content-type").is_some() {
            let ct = req.header_str("content-type").unwrap_or("");
            let mime = ct.split(';').next().unwrap_or("").trim();
            if !mime.eq_ignore_ascii_case("application/json") {
                return Err(ApiError::unsupported_media_type());
            }
        }
        let route = target.resolve(self.clock.is_manual())?;
        Ok(Routed { req, route, peer: None })
    }

    /// Runs one routed request in its own transaction.
    fn run_one(&self, inner: &mut Inner, routed: &Routed<'_>) -> Vec<u8> {
        // getMe reads a cached identity: no transaction, and no clock (a
        // host clock may be a call out of WebAssembly); it reads no time.
        if routed.route == Route::Bot(BotMethod::GetMe) {
            return match self.dispatch(inner, routed, 0, None) {
                Ok(b) => b,
                Err(e) => e.into_response(),
            };
        }
        let now_ms = self.clock.now_ms();
        let mut attempt = 0;
        loop {
            self.defer_sync(inner, true);
            let out = self.run_tx(inner, routed, now_ms);
            self.defer_sync(inner, false);
            // A PostgreSQL serialization failure or deadlock: nothing was
            // written, and a rerun usually goes through.
            if inner.conn.take_retryable() && attempt < MAX_RETRIES {
                attempt += 1;
                continue;
            }
            return out;
        }
    }

    /// One routed request in one transaction.
    fn run_tx(&self, inner: &mut Inner, routed: &Routed<'_>, now_ms: u64) -> Vec<u8> {
        if let Err(e) = inner.conn.begin() {
            return ApiError::from(e).into_response();
        }
        let mark = inner.rate.mark();
        let changes = inner.conn.total_changes();
        match self.dispatch(inner, routed, now_ms, None) {
            Ok(body) => match self.commit(inner, now_ms) {
                Ok(()) => body,
                Err(e) => e.into_response(),
            },
            Err(e) => {
                // handle_batch relies on this: a refusal writes nothing.
                // (A lost connection, 503, can come after a write: nothing
                // of the transaction was committed.)
                debug_assert!(
                    matches!(e.status, 500 | 503) || inner.conn.total_changes() == changes,
                    "{:?} wrote before refusing with {}",
                    routed.route,
                    e.code
                );
                let _ = inner.conn.rollback();
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
            let p = crate::events::Prune {
                retention_ms: retention,
                idempotency_ttl_ms: methods::IDEMPOTENCY_TTL_MS,
                max_unacked_events: self.config.max_unacked_events,
                max_unconfirmed_updates: self.config.max_unconfirmed_updates,
            };
            if let Err(e) = crate::events::prune(&inner.conn, now_ms, &p) {
                self.abort(inner);
                return Err(e);
            }
        }
        // Other nodes' sessions of the bots this commit woke or revoked
        // learn of it from a hint sent with the commit; nothing is sent
        // when no bot is affected.
        let notify = self.notify.then(|| notify_payload(&inner.fx)).flatten();
        match crate::events::commit_with_updates(&inner.conn, &mut inner.fx.updates, notify.as_deref()) {
            Ok(()) => {
                if let Some(wal) = &self.db.wal {
                    wal.note_commit();
                }
                inner.rate.commit();
                Ok(())
            }
            Err(e) => {
                self.abort(inner);
                Err(e)
            }
        }
    }

    fn abort(&self, inner: &mut Inner) {
        let _ = inner.conn.rollback();
        inner.rate.rollback_to(0);
        inner.bot_cache.clear();
        inner.fx = TxEffects::default();
    }

    /// Runs a method, catching a panic so it becomes a 500 and a rollback
    /// instead of crossing the API boundary.
    fn dispatch(
        &self,
        inner: &mut Inner,
        routed: &Routed<'_>,
        now_ms: u64,
        preauth: Option<crate::txn::Preauth>,
    ) -> ApiResult<Vec<u8>> {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let sessions = |bot_id: &str| self.gateway.open_count(bot_id);
            let mut ctx = inner.ctx(&self.config, &self.clock, &self.random, now_ms);
            ctx.preauth = preauth;
            ctx.host = crate::console::HostView {
                peer: routed.peer,
                activity: Some(&self.activity),
                sessions: Some(&sessions),
            };
            match routed.route {
                // Pages are answered before a transaction; a batch serves none.
                Route::Console(_) => Err(ApiError::method_not_found(routed.req.path)),
                Route::Admin(method) => {
                    self.check_admin(&routed.req)?;
                    methods::admin::call(&mut ctx, method, &routed.req)
                }
                Route::Gateway => {
                    let bot = ctx.authenticate(&routed.req, None)?;
                    gateway::check_upgrade(&self.gateway, &routed.req, &bot)?;
                    // Every check passed, but bytes in, bytes out cannot switch protocols.
                    Err(ApiError::upgrade_required())
                }
                Route::Bot(method) => {
                    // On a shared store the chat is read with the bot (the
                    // group may have read both already).
                    let chat = match (method, ctx.conn.dialect()) {
                        (BotMethod::GetMe, _) | (_, store::Dialect::Sqlite) => None,
                        _ if ctx.preauth.is_some() => None,
                        _ => methods::params::peek_chat_id(&routed.req.body),
                    };
                    let bot = ctx.authenticate(&routed.req, chat.as_deref())?;
                    let out = methods::bot::call(&mut ctx, &bot, method, &routed.req);
                    // getMe runs without a time (now_ms 0): the clock is read here.
                    let at = if now_ms == 0 { self.clock.now_ms() } else { now_ms };
                    let sent = out.is_ok() && method == BotMethod::SendMessage;
                    self.activity.record(&bot.id, at, out.as_ref().err().map(|e| e.code.as_str()), sent);
                    out
                }
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
        let mut fx = std::mem::take(&mut inner.fx);
        fx.seen = self.seen();
        if !fx.woken.is_empty() || !fx.revoked.is_empty() {
            self.gateway.after_commit(&fx.woken, &fx.revoked);
        }
        if fx.scrubbed {
            // secure_delete zeroed the text in the pages just written; the
            // WAL still holds the earlier page images. Copy the clean pages
            // back and truncate the WAL (a no-op for :memory:). A failure
            // here leaves the text until the next checkpoint, nothing worse.
            if let Some(c) = inner.conn.sqlite_ref() {
                let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            }
        }
        fx
    }

    /// What a holder of the database lock can see has committed (see
    /// [`crate::store::wal`]); 0 when commits sync themselves.
    fn seen(&self) -> u64 {
        self.db.wal.as_ref().map_or(0, |w| w.seen())
    }

    /// With a deferred WAL sync, the transaction about to start commits
    /// without an fsync (`on`), and every other write afterwards with one.
    /// If `NORMAL` cannot be set the commit simply syncs itself; `FULL`
    /// must come back, so an open transaction is rolled back first.
    fn defer_sync(&self, inner: &Inner, on: bool) {
        let (Some(_), Some(c)) = (&self.db.wal, inner.conn.sqlite_ref()) else { return };
        let set = |sql| c.prepare_cached(sql).and_then(|mut st| st.execute([])).map(|_| ());
        if on {
            let _ = set("PRAGMA synchronous = NORMAL");
        } else if set("PRAGMA synchronous = FULL").is_err() && !c.is_autocommit() {
            let _ = c.execute_batch("ROLLBACK");
            let _ = set("PRAGMA synchronous = FULL");
        }
    }

    /// Before answers leave: waits until every commit they may have seen
    /// is on disk. If the fsync fails, what was written may not survive a
    /// crash: each success becomes 503 `commit_outcome_unknown`.
    pub(crate) fn settle(&self, seen: u64, outs: &mut [Vec<u8>]) {
        let Some(wal) = &self.db.wal else { return };
        if let Err(e) = wal.sync_to(seen) {
            for out in outs.iter_mut().filter(|o| o.starts_with(b"HTTP/1.1 2")) {
                *out = ApiError::commit_outcome_unknown(&e).into_response();
            }
        }
    }

    /// Calls the wake hook for what a commit changed; without the lock.
    /// Then, with the answers out, runs a checkpoint if one is due.
    pub(crate) fn apply_effects(&self, mut fx: TxEffects) {
        self.wake_bots(&mut fx);
        if let Some(wal) = &self.db.wal {
            wal.checkpoint_if_due();
        }
    }

    fn wake_bots(&self, fx: &mut TxEffects) {
        if fx.woken.is_empty() && fx.revoked.is_empty() {
            return;
        }
        fx.woken.append(&mut fx.revoked);
        fx.woken.sort_unstable();
        fx.woken.dedup();
        let hook = self.wake.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(hook) = hook {
            for bot in &fx.woken {
                // The commit is done and answered: a panicking hook must not
                // turn it into an error, nor skip the other bots.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(bot)));
            }
        }
    }

    /// Serializes the whole database (SQLite's serialize), e.g. to persist a
    /// WASM service in IndexedDB or a KV store.
    pub fn export_database(&self) -> Result<Vec<u8>, ApiError> {
        let mut inner = self.lock();
        let data = inner.conn.sqlite().ok_or_else(sqlite_only)?.serialize(rusqlite::MAIN_DB)?.to_vec();
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
    pub fn import_database(&self, bytes: &[u8]) -> Result<(), ApiError> {
        let page_size: i64 = {
            let inner = self.lock();
            inner.conn.sqlite_ref().ok_or_else(sqlite_only)?.query_row("PRAGMA page_size", [], |r| r.get(0))?
        };
        let scratch = crate::import::prepare(bytes, page_size, self.config.max_import_bytes)?;
        let mut guard = self.lock();
        let inner = &mut *guard;
        // Copy into the live connection so a file database stays a file.
        {
            let live = inner.conn.sqlite().ok_or_else(sqlite_only)?;
            crate::import::copy_into(&scratch, live)?;
        }
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

/// The bots a commit woke or revoked, comma-joined, for `pg_notify`;
/// `None` when there are none.
fn notify_payload(fx: &TxEffects) -> Option<String> {
    if fx.woken.is_empty() && fx.revoked.is_empty() {
        return None;
    }
    let mut bots: Vec<&str> = fx.woken.iter().chain(&fx.revoked).map(String::as_str).collect();
    bots.sort_unstable();
    bots.dedup();
    Some(bots.join(","))
}

/// Export and import are SQLite's serialize and backup; a PostgreSQL
/// store is dumped and restored with its own tools.
fn sqlite_only() -> ApiError {
    ApiError::invalid_request(
        "export_database and import_database work on SQLite stores only; use pg_dump and pg_restore for PostgreSQL",
    )
}

impl Service {
    /// Checks a `GET /bot/gateway` upgrade received at `now_ms` (the
    /// gateway's time always comes from its host) and opens a
    /// message-level session. `Err` holds the complete HTTP error response
    /// to send. The host does the WebSocket handshake itself (edge
    /// runtimes do).
    pub fn accept_gateway_session(&self, request: &[u8], now_ms: u64) -> Result<GatewaySession, Vec<u8>> {
        self.open_session(request, now_ms).map(|(s, _)| s).map_err(ApiError::into_response)
    }

    /// Checks a `GET /bot/gateway` upgrade received at `now_ms`; on success
    /// returns the `101` response and a byte-level connection.
    pub fn accept_gateway(&self, request: &[u8], now_ms: u64) -> GatewayAccept {
        match self.open_session(request, now_ms) {
            Err(e) => GatewayAccept { response: e.into_response(), connection: None },
            Ok((session, key)) => session.upgrade(&key),
        }
    }

    fn open_session(&self, request: &[u8], now_ms: u64) -> ApiResult<(GatewaySession, String)> {
        let routed = self.route(request)?;
        if routed.route != Route::Gateway {
            return Err(ApiError::method_not_found(routed.req.path));
        }
        let req = &routed.req;
        let mut inner = self.lock();
        let bot = inner.ctx(&self.config, &self.clock, &self.random, now_ms).authenticate(req, None)?;
        let opening = gateway::Opening {
            db: &self.db,
            registry: &self.gateway,
            conn: &inner.conn,
            random: &self.random,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            poll_interval_ms: self.config.gateway_poll_interval_ms,
            token_hash: auth::sha256(auth::credential(req.header("authorization"), "Bot")?),
            now_ms,
        };
        let session = GatewaySession::open(opening, req, &bot)?;
        Ok((session, req.header_str("sec-websocket-key").unwrap_or("").to_string()))
    }

    /// Open gateway connections of a bot.
    pub fn gateway_connections(&self, bot_id: &str) -> u32 {
        self.gateway.open_count(bot_id)
    }

    /// True when other nodes' commits can be heard: the store is
    /// PostgreSQL and `listen_notify` is on. A host then runs
    /// [`Service::wait_store_notifications`] in a loop on a thread of its
    /// own; otherwise that call returns at once and a loop would spin.
    pub fn has_store_notifications(&self) -> bool {
        #[cfg(feature = "postgres")]
        return self.listen.is_some();
        #[cfg(not(feature = "postgres"))]
        false
    }

    /// Waits at most `timeout_ms` for notifications from other nodes of a
    /// shared store, handles them and returns how many arrived. Blocks the
    /// calling thread: run it in a loop on a thread of its own, only when
    /// [`Service::has_store_notifications`] says so (else it returns
    /// `Ok(0)` at once).
    ///
    /// A commit on another node that gave bots events, or ended their
    /// gateway connections (token rotated, bot suspended), notifies every
    /// node with the bots' ids. For each notification the bots' gateway
    /// sessions on this node check the database at their next
    /// `poll_transmit` (the notification is only a hint: what they send,
    /// or whether they close with 4004, comes from the rows they read),
    /// and the wake hook is called for each named bot with a session here.
    /// So a host that polls its sessions on wake-ups delivers other
    /// nodes' events in a few milliseconds, instead of at the next
    /// `gateway_poll_interval_ms`, which stays the fallback.
    ///
    /// It listens on a second connection of its own (same URL and TLS
    /// settings), opened on the first call: a call that opens it returns
    /// at once and wakes every bot with a session here, since what was sent
    /// before it listened is lost. When that connection breaks the call
    /// returns the error (`is_unavailable()`); the next call connects
    /// again, so a host loops, pausing a little after an error. It never
    /// holds the lock requests take. Calls from several threads take turns.
    pub fn wait_store_notifications(&self, timeout_ms: u64) -> Result<usize, crate::error::StorageError> {
        #[cfg(feature = "postgres")]
        if let Some(listen) = &self.listen {
            let heard = {
                let mut listener = listen.listener.lock().unwrap_or_else(|e| e.into_inner());
                let own = listen.own_pid.load(std::sync::atomic::Ordering::Relaxed);
                listener.wait(std::time::Duration::from_millis(timeout_ms), own)?
            };
            if heard.all || !heard.bots.is_empty() {
                let here = self.gateway.hint(heard.all, &heard.bots);
                self.apply_effects(TxEffects { woken: here, ..TxEffects::default() });
            }
            return Ok(heard.count);
        }
        let _ = timeout_ms;
        Ok(0)
    }
}

/// See [`Service::pause_commits`].
#[doc(hidden)]
pub struct CommitPause<'a>(&'a crate::group::Group);

impl Drop for CommitPause<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

impl crate::group::Runner for Service {
    fn run_alone(&self, request: &[u8]) -> (Vec<u8>, TxEffects) {
        Service::run_alone(self, request)
    }
    fn run_batch(&self, requests: &[&[u8]]) -> (Vec<Vec<u8>>, TxEffects) {
        Service::run_batch(self, requests)
    }
    fn settle(&self, seen: u64, outs: &mut [Vec<u8>]) {
        Service::settle(self, seen, outs)
    }
    fn apply_effects(&self, fx: TxEffects) {
        Service::apply_effects(self, fx)
    }
    fn lock_order(&self, jobs: &mut [(u64, Vec<u8>)]) {
        Service::lock_order(self, jobs)
    }
}

impl Service {
    /// On a shared store, orders a group's requests by bot (the hash of
    /// its token) and then chat, stably. Rows are locked as requests run,
    /// and another node's group may want the same rows: in one global
    /// order two groups cannot each hold what the other waits for, so the
    /// common case (bots writing to their own private chats, with their
    /// rate buckets) meets no deadlock, which PostgreSQL would only break
    /// after `deadlock_timeout` (1 s). The requests of a group arrived
    /// concurrently, so any order is one they could have run in; an
    /// explicit `handle_batch` keeps the host's order.
    fn lock_order(&self, jobs: &mut [(u64, Vec<u8>)]) {
        if !self.shared_store || jobs.len() < 2 {
            return;
        }
        jobs.sort_by_cached_key(|(_, request)| match http::parse_request(request, self.config.max_body_bytes) {
            Ok(req) => {
                let bot = auth::credential(req.header("authorization"), "Bot").ok().map(auth::sha256);
                (bot.unwrap_or_default(), methods::params::peek_chat_id(&req.body))
            }
            Err(_) => ([0; 32], None),
        });
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("database", &self.config.database_for_logs()).finish_non_exhaustive()
    }
}
