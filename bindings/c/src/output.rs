//! The C ABI of a server's operator output (`botspace_runtime::output::Output`) and
//! its start-up lines (`botspace_runtime::options::startup`): whether a
//! line is printed, on which stream, as which exact bytes (text or JSON,
//! newline included), and what a server says once its ports are bound.
//! The host writes the bytes it is given to the stream it is told, and
//! keeps the clock (`unix_ms`, JSON's `ts`).

use crate::boundary::{input, Handle, UserData};
use crate::bytes::botspace_bytes;
use crate::service::botspace_service;
use crate::status::{botspace_status, fail};
use botspace::log::Level;
use botspace_runtime::output::{Line, Output, Print, Stream};
use std::ffi::{c_char, c_void};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where an operator line goes: errors and warnings to stderr, info,
/// debug and the start-up blocks to stdout. The values are the streams'
/// file descriptors (`write(stream, ...)` on POSIX).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum botspace_stream {
    Stdout = 1,
    Stderr = 2,
}

impl From<Stream> for botspace_stream {
    fn from(s: Stream) -> Self {
        match s {
            Stream::Stdout => botspace_stream::Stdout,
            Stream::Stderr => botspace_stream::Stderr,
        }
    }
}

/// How a server prints its operator lines: the most detailed level it
/// prints (`threshold`: 0 error, 1 warn, 2 info, 3 debug; a line of level
/// `n` is printed when `n` <= `threshold`) and whether it prints JSON
/// lines (`--log-format json`) or the text lines. Plain data: fill it
/// with `botspace_output_from_setting`, or by hand; copy it freely. A
/// threshold outside 0..=3 makes the calls that take it
/// `BOTSPACE_STATUS_INVALID_ARGUMENT`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct botspace_output {
    pub threshold: i32,
    pub json: bool,
}

/// The library's rule from the host's struct; `InvalidArgument` for a
/// threshold that is no level.
fn rule(o: &botspace_output) -> Result<Output, botspace_status> {
    match Level::from_number(o.threshold) {
        Some(threshold) => Ok(Output::new(o.json, threshold)),
        None => Err(fail(botspace_status::InvalidArgument, format!("threshold {} is not 0 to 3", o.threshold))),
    }
}

/// Writes a rendered line (or `{NULL, 0}` with the level's stream for
/// none) to the host's outputs.
fn put(
    print: Option<Print>,
    none: Stream,
    out_stream: &mut MaybeUninit<botspace_stream>,
    out_line: &mut MaybeUninit<botspace_bytes>,
) {
    let (stream, bytes) = match print {
        Some(p) => (p.stream, botspace_bytes::from_vec(p.bytes)),
        None => (none, botspace_bytes::EMPTY),
    };
    out_stream.write(stream.into());
    out_line.write(bytes);
}

/// The wall clock of JSON's `ts` for the lines the library prints of its
/// own (events, `log` records): no host call carries a clock there.
fn wall_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Fills `*out_output`: `json` as given, the threshold the level setting
/// `level_setting[0..level_setting_len]` names (the value of
/// `BOTSPACE_LOG`; NULL for unset), read as `botspace_log_level` reads it.
///
/// # Safety
/// When non-NULL, `level_setting` must point at `level_setting_len`
/// readable bytes; `out_output` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_from_setting(
    json: bool,
    level_setting: *const c_char,
    level_setting_len: usize,
    out_output: *mut botspace_output,
) -> botspace_status {
    ffi_boundary!({
        let out_output = arg!(out out_output);
        let setting =
            if level_setting.is_null() { None } else { Some(arg!(text level_setting, level_setting_len).into_owned()) };
        let threshold = Level::from_setting(setting.as_deref()) as i32;
        out_output.write(botspace_output { threshold, json });
        botspace_status::Ok
    })
}

