//! The example servers' options, parsed once for every server (the Rust
//! example server and the C server take the same flags, variables and
//! config file, with the same defaults and the same messages): from the
//! config file, then the environment (`BOTSPACE_<OPTION>`), then the
//! command line, each later source beating the earlier. One clap command
//! (`Flags`) reads every source, so a value is checked the same way
//! wherever it comes from. Files are read through the host's `read` (the
//! core does no I/O of its own).

use crate::host;
use crate::output::Line;
use botspace::config::{ClockKind, Config};
use botspace::log::Level;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Every option, as clap parses it: `None` (or empty) where a source does
/// not give it, so that sources can be laid over one another
/// ([`Flags::overlay`]); the defaults are [`ServerOptions::default`]'s.
/// The help lines are `--help`'s, each followed by the option's variable.
#[derive(Parser, Debug, Default)]
#[command(disable_version_flag = true, args_override_self = true)]
struct Flags {
    /// Read options from PATH: `option = value` lines, # comments
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    config: Option<String>,
    /// Address to listen on; port 0 picks a free one [default: 127.0.0.1:8080]
    #[arg(long, value_name = "HOST:PORT", allow_hyphen_values = true)]
    addr: Option<String>,
    /// SQLite file, :memory:, or a postgres:// URL several servers share [default: botspace.db]
    #[arg(long, value_name = "PATH|URL", allow_hyphen_values = true)]
    db: Option<String>,
    /// Secret for `Authorization: Admin <S>` (16+ characters; none: one is generated and printed once);
    /// a flag shows in the process list, so prefer the file or the variable
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    admin_secret: Option<String>,
    /// Read the admin secret from the first line of PATH
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    admin_secret_file: Option<String>,
    /// 64 hex digits that seal official bots' operational token copy
    #[arg(long, value_name = "HEX64", allow_hyphen_values = true, value_parser = hex_key)]
    operational_key: Option<String>,
    /// Read the operational key from the first line of PATH
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    operational_key_file: Option<String>,
    /// Serve /admin/* on this second address only, and nothing else there
    #[arg(long, value_name = "HOST:PORT", allow_hyphen_values = true)]
    admin_addr: Option<String>,
    /// Most connections at once; past it the longest-waiting one is closed, or the new one gets 503
    /// [default: the file limit, raised to its hard limit, less 64]
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = positive)]
    max_connections: Option<usize>,
    /// A request must arrive whole within SECS of its first byte, else 408 and close [default: 30]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = seconds)]
    request_timeout: Option<Duration>,
    /// Close a keep-alive connection with nothing to read for SECS [default: 120]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = seconds)]
    idle_timeout: Option<Duration>,
    /// PostgreSQL: how often gateway sessions look for other servers' commits, 10..=60000 [default: 50]
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = millis)]
    gateway_poll_interval_ms: Option<u64>,
    /// PostgreSQL: the deadline of every database call, 100..=600000 [default: 5000]
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = millis)]
    database_timeout_ms: Option<u64>,
    /// How long a bot has to answer a button press [default: 15]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = callback_seconds)]
    callback_answer_timeout_s: Option<u64>,
    /// After a webhook secret rotation, deliveries also carry the old secret's signature for SECS
    /// (0: none; deleteWebhook ends it) [default: 86400]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = overlap_seconds)]
    webhook_secret_overlap_s: Option<u64>,
    /// A reverse proxy (10.0.0.0/8, fd00::/8 or an address; repeatable, commas in the variable): admin
    /// logins through it are throttled per client it names in X-Forwarded-For or Forwarded
    #[arg(long, value_name = "CIDR", allow_hyphen_values = true)]
    trusted_proxy: Vec<String>,
    /// Bots' webhooks may use http:// URLs, not only https://
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    webhook_allow_http: Option<bool>,
    /// Webhooks may reach loopback, private, link-local, multicast and unspecified addresses
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    webhook_allow_private_addresses: Option<bool>,
    /// Time moves only through /admin/advanceClock (for tests)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    manual_clock: Option<bool>,
    /// For a tour, not production: on a database without bots make a demo user, bot and chat, print the
    /// token (without it the server creates nothing and prints no token)
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    demo: Option<bool>,
    /// --demo, and rotate the demo bot's token and print it
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolean)]
    demo_token: Option<bool>,
    /// Log lines as text, or one JSON object a line [default: text]
    #[arg(long, value_name = "text|json", allow_hyphen_values = true, value_parser = log_json)]
    log_format: Option<bool>,
}

/// The options whose values are secrets: a refusal names the option and
/// the form, never the value.
const SECRETS: [&str; 2] = ["admin-secret", "operational-key"];

// The value parsers: each error is the form the value takes, which the
// refusal states after "expected".

fn positive(v: &str) -> Result<usize, String> {
    v.parse().ok().filter(|n| *n > 0).ok_or_else(|| "a positive integer".to_string())
}

/// Seconds above 0 and below a day.
fn seconds(v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s < 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "seconds above 0 and below 86400 (decimals allowed)".to_string())
}

/// Whole milliseconds; the range is the library's to check when the
/// service opens.
fn millis(v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| "a whole number of milliseconds".to_string())
}

