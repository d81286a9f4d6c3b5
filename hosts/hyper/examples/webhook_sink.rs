//! A webhook receiver for benchmarks (scripts/bench-webhooks.sh): answers
//! every POST 200 with an empty body and counts it; `GET /count` answers
//! the count so far. It verifies nothing: it stands for the fastest
//! receiver there is, so a benchmark measures the sender.
//!
//!     cargo run --release -p botspace-hyper --example webhook_sink -- 127.0.0.1:0
//!
//! Prints `sink listening on HOST:PORT` once it accepts.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("sink listening on {}", listener.local_addr()?);
    let count = Arc::new(AtomicU64::new(0));
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let count = count.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let count = count.clone();
                async move {
                    let body = if req.method() == Method::GET {
                        Bytes::from(count.load(Ordering::Relaxed).to_string())
                    } else {
                        let _ = req.into_body().collect().await;
                        count.fetch_add(1, Ordering::Relaxed);
                        Bytes::new()
                    };
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(body)))
                }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}
