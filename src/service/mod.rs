//! The service: one SQLite connection behind a mutex, the request pipeline
//! (transport → auth → method), transactions with group commit, and the
//! effects that may only happen after a commit (wake-ups, gateway closes).

use crate::auth;
use crate::clock::Clock;
use crate::config::{ClockKind, Config};
use crate::entry::Input;
use crate::gateway::Registry;
use crate::http::{self, Request};
use crate::random::Random;
use crate::route::{BotMethod, Route};
use crate::store;
use crate::txn::{Db, Inner, TxEffects};
use std::sync::{Arc, MutexGuard};

pub use parts::{HostStats, WakeHook};

/// Why a service could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Storage(#[from] crate::error::StorageError),
}

impl From<crate::store::StoreError> for OpenError {
    fn from(e: crate::store::StoreError) -> Self {
        OpenError::Storage(e.into())
    }
}

/// A botspace service. `Send + Sync`: share it behind an `Arc` and call it
/// from any number of threads; writes are serialized on one SQLite connection.
pub struct Service {
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pub(crate) random: Random,
    pub(crate) db: Arc<Db>,
    pub(crate) gateway: Arc<Registry>,
    /// Where events go besides the gateway: the host's wake hook, parked
    /// long polls, webhook deliveries.
    delivery: parts::Delivery,
    group: crate::group::Group,
    admin_throttle: crate::throttle::AdminThrottle,
    /// `config.trusted_proxies`, parsed.
    trusted_proxies: Vec<crate::forwarded::Cidr>,
    /// Bot requests of the last hour, for the admin console.
    activity: crate::console::Activity,
    /// SHA-256 of the admin secret, compared in constant time.
    admin_hash: [u8; 32],
    /// A commit that wakes or revokes bots notifies the other nodes
    /// (PostgreSQL with `listen_notify`).
    notify: bool,
    /// A database server shared with other nodes: a group's requests run
    /// in lock order (see `service/batch.rs`, `LockKey`).
    shared_store: bool,
    /// The database lives in memory: no call waits on a disk or a network.
    in_memory: bool,
    /// Where other nodes' notifications are received (same condition).
    pub(crate) listen: Option<store::notify::Notifications>,
    /// The counters behind `GET /admin/metrics`.
    pub(crate) metrics: crate::metrics::Metrics,
    /// What the operator's endpoints keep between calls (`service/ops.rs`).
    ops: parts::Ops,
}

/// A parsed request, routed and past the transport checks.
pub(crate) struct Routed<'a> {
    pub req: Request<'a>,
    pub route: Route,
    /// Who sent it, when the host said (the audit log records it).
    pub peer: Option<&'a str>,
    /// The admin credential was checked already (with the login throttle).
    pub admin_checked: bool,
}

const PRUNE_EVERY_MS: u64 = 60_000;

/// Reruns of a transaction that met a serialization failure or deadlock.
const MAX_RETRIES: u32 = 8;

pub use parked::{Handled, PollId, BYTES_PER_PARKED_POLL, DEFAULT_MAX_PARKED_POLLS, MAX_PARKED_POLLS_PER_BOT};

mod batch;
mod callbacks;
mod effects;
mod gateway;
mod handle;
mod image;
mod long_poll;
mod ops;
mod parked;
mod parts;
mod pipeline;
mod round;
#[cfg(feature = "typed")]
mod typed;
#[cfg(feature = "typed")]
pub use typed::BodyRefusal;
pub(crate) mod webhook_pump;
mod webhooks;
pub use round::{HttpRound, RoundConnection, RoundConnections, RoundStep};
pub use webhooks::WebhookPoll;

impl Service {
    /// Opens a service with the clock the configuration names.
    /// Every native host calls it: the C server
    /// (`botspace_server_options_open_service`), the Rust server, the
    /// measuring examples.
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// assert!(!svc.calls_may_block());
    /// ```
    pub fn open(config: Config) -> Result<Service, OpenError> {
        let clock = match config.clock {
            ClockKind::System => Clock::System,
            ClockKind::Manual => Clock::manual(),
        };
        Service::open_with_clock(config, clock)
    }

