//! The webhook sender: the library decides every delivery and when the
//! store's part of them runs (`botspace::WebhookPump`, shared through
//! `botspace_runtime::Pump`); this task only
//! sends each request and reports the outcome, and runs the store turns the
//! pump asks for on tokio's blocking pool. It runs while the app lives:
//! woken by the service's wake hook, by an outcome, by a store turn's end,
//! or at the pump's timeout. The pump hands out only as many requests as
//! the server's cap on webhook connections has slots for; each report
//! gives its slot back, and `deliver` goes on with the next one.
//!
//! The bytes on the wire are the library's too: the request as
//! `WebhookRequest::write_http` writes it, the answer read by
//! `botspace::webhook::AnswerReader`, over a TCP (or rustls) stream kept
//! alive per origin. An HTTP client library cost several times this
//! host's own share of a delivery (a task hand-off per request, a header
//! map, its buffers), which bounded the deliveries per second.

use botspace::webhook::{AnswerReader, Failure, Outcome, Step, WebhookRequest};
use botspace::Service;
use botspace_runtime::Pump;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// What wakes the sender, and the core's schedule it follows.
#[derive(Default)]
pub(crate) struct Sender {
    pub(crate) wake: Notify,
    /// The task was spawned.
    pub(crate) started: std::sync::atomic::AtomicBool,
    /// What is due without the store, when a store turn runs, how long
    /// the task sleeps.
    pump: Pump,
}

impl Sender {
    /// The server's connection budget, of which the pump's cap on
    /// deliveries in flight is the runtime's share.
    pub(crate) fn set_connection_budget(&self, max_connections: usize) {
        self.pump.set_connection_budget(max_connections);
    }
}

/// Where a connection goes: scheme, host and port.
type Origin = (bool, String, u16);

/// An open connection to a receiver, plain or TLS, with its buffers.
struct Conn {
    io: Io,
    /// The request being written, then what is read of the answer.
    out: Vec<u8>,
    input: Vec<u8>,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Conn {
    fn new(io: Io) -> Conn {
        Conn { io, out: Vec::with_capacity(1024), input: vec![0; 4096] }
    }

    async fn write_out(&mut self) -> std::io::Result<()> {
        match &mut self.io {
            Io::Plain(s) => s.write_all(&self.out).await,
            Io::Tls(s) => {
                s.write_all(&self.out).await?;
                s.flush().await
            }
        }
    }

    async fn read_in(&mut self) -> std::io::Result<usize> {
        match &mut self.io {
            Io::Plain(s) => s.read(&mut self.input).await,
            Io::Tls(s) => s.read(&mut self.input).await,
        }
    }
}

/// Idle keep-alive connections by origin, so that a busy receiver is not
/// paid a TCP (and TLS) handshake per delivery. A connection is only put
/// back after its answer was read whole (at most 64 KiB); its address was
/// checked when it was opened.
#[derive(Default)]
struct Pool {
    idle: std::sync::Mutex<std::collections::HashMap<Origin, Vec<Conn>>>,
}

/// Idle connections kept per origin: as many as one webhook may use.
const IDLE_PER_ORIGIN: usize = botspace::webhook::MAX_CONNECTIONS as usize;

impl Pool {
    fn take(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get_mut(origin)?.pop()
    }

