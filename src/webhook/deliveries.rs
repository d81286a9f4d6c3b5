//! Every bot's deliveries on this node: one [`Schedule`] per bot with a
//! webhook, the attempts handed to the host (by id), and which bots must
//! be looked at again. No I/O: `service::webhooks` reads the store for it.

use super::schedule::{Attempt, Outcome, Schedule};
use super::target::Target;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The `User-Agent` of every delivery.
const USER_AGENT: &str = "botspace-webhooks";

/// A bot's deliveries and where they go.
#[derive(Debug)]
pub struct BotDeliveries {
    pub url: String,
    pub target: Target,
    pub schedule: Schedule,
}

/// An attempt handed to the host, with what it needs to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// Reported back with the outcome ([`crate::Service::webhook_outcome`]).
    pub id: u64,
    pub bot_id: String,
    /// The URL as the bot set it.
    pub url: String,
    /// The URL split for connecting: scheme, host, port, path and query.
    pub target: Target,
    pub attempt: Attempt,
}

impl WebhookRequest {
    /// Appends the whole HTTP/1.1 request to `out`, for a host that writes
    /// to a socket itself and reads the answer with
    /// [`super::AnswerReader`]. `keep_alive`: the connection may carry the
    /// next delivery to the same origin (HTTP/1.1's default; its address
    /// was checked when it was opened), else `Connection: close`.
    pub fn write_http(&self, out: &mut Vec<u8>, keep_alive: bool) {
        let a = &self.attempt;
        out.reserve(320 + a.body.len());
        out.extend_from_slice(b"POST ");
        out.extend_from_slice(self.target.path_and_query.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.host_header().as_bytes());
        out.extend_from_slice(b"\r\nContent-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(a.body.len()).as_bytes());
        if !keep_alive {
            out.extend_from_slice(b"\r\nConnection: close");
        }
        // `header_lines`, without a Vec of Strings per delivery.
        out.extend_from_slice(b"\r\nUser-Agent: ");
        out.extend_from_slice(USER_AGENT.as_bytes());
        out.extend_from_slice(b"\r\ncontent-type: application/json\r\nwebhook-id: ");
        out.extend_from_slice(a.webhook_id.as_bytes());
        out.extend_from_slice(b"\r\nwebhook-timestamp: ");
        out.extend_from_slice(itoa::Buffer::new().format(a.timestamp_s).as_bytes());
        out.extend_from_slice(b"\r\nwebhook-signature: ");
        out.extend_from_slice(a.signature.as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(a.body.as_bytes());
    }

    /// The URL to connect to, rebuilt from the checked parts (so a client
    /// library parses what the rules checked, not the bot's own spelling).
    pub fn request_url(&self) -> String {
        let scheme = if self.target.https { "https://" } else { "http://" };
        let host = self.host_header();
        // One allocation, with room for the NUL of a C string made of it.
        let mut url = String::with_capacity(scheme.len() + host.len() + self.target.path_and_query.len() + 1);
        url.push_str(scheme);
        url.push_str(&host);
        url.push_str(&self.target.path_and_query);
        url
    }

    /// The headers of a delivery besides `Host` and `Content-Length`
    /// (which a client library writes itself), in order: every header a
    /// host sends, so that a receiver sees the same request from every
    /// host. A host adds none of its own; a client library that adds
    /// defaults (libcurl's `Accept`, its `Expect: 100-continue`) is told not
    /// to. A client library may keep the connection alive for the next
    /// delivery to the same origin: its address was checked when it was
    /// opened.
    pub fn header_lines(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![("User-Agent", USER_AGENT.to_string())];
        h.extend(self.attempt.headers());
        h
    }

    /// The `Host` header: the host, bracketed when IPv6, with the port
    /// when it is not the scheme's own.
    pub fn host_header(&self) -> String {
        let t = &self.target;
        let host = if t.host.contains(':') { format!("[{}]", t.host) } else { t.host.clone() };
        let default = if t.https { 443 } else { 80 };
        if t.port == default {
            host
        } else {
            format!("{host}:{}", t.port)
        }
    }
}

/// This node's deliveries.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// Whether every webhook was loaded from the store once.
    pub loaded: bool,
    /// By bot id, in order: bots take turns in that order.
    pub bots: BTreeMap<String, BotDeliveries>,
    /// Bots whose webhook row or log may have changed since last looked at.
    pub dirty: BTreeSet<String>,
    in_flight: HashMap<u64, (String, i64)>,
    next_id: u64,
    /// Where the last search for a due attempt stopped, so that one busy
    /// bot does not starve the others.
    turn: Option<String>,
    /// Several nodes on one database: this node's name in the leases, the
    /// bots it holds leases on (`None` until the first claim), and when it
    /// claims again.
    pub node: String,
    pub held: Option<std::collections::HashSet<String>>,
    pub next_claim_ms: u64,
    /// What outcomes changed and the store does not have yet, written in
    /// one transaction at the next poll (so that reporting an outcome
    /// never waits on the disk): cursor moves, and per bot its last
    /// error with the next retry (`None`: clear the next retry).
    pub cursor_writes: HashMap<String, i64>,
    pub status_writes: HashMap<String, StatusWrite>,
    /// When those were last written.
    pub flushed_ms: u64,
    /// A caller is doing the store's part of a poll (reads and writes
    /// run without this state's lock; one caller at a time).
    pub store_turn: bool,
    /// The store failed the last poll's reads or writes: its part is not
    /// tried again before this.
    pub store_retry_ms: u64,
}

/// A change of a bot's delivery status for getWebhookInfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusWrite {
    /// An attempt failed at `at_ms`; the next is due at `next_ms`.
    Failed { at_ms: u64, message: String, next_ms: Option<u64> },
    /// No retry waits any more.
    NothingWaits,
}

