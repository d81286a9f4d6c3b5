//! A server's operator output, decided once for every server that owns
//! its standard streams (the Rust example server, the C server): which
//! lines the threshold lets through (`BOTSPACE_LOG`, else `RUST_LOG`), on
//! which [`Stream`], as which exact bytes (text, or one JSON object a
//! line). The server only writes what it is given. Nothing here prints.

use botspace::log::{log_line, Event, Level};
use serde_json::Value;

/// Where a server's level setting comes from, strongest first: the first
/// variable that is set is read, even empty ([`level_setting`]).
/// `RUST_LOG` is the fallback every Rust program's operator knows.
pub const LEVEL_VARIABLES: [&str; 2] = ["BOTSPACE_LOG", "RUST_LOG"];

/// [`LEVEL_VARIABLES`] as the servers' usage names them.
pub const LEVEL_SOURCE: &str = "BOTSPACE_LOG, else RUST_LOG";

/// A server's level setting from its environment (`env` reads one
/// variable; `None`: unset): `BOTSPACE_LOG` when set, else `RUST_LOG`,
/// else `None`. Both servers read it so, whatever language hosts them;
/// [`Level::from_setting`] makes it a threshold.
pub fn level_setting(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    LEVEL_VARIABLES.iter().find_map(|k| env(k))
}

/// A block of text lines (the demo's start-up block) as one JSON line:
/// `msg`, and the block's lines, in order and unchanged, in `lines`.
pub fn log_block(level: Level, msg: &str, block: &str, unix_ms: u64) -> String {
    let lines: Vec<Value> = block.lines().map(|l| Value::String(l.into())).collect();
    log_line(level, msg, &[("lines", Value::Array(lines))], unix_ms)
}

/// Where an operator line goes: errors and warnings, which want a look,
/// to stderr; info and debug to stdout. The values are the streams' file
/// descriptors, so a POSIX host may `write(stream as i32, ...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout = 1,
    Stderr = 2,
}

impl Stream {
    /// The stream of a line at `level`.
    pub fn of(level: Level) -> Stream {
        if level <= Level::Warn {
            Stream::Stderr
        } else {
            Stream::Stdout
        }
    }
}

/// Something a server says to its operator, before it is rendered
/// ([`Output::line`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A log line: printed when the threshold lets its level through.
    Log(Level, String),
    /// A start-up block that is output rather than a log line (the demo's
    /// lines, a generated admin secret): printed whatever the threshold,
    /// because it is the only way to learn what it holds. `msg` names it
    /// in JSON; `text` is its lines.
    Block { msg: String, text: String },
}

/// A rendered operator line: the bytes to write (text or JSON, newline
/// included) and the stream to write them to. Writing them is all that is
/// left to the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Print {
    pub stream: Stream,
    pub bytes: Vec<u8>,
}

/// How a server prints its operator lines, decided once for every host:
/// which lines the threshold lets through, on which stream, in which
/// format. Each call takes the host's wall clock (`unix_ms`, for JSON's
/// `ts`) and returns the line to write, or `None` when nothing is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    /// The most detailed level printed ([`Output::from_env`]).
    pub threshold: Level,
    /// `--log-format json`: one JSON object a line ([`log_line`]); else the
    /// text lines as they are.
    pub json: bool,
}

impl Default for Output {
    fn default() -> Self {
        Output::new(false, Level::Info)
    }
}

impl Output {
    /// `const`: a host may keep its output in a `static`.
    pub const fn new(json: bool, threshold: Level) -> Output {
        Output { threshold, json }
    }

    /// A server's output: `json` from `--log-format`, the threshold from
    /// its environment ([`level_setting`], [`Level::from_setting`]).
    pub fn from_env(json: bool, env: &dyn Fn(&str) -> Option<String>) -> Output {
        Output::new(json, Level::from_setting(level_setting(env).as_deref()))
    }

    /// Whether a line at `level` is printed.
    pub fn admits(&self, level: Level) -> bool {
        level <= self.threshold
    }

    /// A line at `level`, on the stream of its level, when the threshold
    /// lets it through. Never pass a secret, a bot token or message text.
    pub fn log(&self, level: Level, msg: &str, unix_ms: u64) -> Option<Print> {
        self.leveled(level, || msg.to_string(), || log_line(level, msg, &[], unix_ms))
    }

    /// One of the library's own lines ([`Event::text`] or [`Event::json`]),
    /// as [`Output::log`] prints a host's.
    pub fn event(&self, ev: &Event, unix_ms: u64) -> Option<Print> {
        self.leveled(ev.level, || ev.text(), || ev.json(unix_ms))
    }

    /// A start-up block, printed whatever the threshold, on stdout: its
    /// lines as they are (trailing newlines made one), or in JSON one line
    /// whose `lines` hold them ([`log_block`], level info). An empty block
    /// prints nothing.
    pub fn block(&self, msg: &str, text: &str, unix_ms: u64) -> Option<Print> {
        let text = text.trim_end_matches('\n');
        if text.is_empty() {
            return None;
        }
        let line = if self.json { log_block(Level::Info, msg, text, unix_ms) } else { text.to_string() };
        Some(Print { stream: Stream::Stdout, bytes: with_newline(line) })
    }

