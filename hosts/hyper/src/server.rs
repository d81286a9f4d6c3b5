//! The TCP front end of the example server: a host that reads raw
//! sockets, one tokio task per connection.
//!
//! - **Its own accept loop.** The file limit, not only `--max-connections`,
//!   bounds the connections: on `EMFILE`/`ENFILE` a spare descriptor is
//!   given up so the waiting client gets in, and the connection that has
//!   waited longest for a request is evicted (libev's and libuv's trick).
//!   Every accepted connection can be evicted until it becomes a gateway.
//! - **The core runs the connection.** Each connection is the core's
//!   sans-IO `HttpConnection` (the C server drives the same one): it frames
//!   each request in what the socket gives, so a refused head gets the
//!   core's own JSON error (413 before the body, say) and a lingering
//!   close, a request that does not arrive whole within `--request-timeout`
//!   gets 408, an idle connection is closed after `--idle-timeout`. This
//!   task only moves its bytes, keeps its clock and answers its requests;
//!   and a stop answers every request whose bytes reached the socket
//!   before the connection closes.
//! - **One parse, the app's answer.** A whole request is parsed once into
//!   an `http::Request` (`botspace::parse_http_request`) and answered by
//!   the app a hyper host mounts ([`Botspace`]); the answer goes out as
//!   HTTP/1.1 with the `Connection` header the core's connection adds:
//!   keep-alive, pipelining (in order, one at a time), `Connection: close`,
//!   HTTP/1.0, `100 Continue`, and the gateway's upgrade (the socket goes
//!   to the gateway). hyper is not in front: it would parse every request
//!   again, and answer what it refuses with bare errors of its own.

use crate::{Answered, Botspace, Role};
use botspace::policy::connection::{ConnectionOptions, ConnectionState, HttpConnection, Taken};
use botspace::policy::host;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// A peer that does not take our bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_millis(host::WRITE_TIMEOUT_MS);
/// How long a stop waits for connections to finish.
const DRAIN: Duration = Duration::from_millis(host::DRAIN_MS);
/// Longest single wait for store notifications: how late the loop sees a stop.
const NOTIFY_WAIT_MS: u64 = host::NOTIFY_WAIT_MS;

/// The connection limits of `examples/server.rs`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Most connections at once (HTTP and gateway).
    pub max_connections: usize,
    /// A request must arrive whole within this long of its first byte.
    pub request_timeout: Duration,
    /// A keep-alive connection with nothing to read for this long is closed.
    pub idle_timeout: Duration,
    /// Threads of the reactor; `None`: one per core (one on `:memory:`,
    /// where bot requests are answered on the reactor itself).
    pub reactor_threads: Option<usize>,
}

struct Shared {
    app: Botspace,
    opts: Options,
    /// Open HTTP connections (gateways are counted by the app).
    active: AtomicUsize,
    waiting: Waiting,
    stop: AtomicBool,
    stop_notify: Arc<Notify>,
}

impl Shared {
    /// [`Waiting::evict_oldest`], counted in the service's metrics.
    fn evict_oldest(&self) -> bool {
        let evicted = self.waiting.evict_oldest();
        if evicted {
            self.app.service().note_connection_evicted();
        }
        evicted
    }

    fn connections(&self) -> usize {
        self.active.load(Ordering::SeqCst) + self.app.open_gateways()
    }
}

/// Serves `public` (and `admin`, which then alone serves `/admin/*`) until
/// SIGINT or SIGTERM; then stops accepting, answers what connections have
/// sent, closes gateways with 1001 and waits for them (at most 5 s).
/// Returns how many connections were still open when it gave up waiting.
pub fn serve(
    app: Botspace,
    public: std::net::TcpListener,
    admin: Option<std::net::TcpListener>,
    opts: Options,
) -> io::Result<usize> {
    serve_then(app, public, admin, opts, || {})
}

