//! Many requests in one transaction: an explicit batch, or a group
//! formed by group commit.

use super::{Routed, Service, MAX_RETRIES};
use crate::entry::Input;
use crate::error::ApiError;
use crate::methods;
use crate::model::ChatPrefetch;
use crate::route::{BotMethod, Route};
use crate::rules::read_ahead::Asked;
use crate::txn::{Inner, TxEffects};

impl Service {
    /// Many requests, committed together in one transaction (group commit).
    /// Each gets exactly the answer it would get alone. Methods validate
    /// before they write, so a refused request has written nothing and needs
    /// no savepoint (savepoints would cost a third of the batch). A request
    /// that fails *after* writing can only be a storage failure: then the
    /// whole group rolls back and every request that had succeeded, and that
    /// one, answer 500 — nothing was committed, all are safe to retry.
    ///
    /// `group`: the requests arrived
    /// concurrently (a host's own grouping), so on a shared store they may
    /// run in lock order, as the core's group commit runs its groups.
    ///
    /// `clients`: empty, or for each request the client of a host call
    /// admitted at its door (`handle.rs`): it runs without a second check
    /// and is audited with that client.
    pub(crate) fn handle_inputs_as<'a>(
        &self,
        requests: &[Input<'a>],
        clients: &[Option<&'a str>],
        group: bool,
    ) -> Vec<Vec<u8>> {
        // The operations paths take no transaction (readiness takes the
        // lock itself): each is answered alone, the others as one batch.
        if requests.iter().any(|r| is_ops(*r)) {
            let (ops, rest): (Vec<usize>, Vec<usize>) = (0..requests.len()).partition(|&i| is_ops(requests[i]));
            let batch: Vec<Input<'_>> = rest.iter().map(|&i| requests[i]).collect();
            let batch_clients: Vec<Option<&str>> = rest.iter().map(|&i| clients.get(i).copied().flatten()).collect();
            let mut out = vec![Vec::new(); requests.len()];
            for (i, o) in rest.into_iter().zip(self.handle_inputs_as(&batch, &batch_clients, group)) {
                out[i] = o;
            }
            for i in ops {
                out[i] = self.handle_input(requests[i]);
            }
            return out;
        }
        let started = crate::metrics::Timer::start();
        let (mut out, mut fx) = self.run_requests(requests, clients, group && self.shared_store);
        self.settle(&mut fx, &mut out);
        for (r, o) in requests.iter().zip(&out) {
            // One clock read for the batch; each request is sampled alone.
            self.record(*r, o, crate::histogram::sample().then_some(started));
        }
        self.apply_effects(fx);
        out
    }

    /// A group formed by group commit, without calling the wake hook:
    /// returns the effects to apply once the answers are out. On a shared
    /// store the requests run in lock order (see [`LockKey`]).
    pub(crate) fn run_group(&self, requests: &[Input<'_>]) -> (Vec<Vec<u8>>, TxEffects) {
        self.run_requests(requests, &[], self.shared_store)
    }

    fn run_requests<'a>(
        &self,
        requests: &[Input<'a>],
        clients: &[Option<&'a str>],
        lock_order: bool,
    ) -> (Vec<Vec<u8>>, TxEffects) {
        // Each request is parsed and routed once, for every step and rerun.
        let mut routed: Vec<Result<Routed<'a>, ApiError>> = requests.iter().map(|r| self.route(*r)).collect();
        for (r, client) in routed.iter_mut().zip(clients) {
            if let (Ok(r), Some(client)) = (r, client) {
                r.peer = Some(client);
                r.admin_checked = true;
            }
        }
        let peeks = if self.shared_store { peek(&routed) } else { Vec::new() };
        let mut order: Vec<usize> = (0..routed.len()).collect();
        if lock_order && !peeks.is_empty() {
            // Stable: requests with the same key keep their arrival order.
            order.sort_by(|&a, &b| peeks[a].lock_key().cmp(&peeks[b].lock_key()));
        }
        let mut attempt = 0;
        loop {
            let (out, fx, retry) = self.run_batch_once(&routed, &order, &peeks);
            if retry && attempt < MAX_RETRIES {
                attempt += 1;
                continue;
            }
            return (out, fx);
        }
    }

    /// One attempt at a batch, its requests run in `order` (indices into
    /// `routed`; the answers come back in `routed`'s order); `true` when it
    /// failed on a serialization failure or deadlock and may be rerun whole.
    fn run_batch_once(
        &self,
        routed: &[Result<Routed<'_>, ApiError>],
        order: &[usize],
        peeks: &[Peek],
    ) -> (Vec<Vec<u8>>, TxEffects, bool) {
        let n = routed.len();
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); n];
        let mut guard = self.lock();
        let inner = &mut *guard;
        let now_ms = self.clock.now_ms();
        self.defer_sync(inner, true);
        if let Err(e) = inner.begin() {
            self.defer_sync(inner, false);
            let e = ApiError::from(e);
            // A request refused by routing gets that refusal, as alone.
            let out = routed.iter().map(|r| r.as_ref().err().unwrap_or(&e).clone().into_response()).collect();
            return (out, TxEffects::default(), false);
        }
        let Progress { ok, ran, failure } = self.run_each(inner, routed, order, peeks, now_ms, &mut out);
        self.metrics.batch_size.observe(n as u64);
        let result = match failure {
            Some(e) => {
                self.abort(inner);
                Err(e)
            }
            None => self.commit(inner, now_ms),
        };
        self.defer_sync(inner, false);
        let fx = match result {
            // Hooks run later, without the lock: a hook may poll a connection.
            Ok(()) => self.take_effects(inner),
            Err(e) => {
                answer_failed_batch(routed, &mut out, &ok, &ran, e);
                TxEffects::default()
            }
        };
        let retry = guard.conn.take_retryable();
        drop(guard);
        (out, fx, retry)
    }

    /// Runs the batch's requests in `order` inside the open transaction,
    /// writing each answer into `out`; a refused request is undone to its
    /// undo point, one that failed after writing stops the batch.
    fn run_each(
        &self,
        inner: &mut Inner,
        routed: &[Result<Routed<'_>, ApiError>],
        order: &[usize],
        peeks: &[Peek],
        now_ms: u64,
        out: &mut [Vec<u8>],
    ) -> Progress {
        let n = routed.len();
        let mut p = Progress { ok: vec![false; n], ran: vec![false; n], failure: None };
        let mut preauth = self.preauth(inner, peeks, now_ms);
        for &i in order {
            p.ran[i] = true;
            let routed = match &routed[i] {
                Err(e) => {
                    out[i] = e.clone().into_response();
                    continue;
                }
                Ok(routed) => routed,
            };
            let pre = preauth.get_mut(i).and_then(Option::take);
            let start = inner.undo_point();
            match self.dispatch(inner, routed, now_ms, pre) {
                Ok(body) => {
                    out[i] = body;
                    p.ok[i] = true;
                }
                // Failed after writing: only the whole group can be undone
                // (SQLite may have ended the transaction itself, undoing the
                // group's earlier writes: later requests would then commit
                // one by one).
                Err(e) if inner.wrote_since(&start) => {
                    p.ok[i] = true;
                    // A lost database connection stays 503 storage_unavailable
                    // (nothing was committed); any other refusal after a
                    // write is a storage failure.
                    p.failure = Some(if matches!(e.status, 500 | 503) { e } else { ApiError::internal(e.description) });
                    break;
                }
                Err(e) => {
                    inner.undo_to(start);
                    out[i] = e.into_response();
                }
            }
        }
        p
    }

    /// On a shared store, what each bot request of a group will read
    /// first (its bot, and the chat it names with the bot's membership),
    /// read for the whole group in one round trip. Only for a group of bot
    /// requests: they change no bot, chat or membership, so reading it all
    /// before any of them runs reads what each would have read itself.
    /// Indexed like the requests; empty when it does not apply or the read
    /// failed (each request then reads for itself and meets the failure
    /// there).
    pub(super) fn preauth(&self, inner: &mut Inner, peeks: &[Peek], now_ms: u64) -> Vec<Option<crate::txn::Preauth>> {
        if peeks.iter().any(|p| p.not_bot) {
            return Vec::new();
        }
        let wanted: Vec<([u8; 32], &str)> =
            peeks.iter().filter_map(|p| Some((p.token_hash?, p.preauth_chat()?))).collect();
        // The chats the group posts in: their counters are locked and read
        // now, so its messages are numbered without a round trip each.
        let send_to: Vec<&str> = peeks.iter().filter(|p| p.sends).filter_map(|p| p.chat.as_deref()).collect();
        // A lone request that posts nothing reads as much itself.
        if wanted.len() < 2 && send_to.is_empty() {
            return Vec::new();
        }
        let Ok(found) = crate::store::group::read(&inner.conn, &wanted, &send_to, &mut inner.fx.ahead) else {
            return Vec::new();
        };
        // Then, when a request needs them, its rate buckets and its
        // Idempotency-Key (chosen from what was read: `rules::read_ahead`),
        // in one more round trip.
        let asked = peeks.iter().filter(|p| p.token_hash.is_some() && p.preauth_chat().is_some());
        let asked = asked.zip(&found).map(|(p, found)| Asked {
            limited: p.limited,
            idempotency_key: p.idempotency_key.as_deref(),
            found: match found {
                Some((bot, ChatPrefetch { chat: Some((chat, _)), .. })) => Some((bot, chat)),
                _ => None,
            },
        });
        let limits = crate::rules::read_ahead::wanted(&self.config.limits, asked);
        let buckets: Vec<String> =
            limits.buckets.iter().flat_map(|(bot, chat)| crate::store::limits::keys(bot, chat)).collect();
        let bucket_keys: Vec<&str> = buckets.iter().map(String::as_str).collect();
        let since = crate::rules::idempotency::cutoff(now_ms);
        let ahead = &mut inner.fx.ahead;
        if crate::store::group::read_limits(&inner.conn, &bucket_keys, &limits.lookups, since, ahead).is_err() {
            return Vec::new();
        }
        let mut found = found.into_iter();
        peeks
            .iter()
            .map(|p| match (p.token_hash, p.preauth_chat()) {
                (Some(h), Some(_)) => Some((h, found.next().flatten())),
                _ => None,
            })
            .collect()
    }
}

/// What a group on a shared store needs of a request before running it,
/// read once from the parsed request: the bot (the hash of its token) and
/// the chat it names.
pub(super) struct Peek {
    token_hash: Option<[u8; 32]>,
    chat: Option<String>,
    /// A bot method other than getMe: its bot and chat can be read ahead.
    reads_ahead: bool,
    /// sendMessage: it posts in the chat it names.
    sends: bool,
    /// A method that takes from the bot's rate buckets.
    limited: bool,
    /// sendMessage's Idempotency-Key, when it is a valid one.
    idempotency_key: Option<String>,
    /// A routed request that is not a bot method (admin, gateway): the
    /// group changes what bot methods read, so nothing is read ahead.
    not_bot: bool,
}

/// Lock order, by bot and then chat. Rows are locked as requests run, and
/// another node's group may want the same rows: in one global order two
/// groups cannot each hold what the other waits for, so the common case
/// (bots writing to their own private chats, with their rate buckets)
/// meets no deadlock, which PostgreSQL would only break after
/// `deadlock_timeout` (1 s). The requests of a group arrived concurrently,
/// so any order is one they could have run in; an explicit `Service::handle` run
/// keeps the host's order.
type LockKey<'a> = ([u8; 32], Option<&'a str>);

impl Peek {
    fn lock_key(&self) -> LockKey<'_> {
        (self.token_hash.unwrap_or_default(), self.chat.as_deref())
    }

    fn preauth_chat(&self) -> Option<&str> {
        self.chat.as_deref().filter(|_| self.reads_ahead)
    }
}

fn peek(routed: &[Result<Routed<'_>, ApiError>]) -> Vec<Peek> {
    routed
        .iter()
        .map(|r| match r {
            Err(_) => Peek {
                token_hash: None,
                chat: None,
                reads_ahead: false,
                sends: false,
                limited: false,
                idempotency_key: None,
                not_bot: false,
            },
            Ok(routed) => Peek::of(routed),
        })
        .collect()
}

impl Peek {
    pub(super) fn of(Routed { route, req, .. }: &Routed<'_>) -> Peek {
        Peek {
            token_hash: crate::rules::auth::bot_token_hash(req.header("authorization")).ok(),
            chat: methods::params::peek_chat_id(&req.body),
            reads_ahead: matches!(route, Route::Bot(m) if *m != BotMethod::GetMe),
            sends: *route == Route::Bot(BotMethod::SendMessage),
            limited: matches!(
                route,
                Route::Bot(BotMethod::SendMessage | BotMethod::SendChatAction | BotMethod::EditMessageText)
            ),
            idempotency_key: match route {
                Route::Bot(BotMethod::SendMessage) => {
                    crate::rules::idempotency::key(req.header("idempotency-key")).ok().flatten().map(str::to_string)
                }
                _ => None,
            },
            not_bot: !matches!(route, Route::Bot(_)),
        }
    }
}

/// A request for an operations path (`/healthz`, `/readyz`,
/// `/admin/metrics`), by its request line.
fn is_ops(request: Input<'_>) -> bool {
    let path = match request {
        Input::Wire(bytes) => crate::http::request_target(bytes).map(|(_, p)| p),
        #[cfg(feature = "typed")]
        typed => typed.path(),
    };
    let Some(path) = path else { return false };
    matches!(path, "/healthz" | "/readyz" | "/admin/metrics")
}

/// How far a batch got inside its transaction.
struct Progress {
    /// Requests that ran and succeeded (their answer holds only if the
    /// commit does).
    ok: Vec<bool>,
    /// Requests that ran; the others were never run.
    ran: Vec<bool>,
    /// The failure, after a write, that stopped the batch.
    failure: Option<ApiError>,
}

/// The batch's transaction failed (`e`): the requests that had succeeded
/// get the failure, those never run the storage failure (or their own
/// routing refusal); the refused ones keep their refusal.
fn answer_failed_batch(
    routed: &[Result<Routed<'_>, ApiError>],
    out: &mut [Vec<u8>],
    ok: &[bool],
    ran: &[bool],
    e: ApiError,
) {
    for (slot, succeeded) in out.iter_mut().zip(ok) {
        if *succeeded {
            *slot = e.clone().into_response();
        }
    }
    // Requests after the failing one were never run: the
    // database being unreachable is their answer too.
    let e = if matches!(e.code, crate::ErrorCode::StorageUnavailable | crate::ErrorCode::StorageFull) {
        e
    } else {
        ApiError::internal("an earlier request of the batch failed in storage; nothing was written")
    };
    for i in (0..out.len()).filter(|&i| !ran[i]) {
        out[i] = routed[i].as_ref().err().unwrap_or(&e).clone().into_response();
    }
}
