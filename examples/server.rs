//! botspace over real TCP, on tokio and hyper (`hosts/hyper`, the
//! `botspace-hyper` crate).
//!
//! ```text
//! cargo run --release --example server -- --help
//! ```
//!
//! prints the options: the doc comment of [`Cli`] below, so the help text
//! and this documentation are one text.
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
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, CommandFactory, Parser};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// usage: server [--config PATH] [--addr HOST:PORT] [--db PATH]
///               [--admin-secret S | --admin-secret-file PATH]
///               [--operational-key HEX64 | --operational-key-file PATH] [--admin-addr HOST:PORT]
///               [--max-connections N] [--request-timeout SECS] [--idle-timeout SECS]
///               [--gateway-poll-interval-ms MS] [--database-timeout-ms MS]
///               [--trusted-proxy CIDR]... [--webhook-allow-http] [--webhook-allow-private-addresses]
///               [--manual-clock] [--demo-token] [--log-format text|json]
///
/// Every option also comes from its environment variable (shown) or a config file
/// of `option = value` lines; a flag beats the variable, which beats the file.
///
///   --config PATH             [env BOTSPACE_CONFIG]
///                             read options from PATH (`option = value`, # comments)
///   --addr HOST:PORT          [env BOTSPACE_ADDR]
///                             address to listen on (default 127.0.0.1:8080; port 0 picks a free port)
///   --db PATH|URL             [env BOTSPACE_DB]
///                             SQLite database file, :memory:, or a postgres:// URL that
///                             several servers share (default botspace.db)
///   --admin-secret S          [env BOTSPACE_ADMIN_SECRET]
///                             secret for Authorization: Admin <S> on /admin/ (at least 16 characters);
///                             a flag is visible in the process list: prefer a file or the variable;
///                             with none, one is generated
///   --admin-secret-file PATH  [env BOTSPACE_ADMIN_SECRET_FILE]
///                             read the admin secret from the first line of PATH
///   --operational-key HEX64   [env BOTSPACE_OPERATIONAL_KEY]
///                             64 hex digits that seal official bots' operational token copy
///   --operational-key-file PATH [env BOTSPACE_OPERATIONAL_KEY_FILE]
///                             read the operational key from the first line of PATH
///   --admin-addr HOST:PORT    [env BOTSPACE_ADMIN_ADDR]
///                             serve the host API (/admin/*) on this second address only; /admin/* on
///                             --addr, and everything but /admin/* here, is then 404 method_not_found
///   --max-connections N       [env BOTSPACE_MAX_CONNECTIONS]
///                             most connections at once (default: the file limit, raised to
///                             its hard limit at start, less 64 for the server's own files);
///                             beyond it the connection waiting longest for a request is
///                             closed, or with none the new one gets 503 and is closed
///   --request-timeout SECS    [env BOTSPACE_REQUEST_TIMEOUT]
///                             a request must arrive whole within SECS of its first byte
///                             (default 30), else 408 and close
///   --idle-timeout SECS       [env BOTSPACE_IDLE_TIMEOUT]
///                             a keep-alive connection with nothing to read for SECS is
///                             closed (default 120)
///   --gateway-poll-interval-ms MS [env BOTSPACE_GATEWAY_POLL_INTERVAL_MS]
///                             PostgreSQL: how often gateway sessions look at the database for
///                             other servers' commits (default 50; 10..60000). Notifications
///                             (LISTEN/NOTIFY) wake them sooner; this is the fallback
///   --database-timeout-ms MS  [env BOTSPACE_DATABASE_TIMEOUT_MS]
///                             PostgreSQL: the deadline of every database call (default 5000;
///                             100..600000); past it 503 storage_unavailable, or
///                             commit_outcome_unknown once COMMIT was sent
///   --trusted-proxy CIDR      [env BOTSPACE_TRUSTED_PROXY, comma-separated]
///                             a reverse proxy in front of the server (10.0.0.0/8, fd00::/8, or one
///                             address; repeatable): admin logins from it are throttled per
///                             client it names in X-Forwarded-For or Forwarded
///   --webhook-allow-http      [env BOTSPACE_WEBHOOK_ALLOW_HTTP, 1/true/0/false]
///                             bots' webhooks may use http:// URLs, not only https://
///   --webhook-allow-private-addresses [env BOTSPACE_WEBHOOK_ALLOW_PRIVATE_ADDRESSES, 1/true/0/false]
///                             webhooks may reach loopback, private, link-local, multicast and
///                             unspecified addresses (off: a bot cannot make the server call
///                             into its own network)
///   --manual-clock            [env BOTSPACE_MANUAL_CLOCK, 1/true/0/false]
///                             time moves only through /admin/advanceClock (for tests)
///   --log-format text|json    [env BOTSPACE_LOG_FORMAT]
///                             text lines (default) or one JSON object a line; the level from
///                             BOTSPACE_LOG, else RUST_LOG (error, warn, info: default, debug)
///   --demo-token              [env BOTSPACE_DEMO_TOKEN, 1/true/0/false]
///                             rotate the demo bot's token and print it with the export line (a database
///                             made by an earlier start has the demo bot, whose token was shown once);
///                             on a database without the demo bot, create it
#[derive(Parser, Debug, Default)]
#[command(
    name = "server",
    no_binary_name = true,
    verbatim_doc_comment,
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
struct Cli {
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    config: Option<String>,
    #[arg(long, value_name = "HOST:PORT", allow_hyphen_values = true)]
    addr: Option<String>,
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    db: Option<String>,
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    admin_secret: Option<String>,
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    admin_secret_file: Option<String>,
    #[arg(long, value_name = "HEX64", allow_hyphen_values = true)]
    operational_key: Option<String>,
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    operational_key_file: Option<String>,
    #[arg(long, value_name = "HOST:PORT", allow_hyphen_values = true)]
    admin_addr: Option<String>,
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = positive)]
    max_connections: Option<usize>,
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = seconds)]
    request_timeout: Option<Duration>,
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = seconds)]
    idle_timeout: Option<Duration>,
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = milliseconds)]
    gateway_poll_interval_ms: Option<u64>,
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = milliseconds)]
    database_timeout_ms: Option<u64>,
    #[arg(long = "trusted-proxy", value_name = "CIDR", allow_hyphen_values = true, action = ArgAction::Append)]
    trusted_proxies: Vec<String>,
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    webhook_allow_http: Option<bool>,
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    webhook_allow_private_addresses: Option<bool>,
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    manual_clock: Option<bool>,
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    demo_token: Option<bool>,
    #[arg(long, value_name = "text|json", allow_hyphen_values = true, value_parser = log_format)]
    log_format: Option<bool>,
    #[arg(short = 'h', long)]
    help: bool,
}

