//! The database handle and the context a method runs in: one SQLite
//! connection behind a mutex ([`Db`], `txn/db.rs`), the state that lives
//! with it ([`Inner`]: auth cache, rate limiter, pending effects), and the
//! per-transaction view methods get ([`Ctx`], here), built in one place
//! ([`Inner::ctx`]). A transaction's effects wait in [`TxEffects`]
//! (`txn/effects.rs`); a PostgreSQL COMMIT is held and awaited without the
//! lock ([`HeldCommit`], `txn/commit.rs`) while the next group runs on
//! another connection of the pool ([`ConnPool`], `txn/pool.rs`).

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
use crate::store::messages::MessageInChat;
use crate::store::Conn;
use std::sync::Arc;

mod commit;
mod db;
mod effects;
mod pool;

pub(crate) use commit::HeldCommit;
pub(crate) use db::{Db, Inner};
pub(crate) use effects::TxEffects;
pub(crate) use pool::ConnPool;

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

    /// As [`Ctx::chat_with_member`], with the chat's message `message_id`
    /// (and its keyboard) if it exists: an edit's or a delete's reads.
    pub fn chat_with_message(&mut self, chat_id: &str, bot: &Bot, message_id: i64) -> ApiResult<Option<MessageInChat>> {
        if self.prefetch.as_ref().is_some_and(|p| p.chat_id == chat_id && !p.used) {
            let Some((chat, member)) = self.chat_with_member(chat_id, bot)? else { return Ok(None) };
            let msg = crate::store::messages::load_with_keyboard(self.conn, &chat.id, message_id)?;
            return Ok(Some((chat, member, msg)));
        }
        Ok(crate::store::messages::load_for_member(self.conn, chat_id, &bot.id, message_id)?)
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
        let shared = self.conn.is_shared();
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