fn callback_seconds(v: &str) -> Result<u64, String> {
    v.parse().ok().filter(|s| (1..=3600).contains(s)).ok_or_else(|| "an integer 1..=3600".to_string())
}

fn overlap_seconds(v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| "a whole number of seconds, 0 for none".to_string())
}

/// A switch's `1`/`true`/`0`/`false` (from the environment or the file, or
/// `--manual-clock=false` on the command line).
fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err("1, true, 0 or false".into()),
    }
}

fn log_json(v: &str) -> Result<bool, String> {
    match v {
        "text" => Ok(false),
        "json" => Ok(true),
        _ => Err("text or json".into()),
    }
}

/// The key's form is the library's; the value is kept as given, for
/// [`ServerOptions::config`], which reads a key's file the same way.
fn hex_key(v: &str) -> Result<String, String> {
    botspace::config::parse_hex_key(v.trim()).map(|_| v.to_string()).ok_or_else(|| "64 hex digits".to_string())
}

impl Flags {
    /// `later` laid over `self`: each option `later` gives replaces this
    /// one's. A secret or its file replaces both forms, so that only one
    /// source's choice is ever in force; trusted proxies replace the list
    /// wholesale, unless `append` (the lines of one config file, which
    /// together are one source).
    fn overlay(mut self, later: Flags, append: bool) -> Flags {
        if later.admin_secret.is_some() || later.admin_secret_file.is_some() {
            self.admin_secret = None;
            self.admin_secret_file = None;
        }
        if later.operational_key.is_some() || later.operational_key_file.is_some() {
            self.operational_key = None;
            self.operational_key_file = None;
        }
        if append {
            self.trusted_proxy.extend(later.trusted_proxy);
        } else if !later.trusted_proxy.is_empty() {
            self.trusted_proxy = later.trusted_proxy;
        }
        macro_rules! over {
            ($($f:ident),*) => { $( if later.$f.is_some() { self.$f = later.$f; } )* };
        }
        over!(
            config,
            addr,
            db,
            admin_secret,
            admin_secret_file,
            operational_key,
            operational_key_file,
            admin_addr,
            max_connections,
            request_timeout,
            idle_timeout,
            gateway_poll_interval_ms,
            database_timeout_ms,
            callback_answer_timeout_s,
            webhook_secret_overlap_s,
            webhook_allow_http,
            webhook_allow_private_addresses,
            manual_clock,
            demo,
            demo_token,
            log_format
        );
        self
    }

    fn options(self) -> ServerOptions {
        let d = ServerOptions::default();
        ServerOptions {
            addr: self.addr.unwrap_or(d.addr),
            admin_addr: self.admin_addr,
            db: self.db.unwrap_or(d.db),
            admin_secret: self.admin_secret,
            admin_secret_file: self.admin_secret_file,
            operational_key: self.operational_key,
            operational_key_file: self.operational_key_file,
            max_connections: self.max_connections,
            request_timeout: self.request_timeout.unwrap_or(d.request_timeout),
            idle_timeout: self.idle_timeout.unwrap_or(d.idle_timeout),
            gateway_poll_interval_ms: self.gateway_poll_interval_ms,
            database_timeout_ms: self.database_timeout_ms,
            callback_answer_timeout_s: self.callback_answer_timeout_s,
            webhook_secret_overlap_s: self.webhook_secret_overlap_s,
            trusted_proxies: self.trusted_proxy,
            webhook_allow_http: self.webhook_allow_http.unwrap_or(d.webhook_allow_http),
            webhook_allow_private_addresses: self
                .webhook_allow_private_addresses
                .unwrap_or(d.webhook_allow_private_addresses),
            manual_clock: self.manual_clock.unwrap_or(d.manual_clock),
            demo: self.demo.unwrap_or(d.demo),
            demo_token: self.demo_token.unwrap_or(d.demo_token),
            log_json: self.log_format.unwrap_or(d.log_json),
        }
    }
}

/// An option's variable: `BOTSPACE_` and its name in capitals, `-` as `_`.
fn env_name(option: &str) -> String {
    format!("BOTSPACE_{}", option.to_ascii_uppercase().replace('-', "_"))
}

/// The options that come from a variable and the config file: every long
/// option but `--help` (and, in the file, `--config`).
fn names() -> Vec<String> {
    Flags::command().get_arguments().filter_map(|a| a.get_long()).map(str::to_string).collect()
}

/// The usage and option help of a server called `program`; `log_env`
/// names where the log level comes from.
pub fn usage(program: &str, log_env: &str) -> String {
    let mut cmd = Flags::command()
        .name(program.to_string())
        .bin_name(program.to_string())
        .about("botspace: a messaging service's bot interface over HTTP and WebSocket")
        .after_help(format!(
            "Every option also comes from its variable (shown) or a --config file of `option = value` lines; \
             a flag beats the variable, which beats the file. Switches take 1, true, 0 or false there. \
             The log level comes from {log_env} (error, warn, info: default, debug)."
        ))
        // Each option's variable, named by the one rule; never its value
        // (a secret's variable may be set).
        .mut_args(|a| match a.get_long().map(env_name) {
            Some(var) => a.env(var).hide_env_values(true),
            None => a,
        });
    cmd.render_help().to_string().trim_end().to_string()
}

