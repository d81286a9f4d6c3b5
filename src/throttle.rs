//! Failed admin authentication, throttled: the admin secret is one
//! credential for the whole host API, so guessing it must be slow, and a
//! guesser must not get a fresh start by making other clients fail.
//!
//! The rule, with `now` as input (the service passes its clock):
//!
//! - Each client has a token bucket ([`PEER`]: 10 attempts at once, then
//!   one more every 6 s), and so has its network — the /24 of an IPv4
//!   address, the /64 of an IPv6 one ([`NET`]: 50 at once, one more every
//!   1.2 s) — so a guesser with a whole subnet gets five addresses' worth,
//!   not 256 or 2^64. A client that is not an IP address (a host's own key)
//!   has its own bucket only.
//! - An attempt takes a token from every bucket of its client before the
//!   credential is looked at; a success gives them back. A client with an
//!   empty bucket is refused (429 `rate_limited`, scope `admin_auth`) and
//!   its credential is never evaluated: a right guess must not be told
//!   apart from a wrong one. A refused attempt takes nothing.
//! - Bounded memory: at most [`MAX_ENTRIES`] buckets are kept. A bucket
//!   that is full again carries no information and is dropped; a bucket
//!   that holds failures is never dropped, whatever other clients do. When
//!   the map is full of buckets holding failures, a client without a bucket
//!   of its own draws from one shared overflow bucket ([`OVERFLOW`], as if
//!   all such clients were one peer) instead of evicting anyone.
//! - The last [`RECENT`] clients that logged in successfully get buckets of
//!   their own even then, in a reserve of [`RESERVE`] entries past the
//!   bound: an operator who got in before a spray is not shut out by it.
//!   Only the secret puts a client on that list.
//! - One more bucket bounds the secrets checked across all clients
//!   ([`GLOBAL`]: 200 at once, one more every 75 ms, so at most 1 000 in
//!   any minute and 800 a minute sustained), however many networks a
//!   spray comes from: the per-network buckets alone let 20 000 /24s try
//!   about 196 000 a minute. Every attempt draws from it, except those of
//!   a client that logged in within [`TRUSTED_FOR_MS`] (an hour): an
//!   operator keeps being checked during a spray, while a client never
//!   seen before waits for a token with the spray's addresses.
//!
//! Taking the token up front (rather than counting the failure after) makes
//! the check and the count one step under the lock: concurrent attempts of
//! one client cannot all pass the check before the first failure is counted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// A bucket's size and refill time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub burst: u32,
    pub refill_ms: u64,
}

/// One client (address or host key).
pub(crate) const PEER: Policy = Policy { burst: 10, refill_ms: 6_000 };
/// One /24 (IPv4) or /64 (IPv6).
pub(crate) const NET: Policy = Policy { burst: 50, refill_ms: 1_200 };
/// Every client that found no room in a full map, together.
pub(crate) const OVERFLOW: Policy = Policy { burst: 10, refill_ms: 6_000 };
/// Every client that has not logged in lately, together: 200 at once, one
/// more every 75 ms. In any 60 s at most 200 + 60 000 / 75 = 1 000
/// attempts pass it; sustained, 800 a minute.
pub(crate) const GLOBAL: Policy = Policy { burst: 200, refill_ms: 75 };
/// How long a successful login exempts its client from [`GLOBAL`].
pub(crate) const TRUSTED_FOR_MS: u64 = 3_600_000;
/// Buckets kept at most (clients and networks together): about 1 MB.
pub(crate) const MAX_ENTRIES: usize = 16_384;
/// Clients remembered for their last successful login.
pub(crate) const RECENT: usize = 64;
/// Entries past `MAX_ENTRIES` that only those clients may take.
pub(crate) const RESERVE: usize = 2 * RECENT;
/// At the bound, the map is swept for full buckets at most this often: a
/// sweep walks every entry, and an attacker at the bound must not make
/// every attempt pay for one.
const SWEEP_GAP_MS: u64 = 1_000;