    fn put(&self, origin: Origin, c: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(origin).or_default();
        if list.len() < IDLE_PER_ORIGIN {
            list.push(c);
        }
    }
}

/// Runs the sender until `inner` is dropped.
pub(crate) async fn run(svc: Weak<Service>, sender: Arc<Sender>) {
    let tls = Arc::new(tls_config());
    let pool = Arc::new(Pool::default());
    loop {
        let Some(s) = svc.upgrade() else { return };
        let now = s.now_ms();
        for req in sender.pump.take(&s, now) {
            tokio::spawn(deliver(s.clone(), sender.clone(), tls.clone(), pool.clone(), req));
        }
        // The store's part blocks on the disk: off the reactor, one turn
        // at a time; its end wakes this loop to send what it found.
        if sender.pump.begin_store_turn() {
            let (s, sender) = (s.clone(), sender.clone());
            tokio::task::spawn_blocking(move || {
                sender.pump.store_turn(&s, s.now_ms());
                sender.wake.notify_one();
            });
        }
        let wait = sender.pump.timeout(&s, now).map(|t| Duration::from_millis(t.saturating_sub(s.now_ms())));
        drop(s);
        // Also wakes now and then, to notice the service is gone.
        let look = Duration::from_millis(botspace_runtime::host::WEBHOOK_LOOK_MS);
        let _ = tokio::time::timeout(wait.map_or(look, |d| d.min(look)), sender.wake.notified()).await;
    }
}

/// Sends `req`, reports it, and goes on with what is due next in memory
/// (the chat's next event, say) without a round through the loop, on the
/// same connection when the next one goes to the same origin.
async fn deliver(
    s: Arc<Service>,
    sender: Arc<Sender>,
    tls: Arc<rustls::ClientConfig>,
    pool: Arc<Pool>,
    req: WebhookRequest,
) {
    let mut req = req;
    let mut kept: Option<(Origin, Conn)> = None;
    loop {
        let id = req.id;
        let t = &req.target;
        let conn = match kept.take() {
            Some((o, c)) if o.0 == t.https && o.2 == t.port && o.1 == t.host => Some((o, c)),
            Some((o, c)) => {
                pool.put(o, c);
                None
            }
            None => None,
        };
        let (outcome, conn) = attempt(&s, &tls, &pool, &req, conn).await;
        kept = conn;
        // Reporting never waits on the store; when it asks for a store
        // turn, the loop begins it.
        let (wanted, next) = sender.pump.report_next(&s, id, outcome, s.now_ms());
        if wanted {
            sender.wake.notify_one();
        }
        match next {
            Some(next) => req = next,
            None => {
                if let Some((o, c)) = kept {
                    pool.put(o, c);
                }
                sender.wake.notify_one();
                return;
            }
        }
    }
}

/// The roots come from `rustls_native_certs`: the system's store, or, when
/// `SSL_CERT_FILE` or `SSL_CERT_DIR` is set, only what they name (OpenSSL's
/// variables; the C server hands the same two to libcurl). Loaded once, when
/// the sender starts. A root that does not load is skipped: a receiver whose
/// certificate needs it fails with "TLS failed: ...".
fn tls_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// One attempt, within its deadline, on `conn` (a connection to the same
/// origin the last delivery used) or one from the pool or a new one: the
/// outcome, and the connection when it can carry the next delivery.
async fn attempt(
    svc: &Service,
    tls: &Arc<rustls::ClientConfig>,
    pool: &Pool,
    req: &WebhookRequest,
    conn: Option<(Origin, Conn)>,
) -> (Outcome, Option<(Origin, Conn)>) {
    let left = Duration::from_millis(req.attempt.deadline_ms.saturating_sub(svc.now_ms()));
    match tokio::time::timeout(left, send(svc, tls, pool, req, conn)).await {
        Ok(done) => done,
        // The connection is dropped with the answer it may still carry.
        Err(_) => (Outcome::TimedOut, None),
    }
}

async fn send(
    svc: &Service,
    tls: &Arc<rustls::ClientConfig>,
    pool: &Pool,
    req: &WebhookRequest,
    conn: Option<(Origin, Conn)>,
) -> (Outcome, Option<(Origin, Conn)>) {
    let kept = match conn {
        Some(c) => Some(c),
        None => {
            let t = &req.target;
            let origin: Origin = (t.https, t.host.clone(), t.port);
            pool.take(&origin).map(|c| (origin, c))
        }
    };
    if let Some((origin, conn)) = kept {
        match exchange(svc, conn, req, true).await {
            // A kept connection the receiver had closed meanwhile: the
            // request is sent again on a new connection below (at worst a
            // duplicate, which the webhook-id lets the receiver drop).
            Err(Reused) => {}
            Ok((outcome, conn)) => return (outcome, conn.map(|c| (origin, c))),
        }
    }
    let conn = match connect(svc, tls, req).await {
        Ok(c) => c,
        Err(outcome) => return (outcome, None),
    };
    let t = &req.target;
    let origin: Origin = (t.https, t.host.clone(), t.port);
    match exchange(svc, conn, req, false).await {
        Ok((outcome, conn)) => (outcome, conn.map(|c| (origin, c))),
        Err(Reused) => (Outcome::failed_plainly(Failure::BeforeSending), None),
    }
}

/// The request could not be sent on a kept connection.
struct Reused;

/// A new connection to the target, its address checked.
async fn connect(svc: &Service, tls: &Arc<rustls::ClientConfig>, req: &WebhookRequest) -> Result<Conn, Outcome> {
    let t = &req.target;
    // The name is resolved here, and every address it gives is checked
    // against the policy before one is connected to.
    let addrs: Vec<SocketAddr> = match &t.literal {
        Some(ip) => vec![SocketAddr::new(*ip, t.port)],
        None => match tokio::net::lookup_host((t.host.as_str(), t.port)).await {
            Ok(a) => a.collect(),
            Err(e) => return Err(Outcome::failed(Failure::Resolve, e)),
        },
    };
    let mut refused = None;
    let mut stream = None;
    for addr in addrs {
        if let Err(class) = svc.webhook_address_allowed(addr.ip()) {
            refused = Some(Outcome::Failed(class.delivery_refusal()));
            continue;
        }
        match TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => refused = Some(Outcome::failed(Failure::Connect, e)),
        }
    }
    let Some(stream) = stream else {
        return Err(refused.unwrap_or_else(|| Outcome::failed_plainly(Failure::NoAddress)));
    };
    let _ = stream.set_nodelay(true);
    if !t.https {
        return Ok(Conn::new(Io::Plain(stream)));
    }
    let name = match rustls::pki_types::ServerName::try_from(t.host.clone()) {
        Ok(n) => n,
        Err(_) => return Err(Outcome::failed_plainly(Failure::TlsName)),
    };
    match tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream).await {
        Ok(s) => Ok(Conn::new(Io::Tls(Box::new(s)))),
        Err(e) => Err(Outcome::failed(Failure::Tls, e)),
    }
}

