//! botspace over real TCP, with the standard library only.
//!
//! ```text
//! cargo run --release --example server -- [--addr 127.0.0.1:8080] [--db botspace.db]
//!     [--admin-secret S | --admin-secret-file PATH] [--operational-key HEX64]
//!     [--admin-addr HOST:PORT] [--max-connections N] [--request-timeout SECS] [--manual-clock]
//! ```
//!
//! One thread per TCP connection. HTTP/1.1 keep-alive and pipelining are
//! driven by [`Service::frame_request`]; pipelined requests that arrive
//! together are answered with one group commit ([`Service::handle_batch`]).
//! `GET /bot/gateway` upgrades the connection to the bot gateway: the
//! connection's thread owns a [`GatewayConnection`], a helper thread reads
//! the socket, and the service's wake hook tells the owner when its bot has
//! new events. See `docs/server.md`.
//!
//! The first line printed is always `botspace listening on http://HOST:PORT`
//! (the bound address, so `--addr 127.0.0.1:0` works); with `--admin-addr`
//! the next is `botspace admin listening on http://HOST:PORT`; the startup
//! output ends with the line `botspace ready`.

use botspace::gateway::CLOSE_SLOW_CONSUMER;
use botspace::{ApiError, ClockKind, Config, Framing, GatewayConnection, GatewayEvent, RequestFramer, Service};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: server [--addr HOST:PORT] [--db PATH] [--admin-secret S | --admin-secret-file PATH]
              [--operational-key HEX64] [--admin-addr HOST:PORT] [--max-connections N]
              [--request-timeout SECS] [--gateway-poll-interval-ms MS] [--manual-clock]

  --addr HOST:PORT          address to listen on (default 127.0.0.1:8080; port 0 picks a free port)
  --db PATH|URL             SQLite database file, :memory:, or a postgres:// URL that
                            several servers share (default botspace.db)
  --admin-secret S          secret for Authorization: Admin <S> on /admin/ (at least 16 characters);
                            visible in the process list: prefer --admin-secret-file or
                            BOTSPACE_ADMIN_SECRET; with none of them, one is generated
  --admin-secret-file PATH  read the admin secret from the first line of PATH
  --operational-key HEX64   64 hex digits that seal official bots' operational token copy;
                            BOTSPACE_OPERATIONAL_KEY may replace it
  --admin-addr HOST:PORT    serve the host API (/admin/*) on this second address only; /admin/* on
                            --addr, and everything but /admin/* here, is then 404 method_not_found
  --max-connections N       most connections at once (default: the file limit, raised to
                            its hard limit at start, less 64 for the server's own files);
                            beyond it the connection waiting longest for a request is
                            closed, or with none the new one gets 503 and is closed
  --request-timeout SECS    a request must arrive whole within SECS of its first byte
                            (default 30), else 408 and close
  --idle-timeout SECS       a keep-alive connection with nothing to read for SECS is
                            closed (default 120)
  --gateway-poll-interval-ms MS
                            PostgreSQL: how often gateway sessions look at the database for
                            other servers' commits (default 50; 10..60000). Notifications
                            (LISTEN/NOTIFY) wake them sooner; this is the fallback
  --manual-clock            time moves only through /admin/advanceClock (for tests)";

/// How often an idle thread looks at the stop flag (and a gateway
/// connection at the clock, even when its next deadline is further away).
const TICK: Duration = Duration::from_secs(1);
/// The same for gateway connections under the manual clock: its deadlines
/// cannot be slept on (time jumps with /admin/advanceClock), so this bounds
/// how late a heartbeat timeout is noticed after the clock moved.
const MANUAL_CLOCK_TICK: Duration = Duration::from_millis(250);
/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// A request's head and body must arrive within this long of its first
/// byte (default of `--request-timeout`): a client that trickles a byte now
/// and then cannot hold a connection (and its thread) for ever.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// A peer that does not take our bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a gateway connection's owner waits on one write: between
/// writes it reads the bot's input and checks the heartbeat deadline.
const WRITE_TICK: Duration = Duration::from_millis(20);
/// Unsent gateway bytes past which the owner stops pulling `poll_transmit`:
/// what the bot has not read yet stays in the database, not in memory.
const HIGH_WATER: usize = 256 * 1024;
/// After a close the server decided on (slow consumer, stop, a session
/// that ended behind unread output), the TCP connection is dropped after
/// this long, close frame delivered or not.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Most pipelined requests committed together.
const MAX_BATCH: usize = 64;
/// Bounds of the "lingering close" after an error that ends a connection.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 << 20;
/// How long a stop waits for connections to finish.
const DRAIN: Duration = Duration::from_secs(5);
const STACK: usize = 512 * 1024;

struct Args {
    addr: String,
    admin_addr: Option<String>,
    db: String,
    admin_secret: Option<String>,
    admin_secret_file: Option<String>,
    operational_key: Option<String>,
    max_connections: usize,
    request_timeout: Duration,
    idle_timeout: Duration,
    gateway_poll_interval_ms: Option<u64>,
    manual_clock: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        addr: "127.0.0.1:8080".into(),
        admin_addr: None,
        db: "botspace.db".into(),
        admin_secret: None,
        admin_secret_file: None,
        operational_key: None,
        max_connections: 0,
        request_timeout: REQUEST_DEADLINE,
        idle_timeout: IDLE_TIMEOUT,
        gateway_poll_interval_ms: None,
        manual_clock: false,
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let value = |it: &mut dyn Iterator<Item = String>| -> Result<String, String> {
            inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--addr" => a.addr = value(&mut it)?,
            "--db" => a.db = value(&mut it)?,
            "--admin-addr" => a.admin_addr = Some(value(&mut it)?),
            "--admin-secret" => a.admin_secret = Some(value(&mut it)?),
            "--admin-secret-file" => a.admin_secret_file = Some(value(&mut it)?),
            "--operational-key" => a.operational_key = Some(value(&mut it)?),
            "--max-connections" => {
                a.max_connections = value(&mut it)?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or("--max-connections needs a positive number")?
            }
            "--request-timeout" => {
                a.request_timeout = value(&mut it)?
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s < 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or("--request-timeout needs a number of seconds")?
            }
            "--idle-timeout" => {
                a.idle_timeout = value(&mut it)?
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s < 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or("--idle-timeout needs a number of seconds")?
            }
            "--gateway-poll-interval-ms" => {
                a.gateway_poll_interval_ms = Some(
                    value(&mut it)?.parse().ok().ok_or("--gateway-poll-interval-ms needs a number of milliseconds")?,
                )
            }
            "--manual-clock" if inline.is_none() => a.manual_clock = true,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(a)
}

fn main() {
    std::process::exit(run(std::env::args().skip(1)));
}

/// The whole server; returns the process exit code.
fn run(args: impl IntoIterator<Item = String>) -> i32 {
    let limit = fds::raise_limit();
    let mut args = match parse_args(args) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return 2;
        }
    };
    if args.max_connections == 0 {
        args.max_connections = fds::default_max_connections(limit);
    }
    match start(&args) {
        Ok((svc, listeners)) => {
            serve(svc, listeners, &args);
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// The bound sockets: the public one, and the host API's with `--admin-addr`.
struct Listeners {
    public: (TcpListener, SocketAddr),
    admin: Option<(TcpListener, SocketAddr)>,
}

fn listen(addr: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    // The standard library listens with a backlog of 128: a burst of
    // connections past it waits for SYN retries (1 s, 2 s, ...). Listening
    // again on the bound socket raises it to the system's cap, as the C
    // server's listen(SOMAXCONN) does.
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: listen(2) on a socket this function owns.
        unsafe { libc::listen(listener.as_raw_fd(), libc::SOMAXCONN) };
    }
    let local = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
    Ok((listener, local))
}

/// Opens the service and the ports and prints the start-up lines, the demo
/// block included.
fn start(args: &Args) -> Result<(Arc<Service>, Listeners), String> {
    let (secret, generated) = admin_secret(args)?;
    let svc = open_service(args, &secret)?;
    let public = listen(&args.addr)?;
    let admin = args.admin_addr.as_deref().map(listen).transpose()?;
    let local = public.1;
    println!("botspace listening on http://{local}");
    if let Some((_, a)) = &admin {
        println!("botspace admin listening on http://{a}");
    }
    if generated {
        println!("admin secret: {secret}");
    }
    if args.manual_clock {
        println!("clock: manual (moves only through /admin/advanceClock)");
    }
    let base = format!("http://{}", reachable(local));
    demo(&svc, &secret, &base).map_err(|e| format!("cannot create the demo data: {e}"))?;
    println!("botspace ready");
    Ok((svc, Listeners { public, admin }))
}

/// The flag, else the file, else `BOTSPACE_ADMIN_SECRET`, else a new one
/// (`true`: generated).
fn admin_secret(args: &Args) -> Result<(String, bool), String> {
    if args.admin_secret.is_some() && args.admin_secret_file.is_some() {
        return Err("give --admin-secret or --admin-secret-file, not both".into());
    }
    let from_file = match &args.admin_secret_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        None => None,
    };
    match args
        .admin_secret
        .clone()
        .or(from_file)
        .or_else(|| std::env::var("BOTSPACE_ADMIN_SECRET").ok().filter(|s| !s.is_empty()))
    {
        Some(s) => Ok((s, false)),
        None => generate_secret().map(|s| (s, true)).map_err(|e| format!("cannot generate an admin secret: {e}")),
    }
}

fn open_service(args: &Args, secret: &str) -> Result<Arc<Service>, String> {
    let key = args
        .operational_key
        .clone()
        .or_else(|| std::env::var("BOTSPACE_OPERATIONAL_KEY").ok().filter(|s| !s.is_empty()));
    let operational_key = match key {
        Some(k) => Some(
            botspace::config::parse_hex_key(k.trim()).ok_or("the operational key must be 64 hex digits (32 bytes)")?,
        ),
        None => None,
    };
    let config = Config {
        database: args.db.clone(),
        admin_secret: secret.to_string(),
        operational_key,
        clock: if args.manual_clock { ClockKind::Manual } else { ClockKind::System },
        gateway_poll_interval_ms: args.gateway_poll_interval_ms.unwrap_or(Config::default().gateway_poll_interval_ms),
        ..Config::default()
    };
    Service::open(config).map(Arc::new).map_err(|e| format!("cannot open the service on {}: {e}", args.db))
}

/// Accepts connections until a stop is requested, then drains them.
fn serve(svc: Arc<Service>, listeners: Listeners, args: &Args) {
    let (listener, local) = listeners.public;
    let shared = Arc::new(Shared {
        svc: svc.clone(),
        registry: Arc::new(Registry::default()),
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        max_connections: args.max_connections,
        request_timeout: args.request_timeout,
        idle_timeout: args.idle_timeout,
        waiting: Waiting::default(),
    });
    let registry = shared.registry.clone();
    svc.set_wake_hook(Some(Arc::new(move |bot_id: &str| registry.wake(bot_id))));
    let notify_loop = spawn_notification_loop(&shared);
    signals::install(reachable(local));
    // The host API's listener gets a thread of its own; connections of both
    // count against one --max-connections.
    let admin = listeners.admin.and_then(|(l, a)| {
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("botspace-admin-accept".into())
            .stack_size(STACK)
            .spawn(move || accept_loop(&sh, &l, Role::AdminOnly));
        match spawned {
            Ok(h) => Some((h, a)),
            Err(e) => {
                eprintln!("cannot start the admin listener's thread: {e}");
                None
            }
        }
    });
    let role = if args.admin_addr.is_some() { Role::PublicOnly } else { Role::Both };
    accept_loop(&shared, &listener, role);
    println!("botspace stopping");
    drop(listener);
    if let Some((handle, a)) = admin {
        // Unblocks its accept(); the loop then sees the stop flag.
        let _ = TcpStream::connect_timeout(&reachable(a), Duration::from_secs(1));
        let _ = handle.join();
    }
    // It sees the stop flag within one wait.
    if let Some(handle) = notify_loop {
        let _ = handle.join();
    }
    stop(shared, svc);
}

/// Longest single wait for notifications: how late the loop sees a stop.
const NOTIFY_WAIT_MS: u64 = 250;

/// On PostgreSQL, a thread that hears other servers' commits
/// (LISTEN/NOTIFY) and wakes their bots' gateway connections here through
/// the wake hook; without it they would wait for the poll interval.
fn spawn_notification_loop(shared: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    if !shared.svc.has_store_notifications() {
        return None;
    }
    let sh = shared.clone();
    let spawned = std::thread::Builder::new().name("botspace-notify".into()).stack_size(STACK).spawn(move || {
        let mut last_error: Option<Instant> = None;
        while !sh.stop.load(Ordering::SeqCst) && !signals::requested() {
            if let Err(e) = sh.svc.wait_store_notifications(NOTIFY_WAIT_MS) {
                // The listening connection broke (or cannot be opened): the
                // sessions' polls still deliver; reconnect a second later.
                if last_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    eprintln!("listening for notifications failed: {e}; retrying every second");
                    last_error = Some(Instant::now());
                }
                let until = Instant::now() + Duration::from_secs(1);
                while Instant::now() < until && !sh.stop.load(Ordering::SeqCst) && !signals::requested() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("cannot start the notification thread (gateways fall back to polling): {e}");
            None
        }
    }
}

/// Which paths a listener serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// No `--admin-addr`: everything.
    Both,
    /// `--addr` with `--admin-addr`: everything but `/admin/*`.
    PublicOnly,
    /// `--admin-addr`: only `/admin/*`.
    AdminOnly,
}

impl Role {
    /// True when this listener answers `h` with 404 `method_not_found`.
    fn refuses(self, h: &Head) -> bool {
        match self {
            Role::Both => false,
            Role::PublicOnly => h.admin,
            Role::AdminOnly => !h.admin,
        }
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, role: Role) {
    let mut errors = ErrorLog::default();
    // A descriptor held in reserve: out of descriptors, it is given up so
    // the waiting client can be accepted (libev's and libuv's trick).
    let mut spare = fds::Spare::open();
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) || signals::requested() {
            shared.stop.store(true, Ordering::SeqCst);
            return;
        }
        match conn {
            // At the cap, the connection that has waited longest for a
            // request (idle, or trickling half a request) makes room; only
            // when every connection is busy is the new one refused.
            Ok(stream)
                if shared.active.load(Ordering::SeqCst) >= shared.max_connections && !shared.waiting.evict_oldest() =>
            {
                refuse_busy(stream)
            }
            Ok(stream) => {
                spawn_connection(shared, stream, role);
                spare.reopen();
            }
            Err(e) if fds::out_of_descriptors(&e) => {
                // Out of descriptors before the cap (other descriptors, a
                // lower limit than the cap assumes): the connection that has
                // waited longest for a request makes room, and the new one
                // gets in on the spare descriptor. Only with nobody to evict
                // is the new one refused; the listener backs off (no spin)
                // and it is said at most once a second.
                let evicted = shared.waiting.evict_oldest();
                if spare.release() {
                    if let Ok((stream, _)) = listener.accept() {
                        if evicted {
                            spawn_connection(shared, stream, role);
                        } else {
                            refuse_busy(stream);
                        }
                    }
                    spare.reopen();
                }
                if !evicted {
                    errors.note(&e);
                    std::thread::sleep(Duration::from_millis(50));
                } else {
                    // The evicted thread closes its descriptor within moments.
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Err(e) => {
                // Other errors: back off instead of spinning, and say so at
                // most once a second.
                errors.note(&e);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The file limit and the spare descriptor.
mod fds {
    use std::io;

    /// Descriptors kept for the server itself (standard streams, listeners,
    /// the spare, the SQLite file, WAL, shared memory and checkpoint
    /// connection, PostgreSQL connections, thread plumbing).
    const RESERVED: u64 = 64;

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (as nginx and Go's
    /// runtime do) and returns the limit now in force.
    pub fn raise_limit() -> u64 {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain system calls on a local struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return 1024;
            }
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    lim.rlim_cur = lim.rlim_max;
                }
            }
        }
        // rlim_t is not u64 on every platform.
        #[allow(clippy::unnecessary_cast)]
        let limit = lim.rlim_cur as u64;
        limit
    }

    /// The default `--max-connections` under `limit` descriptors: one per
    /// connection, after the server's own.
    pub fn default_max_connections(limit: u64) -> usize {
        let cap = if limit > 2 * RESERVED { limit - RESERVED } else { limit / 2 };
        cap.clamp(1, 1 << 20) as usize
    }

    pub fn out_of_descriptors(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
    }

    /// One open `/dev/null`, given up when accept runs out of descriptors.
    pub struct Spare(Option<std::fs::File>);

    impl Spare {
        pub fn open() -> Spare {
            Spare(std::fs::File::open("/dev/null").ok())
        }

        /// Closes the spare; false when there was none.
        pub fn release(&mut self) -> bool {
            self.0.take().is_some()
        }

        pub fn reopen(&mut self) {
            if self.0.is_none() {
                self.0 = std::fs::File::open("/dev/null").ok();
            }
        }
    }
}

/// Over `--max-connections`: a short 503 (best effort, never blocking) and
/// close, so one client's flood of connections costs one accept each.
fn refuse_busy(stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let body =
        br#"{"ok":false,"error_code":503,"error":"server_busy","description":"too many connections; retry later"}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = stream;
    let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(body));
    let _ = s.shutdown(Shutdown::Both);
}

/// Accept errors, logged at most once a second with how many there were.
#[derive(Default)]
struct ErrorLog {
    last: Option<Instant>,
    since: u64,
}

impl ErrorLog {
    fn note(&mut self, e: &io::Error) {
        self.since += 1;
        if self.last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            eprintln!("accept failed: {e} ({} in the last second)", self.since);
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}

/// One thread per connection; `active` counts them for the drain.
fn spawn_connection(shared: &Arc<Shared>, stream: TcpStream, role: Role) {
    let sh = shared.clone();
    sh.active.fetch_add(1, Ordering::SeqCst);
    let stream = Arc::new(stream);
    let id = sh.waiting.add(&stream);
    let spawned = std::thread::Builder::new().name("botspace-conn".into()).stack_size(STACK).spawn(move || {
        let _guard = ActiveGuard(&sh.active);
        let waiting = WaitingGuard(&sh.waiting, id);
        serve_http(&sh, stream, waiting, role);
    });
    if let Err(e) = spawned {
        // The closure (and its guard) was dropped with the error.
        eprintln!("cannot start a connection thread: {e}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when the peer has sent bytes not read yet (a stop answers them
/// before closing). Peeks without blocking.
fn bytes_waiting(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let r = stream.peek(&mut [0u8; 1]);
    let _ = stream.set_nonblocking(false);
    matches!(r, Ok(n) if n > 0)
}

/// Waits (at most `DRAIN`) for the connections to end, then closes the
/// database.
fn stop(shared: Arc<Shared>, svc: Arc<Service>) {
    let until = Instant::now() + DRAIN;
    while shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    svc.set_wake_hook(None);
    let left = shared.active.load(Ordering::SeqCst);
    drop(shared);
    // With every connection gone this is the last reference: SQLite closes
    // and checkpoints its WAL.
    let closed = Arc::strong_count(&svc) == 1;
    drop(svc);
    if closed {
        println!("botspace stopped");
    } else {
        println!("botspace stopped ({left} connections cut; every answered request was already committed)");
    }
}

/// 32 random bytes from the OS, hex-encoded.
fn generate_secret() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// An address a local client can connect to (`0.0.0.0` → `127.0.0.1`).
fn reachable(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v) if v.ip().is_unspecified() => SocketAddr::from(([127, 0, 0, 1], v.port())),
        SocketAddr::V6(v) if v.ip().is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, v.port())),
        a => a,
    }
}

// ---------------------------------------------------------------------------
// Demo data

/// Calls a host method in-process and returns its `result`.
fn admin(svc: &Service, secret: &str, method: &str, body: &Value) -> Result<Value, String> {
    let body = body.to_string();
    let req = format!(
        "POST /admin/{method} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Admin {secret}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let resp = svc.handle_request(req.as_bytes());
    let start = resp.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4).unwrap_or(resp.len());
    let v: Value = serde_json::from_slice(&resp[start..]).map_err(|e| format!("{method}: unreadable response: {e}"))?;
    if v["ok"] == Value::Bool(true) {
        Ok(v["result"].clone())
    } else {
        Err(format!("{method}: {} {}", v["error"], v["description"]))
    }
}

/// On an empty database, creates a demo user, a demo bot and their started
/// private chat, and prints how to try them.
///
/// "Empty" means no bot exists yet (`/admin/getStats`).
fn demo(svc: &Service, secret: &str, base: &str) -> Result<(), String> {
    let stats = admin(svc, secret, "getStats", &serde_json::json!({}))?;
    if stats["bots"].as_i64() != Some(0) {
        return Ok(());
    }
    let user =
        admin(svc, secret, "createUser", &serde_json::json!({"display_name": "Demo User", "handle": "demo_user"}))?;
    let created = admin(
        svc,
        secret,
        "createBot",
        &serde_json::json!({"display_name": "Demo Bot", "handle": "demo_bot", "quota_tier": "standard"}),
    )?;
    let (user_id, bot_id, token) = (
        user["id"].as_str().unwrap_or_default().to_string(),
        created["bot"]["id"].as_str().unwrap_or_default().to_string(),
        created["token"].as_str().unwrap_or_default().to_string(),
    );
    let chat = admin(svc, secret, "startBot", &serde_json::json!({"user_id": user_id, "bot_id": bot_id}))?;
    let chat_id = chat["id"].as_str().unwrap_or_default().to_string();
    println!("demo user: {user_id}");
    println!("demo bot: {bot_id}");
    println!("demo chat: {chat_id}");
    println!("demo bot token: {token}");
    println!("export BOTSPACE_TOKEN='{token}' BOTSPACE_CHAT='{chat_id}' BOTSPACE_USER='{user_id}'");
    println!("try:");
    println!("  curl -s -X POST {base}/bot/getMe -H 'Authorization: Bot {token}'");
    println!(
        "  curl -s -X POST {base}/bot/sendMessage -H 'Authorization: Bot {token}' -H 'Content-Type: application/json' -d '{{\"chat_id\":\"{chat_id}\",\"text\":\"Hello from the demo bot\"}}'"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Shared state and wake-ups

struct Shared {
    svc: Arc<Service>,
    registry: Arc<Registry>,
    stop: AtomicBool,
    active: AtomicUsize,
    /// `--max-connections`.
    max_connections: usize,
    /// `--request-timeout`.
    request_timeout: Duration,
    /// `--idle-timeout`.
    idle_timeout: Duration,
    /// HTTP connections waiting for a request's bytes, with the time they
    /// started waiting: at the cap, the one waiting longest makes room.
    waiting: Waiting,
}

/// HTTP connections that are waiting for bytes (idle, or half a request
/// in), by id, with a handle to shut them down.
#[derive(Default)]
struct Waiting {
    next_id: AtomicU64,
    /// The connection's own socket, shared (not a `try_clone`): one
    /// descriptor per connection, closed when its last holder drops it, so
    /// an eviction can never shut down a reused descriptor number.
    map: Mutex<HashMap<u64, (Instant, Arc<TcpStream>)>>,
}

impl Waiting {
    /// Registers a connection as it is accepted: every connection can be
    /// evicted until it sends a gateway upgrade.
    fn add(&self, stream: &Arc<TcpStream>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.map.lock().unwrap_or_else(|e| e.into_inner()).insert(id, (Instant::now(), stream.clone()));
        id
    }

    /// The connection got a whole request answered: it waits afresh.
    fn touch(&self, id: u64) {
        if let Some(e) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&id) {
            e.0 = Instant::now();
        }
    }

    fn remove(&self, id: u64) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// Shuts down the connection that has waited longest; false if none.
    /// Its thread sees the read fail and ends.
    fn evict_oldest(&self) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let Some(id) = map.iter().min_by_key(|(_, (since, _))| *since).map(|(id, _)| *id) else {
            return false;
        };
        if let Some((_, stream)) = map.remove(&id) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        true
    }
}

/// A connection's entry in `Waiting`, removed when the connection ends or
/// is upgraded.
struct WaitingGuard<'a>(&'a Waiting, u64);

impl WaitingGuard<'_> {
    fn touch(&self) {
        self.0.touch(self.1);
    }
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

struct ActiveGuard<'a>(&'a AtomicUsize);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a gateway connection's owner thread waits for.
enum Input {
    Data(Vec<u8>),
    Eof,
    Wake,
}

struct Waker {
    id: u64,
    tx: SyncSender<Input>,
    /// Set when a Wake is queued and not yet seen: wake-ups coalesce.
    pending: Arc<AtomicBool>,
}

/// Bot id → the gateway connections of that bot.
#[derive(Default)]
struct Registry {
    map: Mutex<HashMap<String, Vec<Waker>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn register(&self, bot_id: &str, tx: SyncSender<Input>, pending: Arc<AtomicBool>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.map.lock().unwrap_or_else(|e| e.into_inner()).entry(bot_id.to_string()).or_default().push(Waker {
            id,
            tx,
            pending,
        });
        id
    }

    fn unregister(&self, bot_id: &str, id: u64) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get_mut(bot_id) {
            v.retain(|w| w.id != id);
            if v.is_empty() {
                map.remove(bot_id);
            }
        }
    }

    /// The service's wake hook: runs on a committing thread, never blocks.
    fn wake(&self, bot_id: &str) {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get(bot_id) {
            for w in v {
                if !w.pending.swap(true, Ordering::SeqCst) {
                    // Full: the owner has input queued and polls after it anyway.
                    let _ = w.tx.try_send(Input::Wake);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP

/// What this server itself needs from a request head.
struct Head {
    /// The path without the query, as the library names it in errors.
    path: String,
    gateway: bool,
    /// A host-API request: answered alone, with the peer named, so failed
    /// admin authentication is throttled per peer.
    admin: bool,
    /// The connection ends after the answer.
    close: bool,
    http10: bool,
    expect_continue: bool,
}

/// Reads the request line and headers of `req` (a complete head, at least).
fn head(req: &[u8]) -> Option<Head> {
    // The library's framer accepts bare-LF line ends (as httparse does):
    // read them the same way, so every request it frames gets its answer.
    let lf = req.windows(2).position(|w| w == b"\n\n");
    let crlf = req.windows(3).position(|w| w == b"\n\r\n");
    let end = match (lf, crlf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let text = String::from_utf8_lossy(&req[..end]);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next()?.split(' ');
    let (_method, target, version) = (parts.next()?, parts.next()?, parts.next().unwrap_or("HTTP/1.1"));
    let path = target.split('?').next().unwrap_or("");
    let http10 = version.eq_ignore_ascii_case("HTTP/1.0");
    let (mut close_tok, mut keep_tok, mut expect_continue) = (false, false, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("connection") {
            for t in value.split(',') {
                close_tok |= t.trim().eq_ignore_ascii_case("close");
                keep_tok |= t.trim().eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue |= value.eq_ignore_ascii_case("100-continue");
        }
    }
    Some(Head {
        path: path.to_string(),
        gateway: path == "/bot/gateway",
        admin: path.starts_with("/admin/"),
        close: close_tok || (http10 && !keep_tok),
        http10,
        expect_continue,
    })
}

/// Adds a header line right after the status line of a response.
fn with_header(mut resp: Vec<u8>, line: &str) -> Vec<u8> {
    if let Some(p) = resp.windows(2).position(|w| w == b"\r\n") {
        resp.splice(p + 2..p + 2, format!("{line}\r\n").into_bytes());
    }
    resp
}

fn connection_header(resp: Vec<u8>, h: &Head) -> Vec<u8> {
    if h.close {
        with_header(resp, "Connection: close")
    } else if h.http10 {
        with_header(resp, "Connection: keep-alive")
    } else {
        resp
    }
}

enum Next {
    /// Read more bytes.
    Read,
    /// More complete requests may be buffered: go on without reading.
    Again,
    Close {
        linger: bool,
    },
    Upgrade(Box<GatewayConnection>),
}

/// A pending request: its bytes in the connection's buffer and its head.
type Pending = (std::ops::Range<usize>, Head);

/// One HTTP connection: answers what is buffered, writes the answers,
/// reads more; until it closes or becomes a gateway connection.
fn serve_http(sh: &Arc<Shared>, sock: Arc<TcpStream>, waiting: WaitingGuard<'_>, role: Role) {
    let mut stream: &TcpStream = &sock;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut last_activity = Instant::now();
    let mut continue_sent = false;
    let mut framer = sh.svc.request_framer();
    // Who is asking, for the per-peer throttle of failed admin logins.
    let peer = stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    // When the first byte of the request now buffered arrived.
    let mut started: Option<Instant> = None;
    loop {
        let (out, next) = answer_buffered(&sh.svc, role, &peer, &mut framer, &mut buf, &mut continue_sent);
        if !out.is_empty() {
            last_activity = Instant::now();
            if stream.write_all(&out).is_err() {
                return;
            }
        }
        match next {
            Next::Read => {}
            Next::Again => continue,
            Next::Close { linger } => return close_http(stream, linger),
            Next::Upgrade(gw) => {
                // A gateway connection is not evicted for HTTP clients.
                drop(waiting);
                return serve_gateway(sh, &sock, *gw, buf);
            }
        }
        // On a stop, a connection ends only once nothing it was sent is
        // left unanswered: bytes still in the socket are read first.
        if sh.stop.load(Ordering::SeqCst) && buf.is_empty() && !bytes_waiting(stream) {
            return close_http(stream, false);
        }
        if buf.is_empty() {
            if started.take().is_some() || !out.is_empty() {
                waiting.touch();
            }
        } else if started.get_or_insert_with(Instant::now).elapsed() > sh.request_timeout {
            return request_timeout(stream);
        }
        if !read_more(sh, stream, &mut buf, &mut chunk, &mut last_activity) {
            return;
        }
    }
}

/// 408 for a request that did not arrive within `--request-timeout`, then
/// close.
fn request_timeout(mut stream: &TcpStream) {
    let body = br#"{"ok":false,"error_code":408,"error":"request_timeout","description":"the request did not arrive in time"}"#;
    let head = format!(
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body));
    close_http(stream, false);
}

/// Answers every complete request in `buf`, in order, and removes them;
/// returns the bytes to write and what the connection does next.
/// Consecutive requests go to one `handle_batch` (one commit).
fn answer_buffered(
    svc: &Arc<Service>,
    role: Role,
    peer: &str,
    framer: &mut RequestFramer,
    buf: &mut Vec<u8>,
    continue_sent: &mut bool,
) -> (Vec<u8>, Next) {
    let mut out: Vec<u8> = Vec::new();
    let mut batch: Vec<Pending> = Vec::new();
    let mut consumed = 0;
    let mut tail: Option<Vec<u8>> = None;
    let next = loop {
        // The framer resumes where the last read left it: a request that
        // trickles in costs time linear in its bytes.
        match framer.frame(&buf[consumed..]) {
            Framing::Complete(n) => {
                let range = consumed..consumed + n;
                consumed += n;
                *continue_sent = false;
                // frame_request accepted it, so `head` does not fail.
                let Some(h) = head(&buf[range.clone()]) else { break Next::Close { linger: true } };
                if role.refuses(&h) {
                    // Exactly the library's answer for a path it has no
                    // method at: this listener has none there.
                    answer(svc, buf, &mut batch, &mut out);
                    out.extend(connection_header(ApiError::method_not_found(&h.path).into_response(), &h));
                    if h.close {
                        break Next::Close { linger: false };
                    }
                    continue;
                }
                if h.admin {
                    answer(svc, buf, &mut batch, &mut out);
                    let resp = svc.handle_request_from(&buf[range], peer);
                    storage_full::note(&resp);
                    out.extend(connection_header(resp, &h));
                    if h.close {
                        break Next::Close { linger: false };
                    }
                    continue;
                }
                if h.gateway {
                    answer(svc, buf, &mut batch, &mut out);
                    if let Some(next) = upgrade(svc, &buf[range], &h, &mut out) {
                        break next;
                    }
                    continue;
                }
                let close = h.close;
                batch.push((range, h));
                if close {
                    break Next::Close { linger: false };
                }
                if batch.len() == MAX_BATCH {
                    break Next::Again;
                }
            }
            Framing::Incomplete => {
                if wants_continue(&buf[consumed..], continue_sent) {
                    tail = Some(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec());
                }
                break Next::Read;
            }
            Framing::Invalid(resp) => {
                // Refused from its head: answered, then the connection ends.
                tail = Some(with_header(resp, "Connection: close"));
                break Next::Close { linger: true };
            }
        }
    };
    answer(svc, buf, &mut batch, &mut out);
    out.extend(tail.unwrap_or_default());
    buf.drain(..consumed);
    (out, next)
}

/// A client that waits for `100 Continue` before sending its body (curl
/// does for larger bodies) gets it once, when the head is complete and
/// acceptable (`partial` is the incomplete request).
fn wants_continue(partial: &[u8], continue_sent: &mut bool) -> bool {
    if *continue_sent || partial.is_empty() || !head(partial).is_some_and(|h| h.expect_continue) {
        return false;
    }
    *continue_sent = true;
    true
}

/// `GET /bot/gateway`: `Some(Upgrade)` when accepted; a refusal is written
/// to `out` and ends the connection only if the request asked for that.
fn upgrade(svc: &Arc<Service>, req: &[u8], h: &Head, out: &mut Vec<u8>) -> Option<Next> {
    let acc = svc.accept_gateway(req, svc.now_ms());
    match acc.connection {
        Some(conn) => {
            out.extend_from_slice(&acc.response);
            Some(Next::Upgrade(Box::new(conn)))
        }
        None => {
            out.extend(connection_header(acc.response, h));
            h.close.then_some(Next::Close { linger: false })
        }
    }
}

/// Reads more bytes into `buf`; `false` when the connection is over (EOF,
/// an error, idle too long, or a stop with nothing buffered).
fn read_more(
    sh: &Shared,
    mut stream: &TcpStream,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    last_activity: &mut Instant,
) -> bool {
    match stream.read(chunk) {
        Ok(0) => false,
        Ok(n) => {
            *last_activity = Instant::now();
            buf.extend_from_slice(&chunk[..n]);
            true
        }
        // The read timeout (TICK) lets an idle connection see the stop flag
        // (the caller closes it once nothing is left to read).
        Err(e)
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) =>
        {
            last_activity.elapsed() <= sh.idle_timeout
        }
        Err(_) => false,
    }
}

/// Answers the batched requests in order: one commit for all of them.
fn answer(svc: &Service, buf: &[u8], batch: &mut Vec<Pending>, out: &mut Vec<u8>) {
    match batch.len() {
        0 => {}
        1 => {
            let (r, h) = batch.pop().unwrap_or_else(|| unreachable!());
            let resp = svc.handle_request(&buf[r]);
            storage_full::note(&resp);
            out.extend(connection_header(resp, &h));
        }
        _ => {
            let reqs: Vec<&[u8]> = batch.iter().map(|(r, _)| &buf[r.clone()]).collect();
            for (resp, (_, h)) in svc.handle_batch(&reqs).into_iter().zip(batch.iter()) {
                storage_full::note(&resp);
                out.extend(connection_header(resp, h));
            }
            batch.clear();
        }
    }
}

/// A full disk, said on stderr at most once every `EVERY` seconds with how
/// many writes it refused meanwhile: the operator hears of it, and a
/// flood of refused writes does not flood the log.
mod storage_full {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};

    const EVERY: u64 = 10;
    static LAST: AtomicU64 = AtomicU64::new(0);
    static SINCE: AtomicU64 = AtomicU64::new(0);

    pub fn note(resp: &[u8]) {
        if !resp.starts_with(b"HTTP/1.1 503") || !resp.windows(22).any(|w| w == br#""error":"storage_full""#) {
            return;
        }
        let n = SINCE.fetch_add(1, Ordering::Relaxed) + 1;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let last = LAST.load(Ordering::Relaxed);
        if now >= last + EVERY && LAST.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            SINCE.store(0, Ordering::Relaxed);
            eprintln!(
                "storage full: the database's disk has no space; writes are refused (503 storage_full, nothing written) until space is freed ({n} refused since the last report)"
            );
        }
    }
}

/// Closes after an answer. With `linger`, the request may have left bytes
/// unread (a refused body): stop sending, then discard what still arrives
/// for a bounded time, so the peer gets our answer rather than a reset.
fn close_http(mut stream: &TcpStream, linger: bool) {
    let _ = stream.shutdown(Shutdown::Write);
    if linger {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let until = Instant::now() + LINGER;
        let mut sink = [0u8; 16 * 1024];
        let mut total = 0;
        while Instant::now() < until && total < LINGER_BYTES {
            match stream.read(&mut sink) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => break,
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

// ---------------------------------------------------------------------------
// Gateway

/// Runs one gateway connection until it closes. `leftover` holds bytes that
/// arrived after the upgrade request (the bot may talk at once).
fn serve_gateway(sh: &Arc<Shared>, sock: &Arc<TcpStream>, mut conn: GatewayConnection, leftover: Vec<u8>) {
    let stream: &TcpStream = sock;
    let bot_id = conn.bot_id().to_string();
    let (tx, rx) = mpsc::sync_channel::<Input>(64);
    let pending = Arc::new(AtomicBool::new(false));
    // Registered before the first poll, so no event can slip between.
    let id = sh.registry.register(&bot_id, tx.clone(), pending.clone());
    if spawn_reader(sock, tx).is_err() {
        sh.registry.unregister(&bot_id, id);
        return;
    }
    // Writes wait one tick at most: the owner never stops reading the bot's
    // input or watching the clock for long (the reader thread does not
    // write, so the shared send timeout does not touch it).
    let _ = stream.set_write_timeout(Some(WRITE_TICK));
    if !leftover.is_empty() {
        conn.handle_input(&leftover, sh.svc.now_ms());
    }
    let mut unsent = Unsent::default();
    let ended = pump(sh, stream, &mut conn, &rx, &pending, &mut unsent);
    sh.registry.unregister(&bot_id, id);
    // Frees the connection slot (and writes a pending ack) before the
    // (bounded) last writes and lingering below.
    drop(conn);
    let until = Instant::now() + if ended.forced { CLOSE_GRACE } else { LINGER };
    if !ended.abandon {
        unsent.flush_until(stream, until);
    }
    if ended.server_closed && !ended.peer_eof {
        linger_for_close(stream, &rx, until);
    }
    let _ = stream.shutdown(Shutdown::Both);
    // The reader thread ends on its own now that the socket is shut down.
}

/// A thread that forwards what the socket delivers, then `Eof`.
/// It shares the connection's socket (one descriptor per connection); the
/// owner never reads after the upgrade, so the read timeout is its own.
fn spawn_reader(sock: &Arc<TcpStream>, tx: SyncSender<Input>) -> io::Result<()> {
    let reader = sock.clone();
    let _ = reader.set_read_timeout(None);
    std::thread::Builder::new().name("botspace-gw-read".into()).stack_size(128 * 1024).spawn(move || {
        let mut b = vec![0u8; 16 * 1024];
        loop {
            match (&*reader).read(&mut b) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(Input::Data(b[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(Input::Eof);
    })?;
    Ok(())
}

/// How a gateway connection ended.
#[derive(Default)]
struct Ended {
    /// The server sent (or queued) a close frame.
    server_closed: bool,
    /// The bot closed its side.
    peer_eof: bool,
    /// The server closed on its own (slow consumer, stop, a session that
    /// ended behind unread output): the last bytes get `CLOSE_GRACE`.
    forced: bool,
    /// Nothing more is worth sending: the socket refused a write, or the
    /// bot closed (or broke the protocol) with our output still unread.
    abandon: bool,
}

/// Pulls the gateway's output while the bot keeps up, writes it a tick at a
/// time, and between writes feeds the bot's input and checks deadlines;
/// until either side closes.
fn pump(
    sh: &Shared,
    stream: &TcpStream,
    conn: &mut GatewayConnection,
    rx: &mpsc::Receiver<Input>,
    pending: &AtomicBool,
    unsent: &mut Unsent,
) -> Ended {
    let svc = &sh.svc;
    let manual = svc.config().clock == ClockKind::Manual;
    // The same allowance as a silent bot gets: two heartbeat intervals.
    let budget_ms = 2 * svc.config().heartbeat_interval_ms;
    // Service-clock time since which the unsent bytes are over the mark.
    let mut over_since: Option<u64> = None;
    // How the session ended, when it did behind output not yet written.
    let mut session_end: Option<(u16, &'static str)> = None;
    let mut peer_eof = false;
    loop {
        pending.store(false, Ordering::SeqCst);
        let now = svc.now_ms();
        conn.handle_timeout(now);
        // Past the mark nothing more is pulled: the events wait in the
        // database, and memory per connection stays about two windows.
        // `more`: stopped at the mark, the gateway may have more to give.
        let mut more = unsent.len() >= HIGH_WATER;
        while !more && conn.poll_transmit(&mut unsent.buf) > 0 {
            more = unsent.len() >= HIGH_WATER;
        }
        let flush_started = Instant::now();
        if unsent.flush(stream).is_err() {
            return Ended { peer_eof, abandon: true, ..Ended::default() };
        }
        while let Some(GatewayEvent::Closed { code, reason }) = conn.poll_event() {
            session_end = Some((code, reason));
        }
        let over = unsent.len() >= HIGH_WATER;
        if let (true, Some((code, reason))) = (over, session_end) {
            // The session is over but its close frame sits behind output
            // the bot is not reading: send the close next, drop the rest.
            if matches!(reason, "closed_by_bot" | "protocol_error") {
                return Ended { peer_eof, abandon: true, ..Ended::default() };
            }
            unsent.close_next(code, reason);
            return Ended { server_closed: true, peer_eof, forced: true, ..Ended::default() };
        }
        if conn.is_closed() {
            return Ended { server_closed: true, peer_eof, ..Ended::default() };
        }
        if !over {
            over_since = None;
        } else if now.saturating_sub(*over_since.get_or_insert(now)) > budget_ms {
            unsent.close_next(CLOSE_SLOW_CONSUMER, "slow_consumer");
            return Ended { server_closed: true, peer_eof, forced: true, ..Ended::default() };
        }
        if peer_eof {
            return Ended { peer_eof, ..Ended::default() };
        }
        if sh.stop.load(Ordering::SeqCst) {
            // 1001 going away: the bot reconnects elsewhere or later and
            // gets everything it has not acknowledged.
            unsent.close_next(1001, "server_shutdown");
            return Ended { server_closed: true, peer_eof, forced: true, ..Ended::default() };
        }
        let wait = if unsent.is_empty() && !more {
            wait_for(conn.poll_timeout(), now, manual)
        } else if unsent.is_empty() {
            // All written and the gateway has more: pull again at once.
            Duration::ZERO
        } else {
            // The socket is full: the write above already waited about a
            // tick; take the input that came meanwhile and try again.
            WRITE_TICK.saturating_sub(flush_started.elapsed())
        };
        peer_eof = take_input(svc, conn, rx, wait);
    }
}

/// Bytes framed for the bot and not yet taken by its socket. `buf` only
/// ever receives whole frames (what `poll_transmit` appends), so frame
/// boundaries can be followed from its start.
#[derive(Default)]
struct Unsent {
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    /// Start of the frame that holds `buf[sent]`.
    frame: usize,
}

impl Unsent {
    fn len(&self) -> usize {
        self.buf.len() - self.sent
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes what the socket takes within about one `WRITE_TICK`; an error
    /// when the peer is gone.
    fn flush(&mut self, mut stream: &TcpStream) -> io::Result<()> {
        let until = Instant::now() + WRITE_TICK;
        while self.sent < self.buf.len() && Instant::now() < until {
            match stream.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while let Some(n) = frame_len(&self.buf[self.frame..]) {
            if self.frame + n > self.sent {
                break;
            }
            self.frame += n;
        }
        if self.sent == self.buf.len() {
            self.buf.clear();
            (self.sent, self.frame) = (0, 0);
        } else if self.frame > self.buf.len() / 2 {
            self.buf.drain(..self.frame);
            self.sent -= self.frame;
            self.frame = 0;
        }
        Ok(())
    }

    /// Writes until everything is out, the peer is gone or `until`.
    fn flush_until(&mut self, stream: &TcpStream, until: Instant) {
        while !self.is_empty() && Instant::now() < until {
            if self.flush(stream).is_err() {
                return;
            }
        }
    }

    /// Drops every frame not begun yet (the bot gets them again after it
    /// reconnects, from its last ack) and queues a close frame after the
    /// one being written.
    fn close_next(&mut self, code: u16, reason: &str) {
        let end = if self.sent > self.frame {
            self.frame + frame_len(&self.buf[self.frame..]).unwrap_or(self.buf.len() - self.frame)
        } else {
            self.sent
        };
        self.buf.truncate(end);
        let mut frame = vec![0x88, (2 + reason.len()) as u8];
        frame.extend_from_slice(&code.to_be_bytes());
        frame.extend_from_slice(reason.as_bytes());
        self.buf.extend_from_slice(&frame);
    }
}

/// Length of the server frame at the start of `b` (unmasked, as servers
/// send), if its header is there.
fn frame_len(b: &[u8]) -> Option<usize> {
    let len7 = *b.get(1)? & 0x7f;
    let mask = if b[1] & 0x80 != 0 { 4 } else { 0 };
    let (head, payload) = match len7 {
        126 => (4, u16::from_be_bytes(b.get(2..4)?.try_into().ok()?) as usize),
        127 => (10, u64::from_be_bytes(b.get(2..10)?.try_into().ok()?) as usize),
        n => (2, n as usize),
    };
    Some(head + mask + payload)
}

/// How long to wait for input before polling again.
fn wait_for(deadline: Option<u64>, now: u64, manual: bool) -> Duration {
    let tick = if manual { MANUAL_CLOCK_TICK } else { TICK };
    match deadline {
        // A deadline that is already here right after a poll: the poll
        // found nothing due (the timeout fires strictly after it). Do not
        // spin on it: wait for the clock to move.
        Some(d) if d <= now => Duration::from_millis(1).max(if manual { tick } else { Duration::ZERO }),
        Some(d) => Duration::from_millis(d - now).min(tick),
        None => tick,
    }
}

/// Feeds the gateway what arrived within `wait` (and everything queued
/// behind it); `true` when the bot closed its side.
fn take_input(svc: &Service, conn: &mut GatewayConnection, rx: &mpsc::Receiver<Input>, wait: Duration) -> bool {
    let mut input = if wait.is_zero() {
        rx.try_recv().ok()
    } else {
        match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Input::Eof),
        }
    };
    let mut eof = false;
    while let Some(m) = input.take() {
        match m {
            Input::Data(b) => conn.handle_input(&b, svc.now_ms()),
            Input::Eof => eof = true,
            Input::Wake => {}
        }
        input = rx.try_recv().ok();
    }
    eof
}

/// Lets the bot read the close frame and answer it, until `until`.
fn linger_for_close(stream: &TcpStream, rx: &mpsc::Receiver<Input>, until: Instant) {
    let _ = stream.shutdown(Shutdown::Write);
    while Instant::now() < until {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Input::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Ctrl-C

/// SIGINT / SIGTERM without any crate: the handler only sets a flag (which is
/// async-signal-safe); a watcher thread sees it and unblocks `accept` by
/// connecting to the listener, and the accept loop then stops the server.
#[cfg(unix)]
mod signals {
    use std::net::{SocketAddr, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    static REQUESTED: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_signal(_signum: i32) {
        REQUESTED.store(true, Ordering::SeqCst);
    }

    extern "C" {
        // From the C library std already links; `sighandler_t` is pointer-sized.
        fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    }

    const SIGINT: i32 = 2;
    const SIGTERM: i32 = 15;

    pub fn install(wake_addr: SocketAddr) {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            signal(SIGINT, on_signal);
            signal(SIGTERM, on_signal);
        }
        let _ = std::thread::Builder::new().name("botspace-signals".into()).stack_size(64 * 1024).spawn(move || loop {
            std::thread::sleep(Duration::from_millis(50));
            if REQUESTED.load(Ordering::SeqCst) {
                // Unblocks accept(); the accept loop sees the flag and stops.
                let _ = TcpStream::connect_timeout(&wake_addr, Duration::from_secs(1));
                return;
            }
        });
    }

    pub fn requested() -> bool {
        REQUESTED.load(Ordering::SeqCst)
    }
}

#[cfg(not(unix))]
mod signals {
    /// Elsewhere Ctrl-C ends the process the default way, which is still
    /// safe: every answered request was committed before its answer.
    pub fn install(_wake_addr: std::net::SocketAddr) {}
    pub fn requested() -> bool {
        false
    }
}
