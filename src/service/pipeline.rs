//! One request's way: transport checks and routing, its transaction,
//! the method it names, and the commit.

use super::{Routed, Service, MAX_RETRIES, PRUNE_EVERY_MS};
use crate::entry::Input;
use crate::error::{ApiError, ApiResult};
use crate::gateway::{self};
use crate::http::{self, Request};
use crate::methods;
use crate::route::{BotMethod, Route, Target};
use crate::store::{self};
use crate::txn::{HeldCommit, Inner, TxEffects};

impl Service {
    /// Transport checks (405 → 411/413 → 415) and routing.
    pub(crate) fn route<'a>(&self, request: Input<'a>) -> ApiResult<Routed<'a>> {
        // An image for importDatabase may be as large as max_import_bytes.
        let image = request.path() == Some(crate::route::IMPORT_PATH);
        let max = if image {
            self.config.max_import_bytes.max(self.config.max_body_bytes)
        } else {
            self.config.max_body_bytes
        };
        let req = request.parse(max)?;
        let target = Target::check(req.method, req.path)?;
        if let Some(e) = &req.body_error {
            return Err(e.clone());
        }
        if !req.body.is_empty() || req.header("content-type").is_some() {
            let ct = req.header_str("content-type").unwrap_or("");
            let mime = ct.split(';').next().unwrap_or("").trim();
            let taken = if image {
                crate::route::is_image_media_type(ct)
            } else {
                mime.eq_ignore_ascii_case("application/json")
            };
            if !taken {
                return Err(if image {
                    ApiError::unsupported_image_type()
                } else {
                    ApiError::unsupported_media_type()
                });
            }
        }
        let route = target.resolve(self.clock.is_manual())?;
        Ok(Routed { req, route, peer: None, admin_checked: false })
    }

    /// Runs one routed request in its own transaction.
    pub(super) fn run_one(&self, inner: &mut Inner, routed: &Routed<'_>) -> Vec<u8> {
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
    pub(super) fn run_tx(&self, inner: &mut Inner, routed: &Routed<'_>, now_ms: u64) -> Vec<u8> {
        self.metrics.batch_size.observe(1);
        if let Err(e) = inner.begin() {
            return ApiError::from(e).into_response();
        }
        // On a shared store a lone sendMessage reads ahead as a group does:
        // its chat's counter comes with its bot, and its message goes out
        // with the COMMIT.
        let pre = match self.shared_store {
            true => self.preauth(inner, &[super::batch::Peek::of(routed)], now_ms).pop().flatten(),
            false => None,
        };
        let start = inner.undo_point();
        match self.dispatch(inner, routed, now_ms, pre) {
            Ok(body) => match self.commit(inner, now_ms) {
                Ok(()) => body,
                Err(e) => e.into_response(),
            },
            Err(e) => {
                // Service::handle's runs rely on this: a refusal writes nothing.
                // (A lost connection, 503, can come after a write: nothing
                // of the transaction was committed.)
                debug_assert!(
                    matches!(e.status, 500 | 503) || !inner.wrote_since(&start),
                    "{:?} wrote before refusing with {}",
                    routed.route,
                    e.code
                );
                inner.roll_back(false);
                e.into_response()
            }
        }
    }

    /// Commits, pruning old rows now and then first. On failure rolls back
    /// everything, including rate-limit slots and caches.
    pub(super) fn commit(&self, inner: &mut Inner, now_ms: u64) -> ApiResult<()> {
        if now_ms.saturating_sub(inner.last_prune_ms) >= PRUNE_EVERY_MS {
            inner.last_prune_ms = now_ms;
            let retention = self.config.event_retention_s.saturating_mul(1000);
            let p = crate::events::Prune {
                retention_ms: retention,
                idempotency_ttl_ms: crate::rules::idempotency::TTL_MS,
                max_unacked_events: self.config.max_unacked_events,
                max_unconfirmed_updates: self.config.max_unconfirmed_updates,
            };
            if let Err(e) = crate::events::prune(&inner.conn, now_ms, &p) {
                self.abort(inner);
                return Err(e.into());
            }
        }
        // Other nodes' sessions of the bots this commit woke or revoked
        // learn of it from a hint sent with the commit; nothing is sent
        // when no bot is affected.
        let notify = self.notify.then(|| notify_payload(&inner.fx)).flatten();
        if let Some(conn) = self.spare_for_held_commit(inner) {
            // The next group starts before this COMMIT is sent: what this
            // transaction still has to write must not wait for rows that
            // group may lock (it would wait for us in turn). Such writes go
            // out now, under the lock; the rest touch rows it holds.
            if let Err(e) = inner.conn.send_waiting_writes() {
                self.db.pool.put(conn);
                self.abort(inner);
                return Err(e.into());
            }
            // Every statement ran: COMMIT is sent and awaited in `settle`,
            // without the lock, while the next group runs on `conn`. If it
            // fails there, nothing beside the database needs undoing: on
            // PostgreSQL the rate buckets are rows of the transaction and
            // the auth cache is never read.
            let held = std::mem::replace(&mut inner.conn, conn);
            let updates = std::mem::take(&mut inner.fx.updates);
            inner.fx.held = Some(HeldCommit::new(held, self.db.pool.clone(), updates, notify));
            inner.rate.commit();
            return Ok(());
        }
        let started = crate::metrics::Timer::start();
        let committed = crate::events::commit_with_updates(&inner.conn, &mut inner.fx.updates, notify.as_deref());
        if let Some(us) = started.micros() {
            self.metrics.commit_latency.observe(us);
        }
        match committed {
            Ok(()) => {
                // A write went through: readiness stops probing with writes.
                if self.metrics.disk_full.load(std::sync::atomic::Ordering::Relaxed) {
                    self.metrics.disk_full.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(wal) = &self.db.wal {
                    wal.note_commit();
                }
                inner.rate.commit();
                Ok(())
            }
            Err(e) => {
                self.abort(inner);
                Err(e.into())
            }
        }
    }

    /// Another connection for the next transaction, when this one's COMMIT
    /// may be held for `settle`: on PostgreSQL with a pool, and only for a
    /// commit that revokes no token and changes no bot (a revocation must
    /// close sessions before any later request can open one, under the
    /// lock; see [`Service::take_effects`]). Waits for a commit under way
    /// to give its connection back, at most twice the deadline; past that
    /// (never expected: a commit ends within one) this one commits under
    /// the lock as without a pool.
    fn spare_for_held_commit(&self, inner: &Inner) -> Option<store::Conn> {
        if !self.db.pooled || !inner.fx.revoked.is_empty() || inner.fx.bots_touched {
            return None;
        }
        let wait = std::time::Duration::from_millis(self.config.database_timeout_ms.saturating_mul(2));
        self.db.pool.take(wait)
    }

    /// Undoes a transaction that failed in storage: its auth cache
    /// entries may hold what it read, so all of them go.
    pub(super) fn abort(&self, inner: &mut Inner) {
        inner.roll_back(true);
    }

    /// Runs a method, catching a panic so it becomes a 500 and a rollback
    /// instead of crossing the API boundary.
    pub(super) fn dispatch(
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
            let result = match routed.route {
                // Pages are answered before a transaction; a batch serves none.
                Route::Console(_) | Route::Health | Route::Ready | Route::Metrics => Err(ApiError::method_not_found()),
                Route::Admin(method) => {
                    if !routed.admin_checked {
                        self.check_admin(&routed.req)?;
                    }
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
                    let chat = match (method, ctx.conn.is_shared()) {
                        (BotMethod::GetMe, _) | (_, false) => None,
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
            };
            result.map(|res| (res, ctx.rate_status))
        }));
        match result {
            Ok(r) => r.map(|(res, rate)| match rate {
                // A request counted against a limit: where its nearest
                // bucket stands (a refusal carries them in its error).
                Some(bucket) => {
                    let headers = bucket.headers();
                    let extra: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    http::ok_response_with(&res, &extra)
                }
                None => http::ok_response(&res),
            }),
            Err(_) => Err(ApiError::internal("a bug was caught; the request was rolled back")),
        }
    }

    pub(super) fn check_admin(&self, req: &Request<'_>) -> ApiResult<()> {
        crate::rules::auth::admin(req.header("authorization"), &self.admin_hash)
    }
}

/// The bots a commit woke or revoked, comma-joined, for `pg_notify`,
/// then `t` and the wall clock in microseconds as the COMMIT goes out (the
/// receiving node's `botspace_notification_lag_seconds`; a node that does
/// not know the element takes it for a bot it does not have); `None` when
/// there are none.
fn notify_payload(fx: &TxEffects) -> Option<String> {
    if fx.woken.is_empty() && fx.revoked.is_empty() {
        return None;
    }
    let mut bots: Vec<&str> = fx.woken.iter().chain(&fx.revoked).map(String::as_str).collect();
    bots.sort_unstable();
    bots.dedup();
    Some(format!("{},t{}", bots.join(","), crate::histogram::wall_micros()))
}
