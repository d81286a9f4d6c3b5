//! botspace mounted beside an axum app's own routes.
//!
//! ```text
//! cargo run -p botspace-hyper --example axum -- [--addr 127.0.0.1:3000] [--db botspace-axum.db]
//! ```
//!
//! The app has its own route (`GET /hello`); what is botspace's
//! (`botspace::connection::lane::MOUNT_PATHS`: `/bot/*`, the bot methods
//! and the gateway; `/admin/*`, the host API, the console and the metrics;
//! and the probes `/healthz` and `/readyz`) goes to botspace, a
//! `tower::Service` axum takes with `route_service`, which keeps the full
//! path the core routes on. The admin secret comes from
//! `BOTSPACE_ADMIN_SECRET` (16 characters at least). It prints
//! `axum app listening on http://HOST:PORT` once it accepts connections.
//! `hosts/hyper/tests/axum_example.rs` starts it and calls both.

use axum::routing::get;
use axum::Router;
use botspace::{Config, Service};
use botspace_hyper::Botspace;
use std::sync::Arc;

/// The app: its own routes, and botspace on the paths that are its.
fn app(botspace: Botspace) -> Router {
    let mut router = Router::new().route("/hello", get(|| async { "hello from the app\n" }));
    for path in botspace::connection::lane::MOUNT_PATHS {
        // A prefix takes every path under it; `{*rest}` keeps the whole
        // path in the request: the core routes on it.
        router = match path.strip_suffix('/') {
            Some(prefix) => router.route_service(&format!("{prefix}/{{*rest}}"), botspace.clone()),
            None => router.route_service(path, botspace.clone()),
        };
    }
    router
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr = "127.0.0.1:3000".to_string();
    let mut db = "botspace-axum.db".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().ok_or("--addr needs HOST:PORT")?,
            "--db" => db = args.next().ok_or("--db needs a path")?,
            _ => return Err(format!("unknown argument {a}; usage: axum [--addr HOST:PORT] [--db PATH]").into()),
        }
    }
    let secret = std::env::var("BOTSPACE_ADMIN_SECRET").map_err(|_| "set BOTSPACE_ADMIN_SECRET")?;
    let config = Config::default().with(|c| {
        c.database = db;
        c.admin_secret = secret;
    });
    // Service::open may block (it opens and migrates the database): it runs
    // before the server starts, as any blocking setup would.
    let botspace = Botspace::new(Arc::new(Service::open(config)?));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("axum app listening on http://{}", listener.local_addr()?);
    // axum::serve serves connections with upgrades on, so the gateway's
    // WebSocket takes its connection over.
    axum::serve(listener, app(botspace)).await?;
    Ok(())
}
