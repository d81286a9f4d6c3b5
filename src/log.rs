//! Operator log lines: one shape for every host.
//!
//! A host decides what is worth a line and owns the clock; this module
//! decides the level names, which levels a setting lets through, and the
//! JSON line (`{"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"…",…}`),
//! so the Rust and the C server emit the same thing.

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

/// A block of text lines (the demo's start-up block) as one JSON line:
/// `msg`, and the block's lines, in order and unchanged, in `lines`.
pub fn log_block(level: Level, msg: &str, block: &str, unix_ms: u64) -> String {
    let lines: Vec<Value> = block.lines().map(|l| Value::String(l.into())).collect();
    log_line(level, msg, &[("lines", Value::Array(lines))], unix_ms)
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
        assert_eq!(
            log_block(Level::Info, "demo", "a: 1\nb\n", 1),
            r#"{"ts":"1970-01-01T00:00:00.001Z","level":"info","msg":"demo","lines":["a: 1","b"]}"#
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
