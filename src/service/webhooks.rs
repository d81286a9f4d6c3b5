//! The host's side of webhook deliveries, sans-IO as the gateway is: the
//! host asks for the next request to send ([`Service::poll_webhook`]),
//! sends it, reports what came of it ([`Service::webhook_outcome`]), and
//! calls again when the wake hook fires or at [`Service::webhook_timeout`].
//! These calls read and write the database (the bot's log, its cursor,
//! its webhook's last error), so on a file database they can block on the
//! disk, as every other call does.

use super::Service;
use crate::methods::webhook::{signing_key, target_policy};
use crate::protocol::GapMarker;
use crate::store;
use crate::webhook::deliveries::{BotDeliveries, StatusWrite, WebhookRequest};
use crate::webhook::schedule::{LogEvent, WINDOW};
use crate::webhook::{check_url, Outcome, Schedule};
use std::collections::HashMap;

/// How often, at most, what outcomes changed is written (one transaction
/// for every outcome since; a write per outcome would put one behind every
/// delivery and compete with the service's own commits): a crash of the
/// process loses at most this much of the cursor's progress (a power cut,
/// what the next sync had not yet made durable), which only means those
/// events are delivered again.
pub const WEBHOOK_FLUSH_MS: u64 = 50;

/// After the store failed a poll's reads or writes, how long until the
/// next poll tries again (what failed is kept): soon, but not in a busy
/// loop while the disk is full or the database unreachable.
pub const WEBHOOK_STORE_RETRY_MS: u64 = 20;

/// What [`Service::poll_webhook_in_memory`] found. Made once per
/// delivery and moved at once: its size does not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum WebhookPoll {
    /// A request due now.
    Request(WebhookRequest),
    /// Nothing is due now.
    Idle,
    /// Nothing is due in memory, and the store has work (a bot's log to
    /// read, outcomes to write): call [`Service::poll_webhook`] where
    /// blocking is allowed.
    NeedsStore,
}

/// What the deliveries knew of a bot when its store read was planned.
struct Known {
    url: String,
    key: crate::webhook::signature::SigningKeys,
    wants: Option<(i64, usize)>,
}

/// What a store read found for a bot. Made once per read and moved at
/// once: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Refresh {
    /// No webhook to deliver (deleted, or it can no longer be sent).
    Gone,
    Read {
        url: String,
        target: crate::webhook::Target,
        key: crate::webhook::signature::SigningKeys,
        max_connections: u32,
        allowed: Option<Vec<String>>,
        bounds: store::gateway::LogBounds,
        /// Whether the log was read (not when the window was full).
        read: bool,
        events: Vec<LogEvent>,
    },
}

/// Ends a store turn that did not finish (a panic in the store's part),
/// so that the next poll takes the turn again.
struct StoreTurn<'a>(&'a std::sync::Mutex<crate::webhook::deliveries::Deliveries>);

impl Drop for StoreTurn<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).store_turn = false;
    }
}

/// Several nodes on one database: how long a node's lease on a bot's
/// webhook lasts, and how often it is renewed. A node that dies hands its
/// webhooks over once its leases lapse: within `WEBHOOK_LEASE_TTL_MS` plus
/// one renewal.
pub const WEBHOOK_LEASE_TTL_MS: u64 = 10_000;
pub const WEBHOOK_LEASE_RENEW_MS: u64 = 2_000;

