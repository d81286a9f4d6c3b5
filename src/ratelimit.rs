//! Per-tier rate limits as GCRA token buckets: in memory for a SQLite store
//! ([`RateLimiter`]), in the database for a shared PostgreSQL store
//! (`store::limits::take`), so every node draws from the same bucket. A refused
//! request consumes nothing; a consumed slot is given back when the
//! request's transaction rolls back (the undo log, or the database's own
//! rollback).

use crate::config::Rate;
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

/// Where a bucket stands for the `X-RateLimit-*` headers: its size, how
/// many more requests it takes at once, and in how long that number next
/// grows by one. With `remaining` 0 that is when the next request is
/// accepted, so a 429's `retry_after_ms` is this `reset_us` in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketStatus {
    pub scope: Scope,
    /// The burst: the most requests the bucket takes at once.
    pub limit: u32,
    pub remaining: u32,
    /// Microseconds until `remaining` grows by one.
    pub reset_us: u64,
}

impl BucketStatus {
    /// The bucket at theoretical arrival time `tat` (after this request,
    /// when it was taken) seen at `now` (µs).
    fn at(tat: u64, now: u64, rate: &Rate, scope: Scope) -> BucketStatus {
        let interval = rate.period_ms * 1000 / rate.count as u64;
        let burst = rate.burst as u64;
        if interval == 0 {
            // More than one request per microsecond: never refuses.
            return BucketStatus { scope, limit: rate.burst, remaining: rate.burst, reset_us: 0 };
        }
        let ahead = tat.saturating_sub(now);
        // A full bucket is `burst * interval` of credit; each request in
        // flight takes one interval of it.
        let remaining = (burst * interval).saturating_sub(ahead) / interval;
        let remaining = remaining.min(burst);
        // The next slot frees when `ahead` falls to what `remaining + 1`
        // requests leave (at `remaining` 0: GCRA's wait, tat - now - τ).
        let reset_us = ahead.saturating_sub((burst - remaining).saturating_sub(1) * interval);
        BucketStatus { scope, limit: rate.burst, remaining: remaining as u32, reset_us }
    }

    /// `reset_us` in whole milliseconds, rounded up, at least 1: the
    /// 429's `retry_after_ms`.
    pub fn reset_ms(&self) -> u64 {
        self.reset_us.div_ceil(1000).max(1)
    }