    /// Opens a service reading time from `clock` (e.g. `Date.now()` in WASM).
    /// The edge worker and the browser (wasm) call it.
    pub fn open_with_clock(config: Config, clock: Clock) -> Result<Service, OpenError> {
        config.validate()?;
        let (conn, others) = store::open_pool(&config)?;
        let admin_hash = auth::sha256(config.admin_secret.as_bytes());
        let trusted_proxies = config.trusted_proxy_blocks()?;
        let shared_store = conn.is_shared();
        let in_memory = conn.in_memory();
        let listen =
            store::notify::Notifications::open(&config, &std::iter::once(&conn).chain(&others).collect::<Vec<_>>());
        let notify = listen.is_some();
        // The presses waiting for an answer since before this open: their
        // earliest deadline is the callback timer's start, so a store with
        // none gives hosts no deadline (and one with some expires them on
        // time after a restart).
        let callback_deadline = store::buttons::next_deadline(&conn)?;
        let svc = Service {
            db: Arc::new(Db::new(conn, others, config.synchronous)),
            random: config.random_seed.map_or(Random::Os, Random::seeded),
            delivery: parts::Delivery::new(config.max_parked_polls),
            config,
            clock,
            gateway: Arc::new(Registry::default()),
            group: crate::group::Group::default(),
            admin_throttle: crate::throttle::AdminThrottle::default(),
            trusted_proxies,
            activity: crate::console::Activity::default(),
            admin_hash,
            notify,
            shared_store,
            in_memory,
            listen,
            metrics: crate::metrics::Metrics::default(),
            ops: parts::Ops::default(),
        };
        svc.note_callbacks_read(callback_deadline, svc.now_ms());
        Ok(svc)
    }

    /// Whether a call into this service can wait on a disk or a network:
    /// false only when its database lives in memory (`:memory:`). Then a
    /// call costs its CPU and, at most, a wait for the service's lock while
    /// another call holds it; a host may run such calls on its event loop
    /// (the hyper host does). On a database file (its reads, its `fsync`)
    /// and on PostgreSQL (every statement is a round trip) they block.
    /// `botspace-hyper` (the Rust server) calls it to choose where calls run.
    pub fn calls_may_block(&self) -> bool {
        !self.in_memory
    }

    /// How many threads a host may run batches on: one on SQLite (one
    /// writer); on a shared store one per connection of the pool, so that
    /// a batch can run while another's COMMIT is awaited. A second batch
    /// starts beside a running one only for a large group
    /// (`botspace_runtime::host::starts_batch`): splitting a small one
    /// costs more than the overlap saves.
    /// `botspace-hyper` (the Rust server) calls it to size its batch threads.
    pub fn batch_threads(&self) -> usize {
        self.database_connections()
    }

    /// Connections to the database: one on SQLite, the pool's (two) on a
    /// shared store.
    /// Only the core's tests call it (`botspace_database_connections` in the
    /// metrics is the same figure).
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// assert_eq!(svc.database_connections(), 1);
    /// ```
    pub fn database_connections(&self) -> usize {
        if self.shared_store {
            crate::store::SHARED_CONNECTIONS
        } else {
            1
        }
    }

    /// Whether the database is shared with other nodes (a database
    /// server): a host answers bot requests off its event loop then, on
    /// as many threads as [`Service::batch_threads`], and the core puts
    /// each group's requests in lock order across nodes. A SQLite database
    /// belongs to this process.
    /// Only the core's tests call it.
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// assert!(!svc.store_is_shared());
    /// ```
    pub fn store_is_shared(&self) -> bool {
        self.shared_store
    }

