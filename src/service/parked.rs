//! Parked long polls (`getUpdates` with a `timeout` and nothing to return):
//! the registry that holds them (docs/delivery.md, "Parking"). The
//! service's entry points that park, wake, expire and cancel them are in
//! `service/long_poll.rs`.
//!
//! Nothing here waits. A parked poll is a row in memory: the bot, the
//! deadline and the parsed request. A commit that gives the bot events
//! marks its polls due (where the gateway's sessions are woken) before the
//! host's wake hook runs; the host then calls [`Service::poll_parked`],
//! which reads the log for the due polls and answers the expired ones with
//! `[]`. The host arms one timer, for [`Service::parked_timeout`].
//!
//! [`Service::poll_parked`]: crate::Service::poll_parked
//! [`Service::parked_timeout`]: crate::Service::parked_timeout

use crate::methods::updates::Poll;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

/// Names one parked poll, for the host to match an answer to its client.
/// Never reused within a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PollId(pub u64);

/// What [`Service::handle`](crate::Service::handle) did with one request.
pub enum Handled {
    /// The complete HTTP/1.1 response, to send now (a host whose HTTP
    /// stack writes its own heads reads it with
    /// [`into_http_response`](crate::into_http_response)).
    Now(Vec<u8>),
    /// A getUpdates poll waits: hold the connection; its answer comes from
    /// [`Service::poll_parked`] (at the latest at its deadline), unless
    /// the host gives up on it with [`Service::cancel_parked`].
    ///
    /// [`Service::poll_parked`]: crate::Service::poll_parked
    /// [`Service::cancel_parked`]: crate::Service::cancel_parked
    Parked(PollId),
}

/// Default cap on parked polls per service (`Config::max_parked_polls`).
pub use crate::config::DEFAULT_MAX_PARKED_POLLS;

/// Memory one parked poll holds in the registry at most, for sizing: its
/// row (bot id boxed, deadline, the 24-byte request, flags; 64 bytes in a
/// hash map at 7/8 load), its bot id's heap copy (32), its entry in the
/// per-bot index (a second copy of the id and a vector, about 120 when the
/// poll is its bot's only one) and in the deadline index (about 24), and a
/// slot in the due list (8). Counted from the layout, rounded up; the host's
/// connection buffers come on top (docs/delivery.md).
pub const BYTES_PER_PARKED_POLL: usize = 256;

/// Parked polls one bot may hold at once (the protocol's word, which the
/// error `poll_superseded` quotes).
pub use crate::protocol::MAX_PARKED_POLLS_PER_BOT;

/// Why a poll left the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// A commit gave its bot events: read the log.
    Woken,
    /// Its deadline passed: `[]`.
    Expired,
    /// Its bot's token rotated or the bot was suspended: `[]` now; the
    /// client's next call meets the new state (401 or 403).
    Revoked,
    /// Its bot parked more than [`MAX_PARKED_POLLS_PER_BOT`] polls and this
    /// was the oldest: 409 `poll_superseded`.
    Superseded,
}

#[derive(Debug, Clone)]
pub(crate) struct Parked {
    pub bot_id: Box<str>,
    pub deadline_ms: u64,
    pub poll: Poll,
    due: Option<Ready>,
}

/// The parked polls. Every operation is a few map updates under one
/// mutex; no database, no clock (times come in as arguments).
pub(crate) struct Parking {
    state: Mutex<State>,
    cap: usize,
    per_bot: usize,
}

#[derive(Default)]
struct State {
    next_id: u64,
    polls: HashMap<u64, Parked>,
    by_bot: HashMap<Box<str>, Vec<u64>>,
    deadlines: BTreeSet<(u64, u64)>,
    /// Polls marked due and not yet taken.
    due: Vec<u64>,
    /// Polls out of the registry because their bot parked too many, to be
    /// answered `poll_superseded` by the next `take_ready`.
    superseded: Vec<(u64, Parked)>,
    /// Bumped by every wake: a poll whose read began before a wake it may
    /// have missed is due at once when it parks.
    generation: u64,
}

impl Parking {
    pub fn new(cap: usize) -> Parking {
        Parking::with_per_bot(cap, MAX_PARKED_POLLS_PER_BOT)
    }

