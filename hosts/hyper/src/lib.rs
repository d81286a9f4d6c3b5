//! botspace on tokio and hyper 1.
//!
//! [`Botspace`] is a [`tower_service::Service`] over `http` requests: a Rust
//! host mounts it in its own hyper (or axum, or tower) app. It answers the
//! bot REST methods and the host API by handing hyper's parsed request to
//! the core's one way in ([`Service::handle`], with [`Incoming::http`])
//! and the core's answer back to hyper as an `http::Response`, and serves `GET /bot/gateway` through hyper's upgrade, driving
//! the core's [`GatewayConnection`]. The core's calls block (SQLite, the fsync of a
//! commit; PostgreSQL's round trips): they never run on the reactor. Bot
//! requests go to the app's own core threads (the library's
//! [`CoreWorkers`]), which take every request queued by any connection
//! and answer them with one `handle` call (one transaction,
//! one fsync), as the C server's loop does: one
//! thread on SQLite, one per PostgreSQL connection of the pool on a
//! shared store. Host calls and the gateway's calls run on tokio's
//! blocking pool (`spawn_blocking`).
//!
//! [`server`] is the TCP front end of the example server (`examples/server.rs`):
//! its own accept loop (the file limit, eviction on `EMFILE`), request
//! deadlines and framing by the core, then the same app, handed each
//! request as the bytes the core framed and giving back the core's answer
//! bytes (no `http` types on that path; the queue takes either form,
//! [`botspace_runtime::Received`]).
//!
//! ```no_run
//! use botspace::{Config, Service};
//! use botspace_hyper::Botspace;
//! use hyper_util::rt::TokioIo;
//! use hyper_util::service::TowerToHyperService;
//! use std::sync::Arc;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let config = Config::default().with(|c| {
//!         c.database = "botspace.db".into();
//!         c.admin_secret = "a long admin secret".into();
//!     });
//!     let app = Botspace::new(Arc::new(Service::open(config)?));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     loop {
//!         let (stream, _) = listener.accept().await?;
//!         let svc = TowerToHyperService::new(app.clone());
//!         tokio::spawn(async move {
//!             // `with_upgrades`: the gateway takes the connection over.
//!             let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
//!             let _ = conn.with_upgrades().await;
//!         });
//!     }
//! }
//! ```
//!
//! [`Service::handle`]: botspace::Service::handle
//! [`Incoming::http`]: botspace::Incoming::http
//! [`GatewayConnection`]: botspace::GatewayConnection
//! [`CoreWorkers`]: botspace_runtime::CoreWorkers

mod core_thread;
mod gateway;
mod parked;
pub mod say;
pub mod server;
mod webhooks;

use botspace::{BodyRefusal, Service};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Full, Limited};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::Notify;

pub use gateway::CLOSE_SERVER_SHUTDOWN;

/// Which paths a mounted [`Botspace`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Everything: bot methods, gateway and host API.
    All,
    /// Everything but the host API (`/admin/*` is 404 `method_not_found`).
    Public,
    /// Only the host API (everything else is 404 `method_not_found`).
    Admin,
}

impl Role {
    /// The core's listener of this role: it decides the routes.
    fn listener(self) -> botspace::connection::Listener {
        match self {
            Role::All => botspace::connection::Listener::All,
            Role::Public => botspace::connection::Listener::Public,
            Role::Admin => botspace::connection::Listener::Admin,
        }
    }
}

/// The botspace app as a `tower` service; cheap to clone (one per
/// connection).
#[derive(Clone)]
pub struct Botspace {
    inner: Arc<Inner>,
    role: Role,
    /// The client's address, for the per-peer throttle of failed host-API
    /// logins.
    peer: Option<Arc<str>>,
    get_me_on_worker: bool,
}

/// What a request read whole came to: the core's answer as the core wrote
/// it (HTTP/1.1 bytes), which the example server's connection sends as
/// they are and the tower service reads into an `http::Response`.
pub(crate) enum Answered {
    Response(Vec<u8>),
    /// The gateway took the connection: send the `101`, then run it.
    Upgrade(Vec<u8>, Box<botspace::GatewayConnection>),
}

/// A request read whole, as this host has it: the `http::Request` hyper
/// parsed, or the bytes the example server's connection framed.
pub(crate) type Received = botspace_runtime::Received<Bytes>;