/// A server's options.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ServerOptions {
    pub addr: String,
    pub admin_addr: Option<String>,
    pub db: String,
    pub admin_secret: Option<String>,
    pub admin_secret_file: Option<String>,
    pub operational_key: Option<String>,
    pub operational_key_file: Option<String>,
    /// `None`: [`host::default_max_connections`] of the file limit.
    pub max_connections: Option<usize>,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    pub gateway_poll_interval_ms: Option<u64>,
    pub database_timeout_ms: Option<u64>,
    /// `None`: the library's default (15 s).
    pub callback_answer_timeout_s: Option<u64>,
    /// `None`: the library's default (a day).
    pub webhook_secret_overlap_s: Option<u64>,
    pub trusted_proxies: Vec<String>,
    pub webhook_allow_http: bool,
    pub webhook_allow_private_addresses: bool,
    pub manual_clock: bool,
    /// `--demo`: the tour's demo data ([`ServerOptions::wants_demo`]).
    pub demo: bool,
    pub demo_token: bool,
    pub log_json: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            addr: "127.0.0.1:8080".into(),
            admin_addr: None,
            db: "botspace.db".into(),
            admin_secret: None,
            admin_secret_file: None,
            operational_key: None,
            operational_key_file: None,
            max_connections: None,
            request_timeout: Duration::from_millis(botspace::connection::limits::REQUEST_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(botspace::connection::limits::IDLE_TIMEOUT_MS),
            gateway_poll_interval_ms: None,
            database_timeout_ms: None,
            callback_answer_timeout_s: None,
            webhook_secret_overlap_s: None,
            trusted_proxies: Vec::new(),
            webhook_allow_http: false,
            webhook_allow_private_addresses: false,
            manual_clock: false,
            demo: false,
            demo_token: false,
            log_json: false,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// Run with these options.
    Run(Box<ServerOptions>),
    /// `-h` / `--help`: print the [`usage`] and exit 0.
    Help,
}

/// Reads a file's text for the options (the config file, a secret's file).
pub type ReadFile<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// The options of a server started with `cli` (without the program name),
/// the environment `env` and files read by `read`. An error is the one
/// line a server prints on stderr before it exits with status 2:
/// `botspace: invalid value 'abc' for '--max-connections <N>'
/// (BOTSPACE_MAX_CONNECTIONS): expected a positive integer; see --help`.
/// The sources are read in rising precedence (the config file, the
/// environment, the command line), so a bad variable is refused even
/// beside the flag that would beat it, and before `--help`.
pub fn parse(cli: Vec<String>, env: &dyn Fn(&str) -> Option<String>, read: ReadFile) -> Result<Parsed, String> {
    let cmd = Flags::command().no_binary_name(true);
    let flags = |args: Vec<String>| cmd.clone().try_get_matches_from(args).and_then(|m| Flags::from_arg_matches(&m));
    // `name = value` from the file or a variable, as the flag clap parses.
    let args = |name: &str, value: &str| -> Vec<String> {
        if name == "trusted-proxy" {
            value.split(',').map(|v| format!("--{name}={}", v.trim())).collect()
        } else {
            vec![format!("--{name}={value}")]
        }
    };
    let names = names();
    let given = flags(cli);
    // The config file: the command line's, else the variable's.
    let config = match &given {
        Ok(Flags { config: Some(path), .. }) => Some((path.clone(), "--config".to_string())),
        _ => env("BOTSPACE_CONFIG").filter(|s| !s.is_empty()).map(|p| (p, "BOTSPACE_CONFIG".to_string())),
    };
    let mut all = Flags::default();
    if let Some((path, from)) = config {
        let text = read(&path).map_err(|e| format!("botspace: cannot read the config file {path} ({from}): {e}"))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{path} line {}", i + 1);
            let (name, value) =
                line.split_once('=').ok_or_else(|| format!("botspace: {at}: expected `option = value`; see --help"))?;
            let (name, value) = (name.trim(), value.trim());
            if name == "config" || !names.iter().any(|n| n == name) {
                return Err(format!("botspace: unknown option '{name}' ({at}); see --help"));
            }
            let f = flags(args(name, value)).map_err(|e| refusal(&e, Some(&at)))?;
            all = all.overlay(f, true);
        }
    }
    for name in &names {
        if let Some(value) = env(&env_name(name)).filter(|s| !s.is_empty()) {
            all = all.overlay(flags(args(name, &value)).map_err(|e| refusal(&e, None))?, false);
        }
    }
    match given {
        Ok(f) => Ok(Parsed::Run(Box::new(all.overlay(f, false).options()))),
        Err(e) if e.kind() == ErrorKind::DisplayHelp => Ok(Parsed::Help),
        Err(e) => Err(refusal(&e, None)),
    }
}

