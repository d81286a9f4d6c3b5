//! Where the store connects: the `database` setting (a `postgres://` URL,
//! or libpq's key=value form), parsed by tokio-postgres's own
//! [`tokio_postgres::Config`]. Only what tokio-postgres does not know of
//! libpq's options is taken out first: `sslrootcert`, and the
//! `verify-ca` / `verify-full` modes.

use super::{Client, MakeTls, PgConnection, PgFail};
use crate::store::error::{StoreError, StoreResult};
use std::time::Duration;
use tokio_postgres::config::Host;

/// A parsed `database` setting: one client configuration per host, the
/// root certificate file, the password (kept out of every log line) and
/// the deadline of each call.
#[derive(Clone)]
pub(super) struct Target {
    hosts: Vec<tokio_postgres::Config>,
    pub(super) root_cert: Option<String>,
    pub(super) password: Option<String>,
    pub(super) deadline: Duration,
}

impl Target {
    /// The configuration's `database` and `database_timeout_ms`. A setting
    /// tokio-postgres refuses is its error (`invalid connection string: …`).
    pub(super) fn parse(config: &crate::config::Config) -> StoreResult<Target> {
        let (text, root_cert) = libpq_only(&config.database);
        let parsed: tokio_postgres::Config = text.parse().map_err(StoreError::Postgres)?;
        let password = parsed.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).filter(|p| !p.is_empty());
        Ok(Target {
            hosts: per_host(&parsed),
            root_cert,
            password,
            deadline: Duration::from_millis(config.database_timeout_ms),
        })
    }

    /// Connects to the first host that answers, each within the deadline;
    /// the last failure when none does.
    pub(super) async fn connect_first(&self, tls: &MakeTls) -> Result<(tokio_postgres::Client, PgConnection), PgFail> {
        let mut last = PgFail::Deadline("connecting");
        for host in &self.hosts {
            match tokio::time::timeout(self.deadline, host.connect(tls.clone())).await {
                Ok(Ok(pair)) => return Ok(pair),
                Ok(Err(e)) => last = PgFail::Pg(e),
                Err(_) => last = PgFail::Deadline("connecting"),
            }
        }
        Err(last)
    }

    /// [`Target::connect_first`] as a [`Client`] whose socket is driven by
    /// `rt` whenever it runs.
    pub(super) fn connect_on(&self, rt: &tokio::runtime::Runtime, tls: &MakeTls) -> Result<Client, PgFail> {
        let (pg, connection) = rt.block_on(self.connect_first(tls))?;
        let task = rt.spawn(async move {
            let _ = connection.await;
        });
        Ok(Client { pg, task })
    }
}

/// The setting as tokio-postgres takes it, and libpq's `sslrootcert`,
/// which it does not know. libpq's `verify-ca` and `verify-full` become
/// `require`: botspace verifies the certificate in every TLS mode.
fn libpq_only(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_string(), None) };
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", v)) => root = Some(v.to_string()),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (url, root)
}

/// The configuration once per host, in the setting's order: a multi-host
/// setting (`postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write`)
/// is tried host by host, each with a deadline of its own. tokio-postgres
/// bounds only the TCP connect of each host (`connect_timeout`), not the
/// start-up that follows, so one stopped host at the head of the list
/// would otherwise hold every attempt and the standby that took over would
/// never be reached.
fn per_host(c: &tokio_postgres::Config) -> Vec<tokio_postgres::Config> {
    if c.get_hosts().len() <= 1 {
        return vec![c.clone()];
    }
    (0..c.get_hosts().len()).map(|i| one_host(c, i)).collect()
}