/// Writes the request on `conn` and reads the answer; the outcome, and
/// the connection when it can carry another request. `Err` when a kept
/// connection turned out closed before an answer came.
async fn exchange(
    svc: &Service,
    mut conn: Conn,
    req: &WebhookRequest,
    reused: bool,
) -> Result<(Outcome, Option<Conn>), Reused> {
    conn.out.clear();
    // Every header is the core's; the connection stays open for the next
    // delivery unless the receiver says otherwise.
    req.write_http(&mut conn.out, true);
    if let Err(e) = conn.write_out().await {
        if reused {
            return Err(Reused);
        }
        return Ok((Outcome::failed(Failure::Connection, e), None));
    }
    let mut answer = AnswerReader::new();
    loop {
        let step = match conn.read_in().await {
            Ok(0) => answer.closed(svc.now_ms()),
            Ok(n) => answer.feed(&conn.input[..n], svc.now_ms()),
            Err(_) if reused && !answer.started() => return Err(Reused),
            Err(e) => match answer.closed(svc.now_ms()) {
                Step::Answered { outcome, .. } => return Ok((outcome, None)),
                _ => return Ok((Outcome::failed(Failure::Connection, e), None)),
            },
        };
        match step {
            Step::More => {}
            Step::Answered { outcome, reusable } => return Ok((outcome, reusable.then_some(conn))),
            Step::ClosedBeforeAnswer if reused => return Err(Reused),
            Step::ClosedBeforeAnswer => return Ok((AnswerReader::failure(), None)),
            Step::Failed(outcome) => return Ok((outcome, None)),
        }
    }
}
