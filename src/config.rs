//! Options a service is opened with. Rust hosts build [`Config`] directly;
//! C and JavaScript hosts pass the same fields as JSON ([`Config::from_json`]).

use crate::protocol::Tier;
use serde::Deserialize;

/// SQLite `PRAGMA synchronous` level. `Full` is the default: a 200 survives
/// a machine crash. `Normal` survives a process crash only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    #[default]
    Full,
    Normal,
}

/// Which clock the service reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    #[default]
    System,
    /// Starts at 2026-01-01T00:00:00Z and moves only through `advanceClock`.
    Manual,
}

/// A token-bucket rate: `count` requests per `period_ms`, up to `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub count: u32,
    pub period_ms: u64,
    pub burst: u32,
}

impl Rate {
    pub const fn new(count: u32, period_ms: u64, burst: u32) -> Rate {
        Rate { count, period_ms, burst }
    }
}

/// Rate limits of one tier; `None` means unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierLimits {
    #[serde(default)]
    pub bot: Option<Rate>,
    #[serde(default)]
    pub private_chat: Option<Rate>,
    #[serde(default)]
    pub group: Option<Rate>,
}

impl TierLimits {
    pub const UNLIMITED: TierLimits = TierLimits { bot: None, private_chat: None, group: None };
}

/// Per-tier rate limits; the defaults are in docs/errors.md ("Rate
/// limits").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub free: TierLimits,
    pub standard: TierLimits,
    pub official: TierLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            free: TierLimits {
                bot: Some(Rate::new(30, 1_000, 30)),
                private_chat: Some(Rate::new(1, 1_000, 5)),
                group: Some(Rate::new(20, 60_000, 20)),
            },
            standard: TierLimits {
                bot: Some(Rate::new(100, 1_000, 100)),
                private_chat: Some(Rate::new(5, 1_000, 10)),
                group: Some(Rate::new(60, 60_000, 60)),
            },
            official: TierLimits::UNLIMITED,
        }
    }
}

