//! Per-bot activity of the last hour, counted in memory on this node:
//! requests, refusals by error code (429 included) and messages sent.
//!
//! In memory on purpose: a refused request writes nothing (docs/errors.md),
//! so a durable refusal counter would break that rule, and a
//! write per request would cost every request a row. The figures are
//! therefore this node's since it started (docs/decisions.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

const MINUTE_MS: u64 = 60_000;
/// Minutes kept: the last hour.
pub const WINDOW: usize = 60;
/// Bots tracked at most; beyond, the least recently seen is forgotten.
const MAX_BOTS: usize = 100_000;

#[derive(Default, Clone)]
struct Minute {
    /// Minute number (Unix ms / 60 000) this slot holds.
    at: u64,
    requests: u64,
    messages_sent: u64,
    refusals: BTreeMap<&'static str, u64>,
}

#[derive(Default)]
struct BotActivity {
    minutes: Vec<Minute>,
    last_request_ms: u64,
}

/// Counters of every bot.
#[derive(Default)]
pub struct Activity {
    bots: Mutex<HashMap<String, BotActivity>>,
}

/// A bot's figures over the last hour.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub requests: u64,
    pub messages_sent: u64,
    pub refusals: BTreeMap<&'static str, u64>,
    /// Unix ms of the bot's last request on this node; 0 for none.
    pub last_request_ms: u64,
}

/// A bot's last hour per minute ([`Activity::series`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// Unix ms at which slot 0's minute starts (a multiple of 60 000).
    pub start_ms: u64,
    pub requests: [u64; WINDOW],
    pub messages_sent: [u64; WINDOW],
    /// Refused requests, every error code together.
    pub refused: [u64; WINDOW],
}

impl Series {
    /// The hour ending with `now_ms`'s minute, with no request in it.
    pub fn empty(now_ms: u64) -> Series {
        let first = (now_ms / MINUTE_MS).saturating_sub(WINDOW as u64 - 1);
        Series { start_ms: first * MINUTE_MS, requests: [0; WINDOW], messages_sent: [0; WINDOW], refused: [0; WINDOW] }
    }
}

/// The slots that hold a minute of the hour ending with `now_ms`'s minute
/// (the 60 minutes `now - 59 ..= now`); a slot last written more than an
/// hour ago, or by a clock ahead of `now_ms`, is not in it.
fn in_window(minutes: &[Minute], now_ms: u64) -> impl Iterator<Item = &Minute> {
    let now = now_ms / MINUTE_MS;
    minutes.iter().filter(move |m| m.at + WINDOW as u64 > now && m.at <= now && m.requests > 0)
}

impl Activity {
    /// Counts one request of `bot_id`: refused with `refusal`, or
    /// succeeded; `sent` when it sent a message.
    pub fn record(&self, bot_id: &str, now_ms: u64, refusal: Option<&'static str>, sent: bool) {
        let mut bots = self.bots.lock().unwrap_or_else(|e| e.into_inner());
        if bots.len() >= MAX_BOTS && !bots.contains_key(bot_id) {
            if let Some(oldest) = bots.iter().min_by_key(|(_, a)| a.last_request_ms).map(|(k, _)| k.clone()) {
                bots.remove(&oldest);
            }
        }
        let a = bots.entry(bot_id.to_string()).or_default();
        a.last_request_ms = a.last_request_ms.max(now_ms);
        let at = now_ms / MINUTE_MS;
        if a.minutes.is_empty() {
            a.minutes.resize(WINDOW, Minute::default());
        }
        let slot = &mut a.minutes[(at % WINDOW as u64) as usize];
        if slot.at != at {
            *slot = Minute { at, ..Minute::default() };
        }
        slot.requests += 1;
        if sent {
            slot.messages_sent += 1;
        }
        if let Some(code) = refusal {
            *slot.refusals.entry(code).or_default() += 1;
        }
    }

    /// The last 60 minutes of `bot_id` up to `now_ms`: the totals are the
    /// sums of [`Activity::series`], so both always agree.
    pub fn summary(&self, bot_id: &str, now_ms: u64) -> Summary {
        let bots = self.bots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = bots.get(bot_id) else { return Summary::default() };
        let mut s = Summary { last_request_ms: a.last_request_ms, ..Summary::default() };
        for m in in_window(&a.minutes, now_ms) {
            s.requests += m.requests;
            s.messages_sent += m.messages_sent;
            for (code, n) in &m.refusals {
                *s.refusals.entry(code).or_default() += n;
            }
        }
        s
    }

    /// The last hour of `bot_id` minute by minute, oldest first: slot 59
    /// is the minute `now_ms` falls in, slot 0 the one 59 minutes before.
    /// A minute with no request is 0.
    pub fn series(&self, bot_id: &str, now_ms: u64) -> Series {
        let mut s = Series::empty(now_ms);
        let first = s.start_ms / MINUTE_MS;
        let bots = self.bots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = bots.get(bot_id) else { return s };
        for m in in_window(&a.minutes, now_ms) {
            let i = (m.at - first) as usize;
            s.requests[i] = m.requests;
            s.messages_sent[i] = m.messages_sent;
            s.refused[i] = m.refusals.values().sum();
        }
        s
    }