/// The one line for an option clap refused: the option and its variable
/// (or the config file's line it came from), the value as given (never a
/// secret's), the form it takes, and a pointer to `--help`, not the whole
/// help, which would bury the line in a journal.
fn refusal(e: &clap::Error, at: Option<&str>) -> String {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let arg = context(ContextKind::InvalidArg).unwrap_or("");
    // "--max-connections <N>" → "max-connections".
    let name = arg.trim_start_matches('-').split([' ', '=', '[']).next().unwrap_or("");
    let from = at.map_or_else(|| env_name(name), str::to_string);
    match (e.kind(), context(ContextKind::InvalidValue)) {
        (ErrorKind::ValueValidation, Some(value)) => {
            let form = std::error::Error::source(e).map_or_else(String::new, |s| s.to_string());
            if SECRETS.contains(&name) {
                format!("botspace: invalid value for '{arg}' ({from}): expected {form}; see --help")
            } else {
                format!("botspace: invalid value '{value}' for '{arg}' ({from}): expected {form}; see --help")
            }
        }
        (ErrorKind::InvalidValue | ErrorKind::NoEquals, _) => {
            format!("botspace: '{arg}' ({from}) needs a value; see --help")
        }
        // A name only: what follows `=` may be a secret given to a
        // misspelt option.
        (ErrorKind::UnknownArgument, _) if arg.starts_with('-') => {
            format!("botspace: unknown option '{}'; see --help", arg.split('=').next().unwrap_or(arg))
        }
        (ErrorKind::UnknownArgument, _) => format!("botspace: unexpected argument '{arg}'; see --help"),
        _ => {
            let said = e.to_string();
            let first = said.lines().next().unwrap_or("").trim_start_matches("error: ");
            format!("botspace: {first}; see --help")
        }
    }
}

/// The first line of a file, trimmed (a secret's or a key's file).
fn first_line(path: &str, read: ReadFile) -> Result<String, String> {
    let text = read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// A new admin secret: 32 bytes from the OS, hex-encoded (printed once by
/// the host when none was given).
pub fn generate_secret() -> Result<String, String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| format!("cannot generate an admin secret: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// What a server says once its ports are bound ([`startup`]), and the
/// URLs its demo is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Startup {
    /// In order: `botspace listening on http://HOST:PORT` (the bound
    /// address, so a port 0 shows the one picked), `botspace admin
    /// listening on http://HOST:PORT` with an admin listener, the block
    /// `admin secret: …` when the secret was generated, `clock: manual
    /// (moves only through /admin/advanceClock)` on a manual clock. The
    /// host prints each through its [`crate::output::Output`].
    pub lines: Vec<Line>,
    /// `http://HOST:PORT` a local client reaches the public listener at
    /// ([`reachable`]): the base of the demo's curl lines.
    pub base: String,
    /// Where `/admin/` is served: the admin listener's reachable URL, or
    /// `base` without one.
    pub admin_base: String,
}

/// The start-up lines of a server bound at `public` (and `admin`, with
/// `--admin-addr`), with the admin secret it generated (`None` when one
/// was given: a given secret is never printed) and whether its clock is
/// manual.
pub fn startup(
    public: SocketAddr,
    admin: Option<SocketAddr>,
    generated_secret: Option<&str>,
    manual_clock: bool,
) -> Startup {
    let mut lines = vec![Line::Log(Level::Info, format!("botspace listening on http://{public}"))];
    if let Some(a) = admin {
        lines.push(Line::Log(Level::Info, format!("botspace admin listening on http://{a}")));
    }
    if let Some(secret) = generated_secret {
        // The only way to learn a generated secret: a block, printed
        // whatever the level.
        lines.push(Line::Block {
            msg: "admin secret (generated; shown only now)".into(),
            text: format!("admin secret: {secret}"),
        });
    }
    if manual_clock {
        lines.push(Line::Log(Level::Info, "clock: manual (moves only through /admin/advanceClock)".into()));
    }
    let base = format!("http://{}", reachable(public));
    let admin_base = admin.map_or_else(|| base.clone(), |a| format!("http://{}", reachable(a)));
    Startup { lines, base, admin_base }
}

/// The line a server prints once it serves: its start-up output ends here
/// (scripts and tests wait for `^botspace ready`).
pub fn ready_line() -> Line {
    Line::Log(Level::Info, "botspace ready".into())
}

/// The line a server prints when a stop signal begins its drain.
pub fn stopping_line() -> Line {
    Line::Log(Level::Info, "botspace stopping".into())
}

/// The line a server prints last, after its drain. `cut`: `None` when
/// every connection ended and the service was closed; else how many
/// connections the drain's end cut (`Some(0)`: none, but the service was
/// still held), so the operator knows that nothing committed was lost
/// and that some clients saw their connection close.
pub fn stopped_line(cut: Option<usize>) -> Line {
    let msg = match cut {
        None => "botspace stopped".to_string(),
        Some(n) => format!("botspace stopped ({n} connections cut; every answered request was already committed)"),
    };
    Line::Log(Level::Info, msg)
}

/// An address a local client can connect to: a wildcard bind (`0.0.0.0`,
/// `[::]`) becomes the loopback address of its family, same port; any
/// other address is itself.
pub fn reachable(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v) if v.ip().is_unspecified() => SocketAddr::from((Ipv4Addr::LOCALHOST, v.port())),
        SocketAddr::V6(v) if v.ip().is_unspecified() => SocketAddr::from((Ipv6Addr::LOCALHOST, v.port())),
        a => a,
    }
}