    /// A registry with `per_bot` in place of [`MAX_PARKED_POLLS_PER_BOT`].
    pub fn with_per_bot(cap: usize, per_bot: usize) -> Parking {
        Parking { state: Mutex::new(State::default()), cap, per_bot: per_bot.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each step leaves the maps consistent: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The wake counter, read before a poll reads the log.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Polls waiting for an answer (the superseded ones, whose 409 is not
    /// yet taken, included: their connections are still held).
    pub fn len(&self) -> usize {
        let st = self.lock();
        st.polls.len() + st.superseded.len()
    }

    /// Parks a poll that found nothing; `None` when the cap is reached.
    /// `seen` is [`Parking::generation`] from before its read: if a wake
    /// came since, it may be for this poll, which is then due at once.
    ///
    /// A bot at its own cap ([`MAX_PARKED_POLLS_PER_BOT`]) always parks:
    /// its oldest poll leaves for `poll_superseded` in its place, so the
    /// total does not grow and the shared cap does not apply.
    pub fn park(&self, bot_id: &str, deadline_ms: u64, poll: Poll, seen: u64) -> Option<PollId> {
        let mut st = self.lock();
        let own = st.by_bot.get(bot_id).map_or(0, Vec::len);
        if own < self.per_bot && st.polls.len() >= self.cap {
            return None;
        }
        st.next_id += 1;
        let id = st.next_id;
        self.insert(&mut st, id, Parked { bot_id: bot_id.into(), deadline_ms, poll, due: None }, seen);
        Some(PollId(id))
    }

    /// Puts back a woken poll whose read found nothing (events of types it
    /// did not ask for), under the same id and deadline.
    pub fn repark(&self, id: PollId, parked: Parked, seen: u64) {
        let mut st = self.lock();
        self.insert(&mut st, id.0, Parked { due: None, ..parked }, seen);
    }

    fn insert(&self, st: &mut State, id: u64, mut p: Parked, seen: u64) {
        if st.generation != seen {
            p.due = Some(Ready::Woken);
            st.due.push(id);
        }
        st.deadlines.insert((p.deadline_ms, id));
        let bot = p.bot_id.clone();
        st.by_bot.entry(bot.clone()).or_default().push(id);
        st.polls.insert(id, p);
        // Over its own cap: the bot's oldest poll (the lowest id; a
        // reparked poll keeps its id) leaves, to be answered 409.
        while let Some(oldest) =
            st.by_bot.get(&bot).filter(|ids| ids.len() > self.per_bot).and_then(|ids| ids.iter().min().copied())
        {
            if let Some(p) = Self::remove(st, oldest) {
                st.superseded.push((oldest, p));
            }
        }
    }

    /// After a commit: the polls of `bots` are due (`Woken`, or `Revoked`
    /// for bots whose token rotated or that were suspended).
    pub fn wake(&self, bots: &[String], why: Ready) {
        let mut st = self.lock();
        st.generation += 1;
        let st = &mut *st;
        for bot in bots {
            let Some(ids) = st.by_bot.get(bot.as_str()) else { continue };
            for id in ids {
                let Some(p) = st.polls.get_mut(id) else { continue };
                // Revoked wins over Woken: no events go to a stale token.
                if p.due.is_none() {
                    st.due.push(*id);
                }
                if p.due != Some(Ready::Revoked) {
                    p.due = Some(why);
                }
            }
        }
    }

    /// The bots with a poll parked here, of `bots` (all of them, when
    /// `all`): another node's commit names them.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn bots_among(&self, all: bool, bots: &[String]) -> Vec<String> {
        let st = self.lock();
        if all {
            return st.by_bot.keys().map(|b| b.to_string()).collect();
        }
        bots.iter().filter(|b| st.by_bot.contains_key(b.as_str())).cloned().collect()
    }

    /// Takes every poll that is due or whose deadline is at or before
    /// `now_ms`, out of the registry, with why; and the wake counter to
    /// repark with.
    pub fn take_ready(&self, now_ms: u64) -> (Vec<(PollId, Parked, Ready)>, u64) {
        let mut st = self.lock();
        let mut ids = std::mem::take(&mut st.due);
        ids.extend(st.deadlines.range(..=(now_ms, u64::MAX)).map(|(_, id)| *id));
        let mut out: Vec<_> =
            std::mem::take(&mut st.superseded).into_iter().map(|(id, p)| (PollId(id), p, Ready::Superseded)).collect();
        out.reserve(ids.len());
        for id in ids {
            if let Some(p) = Self::remove(&mut st, id) {
                // A due poll whose deadline also passed is read once more:
                // the event that woke it is answered, not `[]`.
                let why = p.due.unwrap_or(Ready::Expired);
                out.push((PollId(id), p, why));
            }
        }
        (out, st.generation)
    }

    /// Forgets a poll (its client went away); false if it was not parked.
    pub fn cancel(&self, id: PollId) -> bool {
        let mut st = self.lock();
        if let Some(at) = st.superseded.iter().position(|(s, _)| *s == id.0) {
            st.superseded.swap_remove(at);
            return true;
        }
        Self::remove(&mut st, id.0).is_some()
    }

    fn remove(st: &mut State, id: u64) -> Option<Parked> {
        let p = st.polls.remove(&id)?;
        st.deadlines.remove(&(p.deadline_ms, id));
        if let Some(ids) = st.by_bot.get_mut(&p.bot_id) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                st.by_bot.remove(&p.bot_id);
            }
        }
        Some(p)
    }