/// Everything a service is opened with. `Debug` shows no secret.
///
/// `#[non_exhaustive]`: options will be added, so outside this crate a
/// `Config` is made from `Config::default()` (or JSON) and changed field by
/// field, e.g. with [`Config::with`].
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Config {
    /// A file path, or `:memory:`.
    pub database: String,
    /// Secret for `Authorization: Admin <secret>` on `/admin/` methods.
    pub admin_secret: String,
    /// 32-byte key (64 hex digits in JSON) that encrypts the operational token
    /// copy of official bots. Without it, official bots keep no copy.
    #[serde(deserialize_with = "de_key")]
    pub operational_key: Option<[u8; 32]>,
    pub synchronous: Synchronous,
    pub clock: ClockKind,
    pub max_body_bytes: usize,
    pub heartbeat_interval_ms: u64,
    pub event_retention_s: u64,
    pub limits: Limits,
    /// How long SQLite may wait for another connection's lock (a backup
    /// tool, a second process) before the request fails with 500. 0, the
    /// default, never waits: the library does not sleep, and within one
    /// service every write goes through one connection anyway.
    pub busy_timeout_ms: u32,
    /// The largest image `import_database` accepts, in bytes.
    pub max_import_bytes: usize,
    /// Most unacknowledged events kept per bot: past it, the oldest go
    /// (at the next pruning, within a minute) and the bot's next gateway
    /// session says `replay_truncated`.
    pub max_unacked_events: u64,
    /// Most unconfirmed host updates kept: past it, the oldest go and
    /// getUpdates reports the gap with an `updates_dropped` update.
    pub max_unconfirmed_updates: u64,
    /// With a shared store (PostgreSQL), how often a gateway session looks
    /// at the database for what other nodes committed: new events, a
    /// rotated token or a suspension. Its `poll_timeout` includes it. With
    /// `listen_notify` this is the fallback (a notification wakes sessions
    /// sooner). Above 5 s sessions still check every 5 s: the checks renew
    /// their connection leases (`gateway::LEASE_TTL_MS`, 10 s).
    pub gateway_poll_interval_ms: u64,
    /// With a PostgreSQL store: a commit that gives bots events, or ends
    /// their gateway connections, sends `NOTIFY botspace` with their ids,
    /// and [`crate::Service::wait_store_notifications`] listens for other
    /// nodes' (a hint to re-read the database, so delivery across nodes
    /// does not wait for the poll). `false` for PostgreSQL-compatible
    /// engines without LISTEN/NOTIFY (CockroachDB, YugabyteDB): sessions
    /// then learn of other nodes' commits by polling only. Default `true`;
    /// ignored on SQLite.
    pub listen_notify: bool,
    /// With a PostgreSQL store: the longest any one database call may take
    /// (connecting to each host of the URL, a statement or a pipelined
    /// group of them, COMMIT, LISTEN, a listener's liveness check, lease
    /// renewal). Past it the connection is dropped and made again on the
    /// next call, and the request is answered 503 `storage_unavailable`, or
    /// `commit_outcome_unknown` when COMMIT had been sent. A primary that
    /// hangs (stopped, a stalled disk, a partition that keeps TCP up) then
    /// costs a request this long, not forever. Default 5000; 100 to 600000.
    /// Ignored on SQLite.
    pub database_timeout_ms: u64,
    /// The reverse proxies in front of the service, as CIDR blocks or
    /// single addresses (`"10.0.0.0/8"`, `"fd00::/8"`, `"192.0.2.7"`).
    /// When the peer a host names ([`crate::Incoming::from_peer`])
    /// is inside one of them, the admin-login throttle keys the request by
    /// the client those proxies forwarded (`X-Forwarded-For` or
    /// `Forwarded`: the rightmost address that is not a trusted proxy), so
    /// clients behind one proxy are throttled one by one. Empty, the
    /// default: forwarding headers are never believed. List only proxies
    /// that append the client's address to the header: any client inside a
    /// listed block can name itself anything.
    pub trusted_proxies: Vec<String>,
    /// Webhooks may use `http` URLs as well as `https`. Off by default:
    /// a delivery over `http` can be read and changed on its way.
    pub webhook_allow_http: bool,
    /// Webhooks may reach loopback, private, link-local, multicast and
    /// unspecified addresses. Off by default: otherwise any bot could make
    /// the server send requests into its own network (the cloud metadata
    /// service at 169.254.169.254 included).
    pub webhook_allow_private_addresses: bool,
    /// After `setWebhook` with `rotate_secret`, how long deliveries carry
    /// the old secret's signature beside the new one (`webhook-signature:
    /// v1,<new> v1,<old>`, as Standard Webhooks allows), so receivers can
    /// move to the new secret one by one without refusing a delivery.
    /// `deleteWebhook` ends it; a second rotation keeps only the secret it
    /// replaced. 0: no overlap. Default 86 400 (a day).
    pub webhook_secret_overlap_s: u64,
    /// Tests only: draw ids and tokens from a stream seeded with this
    /// number instead of the OS, so they are known in advance. Accepted
    /// only with `clock: manual`, which no production service runs on.
    pub random_seed: Option<u64>,
    /// Most getUpdates polls parked at once (waiting on their `timeout`);
    /// past it a poll is answered at once, as with `timeout` 0. Each costs
    /// the library at most `BYTES_PER_PARKED_POLL` (256 bytes).
    /// Default 10 000.
    pub max_parked_polls: usize,
    /// How long a bot has to answer a button press (answerCallbackQuery),
    /// in seconds from the press; past it the answer is refused
    /// (`callback_query_expired`) and the host's stream says
    /// `callback_expired`. Default 15; 1 to 3600.
    pub callback_answer_timeout_s: u64,
}

