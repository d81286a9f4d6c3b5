//! The example servers' options, parsed once for every server (the Rust
//! example server and the C server take the same flags, variables and
//! config file, with the same defaults and the same messages): from the
//! config file, then the environment (`BOTSPACE_<NAME>`), then the command
//! line, each later source beating the earlier. Files are read through the
//! host's `read` (the core does no I/O of its own).

use crate::host;
use crate::output::Line;
use botspace::config::{ClockKind, Config};
use botspace::log::Level;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The usage text, `{program}` and `{indent}` and `{log_env}` filled in by
/// [`usage`].
const USAGE: &str = "usage: {program} [--config PATH] [--addr HOST:PORT] [--db PATH]
{indent}[--admin-secret S | --admin-secret-file PATH]
{indent}[--operational-key HEX64 | --operational-key-file PATH] [--admin-addr HOST:PORT]
{indent}[--max-connections N] [--request-timeout SECS] [--idle-timeout SECS]
{indent}[--gateway-poll-interval-ms MS] [--database-timeout-ms MS] [--callback-answer-timeout-s SECS]
{indent}[--trusted-proxy CIDR]... [--webhook-allow-http] [--webhook-allow-private-addresses]
{indent}[--manual-clock] [--demo] [--demo-token] [--log-format text|json]

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
  --callback-answer-timeout-s SECS [env BOTSPACE_CALLBACK_ANSWER_TIMEOUT_S]
                            how long a bot has to answer a button press (default 15; 1..3600);
                            past it the host's stream gets callback_expired
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
                            {log_env} (error, warn, info: default, debug)
  --demo                    [env BOTSPACE_DEMO, 1/true/0/false]
                            for a tour, not for production: on a database without bots create a demo
                            user, bot and chat and print the bot's token; without --demo or
                            --demo-token the server creates nothing and prints no token
  --demo-token              [env BOTSPACE_DEMO_TOKEN, 1/true/0/false]
                            --demo, and rotate the demo bot's token and print it with the export line
                            (a database made by an earlier start has the demo bot, whose token was
                            shown once)";

/// The usage and option help of a server called `program`; `log_env`
/// names where the log level comes from.
pub fn usage(program: &str, log_env: &str) -> String {
    let indent = " ".repeat("usage: ".len() + program.len() + 1);
    USAGE.replace("{program}", program).replace("{indent}", &indent).replace("{log_env}", log_env)
}

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
    ("callback-answer-timeout-s", false),
    ("trusted-proxy", false),
    ("webhook-allow-http", true),
    ("webhook-allow-private-addresses", true),
    ("manual-clock", true),
    ("demo", true),
    ("demo-token", true),
    ("log-format", false),
];

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
    /// `-h` / `--help`: print the usage and exit 0.
    Help,
}

/// Reads a file's text for the options (the config file, a secret's file).
pub type ReadFile<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// What a server prints (on stderr, exit 2) for options it cannot take:
/// the error line, which names the option or its source and the form it
/// takes, then one line pointing to `--help`, not the whole usage, so the
/// error is not buried under it in a journal.
pub fn refusal(program: &str, error: &str) -> String {
    format!("{error}\nrun `{program} --help` for every option, its variable and its form\n")
}

/// The options of a server started with `cli` (without the program name),
/// the environment `env` and files read by `read`. An error is the one
/// line to print before the usage (exit status 2).
pub fn parse(cli: Vec<String>, env: &dyn Fn(&str) -> Option<String>, read: ReadFile) -> Result<Parsed, String> {
    match sources(cli, env, read).and_then(parse_sources) {
        Ok(a) => Ok(Parsed::Run(Box::new(a))),
        Err(e) if e.is_empty() => Ok(Parsed::Help),
        Err(e) => Err(e),
    }
}

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
fn sources(cli: Vec<String>, env: &dyn Fn(&str) -> Option<String>, read: ReadFile) -> Result<Vec<Source>, String> {
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
    let list = |name: &str, value: &str| -> Vec<String> {
        if name == "trusted-proxy" {
            value.split(',').map(|v| format!("--{name}={}", v.trim())).collect()
        } else {
            vec![format!("--{name}={value}")]
        }
    };
    let mut out = Vec::new();
    if let Some((path, from)) = config {
        let text = read(&path).map_err(|e| format!("{from}: cannot read {path}: {e}"))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let label = format!("{path} line {}", i + 1);
            let (name, value) = line.split_once('=').ok_or_else(|| format!("{label}: expected option = value"))?;
            let (name, value) = (name.trim(), value.trim());
            if !OPTIONS.iter().any(|(o, _)| *o == name) {
                return Err(format!("{label}: unknown option {name}"));
            }
            out.push(Source { label, args: list(name, value) });
        }
    }
    for (name, _) in OPTIONS {
        let var = env_name(name);
        if let Some(value) = env(&var).filter(|s| !s.is_empty()) {
            out.push(Source { label: var, args: list(name, &value) });
        }
    }
    out.push(Source { label: String::new(), args: rest });
    Ok(out)
}