/// [`serve`], calling `ready` once SIGINT and SIGTERM are caught and the
/// listeners accept: a host that announces it is ready there is never
/// killed by a stop signal sent the moment it said so.
pub fn serve_then(
    app: Botspace,
    public: std::net::TcpListener,
    admin: Option<std::net::TcpListener>,
    opts: Options,
    ready: impl FnOnce(),
) -> io::Result<usize> {
    // The library's operator lines (evictions, timeouts, slow consumers,
    // rotations) in this server's log format.
    app.service().set_log_hook(Some(Arc::new(crate::say::event)));
    // On `:memory:` the core never blocks and answers on the reactor: one
    // thread, as the C server's loop, so no request crosses a thread.
    // Elsewhere a worker per core unless told otherwise: webhook
    // deliveries and HTTP parsing spread over them.
    let threads = opts.reactor_threads;
    let rt = if app.answers_on_reactor() || threads == Some(1) {
        tokio::runtime::Builder::new_current_thread().enable_all().thread_name("botspace").build()?
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = threads.filter(|&n| n > 0) {
            b.worker_threads(n);
        }
        b.enable_all().thread_name("botspace").build()?
    };
    let sh = Arc::new(Shared {
        app,
        opts,
        active: AtomicUsize::new(0),
        waiting: Waiting::default(),
        stop: AtomicBool::new(false),
        stop_notify: Arc::new(Notify::new()),
    });
    let notify_loop = spawn_notification_loop(&sh);
    let left = rt.block_on(async {
        sh.app.start_webhooks();
        let stop_signal = stop_signal();
        let public_role = if admin.is_some() { Role::Public } else { Role::All };
        let mut loops = vec![tokio::spawn(accept_loop(sh.clone(), to_tokio(public)?, public_role))];
        if let Some(a) = admin {
            loops.push(tokio::spawn(accept_loop(sh.clone(), to_tokio(a)?, Role::Admin)));
        }
        ready();
        stop_signal.await;
        // First: /readyz says shutting_down while the drain answers the rest.
        sh.app.service().begin_shutdown();
        sh.stop.store(true, Ordering::SeqCst);
        sh.stop_notify.notify_waiters();
        for l in loops {
            let _ = l.await;
        }
        crate::say::log(botspace::log::Level::Info, "botspace stopping");
        sh.app.shutdown();
        let until = Instant::now() + DRAIN;
        while sh.connections() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(host::DRAIN_POLL_MS)).await;
        }
        io::Result::Ok(sh.connections())
    })?;
    // Tasks still running (a drain that ran out) are dropped here.
    rt.shutdown_timeout(Duration::from_millis(host::RUNTIME_SHUTDOWN_MS));
    if let Some(h) = notify_loop {
        let _ = h.join();
    }
    sh.app.service().set_wake_hook(None);
    sh.app.service().set_log_hook(None);
    Ok(left)
}

fn to_tokio(l: std::net::TcpListener) -> io::Result<TcpListener> {
    l.set_nonblocking(true)?;
    TcpListener::from_std(l)
}

/// Catches SIGTERM and SIGINT now (within the runtime); the future ends
/// at the first of them.
fn stop_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let caught = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
        async move {
            match caught {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        }
    }
    #[cfg(not(unix))]
    {
        let ctrl_c = tokio::signal::ctrl_c();
        async move {
            let _ = ctrl_c.await;
        }
    }
}

