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
//! answer everything queued in one `handle_batch` call (one transaction
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
use botspace::{ClockKind, Config, Service};
use botspace_hyper::server::{self, fds, Options};
use botspace_hyper::{errln, outln, say, Botspace};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage: server [--config PATH] [--addr HOST:PORT] [--db PATH]
              [--admin-secret S | --admin-secret-file PATH]
              [--operational-key HEX64 | --operational-key-file PATH] [--admin-addr HOST:PORT]
              [--max-connections N] [--request-timeout SECS] [--idle-timeout SECS]
              [--gateway-poll-interval-ms MS] [--database-timeout-ms MS]
              [--trusted-proxy CIDR]... [--webhook-allow-http] [--webhook-allow-private-addresses]
              [--manual-clock] [--demo-token] [--log-format text|json]

Every option also comes from its environment variable (shown) or a config file
of `option = value` lines; a flag beats the variable, which beats the file.

  --config PATH             [env BOTSPACE_CONFIG]
                            read options from PATH (`option = value`, # comments)
  --addr HOST:PORT          [env BOTSPACE_ADDR]
                            address to listen on (default 127.0.0.1:8080; port 0 picks a free port)
  --db PATH|URL             [env BOTSPACE_DB]
                            SQLite database file, :memory:, or a postgres:// URL that
                            several servers share (default botspace.db)
  --admin-secret S          [env BOTSPACE_ADMIN_SECRET]
                            secret for Authorization: Admin <S> on /admin/ (at least 16 characters);
                            a flag is visible in the process list: prefer a file or the variable;
                            with none, one is generated
  --admin-secret-file PATH  [env BOTSPACE_ADMIN_SECRET_FILE]
                            read the admin secret from the first line of PATH
  --operational-key HEX64   [env BOTSPACE_OPERATIONAL_KEY]
                            64 hex digits that seal official bots' operational token copy
  --operational-key-file PATH [env BOTSPACE_OPERATIONAL_KEY_FILE]
                            read the operational key from the first line of PATH
  --admin-addr HOST:PORT    [env BOTSPACE_ADMIN_ADDR]
                            serve the host API (/admin/*) on this second address only; /admin/* on
                            --addr, and everything but /admin/* here, is then 404 method_not_found
  --max-connections N       [env BOTSPACE_MAX_CONNECTIONS]
                            most connections at once (default: the file limit, raised to
                            its hard limit at start, less 64 for the server's own files);
                            beyond it the connection waiting longest for a request is
                            closed, or with none the new one gets 503 and is closed
  --request-timeout SECS    [env BOTSPACE_REQUEST_TIMEOUT]
                            a request must arrive whole within SECS of its first byte
                            (default 30), else 408 and close
  --idle-timeout SECS       [env BOTSPACE_IDLE_TIMEOUT]
                            a keep-alive connection with nothing to read for SECS is
                            closed (default 120)
  --gateway-poll-interval-ms MS [env BOTSPACE_GATEWAY_POLL_INTERVAL_MS]
                            PostgreSQL: how often gateway sessions look at the database for
                            other servers' commits (default 50; 10..60000). Notifications
                            (LISTEN/NOTIFY) wake them sooner; this is the fallback
  --database-timeout-ms MS  [env BOTSPACE_DATABASE_TIMEOUT_MS]
                            PostgreSQL: the deadline of every database call (default 5000;
                            100..600000); past it 503 storage_unavailable, or
                            commit_outcome_unknown once COMMIT was sent
  --trusted-proxy CIDR      [env BOTSPACE_TRUSTED_PROXY, comma-separated]
                            a reverse proxy in front of the server (10.0.0.0/8, fd00::/8, or one
                            address; repeatable): admin logins from it are throttled per
                            client it names in X-Forwarded-For or Forwarded
  --webhook-allow-http      [env BOTSPACE_WEBHOOK_ALLOW_HTTP, 1/true/0/false]
                            bots' webhooks may use http:// URLs, not only https://
  --webhook-allow-private-addresses [env BOTSPACE_WEBHOOK_ALLOW_PRIVATE_ADDRESSES, 1/true/0/false]
                            webhooks may reach loopback, private, link-local, multicast and
                            unspecified addresses (off: a bot cannot make the server call
                            into its own network)
  --manual-clock            [env BOTSPACE_MANUAL_CLOCK, 1/true/0/false]
                            time moves only through /admin/advanceClock (for tests)
  --log-format text|json    [env BOTSPACE_LOG_FORMAT]
                            text lines (default) or one JSON object a line; the level from
                            BOTSPACE_LOG, else RUST_LOG (error, warn, info: default, debug)
  --demo-token              [env BOTSPACE_DEMO_TOKEN, 1/true/0/false]
                            rotate the demo bot's token and print it with the export line (a database
                            made by an earlier start has the demo bot, whose token was shown once);
                            on a database without the demo bot, create it";

/// The options that also come from `BOTSPACE_<NAME>` and the config file:
/// (name without `--`, true for a flag that takes no value).
const OPTIONS: &[(&str, bool)] = &[
    ("addr", false),
    ("db", false),
    ("admin-secret", false),
    ("admin-secret-file", false),
    ("operational-key", false),
    ("operational-key-file", false),
    ("admin-addr", false),
    ("max-connections", false),
    ("request-timeout", false),
    ("idle-timeout", false),
    ("gateway-poll-interval-ms", false),
    ("database-timeout-ms", false),
    ("trusted-proxy", false),
    ("webhook-allow-http", true),
    ("webhook-allow-private-addresses", true),
    ("manual-clock", true),
    ("demo-token", true),
    ("log-format", false),
];

fn env_name(option: &str) -> String {
    format!("BOTSPACE_{}", option.to_ascii_uppercase().replace('-', "_"))
}

/// One source of options: its name for error messages and its arguments.
struct Source {
    label: String,
    args: Vec<String>,
}

/// The sources in rising precedence: the config file, the environment, the
/// command line. Each environment variable is its own source so that an error
/// names it.
fn sources(cli: Vec<String>, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Source>, String> {
    let mut config = env("BOTSPACE_CONFIG").filter(|s| !s.is_empty()).map(|p| (p, "BOTSPACE_CONFIG".to_string()));
    let mut rest = Vec::new();
    let mut it = cli.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--config" {
            config = Some((it.next().ok_or("--config needs a value")?, "--config".into()));
        } else if let Some(p) = arg.strip_prefix("--config=") {
            config = Some((p.to_string(), "--config".into()));
        } else {
            rest.push(arg);
        }
    }
    let mut out = Vec::new();
    if let Some((path, from)) = config {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{from}: cannot read {path}: {e}"))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let label = format!("{path} line {}", i + 1);
            let (name, value) = line.split_once('=').ok_or_else(|| format!("{label}: expected option = value"))?;
            let (name, value) = (name.trim(), value.trim());
            let (_, flag) =
                OPTIONS.iter().find(|(o, _)| *o == name).ok_or_else(|| format!("{label}: unknown option {name}"))?;
            let args = if *flag || name != "trusted-proxy" {
                vec![format!("--{name}={value}")]
            } else {
                value.split(',').map(|v| format!("--{name}={}", v.trim())).collect()
            };
            out.push(Source { label, args });
        }
    }
    for (name, _) in OPTIONS {
        let var = env_name(name);
        if let Some(value) = env(&var).filter(|s| !s.is_empty()) {
            let args = if *name == "trusted-proxy" {
                value.split(',').map(|v| format!("--{name}={}", v.trim())).collect()
            } else {
                vec![format!("--{name}={value}")]
            };
            out.push(Source { label: var, args });
        }
    }
    out.push(Source { label: String::new(), args: rest });
    Ok(out)
}

/// Parses the sources in order, later ones overriding earlier ones. A source
/// that sets the trusted proxies replaces the earlier list wholesale, and one
/// that gives a secret (or its file) replaces the other form from an earlier
/// source, so that only one source's choice is ever in force.
fn parse_sources(sources: Vec<Source>) -> Result<Args, String> {
    let mut a = parse_args(std::iter::empty())?;
    let mut last_proxy_source = None;
    for (i, src) in sources.into_iter().enumerate() {
        let sets = |o: &str| src.args.iter().any(|x| x == &format!("--{o}") || x.starts_with(&format!("--{o}=")));
        if sets("admin-secret") || sets("admin-secret-file") {
            a.admin_secret = None;
            a.admin_secret_file = None;
        }
        if sets("operational-key") || sets("operational-key-file") {
            a.operational_key = None;
            a.operational_key_file = None;
        }
        // File lines are one source each, but together they are the file.
        let group = if src.label.contains(" line ") { 0 } else { i + 1 };
        if sets("trusted-proxy") && last_proxy_source != Some(group) {
            a.trusted_proxies.clear();
            last_proxy_source = Some(group);
        }
        a = parse_into(a, src.args).map_err(|e| {
            if src.label.is_empty() || e.is_empty() {
                return e;
            }
            // "--max-connections needs ..." becomes "BOTSPACE_MAX_CONNECTIONS: needs ...".
            match e.split_once(' ') {
                Some((flag, rest)) if flag.starts_with("--") => format!("{}: {rest}", src.label),
                _ => format!("{}: {e}", src.label),
            }
        })?;
    }
    Ok(a)
}

/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// A request's head and body must arrive within this long of its first
/// byte (default of `--request-timeout`): a client that trickles a byte now
/// and then cannot hold a connection for ever.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

struct Args {
    addr: String,
    admin_addr: Option<String>,
    db: String,
    admin_secret: Option<String>,
    admin_secret_file: Option<String>,
    operational_key: Option<String>,
    operational_key_file: Option<String>,
    max_connections: usize,
    request_timeout: Duration,
    idle_timeout: Duration,
    gateway_poll_interval_ms: Option<u64>,
    database_timeout_ms: Option<u64>,
    trusted_proxies: Vec<String>,
    webhook_allow_http: bool,
    webhook_allow_private_addresses: bool,
    manual_clock: bool,
    demo_token: bool,
    log_json: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let a = Args {
        addr: "127.0.0.1:8080".into(),
        admin_addr: None,
        db: "botspace.db".into(),
        admin_secret: None,
        admin_secret_file: None,
        operational_key: None,
        operational_key_file: None,
        max_connections: 0,
        request_timeout: REQUEST_DEADLINE,
        idle_timeout: IDLE_TIMEOUT,
        gateway_poll_interval_ms: None,
        database_timeout_ms: None,
        trusted_proxies: Vec::new(),
        webhook_allow_http: false,
        webhook_allow_private_addresses: false,
        manual_clock: false,
        demo_token: false,
        log_json: false,
    };
    parse_into(a, args)
}

/// A flag's `1`/`true`/`0`/`false` (from the environment or the file, or
/// `--manual-clock=false` on the command line).
fn boolean(name: &str, v: Option<&str>) -> Result<bool, String> {
    match v {
        None | Some("1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        Some(_) => Err(format!("{name} needs 1, true, 0 or false")),
    }
}

/// Applies `args` over `a`: for single-valued options the last one wins.
fn parse_into(mut a: Args, args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let value = |it: &mut dyn Iterator<Item = String>| -> Result<String, String> {
            inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--addr" => a.addr = value(&mut it)?,
            "--db" => a.db = value(&mut it)?,
            "--admin-addr" => a.admin_addr = Some(value(&mut it)?),
            "--admin-secret" => a.admin_secret = Some(value(&mut it)?),
            "--admin-secret-file" => a.admin_secret_file = Some(value(&mut it)?),
            "--operational-key" => a.operational_key = Some(value(&mut it)?),
            "--operational-key-file" => a.operational_key_file = Some(value(&mut it)?),
            "--max-connections" => {
                a.max_connections = value(&mut it)?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or("--max-connections needs a positive number")?
            }
            "--request-timeout" => {
                a.request_timeout = value(&mut it)?
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s < 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or("--request-timeout needs a number of seconds")?
            }
            "--idle-timeout" => {
                a.idle_timeout = value(&mut it)?
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s < 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or("--idle-timeout needs a number of seconds")?
            }
            "--gateway-poll-interval-ms" => {
                a.gateway_poll_interval_ms = Some(
                    value(&mut it)?.parse().ok().ok_or("--gateway-poll-interval-ms needs a number of milliseconds")?,
                )
            }
            "--database-timeout-ms" => {
                a.database_timeout_ms =
                    Some(value(&mut it)?.parse().ok().ok_or("--database-timeout-ms needs a number of milliseconds")?)
            }
            "--trusted-proxy" => a.trusted_proxies.push(value(&mut it)?),
            "--webhook-allow-http" => a.webhook_allow_http = boolean(&name, inline.as_deref())?,
            "--webhook-allow-private-addresses" => {
                a.webhook_allow_private_addresses = boolean(&name, inline.as_deref())?
            }
            "--manual-clock" => a.manual_clock = boolean(&name, inline.as_deref())?,
            "--demo-token" => a.demo_token = boolean(&name, inline.as_deref())?,
            "--log-format" => {
                a.log_json = match value(&mut it)?.as_str() {
                    "text" => false,
                    "json" => true,
                    _ => return Err("--log-format is text or json".into()),
                }
            }
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(a)
}

fn main() {
    std::process::exit(run(std::env::args().skip(1)));
}

/// The whole server; returns the process exit code.
fn run(args: impl IntoIterator<Item = String>) -> i32 {
    let limit = fds::raise_limit();
    let env = |k: &str| std::env::var(k).ok();
    let mut args = match sources(args.into_iter().collect(), &env).and_then(parse_sources) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            outln!("{USAGE}");
            return 0;
        }
        Err(e) => {
            errln!("{e}\n{USAGE}");
            return 2;
        }
    };
    let level = std::env::var("BOTSPACE_LOG").or_else(|_| std::env::var("RUST_LOG")).ok();
    say::configure(args.log_json, Level::from_setting(level.as_deref()));
    if args.max_connections == 0 {
        args.max_connections = fds::default_max_connections(limit);
    }
    match start(&args) {
        Ok((svc, listeners)) => serve(svc, listeners, &args),
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

/// Opens the service and the ports and prints the start-up lines, the demo
/// block included.
fn start(args: &Args) -> Result<(Arc<Service>, Listeners), String> {
    let (secret, generated) = admin_secret(args)?;
    let svc = open_service(args, &secret)?;
    // The library's operator lines from the start (the demo's token
    // rotation is one), in this server's log format.
    svc.set_log_hook(Some(Arc::new(say::event)));
    let public = listen(&args.addr)?;
    let admin = args.admin_addr.as_deref().map(listen).transpose()?;
    let local = public.1;
    say::log(Level::Info, &format!("botspace listening on http://{local}"));
    if let Some((_, a)) = &admin {
        say::log(Level::Info, &format!("botspace admin listening on http://{a}"));
    }
    if generated {
        // The only way to learn a generated secret: printed whatever the
        // level; never a secret that was given.
        say::block("admin secret (generated; shown only now)", &format!("admin secret: {secret}"));
    }
    if args.manual_clock {
        say::log(Level::Info, "clock: manual (moves only through /admin/advanceClock)");
    }
    let base = format!("http://{}", reachable(local));
    let admin_base = admin.as_ref().map_or_else(|| base.clone(), |(_, a)| format!("http://{}", reachable(*a)));
    // The demo's policy and lines are the library's (the C server prints the same).
    let lines =
        svc.demo_start(&base, &admin_base, args.demo_token).map_err(|e| format!("cannot create the demo data: {e}"))?;
    // The demo's output (its token included), whatever the level; a closed
    // stdout must not panic.
    say::block("demo", &lines);
    // `botspace ready` follows once the stop signals are caught (`serve`).
    Ok((svc, Listeners { public, admin }))
}

/// The secret or its file (whichever the strongest source gave), else a new one
/// (`true`: generated).
fn admin_secret(args: &Args) -> Result<(String, bool), String> {
    if args.admin_secret.is_some() && args.admin_secret_file.is_some() {
        return Err("give --admin-secret or --admin-secret-file, not both".into());
    }
    let from_file = match &args.admin_secret_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        None => None,
    };
    match args.admin_secret.clone().or(from_file) {
        Some(s) => Ok((s, false)),
        None => generate_secret().map(|s| (s, true)).map_err(|e| format!("cannot generate an admin secret: {e}")),
    }
}

fn open_service(args: &Args, secret: &str) -> Result<Arc<Service>, String> {
    if args.operational_key.is_some() && args.operational_key_file.is_some() {
        return Err("give --operational-key or --operational-key-file, not both".into());
    }
    let key = match &args.operational_key_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        None => args.operational_key.clone(),
    };
    let operational_key = match key {
        Some(k) => Some(
            botspace::config::parse_hex_key(k.trim()).ok_or("the operational key must be 64 hex digits (32 bytes)")?,
        ),
        None => None,
    };
    let config = Config::default().with(|c| {
        c.database = args.db.clone();
        c.admin_secret = secret.to_string();
        c.operational_key = operational_key;
        c.clock = if args.manual_clock { ClockKind::Manual } else { ClockKind::System };
        c.gateway_poll_interval_ms =
            args.gateway_poll_interval_ms.unwrap_or(Config::default().gateway_poll_interval_ms);
        c.database_timeout_ms = args.database_timeout_ms.unwrap_or(Config::default().database_timeout_ms);
        c.trusted_proxies = args.trusted_proxies.clone();
        c.webhook_allow_http = args.webhook_allow_http;
        c.webhook_allow_private_addresses = args.webhook_allow_private_addresses;
    });
    // The URL's password, if any, never reaches the log.
    let shown = config.database_for_logs();
    Service::open(config).map(Arc::new).map_err(|e| format!("cannot open the service on {shown}: {e}"))
}

/// Serves until SIGINT or SIGTERM, then drains (see `botspace_hyper::server`);
/// the exit code: 0 after a stop, 1 when the runtime cannot start.
fn serve(svc: Arc<Service>, listeners: Listeners, args: &Args) -> i32 {
    // BOTSPACE_CORE_THREADS: how many core threads answer bot requests
    // (0: tokio's blocking pool); unset, the library's default.
    let app = match std::env::var("BOTSPACE_CORE_THREADS").ok().and_then(|v| v.parse().ok()) {
        Some(n) => Botspace::with_core_threads(svc.clone(), n),
        None => Botspace::new(svc.clone()),
    };
    // The server is its service's only user: getMe may be answered on the
    // reactor when nothing is in the core (see `with_get_me_on_worker`).
    let app = app.with_get_me_on_worker(std::env::var("BOTSPACE_GET_ME_ON_WORKER").as_deref() != Ok("0"));
    let opts = Options {
        max_connections: args.max_connections,
        request_timeout: args.request_timeout,
        idle_timeout: args.idle_timeout,
    };
    let ready = || say::log(Level::Info, "botspace ready");
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
    if closed && left == 0 {
        say::log(Level::Info, "botspace stopped");
    } else {
        say::log(
            Level::Info,
            &format!("botspace stopped ({left} connections cut; every answered request was already committed)"),
        );
    }
    0
}

/// 32 random bytes from the OS, hex-encoded.
fn generate_secret() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// An address a local client can connect to (`0.0.0.0` → `127.0.0.1`).
fn reachable(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v) if v.ip().is_unspecified() => SocketAddr::from(([127, 0, 0, 1], v.port())),
        SocketAddr::V6(v) if v.ip().is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, v.port())),
        a => a,
    }
}
