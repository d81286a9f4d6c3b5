//! The database handle and the context a method runs in: one SQLite
//! connection behind a mutex ([`Db`]), the state that lives with it
//! ([`Inner`]: auth cache, rate limiter, pending effects), and the
//! per-transaction view methods get ([`Ctx`]), built in one place
//! ([`Inner::ctx`]).

use crate::auth;
use crate::clock::Clock;
use crate::config::Config;
use crate::error::ApiResult;
use crate::events::{self, Event};
use crate::http::Request;
use crate::model::{Bot, Chat, ChatPrefetch};
use crate::random::Random;
use crate::ratelimit::RateLimiter;
use crate::rules;
use crate::store::wal::WalSync;
use crate::store::Conn;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Effects of the current transaction, applied only after it commits.
#[derive(Default)]
pub(crate) struct TxEffects {
    /// Bots that got events.
    pub woken: Vec<String>,
    /// Bots whose gateway connections must close with 4004.
    pub revoked: Vec<String>,
    /// Bots whose webhook was set or deleted.
    pub webhooks_changed: Vec<String>,
    /// Bots whose token was rotated: a log line each once committed.
    pub rotated: Vec<String>,
    /// A bot row changed: the auth cache must be dropped if this rolls back.
    pub bots_touched: bool,
    /// Message text was deleted: once committed, the WAL is checkpointed
    /// and truncated so the old text leaves the files too.
    pub scrubbed: bool,
    /// Host-stream rows waiting for the commit (database server only).
    pub updates: events::PendingUpdates,
    /// The commits the answers may have seen ([`crate::store::wal`]): they
    /// must be durable before the answers leave.
    pub seen: u64,
    /// A transaction whose COMMIT is still to be sent and awaited, after
    /// the database lock is released (PostgreSQL, see [`HeldCommit`]).
    pub held: Option<HeldCommit>,
    /// A getUpdates that found nothing and may wait: its bot and request
    /// (see `Service::answer_request`; the bytes entry points ignore it).
    pub park: Option<(String, events::Poll)>,
}

/// A PostgreSQL transaction whose statements all ran and whose COMMIT
/// (with the host-stream rows and the notification that go with it) is
/// sent and awaited without the database lock, in the service's settle
/// step, on the connection that ran it: meanwhile the next group runs on
/// another connection of the [`ConnPool`]. Its answers leave only after
/// [`HeldCommit::commit`] returned. Dropped without committing (a panic on
/// the way), it rolls back; either way the connection goes back to the
/// pool.
pub(crate) struct HeldCommit {
    conn: Option<Conn>,
    pool: Arc<ConnPool>,
    pub updates: events::PendingUpdates,
    pub notify: Option<String>,
}

impl HeldCommit {
    pub fn new(conn: Conn, pool: Arc<ConnPool>, updates: events::PendingUpdates, notify: Option<String>) -> Self {
        HeldCommit { conn: Some(conn), pool, updates, notify }
    }

    /// Sends COMMIT and waits for it (within `database_timeout_ms`, as
    /// every call); the connection returns to the pool.
    pub fn commit(mut self) -> crate::store::StoreResult<()> {
        let conn = self.conn.take().expect("a held commit owns its connection until it ends");
        let r = events::commit_with_updates(&conn, &mut self.updates, self.notify.as_deref());
        self.pool.put(conn);
        r
    }
}

impl Drop for HeldCommit {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.rollback();
            self.pool.put(conn);
        }
    }
}

/// The other PostgreSQL connections of a service, idle, for the next
/// transaction while one commits (see [`HeldCommit`]). Empty on SQLite.
#[derive(Default)]
pub(crate) struct ConnPool {
    free: Mutex<Vec<Conn>>,
    back: Condvar,
}

impl ConnPool {
    pub fn put(&self, conn: Conn) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
        self.back.notify_one();
    }

    /// An idle connection, waiting at most `wait` for a commit under way
    /// to give one back (a commit ends within its deadline); `None` when
    /// the pool has none.
    pub fn take(&self, wait: Duration) -> Option<Conn> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (mut free, _) =
            self.back.wait_timeout_while(free, wait, |f| f.is_empty()).unwrap_or_else(|e| e.into_inner());
        free.pop()
    }
}

/// What the database lock guards.
pub(crate) struct Inner {
    pub conn: Conn,
    /// Token hash → bot, for authentication without a query.
    pub bot_cache: auth::DigestMap<Arc<Bot>>,
    pub rate: RateLimiter,
    pub fx: TxEffects,
    pub last_prune_ms: u64,
}

