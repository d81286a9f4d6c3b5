//! The webhook sender: the library decides every delivery and when the
//! store's part of them runs (`botspace::WebhookPump`, shared through
//! `botspace_runtime::Pump`); this task only
//! sends each request with hyper's HTTP/1 client (TLS through rustls, with
//! the system's roots), reports the outcome, and runs the store turns the
//! pump asks for on tokio's blocking pool. It runs while the app lives:
//! woken by the service's wake hook, by an outcome, by a store turn's end,
//! or at the pump's timeout. The pump hands out only as many requests as
//! the server's cap on webhook connections has slots for; each report
//! gives its slot back, and `deliver` goes on with the next one.

use botspace::webhook::{Failure, Outcome, WebhookRequest};
use botspace::Service;
use botspace_runtime::Pump;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;
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

/// Idle keep-alive connections by origin, so that a busy receiver is not
/// paid a TCP (and TLS) handshake per delivery. A connection is only put
/// back after its answer was read whole (at most 64 KiB); its address was
/// checked when it was opened.
#[derive(Default)]
struct Pool {
    idle: std::sync::Mutex<std::collections::HashMap<Origin, Vec<SendRequest<Full<Bytes>>>>>,
}

/// Idle connections kept per origin: as many as one webhook may use.
const IDLE_PER_ORIGIN: usize = botspace::webhook::MAX_CONNECTIONS as usize;

impl Pool {
    fn take(&self, origin: &Origin) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(origin)?;
        while let Some(s) = list.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn put(&self, origin: Origin, s: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(origin).or_default();
        if list.len() < IDLE_PER_ORIGIN {
            list.push(s);
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
/// (the chat's next event, say) without a round through the loop.
async fn deliver(
    s: Arc<Service>,
    sender: Arc<Sender>,
    tls: Arc<rustls::ClientConfig>,
    pool: Arc<Pool>,
    req: WebhookRequest,
) {
    let mut req = req;
    loop {
        let id = req.id;
        let outcome = attempt(&s, &tls, &pool, req).await;
        // Reporting never waits on the store; when it asks for a store
        // turn, the loop begins it.
        if sender.pump.report(&s, id, outcome, s.now_ms()) {
            sender.wake.notify_one();
        }
        match sender.pump.next(&s, s.now_ms()) {
            Some(next) => req = next,
            None => {
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

/// One attempt, within its deadline.
async fn attempt(svc: &Service, tls: &Arc<rustls::ClientConfig>, pool: &Pool, mut req: WebhookRequest) -> Outcome {
    let left = Duration::from_millis(req.attempt.deadline_ms.saturating_sub(svc.now_ms()));
    // The body moves into a shared buffer once: a second try on a new
    // connection shares it, nothing copies it.
    let body = Bytes::from(std::mem::take(&mut req.attempt.body));
    match tokio::time::timeout(left, send(svc, tls, pool, &req, body)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::TimedOut,
    }
}

async fn send(
    svc: &Service,
    tls: &Arc<rustls::ClientConfig>,
    pool: &Pool,
    req: &WebhookRequest,
    body: Bytes,
) -> Outcome {
    let t = &req.target;
    let origin: Origin = (t.https, t.host.clone(), t.port);
    if let Some(conn) = pool.take(&origin) {
        match exchange(svc, conn, req, body.clone(), true).await {
            // A kept connection the receiver had closed meanwhile: the
            // request never left; a new connection is tried below.
            Err(Reused) => {}
            Ok((outcome, conn)) => {
                if let Some(c) = conn {
                    pool.put(origin, c);
                }
                return outcome;
            }
        }
    }
    let conn = match connect(svc, tls, req).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    match exchange(svc, conn, req, body, false).await {
        Ok((outcome, conn)) => {
            if let Some(c) = conn {
                pool.put(origin, c);
            }
            outcome
        }
        Err(Reused) => Outcome::failed_plainly(Failure::BeforeSending),
    }
}

/// The request could not be sent on a kept connection.
struct Reused;

/// A new connection to the target, its address checked.
async fn connect(
    svc: &Service,
    tls: &Arc<rustls::ClientConfig>,
    req: &WebhookRequest,
) -> Result<SendRequest<Full<Bytes>>, Outcome> {
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
    if t.https {
        let name = match rustls::pki_types::ServerName::try_from(t.host.clone()) {
            Ok(n) => n,
            Err(_) => return Err(Outcome::failed_plainly(Failure::TlsName)),
        };
        match tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream).await {
            Ok(s) => handshake(TokioIo::new(s)).await,
            Err(e) => Err(Outcome::failed(Failure::Tls, e)),
        }
    } else {
        handshake(TokioIo::new(stream)).await
    }
}

async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, Outcome>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    match hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io).await {
        Ok((send, conn)) => {
            // The connection's task ends when the last handle is dropped.
            tokio::spawn(conn);
            Ok(send)
        }
        Err(e) => Err(Outcome::failed(Failure::Connect, e)),
    }
}

/// Sends the request on `conn`; the outcome, and the connection when it
/// can carry another request. `Err` when a kept connection turned out
/// closed before the request left.
async fn exchange(
    svc: &Service,
    mut conn: SendRequest<Full<Bytes>>,
    req: &WebhookRequest,
    body: Bytes,
    reused: bool,
) -> Result<(Outcome, Option<SendRequest<Full<Bytes>>>), Reused> {
    if conn.ready().await.is_err() {
        return Err(Reused);
    }
    // Every header is the core's (`header_lines`: the user agent, the
    // content type, the signature's three); hyper writes Content-Length
    // from the body and adds nothing else.
    let mut builder =
        http::Request::post(req.target.path_and_query.as_str()).header(http::header::HOST, req.host_header());
    for (name, value) in req.header_lines() {
        builder = builder.header(name, value);
    }
    let request = match builder.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => return Ok((Outcome::failed(Failure::Build, e), None)),
    };
    match conn.send_request(request).await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let retry_after_s = resp
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| botspace::webhook::retry_after_s(v, svc.now_ms()));
            // The answer's body is not used; read (at most 64 KiB of it) so
            // that the connection can carry the next delivery.
            let limit = botspace::webhook::schedule::MAX_ANSWER_BYTES;
            let whole = http_body_util::Limited::new(resp.into_body(), limit).collect().await.is_ok();
            Ok((Outcome::Answered { status, retry_after_s }, whole.then_some(conn)))
        }
        // On a kept connection the receiver may have closed it meanwhile:
        // tried again on a new one (at worst a duplicate, which the
        // webhook-id lets the receiver drop).
        Err(_) if reused => Err(Reused),
        Err(e) => Ok((Outcome::failed(Failure::Connection, e), None)),
    }
}
