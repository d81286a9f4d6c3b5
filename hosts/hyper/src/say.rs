//! Lines to stdout and stderr that never panic.
//!
//! `println!` panics when stdout is gone (a closed pipe: `failed printing
//! to stdout: Broken pipe`), so a server whose log reader went away would
//! die at its next line, and exit 101 in the middle of a clean stop.
//! These write the line and drop the error: a server's log is not worth
//! its requests. (Rust ignores SIGPIPE, so the write returns `EPIPE`
//! rather than killing the process.)

/// `println!` that ignores a failed write.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!` that ignores a failed write.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

use botspace::log::Level;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);
static THRESHOLD: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets how [`log()`] prints: JSON lines (`--log-format json`) or the text
/// lines, and the most detailed level it prints (the library's reading of
/// `BOTSPACE_LOG`, else `RUST_LOG`). Installs the `log` facade's logger,
/// so what the library logs (a database that went away) is printed as
/// the server's own lines are, at the same threshold.
pub fn configure(json: bool, threshold: Level) {
    JSON.store(json, Ordering::Relaxed);
    THRESHOLD.store(threshold as u8, Ordering::Relaxed);
    // Fails only when a logger is installed already (a host of its own).
    if log::set_logger(&Facade).is_ok() {
        log::set_max_level(match threshold {
            Level::Error => log::LevelFilter::Error,
            Level::Warn => log::LevelFilter::Warn,
            Level::Info => log::LevelFilter::Info,
            Level::Debug => log::LevelFilter::Debug,
        });
    }
}

/// The `log` facade's records of the library (target `botspace…`), as
/// [`log()`] lines. Other crates' records (the PostgreSQL client's server
/// notices, rustls) are not the operator's business here.
struct Facade;

impl log::Log for Facade {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("botspace") && level_of(m.level()) as u8 <= THRESHOLD.load(Ordering::Relaxed)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            log(level_of(record.level()), &record.args().to_string());
        }
    }

    fn flush(&self) {}
}

fn level_of(l: log::Level) -> Level {
    match l {
        log::Level::Error => Level::Error,
        log::Level::Warn => Level::Warn,
        log::Level::Info => Level::Info,
        log::Level::Debug | log::Level::Trace => Level::Debug,
    }
}

/// Whether [`log()`] prints JSON lines.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One operator line: info and debug on stdout, warn and error on stderr;
/// the text as it is, or with `--log-format json` the library's JSON line.
/// Never pass a secret, a bot token or message text.
pub fn log(level: Level, msg: &str) {
    if level as u8 > THRESHOLD.load(Ordering::Relaxed) {
        return;
    }
    let line = if json() { botspace::log::log_line(level, msg, &[], now_ms()) } else { msg.to_string() };
    if level <= Level::Warn {
        crate::errln!("{line}");
    } else {
        crate::outln!("{line}");
    }
}

/// One of the library's operator lines ([`botspace::log::Event`]), as
/// [`log()`] prints its own.
pub fn event(ev: &botspace::log::Event) {
    if ev.level as u8 > THRESHOLD.load(Ordering::Relaxed) {
        return;
    }
    let line = if json() { ev.json(now_ms()) } else { ev.text() };
    if ev.level <= Level::Warn {
        crate::errln!("{line}");
    } else {
        crate::outln!("{line}");
    }
}

/// A start-up block that is output rather than a log line (the demo's
/// lines; the generated admin secret): printed whatever the level, on
/// stdout, as it is, or with `--log-format json` as one JSON line whose
/// `lines` hold the block's lines.
pub fn block(msg: &str, text: &str) {
    if json() {
        crate::outln!("{}", botspace::log::log_block(Level::Info, msg, text, now_ms()));
    } else {
        crate::outln!("{}", text.trim_end_matches('\n'));
    }
}