    /// A [`Line`], as [`Output::log`] or [`Output::block`] prints it.
    pub fn line(&self, line: &Line, unix_ms: u64) -> Option<Print> {
        match line {
            Line::Log(level, msg) => self.log(*level, msg, unix_ms),
            Line::Block { msg, text } => self.block(msg, text, unix_ms),
        }
    }

    /// Whether a record of the `log` facade is printed: the library's own
    /// (target `botspace…`) at a level the threshold lets through. Other
    /// crates' records (the PostgreSQL client's server notices, rustls) are
    /// not the operator's business here.
    pub fn admits_record(&self, meta: &log::Metadata<'_>) -> bool {
        meta.target().starts_with("botspace") && self.admits(Level::from_log(meta.level()))
    }

    /// A record of the `log` facade as an operator line, as [`Output::log`]
    /// prints the host's own: what the library logs outside any request (a
    /// database that went away, a migration's leftovers).
    pub fn record(&self, record: &log::Record<'_>, unix_ms: u64) -> Option<Print> {
        if !self.admits_record(record.metadata()) {
            return None;
        }
        self.log(Level::from_log(record.level()), &record.args().to_string(), unix_ms)
    }

    /// The `log` facade's maximum level for this threshold, so records
    /// that would not be printed are not even formatted.
    pub fn max_level(&self) -> log::LevelFilter {
        match self.threshold {
            Level::Error => log::LevelFilter::Error,
            Level::Warn => log::LevelFilter::Warn,
            Level::Info => log::LevelFilter::Info,
            Level::Debug => log::LevelFilter::Debug,
        }
    }

    /// The line of `level` when the threshold lets it through; the text or
    /// the JSON form is rendered only when it is printed.
    fn leveled(&self, level: Level, text: impl FnOnce() -> String, json: impl FnOnce() -> String) -> Option<Print> {
        if !self.admits(level) {
            return None;
        }
        let line = if self.json { json() } else { text() };
        Some(Print { stream: Stream::of(level), bytes: with_newline(line) })
    }
}

