//! Many requests in one transaction: an explicit batch, or a group
//! formed by group commit.

use super::{Routed, Service, MAX_RETRIES};
use crate::auth;
use crate::error::ApiError;
use crate::http::{self};
use crate::methods;
use crate::route::{BotMethod, Route};
use crate::txn::{Inner, TxEffects};

impl Service {
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
    pub(super) fn run_batch_once(&self, requests: &[&[u8]]) -> (Vec<Vec<u8>>, TxEffects, bool) {
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
                let e = if matches!(e.code, "storage_unavailable" | "storage_full") {
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
    pub(super) fn preauth(
        &self,
        inner: &Inner,
        routed: &[Result<Routed<'_>, ApiError>],
    ) -> Vec<Option<crate::txn::Preauth>> {
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
        let Ok(mut found) = crate::store::bots::by_token_hashes_with_chats(&inner.conn, &wanted) else {
            return Vec::new();
        };
        let mut found = found.drain(..);
        keys.into_iter().map(|k| k.map(|(h, _)| (h, found.next().flatten()))).collect()
    }
    /// On a shared store, orders a group's requests by bot (the hash of
    /// its token) and then chat, stably. Rows are locked as requests run,
    /// and another node's group may want the same rows: in one global
    /// order two groups cannot each hold what the other waits for, so the
    /// common case (bots writing to their own private chats, with their
    /// rate buckets) meets no deadlock, which PostgreSQL would only break
    /// after `deadlock_timeout` (1 s). The requests of a group arrived
    /// concurrently, so any order is one they could have run in; an
    /// explicit `handle_batch` keeps the host's order.
    pub(super) fn lock_order(&self, jobs: &mut [(u64, Vec<u8>)]) {
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