/// Fills `*out_output`: `json` as given (`--log-format json`), the
/// threshold from the process's environment by the library's rule, the
/// Rust server's too: `BOTSPACE_LOG` when set (even empty), else
/// `RUST_LOG`, read as `botspace_log_level` reads a setting; neither set:
/// info. Call it before starting threads that may change the environment.
///
/// # Safety
/// `out_output` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_from_env(json: bool, out_output: *mut botspace_output) -> botspace_status {
    ffi_boundary!({
        let out_output = arg!(out out_output);
        let out = Output::from_env(json, &|k| std::env::var(k).ok());
        out_output.write(botspace_output { threshold: out.threshold as i32, json: out.json });
        botspace_status::Ok
    })
}

/// `botspace_output_server_line`: `botspace ready`, once the server
/// serves (its start-up output ends there).
pub const BOTSPACE_SERVER_LINE_READY: u32 = 0;
/// `botspace_output_server_line`: `botspace stopping`, when a stop
/// signal begins the drain.
pub const BOTSPACE_SERVER_LINE_STOPPING: u32 = 1;
/// `botspace_output_server_line`: `botspace stopped`, the last line.
pub const BOTSPACE_SERVER_LINE_STOPPED: u32 = 2;

/// One of a server's lines about its own life, the library's words (the
/// Rust server prints the same): `which` is `BOTSPACE_SERVER_LINE_READY`,
/// `_STOPPING` or `_STOPPED`; for `_STOPPED`, `cut` is how many
/// connections the drain's end cut (0: none; then the line is `botspace
/// stopped`, else `botspace stopped (N connections cut; every answered
/// request was already committed)`), ignored for the others. Rendered as
/// `botspace_output_log` renders an info line at `unix_ms`: `{NULL, 0}`
/// when the threshold drops it. `InvalidArgument` for another `which`.
/// Free `out_line` with `botspace_bytes_free`. Thread-safe.
///
/// # Safety
/// `output` must point at a readable `botspace_output`; both outputs must
/// be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_server_line(
    output: *const botspace_output,
    which: u32,
    cut: u64,
    unix_ms: u64,
    out_stream: *mut botspace_stream,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    use botspace_runtime::options::{ready_line, stopped_line, stopping_line};
    ffi_boundary!({
        let out_stream = arg!(out out_stream);
        let out_line = arg!(out out_line);
        let out = match rule(arg!(ref output)) {
            Ok(o) => o,
            Err(s) => return s,
        };
        let line = match which {
            BOTSPACE_SERVER_LINE_READY => ready_line(),
            BOTSPACE_SERVER_LINE_STOPPING => stopping_line(),
            BOTSPACE_SERVER_LINE_STOPPED => stopped_line((cut > 0).then(|| usize::try_from(cut).unwrap_or(usize::MAX))),
            n => return fail(botspace_status::InvalidArgument, format!("server line {n} is not 0 to 2")),
        };
        put(out.line(&line, unix_ms), Stream::Stdout, out_stream, out_line);
        botspace_status::Ok
    })
}

/// Who prints the library's `log` records (what it says outside any
/// request and outside any service: a PostgreSQL store that went away, a
/// migration's leftovers while a service opens): the host's callback and
/// its output, or, until a host sets one, warnings and errors as text
/// lines on stderr.
#[derive(Clone, Copy)]
struct RecordPrinter {
    out: Output,
    callback: unsafe extern "C" fn(*mut c_void, botspace_stream, *const u8, usize),
    user_data: UserData,
}

static RECORD_PRINTER: std::sync::RwLock<Option<RecordPrinter>> = std::sync::RwLock::new(None);

/// Without a host's callback: what a C host got before it could set one
/// (warnings and errors, text, on stderr), rendered by the same rule.
const RECORDS_DEFAULT: Output = Output::new(false, Level::Warn);

fn record_printer() -> Option<RecordPrinter> {
    *RECORD_PRINTER.read().unwrap_or_else(|e| e.into_inner())
}