/// The help text: [`Cli`]'s doc comment, as `--help` prints it.
fn usage() -> String {
    let cmd = Cli::command();
    cmd.get_long_about().or(cmd.get_about()).map(|s| s.to_string()).unwrap_or_default()
}

/// The options that also come from `BOTSPACE_<NAME>` and the config file
/// (name without `--`; `--config` and `--help` are the command line's).
fn options() -> Vec<String> {
    Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !["config", "help"].contains(l))
        .map(str::to_string)
        .collect()
}

fn env_name(option: &str) -> String {
    format!("BOTSPACE_{}", option.to_ascii_uppercase().replace('-', "_"))
}

fn positive(v: &str) -> Result<usize, String> {
    v.parse().ok().filter(|n| *n > 0).ok_or_else(|| "needs a positive number".into())
}

fn seconds(v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s < 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "needs a number of seconds".into())
}

fn milliseconds(v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| "needs a number of milliseconds".into())
}

/// A flag's `1`/`true`/`0`/`false` (from the environment or the file, or
/// `--manual-clock=false` on the command line).
fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err("needs 1, true, 0 or false".into()),
    }
}

/// `--log-format`: true for JSON lines.
fn log_format(v: &str) -> Result<bool, String> {
    match v {
        "text" => Ok(false),
        "json" => Ok(true),
        _ => Err("is text or json".into()),
    }
}

