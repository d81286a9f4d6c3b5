//! Failed admin authentication, throttled per peer: the admin secret is
//! one credential for the whole host API, so guessing it must be slow.
//!
//! A token bucket per peer address: `BURST` failures at once, then one
//! more every `REFILL_MS`. A peer out of tokens is refused before its
//! credential is even looked at (a right guess must not be told apart from
//! a wrong one), with 429 `rate_limited`, scope `admin_auth`. The map is
//! bounded: past `MAX_PEERS`, peers whose bucket is full again are
//! forgotten, and if that is not enough, all are.

use std::collections::HashMap;
use std::sync::Mutex;

pub const BURST: u32 = 10;
pub const REFILL_MS: u64 = 6_000;
const MAX_PEERS: usize = 10_000;

#[derive(Default)]
pub(crate) struct AdminThrottle {
    peers: Mutex<HashMap<String, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    /// Failures still allowed at `at_ms`.
    tokens: u32,
    at_ms: u64,
}

impl Bucket {
    fn refilled(self, now_ms: u64) -> Bucket {
        let gained = now_ms.saturating_sub(self.at_ms) / REFILL_MS;
        let tokens = (self.tokens as u64 + gained).min(BURST as u64) as u32;
        // Keep the partial interval: time moves in whole refills.
        let at_ms = if tokens == BURST { now_ms } else { self.at_ms + gained * REFILL_MS };
        Bucket { tokens, at_ms }
    }
}

impl AdminThrottle {
    /// `Err(wait_ms)` when `peer` must wait before its next attempt.
    pub fn check(&self, peer: &str, now_ms: u64) -> Result<(), u64> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        match peers.get(peer).map(|b| b.refilled(now_ms)) {
            Some(b) if b.tokens == 0 => Err((b.at_ms + REFILL_MS).saturating_sub(now_ms).max(1)),
            _ => Ok(()),
        }
    }

    /// Counts a failed authentication of `peer`.
    pub fn failed(&self, peer: &str, now_ms: u64) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() >= MAX_PEERS && !peers.contains_key(peer) {
            peers.retain(|_, b| b.refilled(now_ms).tokens < BURST);
            if peers.len() >= MAX_PEERS {
                peers.clear();
            }
        }
        let b = peers.get(peer).copied().unwrap_or(Bucket { tokens: BURST, at_ms: now_ms }).refilled(now_ms);
        peers.insert(peer.to_string(), Bucket { tokens: b.tokens.saturating_sub(1), ..b });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_attempt_per_refill() {
        let t = AdminThrottle::default();
        for _ in 0..BURST {
            assert_eq!(t.check("p", 0), Ok(()));
            t.failed("p", 0);
        }
        assert_eq!(t.check("p", 0), Err(REFILL_MS));
        assert_eq!(t.check("p", 1_000), Err(REFILL_MS - 1_000));
        assert_eq!(t.check("other", 0), Ok(()), "per peer");
        assert_eq!(t.check("p", REFILL_MS), Ok(()));
        t.failed("p", REFILL_MS);
        assert_eq!(t.check("p", REFILL_MS), Err(REFILL_MS));
        assert_eq!(t.check("p", REFILL_MS * (BURST as u64 + 5)), Ok(()), "refills up to the burst");
    }
}