/// The `log` facade's logger of the C ABI: a process has one, and a C
/// host has no Rust logger to give, so the library installs this one;
/// which records become which lines is `Output::record`, as in the Rust
/// server.
struct Records;

impl Records {
    /// Installs it unless a logger is installed already (by a Rust program
    /// that links this library, whose logger then prints them); whether
    /// this one is the process's.
    fn install() -> bool {
        static OURS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OURS.get_or_init(|| {
            let ours = log::set_logger(&Records).is_ok();
            if ours {
                log::set_max_level(record_printer().map_or(RECORDS_DEFAULT, |p| p.out).max_level());
            }
            ours
        })
    }
}

impl log::Log for Records {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        record_printer().map_or(RECORDS_DEFAULT, |p| p.out).admits_record(m)
    }

    fn log(&self, record: &log::Record<'_>) {
        // Copied out of the lock: the host's callback may set another.
        match record_printer() {
            Some(p) => {
                if let Some(line) = p.out.record(record, wall_ms()) {
                    // SAFETY: the host's callback, with bytes valid for the call.
                    unsafe {
                        (p.callback)(p.user_data.get(), line.stream.into(), line.bytes.as_ptr(), line.bytes.len())
                    };
                }
            }
            None => {
                if let Some(line) = RECORDS_DEFAULT.record(record, wall_ms()) {
                    use std::io::Write as _;
                    // A line is not worth a request: a failed write is dropped.
                    let _ = match line.stream {
                        Stream::Stdout => std::io::stdout().lock().write_all(&line.bytes),
                        Stream::Stderr => std::io::stderr().lock().write_all(&line.bytes),
                    };
                }
            }
        }
    }

    fn flush(&self) {}
}

/// Installs the C ABI's `log` facade logger (`botspace_service_open` and
/// `botspace_output_set_records_callback` do, before anything is logged).
pub(crate) fn install_record_logger() {
    let _ = Records::install();
}

/// Registers `callback` as the process's printer of the library's `log`
/// records: what it says outside any request and any service (a
/// PostgreSQL store that went away, what a migration left while a
/// service opens), rendered by `*output` (copied; JSON's `ts` from the
/// system's wall clock) and given to `callback` only when the threshold
/// lets it through, as `botspace_service_set_output_callback` gives a
/// service's lines; only the library's records (not its dependencies').
/// Set it before `botspace_service_open`, so a migration's lines are
/// printed by it. Until one is set, or after NULL removes it (`output`
/// may then be NULL), warnings and errors are text lines on stderr.
/// `user_data` is passed back unchanged and must stay valid until the
/// callback is replaced or removed. The callback may be called on any
/// thread, several at once; it must be quick (one write). Thread-safe.
///
/// # Safety
/// `output`, unless `callback` is NULL, must point at a readable
/// `botspace_output`; `callback` must be safe to call from any thread
/// with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_set_records_callback(
    output: *const botspace_output,
    callback: botspace_output_callback,
    user_data: *mut c_void,
) -> botspace_status {
    ffi_boundary!({
        let printer = match callback {
            None => None,
            Some(cb) => match rule(arg!(ref output)) {
                Ok(out) => Some(RecordPrinter { out, callback: cb, user_data: UserData(user_data) }),
                Err(s) => return s,
            },
        };
        *RECORD_PRINTER.write().unwrap_or_else(|e| e.into_inner()) = printer;
        // Records the threshold drops are not even formatted; another
        // program's logger keeps its own maximum.
        if Records::install() {
            log::set_max_level(printer.map_or(RECORDS_DEFAULT, |p| p.out).max_level());
        }
        botspace_status::Ok
    })
}