/// Parses one source's arguments; an error names the flag (`--db needs a
/// value`) or, for the environment and the file, the source (`label`).
fn parse_source(label: &str, args: &[String]) -> Result<Cli, String> {
    Cli::try_parse_from(args).map_err(|e| {
        let arg = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(a)) => a.split([' ', '=', '[']).next().unwrap_or("").to_string(),
            _ => String::new(),
        };
        let msg = match e.kind() {
            ErrorKind::UnknownArgument => return format!("unknown argument {arg}"),
            ErrorKind::ValueValidation => {
                std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string())
            }
            ErrorKind::InvalidValue | ErrorKind::NoEquals => "needs a value".to_string(),
            _ => e.to_string(),
        };
        if label.is_empty() {
            format!("{arg} {msg}")
        } else {
            format!("{label}: {msg}")
        }
    })
}

/// One source of options: its name for error messages and its arguments.
struct Source {
    label: String,
    args: Vec<String>,
}

/// The config file's lines, then the environment's variables, in rising
/// precedence (the command line comes last, in `parse_all`). Each variable
/// and each line is its own source so that an error names it.
fn sources(config: Option<(String, String)>, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Source>, String> {
    let known = options();
    let one_each = |name: &str, value: &str| -> Vec<String> {
        if name == "trusted-proxy" {
            value.split(',').map(|v| format!("--{name}={}", v.trim())).collect()
        } else {
            vec![format!("--{name}={value}")]
        }
    };
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
            if !known.iter().any(|o| o == name) {
                return Err(format!("{label}: unknown option {name}"));
            }
            out.push(Source { label, args: one_each(name, value) });
        }
    }
    for name in &known {
        let var = env_name(name);
        if let Some(value) = env(&var).filter(|s| !s.is_empty()) {
            out.push(Source { label: var, args: one_each(name, &value) });
        }
    }
    Ok(out)
}