    /// Unix ms of the bot's last request on this node, 0 for none.
    pub fn last_request_ms(&self, bot_id: &str) -> u64 {
        let bots = self.bots.lock().unwrap_or_else(|e| e.into_inner());
        bots.get(bot_id).map_or(0, |a| a.last_request_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fall_out_of_the_window_after_an_hour() {
        let a = Activity::default();
        let t0 = 1_767_225_600_000;
        a.record("bot_a", t0, None, true);
        a.record("bot_a", t0 + 1, Some("rate_limited"), false);
        a.record("bot_a", t0 + 30 * MINUTE_MS, Some("rate_limited"), false);
        let s = a.summary("bot_a", t0 + 30 * MINUTE_MS);
        assert_eq!((s.requests, s.messages_sent, s.refusals.get("rate_limited").copied()), (3, 1, Some(2)));
        assert_eq!(s.last_request_ms, t0 + 30 * MINUTE_MS);
        // An hour after the first minute, only the later request counts.
        let s = a.summary("bot_a", t0 + 60 * MINUTE_MS);
        assert_eq!((s.requests, s.messages_sent, s.refusals.get("rate_limited").copied()), (1, 0, Some(1)));
        assert_eq!(a.summary("bot_b", t0), Summary::default());
    }

    /// A series' slots as (index, requests, messages, refused), zeros left out.
    fn nonzero(s: &Series) -> Vec<(usize, u64, u64, u64)> {
        (0..WINDOW)
            .filter(|&i| s.requests[i] + s.messages_sent[i] + s.refused[i] > 0)
            .map(|i| (i, s.requests[i], s.messages_sent[i], s.refused[i]))
            .collect()
    }

    #[test]
    fn the_series_counts_each_minute_in_its_own_slot_oldest_first() {
        let a = Activity::default();
        // 2026-01-01T00:00:00Z, a minute boundary.
        let t0 = 1_767_225_600_000;
        for _ in 0..4 {
            a.record("bot_a", t0 + 5_000, None, true);
        }
        a.record("bot_a", t0 + 6_000, Some("rate_limited"), false);
        a.record("bot_a", t0 + 7_000, Some("text_empty"), false);
        a.record("bot_a", t0 + 8_000, None, false);
        // The last millisecond of the minute is still in it; the next one is the next minute.
        a.record("bot_a", t0 + MINUTE_MS - 1, None, true);
        a.record("bot_a", t0 + MINUTE_MS, Some("rate_limited"), false);
        a.record("bot_b", t0, None, true);

        // Read in the first minute: it is slot 59, and the window starts 59 minutes before.
        let s = a.series("bot_a", t0 + 30_000);
        assert_eq!(s.start_ms, t0 - 59 * MINUTE_MS);
        assert_eq!(nonzero(&s), [(59, 8, 5, 2)]);
        // Read at the first millisecond of the next minute: both minutes, one slot apart.
        let s = a.series("bot_a", t0 + MINUTE_MS);
        assert_eq!(s.start_ms, t0 - 58 * MINUTE_MS);
        assert_eq!(nonzero(&s), [(58, 8, 5, 2), (59, 1, 0, 1)]);
        // The totals are the series' sums, and refusals keep their codes there.
        let sum = a.summary("bot_a", t0 + MINUTE_MS);
        assert_eq!((sum.requests, sum.messages_sent), (9, 5));
        assert_eq!(sum.refusals.into_iter().collect::<Vec<_>>(), [("rate_limited", 2), ("text_empty", 1)]);
        // Another bot's requests are its own; an unknown bot has an empty hour.
        assert_eq!(nonzero(&a.series("bot_b", t0)), [(59, 1, 1, 0)]);
        let none = a.series("bot_c", t0);
        assert_eq!((none.start_ms, nonzero(&none)), (t0 - 59 * MINUTE_MS, vec![]));
    }

    #[test]
    fn the_series_holds_exactly_the_last_sixty_minutes() {
        let a = Activity::default();
        let t0 = 1_767_225_600_000;
        a.record("bot_a", t0, None, true);
        a.record("bot_a", t0 + 10 * MINUTE_MS + 1, None, false);
        // 59 minutes later the first minute is slot 0, the oldest still shown.
        let s = a.series("bot_a", t0 + 59 * MINUTE_MS + 59_999);
        assert_eq!(s.start_ms, t0);
        assert_eq!(nonzero(&s), [(0, 1, 1, 0), (10, 1, 0, 0)]);
        // One minute more and it has left the window; the later one moved down a slot.
        let s = a.series("bot_a", t0 + 60 * MINUTE_MS);
        assert_eq!(s.start_ms, t0 + MINUTE_MS);
        assert_eq!(nonzero(&s), [(9, 1, 0, 0)]);
        assert_eq!(a.summary("bot_a", t0 + 60 * MINUTE_MS).requests, 1);
        // A slot reused an hour later holds only the new minute.
        a.record("bot_a", t0 + 60 * MINUTE_MS, Some("rate_limited"), false);
        assert_eq!(nonzero(&a.series("bot_a", t0 + 60 * MINUTE_MS)), [(9, 1, 0, 0), (59, 1, 0, 1)]);
        // Read with a clock behind the last write, that later minute is not
        // shown (and the first minute's slot now holds it, so that is gone).
        assert_eq!(nonzero(&a.series("bot_a", t0 + 10 * MINUTE_MS)), [(59, 1, 0, 0)]);
    }
}