impl Deliveries {
    /// The leases this node now holds: the others' deliveries stop here
    /// (attempts in flight may still finish: those are the duplicates a
    /// hand-over allows), the new ones are looked at.
    pub fn leases_held(&mut self, bots: Vec<String>) {
        let held: std::collections::HashSet<String> = bots.into_iter().collect();
        let lost: Vec<String> = self.bots.keys().filter(|b| !held.contains(*b)).cloned().collect();
        for b in lost {
            self.remove(&b);
        }
        self.dirty.extend(held.iter().cloned());
        self.held = Some(held);
    }

    /// Whether this node delivers `bot_id`'s webhook (always, alone on its
    /// database).
    pub fn holds(&self, bot_id: &str) -> bool {
        self.held.as_ref().is_none_or(|h| h.contains(bot_id))
    }

    /// Commits woke these bots (they got events), and these bots' webhooks
    /// were set or deleted.
    pub fn note(&mut self, woken: &[String], changed: &[String]) {
        for b in woken {
            if self.bots.contains_key(b) {
                self.dirty.insert(b.clone());
            }
        }
        self.dirty.extend(changed.iter().cloned());
    }

    /// The next attempt due now, across bots in turn.
    pub fn next_attempt(&mut self, now_ms: u64) -> Option<WebhookRequest> {
        use std::ops::Bound::{Excluded, Unbounded};
        // The bots after the last one served, then from the first: each
        // step looks the next key up, so no list of ids is made per call.
        let first = match &self.turn {
            Some(t) => self.bots.range::<String, _>((Excluded(t), Unbounded)).next().map(|(k, _)| k.clone()),
            None => None,
        }
        .or_else(|| self.bots.keys().next().cloned())?;
        let mut key = first.clone();
        loop {
            let d = self.bots.get_mut(&key).expect("a key of the map");
            if let Some(attempt) = d.schedule.poll_attempt(now_ms) {
                let bot_id = key;
                self.next_id += 1;
                let id = self.next_id;
                self.in_flight.insert(id, (bot_id.clone(), attempt.seq));
                let req = WebhookRequest {
                    id,
                    bot_id: bot_id.clone(),
                    url: d.url.clone(),
                    target: d.target.clone(),
                    attempt,
                };
                self.turn = Some(bot_id);
                return Some(req);
            }
            use std::ops::Bound::{Excluded, Unbounded};
            key = match self.bots.range::<String, _>((Excluded(&key), Unbounded)).next() {
                Some((k, _)) => k.clone(),
                None => self.bots.keys().next().cloned()?,
            };
            if key == first {
                return None;
            }
        }
    }