/// Where the open transaction stood before one request of a group ran:
/// the state a refusal returns to ([`Inner::undo_to`]). The database needs
/// no savepoint: methods validate before they write, so a refused request
/// wrote nothing ([`Inner::wrote_since`] tells when that did not hold).
pub(crate) struct UndoPoint {
    rate: usize,
    bots_touched: bool,
    woken: usize,
    revoked: usize,
    rotated: usize,
    changes: u64,
    pending_updates: usize,
}

impl Inner {
    pub fn undo_point(&self) -> UndoPoint {
        UndoPoint {
            rate: self.rate.mark(),
            bots_touched: self.fx.bots_touched,
            woken: self.fx.woken.len(),
            revoked: self.fx.revoked.len(),
            rotated: self.fx.rotated.len(),
            changes: self.conn.total_changes(),
            pending_updates: self.fx.updates.len(),
        }
    }

    /// True when the database changed since `p`, or the transaction was
    /// lost (SQLite may end it itself on an error: FULL, IOERR,
    /// RAISE(ROLLBACK)...): only the whole transaction can be undone.
    pub fn wrote_since(&self, p: &UndoPoint) -> bool {
        self.conn.total_changes() != p.changes
            || self.fx.updates.len() != p.pending_updates
            || self.conn.transaction_lost()
    }

    /// Undoes what a refused request did besides the database (which it
    /// did not change): rate-limit slots, wake-ups, revocations, and the
    /// auth cache if it dropped a bot since `p`.
    pub fn undo_to(&mut self, p: UndoPoint) {
        self.rate.rollback_to(p.rate);
        self.fx.woken.truncate(p.woken);
        self.fx.revoked.truncate(p.revoked);
        self.fx.rotated.truncate(p.rotated);
        if self.fx.bots_touched && !p.bots_touched {
            self.bot_cache.clear();
        }
    }

    /// Rolls the whole transaction back, and with it everything kept
    /// beside the database for it: rate-limit slots, pending effects and
    /// host-stream rows, and the auth cache (`all_cached`: every entry;
    /// else only when a bot row changed).
    pub fn roll_back(&mut self, all_cached: bool) {
        let _ = self.conn.rollback();
        self.rate.rollback_to(0);
        if all_cached || self.fx.bots_touched {
            self.bot_cache.clear();
        }
        self.fx = TxEffects::default();
    }
}

/// The one SQLite connection, shared by the service and its gateway
/// sessions.
pub(crate) struct Db {
    inner: Mutex<Inner>,
    /// A durable file database's WAL fsync, run without the lock (group
    /// commit); `None` when SQLite syncs in COMMIT or nothing is synced.
    pub wal: Option<WalSync>,
    /// The other connections (PostgreSQL), see [`HeldCommit`].
    pub pool: Arc<ConnPool>,
    /// Set when the pool holds connections: a commit may be held.
    pub pooled: bool,
}

impl Db {
    pub fn new(mut conn: Conn, others: Vec<Conn>, synchronous: crate::config::Synchronous) -> Db {
        let full = synchronous == crate::config::Synchronous::Full;
        let pool = Arc::new(ConnPool::default());
        let pooled = !others.is_empty();
        for c in others {
            pool.put(c);
        }
        Db {
            wal: conn.sqlite().and_then(|c| WalSync::for_connection(c, full)),
            pool,
            pooled,
            inner: Mutex::new(Inner {
                conn,
                bot_cache: auth::DigestMap::default(),
                rate: RateLimiter::default(),
                fx: TxEffects::default(),
                last_prune_ms: 0,
            }),
        }
    }

    /// Takes the lock. A panic that poisoned it may have left a transaction
    /// open: roll it back so nothing half-done survives.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut g = poisoned.into_inner();
                if !g.conn.transaction_lost() {
                    let _ = g.conn.rollback();
                }
                g.bot_cache.clear();
                g.fx = TxEffects::default();
                g
            }
        }
    }
}