/// The command line, the config file and the environment, merged: a flag
/// beats the variable, which beats the file. A source that sets the trusted
/// proxies replaces the earlier list wholesale, and one that gives a secret
/// (or its file) replaces the other form from an earlier source, so that
/// only one source's choice is ever in force. `Ok(None)`: `--help`.
fn parse_all(cli_args: Vec<String>, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Args>, String> {
    let cli = parse_source("", &cli_args);
    let config = match &cli {
        Ok(Cli { config: Some(p), .. }) => Some((p.clone(), "--config".to_string())),
        _ => env("BOTSPACE_CONFIG").filter(|s| !s.is_empty()).map(|p| (p, "BOTSPACE_CONFIG".to_string())),
    };
    let mut merged = Cli::default();
    let mut last_proxy_source = None;
    for (i, src) in sources(config, env)?.into_iter().enumerate() {
        let c = parse_source(&src.label, &src.args)?;
        // File lines are one source each, but together they are the file.
        let group = if src.label.contains(" line ") { 0 } else { i + 1 };
        merged.overlay(c, group, &mut last_proxy_source);
    }
    let cli = cli?;
    if cli.help {
        return Ok(None);
    }
    merged.overlay(cli, usize::MAX, &mut last_proxy_source);
    Ok(Some(merged.into_args()))
}

impl Cli {
    /// `later` over `self`: what it sets wins.
    fn overlay(&mut self, later: Cli, group: usize, last_proxy_source: &mut Option<usize>) {
        if later.admin_secret.is_some() || later.admin_secret_file.is_some() {
            self.admin_secret = later.admin_secret;
            self.admin_secret_file = later.admin_secret_file;
        }
        if later.operational_key.is_some() || later.operational_key_file.is_some() {
            self.operational_key = later.operational_key;
            self.operational_key_file = later.operational_key_file;
        }
        if !later.trusted_proxies.is_empty() {
            if *last_proxy_source != Some(group) {
                self.trusted_proxies.clear();
                *last_proxy_source = Some(group);
            }
            self.trusted_proxies.extend(later.trusted_proxies);
        }
        macro_rules! take {
            ($($f:ident),*) => {$(if later.$f.is_some() { self.$f = later.$f; })*};
        }
        take!(
            addr,
            db,
            admin_addr,
            max_connections,
            request_timeout,
            idle_timeout,
            gateway_poll_interval_ms,
            database_timeout_ms,
            webhook_allow_http,
            webhook_allow_private_addresses,
            manual_clock,
            demo_token,
            log_format
        );
    }

    fn into_args(self) -> Args {
        Args {
            addr: self.addr.unwrap_or_else(|| "127.0.0.1:8080".into()),
            admin_addr: self.admin_addr,
            db: self.db.unwrap_or_else(|| "botspace.db".into()),
            admin_secret: self.admin_secret,
            admin_secret_file: self.admin_secret_file,
            operational_key: self.operational_key,
            operational_key_file: self.operational_key_file,
            max_connections: self.max_connections.unwrap_or(0),
            request_timeout: self.request_timeout.unwrap_or(REQUEST_DEADLINE),
            idle_timeout: self.idle_timeout.unwrap_or(IDLE_TIMEOUT),
            gateway_poll_interval_ms: self.gateway_poll_interval_ms,
            database_timeout_ms: self.database_timeout_ms,
            trusted_proxies: self.trusted_proxies,
            webhook_allow_http: self.webhook_allow_http.unwrap_or(false),
            webhook_allow_private_addresses: self.webhook_allow_private_addresses.unwrap_or(false),
            manual_clock: self.manual_clock.unwrap_or(false),
            demo_token: self.demo_token.unwrap_or(false),
            log_json: self.log_format.unwrap_or(false),
        }
    }
}

/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// A request's head and body must arrive within this long of its first
/// byte (default of `--request-timeout`): a client that trickles a byte now
/// and then cannot hold a connection for ever.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// The options in force.
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

fn main() {
    std::process::exit(run(std::env::args().skip(1)));
}

/// The whole server; returns the process exit code.
fn run(args: impl IntoIterator<Item = String>) -> i32 {
    let limit = fds::raise_limit();
    let env = |k: &str| std::env::var(k).ok();
    let mut args = match parse_all(args.into_iter().collect(), &env) {
        Ok(Some(a)) => a,
        Ok(None) => {
            outln!("{}", usage());
            return 0;
        }
        Err(e) => {
            errln!("{e}\n{}", usage());
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
    Service::open(config).map(Arc::new).map_err(|e| format!("cannot open the service on {}: {e}", args.db))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(cli: &[&str], env: &[(&str, &str)]) -> Result<Option<Args>, String> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse_all(cli.iter().map(|s| s.to_string()).collect(), &|k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_last_value_wins_and_proxies_add_up_within_a_source() {
        let a = parse(&["--max-connections=5", "--max-connections", "6", "--trusted-proxy", "10.0.0.0/8"], &[])
            .unwrap()
            .unwrap();
        assert_eq!(a.max_connections, 6);
        let a = parse(
            &["--trusted-proxy=10.0.0.0/8", "--trusted-proxy", "192.0.2.7"],
            &[("BOTSPACE_TRUSTED_PROXY", "fd00::/8")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.trusted_proxies, ["10.0.0.0/8", "192.0.2.7"], "the flag's list replaces the variable's");
        let a = parse(&[], &[("BOTSPACE_TRUSTED_PROXY", "10.0.0.0/8, fd00::/8")]).unwrap().unwrap();
        assert_eq!(a.trusted_proxies, ["10.0.0.0/8", "fd00::/8"]);
    }

    #[test]
    fn flags_take_an_optional_boolean_and_a_secret_source_replaces_the_other_form() {
        let a = parse(&["--manual-clock", "--demo-token=0"], &[("BOTSPACE_DEMO_TOKEN", "1")]).unwrap().unwrap();
        assert!(a.manual_clock && !a.demo_token);
        assert_eq!(parse(&["--manual-clock=yes"], &[]).err().unwrap(), "--manual-clock needs 1, true, 0 or false");
        let a = parse(&["--admin-secret-file", "/s"], &[("BOTSPACE_ADMIN_SECRET", "from-the-env")]).unwrap().unwrap();
        assert_eq!((a.admin_secret, a.admin_secret_file.as_deref()), (None, Some("/s")));
        assert!(parse(&["-h"], &[]).unwrap().is_none());
        assert_eq!(parse(&["--db"], &[]).err().unwrap(), "--db needs a value");
    }

    #[test]
    fn the_help_is_the_doc_comment_and_names_every_option() {
        let help = usage();
        assert!(help.starts_with("usage: server [--config PATH]"), "{help}");
        for o in options() {
            assert!(help.contains(&format!("  --{o} ")) || help.contains(&format!("  --{o}\n")), "--{o}");
            assert!(help.contains(&format!("[env {}", env_name(&o))), "--{o}");
        }
    }
}
