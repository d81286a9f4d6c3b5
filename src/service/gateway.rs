//! The service's gateway entry points: the upgrade checked and a session
//! opened, this node's connection counts, and other nodes' notifications
//! turned into wake-ups.

use crate::entry::Input;
use crate::error::StorageError;
use crate::error::{ApiError, ApiResult};
use crate::gateway::{GatewayAccept, GatewaySession, Opening};
use crate::route::Route;
use crate::Service;

impl Service {
    /// Checks a `GET /bot/gateway` upgrade received at `now_ms` (the
    /// gateway's time always comes from its host) and opens a
    /// message-level session. `Err` holds the complete HTTP error response
    /// to send. The host does the WebSocket handshake itself (edge
    /// runtimes do).
    /// The edge worker (wasm: `acceptGateway`) calls it, as do the PostgreSQL
    /// examples.
    pub fn accept_gateway_session(&self, request: &[u8], now_ms: u64) -> Result<GatewaySession, Vec<u8>> {
        self.accept_gateway_session_input(Input::Wire(request), now_ms)
    }

    pub(crate) fn accept_gateway_session_input(
        &self,
        request: Input<'_>,
        now_ms: u64,
    ) -> Result<GatewaySession, Vec<u8>> {
        let started = crate::metrics::Timer::sampled();
        let out = self.open_session(request, now_ms).map(|(s, _)| s).map_err(ApiError::into_response);
        // The host answers 101 itself: counted as the upgrade it is.
        self.record(request, out.as_ref().err().map_or(&b"HTTP/1.1 101 "[..], |r| r), started);
        out
    }

    /// Checks a `GET /bot/gateway` upgrade received at `now_ms`; on success
    /// returns the `101` response and a byte-level connection.
    /// The C server calls it (`botspace_gateway_accept`).
    pub fn accept_gateway(&self, request: &[u8], now_ms: u64) -> GatewayAccept {
        self.accept_gateway_input(Input::Wire(request), now_ms)
    }

    /// [`Service::accept_gateway`] of either kind of request.
    pub(crate) fn accept_gateway_input(&self, request: Input<'_>, now_ms: u64) -> GatewayAccept {
        let started = crate::metrics::Timer::sampled();
        let acc = match self.open_session(request, now_ms) {
            Err(e) => GatewayAccept { response: e.into_response(), connection: None },
            Ok((session, key)) => session.upgrade(&key),
        };
        self.record(request, &acc.response, started);
        acc
    }

    fn open_session(&self, request: Input<'_>, now_ms: u64) -> ApiResult<(GatewaySession, String)> {
        let routed = self.route(request)?;
        if routed.route != Route::Gateway {
            return Err(ApiError::method_not_found());
        }
        let req = &routed.req;
        let mut inner = self.lock();
        let bot = inner.ctx(&self.config, &self.clock, &self.random, now_ms).authenticate(req, None)?;
        let opening = Opening {
            db: &self.db,
            registry: &self.gateway,
            conn: &inner.conn,
            random: &self.random,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            poll_interval_ms: self.config.gateway_poll_interval_ms,
            token_hash: crate::rules::auth::bot_token_hash(req.header("authorization"))?,
            now_ms,
            clock: &self.clock,
        };
        let session = GatewaySession::open(opening, req, &bot)?;
        Ok((session, req.header_str("sec-websocket-key").unwrap_or("").to_string()))
    }

    /// Open gateway connections of a bot.
    /// The JS face (wasm: `gatewayConnections`) calls it.
    pub fn gateway_connections(&self, bot_id: &str) -> u32 {
        self.gateway.open_count(bot_id)
    }

    /// True when other nodes' commits can be heard: the store is
    /// PostgreSQL and `listen_notify` is on. A host then runs
    /// [`Service::wait_store_notifications`] in a loop on a thread of its
    /// own; otherwise that call returns at once and a loop would spin.
    /// The C server (`botspace_service_has_store_notifications`), the Rust
    /// server (`botspace-hyper`) and `botspace-runtime`'s notification loop call it.
    pub fn has_store_notifications(&self) -> bool {
        self.listen.is_some()
    }

    /// Waits at most `timeout_ms` for notifications from other nodes of a
    /// shared store, handles them and returns how many arrived. Blocks the
    /// calling thread: run it in a loop on a thread of its own, only when
    /// [`Service::has_store_notifications`] says so (else it returns
    /// `Ok(0)` at once).
    ///
    /// A commit on another node that gave bots events, or ended their
    /// gateway connections (token rotated, bot suspended), notifies every
    /// node with the bots' ids. For each notification the bots' gateway
    /// sessions on this node check the database at their next
    /// `poll_transmit` (the notification is only a hint: what they send,
    /// or whether they close with 4004, comes from the rows they read),
    /// and the wake hook is called for each named bot with a session here.
    /// So a host that polls its sessions on wake-ups delivers other
    /// nodes' events in a few milliseconds, instead of at the next
    /// `gateway_poll_interval_ms`, which stays the fallback.
    ///
    /// It listens on a second connection of its own (same URL and TLS
    /// settings), opened on the first call: a call that opens it returns
    /// at once and wakes every bot with a session here, since what was sent
    /// before it listened is lost. When that connection breaks the call
    /// returns the error (`is_unavailable()`); the next call connects
    /// again, so a host loops, pausing a little after an error. It never
    /// holds the lock requests take. Calls from several threads take turns.
    ///
    /// `botspace-runtime`'s notification loop calls it, for the Rust server and
    /// for the C server (`botspace_service_run_store_notifications`).
    pub fn wait_store_notifications(&self, timeout_ms: u64) -> Result<usize, StorageError> {
        if let Some(listen) = &self.listen {
            let heard = listen.wait(std::time::Duration::from_millis(timeout_ms))?;
            for us in &heard.lags_us {
                self.metrics.notification_lag.observe(*us);
            }
            if heard.all || !heard.bots.is_empty() {
                // Webhooks of the bots heard of (all of them: at the next
                // claim of leases) are looked at again.
                self.delivery.webhooks.lock().unwrap_or_else(|e| e.into_inner()).note(&heard.bots, &heard.bots);
                let mut here = self.gateway.hint(heard.all, &heard.bots);
                // Polls parked here for those bots read the log again.
                here.extend(self.parked_bots_among(heard.all, &heard.bots));
                self.apply_effects(crate::txn::TxEffects { woken: here, ..crate::txn::TxEffects::default() });
            }
            return Ok(heard.count);
        }
        let _ = timeout_ms;
        Ok(0)
    }
}