/// Everything a method needs while it runs inside a transaction.
pub(crate) struct Ctx<'a> {
    pub conn: &'a Conn,
    pub cfg: &'a Config,
    pub clock: &'a Clock,
    pub random: &'a Random,
    pub now_ms: u64,
    pub rate: &'a mut RateLimiter,
    pub fx: &'a mut TxEffects,
    pub bot_cache: &'a mut auth::DigestMap<Arc<Bot>>,
    /// What authentication read ahead about the chat the request names.
    pub prefetch: Option<ChatPrefetch>,
    /// What the group read for this request before it ran (token hash,
    /// and the bot with its chat, if the token is known).
    pub preauth: Option<Preauth>,
    /// What host methods read besides the database (the admin console's).
    pub host: crate::console::HostView<'a>,
    /// The rate bucket nearest to refusing, once a request has been
    /// counted against a limit: its response's `X-RateLimit-*` headers.
    pub rate_status: Option<crate::ratelimit::BucketStatus>,
}

/// A bot request's authentication and chat, read with the rest of its
/// group in one round trip.
pub(crate) type Preauth = ([u8; 32], Option<(Bot, ChatPrefetch)>);

impl Inner {
    /// The context for one request at `now_ms`.
    pub fn ctx<'a>(&'a mut self, cfg: &'a Config, clock: &'a Clock, random: &'a Random, now_ms: u64) -> Ctx<'a> {
        Ctx {
            conn: &self.conn,
            cfg,
            clock,
            random,
            now_ms,
            rate: &mut self.rate,
            fx: &mut self.fx,
            bot_cache: &mut self.bot_cache,
            prefetch: None,
            preauth: None,
            host: Default::default(),
            rate_status: None,
        }
    }
}

impl Ctx<'_> {
    /// Unix seconds, the unit of message dates.
    pub fn now_s(&self) -> i64 {
        (self.now_ms / 1000) as i64
    }

    /// Logs an event of this transaction (see [`crate::events::emit`]).
    pub fn emit(&mut self, ev: Event<'_>) -> ApiResult<Option<i64>> {
        let members = self.prefetch.as_ref().filter(|p| p.chat_id == ev.chat_id).map(|p| p.bots.as_slice());
        events::emit(self.conn, self.now_ms, ev, members, &mut self.fx.woken, &mut self.fx.updates)
    }

    /// The chat and `bot`'s membership in it: what authentication read
    /// ahead, else one query.
    pub fn chat_with_member(&mut self, chat_id: &str, bot: &Bot) -> ApiResult<Option<(Chat, Option<bool>)>> {
        // The prefetch is the authenticated bot's, the only one a method asks about.
        if let Some(p) = self.prefetch.as_mut().filter(|p| p.chat_id == chat_id && !p.used) {
            p.used = true;
            return Ok(p.chat.take());
        }
        Ok(crate::store::chats::load_with_member(self.conn, chat_id, &bot.id)?)
    }

    /// Authenticates `Authorization: Bot <token>` against the cache, then
    /// the database. The lookup is by SHA-256 of the presented token, so
    /// what an index lookup may leak in timing is about a hash, not the
    /// token.
    ///
    /// On a shared store, where every request reads the bot, `chat_id` (the
    /// chat the request names, if any) is read in the same round trip and
    /// kept for [`Ctx::chat_with_member`] and [`Ctx::emit`].
    pub fn authenticate(&mut self, req: &Request<'_>, chat_id: Option<&str>) -> ApiResult<Arc<Bot>> {
        let hash = rules::auth::bot_token_hash(req.header("authorization"))?;
        // With a shared PostgreSQL store another node may have rotated the
        // token or suspended the bot: only the database knows.
        let shared = self.conn.dialect() == crate::store::Dialect::Postgres;
        if let Some(b) = self.bot_cache.get(&hash).filter(|_| !shared) {
            return Ok(b.clone());
        }
        // On a shared store the bot comes with the chat the request names:
        // read with the whole group, or now.
        let with_chat = match (self.preauth.take().filter(|(h, _)| shared && *h == hash), chat_id) {
            (Some((_, found)), _) => Some(found),
            (None, Some(chat_id)) if shared => {
                Some(crate::store::bots::by_token_hash_with_chat(self.conn, &hash, chat_id)?)
            }
            _ => None,
        };
        if let Some(found) = with_chat {
            let (bot, prefetch) = rules::auth::bot_found(found)?;
            self.prefetch = Some(prefetch);
            return Ok(Arc::new(bot));
        }
        let bot = Arc::new(rules::auth::bot_found(crate::store::bots::by_token_hash(self.conn, &hash)?)?);
        if self.bot_cache.len() > 100_000 {
            self.bot_cache.clear();
        }
        self.bot_cache.insert(hash, bot.clone());
        Ok(bot)
    }
}