/// Who made an attempt, as the throttle keys it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Client {
    Ip(IpAddr),
    /// A host's key that is not an IP address.
    Key(String),
}

impl Client {
    /// The host's peer string: an IP address (`[v6]:port` and `v4:port`
    /// too; the port is dropped, it names a connection, not a client), else
    /// an opaque key.
    pub(crate) fn from_peer(peer: &str) -> Client {
        match parse_ip(peer) {
            Some(ip) => Client::Ip(ip),
            None => Client::Key(peer.to_string()),
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::Ip(ip) => ip.fmt(f),
            Client::Key(k) => f.write_str(k),
        }
    }
}

/// An IP address, with or without a port (`1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]`, `[::1]:80`); IPv4-mapped IPv6 addresses become IPv4.
pub(crate) fn parse_ip(s: &str) -> Option<IpAddr> {
    let s = s.trim();
    let ip = s
        .parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| s.strip_prefix('[')?.strip_suffix(']')?.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6))?;
    Some(ip.to_canonical())
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Key {
    Addr(IpAddr),
    Net4([u8; 3]),
    Net6([u8; 8]),
    Other(Box<str>),
}

impl Key {
    fn policy(&self) -> Policy {
        match self {
            Key::Net4(_) | Key::Net6(_) => NET,
            Key::Addr(_) | Key::Other(_) => PEER,
        }
    }