/// Parses the sources in order, later ones overriding earlier ones. A source
/// that sets the trusted proxies replaces the earlier list wholesale, and one
/// that gives a secret (or its file) replaces the other form from an earlier
/// source, so that only one source's choice is ever in force.
fn parse_sources(sources: Vec<Source>) -> Result<ServerOptions, String> {
    let mut a = ServerOptions::default();
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

/// A flag's `1`/`true`/`0`/`false` (from the environment or the file, or
/// `--manual-clock=false` on the command line).
fn boolean(name: &str, v: Option<&str>) -> Result<bool, String> {
    match v {
        None | Some("1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        Some(_) => Err(format!("{name} needs 1, true, 0 or false")),
    }
}

/// Seconds above 0 and below a day.
fn seconds(v: &str, name: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s < 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{name} needs a number of seconds"))
}

/// Applies `args` over `a`: for single-valued options the last one wins.
fn parse_into(mut a: ServerOptions, args: Vec<String>) -> Result<ServerOptions, String> {
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let value = |it: &mut dyn Iterator<Item = String>| -> Result<String, String> {
            inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"))
        };
        let ms = |v: String| v.parse().ok().ok_or_else(|| format!("{name} needs a number of milliseconds"));
        match name.as_str() {
            "--addr" => a.addr = value(&mut it)?,
            "--db" => a.db = value(&mut it)?,
            "--admin-addr" => a.admin_addr = Some(value(&mut it)?),
            "--admin-secret" => a.admin_secret = Some(value(&mut it)?),
            "--admin-secret-file" => a.admin_secret_file = Some(value(&mut it)?),
            "--operational-key" => a.operational_key = Some(value(&mut it)?),
            "--operational-key-file" => a.operational_key_file = Some(value(&mut it)?),
            "--max-connections" => {
                a.max_connections = Some(
                    value(&mut it)?
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or("--max-connections needs a positive number")?,
                )
            }
            "--request-timeout" => a.request_timeout = seconds(&value(&mut it)?, &name)?,
            "--idle-timeout" => a.idle_timeout = seconds(&value(&mut it)?, &name)?,
            "--gateway-poll-interval-ms" => a.gateway_poll_interval_ms = Some(ms(value(&mut it)?)?),
            "--database-timeout-ms" => a.database_timeout_ms = Some(ms(value(&mut it)?)?),
            "--callback-answer-timeout-s" => {
                a.callback_answer_timeout_s = Some(
                    value(&mut it)?
                        .parse()
                        .ok()
                        .filter(|s| (1..=3600).contains(s))
                        .ok_or("--callback-answer-timeout-s needs whole seconds from 1 to 3600")?,
                )
            }
            "--trusted-proxy" => a.trusted_proxies.push(value(&mut it)?),
            "--webhook-allow-http" => a.webhook_allow_http = boolean(&name, inline.as_deref())?,
            "--webhook-allow-private-addresses" => {
                a.webhook_allow_private_addresses = boolean(&name, inline.as_deref())?
            }
            "--manual-clock" => a.manual_clock = boolean(&name, inline.as_deref())?,
            "--demo" => a.demo = boolean(&name, inline.as_deref())?,
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
    fn bad_values_are_named_by_their_source() {
        let err = |cli: &[&str], env: &[(&str, &str)], files: &[(&str, &str)]| run(cli, env, files).unwrap_err();
        assert_eq!(err(&["--max-connections", "0"], &[], &[]), "--max-connections needs a positive number");
        assert_eq!(err(&["--request-timeout", "86400"], &[], &[]), "--request-timeout needs a number of seconds");
        assert_eq!(
            err(&["--gateway-poll-interval-ms", "1.5"], &[], &[]),
            "--gateway-poll-interval-ms needs a number of milliseconds"
        );
        assert_eq!(err(&["--gateway-poll-interval-ms"], &[], &[]), "--gateway-poll-interval-ms needs a value");
        assert_eq!(err(&["--log-format", "xml"], &[], &[]), "--log-format is text or json");
        assert_eq!(err(&["--listen"], &[], &[]), "unknown argument --listen");
        assert_eq!(
            err(&[], &[("BOTSPACE_MAX_CONNECTIONS", "-1")], &[]),
            "BOTSPACE_MAX_CONNECTIONS: needs a positive number"
        );
        assert_eq!(err(&[], &[("BOTSPACE_DEMO_TOKEN", "yes")], &[]), "BOTSPACE_DEMO_TOKEN: needs 1, true, 0 or false");
        let file = [("/c", "db = x\n\nidle-timeout = 0\n")];
        assert_eq!(err(&["--config=/c"], &[], &file), "/c line 3: needs a number of seconds");
        assert_eq!(err(&["--config=/c"], &[], &[("/c", "listen = 1")]), "/c line 1: unknown option listen");
        assert_eq!(err(&["--config=/c"], &[], &[("/c", "addr")]), "/c line 1: expected option = value");
        assert_eq!(err(&["--config=/nope"], &[], &[]), "--config: cannot read /nope: No such file or directory");
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
    fn a_refusal_is_the_error_line_and_a_pointer_to_help() {
        assert_eq!(
            refusal("srv", "--max-connections needs a positive number"),
            "--max-connections needs a positive number\nrun `srv --help` for every option, its variable and its form\n"
        );
    }

    #[test]
    fn the_callback_answer_timeout_is_whole_seconds_from_1_to_3600() {
        for (v, ok) in [("1", Some(1)), ("3600", Some(3600)), ("0", None), ("3601", None), ("1.5", None), ("x", None)] {
            let got = parse(vec!["--callback-answer-timeout-s".into(), v.into()], &|_| None, &|_| unreachable!());
            match (got, ok) {
                (Ok(Parsed::Run(a)), Some(n)) => assert_eq!(a.callback_answer_timeout_s, Some(n), "{v}"),
                (Err(e), None) => {
                    assert_eq!(e.lines().next(), Some("--callback-answer-timeout-s needs whole seconds from 1 to 3600"))
                }
                (other, _) => panic!("{v}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_configuration_carries_the_options() {
        let o = opts(
            &["--db", ":memory:", "--manual-clock", "--webhook-allow-http=true", "--database-timeout-ms", "250"],
            &[("BOTSPACE_CALLBACK_ANSWER_TIMEOUT_S", "30")],
            &[],
        );
        let c = o.config("an-admin-secret-0001", &|_| unreachable!()).unwrap();
        assert_eq!((c.database.as_str(), c.admin_secret.as_str()), (":memory:", "an-admin-secret-0001"));
        assert_eq!((c.clock, c.webhook_allow_http, c.database_timeout_ms), (ClockKind::Manual, true, 250));
        assert_eq!(c.callback_answer_timeout_s, 30, "from the environment");
        let d = opts(&[], &[], &[]).config("s", &|_| unreachable!()).unwrap();
        assert_eq!(d.callback_answer_timeout_s, 15, "the library's default");
        let bad = opts(&["--operational-key", "abc"], &[], &[]);
        assert_eq!(
            bad.config("s", &|_| unreachable!()).unwrap_err(),
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
    fn usage_is_aligned_under_the_program_name() {
        let u = usage("botspace-server", "BOTSPACE_LOG");
        let mut lines = u.lines();
        assert_eq!(lines.next(), Some("usage: botspace-server [--config PATH] [--addr HOST:PORT] [--db PATH]"));
        assert_eq!(lines.next(), Some("                       [--admin-secret S | --admin-secret-file PATH]"));
        assert!(u.contains("BOTSPACE_LOG (error, warn, info: default, debug)"));
        assert!(!u.ends_with('\n'));
        assert!(usage("server", "X").starts_with("usage: server [--config PATH]"));
    }
}