    /// When [`Service::poll_parked`] must run next (Unix ms): 0 when a poll
    /// is due now, else the earliest deadline; `None` with nothing parked.
    ///
    /// [`Service::poll_parked`]: crate::Service::poll_parked
    pub fn timeout(&self) -> Option<u64> {
        let st = self.lock();
        if !st.due.is_empty() || !st.superseded.is_empty() {
            return Some(0);
        }
        st.deadlines.first().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll() -> Poll {
        Poll { offset: None, limit: 100, timeout_s: 30, allowed: 1 }
    }

    fn ids(r: &[(PollId, Parked, Ready)]) -> Vec<(u64, Ready)> {
        r.iter().map(|(id, _, why)| (id.0, *why)).collect()
    }

    #[test]
    fn wake_expire_cancel() {
        let p = Parking::new(10);
        let g = p.generation();
        let a = p.park("bot_a", 1_000, poll(), g).unwrap();
        let b = p.park("bot_b", 2_000, poll(), g).unwrap();
        let a2 = p.park("bot_a", 3_000, poll(), g).unwrap();
        assert_eq!(p.timeout(), Some(1_000));
        assert_eq!(ids(&p.take_ready(999).0), vec![]);
        // A commit for bot_a: both of its polls are due, nothing else.
        p.wake(&["bot_a".into(), "bot_c".into()], Ready::Woken);
        assert_eq!(p.timeout(), Some(0));
        let (r, _) = p.take_ready(500);
        assert_eq!(ids(&r), vec![(a.0, Ready::Woken), (a2.0, Ready::Woken)]);
        assert_eq!(p.len(), 1);
        assert_eq!(p.timeout(), Some(2_000));
        assert!(p.cancel(b));
        assert!(!p.cancel(b));
        assert_eq!(p.timeout(), None);
        assert_eq!(p.len(), 0);
        // Expiry at the deadline, not before.
        let c = p.park("bot_c", 5_000, poll(), p.generation()).unwrap();
        assert!(p.take_ready(4_999).0.is_empty());
        assert_eq!(ids(&p.take_ready(5_000).0), vec![(c.0, Ready::Expired)]);
    }

    #[test]
    fn a_wake_during_the_read_is_not_lost() {
        let p = Parking::new(10);
        let seen = p.generation();
        // The read found nothing; a commit woke the bot before it parked.
        p.wake(&["bot_a".into()], Ready::Woken);
        let a = p.park("bot_a", 9_000, poll(), seen).unwrap();
        assert_eq!(p.timeout(), Some(0));
        let (r, seen) = p.take_ready(0);
        assert_eq!(ids(&r), vec![(a.0, Ready::Woken)]);
        // Reparked after a read that found nothing, with no wake since: waits.
        let (_, parked, _) = r.into_iter().next().unwrap();
        p.repark(a, parked, seen);
        assert_eq!(p.timeout(), Some(9_000));
        assert_eq!(ids(&p.take_ready(9_000).0), vec![(a.0, Ready::Expired)]);
    }

    #[test]
    fn revoked_wins_and_each_poll_is_taken_once() {
        let p = Parking::new(10);
        let a = p.park("bot_a", 9_000, poll(), p.generation()).unwrap();
        p.wake(&["bot_a".into()], Ready::Woken);
        p.wake(&["bot_a".into()], Ready::Revoked);
        p.wake(&["bot_a".into()], Ready::Woken);
        assert_eq!(ids(&p.take_ready(9_500).0), vec![(a.0, Ready::Revoked)]);
        assert!(p.take_ready(10_000).0.is_empty());
    }

    #[test]
    fn the_cap_refuses_the_next_poll() {
        let p = Parking::new(2);
        let g = p.generation();
        assert!(p.park("b", 1, poll(), g).is_some());
        let second = p.park("b", 1, poll(), g).unwrap();
        assert_eq!(p.park("b", 1, poll(), g), None);
        p.cancel(second);
        assert!(p.park("b", 1, poll(), g).is_some());
    }

    #[test]
    fn a_bot_over_its_own_cap_has_its_oldest_poll_superseded() {
        let p = Parking::with_per_bot(4, 2);
        let g = p.generation();
        let a1 = p.park("a", 9_000, poll(), g).unwrap();
        let a2 = p.park("a", 8_000, poll(), g).unwrap();
        assert_eq!(p.timeout(), Some(8_000));
        // The third poll of `a` parks; its first (not its earliest
        // deadline) is taken, as Superseded, at once.
        let a3 = p.park("a", 9_500, poll(), g).unwrap();
        assert_eq!(p.len(), 3, "its connection is held until the 409 is taken");
        assert_eq!(p.timeout(), Some(0));
        assert_eq!(ids(&p.take_ready(0).0), vec![(a1.0, Ready::Superseded)]);
        assert_eq!(p.len(), 2);
        // Another bot still parks: `a` holds 2 of the 4.
        let b1 = p.park("b", 9_000, poll(), g).unwrap();
        let b2 = p.park("b", 9_000, poll(), g).unwrap();
        // The shared cap is reached: a bot under its own cap is refused...
        assert_eq!(p.park("c", 9_000, poll(), g), None);
        // ...a bot at its own cap parks in place of its oldest.
        let a4 = p.park("a", 9_000, poll(), g).unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(ids(&p.take_ready(0).0), vec![(a2.0, Ready::Superseded)]);
        assert_eq!(p.len(), 4);
        // Expiry and the other bot are untouched.
        let (r, _) = p.take_ready(9_500);
        let mut got = ids(&r);
        got.sort_by_key(|(id, _)| *id);
        assert_eq!(
            got,
            vec![(a3.0, Ready::Expired), (b1.0, Ready::Expired), (b2.0, Ready::Expired), (a4.0, Ready::Expired)]
        );
    }

    #[test]
    fn a_superseded_poll_whose_client_left_is_cancelled_and_a_repark_keeps_the_cap() {
        let p = Parking::with_per_bot(10, 1);
        let g = p.generation();
        let a1 = p.park("a", 9_000, poll(), g).unwrap();
        let a2 = p.park("a", 9_000, poll(), g).unwrap();
        assert!(p.cancel(a1), "the superseded poll, not yet answered");
        assert!(!p.cancel(a1));
        assert_eq!(p.timeout(), Some(9_000));
        // a2 is woken and taken for its read; meanwhile a3 parks; a2's read
        // found nothing and it is reparked: the bot holds two, so its
        // oldest (a2, the lower id) goes.
        p.wake(&["a".into()], Ready::Woken);
        let (r, seen) = p.take_ready(0);
        let (_, parked, _) = r.into_iter().next().unwrap();
        let a3 = p.park("a", 9_000, poll(), seen).unwrap();
        p.repark(a2, parked, seen);
        assert_eq!(ids(&p.take_ready(0).0), vec![(a2.0, Ready::Superseded)]);
        assert_eq!(ids(&p.take_ready(9_000).0), vec![(a3.0, Ready::Expired)]);
    }

    #[test]
    fn ids_are_not_reused() {
        let p = Parking::new(10);
        let a = p.park("b", 1, poll(), 0).unwrap();
        p.cancel(a);
        let b = p.park("b", 1, poll(), 0).unwrap();
        assert_ne!(a, b);
    }
}
