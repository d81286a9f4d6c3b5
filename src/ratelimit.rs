//! Per-tier rate limits as GCRA token buckets: in memory for a SQLite store
//! ([`RateLimiter`]), in the database for a shared PostgreSQL store
//! ([`check_shared`]), so every node draws from the same bucket. A refused
//! request consumes nothing; a consumed slot is given back when the
//! request's transaction rolls back (the undo log, or the database's own
//! rollback).

use crate::config::Rate;
use crate::store::{Conn, StoreResult};
use std::collections::HashMap;

/// Which limit refused a request (`parameters.scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Bot,
    Chat,
    Group,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Bot => "bot",
            Scope::Chat => "chat",
            Scope::Group => "group",
        }
    }
}

#[derive(Default)]
struct BotState {
    /// Theoretical arrival time (µs) of the bot-wide bucket.
    tat: u64,
    /// Per chat buckets of this bot, by chat id.
    chats: HashMap<String, u64>,
}

#[derive(Default)]
pub struct RateLimiter {
    bots: HashMap<String, BotState>,
    /// (bot, chat or None for the bot bucket, previous TAT).
    undo: Vec<(String, Option<String>, u64)>,
    ops: u64,
}

/// Returns Err(wait µs) if the bucket at `tat` cannot take one more at `now`.
fn gcra(tat: u64, now: u64, rate: &Rate) -> Result<u64, u64> {
    let interval = rate.period_ms * 1000 / rate.count as u64;
    let tolerance = interval * (rate.burst as u64 - 1);
    let tat = tat.max(now);
    if tat - now > tolerance {
        Err(tat - now - tolerance)
    } else {
        Ok(tat + interval)
    }
}

/// Which bucket refuses, and for how many milliseconds: the longest wait
/// when both do. `None` when both take one more.
fn refusal(bot: Option<Result<u64, u64>>, chat: Option<(Result<u64, u64>, Scope)>) -> Option<(Scope, u64)> {
    let mut refused: Option<(Scope, u64)> = None;
    if let Some(Err(wait)) = bot {
        refused = Some((Scope::Bot, wait));
    }
    if let Some((Err(wait), scope)) = chat {
        if refused.is_none_or(|(_, w)| wait > w) {
            refused = Some((scope, wait));
        }
    }
    refused.map(|(scope, wait_us)| (scope, wait_us.div_ceil(1000).max(1)))
}

impl RateLimiter {
    /// Checks the bot-wide and the chat bucket at `now_ms`; if both allow,
    /// consumes one from each and returns Ok. Otherwise returns the scope and
    /// wait in milliseconds (the longest of the refusing buckets).
    pub fn check(
        &mut self,
        bot_id: &str,
        chat_id: &str,
        bot_rate: Option<&Rate>,
        chat_rate: Option<(&Rate, Scope)>,
        now_ms: u64,
    ) -> Result<(), (Scope, u64)> {
        if bot_rate.is_none() && chat_rate.is_none() {
            return Ok(());
        }
        let now = now_ms * 1000;
        self.ops += 1;
        if self.ops.is_multiple_of(65_536) {
            self.prune(now);
        }
        let state = match self.bots.get_mut(bot_id) {
            Some(s) => s,
            None => self.bots.entry(bot_id.to_string()).or_default(),
        };
        let chat_tat = state.chats.get(chat_id).copied().unwrap_or(0);
        let bot_next = bot_rate.map(|r| gcra(state.tat, now, r));
        let chat_next = chat_rate.map(|(r, s)| (gcra(chat_tat, now, r), s));
        if let Some(refused) = refusal(bot_next, chat_next) {
            return Err(refused);
        }
        if let Some(Ok(next)) = bot_next {
            self.undo.push((bot_id.to_string(), None, state.tat));
            state.tat = next;
        }
        if let Some((Ok(next), _)) = chat_next {
            self.undo.push((bot_id.to_string(), Some(chat_id.to_string()), chat_tat));
            match state.chats.get_mut(chat_id) {
                Some(t) => *t = next,
                None => {
                    state.chats.insert(chat_id.to_string(), next);
                }
            }
        }
        Ok(())
    }

    /// Position in the undo log, to roll back to later.
    pub fn mark(&self) -> usize {
        self.undo.len()
    }

    /// Gives back every slot consumed since `mark`.
    pub fn rollback_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let Some((bot, chat, tat)) = self.undo.pop() else {
                break;
            };
            if let Some(state) = self.bots.get_mut(&bot) {
                match chat {
                    None => state.tat = tat,
                    Some(c) => {
                        state.chats.insert(c, tat);
                    }
                }
            }
        }
    }

    /// Forgets the undo log once the transaction committed.
    pub fn commit(&mut self) {
        self.undo.clear();
    }

    /// Drops buckets that are full again; they are the same as absent ones.
    fn prune(&mut self, now_us: u64) {
        self.bots.retain(|_, s| {
            s.chats.retain(|_, t| *t > now_us);
            s.tat > now_us || !s.chats.is_empty()
        });
    }
}

/// [`RateLimiter::check`] with the buckets in the database's
/// `rate_buckets`, read with a row lock and written in the transaction of
/// the write they limit: exact across nodes.
pub fn check_shared(
    conn: &Conn,
    bot_id: &str,
    chat_id: &str,
    bot_rate: Option<&Rate>,
    chat_rate: Option<(&Rate, Scope)>,
    now_ms: u64,
) -> StoreResult<Result<(), (Scope, u64)>> {
    if bot_rate.is_none() && chat_rate.is_none() {
        return Ok(Ok(()));
    }
    let now = now_ms * 1000;
    let bot_key = format!("b:{bot_id}");
    let chat_key = format!("c:{bot_id}:{chat_id}");
    let (bot_tat, chat_tat) = crate::store::limits::take_buckets(conn, &bot_key, &chat_key)?;
    let bot_next = bot_rate.map(|r| gcra(bot_tat, now, r));
    let chat_next = chat_rate.map(|(r, s)| (gcra(chat_tat, now, r), s));
    if let Some(refused) = refusal(bot_next, chat_next) {
        return Ok(Err(refused));
    }
    if let Some(Ok(next)) = bot_next {
        crate::store::limits::put_bucket(conn, &bot_key, next)?;
    }
    if let Some((Ok(next), _)) = chat_next {
        crate::store::limits::put_bucket(conn, &chat_key, next)?;
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_chat_allows_burst_then_refuses_until_refill() {
        let mut rl = RateLimiter::default();
        let r = Rate::new(1, 1000, 5);
        for _ in 0..5 {
            assert!(rl.check("b", "c", None, Some((&r, Scope::Chat)), 1000).is_ok());
        }
        assert_eq!(rl.check("b", "c", None, Some((&r, Scope::Chat)), 1000), Err((Scope::Chat, 1000)));
        assert!(rl.check("b", "c", None, Some((&r, Scope::Chat)), 2000).is_ok());
    }

    #[test]
    fn rollback_gives_the_slot_back() {
        let mut rl = RateLimiter::default();
        let r = Rate::new(1, 1000, 1);
        let m = rl.mark();
        assert!(rl.check("b", "c", Some(&r), None, 0).is_ok());
        rl.rollback_to(m);
        assert!(rl.check("b", "c", Some(&r), None, 0).is_ok());
        assert!(rl.check("b", "c", Some(&r), None, 0).is_err());
    }
}