pub(crate) struct Inner {
    pub(crate) svc: Arc<Service>,
    pub(crate) registry: gateway::Registry,
    pub(crate) stop: AtomicBool,
    pub(crate) stop_notify: Notify,
    /// Gateway connections running now.
    pub(crate) gateways: AtomicUsize,
    /// Where bot requests are answered in batches; `None`: on tokio's
    /// blocking pool (PostgreSQL, whose groups the core puts in lock
    /// order across nodes, or no thread could be started).
    core: Option<core_thread::CoreThreads>,
    /// How many threads `core` runs (0 without it).
    core_threads: usize,
    /// Bot requests answered on the reactor, in batches: a service whose
    /// calls never block (`:memory:`). Then `core` is `None`.
    on_reactor: Option<core_thread::OnReactor>,
    /// Held shared by every blocking call into the core (the core threads
    /// hold it for each take), tried exclusively by a getMe on a worker.
    pub(crate) gate: Arc<botspace_runtime::CoreGate>,
    /// What wakes the webhook sender.
    webhooks: Arc<webhooks::Sender>,
    /// getUpdates requests waiting on the core's parked polls.
    pub(crate) parked: parked::Waiters,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Botspace {
    /// Mounts `svc`. Installs the service's wake hook (gateway sessions
    /// hear of their bot's commits through it), so one `Botspace` serves
    /// one `Service`.
    ///
    /// Bot requests are answered by as many core threads as the library
    /// may run batches at once ([`Service::batch_threads`]: one on SQLite,
    /// two on PostgreSQL, the second starting a batch beside the first's
    /// only for a large group, `connection::limits::starts_batch`), in batches
    /// (see [`Botspace::with_core_threads`]); on PostgreSQL each batch runs
    /// in the lock order the core's group commit uses
    /// ([`Service::handle`]).
    ///
    /// On `:memory:`, whose calls wait on no disk and no network
    /// ([`Service::calls_may_block`]), bot requests are answered on the
    /// reactor itself, in the same batches (see
    /// [`Botspace::answers_on_reactor`]).
    pub fn new(svc: Arc<Service>) -> Botspace {
        if !svc.calls_may_block() {
            return Botspace::build(svc, 0, true);
        }
        let n = svc.batch_threads();
        Botspace::with_core_threads(svc, n)
    }

    /// Mounts `svc` with `n` core threads: each takes every bot request
    /// queued by any connection and answers them in one
    /// [`Service::handle`] call (one transaction, one fsync), then
    /// sends each answer back to its connection's task; the blocking
    /// calls never run on the reactor. The threads end when the last clone
    /// of the app is dropped, after answering what was queued. With `0`,
    /// each request runs on tokio's blocking pool (`spawn_blocking`) and
    /// the core's own group commit groups them.
    pub fn with_core_threads(svc: Arc<Service>, n: usize) -> Botspace {
        Botspace::build(svc, n, false)
    }

    fn build(svc: Arc<Service>, n: usize, on_reactor: bool) -> Botspace {
        let core = (n > 0).then(|| core_thread::CoreThreads::start(svc.clone(), n)).and_then(|started| {
            let why = |e| format!("cannot start a core thread (requests go to the blocking pool): {e}");
            started.map_err(|e| say::log(botspace::log::Level::Warn, &why(e))).ok()
        });
        let gate = core.as_ref().map_or_else(Arc::default, |c| c.gate().clone());
        let inner = Arc::new(Inner {
            svc,
            registry: gateway::Registry::default(),
            stop: AtomicBool::new(false),
            stop_notify: Notify::new(),
            gateways: AtomicUsize::new(0),
            core_threads: if core.is_some() { n.max(1) } else { 0 },
            core,
            on_reactor: on_reactor.then(core_thread::OnReactor::default),
            gate,
            webhooks: Arc::default(),
            parked: parked::Waiters::default(),
        });
        let weak = Arc::downgrade(&inner);
        inner.svc.set_wake_hook(Some(Arc::new(move |bot_id: &str| {
            if let Some(i) = weak.upgrade() {
                i.registry.wake(bot_id);
                i.webhooks.wake.notify_one();
                i.parked.woken(&i.svc);
            }
        })));
        let app = Botspace { inner, role: Role::All, peer: None, get_me_on_worker: false };
        app.start_webhooks();
        app
    }

    /// Starts sending the service's webhooks from the current tokio
    /// runtime, once (later calls do nothing); the task ends with the
    /// service. Made inside a runtime, the app starts it itself; made
    /// outside one, it starts with its first request, or when a host calls
    /// this from its runtime (the example server does, so that a restarted
    /// server delivers what waits before any request comes).
    pub fn start_webhooks(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if !self.inner.webhooks.started.swap(true, Ordering::SeqCst) {
            rt.spawn(webhooks::run(Arc::downgrade(&self.inner.svc), self.inner.webhooks.clone()));
        }
    }

    /// Tells the webhook sender the server's connection budget (its
    /// `--max-connections`): deliveries in flight are capped at the
    /// runtime's share of it (`botspace_runtime::host::webhook_connection_cap`),
    /// all bots together; the rest wait for a slot. Without a call, the
    /// default budget under 1 024 descriptors counts.
    pub fn set_connection_budget(&self, max_connections: usize) {
        self.inner.webhooks.set_connection_budget(max_connections);
    }

    /// Answers getMe on the tokio worker itself when nothing of this app
    /// is in the core at that moment (no batch, no fsync, no gateway or
    /// host call), else on a core thread: it then takes a cache lookup
    /// and never waits. Only for an app that is its service's only user
    /// (the example server): a call into the same service from elsewhere
    /// could hold the lock it takes. Needs the core threads (SQLite).
    pub fn with_get_me_on_worker(mut self, on: bool) -> Botspace {
        self.get_me_on_worker = on;
        self
    }

    /// Whether bot requests are answered on the reactor (a `:memory:`
    /// service, [`Botspace::new`]) rather than on core threads or tokio's
    /// blocking pool. The example server then runs on a current-thread
    /// runtime, as the C server runs one loop: a host call or a gateway
    /// call still goes to the blocking pool, and a request waits for it
    /// only if it needs the service's lock meanwhile.
    pub fn answers_on_reactor(&self) -> bool {
        self.inner.on_reactor.is_some()
    }

    /// How many core threads answer bot requests (0 on the reactor or the
    /// blocking pool): the example server gives its reactor the cores
    /// they leave.
    pub(crate) fn core_threads(&self) -> usize {
        self.inner.core_threads
    }

    /// The same app answering only the paths of `role`.
    pub fn with_role(mut self, role: Role) -> Botspace {
        self.role = role;
        self
    }

    /// The same app for one client (its address throttles failed host-API
    /// logins per peer).
    pub fn for_peer(mut self, peer: std::net::IpAddr) -> Botspace {
        self.peer = Some(peer.to_string().into());
        self
    }

    /// The core service.
    pub fn service(&self) -> &Arc<Service> {
        &self.inner.svc
    }

    /// Closes every gateway connection with 1001 `server_shutdown` (bots
    /// reconnect elsewhere or later, from their last ack), now and for
    /// any upgrade after this; `GET /readyz` answers 503 `shutting_down`
    /// from now on ([`Service::begin_shutdown`]).
    pub fn shutdown(&self) {
        self.inner.svc.begin_shutdown();
        self.inner.stop.store(true, Ordering::SeqCst);
        self.inner.stop_notify.notify_waiters();
        self.inner.parked.notify.notify_one();
    }

    /// Gateway connections open now.
    pub fn open_gateways(&self) -> usize {
        self.inner.gateways.load(Ordering::SeqCst)
    }

    /// Answers a request from hyper: the head checked before the body is
    /// read, then [`Botspace::answer_read`]; a gateway takes the
    /// connection over through hyper's upgrade.
    async fn answer<B>(&self, req: Request<B>) -> Response<Full<Bytes>>
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut req = req;
        let route = botspace::connection::route(self.role.listener(), req.uri().path());
        let gateway = route == botspace::connection::Lane::Gateway && req.method() == http::Method::GET;
        let on_upgrade = gateway.then(|| hyper::upgrade::on(&mut req));
        let (parts, body) = req.into_parts();
        // The core refuses a head it would not take (a body over its limit,
        // say) exactly as it would on its own, before the body is read.
        if let Some(refusal) = self.inner.svc.refuse_http_head(&parts) {
            return full(refusal);
        }
        let body = match Limited::new(body, self.inner.svc.http_body_limit()).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                // Over the limit, or a body hyper could not read (a chunked
                // coding it refuses): the core's answer either way.
                let why = if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                    BodyRefusal::TooLarge
                } else {
                    BodyRefusal::Malformed
                };
                return full(self.inner.svc.refuse_http_body(why));
            }
        };
        // hyper writes the head itself: the core's answer is read into
        // an `http::Response` here, and only here.
        let req = Received::Http(Request::from_parts(parts, body));
        match self.answer_read(req, route).await {
            Answered::Response(resp) => full(botspace::into_http_response(resp)),
            Answered::Upgrade(resp, conn) => {
                let io = async move { on_upgrade?.await.ok().map(hyper_util::rt::TokioIo::new) };
                self.spawn_gateway(conn, Vec::new(), io);
                full(botspace::into_http_response(resp))
            }
        }
    }

    /// Answers a request read whole, on `route` (the core's
    /// [`botspace::connection::route`] of its path under this app's role:
    /// the connection's `Taken::route` in the example server): the request
    /// goes into the core as the host has it, parsed or as bytes, and the
    /// core's answer comes back as the core wrote it.
    pub(crate) async fn answer_read(&self, req: Received, route: botspace::connection::Lane) -> Answered {
        if !self.inner.webhooks.started.load(Ordering::Relaxed) {
            self.start_webhooks();
        }
        if route == botspace::connection::Lane::NotHere {
            return Answered::Response(botspace::connection::not_here(req.path()));
        }
        let svc = self.inner.svc.clone();
        if route == botspace::connection::Lane::Gateway && req.method() == "GET" {
            let gate = self.inner.gate.clone();
            let acc = tokio::task::spawn_blocking(move || {
                let _in_core = gate.blocking();
                match &req {
                    Received::Http(r) => svc.accept_gateway_http(r, svc.now_ms()),
                    Received::Bytes { request, .. } => svc.accept_gateway(request, svc.now_ms()),
                }
            })
            .await;
            return match acc {
                Ok(acc) => match acc.connection {
                    Some(conn) => Answered::Upgrade(acc.response, Box::new(conn)),
                    None => Answered::Response(acc.response),
                },
                Err(_) => Answered::Response(botspace::connection::answer_failed()),
            };
        }
        let answered = if route == botspace::connection::Lane::Poll {
            // Long polling: may park in the core until an event or its
            // deadline; the request's future awaits it, no thread does.
            parked::answer(&self.inner, req, self.peer.clone()).await
        } else {
            self.answer_now(svc, req, route).await
        };
        Answered::Response(answered.unwrap_or_else(|()| botspace::connection::answer_failed()))
    }

    /// Runs an accepted gateway connection on its own task, once `io` (the
    /// upgraded connection) is there; `head` goes ahead of its frames (the
    /// `101` and any answers before it, for a host that has not written
    /// them).
    pub(crate) fn spawn_gateway<F, T>(&self, conn: Box<botspace::GatewayConnection>, head: Vec<u8>, io: F)
    where
        F: Future<Output = Option<T>> + Send + 'static,
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let inner = self.inner.clone();
        inner.gateways.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let _count = gateway::Count(&inner.gateways);
            if let Some(io) = io.await {
                gateway::run(&inner, *conn, head, io).await;
            }
        });
    }

    /// Every request but the gateway's and getUpdates: answered at once,
    /// on the core threads, the reactor or the blocking pool.
    async fn answer_now(
        &self,
        svc: Arc<Service>,
        req: Received,
        route: botspace::connection::Lane,
    ) -> Result<Vec<u8>, ()> {
        let admin = route == botspace::connection::Lane::Admin;
        let kind = botspace::connection::lane::Kind::of(route);
        let get_me = botspace::connection::lane::answers_from_cache(req.path());
        match (&self.inner.core, &self.inner.on_reactor) {
            (_, Some(reactor)) if !admin => {
                let (tx, rx) = core_thread::reply();
                reactor.submit(&svc, core_thread::Job { request: req, kind, reply: tx });
                rx.await.map_err(|_| ())
            }
            // Host calls (few; an import may take a while) keep the
            // blocking pool; bot traffic goes to the core threads.
            (Some(core), _) if !admin => {
                let on_worker = if get_me && self.get_me_on_worker {
                    // A panic in the core stays in it (the core's 500
                    // `answer_failed`), as on a core thread.
                    self.inner.gate.try_exclusive().map(|_alone| {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| answer_one(&svc, &req, None)))
                            .map_err(|_| ())
                    })
                } else {
                    None
                };
                match on_worker {
                    Some(out) => out,
                    None => {
                        let (tx, rx) = core_thread::reply();
                        match core.submit(req, kind, tx) {
                            Ok(()) => rx.await.map_err(|_| ()),
                            Err(_) => Err(()),
                        }
                    }
                }
            }
            _ => {
                let peer = self.peer.clone();
                let gate = self.inner.gate.clone();
                tokio::task::spawn_blocking(move || {
                    let _in_core = gate.blocking();
                    answer_one(&svc, &req, peer.as_deref().filter(|_| admin))
                })
                .await
                .map_err(|_| ())
            }
        }
    }
}

fn full(r: Response<Vec<u8>>) -> Response<Full<Bytes>> {
    r.map(|b| Full::new(Bytes::from(b)))
}

impl<B> tower_service::Service<Request<B>> for Botspace
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.answer(req).await) })
    }
}

/// One request that does not park (everything but getUpdates, which
/// `parked::answer` takes), answered through the core's one way in: the
/// core's bytes.
fn answer_one(svc: &Service, req: &Received, peer: Option<&str>) -> Vec<u8> {
    let one = req.incoming();
    let one = [match peer {
        Some(p) => one.from_peer(p),
        None => one,
    }];
    svc.handle(&one, svc.now_ms()).remove(0).now_or_failed(svc)
}
