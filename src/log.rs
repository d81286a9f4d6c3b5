//! What the library tells its operator: [`Event`]s (a connection evicted,
//! a gateway session closed for a slow consumer, a bot token rotated),
//! their level names and their one JSON shape
//! (`{"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"…",…}`).
//! The host receives them through `Service::set_log_hook`; how a server
//! prints them (threshold, stream, text or JSON) is the runtime crate's
//! (`botspace_runtime::output`). Nothing here prints.

use serde_json::Value;

/// How much a line matters; a setting lets through its level and the ones
/// above it (`Error` < `Warn` < `Info` < `Debug`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    /// The name in JSON lines and in `RUST_LOG` / `BOTSPACE_LOG`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// The level from its number (`Level as i32`), for the C ABI.
    pub fn from_number(n: i32) -> Option<Level> {
        [Level::Error, Level::Warn, Level::Info, Level::Debug].get(usize::try_from(n).ok()?).copied()
    }

    /// The level of a `log` facade record (`trace` counts as `Debug`).
    pub fn from_log(level: log::Level) -> Level {
        match level {
            log::Level::Error => Level::Error,
            log::Level::Warn => Level::Warn,
            log::Level::Info => Level::Info,
            log::Level::Debug | log::Level::Trace => Level::Debug,
        }
    }

    /// The threshold a setting (`RUST_LOG`, `BOTSPACE_LOG`) names: a plain
    /// level name, any case (`trace` counts as `debug`); unset, empty or
    /// anything else (module filters such as `botspace=debug` included):
    /// `Info`, the default.
    pub fn from_setting(setting: Option<&str>) -> Level {
        match setting.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            Some("error") => Level::Error,
            Some("warn" | "warning") => Level::Warn,
            Some("debug" | "trace") => Level::Debug,
            _ => Level::Info,
        }
    }
}

/// `unix_ms` (milliseconds since 1970, UTC) as RFC 3339 with milliseconds
/// and a `Z`: `2026-01-02T03:04:05.678Z`.
pub fn timestamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        unix_ms % 1000
    )
}

/// One JSON log line, without the newline: `ts`, `level`, `msg`, then
/// `fields` in order (a field named `ts`, `level` or `msg` is dropped, so
/// those three always mean the same).
pub fn log_line(level: Level, msg: &str, fields: &[(&str, Value)], unix_ms: u64) -> String {
    // Written by hand: serde_json's map sorts its keys, and a reader
    // scanning lines wants ts, level, msg first.
    let s = |t: &str| Value::String(t.into()).to_string();
    let mut out = format!("{{\"ts\":\"{}\",\"level\":\"{}\",\"msg\":{}", timestamp(unix_ms), level.name(), s(msg));
    let mut seen = vec!["ts", "level", "msg"];
    for (k, v) in fields {
        if !seen.contains(k) {
            seen.push(k);
            out.push_str(&format!(",{}:{v}", s(k)));
        }
    }
    out.push('}');
    out
}

/// Something the library tells its operator about: a connection evicted
/// at the connection limit, a request timed out, a gateway session closed
/// for a slow consumer, a bot token rotated. The library decides that a
/// line is due, its level, message and fields; the host prints it
/// ([`Event::text`] or [`Event::json`]) through the hook it set with
/// `Service::set_log_hook`. Fields are fixed words and ids, never a token,
/// a secret or message text.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub level: Level,
    /// A fixed sentence, or (for a line that names what failed, such as
    /// `accept failed: ...`) one made for the occasion.
    pub msg: std::borrow::Cow<'static, str>,
    /// `event` (a fixed name) first, then ids such as `bot_id`; none for a
    /// line that is its message alone.
    pub fields: Vec<(&'static str, Value)>,
}

impl Event {
    pub fn new(level: Level, event: &'static str, msg: &'static str) -> Event {
        Event { level, msg: msg.into(), fields: vec![("event", Value::from(event))] }
    }

    /// A line without fields: the text is `msg` as it is (the lines the
    /// servers printed of their own before the library said them).
    pub fn line(level: Level, msg: String) -> Event {
        Event { level, msg: msg.into(), fields: Vec::new() }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Event {
        self.fields.push((key, value.into()));
        self
    }

    /// The text line: the message, then ` key=value` for each field.
    pub fn text(&self) -> String {
        let mut out = self.msg.to_string();
        for (k, v) in &self.fields {
            match v {
                Value::String(s) => out.push_str(&format!(" {k}={s}")),
                v => out.push_str(&format!(" {k}={v}")),
            }
        }
        out
    }

    /// The JSON line ([`log_line`]) at `unix_ms`.
    pub fn json(&self, unix_ms: u64) -> String {
        log_line(self.level, &self.msg, &self.fields, unix_ms)
    }
}

/// A host's printer of [`Event`]s: called on the thread whose call caused
/// the event, so it must be quick (one write) and thread-safe.
pub type LogHook = std::sync::Arc<dyn Fn(&Event) + Send + Sync>;

/// Where the library's events go: the host's hook, or nowhere.
#[derive(Default)]
pub(crate) struct Sink(std::sync::RwLock<Option<LogHook>>);

impl Sink {
    pub(crate) fn set(&self, hook: Option<LogHook>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    pub(crate) fn emit(&self, ev: Event) {
        let hook = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(hook) = hook {
            // A line is not worth a request: a panicking printer is ignored.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&ev)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(timestamp(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
    }

    #[test]
    fn lines() {
        assert_eq!(
            log_line(Level::Warn, "a \"q\"\n", &[("n", Value::from(3)), ("msg", Value::from("x"))], 0),
            r#"{"ts":"1970-01-01T00:00:00.000Z","level":"warn","msg":"a \"q\"\n","n":3}"#
        );
    }

    #[test]
    fn events() {
        let ev = Event::new(Level::Warn, "gateway_slow_consumer", "gateway session closed: slow consumer")
            .with("bot_id", "b1")
            .with("close_code", 4008);
        assert_eq!(
            ev.text(),
            "gateway session closed: slow consumer event=gateway_slow_consumer bot_id=b1 close_code=4008"
        );
        assert_eq!(
            ev.json(0),
            r#"{"ts":"1970-01-01T00:00:00.000Z","level":"warn","msg":"gateway session closed: slow consumer","event":"gateway_slow_consumer","bot_id":"b1","close_code":4008}"#
        );
    }

    #[test]
    fn a_line_without_fields_is_its_message_alone() {
        // The accept error's line, as the servers printed it of their own.
        let ev = Event::line(Level::Error, "accept failed: x (3 in the last second)".to_string());
        assert_eq!(ev.text(), "accept failed: x (3 in the last second)");
        assert_eq!(
            ev.json(0),
            r#"{"ts":"1970-01-01T00:00:00.000Z","level":"error","msg":"accept failed: x (3 in the last second)"}"#
        );
    }

    #[test]
    fn settings() {
        assert_eq!(Level::from_setting(None), Level::Info);
        assert_eq!(Level::from_setting(Some("WARN")), Level::Warn);
        assert_eq!(Level::from_setting(Some("trace")), Level::Debug);
        assert_eq!(Level::from_setting(Some("botspace=debug")), Level::Info);
        assert_eq!(Level::from_number(0), Some(Level::Error));
        assert_eq!(Level::from_number(4), None);
    }
}