    /// The configuration the service was opened with. The C ABI (a gateway
    /// link's heartbeat and clock), `botspace-hyper`, `botspace-runtime`'s
    /// options and demo, and the JS face (wasm: `maxBodyBytes`,
    /// `heartbeatIntervalMs`) read it.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Current time of the service's clock, Unix milliseconds. Hosts pass it
    /// to gateway `poll` so a manual clock drives heartbeats too.
    /// The C server (`botspace_service_now_ms`), the Rust server's `botspace-hyper`
    /// and `botspace-runtime`, and the JS face (wasm) call it.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Registers (or with `None` removes) the wake-up hook.
    /// The C server (`botspace_service_set_wake_callback`), the Rust server
    /// (`botspace-hyper`) and the JS face (wasm) call it.
    pub fn set_wake_hook(&self, hook: Option<WakeHook>) {
        *self.delivery.wake.write().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Where the next request in `buf` ends (see [`http::Framing`]).
    /// The C ABI (`botspace_service_frame_request`) and the JS face (wasm:
    /// `frameRequest`) call it.
    pub fn frame_request(&self, buf: &[u8]) -> http::Framing {
        http::frame_request(buf, self.config.max_body_bytes)
    }

    /// A framer for one connection, with this service's body limit: it
    /// resumes where its last call stopped (see [`http::RequestFramer`]).
    /// The C server (through `botspace_http_connection_new`) and the Rust
    /// server (`botspace-hyper`) call it.
    pub fn request_framer(&self) -> http::RequestFramer {
        http::RequestFramer::new(self.config.max_body_bytes)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.db.lock()
    }

    /// One complete HTTP/1.1 request in, one complete HTTP/1.1 response out:
    /// the simple entry. A `getUpdates` is answered at once here (as with
    /// `timeout` 0), and admin logins are not throttled per client; a host
    /// that parks polls or knows its peers calls [`Service::handle`].
    ///
    /// Requests that arrive from several threads while a commit is under
    /// way are committed together, in one transaction and one fsync (group
    /// commit, `src/group.rs`); each is answered exactly as if it ran
    /// alone. A request that finds nothing under way runs at once.
    ///
    /// The C ABI (`botspace_service_handle_request`) and the JS face (wasm:
    /// `handleRequest`, the edge worker's fetch) call it.
    pub fn handle_request(&self, request: &[u8]) -> Vec<u8> {
        self.handle_input(Input::Wire(request))
    }

    /// [`Service::handle_request`] of either kind of request.
    pub(crate) fn handle_input(&self, request: Input<'_>) -> Vec<u8> {
        let started = crate::metrics::Timer::sampled();
        let (method, out) = match self.route(request) {
            Ok(Routed { route: route @ Route::Console(asset), req, .. }) => {
                (crate::metrics::method_of_route(route), asset.response(req.header_str("if-none-match")))
            }
            Ok(routed) => (
                crate::metrics::method_of_route(routed.route),
                match self.answer_ops(routed.route, &routed.req) {
                    Some(out) => out,
                    None => self.handle_routed(request, routed),
                },
            ),
            Err(e) => {
                (request.path().map_or(crate::metrics::OTHER_METHOD, crate::metrics::method_of_path), e.into_response())
            }
        };
        self.record_method(method, &out, started);
        out
    }

    /// One request with its peer ([`Incoming::from_peer`](crate::Incoming::from_peer)).
    pub(crate) fn handle_input_from(&self, request: Input<'_>, peer: &str) -> Vec<u8> {
        let started = crate::metrics::Timer::sampled();
        let out = self.handle_from_inner(request, peer);
        self.record(request, &out, started);
        out
    }

    fn handle_from_inner(&self, request: Input<'_>, peer: &str) -> Vec<u8> {
        let mut routed = match self.route(request) {
            Ok(Routed { route: Route::Console(asset), req, .. }) => {
                return asset.response(req.header_str("if-none-match"));
            }
            Ok(r) => r,
            Err(e) => return e.into_response(),
        };
        if let Route::Health | Route::Ready = routed.route {
            return self.answer_ops(routed.route, &routed.req).unwrap_or_default();
        }
        if let Route::Admin(_) | Route::Metrics = routed.route {
            let client = match self.admit_host_call(&routed, peer) {
                Ok(client) => client,
                Err(e) => return e.into_response(),
            };
            routed.admin_checked = true;
            if routed.route == Route::Metrics {
                return self.metrics_response();
            }
            if let Route::Admin(m) = routed.route {
                if m.whole_database() {
                    return self.answer_whole_database(m, &routed.req);
                }
            }
            // The audit log names the client. One host call runs in its
            // own transaction; several in one slice of `handle` commit
            // together (`handle.rs`, the door).
            routed.peer = Some(&client);
            let mut inner = self.lock();
            let out = self.run_one(&mut inner, &routed);
            let mut fx = self.take_effects(&mut inner);
            drop(inner);
            let mut outs = [out];
            self.settle(&mut fx, &mut outs);
            self.apply_effects(fx);
            let [out] = outs;
            return out;
        }
        self.handle_routed(request, routed)
    }

    /// The door of a host call whose client is known: the login throttle of
    /// that client (behind trusted proxies, the address they name) and the
    /// admin secret. `Ok`: the client the audit log records.
    pub(crate) fn admit_host_call(&self, routed: &Routed<'_>, peer: &str) -> Result<String, crate::error::ApiError> {
        let client = crate::forwarded::client(
            peer,
            routed.req.header_values("x-forwarded-for"),
            routed.req.header_values("forwarded"),
            &self.trusted_proxies,
        );
        let auth = routed.req.header("authorization");
        crate::rules::auth::admin_login(&self.admin_throttle, &client, self.clock.now_ms(), auth, &self.admin_hash)?;
        Ok(client.to_string())
    }

    fn handle_routed(&self, request: Input<'_>, routed: Routed<'_>) -> Vec<u8> {
        // getMe reads a cached identity and needs no transaction: it never
        // waits for a group.
        if routed.route == Route::Bot(BotMethod::GetMe) {
            let mut inner = self.lock();
            let mut out = [self.run_one(&mut inner, &routed)];
            let mut fx = TxEffects { seen: self.seen(), ..TxEffects::default() };
            drop(inner);
            self.settle(&mut fx, &mut out);
            let [out] = out;
            return out;
        }
        crate::group::submit(&self.group, self, request, || {
            let mut inner = self.lock();
            let out = self.run_one(&mut inner, &routed);
            (out, self.take_effects(&mut inner))
        })
    }

    /// One request in its own transaction; the effects to apply once the
    /// caller has published the answer.
    pub(crate) fn run_alone(&self, request: Input<'_>) -> (Vec<u8>, TxEffects) {
        let routed = match self.route(request) {
            Ok(r) => r,
            Err(e) => return (e.into_response(), TxEffects::default()),
        };
        let mut inner = self.lock();
        let out = self.run_one(&mut inner, &routed);
        let fx = self.take_effects(&mut inner);
        (out, fx)
    }

    /// Holds every `handle_request` back until the returned guard is
    /// dropped; what queued meanwhile then commits as one group. A seam for
    /// tests that must form a group deterministically, not by timing
    /// (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn pause_commits(&self) -> CommitPause<'_> {
        self.group.pause();
        CommitPause(&self.group)
    }