impl Service {
    /// The next webhook request due now, if any; call until `None`. The
    /// host sends it to `target` (after checking each address it connects
    /// to with [`Service::webhook_address_allowed`]), within
    /// `attempt.deadline_ms`, without following redirects, reading at most
    /// 64 KiB of the answer, and reports the outcome with the same `id`.
    /// The webhook pump's store turns call it ([`crate::WebhookPump`]:
    /// both servers, the C server through `botspace_webhook_pump_*`, and
    /// the wasm package), and so does the C ABI
    /// (`botspace_service_poll_webhook`).
    pub fn poll_webhook(&self, now_ms: u64) -> Option<WebhookRequest> {
        let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        if !self.webhook_store_due(&d, now_ms) || d.store_turn {
            // Nothing to read or write (or another caller is at it): no
            // wait on the store.
            return self.next_webhook_attempt(&mut d, now_ms);
        }
        // The store's part runs without the deliveries' lock, so that
        // outcomes and in-memory polls go on while a sync or a read waits
        // on the disk; `store_turn` keeps it to one caller at a time.
        d.store_turn = true;
        let turn = StoreTurn(&self.delivery.webhooks);
        if !d.loaded || (self.shared_store && now_ms >= d.next_claim_ms) {
            d = self.load_and_claim(d, now_ms);
        }
        let writes = if now_ms >= d.flushed_ms + WEBHOOK_FLUSH_MS
            && (!d.cursor_writes.is_empty() || !d.status_writes.is_empty())
        {
            d.flushed_ms = now_ms;
            Some((std::mem::take(&mut d.cursor_writes), std::mem::take(&mut d.status_writes)))
        } else {
            None
        };
        let dirty: Vec<(String, Option<Known>)> = std::mem::take(&mut d.dirty)
            .into_iter()
            .filter(|b| d.holds(b))
            .map(|b| {
                let known = d.bots.get(&b).map(|e| Known {
                    url: e.url.clone(),
                    key: e.schedule.keys().clone(),
                    wants: e.schedule.wants_events(),
                });
                (b, known)
            })
            .collect();
        drop(d);
        let written = writes.as_ref().map(|(c, s)| self.write_webhook_outcomes(c, s));
        let expired = self.expire_callbacks(now_ms);
        let read: Vec<(String, Result<Refresh, ()>)> = dirty
            .into_iter()
            .map(|(b, known)| {
                let r = self.read_webhook(&b, known.as_ref());
                (b, r)
            })
            .collect();
        let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        let mut failed = !expired;
        if let (Some((cursors, statuses)), Some(false)) = (writes, written) {
            failed = true;
            // Kept for the next try, under what outcomes changed since.
            for (b, c) in cursors {
                let e = d.cursor_writes.entry(b).or_insert(c);
                *e = (*e).max(c);
            }
            for (b, w) in statuses {
                d.status_writes.entry(b).or_insert(w);
            }
        }
        for (bot_id, r) in read {
            match r {
                Ok(r) => self.apply_refresh(&mut d, &bot_id, r, now_ms),
                // Looked at again at the next call.
                Err(()) => {
                    failed = true;
                    d.dirty.insert(bot_id);
                }
            }
        }
        if failed || !d.loaded {
            d.store_retry_ms = now_ms + WEBHOOK_STORE_RETRY_MS;
        }
        d.store_turn = false;
        std::mem::forget(turn);
        self.next_webhook_attempt(&mut d, now_ms)
    }