/// One operator line at `level` (0 error … 3 debug) saying
/// `msg[0..msg_len]`: when `output`'s threshold lets it through,
/// `*out_line` gets the bytes to write (the text, or the JSON line at
/// `unix_ms`, the host's wall clock; newline included) and `*out_stream`
/// the stream; else `*out_line` is `{NULL, 0}`: nothing to write. Free
/// `out_line` with `botspace_bytes_free`. `InvalidArgument` for a level or
/// threshold outside 0..=3. Never pass a secret, a bot token or message
/// text. Thread-safe.
///
/// # Safety
/// `output` must point at a readable `botspace_output`; `msg` at `msg_len`
/// readable bytes (NULL with a length of 0 is empty); both outputs must be
/// writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_log(
    output: *const botspace_output,
    level: i32,
    msg: *const c_char,
    msg_len: usize,
    unix_ms: u64,
    out_stream: *mut botspace_stream,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let out_stream = arg!(out out_stream);
        let out_line = arg!(out out_line);
        let out = match rule(arg!(ref output)) {
            Ok(o) => o,
            Err(s) => return s,
        };
        let Some(level) = Level::from_number(level) else {
            return fail(botspace_status::InvalidArgument, format!("log level {level} is not 0 to 3"));
        };
        let msg = arg!(text msg, msg_len);
        put(out.log(level, &msg, unix_ms), Stream::of(level), out_stream, out_line);
        botspace_status::Ok
    })
}

/// A start-up block that is output rather than a log line (the demo's
/// lines, `botspace_service_demo_start`): printed whatever the threshold,
/// on stdout: `text[0..text_len]`'s lines as they are, or with JSON one
/// line at `unix_ms` named `msg` whose `lines` hold them (newline
/// included). An empty block gives `{NULL, 0}`: nothing to write. Free
/// `out_line` with `botspace_bytes_free`. Thread-safe.
///
/// # Safety
/// `output` must point at a readable `botspace_output`; `msg` and `text` at
/// `msg_len` and `text_len` readable bytes (NULL with a length of 0 is
/// empty); both outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_output_block(
    output: *const botspace_output,
    msg: *const c_char,
    msg_len: usize,
    text: *const c_char,
    text_len: usize,
    unix_ms: u64,
    out_stream: *mut botspace_stream,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let out_stream = arg!(out out_stream);
        let out_line = arg!(out out_line);
        let out = match rule(arg!(ref output)) {
            Ok(o) => o,
            Err(s) => return s,
        };
        let (msg, text) =
            match unsafe { (input(msg.cast::<u8>(), msg_len, "msg"), input(text.cast(), text_len, "text")) } {
                (Ok(m), Ok(t)) => (String::from_utf8_lossy(m), String::from_utf8_lossy(t)),
                (Err(s), _) | (_, Err(s)) => return s,
            };
        put(out.block(&msg, &text, unix_ms), Stream::Stdout, out_stream, out_line);
        botspace_status::Ok
    })
}

/// Receives one of the library's operator lines, rendered by the
/// `botspace_output` given with it and let through by its threshold: the
/// bytes to write to `stream` (newline included), valid only during the
/// call. Called on the thread whose botspace call caused the line,
/// possibly several at once; it must be quick (one write) and must not
/// call `botspace_service_free` on this service.
pub type botspace_output_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, stream: botspace_stream, line: *const u8, line_len: usize)>;

/// Registers `callback` as the service's printer of the library's own
/// operator lines (a connection evicted, a request timed out, a gateway
/// session closed for a slow consumer, a token rotated): each is rendered
/// by `*output` (copied; JSON's `ts` from the system's wall clock) and
/// given to `callback` only when the threshold lets it through. A service
/// has one printer: this replaces a callback set with
/// `botspace_service_set_log_callback`, and that one replaces this. A
/// NULL `callback` removes it (`output` may then be NULL). `user_data` is
/// passed back unchanged and must stay valid until the callback is
/// replaced or removed, or the service freed. Thread-safe.
///
/// # Safety
/// `service` must be a live handle; `output`, unless `callback` is NULL,
/// must point at a readable `botspace_output`; `callback` must be safe to
/// call from any thread with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn botspace_service_set_output_callback(
    service: *const botspace_service,
    output: *const botspace_output,
    callback: botspace_output_callback,
    user_data: *mut c_void,
) -> botspace_status {
    ffi_boundary!({
        let service = arg!(ref service);
        let svc = &service.svc;
        let Some(cb) = callback else {
            svc.set_log_hook(None);
            return botspace_status::Ok;
        };
        let out = match rule(arg!(ref output)) {
            Ok(o) => o,
            Err(s) => return s,
        };
        let ud = UserData(user_data);
        svc.set_log_hook(Some(Arc::new(move |ev: &botspace::log::Event| {
            if let Some(p) = out.event(ev, wall_ms()) {
                // SAFETY: the host's callback, with bytes valid for the call.
                unsafe { cb(ud.get(), p.stream.into(), p.bytes.as_ptr(), p.bytes.len()) };
            }
        })));
        botspace_status::Ok
    })
}

