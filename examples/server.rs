//! botspace over real TCP, on tokio and hyper (`hosts/hyper`, the
//! `botspace-hyper` crate).
//!
//! ```text
//! cargo run --release --example server -- --help
//! ```
//!
//! prints the options (each with its `BOTSPACE_*` variable and config-file
//! line); that text is the one usage of this server, kept in one place, so
//! this header does not repeat it.
//!
//! One tokio task per TCP connection, served by hyper behind the
//! `botspace_hyper::server` front end (its own accept loop for the file
//! limit, request framing and deadlines by the core). The core's blocking
//! calls never run on the reactor: bot requests go to core threads that
//! answer everything queued in one `Service::handle` call (one transaction
//! and one fsync), and getMe is answered on the worker when nothing is in
//! the core; host and gateway calls run on tokio's blocking pool.
//! `GET /bot/gateway` upgrades the connection through
//! hyper's upgrade to a task that drives the core's `GatewayConnection`;
//! the service's wake hook tells it when its bot has new events. See
//! `docs/server.md`.
//!
//! The first line printed is always `botspace listening on http://HOST:PORT`
//! (the bound address, so `--addr 127.0.0.1:0` works); with `--admin-addr`
//! the next is `botspace admin listening on http://HOST:PORT`; the startup
//! output ends with the line `botspace ready`.

use botspace::log::Level;
use botspace::Service;
use botspace_hyper::server::{self, fds, Options};
use botspace_hyper::{errln, outln, say, Botspace};
use botspace_runtime::options::{self, ServerOptions};
use botspace_runtime::output::{self, Output};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// The options, their defaults, messages and usage are the library's (the
/// C server takes the same).
fn usage() -> String {
    options::usage("server", output::LEVEL_SOURCE)
}

fn read_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

fn main() {
    std::process::exit(run(std::env::args().skip(1)));
}

/// The whole server; returns the process exit code.
fn run(args: impl IntoIterator<Item = String>) -> i32 {
    let limit = fds::raise_limit();
    let env = |k: &str| std::env::var(k).ok();
    let args = match options::parse(args.into_iter().collect(), &env, &read_file) {
        Ok(options::Parsed::Run(a)) => *a,
        Ok(options::Parsed::Help) => {
            outln!("{}", usage());
            return 0;
        }
        // One line: the option, the value, the form, a pointer to --help.
        Err(e) => {
            errln!("{e}");
            return 2;
        }
    };
    // Where the level comes from is the library's rule, the C server's too.
    say::configure(Output::from_env(args.log_json, &env));
    match start(&args) {
        Ok((svc, listeners, demo)) => serve(svc, listeners, demo, &args, args.max_connections(limit)),
        Err(e) => {
            say::log(Level::Error, &e);
            1
        }
    }
}

/// The bound sockets: the public one, and the host API's with `--admin-addr`.
struct Listeners {
    public: (TcpListener, SocketAddr),
    admin: Option<(TcpListener, SocketAddr)>,
}

fn listen(addr: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    // The standard library listens with a backlog of 128: a burst of
    // connections past it waits for SYN retries (1 s, 2 s, ...). Listening
    // again on the bound socket raises it to the system's cap, as the C
    // server's listen(SOMAXCONN) does.
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: listen(2) on a socket this function owns.
        unsafe { libc::listen(listener.as_raw_fd(), libc::SOMAXCONN) };
    }
    let local = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
    Ok((listener, local))
}

/// Opens the service and the ports, prints the start-up lines and makes the
/// demo's data when asked; its block (the token a tour reads) is printed
/// once the stop signals are caught, just before `botspace ready`, so a
/// client that acts on it can already stop the server cleanly.
fn start(args: &ServerOptions) -> Result<(Arc<Service>, Listeners, String), String> {
    let (secret, generated) = match args.admin_secret(&read_file)? {
        Some(s) => (s, false),
        None => (options::generate_secret()?, true),
    };
    let config = args.config(&secret, &read_file)?;
    // The URL's password, if any, never reaches the log.
    let shown = config.database_for_logs();
    let svc = Service::open(config).map(Arc::new).map_err(|e| format!("cannot open the service on {shown}: {e}"))?;
    // The library's operator lines from the start (the demo's token
    // rotation is one), in this server's log format.
    svc.set_log_hook(Some(Arc::new(say::event)));
    let public = listen(&args.addr)?;
    let admin = args.admin_addr.as_deref().map(listen).transpose()?;
    // The start-up lines and the demo's URLs are the library's (the C
    // server prints the same); a given secret is never passed.
    let started =
        options::startup(public.1, admin.as_ref().map(|a| a.1), generated.then_some(&*secret), args.manual_clock);
    started.lines.iter().for_each(say::line);
    // The demo's policy and lines are the library's too.
    let demo = if args.wants_demo() {
        botspace_runtime::demo::start(&svc, &started.base, &started.admin_base, args.demo_token)
            .map_err(|e| format!("cannot create the demo data: {e}"))?
    } else {
        String::new()
    };
    // The demo's block and `botspace ready` follow once the stop signals
    // are caught (`serve`).
    Ok((svc, Listeners { public, admin }, demo))
}

/// Serves until SIGINT or SIGTERM, then drains (see `botspace_hyper::server`);
/// the exit code: 0 after a stop, 1 when the runtime cannot start.
fn serve(svc: Arc<Service>, listeners: Listeners, demo: String, args: &ServerOptions, max_connections: usize) -> i32 {
    // BOTSPACE_CORE_THREADS: how many core threads answer bot requests
    // (0: tokio's blocking pool); unset, the library's default.
    let app = match std::env::var("BOTSPACE_CORE_THREADS").ok().and_then(|v| v.parse().ok()) {
        Some(n) => Botspace::with_core_threads(svc.clone(), n),
        None => Botspace::new(svc.clone()),
    };
    // The server is its service's only user: getMe may be answered on the
    // reactor when nothing is in the core (see `with_get_me_on_worker`).
    let app = app.with_get_me_on_worker(std::env::var("BOTSPACE_GET_ME_ON_WORKER").as_deref() != Ok("0"));
    // BOTSPACE_REACTOR_THREADS: the reactor's threads; unset, the cores the core
    // threads leave (at least one).
    let reactor_threads = std::env::var("BOTSPACE_REACTOR_THREADS").ok().and_then(|v| v.parse().ok());
    let opts = Options {
        max_connections,
        request_timeout: args.request_timeout,
        idle_timeout: args.idle_timeout,
        reactor_threads,
    };
    let ready = || {
        // The demo's output (its token included), whatever the level; an
        // empty block prints nothing, and a closed stdout must not panic.
        say::block("demo", &demo);
        say::line(&options::ready_line())
    };
    let left = match server::serve_then(app, listeners.public.0, listeners.admin.map(|(l, _)| l), opts, ready) {
        Ok(left) => left,
        Err(e) => {
            say::log(Level::Error, &format!("cannot start the server's runtime: {e}"));
            return 1;
        }
    };
    // With every connection gone this is the last reference: SQLite closes
    // and checkpoints its WAL.
    let closed = Arc::strong_count(&svc) == 1;
    drop(svc);
    say::line(&options::stopped_line((!closed || left > 0).then_some(left)));
    0
}
