//! The example server's operator lines: which are printed, where and as
//! which bytes is the library's ([`botspace_runtime::output::Output`], the C server's
//! too); this writes them, and never panics doing it.
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

use botspace::log::{Event, Level};
use botspace_runtime::output::{Line, Output, Print, Stream};
use std::io::Write as _;
use std::sync::RwLock;

static OUTPUT: RwLock<Output> = RwLock::new(Output::new(false, Level::Info));

fn output() -> Output {
    *OUTPUT.read().unwrap_or_else(|e| e.into_inner())
}

/// Sets how the lines are printed (`--log-format`, the level from the
/// environment by the library's rule, [`Output::from_env`]) and installs the `log`
/// facade's logger, so what the library logs (a database that went away)
/// is printed as the server's own lines are.
pub fn configure(out: Output) {
    *OUTPUT.write().unwrap_or_else(|e| e.into_inner()) = out;
    // Fails only when a logger is installed already (a host of its own).
    if log::set_logger(&Facade).is_ok() {
        log::set_max_level(out.max_level());
    }
}

/// The `log` facade's logger: a process has one, so it is installed here;
/// which records become which lines is [`Output::record`].
struct Facade;

impl log::Log for Facade {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        output().admits_record(m)
    }

    fn log(&self, record: &log::Record<'_>) {
        write(output().record(record, now_ms()));
    }

    fn flush(&self) {}
}

/// The wall clock of JSON's `ts`.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Writes a line the library rendered, whole, ignoring a failed write.
fn write(print: Option<Print>) {
    let Some(p) = print else { return };
    let _ = match p.stream {
        Stream::Stdout => std::io::stdout().lock().write_all(&p.bytes),
        Stream::Stderr => std::io::stderr().lock().write_all(&p.bytes),
    };
}

/// One operator line ([`Output::log`]). Never pass a secret, a bot token
/// or message text.
pub fn log(level: Level, msg: &str) {
    write(output().log(level, msg, now_ms()));
}

/// One of the library's operator lines ([`Output::event`]): the service's
/// log hook.
pub fn event(ev: &Event) {
    write(output().event(ev, now_ms()));
}

/// A start-up block, printed whatever the level ([`Output::block`]).
pub fn block(msg: &str, text: &str) {
    write(output().block(msg, text, now_ms()));
}

/// A line the library made (the start-up lines, [`Output::line`]).
pub fn line(line: &Line) {
    write(output().line(line, now_ms()));
}