    /// The buckets an attempt of `client` draws from.
    fn of(client: &Client) -> Vec<Key> {
        match client {
            Client::Ip(ip @ IpAddr::V4(v4)) => {
                let o = v4.octets();
                vec![Key::Net4([o[0], o[1], o[2]]), Key::Addr(*ip)]
            }
            Client::Ip(ip @ IpAddr::V6(v6)) => {
                let mut net = [0u8; 8];
                net.copy_from_slice(&v6.octets()[..8]);
                vec![Key::Net6(net), Key::Addr(*ip)]
            }
            Client::Key(k) => vec![Key::Other(k.as_str().into())],
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Attempts still allowed at `at_ms`.
    tokens: u32,
    at_ms: u64,
}

impl Bucket {
    fn full(p: Policy, now_ms: u64) -> Bucket {
        Bucket { tokens: p.burst, at_ms: now_ms }
    }

    fn refilled(self, p: Policy, now_ms: u64) -> Bucket {
        let gained = now_ms.saturating_sub(self.at_ms) / p.refill_ms;
        let tokens = (self.tokens as u64).saturating_add(gained).min(p.burst as u64) as u32;
        // Keep the partial interval: time moves in whole refills.
        let at_ms = if tokens == p.burst { now_ms } else { self.at_ms + gained * p.refill_ms };
        Bucket { tokens, at_ms }
    }

    /// How long until an empty (refilled) bucket has a token.
    fn wait_ms(self, p: Policy, now_ms: u64) -> u64 {
        (self.at_ms + p.refill_ms).saturating_sub(now_ms).max(1)
    }
}

/// The tokens one admitted attempt took, to give back on success.
#[derive(Debug)]
pub(crate) struct Attempt {
    client: Key,
    keys: Vec<Key>,
    overflow: bool,
    /// It took a token from the global bucket.
    global: bool,
}

/// The throttle's state; [`AdminThrottle`] puts it behind a lock.
pub(crate) struct Throttle {
    entries: HashMap<Key, Bucket>,
    overflow: Bucket,
    /// Everyone not trusted, together ([`GLOBAL`]).
    global: Bucket,
    global_policy: Policy,
    max_entries: usize,
    swept_at_ms: Option<u64>,
    /// Clients (their own key) that logged in lately, oldest first, with
    /// the time of their last success.
    recent: std::collections::VecDeque<(Key, u64)>,
}

impl Throttle {
    pub(crate) fn new(max_entries: usize) -> Throttle {
        Throttle::with_global(max_entries, GLOBAL)
    }

    /// A throttle whose global bucket is `global` (the tests of the map's
    /// bound lift it, to reach the bound).
    pub(crate) fn with_global(max_entries: usize, global: Policy) -> Throttle {
        Throttle {
            entries: HashMap::new(),
            overflow: Bucket::full(OVERFLOW, 0),
            global: Bucket::full(global, 0),
            global_policy: global,
            max_entries,
            swept_at_ms: None,
            recent: Default::default(),
        }
    }

    /// Admits an attempt of `client` (taking its tokens), or says how many
    /// milliseconds it must wait; a refused attempt changes nothing.
    pub(crate) fn attempt(&mut self, client: &Client, now_ms: u64) -> Result<Attempt, u64> {
        let keys = Key::of(client);
        // The client's own key comes last (after its network's).
        let own = keys[keys.len() - 1].clone();
        let mut wait_ms = 0;
        let mut absent = 0;
        for k in &keys {
            match self.entries.get(k) {
                Some(b) => {
                    let p = k.policy();
                    let b = b.refilled(p, now_ms);
                    if b.tokens == 0 {
                        wait_ms = wait_ms.max(b.wait_ms(p, now_ms));
                    }
                }
                None => absent += 1,
            }
        }
        // The buckets this client lacks go into the map if they fit, else
        // the attempt draws from the overflow bucket instead.
        let recent = self.recent.iter().find(|(k, _)| *k == own).map(|(_, at)| *at);
        let reserve = if recent.is_some() { RESERVE } else { 0 };
        // A client that logged in within the hour is not counted in the
        // global bound (its own buckets still hold its failures).
        let global = recent.is_none_or(|at| now_ms >= at.saturating_add(TRUSTED_FOR_MS));
        if global {
            let g = self.global_policy;
            self.global = self.global.refilled(g, now_ms);
            if self.global.tokens == 0 {
                wait_ms = wait_ms.max(self.global.wait_ms(g, now_ms));
            }
        }
        if wait_ms > 0 {
            // Refused before any bucket is made: a spray refused here
            // leaves nothing in the map.
            return Err(wait_ms);
        }
        let overflow = absent > 0 && !self.room_for(absent, reserve, now_ms);
        if overflow {
            self.overflow = self.overflow.refilled(OVERFLOW, now_ms);
            if self.overflow.tokens == 0 {
                wait_ms = wait_ms.max(self.overflow.wait_ms(OVERFLOW, now_ms));
            }
        }
        if wait_ms > 0 {
            return Err(wait_ms);
        }
        let mut charged = Vec::with_capacity(keys.len());
        for k in keys {
            let p = k.policy();
            let b = match self.entries.get(&k) {
                Some(b) => b.refilled(p, now_ms),
                None if overflow => continue,
                None => Bucket::full(p, now_ms),
            };
            self.entries.insert(k.clone(), Bucket { tokens: b.tokens - 1, ..b });
            charged.push(k);
        }
        if overflow {
            self.overflow.tokens -= 1;
        }
        if global {
            self.global.tokens -= 1;
        }
        Ok(Attempt { client: own, keys: charged, overflow, global })
    }

    /// The attempt succeeded: its tokens come back (a full bucket is
    /// dropped, it carries nothing).
    pub(crate) fn succeeded(&mut self, attempt: Attempt, now_ms: u64) {
        self.recent.retain(|(k, _)| *k != attempt.client);
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((attempt.client, now_ms));
        if attempt.global {
            let g = self.global_policy;
            let b = self.global.refilled(g, now_ms);
            self.global = Bucket { tokens: (b.tokens + 1).min(g.burst), ..b };
        }
        for k in attempt.keys {
            let p = k.policy();
            if let Some(b) = self.entries.get(&k).map(|b| b.refilled(p, now_ms)) {
                let tokens = (b.tokens + 1).min(p.burst);
                if tokens == p.burst {
                    self.entries.remove(&k);
                } else {
                    self.entries.insert(k, Bucket { tokens, ..b });
                }
            }
        }
        if attempt.overflow {
            let b = self.overflow.refilled(OVERFLOW, now_ms);
            self.overflow = Bucket { tokens: (b.tokens + 1).min(OVERFLOW.burst), ..b };
        }
    }

    /// Whether `n` more buckets fit (`reserve`: how many entries past the
    /// bound this client may take), after dropping full ones if the map is
    /// at its bound (at most once per `SWEEP_GAP_MS`).
    fn room_for(&mut self, n: usize, reserve: usize, now_ms: u64) -> bool {
        if self.entries.len() + n <= self.max_entries {
            return true;
        }
        if self.swept_at_ms.is_none_or(|at| now_ms >= at.saturating_add(SWEEP_GAP_MS)) {
            self.swept_at_ms = Some(now_ms);
            self.entries.retain(|k, b| {
                let p = k.policy();
                b.refilled(p, now_ms).tokens < p.burst
            });
        }
        self.entries.len() + n <= self.max_entries + reserve
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The service's throttle: [`Throttle`] behind a lock.
pub(crate) struct AdminThrottle(Mutex<Throttle>);

impl Default for AdminThrottle {
    fn default() -> Self {
        AdminThrottle(Mutex::new(Throttle::new(MAX_ENTRIES)))
    }
}

impl AdminThrottle {
    pub(crate) fn attempt(&self, client: &Client, now_ms: u64) -> Result<Attempt, u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).attempt(client, now_ms)
    }

    pub(crate) fn succeeded(&self, attempt: Attempt, now_ms: u64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).succeeded(attempt, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(a: u8, b: u8, c: u8, d: u8) -> Client {
        Client::Ip(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
    }

    fn v6(net: u16, host: u16) -> Client {
        Client::Ip(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, net, 0, 0, 0, host)))
    }

    /// A global bucket that never runs out.
    const UNBOUNDED: Policy = Policy { burst: u32::MAX, refill_ms: 1 };

    /// Client `i` of a spray: each in a /24 of its own.
    fn sprayer(i: u32) -> Client {
        v4(10, (i >> 8) as u8, (i & 255) as u8, 1)
    }

    /// `n` failed attempts (admitted, not given back).
    fn fail(t: &mut Throttle, c: &Client, n: u32, now: u64) {
        for i in 0..n {
            t.attempt(c, now).unwrap_or_else(|w| panic!("attempt {i} of {c} refused, wait {w}"));
        }
    }

    #[test]
    fn a_burst_then_one_attempt_per_refill_and_a_success_gives_its_token_back() {
        let mut t = Throttle::new(MAX_ENTRIES);
        let p = v4(203, 0, 113, 7);
        fail(&mut t, &p, PEER.burst, 0);
        assert_eq!(t.attempt(&p, 0).unwrap_err(), 6_000);
        assert_eq!(t.attempt(&p, 1_000).unwrap_err(), 5_000, "a refused attempt takes nothing");
        assert!(t.attempt(&v4(198, 51, 100, 1), 0).is_ok(), "per client");
        let a = t.attempt(&p, 6_000).expect("one more after 6 s");
        t.succeeded(a, 6_000);
        let a = t.attempt(&p, 6_000).expect("the success gave its token back");
        drop(a); // a failure
        assert_eq!(t.attempt(&p, 6_000).unwrap_err(), 6_000);
        assert!(t.attempt(&p, 6_000 * (PEER.burst as u64 + 5)).is_ok(), "refills up to the burst");
    }

    #[test]
    fn a_successful_attempt_leaves_no_bucket_behind() {
        let mut t = Throttle::new(MAX_ENTRIES);
        let a = t.attempt(&v4(10, 0, 0, 1), 0).unwrap();
        assert_eq!(t.len(), 2, "its address and its /24");
        t.succeeded(a, 0);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_subnet_gets_five_addresses_worth_then_waits_as_one() {
        let mut t = Throttle::new(MAX_ENTRIES);
        for host in 0..5 {
            fail(&mut t, &v4(192, 0, 2, host), PEER.burst, 0);
        }
        // The /24 is spent: a sixth address of it waits, one elsewhere does not.
        assert_eq!(t.attempt(&v4(192, 0, 2, 200), 0).unwrap_err(), NET.refill_ms);
        assert!(t.attempt(&v4(192, 0, 3, 200), 0).is_ok());
        // The longer of the two waits is the one reported.
        assert_eq!(t.attempt(&v4(192, 0, 2, 0), 0).unwrap_err(), PEER.refill_ms);
        assert!(t.attempt(&v4(192, 0, 2, 200), NET.refill_ms).is_ok());
        // IPv6: the /64 is the unit; another /64 is another network.
        for host in 0..5 {
            fail(&mut t, &v6(1, host), PEER.burst, 0);
        }
        assert_eq!(t.attempt(&v6(1, 0xffff), 0).unwrap_err(), NET.refill_ms);
        assert!(t.attempt(&v6(2, 0xffff), 0).is_ok());
    }

    #[test]
    fn a_host_key_that_is_not_an_address_has_its_own_bucket_only() {
        let mut t = Throttle::new(MAX_ENTRIES);
        let c = Client::from_peer("session-7f3a");
        assert_eq!(c, Client::Key("session-7f3a".into()));
        fail(&mut t, &c, PEER.burst, 0);
        assert_eq!(t.attempt(&c, 0).unwrap_err(), PEER.refill_ms);
        assert!(t.attempt(&Client::from_peer("session-7f3b"), 0).is_ok());
    }

    #[test]
    fn peers_parse_with_or_without_a_port_and_mapped_ipv4_is_ipv4() {
        let ip = |s: &str| parse_ip(s);
        assert_eq!(ip("203.0.113.7"), Some("203.0.113.7".parse().unwrap()));
        assert_eq!(ip(" 203.0.113.7:4711 "), Some("203.0.113.7".parse().unwrap()));
        assert_eq!(ip("::ffff:203.0.113.7"), Some("203.0.113.7".parse().unwrap()));
        assert_eq!(ip("[2001:db8::1]:443"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(ip("[2001:db8::1]"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(ip("unknown"), None);
        assert_eq!(ip(""), None);
        // The port does not make another client.
        let mut t = Throttle::new(MAX_ENTRIES);
        fail(&mut t, &Client::from_peer("203.0.113.7:1"), PEER.burst, 0);
        assert!(t.attempt(&Client::from_peer("203.0.113.7:2"), 0).is_err());
        assert!(t.attempt(&Client::from_peer("::ffff:203.0.113.7"), 0).is_err());
    }

    /// The attack this module exists for: a guesser spends its burst, then
    /// 20 000 other clients fail once each; the guesser is still refused.
    #[test]
    fn a_guesser_stays_throttled_after_twenty_thousand_other_clients_fail() {
        // The global bound lifted, so the spray reaches the map's bound.
        let mut t = Throttle::with_global(MAX_ENTRIES, UNBOUNDED);
        let guesser = v4(127, 0, 0, 2);
        fail(&mut t, &guesser, PEER.burst, 0);
        let (mut admitted, mut refused) = (0, 0);
        for i in 0..20_000u32 {
            // IPv4 addresses 40 to a /24, then one IPv6 /64 each.
            let c = if i < 10_000 {
                v4(127, 1 + (i / 40 / 256) as u8, (i / 40 % 256) as u8, (i % 40) as u8)
            } else {
                v6(i as u16, 1)
            };
            match t.attempt(&c, 1_000) {
                Ok(_) => admitted += 1,
                Err(_) => refused += 1,
            }
        }
        assert!(t.len() <= MAX_ENTRIES, "{}", t.len());
        assert_eq!(t.attempt(&guesser, 1_000).unwrap_err(), 5_000);
        // The map filled up; later clients shared the overflow bucket.
        assert_eq!(admitted + refused, 20_000);
        assert!(refused > 0 && admitted > 10_000, "admitted {admitted}, refused {refused}");
        // Time heals: a minute later every bucket is full again; the
        // guesser has its burst back, and a newcomer's sweep empties the map.
        fail(&mut t, &guesser, PEER.burst, 61_000);
        assert_eq!(t.attempt(&guesser, 61_000).unwrap_err(), PEER.refill_ms);
        assert!(t.attempt(&v4(198, 51, 100, 1), 61_000).is_ok());
        assert_eq!(t.len(), 4, "the guesser's two buckets and the newcomer's");
    }

    #[test]
    fn at_the_bound_nobody_holding_failures_is_evicted_and_newcomers_share_the_overflow() {
        let mut t = Throttle::new(8);
        // Four clients in four /24s: eight buckets, the bound.
        let held: Vec<Client> = (0..4).map(|i| v4(10, 0, i, 1)).collect();
        for c in &held {
            fail(&mut t, c, PEER.burst, 0);
        }
        assert_eq!(t.len(), 8);
        // Newcomers draw from the overflow: OVERFLOW.burst attempts, all told.
        for i in 0..OVERFLOW.burst {
            assert!(t.attempt(&v4(10, 1, i as u8, 1), 0).is_ok(), "newcomer {i}");
        }
        assert_eq!(t.attempt(&v4(10, 2, 0, 1), 0).unwrap_err(), OVERFLOW.refill_ms);
        assert_eq!(t.len(), 8);
        for c in &held {
            assert_eq!(t.attempt(c, 0).unwrap_err(), PEER.refill_ms, "{c} kept its bucket");
        }
        // A success through the overflow gives its token back there.
        let a = t.attempt(&v4(10, 3, 0, 1), OVERFLOW.refill_ms).expect("the overflow refilled one");
        t.succeeded(a, OVERFLOW.refill_ms);
        assert!(t.attempt(&v4(10, 3, 0, 1), OVERFLOW.refill_ms).is_ok());
        // Once the held buckets are full again a sweep makes room: a
        // newcomer gets buckets of its own (not the spent overflow).
        let later = 60_000;
        let c = v4(10, 9, 9, 9);
        fail(&mut t, &c, PEER.burst, later);
        assert_eq!(t.len(), 2);
        assert_eq!(t.attempt(&c, later).unwrap_err(), PEER.refill_ms);
    }

    #[test]
    fn a_client_that_logged_in_before_a_spray_keeps_buckets_of_its_own() {
        let mut t = Throttle::new(8);
        let operator = v4(192, 0, 2, 10);
        let a = t.attempt(&operator, 0).unwrap();
        t.succeeded(a, 0);
        for i in 0..4 {
            fail(&mut t, &v4(10, 0, i, 1), 1, 0);
        }
        for i in 0..OVERFLOW.burst {
            fail(&mut t, &v4(10, 1, i as u8, 1), 1, 0);
        }
        // The map is full and the overflow spent: a newcomer waits...
        assert_eq!(t.attempt(&v4(198, 51, 100, 1), 0).unwrap_err(), OVERFLOW.refill_ms);
        // ...the operator does not: it takes buckets from the reserve.
        let a = t.attempt(&operator, 0).expect("the operator gets in");
        assert_eq!(t.len(), 10);
        t.succeeded(a, 0);
        // Its failures count in those buckets like anyone's.
        fail(&mut t, &operator, PEER.burst, 0);
        assert_eq!(t.attempt(&operator, 0).unwrap_err(), PEER.refill_ms);
        // The list holds the last RECENT clients that got in.
        for i in 0..RECENT as u32 {
            let c = Client::Key(format!("op-{i}"));
            let a = t.attempt(&c, OVERFLOW.refill_ms * 20).unwrap();
            t.succeeded(a, OVERFLOW.refill_ms * 20);
        }
        assert_eq!(t.recent.len(), RECENT);
        assert!(!t.recent.iter().any(|(k, _)| *k == Key::Addr("192.0.2.10".parse().unwrap())), "the oldest made room");
    }

    /// 20 000 clients, each in a /24 of its own, one wrong secret each,
    /// spread evenly over a minute (one every 3 ms): 999 are checked (200
    /// at once, then one every 75 ms up to 59 925 ms), the rest refused
    /// unread; at 60 000 ms the 1 000th.
    #[test]
    fn a_spray_over_twenty_thousand_networks_is_checked_at_most_a_thousand_times_a_minute() {
        let mut t = Throttle::new(MAX_ENTRIES);
        let (mut checked, mut refused) = (0, 0);
        for i in 0..20_000u32 {
            match t.attempt(&sprayer(i), 3 * i as u64) {
                Ok(_) => checked += 1,
                Err(wait) => {
                    assert!((1..=GLOBAL.refill_ms).contains(&wait), "{wait}");
                    refused += 1;
                }
            }
        }
        assert_eq!((checked, refused), (999, 19_001));
        assert!(t.attempt(&sprayer(20_000), 60_000).is_ok());
        assert_eq!(t.attempt(&sprayer(20_001), 60_000).unwrap_err(), GLOBAL.refill_ms);
        // Refused attempts made no buckets: two per checked one, at most.
        assert!(t.len() <= 2 * 1_000, "{}", t.len());
        // Exactly: the global bucket's figures are the documented ones.
        assert_eq!(GLOBAL.burst as u64 + 60_000 / GLOBAL.refill_ms, 1_000);
    }

    #[test]
    fn during_a_spray_a_client_that_logged_in_within_the_hour_is_still_checked() {
        let mut t = Throttle::new(MAX_ENTRIES);
        let operator = v4(192, 0, 2, 10);
        let a = t.attempt(&operator, 0).unwrap();
        t.succeeded(a, 0);
        // The spray spends the global bucket.
        fail(&mut t, &sprayer(0), 1, 1_000);
        for i in 1..GLOBAL.burst {
            fail(&mut t, &sprayer(i), 1, 1_000);
        }
        // A newcomer meets the spray's wait, whatever it sends...
        assert_eq!(t.attempt(&v4(198, 51, 100, 1), 1_000).unwrap_err(), GLOBAL.refill_ms);
        // ...the operator is checked: a success, and its own failures still
        // count in its own buckets.
        let a = t.attempt(&operator, 1_000).expect("the operator is checked");
        t.succeeded(a, 1_000);
        fail(&mut t, &operator, PEER.burst, 1_000);
        assert_eq!(t.attempt(&operator, 1_000).unwrap_err(), PEER.refill_ms);
        // A success gives the global token back: the newcomer's turn comes
        // when one is free.
        assert!(t.attempt(&v4(198, 51, 100, 1), 1_000 + GLOBAL.refill_ms).is_ok());
        // An hour after its last login the operator draws from the global
        // bucket like anyone.
        let later = 1_000 + TRUSTED_FOR_MS;
        for i in 0..GLOBAL.burst {
            fail(&mut t, &sprayer(1_000 + i), 1, later);
        }
        assert_eq!(t.attempt(&operator, later).unwrap_err(), GLOBAL.refill_ms);
        assert!(t.attempt(&operator, later - 1).is_ok(), "a millisecond earlier it was still trusted");
    }

    #[test]
    fn at_the_bound_the_map_is_swept_at_most_once_a_second() {
        let mut t = Throttle::new(2);
        let a = v4(10, 0, 0, 1);
        fail(&mut t, &a, 1, 0);
        // At 6 s `a` is full again, but the sweep of 0 ms still holds.
        assert!(t.attempt(&v4(10, 0, 1, 1), 0).is_ok(), "overflow");
        assert_eq!(t.len(), 2);
        assert!(t.attempt(&v4(10, 0, 2, 1), 500).is_ok(), "overflow: swept 500 ms ago");
        assert_eq!(t.len(), 2);
        assert!(t.attempt(&v4(10, 0, 3, 1), 6_000).is_ok());
        assert_eq!(t.len(), 2, "the sweep dropped a's full buckets, the newcomer took their place");
        assert!(t.entries.contains_key(&Key::Addr("10.0.3.1".parse().unwrap())));
    }
}
