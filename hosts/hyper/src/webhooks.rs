//! The webhook sender: the library decides every delivery
//! ([`Service::poll_webhook`]); this task only sends each request with
//! hyper's HTTP/1 client (TLS through rustls, with the system's roots) and
//! reports the outcome. It runs while the app lives: woken by the
//! service's wake hook, by an outcome, or at [`Service::webhook_timeout`].

use botspace::webhook::{Outcome, WebhookRequest};
use botspace::Service;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// What wakes the sender.
#[derive(Default)]
pub(crate) struct Sender {
    pub(crate) wake: Notify,
    /// The task was spawned.
    pub(crate) started: std::sync::atomic::AtomicBool,
}

/// Runs the sender until `inner` is dropped.
pub(crate) async fn run(svc: Weak<Service>, sender: Arc<Sender>) {
    let tls = Arc::new(tls_config());
    loop {
        let Some(s) = svc.upgrade() else { return };
        // The calls read the store: off the reactor.
        let s2 = s.clone();
        let due = tokio::task::spawn_blocking(move || {
            let now = s2.now_ms();
            std::iter::from_fn(|| s2.poll_webhook(now)).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for req in due {
            let (s, sender, tls) = (s.clone(), sender.clone(), tls.clone());
            tokio::spawn(async move {
                let id = req.id;
                let outcome = attempt(&s, &tls, req).await;
                let s2 = s.clone();
                let _ = tokio::task::spawn_blocking(move || s2.webhook_outcome(id, outcome, s2.now_ms())).await;
                sender.wake.notify_one();
            });
        }
        let wait = s.webhook_timeout().map(|t| Duration::from_millis(t.saturating_sub(s.now_ms())));
        drop(s);
        match wait {
            // Also wakes now and then, to notice the service is gone.
            Some(d) => {
                let _ = tokio::time::timeout(d.min(Duration::from_secs(1)), sender.wake.notified()).await;
            }
            None => {
                let _ = tokio::time::timeout(Duration::from_secs(1), sender.wake.notified()).await;
            }
        }
    }
}

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
async fn attempt(svc: &Service, tls: &Arc<rustls::ClientConfig>, req: WebhookRequest) -> Outcome {
    let left = Duration::from_millis(req.attempt.deadline_ms.saturating_sub(svc.now_ms()));
    match tokio::time::timeout(left, send(svc, tls, &req)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::TimedOut,
    }
}

async fn send(svc: &Service, tls: &Arc<rustls::ClientConfig>, req: &WebhookRequest) -> Outcome {
    let t = &req.target;
    // The name is resolved here, and every address it gives is checked
    // against the policy before one is connected to.
    let addrs: Vec<SocketAddr> = match &t.literal {
        Some(ip) => vec![SocketAddr::new(*ip, t.port)],
        None => match tokio::net::lookup_host((t.host.as_str(), t.port)).await {
            Ok(a) => a.collect(),
            Err(e) => return Outcome::Failed(format!("the host name did not resolve: {e}")),
        },
    };
    let mut refused = None;
    let mut stream = None;
    for addr in addrs {
        if let Err(class) = svc.webhook_address_allowed(addr.ip()) {
            refused = Some(class.refusal());
            continue;
        }
        match TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => refused = Some(format!("could not connect: {e}")),
        }
    }
    let Some(stream) = stream else {
        return Outcome::Failed(refused.unwrap_or_else(|| "the host name has no address".into()));
    };
    let _ = stream.set_nodelay(true);
    if t.https {
        let name = match rustls::pki_types::ServerName::try_from(t.host.clone()) {
            Ok(n) => n,
            Err(_) => return Outcome::Failed("the host is not a valid TLS server name".into()),
        };
        match tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream).await {
            Ok(s) => exchange(svc, TokioIo::new(s), req).await,
            Err(e) => Outcome::Failed(format!("TLS failed: {e}")),
        }
    } else {
        exchange(svc, TokioIo::new(stream), req).await
    }
}

async fn exchange<I>(svc: &Service, io: I, req: &WebhookRequest) -> Outcome
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut send, conn) = match hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io).await {
        Ok(x) => x,
        Err(e) => return Outcome::Failed(format!("could not connect: {e}")),
    };
    let driver = tokio::spawn(conn);
    let mut builder = http::Request::post(req.target.path_and_query.as_str())
        .header(http::header::HOST, req.host_header())
        .header(http::header::USER_AGENT, "botspace-webhooks");
    for (name, value) in req.attempt.headers() {
        builder = builder.header(name, value);
    }
    let request = match builder.body(Full::new(Bytes::from(req.attempt.body.clone()))) {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("could not build the request: {e}")),
    };
    let outcome = match send.send_request(request).await {
        Ok(resp) => {
            let retry_after_s = resp
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| botspace::webhook::retry_after_s(v, svc.now_ms()));
            // The answer's body is not used: it is not read at all.
            Outcome::Answered { status: resp.status().as_u16(), retry_after_s }
        }
        Err(e) => Outcome::Failed(format!("the connection failed: {e}")),
    };
    driver.abort();
    outcome
}