    /// Statements run on a database server so far, all connections of the
    /// service together (BEGIN, COMMIT and ROLLBACK aside; 0 on SQLite):
    /// what the round trips of [`Service::commit_stats`] carried. For
    /// tests of what a group costs the server (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn database_statements(&self) -> u64 {
        self.lock().conn.statements()
    }

    /// Counts of commits, for hosts' metrics: how many requests were
    /// written, in how many transactions, and the database round trips.
    /// No host calls it: the measuring examples (`durable_threads`, `pg_nodes`)
    /// and `botspace-runtime`'s tests do.
    ///
    /// ```
    /// use botspace::{Config, Service};
    /// let svc = Service::open(Config::default().with(|c| c.admin_secret = "an-admin-secret-0123".into())).unwrap();
    /// let before = svc.commit_stats().requests;
    /// svc.handle_request(b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n");
    /// assert_eq!(svc.commit_stats().requests, before);
    /// ```
    pub fn commit_stats(&self) -> crate::group::CommitStats {
        let round_trips = self.lock().conn.round_trips();
        let (durable_commits, syncs) = self.db.wal.as_ref().map_or((0, 0), |w| w.counts());
        crate::group::CommitStats { round_trips, durable_commits, syncs, ..self.group.stats() }
    }
}

/// See [`Service::pause_commits`].
#[cfg(feature = "test-hooks")]
pub struct CommitPause<'a>(&'a crate::group::Group);

#[cfg(feature = "test-hooks")]
impl Drop for CommitPause<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

impl crate::group::Runner for Service {
    fn run_alone(&self, request: Input<'_>) -> (Vec<u8>, TxEffects) {
        Service::run_alone(self, request)
    }
    fn run_group(&self, requests: &[Input<'_>]) -> (Vec<Vec<u8>>, TxEffects) {
        Service::run_group(self, requests)
    }
    fn settle(&self, fx: &mut TxEffects, outs: &mut [Vec<u8>]) {
        Service::settle(self, fx, outs)
    }
    fn apply_effects(&self, fx: TxEffects) {
        Service::apply_effects(self, fx)
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("database", &self.config.database_for_logs()).finish_non_exhaustive()
    }
}

/// A service on the manual clock with the unit tests' admin secret,
/// changed by `f`: the service's own unit tests start from it.
#[cfg(test)]
pub(crate) fn manual_clock_service(f: impl FnOnce(&mut crate::Config)) -> Service {
    let cfg = crate::Config::default().with(|c| {
        c.admin_secret = "an-admin-secret-0123".into();
        c.clock = crate::ClockKind::Manual;
        f(c);
    });
    Service::open(cfg).unwrap()
}