    /// The `X-RateLimit-*` response headers, in that order.
    pub fn headers(&self) -> [(&'static str, String); 4] {
        // itoa, not core::fmt: this runs for every counted request.
        let int = |n: u32| itoa::Buffer::new().format(n).to_string();
        [
            ("X-RateLimit-Limit", int(self.limit)),
            ("X-RateLimit-Remaining", int(self.remaining)),
            ("X-RateLimit-Reset-After", seconds_3(self.reset_ms())),
            ("X-RateLimit-Scope", self.scope.as_str().to_string()),
        ]
    }
}

/// Milliseconds as seconds with at most three decimals, trailing zeros
/// dropped: 1000 → `1`, 1500 → `1.5`, 34 → `0.034`.
fn seconds_3(ms: u64) -> String {
    let (whole, mut frac) = (ms / 1000, ms % 1000);
    let mut out = String::with_capacity(24);
    out.push_str(itoa::Buffer::new().format(whole));
    if frac != 0 {
        out.push('.');
        let mut width = 3;
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        let digits = itoa::Buffer::new().format(frac).len();
        out.extend(std::iter::repeat_n('0', width - digits));
        out.push_str(itoa::Buffer::new().format(frac));
    }
    out
}

/// The bucket nearest to refusing: fewest `remaining`; on a tie the longer
/// `reset_us` (the one that holds the caller up longest); on a tie of both
/// the first listed (callers list the bot-wide bucket first).
pub fn nearest(buckets: impl IntoIterator<Item = BucketStatus>) -> Option<BucketStatus> {
    let mut best: Option<BucketStatus> = None;
    for b in buckets {
        let nearer = match best {
            None => true,
            Some(x) => b.remaining < x.remaining || (b.remaining == x.remaining && b.reset_us > x.reset_us),
        };
        if nearer {
            best = Some(b);
        }
    }
    best
}

/// What a check found: `Ok` with the nearest bucket after taking one from
/// each (`None`: the bot has no limit here, so no headers), or `Err` with
/// the refusing bucket that waits longest; a refusal takes nothing.
pub type Checked = Result<Option<BucketStatus>, BucketStatus>;

/// Decides from the two buckets' theoretical arrival times (µs, 0 for a
/// full bucket); returns the new times to store when both take one more.
fn decide(
    bot: Option<(u64, &Rate)>,
    chat: Option<(u64, &Rate, Scope)>,
    now: u64,
) -> (Checked, Option<u64>, Option<u64>) {
    let bot_next = bot.map(|(tat, r)| (tat, r, gcra(tat, now, r)));
    let chat_next = chat.map(|(tat, r, s)| (tat, r, s, gcra(tat, now, r)));
    // Arrays, not Vecs: this runs for every counted request.
    let refused = [
        bot_next.and_then(|(tat, r, n)| n.err().map(|_| BucketStatus::at(tat, now, r, Scope::Bot))),
        chat_next.and_then(|(tat, r, s, n)| n.err().map(|_| BucketStatus::at(tat, now, r, s))),
    ];
    if let Some(refusal) = nearest(refused.into_iter().flatten()) {
        return (Err(refusal), None, None);
    }
    let bot_tat = bot_next.and_then(|(_, _, n)| n.ok());
    let chat_tat = chat_next.and_then(|(_, _, _, n)| n.ok());
    let taken = [
        bot.zip(bot_tat).map(|((_, r), t)| BucketStatus::at(t, now, r, Scope::Bot)),
        chat.zip(chat_tat).map(|((_, r, s), t)| BucketStatus::at(t, now, r, s)),
    ];
    (Ok(nearest(taken.into_iter().flatten())), bot_tat, chat_tat)
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

    /// The "nearest to refusing" rule alone: fewest remaining, then the
    /// longer reset, then the first listed.
    #[test]
    fn nearest_is_fewest_remaining_then_longest_reset_then_first() {
        let bot = status(Scope::Bot, 30, 29, 33_333);
        let chat = status(Scope::Chat, 5, 4, 1_000_000);
        assert_eq!(nearest([bot, chat]), Some(chat), "fewer remaining wins");
        let bot_low = status(Scope::Bot, 30, 3, 10);
        assert_eq!(nearest([bot_low, chat]), Some(bot_low), "fewer remaining wins over a longer reset");
        let group = status(Scope::Group, 20, 3, 3_000_000);
        assert_eq!(nearest([bot_low, group]), Some(group), "a tie on remaining goes to the longer reset");
        assert_eq!(nearest([group, bot_low]), Some(group), "whatever the order");
        let bot_same = status(Scope::Bot, 30, 3, 3_000_000);
        assert_eq!(nearest([bot_same, group]), Some(bot_same), "a full tie goes to the first listed");
        assert_eq!(nearest([group, bot_same]), Some(group));
        assert_eq!(nearest([chat]), Some(chat));
        assert_eq!(nearest([]), None::<BucketStatus>);
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
    fn headers_give_seconds_with_at_most_three_decimals() {
        let h = status(Scope::Group, 20, 0, 2_999_001).headers();
        let want = [
            ("X-RateLimit-Limit", "20"),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset-After", "3"),
            ("X-RateLimit-Scope", "group"),
        ];
        assert_eq!(h.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(), want);
        for (us, text) in [
            (1_500_000, "1.5"),
            (34_000, "0.034"),
            (33_334, "0.034"),
            (120_000, "0.12"),
            (1, "0.001"),
            (0, "0.001"),
            (1_050_000, "1.05"),
            (60_000_000, "60"),
        ] {
            assert_eq!(status(Scope::Bot, 1, 0, us).headers()[2].1, text, "{us} µs");
        }
    }

    #[test]
    fn a_bucket_finer_than_a_microsecond_reports_full() {
        let r = Rate::new(2_000, 1, 3);
        let mut rl = RateLimiter::default();
        assert_eq!(rl.check("b", "c", Some(&r), None, 0), Ok(Some(status(Scope::Bot, 3, 3, 0))));
    }
}