/// On PostgreSQL, a thread that hears other servers' commits
/// (LISTEN/NOTIFY) and wakes their bots' gateway connections here through
/// the wake hook; without it they would wait for the poll interval.
fn spawn_notification_loop(sh: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    if !sh.app.service().has_store_notifications() {
        return None;
    }
    let sh = sh.clone();
    let spawned = std::thread::Builder::new().name("botspace-notify".into()).spawn(move || {
        let mut last_error: Option<std::time::Instant> = None;
        while !sh.stop.load(Ordering::SeqCst) {
            if let Err(e) = sh.app.service().wait_store_notifications(NOTIFY_WAIT_MS) {
                // The listening connection broke (or cannot be opened): the
                // sessions' polls still deliver; reconnect a second later.
                let report = Duration::from_millis(host::NOTIFY_ERROR_REPORT_MS);
                if last_error.is_none_or(|t| t.elapsed() >= report) {
                    crate::say::log(
                        botspace::log::Level::Warn,
                        &format!("listening for notifications failed: {e}; retrying every second"),
                    );
                    last_error = Some(std::time::Instant::now());
                }
                let until = std::time::Instant::now() + Duration::from_millis(host::NOTIFY_RETRY_MS);
                while std::time::Instant::now() < until && !sh.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(host::NOTIFY_RETRY_STEP_MS));
                }
            }
        }
    });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            crate::say::log(
                botspace::log::Level::Warn,
                &format!("cannot start the notification thread (gateways fall back to polling): {e}"),
            );
            None
        }
    }
}

async fn accept_loop(sh: Arc<Shared>, listener: TcpListener, role: Role) {
    let mut errors = ErrorLog::default();
    // A descriptor held in reserve: out of descriptors, it is given up so
    // the waiting client can be accepted.
    let mut spare = fds::Spare::open();
    let stopped = sh.stop_notify.clone().notified_owned();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = &mut stopped => return,
        };
        match accepted {
            // At the cap, the connection that has waited longest for a
            // request (idle, or trickling half a request) makes room; only
            // when every connection is busy is the new one refused.
            Ok((stream, _)) if sh.connections() >= sh.opts.max_connections && !sh.evict_oldest() => {
                refuse_busy(stream, true)
            }
            Ok((stream, peer)) => {
                spawn_connection(&sh, stream, peer, role);
                spare.reopen();
            }
            Err(e) if fds::out_of_descriptors(&e) => {
                // Out of descriptors before the cap: the connection that has
                // waited longest for a request makes room, and the new one
                // gets in on the spare descriptor. Only with nobody to evict
                // is the new one refused; the listener backs off (no spin)
                // and it is said at most once a second.
                let evicted = sh.evict_oldest();
                if spare.release() {
                    if let Ok(Ok((stream, peer))) =
                        tokio::time::timeout(Duration::from_millis(host::EVICTION_SETTLE_MS), listener.accept()).await
                    {
                        if evicted {
                            spawn_connection(&sh, stream, peer, role);
                        } else {
                            // Out of descriptors: no lingering.
                            refuse_busy(stream, false);
                        }
                    }
                    spare.reopen();
                }
                if !evicted {
                    errors.note(&e);
                    tokio::time::sleep(Duration::from_millis(host::ACCEPT_BACKOFF_MS)).await;
                } else {
                    // The evicted task closes its descriptor within moments.
                    tokio::time::sleep(Duration::from_millis(host::EVICTION_SETTLE_MS)).await;
                }
            }
            Err(e) => {
                errors.note(&e);
                tokio::time::sleep(Duration::from_millis(host::ACCEPT_BACKOFF_MS)).await;
            }
        }
    }
}

/// The host's count of busy refusals lingering now (see `refuse_busy`).
static LINGERING_REFUSALS: AtomicUsize = AtomicUsize::new(0);

