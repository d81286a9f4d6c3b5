//! Per-tier rate limits as GCRA token buckets (the decision is
//! `crate::rules::ratelimit`'s): in memory for a SQLite store
//! ([`RateLimiter`]), in the database for a shared PostgreSQL store
//! (`store::limits::take`), so every node draws from the same bucket. A refused
//! request consumes nothing; a consumed slot is given back when the
//! request's transaction rolls back (the undo log, or the database's own
//! rollback).

use crate::config::Rate;
use crate::rules::ratelimit::decide;
pub use crate::rules::ratelimit::{BucketStatus, Checked, Scope};
use std::collections::HashMap;
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

impl RateLimiter {
    /// Checks the bot-wide and the chat bucket at `now_ms`; if both allow,
    /// takes one from each and returns the bucket nearest to refusing.
    /// Otherwise takes nothing and returns the refusing bucket (the one
    /// that waits longest when both refuse).
    pub fn check(
        &mut self,
        bot_id: &str,
        chat_id: &str,
        bot_rate: Option<&Rate>,
        chat_rate: Option<(&Rate, Scope)>,
        now_ms: u64,
    ) -> Checked {
        if bot_rate.is_none() && chat_rate.is_none() {
            return Ok(None);
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
        let (checked, bot_next, chat_next) =
            decide(bot_rate.map(|r| (state.tat, r)), chat_rate.map(|(r, s)| (chat_tat, r, s)), now);
        if let Some(next) = bot_next {
            self.undo.push((bot_id.to_string(), None, state.tat));
            state.tat = next;
        }
        if let Some(next) = chat_next {
            self.undo.push((bot_id.to_string(), Some(chat_id.to_string()), chat_tat));
            match state.chats.get_mut(chat_id) {
                Some(t) => *t = next,
                None => {
                    state.chats.insert(chat_id.to_string(), next);
                }
            }
        }
        checked
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

/// [`RateLimiter::check`]'s rule for buckets kept elsewhere (a shared
/// store's, see `store::limits::take`): from the two buckets' theoretical
/// arrival times (µs, 0 for a full bucket), the outcome and the new times
/// to store when both take one more.
pub fn decide_stored(
    bot_tat: u64,
    chat_tat: u64,
    bot_rate: Option<&Rate>,
    chat_rate: Option<(&Rate, Scope)>,
    now_ms: u64,
) -> (Checked, Option<u64>, Option<u64>) {
    decide(bot_rate.map(|r| (bot_tat, r)), chat_rate.map(|(r, s)| (chat_tat, r, s)), now_ms * 1000)
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
        let refused = rl.check("b", "c", None, Some((&r, Scope::Chat)), 1000).unwrap_err();
        assert_eq!((refused.scope, refused.reset_ms()), (Scope::Chat, 1000));
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

    fn status(scope: Scope, limit: u32, remaining: u32, reset_us: u64) -> BucketStatus {
        BucketStatus { scope, limit, remaining, reset_us }
    }

    #[test]
    fn figures_count_this_request_and_match_the_refusal() {
        let mut rl = RateLimiter::default();
        let r = Rate::new(1, 1000, 5);
        let chat = Some((&r, Scope::Chat));
        let taken = |rl: &mut RateLimiter, now| rl.check("b", "c", None, chat, now).unwrap().unwrap();
        assert_eq!(taken(&mut rl, 0), status(Scope::Chat, 5, 4, 1_000_000));
        assert_eq!(taken(&mut rl, 0), status(Scope::Chat, 5, 3, 1_000_000));
        // 250 ms later a quarter of a slot has come back: 2 left after this
        // request, and the next slot frees in 750 ms.
        assert_eq!(taken(&mut rl, 250), status(Scope::Chat, 5, 2, 750_000));
        assert_eq!(taken(&mut rl, 250), status(Scope::Chat, 5, 1, 750_000));
        assert_eq!(taken(&mut rl, 250), status(Scope::Chat, 5, 0, 750_000));
        let refused = rl.check("b", "c", None, chat, 250).unwrap_err();
        assert_eq!(refused, status(Scope::Chat, 5, 0, 750_000));
        assert_eq!(refused.reset_ms(), 750);
        // Both buckets: the chat (4 left of 5) is nearer than the bot (29 of 30).
        let bot = Rate::new(30, 1000, 30);
        let got = rl.check("b", "d", Some(&bot), chat, 10_000).unwrap().unwrap();
        assert_eq!(got, status(Scope::Chat, 5, 4, 1_000_000));
        // Unlimited: nothing to report.
        assert_eq!(rl.check("b", "c", None, None, 0), Ok(None));
    }

    #[test]
    fn a_bucket_finer_than_a_microsecond_reports_full() {
        let r = Rate::new(2_000, 1, 3);
        let mut rl = RateLimiter::default();
        assert_eq!(rl.check("b", "c", Some(&r), None, 0), Ok(Some(status(Scope::Bot, 3, 3, 0))));
    }
}