    /// The host's outcome of attempt `id`: the bot and its schedule, for
    /// the caller to write what moved. `None` for an unknown id (the
    /// webhook was deleted meanwhile, or the id was reported twice).
    pub fn outcome(&mut self, id: u64, outcome: Outcome, now_ms: u64, random: u64) -> Option<&mut BotDeliveries> {
        let (bot_id, seq) = self.in_flight.remove(&id)?;
        let d = self.bots.get_mut(&bot_id)?;
        d.schedule.handle_outcome(seq, outcome, now_ms, random);
        Some(d)
    }

    /// Forgets a bot's deliveries (its webhook was deleted); outcomes of
    /// its attempts still in flight are then ignored.
    pub fn remove(&mut self, bot_id: &str) {
        self.bots.remove(bot_id);
        self.in_flight.retain(|_, (b, _)| b != bot_id);
    }

    /// When the next attempt is due: an event waiting for a connection or
    /// a retry (at or before now: due at once).
    pub fn next_due(&self) -> Option<u64> {
        self.bots.values().filter_map(|d| d.schedule.poll_timeout()).min()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::schedule::LogEvent;
    use super::super::target::{check_url, TargetPolicy};
    use super::*;

    fn with_bots(names: &[&str]) -> Deliveries {
        let mut d = Deliveries::default();
        let policy = TargetPolicy { allow_http: true, allow_private_addresses: true };
        for n in names {
            let url = format!("http://127.0.0.1:8080/{n}");
            let mut schedule = Schedule::new(n, vec![1; 32], 40, 0);
            schedule.events_read(
                (1..=3)
                    .map(|i| LogEvent {
                        seq: i,
                        kind: "message_created".into(),
                        chat: format!("c{i}"),
                        body: "{}".into(),
                    })
                    .collect(),
                0,
            );
            d.bots.insert(n.to_string(), BotDeliveries { target: check_url(&url, policy).unwrap(), url, schedule });
        }
        d
    }

    #[test]
    fn bots_take_turns() {
        let mut d = with_bots(&["a", "b", "c"]);
        let order: Vec<String> = std::iter::from_fn(|| d.next_attempt(0)).map(|r| r.bot_id).collect();
        assert_eq!(order, ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
        assert_eq!(d.in_flight(), 9);
    }

    #[test]
    fn outcomes_find_their_bot_once_and_not_after_a_delete() {
        let mut d = with_bots(&["a", "b"]);
        let ra = d.next_attempt(0).unwrap();
        let rb = d.next_attempt(0).unwrap();
        let ok = || Outcome::Answered { status: 204, retry_after_s: None };
        let a = d.outcome(ra.id, ok(), 0, 0).unwrap();
        assert_eq!(a.schedule.take_cursor_write(), Some(1));
        assert!(d.outcome(ra.id, ok(), 0, 0).is_none());
        d.remove("b");
        assert!(d.outcome(rb.id, ok(), 0, 0).is_none());
        assert_eq!(d.in_flight(), 0);
    }

    #[test]
    fn notes_mark_known_bots_and_changed_ones() {
        let mut d = with_bots(&["a"]);
        d.note(&["a".into(), "z".into()], &["n".into()]);
        assert_eq!(d.dirty.iter().collect::<Vec<_>>(), ["a", "n"]);
    }

    #[test]
    fn the_request_on_the_wire() {
        let mut d = with_bots(&["a"]);
        let r = d.next_attempt(1_700_000_000_000).unwrap();
        let mut bytes = Vec::new();
        r.write_http(&mut bytes, false);
        let text = String::from_utf8(bytes).unwrap();
        let head = format!(
            "POST /a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\nConnection: close\r\n\
             User-Agent: botspace-webhooks\r\ncontent-type: application/json\r\nwebhook-id: msg_a_1\r\n\
             webhook-timestamp: 1700000000\r\nwebhook-signature: {}\r\n\r\n{{}}",
            r.attempt.signature
        );
        assert_eq!(text, head);
        assert_eq!(r.request_url(), "http://127.0.0.1:8080/a");
        // Kept alive: the same request without `Connection: close`, and
        // the same headers as `header_lines` gives a client library.
        let mut kept = Vec::new();
        r.write_http(&mut kept, true);
        assert_eq!(String::from_utf8(kept).unwrap(), head.replace("Connection: close\r\n", ""));
        let lines: String = r.header_lines().iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        assert!(head.contains(&lines), "{lines}");
    }
}