/// Over `--max-connections` with every connection busy: the core's busy
/// refusal (`HttpConnection::refusing_busy`: the 503, then a short linger)
/// on a task of its own, not counted as a connection. Past the core's cap
/// on lingering refusals (`host::refusal_may_linger`), or out of
/// descriptors (`may_linger` false), the 503 goes best effort, never
/// blocking, and the socket closes at once.
fn refuse_busy(stream: TcpStream, may_linger: bool) {
    if !may_linger || !host::refusal_may_linger(LINGERING_REFUSALS.fetch_add(1, Ordering::SeqCst)) {
        if may_linger {
            LINGERING_REFUSALS.fetch_sub(1, Ordering::SeqCst);
        }
        let _ = stream.try_write(&botspace::policy::server_busy());
        if let Ok(s) = stream.into_std() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        return;
    }
    tokio::spawn(async move {
        let mut c = Conn { sock: stream, started: Instant::now(), http: HttpConnection::refusing_busy(0), shut: false };
        c.drive().await;
        LINGERING_REFUSALS.fetch_sub(1, Ordering::SeqCst);
    });
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
        let every = Duration::from_millis(host::ACCEPT_ERROR_REPORT_MS);
        if self.last.is_none_or(|t| t.elapsed() >= every) {
            crate::say::log(
                botspace::log::Level::Error,
                &format!("accept failed: {e} ({} in the last second)", self.since),
            );
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}

fn spawn_connection(sh: &Arc<Shared>, stream: TcpStream, peer: SocketAddr, role: Role) {
    sh.active.fetch_add(1, Ordering::SeqCst);
    // Made here and moved into the task: a task evicted (aborted) before
    // it first ran is dropped unpolled, and its count must go with it, or
    // the stop would wait for, then report as cut, connections long gone.
    let active = ActiveGuard(sh.clone());
    let id = sh.waiting.add();
    let task_sh = sh.clone();
    let task = tokio::spawn(async move {
        let _active = active;
        let sh = task_sh;
        let _waiting = WaitingGuard(&sh.waiting, id);
        serve_connection(&sh, stream, peer, role, id).await;
    });
    sh.waiting.set_handle(id, task.abort_handle());
}

async fn serve_connection(sh: &Arc<Shared>, stream: TcpStream, peer: SocketAddr, role: Role, id: u64) {
    let _ = stream.set_nodelay(true);
    let app = sh.app.clone().with_role(role).for_peer(peer.ip());
    let opts = ConnectionOptions {
        request_timeout_ms: sh.opts.request_timeout.as_millis() as u64,
        idle_timeout_ms: sh.opts.idle_timeout.as_millis() as u64,
    };
    let started = Instant::now();
    let framer = sh.app.service().request_framer();
    let mut c =
        Conn { sock: stream, started, http: HttpConnection::new(role.listener(), opts, framer, 0), shut: false };
    let stopped = sh.stop_notify.clone().notified_owned();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    loop {
        // Answers in order, one request at a time.
        while let Some(t) = c.http.poll_request(c.now()) {
            sh.waiting.touch(id);
            match c.answer(&app, &t).await {
                Next::Read => {}
                Next::End => return,
                Next::Upgrade(conn, rest) => {
                    // The gateway's connection is not evicted for HTTP
                    // clients; what the bot sent after its request is the
                    // gateway's first input.
                    sh.waiting.remove(id);
                    let (rd, wr) = c.sock.into_split();
                    let io = tokio::io::join(io::Cursor::new(rest).chain(rd), wr);
                    app.spawn_gateway(conn, std::future::ready(Some(io)));
                    return;
                }
            }
        }
        // What the connection queued by itself: `100 Continue`, a refusal,
        // a 408.
        if !c.send_and_settle().await {
            return;
        }
        // On a stop, a connection ends only once nothing it was sent is left
        // unanswered: bytes still in the socket are read first.
        let stopping = sh.stop.load(Ordering::SeqCst);
        if stopping && c.http.is_idle() {
            let mut probe = [0u8; host::STOP_PROBE_BYTES];
            match c.sock.try_read(&mut probe) {
                Ok(n) if n > 0 => c.http.handle_input(&probe[..n], c.now()),
                _ => return,
            }
            continue;
        }
        let deadline = c.http.poll_timeout().map(|ms| started + Duration::from_millis(ms));
        let reads = c.http.wants_read();
        tokio::select! {
            read = c.read(), if reads => match read {
                Ok(0) => c.http.handle_eof(c.now()),
                Ok(_) => {}
                Err(_) => return,
            },
            _ = sleep_until_some(deadline), if deadline.is_some() => {
                let now = c.now();
                sh.app.service().handle_connection_timeout(&mut c.http, now);
            }
            _ = &mut stopped, if !stopping => {}
            else => return,
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What comes after an answer.
enum Next {
    Read,
    End,
    /// The gateway's connection, and what the bot sent after its request.
    Upgrade(Box<botspace::GatewayConnection>, Vec<u8>),
}

/// One HTTP connection: the core's `HttpConnection` decides, this moves
/// its bytes and keeps its clock (milliseconds since `started`).
struct Conn {
    sock: TcpStream,
    started: Instant,
    http: HttpConnection,
    /// The write side is shut (a lingering close).
    shut: bool,
}

impl Conn {
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Reads what the socket has (up to what the connection takes) into
    /// the connection; `Ok(0)` at the end. An uninitialised scratch buffer
    /// of `host::READ_CHUNK_BYTES` (no memset per read), and only what
    /// arrived is kept, so an idle connection holds no buffer of its own.
    async fn read(&mut self) -> io::Result<usize> {
        let limit = self.http.read_limit().clamp(1, host::READ_CHUNK_BYTES);
        std::future::poll_fn(|cx| {
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); host::READ_CHUNK_BYTES];
            let mut rb = ReadBuf::uninit(&mut chunk[..limit]);
            std::task::ready!(Pin::new(&mut self.sock).poll_read(cx, &mut rb))?;
            let now = self.started.elapsed().as_millis() as u64;
            self.http.handle_input(rb.filled(), now);
            Poll::Ready(io::Result::Ok(rb.filled().len()))
        })
        .await
    }

    /// Writes `bytes` whole; false when the peer is gone or took nothing
    /// for `WRITE_TIMEOUT`.
    async fn write(&mut self, bytes: &[u8]) -> bool {
        let mut at = 0;
        while at < bytes.len() {
            match tokio::time::timeout(WRITE_TIMEOUT, self.sock.write(&bytes[at..])).await {
                Ok(Ok(n)) if n > 0 => at += n,
                _ => return false,
            }
        }
        true
    }

    /// Writes what the connection has to send; false when the peer is
    /// gone or took nothing for `WRITE_TIMEOUT`.
    async fn flush(&mut self) -> bool {
        while !self.http.transmit().is_empty() {
            let sent = tokio::time::timeout(WRITE_TIMEOUT, self.sock.write(self.http.transmit())).await;
            match sent {
                Ok(Ok(n)) if n > 0 => {
                    let now = self.now();
                    self.http.sent(n, now);
                }
                _ => return false,
            }
        }
        true
    }

    /// Moves the bytes of a connection that takes no request (a busy
    /// refusal) until the core closes it: sends, shuts the write side when
    /// it lingers, reads (discarded by the core) and wakes at its deadline.
    async fn drive(&mut self) {
        while self.send_and_settle().await {
            let deadline = self.http.poll_timeout().map(|ms| self.started + Duration::from_millis(ms));
            let reads = self.http.wants_read();
            tokio::select! {
                read = self.read(), if reads => match read {
                    Ok(0) => {
                        let now = self.now();
                        self.http.handle_eof(now);
                    }
                    Ok(_) => {}
                    Err(_) => return,
                },
                _ = sleep_until_some(deadline), if deadline.is_some() => {
                    let now = self.now();
                    self.http.handle_timeout(now);
                }
                else => return,
            }
        }
    }

    /// Writes what the connection has to send, then does with the socket
    /// what its state says; false when the connection is over (closed, or
    /// the peer is gone).
    async fn send_and_settle(&mut self) -> bool {
        if !self.flush().await {
            return false;
        }
        match self.http.state() {
            ConnectionState::Closed => {
                let _ = self.sock.shutdown().await;
                return false;
            }
            ConnectionState::Lingering if !self.shut => {
                // Stop sending; what still arrives is discarded, so the
                // peer reads the answer rather than a reset.
                self.shut = true;
                let _ = self.sock.shutdown().await;
            }
            _ => {}
        }
        true
    }

    /// Answers one whole request.
    async fn answer(&mut self, app: &Botspace, t: &Taken) -> Next {
        let req = match botspace::parse_http_request(self.http.request(t)) {
            Ok(req) => req.map(bytes::Bytes::from),
            Err(refusal) => {
                let now = self.now();
                self.http.refuse(&refusal, now);
                return if self.flush().await { Next::Read } else { Next::End };
            }
        };
        let (resp, upgrade) = match app.answer_read(req).await {
            Answered::Response(resp) => (resp, None),
            Answered::Upgrade(resp, conn) => (resp, Some(conn)),
        };
        let bytes = botspace::http_response_bytes(&resp, None);
        match upgrade {
            Some(conn) => {
                // Answers not sent yet go first, then the 101.
                let (rest, mut out) = self.http.upgrade();
                out.extend_from_slice(&bytes);
                if self.write(&out).await {
                    Next::Upgrade(conn, rest)
                } else {
                    // Dropped on a task of its own, off this connection's path.
                    app.spawn_gateway(conn, std::future::ready(None::<TcpStream>));
                    Next::End
                }
            }
            None => {
                let now = self.now();
                self.http.answer(&bytes, now);
                if self.flush().await {
                    Next::Read
                } else {
                    Next::End
                }
            }
        }
    }
}

/// Counts an open HTTP connection.
struct ActiveGuard(Arc<Shared>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// HTTP connections, by id, with the time they started waiting for a
/// request and the handle that ends their task.
#[derive(Default)]
struct Waiting {
    next_id: AtomicU64,
    map: Mutex<HashMap<u64, (Instant, Option<AbortHandle>)>>,
}

impl Waiting {
    fn add(&self) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.map.lock().unwrap_or_else(|e| e.into_inner()).insert(id, (Instant::now(), None));
        id
    }

    fn set_handle(&self, id: u64, h: AbortHandle) {
        if let Some(e) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&id) {
            e.1 = Some(h);
        }
    }

    /// A whole request arrived: the connection waits afresh after it.
    fn touch(&self, id: u64) {
        if let Some(e) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&id) {
            e.0 = Instant::now();
        }
    }

    fn remove(&self, id: u64) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// Ends the connection that has waited longest; false if none. Its
    /// task is dropped (closing its socket) by the runtime within moments.
    fn evict_oldest(&self) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let Some(id) = map.iter().min_by_key(|(_, (since, _))| *since).map(|(id, _)| *id) else {
            return false;
        };
        if let Some((_, Some(h))) = map.remove(&id) {
            h.abort();
        }
        true
    }
}

struct WaitingGuard<'a>(&'a Waiting, u64);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

/// The file limit and the spare descriptor.
pub mod fds {
    use std::io;

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (as nginx and Go's
    /// runtime do) and returns the limit now in force.
    pub fn raise_limit() -> u64 {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain system calls on a local struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return botspace::policy::host::FALLBACK_FILE_LIMIT;
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

    /// The default `--max-connections` under `limit` descriptors: the
    /// core's policy.
    pub use botspace::policy::host::default_max_connections;

    pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
    }

    /// One open `/dev/null`, given up when accept runs out of descriptors.
    pub(crate) struct Spare(Option<std::fs::File>);

    impl Spare {
        pub(crate) fn open() -> Spare {
            Spare(std::fs::File::open("/dev/null").ok())
        }

        /// Closes the spare; false when there was none.
        pub(crate) fn release(&mut self) -> bool {
            self.0.take().is_some()
        }

        pub(crate) fn reopen(&mut self) {
            if self.0.is_none() {
                self.0 = std::fs::File::open("/dev/null").ok();
            }
        }
    }
}