impl ServerOptions {
    /// Whether the server makes the tour's demo data and prints its token:
    /// only when asked (`--demo` or `--demo-token`). A production start,
    /// from the environment or a unit file alone, creates nothing and
    /// prints no token, which would otherwise reach the journal.
    pub fn wants_demo(&self) -> bool {
        self.demo || self.demo_token
    }

    /// The admin secret: given, or the first line of its file (whichever
    /// the strongest source gave), else `None` (the host generates one
    /// and prints it once).
    pub fn admin_secret(&self, read: ReadFile) -> Result<Option<String>, String> {
        if self.admin_secret.is_some() && self.admin_secret_file.is_some() {
            return Err("give --admin-secret or --admin-secret-file, not both".into());
        }
        let (secret, from) = match &self.admin_secret_file {
            Some(path) => (Some(first_line(path, read)?), format!("--admin-secret-file {path}: its first line")),
            None => (self.admin_secret.clone(), "--admin-secret".to_string()),
        };
        // Checked here as well as when the service opens, so the refusal
        // names the option that gave the secret (never the secret).
        let min = botspace::config::MIN_ADMIN_SECRET_CHARS;
        match secret {
            Some(s) if s.chars().count() < min => Err(format!(
                "{from} must be at least {min} characters (this one has {}); omit it and the server generates one",
                s.chars().count()
            )),
            s => Ok(s),
        }
    }

    /// The service's configuration, with `secret` as the admin secret.
    pub fn config(&self, secret: &str, read: ReadFile) -> Result<Config, String> {
        if self.operational_key.is_some() && self.operational_key_file.is_some() {
            return Err("give --operational-key or --operational-key-file, not both".into());
        }
        let key = match &self.operational_key_file {
            Some(path) => Some(first_line(path, read)?),
            None => self.operational_key.clone(),
        };
        let operational_key = match key {
            Some(k) => Some(
                botspace::config::parse_hex_key(k.trim())
                    .ok_or("the operational key must be 64 hex digits (32 bytes)")?,
            ),
            None => None,
        };
        Ok(Config::default().with(|c| {
            c.database = self.db.clone();
            c.admin_secret = secret.to_string();
            c.operational_key = operational_key;
            c.clock = if self.manual_clock { ClockKind::Manual } else { ClockKind::System };
            c.gateway_poll_interval_ms =
                self.gateway_poll_interval_ms.unwrap_or(Config::default().gateway_poll_interval_ms);
            c.database_timeout_ms = self.database_timeout_ms.unwrap_or(Config::default().database_timeout_ms);
            c.callback_answer_timeout_s =
                self.callback_answer_timeout_s.unwrap_or(Config::default().callback_answer_timeout_s);
            c.webhook_secret_overlap_s =
                self.webhook_secret_overlap_s.unwrap_or(Config::default().webhook_secret_overlap_s);
            c.trusted_proxies = self.trusted_proxies.clone();
            c.webhook_allow_http = self.webhook_allow_http;
            c.webhook_allow_private_addresses = self.webhook_allow_private_addresses;
        }))
    }