    /// The first load of every webhook, and (several nodes) the lease
    /// round, without the deliveries' lock.
    fn load_and_claim<'a>(
        &'a self,
        mut d: std::sync::MutexGuard<'a, crate::webhook::deliveries::Deliveries>,
        now_ms: u64,
    ) -> std::sync::MutexGuard<'a, crate::webhook::deliveries::Deliveries> {
        let load = !d.loaded;
        let claim = self.shared_store && now_ms >= d.next_claim_ms;
        if claim && d.node.is_empty() {
            d.node = crate::auth::new_id(&self.random, "node_").unwrap_or_else(|_| format!("node_{now_ms}"));
        }
        let node = d.node.clone();
        drop(d);
        // Until the store answers, nothing is delivered; the next call
        // tries again.
        let rows = if load { store::webhooks::all(&self.lock().conn).ok() } else { None };
        let claimed = claim
            .then(|| store::webhooks::claim_leases(&self.lock().conn, &node, now_ms, now_ms + WEBHOOK_LEASE_TTL_MS));
        let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rows) = rows {
            d.loaded = true;
            d.dirty.extend(rows.into_iter().map(|r| r.bot_id));
        }
        match claimed {
            Some(Ok(bots)) => {
                d.leases_held(bots);
                d.next_claim_ms = now_ms + WEBHOOK_LEASE_RENEW_MS;
            }
            // Unreachable database: the leases lapse unless renewed in
            // time; try again in a second.
            Some(Err(_)) => d.next_claim_ms = now_ms + 1_000,
            None => {}
        }
        d
    }

    fn next_webhook_attempt(
        &self,
        d: &mut crate::webhook::deliveries::Deliveries,
        now_ms: u64,
    ) -> Option<WebhookRequest> {
        let next = d.next_attempt(now_ms);
        if next.as_ref().is_some_and(|r| r.attempt.attempt > 1) {
            self.metrics.webhook_retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        next
    }

    /// [`Service::poll_webhook`] for a host's event loop: never waits on
    /// the store. When the poll would read or write it (load the webhooks,
    /// claim leases, write what outcomes changed, read a bot's log) it
    /// answers [`WebhookPoll::NeedsStore`] and the host calls
    /// `poll_webhook` where blocking is allowed; otherwise it hands out
    /// what is due, as `poll_webhook` would, taking only a lock held for
    /// microseconds.
    /// `botspace-runtime`'s webhook pump (both servers) and the C ABI
    /// (`botspace_service_poll_webhook_in_memory`) call it.
    pub fn poll_webhook_in_memory(&self, now_ms: u64) -> WebhookPoll {
        let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        // What is due goes first: a bot's read or the outcomes' write must
        // not hold up the chats whose next event is already here.
        if let Some(r) = self.next_webhook_attempt(&mut d, now_ms) {
            return WebhookPoll::Request(r);
        }
        if self.webhook_store_due(&d, now_ms) {
            WebhookPoll::NeedsStore
        } else {
            WebhookPoll::Idle
        }
    }

    fn webhook_store_due(&self, d: &crate::webhook::deliveries::Deliveries, now_ms: u64) -> bool {
        let writes = !d.cursor_writes.is_empty() || !d.status_writes.is_empty();
        now_ms >= d.store_retry_ms
            && (!d.loaded
                || self.callback_due().is_some_and(|t| t <= now_ms)
                || (self.shared_store && now_ms >= d.next_claim_ms)
                || (writes && now_ms >= d.flushed_ms + WEBHOOK_FLUSH_MS)
                || d.dirty.iter().any(|b| d.holds(b)))
    }

    /// Rereads a bot's webhook row and the log past what its schedule
    /// holds (`known`, as it stood when the read was planned), and waits
    /// for what was read to be durable.
    fn read_webhook(&self, bot_id: &str, known: Option<&Known>) -> Result<Refresh, ()> {
        let inner = self.lock();
        let conn = &inner.conn;
        let Some(row) = store::webhooks::get(conn, bot_id).map_err(|_| ())? else { return Ok(Refresh::Gone) };
        let (Ok(target), Some(key)) =
            (check_url(&row.url, target_policy(&self.config)), signing_key(&self.config, &row))
        else {
            // The host's policy changed since it was set, or the secret
            // cannot be opened: nothing can be sent.
            return Ok(Refresh::Gone);
        };
        let allowed: Option<Vec<String>> =
            row.allowed_updates.as_deref().and_then(|a| serde_json::from_slice(a.as_bytes()).ok());
        let bounds = store::gateway::log_bounds(conn, bot_id).map_err(|_| ())?;
        // A new URL or secret starts over from the durable cursor.
        let wants = match known {
            Some(k) if k.url == row.url && k.key == key => k.wants.map(|(after, room)| (after.max(bounds.acked), room)),
            _ => Some((bounds.acked, WINDOW)),
        };
        let mut events = Vec::new();
        if let Some((after, limit)) = wants {
            store::gateway::read_events_after(conn, bot_id, after, limit, |seq, kind, data| {
                events.push(LogEvent {
                    seq,
                    kind: kind.to_string(),
                    chat: chat_of(data),
                    body: update_json(seq, kind, data),
                });
                true
            })
            .map_err(|_| ())?;
        }
        // What was read may be committed and not yet synced (a group whose
        // WAL sync runs after the lock is released): nothing of it is sent
        // before it is durable, as the gateway's reads wait too.
        let seen = self.db.wal.as_ref().map(|w| (w, w.seen()));
        drop(inner);
        if let Some((wal, seen)) = seen {
            wal.sync_to(seen).map_err(|_| ())?;
        }
        let read = wants.is_some();
        Ok(Refresh::Read {
            url: row.url,
            target,
            key,
            max_connections: row.max_connections,
            allowed,
            bounds,
            read,
            events,
        })
    }

    /// Applies what [`Service::read_webhook`] found to the bot's schedule,
    /// as it stands now (outcomes may have moved it meanwhile; reads have
    /// not, there is one store turn at a time).
    fn apply_refresh(&self, d: &mut crate::webhook::deliveries::Deliveries, bot_id: &str, r: Refresh, now_ms: u64) {
        let Refresh::Read { url, target, key, max_connections, allowed, bounds, read, events } = r else {
            d.remove(bot_id);
            return;
        };
        let entry = d.bots.entry(bot_id.to_string()).or_insert_with(|| BotDeliveries {
            url: url.clone(),
            target: target.clone(),
            schedule: Schedule::new(bot_id, key.clone(), max_connections, bounds.acked),
        });
        if entry.url != url || *entry.schedule.keys() != key {
            // A new URL or secret: start over from the durable cursor, so
            // nothing is signed with a secret the receiver no longer has
            // (after a rotation, with both secrets while they overlap).
            entry.schedule = Schedule::new(bot_id, key, max_connections, bounds.acked);
            entry.url = url;
            entry.target = target;
        }
        entry.schedule.set_max_connections(max_connections);
        entry.schedule.set_allowed_updates(allowed);
        entry.schedule.cursor_moved(bounds.acked);
        if let Some((after, room)) = entry.schedule.wants_events() {
            // The log was read from at most `after` and held nothing past it.
            let none_read = read && events.is_empty();
            let mut events: Vec<LogEvent> = events.into_iter().filter(|e| e.seq > after).take(room).collect();
            // Events after `after` that are gone: the notice goes at the
            // last one dropped, before the first one kept.
            let dropped_through = match events.first().map(|e| e.seq) {
                Some(s) if s > after + 1 => Some(s - 1),
                None if none_read && bounds.last > after => Some(bounds.last),
                _ => None,
            };
            if let Some(n) = dropped_through {
                let notice = LogEvent {
                    seq: n,
                    kind: GapMarker::EventsDropped.to_string(),
                    chat: String::new(),
                    body: update_json(n, GapMarker::EventsDropped.as_str(), &format!("{{\"dropped_through\":{n}}}")),
                };
                events.insert(0, notice);
            }
            entry.schedule.events_read(events, now_ms);
        }
        let cursor = entry.schedule.take_cursor_write();
        // More may wait than the window took: read again as soon as there
        // is room (an outcome makes some), else only when woken.
        let behind = bounds.last > entry.schedule.read_through();
        entry.schedule.set_behind(behind);
        let again = behind && entry.schedule.wants_events().is_some();
        if let Some(c) = cursor {
            // Events skipped as not asked for, or a gap: acknowledged with
            // the next write of the outcomes.
            d.cursor_writes.insert(bot_id.to_string(), c);
        }
        if again {
            d.dirty.insert(bot_id.to_string());
        }
    }

    /// What became of webhook request `id`. A 2xx moves the bot's cursor
    /// over what is now delivered in a row; a failure is recorded for
    /// getWebhookInfo and retried later. Never waits on the store: the
    /// changes are written, in one transaction, by the next
    /// [`Service::poll_webhook`] (a crash before it only delivers those
    /// events again). True when the store has work now: a host that goes
    /// on with [`Service::poll_webhook_in_memory`] should see that
    /// `poll_webhook` is called soon.
    /// `botspace-runtime`'s webhook pump (both servers), the C ABI
    /// (`botspace_service_webhook_report`) and the edge worker (wasm) call it.
    pub fn webhook_outcome(&self, id: u64, outcome: Outcome, now_ms: u64) -> bool {
        let failed = match &outcome {
            Outcome::Answered { status, .. } => !(200..300).contains(status),
            _ => true,
        };
        // The retry's jitter, drawn only for a failure.
        let mut random = [0u8; 8];
        if failed {
            let _ = self.random.fill(&mut random);
        }
        let result = match &outcome {
            Outcome::Answered { status: 200..=299, .. } => 0,
            Outcome::Answered { .. } => 1,
            Outcome::TimedOut => 2,
            Outcome::Failed(_) => 3,
        };
        self.metrics.webhook_attempts[result].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = d.outcome(id, outcome, now_ms, u64::from_le_bytes(random)) else {
            return self.webhook_store_due(&d, now_ms);
        };
        let bot_id = b.schedule.bot_id().to_string();
        let cursor = b.schedule.take_cursor_write();
        let next = b.schedule.next_retry();
        // The status (its strings cloned) only for a failure to record.
        let message = failed.then(|| b.schedule.status().last_error_message.unwrap_or_default());
        let read_more = b.schedule.should_read_ahead();
        if let Some(c) = cursor {
            d.cursor_writes.insert(bot_id.clone(), c);
        }
        if let Some(message) = message {
            d.status_writes.insert(bot_id.clone(), StatusWrite::Failed { at_ms: now_ms, message, next_ms: next });
        } else if next.is_none() {
            // Only a recorded retry needs clearing.
            if let Some(StatusWrite::Failed { .. }) | None = d.status_writes.get(&bot_id) {
                d.status_writes.insert(bot_id.clone(), StatusWrite::NothingWaits);
            }
        }
        if read_more {
            d.dirty.insert(bot_id);
        }
        self.webhook_store_due(&d, now_ms)
    }

    /// Writes what outcomes changed, in one transaction; whether it was
    /// written (if not, the caller keeps the changes for the next try).
    /// On a file database the commit does not wait for its own fsync (the
    /// next group commit's or checkpoint's sync makes it durable): losing
    /// it to a power cut only delivers those events again, which the
    /// webhook-id lets a receiver drop, while a sync here held up the
    /// store turn that reads the next events, and the deliveries with it.
    fn write_webhook_outcomes(&self, cursors: &HashMap<String, i64>, statuses: &HashMap<String, StatusWrite>) -> bool {
        let inner = self.lock();
        let conn = &inner.conn;
        self.defer_sync(&inner, true);
        let written = (|| -> Result<(), crate::store::StoreError> {
            conn.begin()?;
            for (bot, c) in cursors {
                store::gateway::write_ack(conn, bot, *c)?;
            }
            for (bot, w) in statuses {
                match w {
                    StatusWrite::Failed { at_ms, message, next_ms } => {
                        store::webhooks::record_error(conn, bot, *at_ms, message, *next_ms)?
                    }
                    StatusWrite::NothingWaits => store::webhooks::clear_next_attempt(conn, bot)?,
                }
            }
            conn.commit()
        })();
        if written.is_err() {
            let _ = conn.rollback();
        }
        self.defer_sync(&inner, false);
        written.is_ok()
    }

    /// For the metrics: webhooks this node delivers, events held and not
    /// delivered, attempts in flight.
    pub(crate) fn webhook_figures(&self) -> (u64, u64, u64) {
        let d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        let held = d.bots.values().map(|b| b.schedule.held_count() as u64).sum();
        (d.bots.len() as u64, held, d.in_flight() as u64)
    }

    /// When to call [`Service::poll_webhook`] next, if no wake-up comes
    /// first: the earliest retry that waits, or the earliest deadline of
    /// an unanswered button press (its expiry is written by the store's
    /// part of the poll, `service/callbacks.rs`).
    /// `botspace-runtime`'s webhook pump (both servers), the C ABI
    /// (`botspace_service_webhook_timeout`) and the edge worker (wasm) call it.
    pub fn webhook_timeout(&self) -> Option<u64> {
        let d = self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner());
        let min = |a: Option<u64>, b: u64| Some(a.map_or(b, |a| a.min(b)));
        // The store's part: a first load, a bot to look at (bots held by
        // another node wait for a lease, not a poll), writes, leases.
        let mut store = None;
        if !d.loaded || d.dirty.iter().any(|b| d.holds(b)) {
            store = Some(self.now_ms());
        }
        if !d.cursor_writes.is_empty() || !d.status_writes.is_empty() {
            store = min(store, d.flushed_ms + WEBHOOK_FLUSH_MS);
        }
        if self.shared_store {
            store = min(store, d.next_claim_ms);
        }
        // Unanswered button presses expire in the store turn too.
        if let Some(t) = self.callback_due() {
            store = min(store, t);
        }
        // After a store failure it waits a little; attempts do not.
        let store = store.map(|t| t.max(d.store_retry_ms));
        match (store, d.next_due()) {
            (Some(s), due) => min(due, s),
            (None, due) => due,
        }
    }

    /// Whether a delivery may connect to `ip` under this service's policy
    /// (`webhook_allow_private_addresses`). Hosts check every address
    /// they connect to, after resolving the name.
    /// The C server (`botspace_service_webhook_address_allowed`), the Rust
    /// server (`botspace-hyper`) and the edge worker (wasm) call it.
    pub fn webhook_address_allowed(&self, ip: std::net::IpAddr) -> Result<(), crate::webhook::AddressClass> {
        crate::webhook::check_address(ip, target_policy(&self.config))
    }
}