/// A server's start-up lines once its ports are bound
/// (`botspace_startup_new`), handed out one at a time by
/// `botspace_startup_next_line`, and the URLs its demo is given
/// (`botspace_startup_base_urls`). Released by `botspace_startup_free`.
/// Not thread-safe: one thread at a time.
pub struct botspace_startup {
    pub(crate) lines: Vec<Line>,
    pub(crate) next: usize,
    pub(crate) base: String,
    pub(crate) admin_base: String,
}

impl Handle for botspace_startup {}

/// A socket address as `getsockname(2)` gives it (`struct sockaddr_in` or
/// `struct sockaddr_in6`, its bytes): passed as the bytes the host
/// already has, so it formats nothing and the wildcard test is made on the
/// address itself, not on one of its spellings.
///
/// Empty bytes are refused.
#[cfg(unix)]
fn socket_addr(b: &[u8], name: &str) -> Result<SocketAddr, botspace_status> {
    use std::mem::size_of;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    let bad = |what: String| Err(fail(botspace_status::InvalidArgument, format!("argument `{name}`: {what}")));
    if b.len() < size_of::<libc::sockaddr>() {
        return bad(format!("{} bytes are no socket address", b.len()));
    }
    // SAFETY: at least a sockaddr's bytes; read unaligned (the host's
    // buffer may be any bytes).
    let family = i32::from(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<libc::sockaddr>()) }.sa_family);
    match family {
        libc::AF_INET if b.len() >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: a sockaddr_in's bytes, read unaligned.
            let a = unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 if b.len() >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: a sockaddr_in6's bytes, read unaligned.
            let a = unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                u32::from_be(a.sin6_flowinfo),
                a.sin6_scope_id,
            )))
        }
        f => bad(format!("family {f} in {} bytes is not an IPv4 or IPv6 socket address", b.len())),
    }
}

#[cfg(not(unix))]
fn socket_addr(_b: &[u8], name: &str) -> Result<SocketAddr, botspace_status> {
    Err(fail(botspace_status::InvalidArgument, format!("argument `{name}`: socket addresses are read on POSIX only")))
}