    /// The connection cap under a file limit of `file_limit` descriptors.
    pub fn max_connections(&self, file_limit: u64) -> usize {
        self.max_connections.unwrap_or_else(|| host::default_max_connections(file_limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(cli: &[&str], env: &[(&str, &str)], files: &[(&str, &str)]) -> Result<Parsed, String> {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let files: HashMap<String, String> = files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let read = |p: &str| files.get(p).cloned().ok_or_else(|| "No such file or directory".to_string());
        parse(cli.iter().map(|s| s.to_string()).collect(), &|k| env.get(k).cloned(), &read)
    }

    fn opts(cli: &[&str], env: &[(&str, &str)], files: &[(&str, &str)]) -> ServerOptions {
        match run(cli, env, files) {
            Ok(Parsed::Run(o)) => *o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_policys() {
        let o = opts(&[], &[], &[]);
        assert_eq!(o, ServerOptions::default());
        assert_eq!((o.addr.as_str(), o.db.as_str()), ("127.0.0.1:8080", "botspace.db"));
        assert_eq!(o.request_timeout, Duration::from_secs(30));
        assert_eq!(o.idle_timeout, Duration::from_secs(120));
        assert_eq!(o.max_connections(1024), 960);
        assert_eq!(run(&["--help"], &[], &[]), Ok(Parsed::Help));
        assert_eq!(run(&["-h"], &[], &[]), Ok(Parsed::Help));
    }

    #[test]
    fn a_flag_beats_the_variable_which_beats_the_file() {
        let file = [("/c", "# comment\naddr = 1.1.1.1:1\ndb = file.db\nmax-connections = 7\n")];
        let o = opts(&["--config", "/c", "--addr=3.3.3.3:3"], &[("BOTSPACE_DB", "env.db")], &file);
        assert_eq!((o.addr.as_str(), o.db.as_str(), o.max_connections), ("3.3.3.3:3", "env.db", Some(7)));
        let o = opts(&[], &[("BOTSPACE_CONFIG", "/c")], &file);
        assert_eq!(o.addr, "1.1.1.1:1");
    }

    #[test]
    fn a_bad_value_is_one_line_naming_the_option_its_value_and_form() {
        let err = |cli: &[&str], env: &[(&str, &str)], files: &[(&str, &str)]| run(cli, env, files).unwrap_err();
        assert_eq!(
            err(&["--max-connections", "0"], &[], &[]),
            "botspace: invalid value '0' for '--max-connections <N>' (BOTSPACE_MAX_CONNECTIONS): expected a positive integer; see --help"
        );
        assert_eq!(
            err(&["--request-timeout", "86400"], &[], &[]),
            "botspace: invalid value '86400' for '--request-timeout <SECS>' (BOTSPACE_REQUEST_TIMEOUT): expected seconds above 0 and below 86400 (decimals allowed); see --help"
        );
        assert_eq!(
            err(&["--gateway-poll-interval-ms=1.5"], &[], &[]),
            "botspace: invalid value '1.5' for '--gateway-poll-interval-ms <MS>' (BOTSPACE_GATEWAY_POLL_INTERVAL_MS): expected a whole number of milliseconds; see --help"
        );
        // A value that looks like a flag is still the value.
        assert_eq!(
            err(&["--database-timeout-ms", "-100"], &[], &[]),
            "botspace: invalid value '-100' for '--database-timeout-ms <MS>' (BOTSPACE_DATABASE_TIMEOUT_MS): expected a whole number of milliseconds; see --help"
        );
        assert_eq!(
            err(&["--gateway-poll-interval-ms"], &[], &[]),
            "botspace: '--gateway-poll-interval-ms <MS>' (BOTSPACE_GATEWAY_POLL_INTERVAL_MS) needs a value; see --help"
        );
        assert_eq!(
            err(&["--log-format", "xml"], &[], &[]),
            "botspace: invalid value 'xml' for '--log-format <text|json>' (BOTSPACE_LOG_FORMAT): expected text or json; see --help"
        );
        assert_eq!(
            err(&["--manual-clock=yes"], &[], &[]),
            "botspace: invalid value 'yes' for '--manual-clock[=<BOOL>]' (BOTSPACE_MANUAL_CLOCK): expected 1, true, 0 or false; see --help"
        );
        assert_eq!(err(&["--listen"], &[], &[]), "botspace: unknown option '--listen'; see --help");
        assert_eq!(err(&["--demo", "x"], &[], &[]), "botspace: unexpected argument 'x'; see --help");
        // The same line for the variable as for the flag.
        assert_eq!(
            err(&[], &[("BOTSPACE_MAX_CONNECTIONS", "-1")], &[]),
            "botspace: invalid value '-1' for '--max-connections <N>' (BOTSPACE_MAX_CONNECTIONS): expected a positive integer; see --help"
        );
        assert_eq!(
            err(&[], &[("BOTSPACE_DEMO_TOKEN", "yes")], &[]),
            "botspace: invalid value 'yes' for '--demo-token[=<BOOL>]' (BOTSPACE_DEMO_TOKEN): expected 1, true, 0 or false; see --help"
        );
        // A bad variable is refused beside the flag that would beat it, and before --help.
        assert_eq!(
            err(&["--idle-timeout", "5", "--help"], &[("BOTSPACE_IDLE_TIMEOUT", "soon")], &[]),
            "botspace: invalid value 'soon' for '--idle-timeout <SECS>' (BOTSPACE_IDLE_TIMEOUT): expected seconds above 0 and below 86400 (decimals allowed); see --help"
        );
        // The config file's line is named instead of the variable.
        let file = [("/c", "db = x\n\nidle-timeout = 0\n")];
        assert_eq!(
            err(&["--config=/c"], &[], &file),
            "botspace: invalid value '0' for '--idle-timeout <SECS>' (/c line 3): expected seconds above 0 and below 86400 (decimals allowed); see --help"
        );
        assert_eq!(
            err(&["--config=/c"], &[], &[("/c", "listen = 1")]),
            "botspace: unknown option 'listen' (/c line 1); see --help"
        );
        assert_eq!(
            err(&[], &[("BOTSPACE_CONFIG", "/c")], &[("/c", "config = /d")]),
            "botspace: unknown option 'config' (/c line 1); see --help"
        );
        assert_eq!(
            err(&["--config=/c"], &[], &[("/c", "addr")]),
            "botspace: /c line 1: expected `option = value`; see --help"
        );
        assert_eq!(
            err(&["--config=/nope"], &[], &[]),
            "botspace: cannot read the config file /nope (--config): No such file or directory"
        );
        assert_eq!(
            err(&[], &[("BOTSPACE_CONFIG", "/nope")], &[]),
            "botspace: cannot read the config file /nope (BOTSPACE_CONFIG): No such file or directory"
        );
    }

    #[test]
    fn a_secret_is_never_repeated_in_a_refusal() {
        let key = "not-hex-but-secret-0123456789";
        for (cli, env) in [(vec!["--operational-key", key], vec![]), (vec![], vec![("BOTSPACE_OPERATIONAL_KEY", key)])]
        {
            assert_eq!(
                run(&cli, &env, &[]).unwrap_err(),
                "botspace: invalid value for '--operational-key <HEX64>' (BOTSPACE_OPERATIONAL_KEY): expected 64 hex digits; see --help"
            );
        }
        // A misspelt option is named without what follows `=`.
        assert_eq!(
            run(&["--admin-secet=a-secret-given-0001"], &[], &[]).unwrap_err(),
            "botspace: unknown option '--admin-secet'; see --help"
        );
    }

    #[test]
    fn one_source_gives_the_secret_and_the_proxies() {
        // The environment's file replaces the file's secret: no "not both".
        let o =
            opts(&[], &[("BOTSPACE_ADMIN_SECRET_FILE", "/s")], &[("/c", ""), ("/s", " from-file-secret-01 \nrest")]);
        assert_eq!(
            o.admin_secret(&|_| Ok(" from-file-secret-01 \nrest".into())),
            Ok(Some("from-file-secret-01".into()))
        );
        let o = opts(&["--admin-secret", "a-secret-given-0001", "--admin-secret-file", "/s"], &[], &[]);
        assert_eq!(
            o.admin_secret(&|_| Ok(String::new())),
            Err("give --admin-secret or --admin-secret-file, not both".into())
        );
        let o = opts(&["--trusted-proxy", "10.0.0.0/8"], &[("BOTSPACE_TRUSTED_PROXY", "1.2.3.4, fd00::/8")], &[]);
        assert_eq!(o.trusted_proxies, ["10.0.0.0/8"], "the command line's list replaces the variable's");
        let o = opts(&[], &[("BOTSPACE_TRUSTED_PROXY", "1.2.3.4, fd00::/8")], &[]);
        assert_eq!(o.trusted_proxies, ["1.2.3.4", "fd00::/8"]);
        assert_eq!(opts(&[], &[], &[]).admin_secret(&|_| unreachable!()), Ok(None));
    }

    #[test]
    fn a_short_admin_secret_is_refused_naming_its_option_and_the_rule() {
        assert_eq!(botspace::config::MIN_ADMIN_SECRET_CHARS, 16);
        let o = opts(&["--admin-secret", "fifteen-chars-x"], &[], &[]);
        assert_eq!(
            o.admin_secret(&|_| unreachable!()),
            Err(
                "--admin-secret must be at least 16 characters (this one has 15); omit it and the server generates one"
                    .into()
            )
        );
        let o = opts(&[], &[("BOTSPACE_ADMIN_SECRET", "sixteen-chars-xy")], &[]);
        assert_eq!(o.admin_secret(&|_| unreachable!()), Ok(Some("sixteen-chars-xy".into())));
        // Characters, not bytes: 15 two-byte characters are 15.
        let o = opts(&["--admin-secret", &"é".repeat(15)], &[], &[]);
        assert!(o.admin_secret(&|_| unreachable!()).unwrap_err().contains("(this one has 15)"));
        let o = opts(&["--admin-secret-file", "/s"], &[], &[]);
        assert_eq!(
            o.admin_secret(&|_| Ok("  short  \nthe-rest-of-the-file-is-not-the-secret".into())),
            Err("--admin-secret-file /s: its first line must be at least 16 characters (this one has 5); omit it and the server generates one".into())
        );
    }

    #[test]
    fn the_callback_answer_timeout_is_whole_seconds_from_1_to_3600() {
        for (v, ok) in [("1", Some(1)), ("3600", Some(3600)), ("0", None), ("3601", None), ("1.5", None), ("x", None)] {
            let got = parse(vec!["--callback-answer-timeout-s".into(), v.into()], &|_| None, &|_| unreachable!());
            match (got, ok) {
                (Ok(Parsed::Run(a)), Some(n)) => assert_eq!(a.callback_answer_timeout_s, Some(n), "{v}"),
                (Err(e), None) => assert_eq!(
                    e,
                    format!("botspace: invalid value '{v}' for '--callback-answer-timeout-s <SECS>' (BOTSPACE_CALLBACK_ANSWER_TIMEOUT_S): expected an integer 1..=3600; see --help")
                ),
                (other, _) => panic!("{v}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_configuration_carries_the_options() {
        let o = opts(
            &["--db", ":memory:", "--manual-clock", "--webhook-allow-http=true", "--database-timeout-ms", "250"],
            &[("BOTSPACE_CALLBACK_ANSWER_TIMEOUT_S", "30"), ("BOTSPACE_WEBHOOK_SECRET_OVERLAP_S", "2")],
            &[],
        );
        let c = o.config("an-admin-secret-0001", &|_| unreachable!()).unwrap();
        assert_eq!((c.database.as_str(), c.admin_secret.as_str()), (":memory:", "an-admin-secret-0001"));
        assert_eq!((c.clock, c.webhook_allow_http, c.database_timeout_ms), (ClockKind::Manual, true, 250));
        assert_eq!(c.callback_answer_timeout_s, 30, "from the environment");
        assert_eq!(c.webhook_secret_overlap_s, 2, "from the environment");
        let c = opts(&["--webhook-secret-overlap-s=0"], &[], &[]).config("s", &|_| unreachable!()).unwrap();
        assert_eq!(c.webhook_secret_overlap_s, 0, "0: no overlap");
        let d = opts(&[], &[], &[]).config("s", &|_| unreachable!()).unwrap();
        assert_eq!(d.callback_answer_timeout_s, 15, "the library's default");
        assert_eq!(d.webhook_secret_overlap_s, 86_400, "the library's default");
        let bad = opts(&["--operational-key-file", "/k"], &[], &[]);
        assert_eq!(
            bad.config("s", &|_| Ok("abc\n".into())).unwrap_err(),
            "the operational key must be 64 hex digits (32 bytes)"
        );
        let key = "ab".repeat(32);
        let o = opts(&["--operational-key-file", "/k"], &[], &[]);
        assert_eq!(o.config("s", &|_| Ok(format!("{key}\n"))).unwrap().operational_key, Some([0xab; 32]));
    }

    #[test]
    fn a_generated_secret_is_64_hex_digits_and_new_each_time() {
        let (a, b) = (generate_secret().unwrap(), generate_secret().unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')), "lowercase hex: {a}");
        assert_ne!(a, b);
    }

    #[test]
    fn startup_lines_in_order_with_the_bound_addresses() {
        let info = |s: &str| Line::Log(Level::Info, s.to_string());
        let st = startup("127.0.0.1:45481".parse().unwrap(), None, None, false);
        assert_eq!(st.lines, vec![info("botspace listening on http://127.0.0.1:45481")]);
        assert_eq!((st.base.as_str(), st.admin_base.as_str()), ("http://127.0.0.1:45481", "http://127.0.0.1:45481"));
        let st = startup("0.0.0.0:8080".parse().unwrap(), Some("[::]:8081".parse().unwrap()), Some("ab12"), true);
        assert_eq!(
            st.lines,
            vec![
                info("botspace listening on http://0.0.0.0:8080"),
                info("botspace admin listening on http://[::]:8081"),
                Line::Block {
                    msg: "admin secret (generated; shown only now)".into(),
                    text: "admin secret: ab12".into()
                },
                info("clock: manual (moves only through /admin/advanceClock)"),
            ]
        );
        // The lines say what is bound; the URLs are what a local client reaches.
        assert_eq!((st.base.as_str(), st.admin_base.as_str()), ("http://127.0.0.1:8080", "http://[::1]:8081"));
    }

    #[test]
    fn the_lifecycle_lines_are_info_lines_with_fixed_text() {
        let info = |s: &str| Line::Log(Level::Info, s.to_string());
        assert_eq!(ready_line(), info("botspace ready"));
        assert_eq!(stopping_line(), info("botspace stopping"));
        assert_eq!(stopped_line(None), info("botspace stopped"));
        assert_eq!(
            stopped_line(Some(3)),
            info("botspace stopped (3 connections cut; every answered request was already committed)")
        );
        assert_eq!(
            stopped_line(Some(0)),
            info("botspace stopped (0 connections cut; every answered request was already committed)")
        );
        // As printed: the bytes, on stdout; nothing under a warn threshold.
        let out = crate::output::Output::new(false, Level::Info);
        let ready = out.line(&ready_line(), 0).unwrap();
        assert_eq!((ready.stream, ready.bytes), (crate::output::Stream::Stdout, b"botspace ready\n".to_vec()));
        let json = crate::output::Output::new(true, Level::Info).line(&stopped_line(None), 1_000).unwrap();
        assert_eq!(
            String::from_utf8(json.bytes).unwrap(),
            "{\"ts\":\"1970-01-01T00:00:01.000Z\",\"level\":\"info\",\"msg\":\"botspace stopped\"}\n"
        );
        assert_eq!(crate::output::Output::new(false, Level::Warn).line(&stopping_line(), 0), None);
    }

    #[test]
    fn only_a_wildcard_address_is_made_reachable() {
        let r = |a: &str| reachable(a.parse().unwrap()).to_string();
        assert_eq!(r("0.0.0.0:1"), "127.0.0.1:1");
        assert_eq!(r("[::]:2"), "[::1]:2");
        assert_eq!(r("10.1.2.3:3"), "10.1.2.3:3");
        assert_eq!(r("[fd00::1]:4"), "[fd00::1]:4");
        assert_eq!(r("127.0.0.1:5"), "127.0.0.1:5");
    }

    #[test]
    fn the_usage_names_the_program_and_each_options_variable() {
        let u = usage("botspace-server", "BOTSPACE_LOG");
        assert!(u.contains("\nUsage: botspace-server [OPTIONS]\n"), "{u}");
        assert!(u.contains("The log level comes from BOTSPACE_LOG (error, warn, info: default, debug)."), "{u}");
        assert!(!u.ends_with('\n'));
        // Every option the variables and the file take has its line and
        // its variable's name (no value: a secret's may be set).
        let names = names();
        assert_eq!(names.len(), 22, "{names:?}");
        for name in &names {
            assert!(u.contains(&format!("      --{name}")), "--{name} missing: {u}");
            assert!(u.contains(&format!("[env: {}]", env_name(name))), "{name}: {u}");
        }
        assert!(names.iter().any(|n| n == "webhook-secret-overlap-s"));
    }
}