/// Default of [`Config::max_parked_polls`].
pub const DEFAULT_MAX_PARKED_POLLS: usize = 10_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            database: ":memory:".into(),
            admin_secret: String::new(),
            operational_key: None,
            synchronous: Synchronous::Full,
            clock: ClockKind::System,
            max_body_bytes: 65_536,
            heartbeat_interval_ms: 41_250,
            event_retention_s: 86_400,
            limits: Limits::default(),
            busy_timeout_ms: 0,
            max_import_bytes: 1 << 30,
            max_unacked_events: 100_000,
            max_unconfirmed_updates: 1_000_000,
            gateway_poll_interval_ms: 50,
            listen_notify: true,
            database_timeout_ms: 5_000,
            trusted_proxies: Vec::new(),
            webhook_allow_http: false,
            webhook_allow_private_addresses: false,
            webhook_secret_overlap_s: 86_400,
            random_seed: None,
            max_parked_polls: DEFAULT_MAX_PARKED_POLLS,
            callback_answer_timeout_s: 15,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database", &self.database_for_logs())
            .field("admin_secret", &"<redacted>")
            .field("operational_key", &self.operational_key.map(|_| "<redacted>"))
            .field("synchronous", &self.synchronous)
            .field("clock", &self.clock)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("heartbeat_interval_ms", &self.heartbeat_interval_ms)
            .field("event_retention_s", &self.event_retention_s)
            .field("limits", &self.limits)
            .field("busy_timeout_ms", &self.busy_timeout_ms)
            .field("max_import_bytes", &self.max_import_bytes)
            .field("max_unacked_events", &self.max_unacked_events)
            .field("max_unconfirmed_updates", &self.max_unconfirmed_updates)
            .field("gateway_poll_interval_ms", &self.gateway_poll_interval_ms)
            .field("listen_notify", &self.listen_notify)
            .field("database_timeout_ms", &self.database_timeout_ms)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("webhook_secret_overlap_s", &self.webhook_secret_overlap_s)
            .field("random_seed", &self.random_seed)
            .field("callback_answer_timeout_s", &self.callback_answer_timeout_s)
            .finish()
    }
}

/// The shortest admin secret a service opens with, in characters. The
/// servers generate 64 hex digits when none is given; a chosen one must
/// at least not be guessable by the throttled trickle of attempts
/// (docs/reliability.md, "Admin login throttle").
pub const MIN_ADMIN_SECRET_CHARS: usize = 16;

/// Why a configuration was refused. New checks add variants.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("invalid configuration JSON: {0}")]
    Json(String),
    #[error("admin_secret must be at least {} characters", MIN_ADMIN_SECRET_CHARS)]
    AdminSecretTooShort,
    #[error("max_body_bytes must be between 1 and 67108864")]
    MaxBodyBytes,
    #[error("gateway_poll_interval_ms must be between 10 and 60000")]
    GatewayPollInterval,
    #[error("database_timeout_ms must be between 100 and 600000")]
    DatabaseTimeout,
    #[error("heartbeat_interval_ms must be between 1000 and 600000")]
    HeartbeatInterval,
    #[error("rate limit for tier {0} has a zero count, period or burst")]
    ZeroRate(&'static str),
    #[error("random_seed is for tests and needs clock = manual")]
    SeedWithoutManualClock,
    #[error("callback_answer_timeout_s must be 1 to 3600")]
    CallbackAnswerTimeout,
    #[error("max_unacked_events and max_unconfirmed_updates must be at least 1")]
    ZeroBacklogCap,
    /// An entry of `trusted_proxies` that is not a CIDR block or address.
    #[error("trusted_proxies: {0}")]
    TrustedProxy(String),
}

fn de_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<[u8; 32]>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => parse_hex_key(&s)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("operational_key must be 64 hex digits (32 bytes)")),
    }
}