/// Makes the start-up lines of a server whose public listener is bound at
/// `public_addr` and, unless `admin_addr` is NULL with a length of 0, its
/// admin listener (`--admin-addr`) at `admin_addr`: each a `struct
/// sockaddr_in` or `sockaddr_in6` as `getsockname(2)` wrote it, with its
/// length. `generated_secret[0..generated_secret_len]` is the admin
/// secret the server generated (`botspace_server_options_open_service`
/// gave it); NULL with 0 when one was given, which is never printed.
/// `manual_clock`: `--manual-clock`. The lines, in order: `botspace
/// listening on http://HOST:PORT`, `botspace admin listening on
/// http://HOST:PORT`, the `admin secret: …` block, `clock: manual (moves
/// only through /admin/advanceClock)`. `InvalidArgument` for bytes that
/// are no IPv4 or IPv6 socket address. Release it with
/// `botspace_startup_free`.
///
/// # Safety
/// Each input must point at its length's readable bytes (NULL with a
/// length of 0 is empty; an empty `public_addr` is refused);
/// `out_startup` must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_startup_new(
    public_addr: *const c_void,
    public_addr_len: usize,
    admin_addr: *const c_void,
    admin_addr_len: usize,
    generated_secret: *const c_char,
    generated_secret_len: usize,
    manual_clock: bool,
    out_startup: *mut *mut botspace_startup,
) -> botspace_status {
    ffi_boundary!({
        let out_startup = arg!(out out_startup);
        let public = match socket_addr(arg!(bytes public_addr, public_addr_len), "public_addr") {
            Ok(a) => a,
            Err(s) => return s,
        };
        let admin = if admin_addr_len == 0 {
            None
        } else {
            match socket_addr(arg!(bytes admin_addr, admin_addr_len), "admin_addr") {
                Ok(a) => Some(a),
                Err(s) => return s,
            }
        };
        let secret = arg!(text generated_secret, generated_secret_len);
        let secret = (!secret.is_empty()).then_some(&*secret);
        let s = botspace_runtime::options::startup(public, admin, secret, manual_clock);
        let handle = botspace_startup { lines: s.lines, next: 0, base: s.base, admin_base: s.admin_base };
        out_startup.write(handle.into_raw());
        botspace_status::Ok
    })
}

/// The next start-up line `*output` prints, rendered at `unix_ms` (the
/// host's wall clock), to write to `*out_stream`: lines its threshold
/// drops are passed over; `{NULL, 0}` when no line is left. Free
/// `out_line` with `botspace_bytes_free`.
///
/// # Safety
/// `startup` must be a live handle used by this thread only; `output` must
/// point at a readable `botspace_output`; both outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_startup_next_line(
    startup: *mut botspace_startup,
    output: *const botspace_output,
    unix_ms: u64,
    out_stream: *mut botspace_stream,
    out_line: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let out_stream = arg!(out out_stream);
        let out_line = arg!(out out_line);
        let st = arg!(mut startup);
        let out = match rule(arg!(ref output)) {
            Ok(o) => o,
            Err(s) => return s,
        };
        let mut print = None;
        while print.is_none() && st.next < st.lines.len() {
            print = out.line(&st.lines[st.next], unix_ms);
            st.next += 1;
        }
        put(print, Stream::Stdout, out_stream, out_line);
        botspace_status::Ok
    })
}

/// Writes the demo's URLs (for `botspace_service_demo_start`):
/// `*out_base`, `http://HOST:PORT` a local client reaches the public
/// listener at (a wildcard address, `0.0.0.0` or `[::]`, becomes the
/// loopback one), and `*out_admin_base`, where `/admin/` is served (the
/// admin listener's, else the same). Free both with `botspace_bytes_free`.
///
/// # Safety
/// `startup` must be a live handle used by this thread only; both outputs
/// must be writable.
#[no_mangle]
pub unsafe extern "C" fn botspace_startup_base_urls(
    startup: *const botspace_startup,
    out_base: *mut botspace_bytes,
    out_admin_base: *mut botspace_bytes,
) -> botspace_status {
    ffi_boundary!({
        let out_base = arg!(out out_base);
        let out_admin_base = arg!(out out_admin_base);
        let st = arg!(ref startup);
        out_base.write(botspace_bytes::from_vec(st.base.clone().into_bytes()));
        out_admin_base.write(botspace_bytes::from_vec(st.admin_base.clone().into_bytes()));
        botspace_status::Ok
    })
}

/// Releases a start-up handle and sets `*startup` to NULL; accepts NULL and
/// a pointer to NULL.
///
/// # Safety
/// `*startup` must be NULL or a handle from `botspace_startup_new` not
/// released through another copy of the pointer.
#[no_mangle]
pub unsafe extern "C" fn botspace_startup_free(startup: *mut *mut botspace_startup) {
    // SAFETY: the contract above.
    unsafe { Handle::free(startup) }
}