fn with_newline(line: String) -> Vec<u8> {
    let mut bytes = line.into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use botspace::log::{Event, Level};

    #[test]
    fn the_level_comes_from_botspace_log_else_rust_log() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(level_setting(&env(&[])), None);
        assert_eq!(level_setting(&env(&[("RUST_LOG", "debug")])).as_deref(), Some("debug"));
        assert_eq!(level_setting(&env(&[("RUST_LOG", "debug"), ("BOTSPACE_LOG", "warn")])).as_deref(), Some("warn"));
        // Set but empty is set: the default, not RUST_LOG's level.
        assert_eq!(level_setting(&env(&[("RUST_LOG", "debug"), ("BOTSPACE_LOG", "")])).as_deref(), Some(""));
        assert_eq!(Output::from_env(true, &env(&[("RUST_LOG", "error")])), Output::new(true, Level::Error));
        assert_eq!(
            Output::from_env(false, &env(&[("BOTSPACE_LOG", "Debug"), ("RUST_LOG", "error")])),
            Output::new(false, Level::Debug)
        );
        assert_eq!(Output::from_env(false, &env(&[("BOTSPACE_LOG", "")])), Output::new(false, Level::Info));
        assert_eq!(Output::from_env(false, &env(&[("RUST_LOG", "botspace=debug")])), Output::new(false, Level::Info));
        assert_eq!(Output::from_env(false, &env(&[("BOTSPACE_LOG_FORMAT", "debug")])), Output::default());
        assert_eq!(LEVEL_SOURCE, LEVEL_VARIABLES.join(", else "));
    }

    fn print(stream: Stream, bytes: &str) -> Option<Print> {
        Some(Print { stream, bytes: bytes.as_bytes().to_vec() })
    }

    #[test]
    fn blocks_in_json() {
        assert_eq!(
            log_block(Level::Info, "demo", "a: 1\nb\n", 1),
            r#"{"ts":"1970-01-01T00:00:00.001Z","level":"info","msg":"demo","lines":["a: 1","b"]}"#
        );
    }

    #[test]
    fn text_lines_go_to_their_levels_stream_up_to_the_threshold() {
        let out = Output::new(false, Level::Warn);
        assert_eq!(out.log(Level::Error, "cannot listen on x", 5), print(Stream::Stderr, "cannot listen on x\n"));
        // The threshold's own level is printed; the next one is not.
        assert_eq!(out.log(Level::Warn, "w", 5), print(Stream::Stderr, "w\n"));
        assert_eq!(out.log(Level::Info, "botspace ready", 5), None);
        let out = Output::new(false, Level::Info);
        assert_eq!(out.log(Level::Info, "botspace ready", 5), print(Stream::Stdout, "botspace ready\n"));
        assert_eq!(out.log(Level::Debug, "d", 5), None);
        let out = Output::new(false, Level::Debug);
        assert_eq!(out.log(Level::Debug, "d", 5), print(Stream::Stdout, "d\n"));
        let out = Output::new(false, Level::Error);
        assert_eq!(out.log(Level::Error, "e", 5), print(Stream::Stderr, "e\n"));
        assert_eq!(out.log(Level::Warn, "w", 5), None);
        assert_eq!(Output::default(), Output::new(false, Level::Info));
        assert_eq!((Stream::Stdout as i32, Stream::Stderr as i32), (1, 2), "the file descriptors");
    }

    #[test]
    fn json_lines_carry_the_hosts_clock() {
        let out = Output::new(true, Level::Info);
        assert_eq!(
            out.log(Level::Warn, "listening for notifications failed", 1_000),
            print(
                Stream::Stderr,
                "{\"ts\":\"1970-01-01T00:00:01.000Z\",\"level\":\"warn\",\"msg\":\"listening for notifications failed\"}\n"
            )
        );
        assert_eq!(
            out.log(Level::Info, "botspace ready", 0),
            print(
                Stream::Stdout,
                "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"info\",\"msg\":\"botspace ready\"}\n"
            )
        );
        assert_eq!(out.log(Level::Debug, "d", 0), None);
    }

    #[test]
    fn a_block_is_printed_whatever_the_threshold_on_stdout() {
        for threshold in [Level::Error, Level::Debug] {
            let text = Output::new(false, threshold);
            assert_eq!(text.block("demo", "demo bot: b1\ntry:\n\n", 9), print(Stream::Stdout, "demo bot: b1\ntry:\n"));
            assert_eq!(text.block("secret", "admin secret: ab", 9), print(Stream::Stdout, "admin secret: ab\n"));
            let json = Output::new(true, threshold);
            assert_eq!(
                json.block("demo", "demo bot: b1\ntry:\n", 9),
                print(
                    Stream::Stdout,
                    "{\"ts\":\"1970-01-01T00:00:00.009Z\",\"level\":\"info\",\"msg\":\"demo\",\"lines\":[\"demo bot: b1\",\"try:\"]}\n"
                )
            );
            // Nothing to show: no line, not an empty one.
            assert_eq!((text.block("demo", "\n", 9), json.block("demo", "", 9)), (None, None));
        }
        let block = Line::Block { msg: "m".into(), text: "a\n".into() };
        assert_eq!(Output::new(false, Level::Error).line(&block, 0), print(Stream::Stdout, "a\n"));
        let log = Line::Log(Level::Info, "i".into());
        assert_eq!(Output::new(false, Level::Info).line(&log, 0), print(Stream::Stdout, "i\n"));
        assert_eq!(Output::new(false, Level::Warn).line(&log, 0), None);
    }

    #[test]
    fn an_event_is_printed_as_a_hosts_line() {
        let ev = Event::new(Level::Warn, "connection_evicted", "connection evicted at the connection limit");
        assert_eq!(
            Output::new(false, Level::Warn).event(&ev, 0),
            print(Stream::Stderr, "connection evicted at the connection limit event=connection_evicted\n")
        );
        assert_eq!(
            Output::new(true, Level::Info).event(&ev, 2),
            print(
                Stream::Stderr,
                "{\"ts\":\"1970-01-01T00:00:00.002Z\",\"level\":\"warn\",\"msg\":\"connection evicted at the connection limit\",\"event\":\"connection_evicted\"}\n"
            )
        );
        assert_eq!(Output::new(true, Level::Error).event(&ev, 2), None);
        let rotated = Event::new(Level::Info, "bot_token_rotated", "bot token rotated").with("bot_id", "b1");
        assert_eq!(
            Output::new(false, Level::Info).event(&rotated, 0),
            print(Stream::Stdout, "bot token rotated event=bot_token_rotated bot_id=b1\n")
        );
    }

    #[test]
    fn the_librarys_log_records_are_lines_and_other_crates_are_not() {
        let out = Output::new(true, Level::Warn);
        assert_eq!(
            out.record(
                &log::Record::builder()
                    .args(format_args!("botspace: db gone"))
                    .level(log::Level::Warn)
                    .target("botspace::service")
                    .build(),
                0
            ),
            print(
                Stream::Stderr,
                "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"warn\",\"msg\":\"botspace: db gone\"}\n"
            )
        );
        let other = log::Record::builder().level(log::Level::Error).target("rustls").build();
        assert_eq!(out.record(&other, 0), None);
        assert!(!out.admits_record(other.metadata()));
        let info = log::Record::builder().level(log::Level::Info).target("botspace").build();
        assert_eq!(out.record(&info, 0), None, "below the threshold");
        let trace = log::Record::builder().level(log::Level::Trace).target("botspace").build();
        assert!(Output::new(false, Level::Debug).admits_record(trace.metadata()), "trace counts as debug");
        assert_eq!(out.max_level(), log::LevelFilter::Warn);
        assert_eq!(Output::new(false, Level::Debug).max_level(), log::LevelFilter::Debug);
        assert_eq!(Level::from_log(log::Level::Trace), Level::Debug);
    }
}