/// Parses 64 hex digits into a 32-byte key.
pub fn parse_hex_key(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

impl Config {
    /// This configuration changed by `f`: `Config::default().with(|c| c.clock = ClockKind::Manual)`.
    pub fn with(mut self, f: impl FnOnce(&mut Config)) -> Config {
        f(&mut self);
        self
    }

    /// `database` with the password of a PostgreSQL URL replaced by `***`,
    /// for Debug output and logs.
    pub fn database_for_logs(&self) -> String {
        let db = &self.database;
        let Some(scheme_end) = db.find("://").map(|i| i + 3) else { return db.clone() };
        let rest = &db[scheme_end..];
        let auth_end = rest.find('/').unwrap_or(rest.len());
        match rest[..auth_end].rfind('@').and_then(|at| rest[..at].find(':').map(|colon| (colon, at))) {
            Some((colon, at)) => format!("{}{}:***{}", &db[..scheme_end], &rest[..colon], &rest[at..]),
            None => db.clone(),
        }
    }

    /// Parses a JSON configuration; absent fields keep their defaults,
    /// unknown fields are refused so typos do not pass silently.
    pub fn from_json(bytes: &[u8]) -> Result<Config, ConfigError> {
        // Only an object: serde would also fill the struct from an array by position.
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| ConfigError::Json(e.to_string()))?;
        if !v.is_object() {
            return Err(ConfigError::Json("the configuration must be a JSON object".into()));
        }
        let c: Config = serde_json::from_value(v).map_err(|e| ConfigError::Json(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Checks the values a service cannot run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.admin_secret.chars().count() < MIN_ADMIN_SECRET_CHARS {
            return Err(ConfigError::AdminSecretTooShort);
        }
        if self.max_body_bytes == 0 || self.max_body_bytes > 64 << 20 {
            return Err(ConfigError::MaxBodyBytes);
        }
        if !(1_000..=600_000).contains(&self.heartbeat_interval_ms) {
            return Err(ConfigError::HeartbeatInterval);
        }
        if !(10..=60_000).contains(&self.gateway_poll_interval_ms) {
            return Err(ConfigError::GatewayPollInterval);
        }
        if !(100..=600_000).contains(&self.database_timeout_ms) {
            return Err(ConfigError::DatabaseTimeout);
        }
        for (tier, t) in [
            (Tier::Free, &self.limits.free),
            (Tier::Standard, &self.limits.standard),
            (Tier::Official, &self.limits.official),
        ] {
            for r in [t.bot, t.private_chat, t.group].into_iter().flatten() {
                if r.count == 0 || r.period_ms == 0 || r.burst == 0 {
                    return Err(ConfigError::ZeroRate(tier.as_str()));
                }
            }
        }
        if self.max_unacked_events == 0 || self.max_unconfirmed_updates == 0 {
            return Err(ConfigError::ZeroBacklogCap);
        }
        if !(1..=3600).contains(&self.callback_answer_timeout_s) {
            return Err(ConfigError::CallbackAnswerTimeout);
        }
        if self.random_seed.is_some() && self.clock != ClockKind::Manual {
            return Err(ConfigError::SeedWithoutManualClock);
        }
        self.trusted_proxy_blocks()?;
        Ok(())
    }

    /// `trusted_proxies` parsed.
    pub(crate) fn trusted_proxy_blocks(&self) -> Result<Vec<crate::forwarded::Cidr>, ConfigError> {
        self.trusted_proxies
            .iter()
            .map(|s| crate::forwarded::Cidr::parse(s).map_err(ConfigError::TrustedProxy))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_postgres_password_never_reaches_debug_output() {
        let c = super::Config {
            database: "postgres://bots:s3cret@db.internal:5432/botspace?sslmode=require".into(),
            ..super::Config::default()
        };
        assert_eq!(c.database_for_logs(), "postgres://bots:***@db.internal:5432/botspace?sslmode=require");
        assert!(!format!("{c:?}").contains("s3cret"));
        let no_password = super::Config { database: "postgres://bots@db/botspace".into(), ..super::Config::default() };
        assert_eq!(no_password.database_for_logs(), "postgres://bots@db/botspace");
        assert_eq!(super::Config::default().database_for_logs(), ":memory:");
    }

    use super::*;

    #[test]
    fn debug_shows_no_secret() {
        let c = Config {
            admin_secret: "s3cr3t-admin-value-xyz".into(),
            operational_key: Some([9; 32]),
            ..Config::default()
        };
        let d = format!("{c:?}");
        assert!(!d.contains("s3cr3t") && !d.contains("9, 9"), "{d}");
    }

    #[test]
    fn the_callback_answer_timeout_is_1_to_3600_seconds() {
        let with = |t: &str| {
            Config::from_json(format!(r#"{{"admin_secret":"long-enough-secret-0001"{t}}}"#).as_bytes())
                .map(|c| c.callback_answer_timeout_s)
        };
        assert_eq!(with(""), Ok(15));
        assert_eq!(with(r#","callback_answer_timeout_s":1"#), Ok(1));
        assert_eq!(with(r#","callback_answer_timeout_s":3600"#), Ok(3600));
        assert_eq!(with(r#","callback_answer_timeout_s":0"#), Err(ConfigError::CallbackAnswerTimeout));
        assert_eq!(with(r#","callback_answer_timeout_s":3601"#), Err(ConfigError::CallbackAnswerTimeout));
    }

    #[test]
    fn a_random_seed_needs_the_manual_clock() {
        assert_eq!(
            Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","random_seed":7}"#).unwrap_err(),
            ConfigError::SeedWithoutManualClock
        );
        let c = Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","random_seed":7,"clock":"manual"}"#)
            .unwrap();
        assert_eq!(c.random_seed, Some(7));
        assert_eq!(c.busy_timeout_ms, 0, "the library never waits unless told to");
    }

    #[test]
    fn from_json_takes_only_an_object() {
        let e = Config::from_json(br#"[":memory:","long-enough-secret-0001"]"#).unwrap_err();
        assert_eq!(e, ConfigError::Json("the configuration must be a JSON object".into()));
        let c = Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","clock":"manual"}"#).unwrap();
        assert_eq!(c.clock, ClockKind::Manual);
        assert_eq!(c.database, ":memory:");
        assert!(c.listen_notify, "notifications are on unless turned off");
        let off = Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","listen_notify":false}"#).unwrap();
        assert!(!off.listen_notify);
        assert!(matches!(
            Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","listen_notify":"no"}"#),
            Err(ConfigError::Json(_))
        ));
    }

    #[test]
    fn from_json_refuses_unknown_fields_and_bad_values() {
        assert!(matches!(
            Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","databse":"x"}"#),
            Err(ConfigError::Json(_))
        ));
        assert_eq!(Config::from_json(br#"{"admin_secret":"short"}"#).unwrap_err(), ConfigError::AdminSecretTooShort);
        assert!(matches!(
            Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","operational_key":"zz"}"#),
            Err(ConfigError::Json(_))
        ));
        let key = "00".repeat(32);
        let c = Config::from_json(
            format!(r#"{{"admin_secret":"long-enough-secret-0001","operational_key":"{key}"}}"#).as_bytes(),
        )
        .unwrap();
        assert_eq!(c.operational_key, Some([0u8; 32]));
    }

    #[test]
    fn database_timeout_ms_defaults_to_five_seconds_and_refuses_values_out_of_range() {
        let c = Config::from_json(br#"{"admin_secret":"long-enough-secret-0001"}"#).unwrap();
        assert_eq!(c.database_timeout_ms, 5_000);
        let c = Config::from_json(br#"{"admin_secret":"long-enough-secret-0001","database_timeout_ms":250}"#).unwrap();
        assert_eq!(c.database_timeout_ms, 250);
        for bad in ["0", "99", "600001"] {
            let json = format!(r#"{{"admin_secret":"long-enough-secret-0001","database_timeout_ms":{bad}}}"#);
            assert_eq!(Config::from_json(json.as_bytes()).unwrap_err(), ConfigError::DatabaseTimeout, "{bad}");
        }
    }

    #[test]
    fn trusted_proxies_take_cidr_blocks_and_addresses_and_refuse_anything_else_by_name() {
        let c = Config::from_json(
            br#"{"admin_secret":"long-enough-secret-0001","trusted_proxies":["10.0.0.0/8","fd00::/8","192.0.2.7"]}"#,
        )
        .unwrap();
        assert_eq!(c.trusted_proxies, ["10.0.0.0/8", "fd00::/8", "192.0.2.7"]);
        assert!(Config::default().trusted_proxies.is_empty(), "no proxy is trusted unless named");
        for (entry, message) in [
            ("proxy.internal", r#"trusted_proxies: "proxy.internal" is not an IP address or CIDR block"#),
            ("10.0.0.1/8", r#"trusted_proxies: "10.0.0.1/8" has bits set past /8; the block is 10.0.0.0/8"#),
            ("10.0.0.0/40", r#"trusted_proxies: "10.0.0.0/40": the prefix length must be 0 to 32"#),
        ] {
            let json = format!(r#"{{"admin_secret":"long-enough-secret-0001","trusted_proxies":["{entry}"]}}"#);
            let e = Config::from_json(json.as_bytes()).unwrap_err();
            assert_eq!(e.to_string(), message);
            let direct = Config::default().with(|c| {
                c.admin_secret = "long-enough-secret-0001".into();
                c.trusted_proxies = vec![entry.into()];
            });
            assert_eq!(direct.validate().unwrap_err().to_string(), message, "checked at open too");
        }
    }
}
