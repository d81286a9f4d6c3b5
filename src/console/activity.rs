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
const WINDOW: usize = 60;
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

    /// The last 60 minutes of `bot_id` up to `now_ms`.
    pub fn summary(&self, bot_id: &str, now_ms: u64) -> Summary {
        let bots = self.bots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = bots.get(bot_id) else { return Summary::default() };
        let now = now_ms / MINUTE_MS;
        let mut s = Summary { last_request_ms: a.last_request_ms, ..Summary::default() };
        for m in a.minutes.iter().filter(|m| m.at + WINDOW as u64 > now && m.at <= now && m.requests > 0) {
            s.requests += m.requests;
            s.messages_sent += m.messages_sent;
            for (code, n) in &m.refusals {
                *s.refusals.entry(code).or_default() += n;
            }
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
}
