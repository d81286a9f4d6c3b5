//! Rate limits: the decision alone. Each bucket is a GCRA token bucket
//! given by its theoretical arrival time (µs, 0 for a full bucket); a
//! request is checked against the bot-wide bucket and the bucket of its
//! chat (a private chat's, or a group's) of the bot's tier. Where the
//! buckets are kept is `src/ratelimit.rs`'s (in memory for one process,
//! rows of the transaction for a shared store); both call [`decide`].

use crate::config::{Limits, Rate, TierLimits};
use crate::error::{ApiError, ApiResult};
use crate::model::{ChatKind, Tier};

/// Which limit refused a request (`parameters.scope`): a bot's buckets
/// are `Bot`, `Chat` and `Group` of the words table.
pub use crate::protocol::RateLimitScope as Scope;

/// Returns Err(wait µs) if the bucket at `tat` cannot take one more at `now`.
pub fn gcra(tat: u64, now: u64, rate: &Rate) -> Result<u64, u64> {
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
    pub fn at(tat: u64, now: u64, rate: &Rate, scope: Scope) -> BucketStatus {
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
pub fn decide(
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

/// The limits of a tier in the configuration.
pub fn of_tier(limits: &Limits, tier: Tier) -> &TierLimits {
    match tier {
        Tier::Free => &limits.free,
        Tier::Standard => &limits.standard,
        Tier::Official => &limits.official,
    }
}

/// The chat bucket a request draws from: a private chat's (`scope: chat`)
/// or a group's (`scope: group`); `None` when the tier leaves it unlimited.
pub fn chat_bucket(limits: &TierLimits, kind: ChatKind) -> Option<(&Rate, Scope)> {
    match kind {
        ChatKind::Private => limits.private_chat.as_ref().map(|r| (r, Scope::Chat)),
        ChatKind::Group => limits.group.as_ref().map(|r| (r, Scope::Group)),
    }
}

/// The buckets a limited method of a bot of `limits`' tier takes from in a
/// chat of `kind`: the bot-wide one and the chat's, each `None` when the
/// tier leaves it unlimited. Both `None`: the request is not counted.
pub fn buckets(limits: &TierLimits, kind: ChatKind) -> (Option<&Rate>, Option<(&Rate, Scope)>) {
    (limits.bot.as_ref(), chat_bucket(limits, kind))
}

/// A check's outcome as the request sees it: the nearest bucket for the
/// `X-RateLimit-*` headers, or 429 `rate_limited` with the refusing one.
pub fn outcome(checked: Checked) -> ApiResult<Option<BucketStatus>> {
    checked.map_err(|bucket| refusal(&bucket))
}

/// [`ApiError::rate_limited`] for the bucket that refused, with its
/// `X-RateLimit-*` headers: the same figures as the parameters.
pub fn refusal(bucket: &BucketStatus) -> ApiError {
    let mut e = ApiError::rate_limited(bucket.reset_ms(), bucket.scope);
    e.headers.extend(bucket.headers());
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(scope: Scope, limit: u32, remaining: u32, reset_us: u64) -> BucketStatus {
        BucketStatus { scope, limit, remaining, reset_us }
    }

    #[test]
    fn a_tier_takes_from_its_bot_bucket_and_the_chat_kinds_bucket() {
        let limits = Limits::default();
        let free = of_tier(&limits, Tier::Free);
        assert_eq!(
            buckets(free, ChatKind::Private),
            (Some(&Rate::new(30, 1_000, 30)), Some((&Rate::new(1, 1_000, 5), Scope::Chat)))
        );
        assert_eq!(buckets(free, ChatKind::Group).1, Some((&Rate::new(20, 60_000, 20), Scope::Group)));
        assert_eq!(buckets(of_tier(&limits, Tier::Official), ChatKind::Private), (None, None));
        let bot_only = TierLimits { bot: Some(Rate::new(5, 1_000, 5)), private_chat: None, group: None };
        assert_eq!(buckets(&bot_only, ChatKind::Group), (Some(&Rate::new(5, 1_000, 5)), None));
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
    fn decide_refuses_with_the_longest_wait_and_takes_nothing() {
        let bot = Rate::new(1, 1000, 1);
        let chat = Rate::new(1, 2000, 1);
        // Both full: both take one; the chat's bucket (longer interval) is nearer.
        let (ok, b, c) = decide(Some((0, &bot)), Some((0, &chat, Scope::Chat)), 0);
        assert_eq!(ok, Ok(Some(status(Scope::Chat, 1, 0, 2_000_000))));
        assert_eq!((b, c), (Some(1_000_000), Some(2_000_000)));
        // Both empty: the refusal is the bucket that waits longest; nothing is taken.
        let (refused, b, c) = decide(Some((1_000_000, &bot)), Some((2_000_000, &chat, Scope::Chat)), 0);
        assert_eq!(refused, Err(status(Scope::Chat, 1, 0, 2_000_000)));
        assert_eq!((b, c), (None, None));
        // Only the bot's bucket is empty: it refuses, and the chat keeps its slot.
        let (refused, _, c) = decide(Some((1_000_000, &bot)), Some((0, &chat, Scope::Group)), 0);
        assert_eq!(refused, Err(status(Scope::Bot, 1, 0, 1_000_000)));
        assert_eq!(c, None);
    }

    #[test]
    fn tier_and_chat_kind_pick_the_buckets() {
        let limits = Limits::default();
        let free = of_tier(&limits, Tier::Free);
        assert_eq!(chat_bucket(free, ChatKind::Private).map(|(_, s)| s), Some(Scope::Chat));
        assert_eq!(chat_bucket(free, ChatKind::Group).map(|(_, s)| s), Some(Scope::Group));
        let official = of_tier(&limits, Tier::Official);
        assert!(official.bot.is_none() && chat_bucket(official, ChatKind::Private).is_none());
        let e = outcome(Err(status(Scope::Bot, 30, 0, 1_500_000))).unwrap_err();
        assert_eq!(e.code, "rate_limited");
        assert_eq!(e.parameters.as_ref().unwrap()["scope"], "bot");
        assert_eq!(e.parameters.as_ref().unwrap()["retry_after_ms"], 1500);
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
}