/// The update a webhook delivers, written by the one writer getUpdates
/// and the gateway share: `{"update_id":seq,"type":kind,"data":data}`.
pub(crate) fn update_json(seq: i64, kind: &str, data: &str) -> String {
    let mut s = String::with_capacity(40 + kind.len() + data.len());
    crate::events::push_event(&mut s, "{\"update_id\":", seq, kind, data);
    s
}

/// The chat an event is about (`data.chat.id`, or `data.message.chat.id`
/// for the message events): the key of its order.
pub(crate) fn chat_of(data: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Chat {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        chat: Chat,
    }
    #[derive(serde::Deserialize)]
    struct Data {
        chat: Option<Chat>,
        message: Option<Message>,
    }
    let Ok(d) = serde_json::from_slice::<Data>(data.as_bytes()) else { return String::new() };
    d.chat.or(d.message.map(|m| m.chat)).map(|c| c.id).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_chat_of_every_kind_of_event() {
        assert_eq!(super::chat_of(r#"{"chat":{"id":"c1","type":"private"},"by":"user"}"#), "c1");
        assert_eq!(super::chat_of(r#"{"message":{"message_id":"1","chat":{"id":"c2","type":"group"}}}"#), "c2");
        assert_eq!(super::chat_of(r#"{"dropped_through":4}"#), "");
        assert_eq!(super::chat_of("not json"), "");
    }
}

#[cfg(test)]
mod store_retry_tests {
    use crate::{Service, WebhookPoll};

    fn service() -> Service {
        crate::service::manual_clock_service(|_| {})
    }

    #[test]
    fn after_a_store_failure_the_store_waits_and_attempts_do_not() {
        let svc = service();
        let now = svc.now_ms();
        {
            let mut d = svc.delivery.webhooks.lock().unwrap();
            d.loaded = true;
            d.dirty.insert("bot_a".into());
            d.store_retry_ms = now + super::WEBHOOK_STORE_RETRY_MS;
        }
        // A bot to look at, but the store failed a moment ago: no busy loop.
        assert_eq!(svc.webhook_timeout(), Some(now + super::WEBHOOK_STORE_RETRY_MS));
        assert!(matches!(svc.poll_webhook_in_memory(now), WebhookPoll::Idle));
        assert!(matches!(svc.poll_webhook_in_memory(now + super::WEBHOOK_STORE_RETRY_MS), WebhookPoll::NeedsStore));
        // Once looked at (the bot has no webhook: forgotten), nothing waits.
        assert!(svc.poll_webhook(now + super::WEBHOOK_STORE_RETRY_MS).is_none());
        assert_eq!(svc.webhook_timeout(), None);
    }

    #[test]
    fn a_bot_held_by_another_node_does_not_make_the_poll_due() {
        let svc = service();
        let mut d = svc.delivery.webhooks.lock().unwrap();
        d.loaded = true;
        d.held = Some(Default::default());
        d.dirty.insert("bot_elsewhere".into());
        drop(d);
        // No press waits (the store was read).
        svc.delivery.callbacks.lock().unwrap().read_at_ms = Some(svc.now_ms());
        assert_eq!(svc.webhook_timeout(), None);
    }
}
