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