/// `c` with its `i`th host alone (with its address and port: one port
/// stands for every host, as in libpq), every other option as it is.
fn one_host(c: &tokio_postgres::Config, i: usize) -> tokio_postgres::Config {
    let mut one = tokio_postgres::Config::new();
    if let Some(u) = c.get_user() {
        one.user(u);
    }
    if let Some(p) = c.get_password() {
        one.password(p);
    }
    if let Some(d) = c.get_dbname() {
        one.dbname(d);
    }
    if let Some(o) = c.get_options() {
        one.options(o);
    }
    if let Some(a) = c.get_application_name() {
        one.application_name(a);
    }
    match &c.get_hosts()[i] {
        Host::Tcp(h) => one.host(h),
        #[cfg(unix)]
        Host::Unix(p) => one.host_path(p),
    };
    if let Some(a) = c.get_hostaddrs().get(i) {
        one.hostaddr(*a);
    }
    if let Some(p) = c.get_ports().get(i).or(c.get_ports().first()) {
        one.port(*p);
    }
    if let Some(t) = c.get_connect_timeout() {
        one.connect_timeout(*t);
    }
    if let Some(t) = c.get_tcp_user_timeout() {
        one.tcp_user_timeout(*t);
    }
    if let Some(t) = c.get_keepalives_interval() {
        one.keepalives_interval(t);
    }
    if let Some(n) = c.get_keepalives_retries() {
        one.keepalives_retries(n);
    }
    one.ssl_mode(c.get_ssl_mode())
        .ssl_negotiation(c.get_ssl_negotiation())
        .keepalives(c.get_keepalives())
        .keepalives_idle(c.get_keepalives_idle())
        .target_session_attrs(c.get_target_session_attrs())
        .channel_binding(c.get_channel_binding())
        .load_balance_hosts(c.get_load_balance_hosts());
    one
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslrootcert_is_taken_out_of_the_url_and_verify_modes_become_require() {
        assert_eq!(libpq_only("postgres://h/db"), ("postgres://h/db".into(), None));
        assert_eq!(
            libpq_only("postgres://h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x"),
            ("postgres://h/db?sslmode=require&application_name=x".into(), Some("/ca.pem".into()))
        );
        assert_eq!(
            libpq_only("postgres://h/db?sslrootcert=/ca.pem"),
            ("postgres://h/db".into(), Some("/ca.pem".into()))
        );
    }

    fn parse(s: &str) -> tokio_postgres::Config {
        s.parse().unwrap()
    }

    /// Each host alone keeps every other option: the configuration of
    /// host `i` is the one the same setting names with that host only.
    #[test]
    fn a_multi_host_setting_is_one_configuration_per_host_with_every_option() {
        let options = "dbname=botspace user=bots password=s3cret options=-cx=1 application_name=app \
                       sslmode=require sslnegotiation=postgres connect_timeout=3 tcp_user_timeout=4 \
                       keepalives=0 keepalives_idle=5 keepalives_interval=6 keepalives_retries=7 \
                       target_session_attrs=read-write channel_binding=disable load_balance_hosts=disable";
        let many = parse(&format!("host=h1,h2,/run/pg port=1,2,3 {options}"));
        let hosts = per_host(&many);
        assert_eq!(hosts.len(), 3);
        assert!(hosts[0] == parse(&format!("host=h1 port=1 {options}")));
        assert!(hosts[1] == parse(&format!("host=h2 port=2 {options}")));
        assert!(hosts[2] == parse(&format!("host=/run/pg port=3 {options}")));
        // One port stands for every host; a URL's hosts likewise.
        let url = per_host(&parse("postgres://u:pw@h1,h2:5433/db?target_session_attrs=read-write"));
        assert!(url[0] == parse("postgres://u:pw@h1/db?target_session_attrs=read-write"));
        assert!(url[1] == parse("postgres://u:pw@h2:5433/db?target_session_attrs=read-write"));
        // One host: the configuration as it is.
        let one = parse(&format!("host=h1 {options}"));
        assert!(per_host(&one) == [one.clone()]);
    }

    #[test]
    fn the_password_is_read_from_the_setting_and_a_bad_option_is_the_clients_error() {
        let cfg = |database: &str| crate::config::Config { database: database.into(), ..Default::default() };
        let t = Target::parse(&cfg("postgres://bots:s3cret@db/botspace?sslrootcert=/ca.pem")).ok().unwrap();
        assert_eq!((t.password.as_deref(), t.root_cert.as_deref()), (Some("s3cret"), Some("/ca.pem")));
        let bad = Target::parse(&cfg("postgres://db/botspace?no_such_option=1")).err().unwrap();
        assert_eq!(bad.to_string(), "postgres: invalid connection string: unknown option `no_such_option`");
    }
}
