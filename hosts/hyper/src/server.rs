//! The TCP front end of the example server: tokio tasks, hyper per
//! connection, and what hyper leaves to its host.
//!
//! - **Its own accept loop.** The file limit, not only `--max-connections`,
//!   bounds the connections: on `EMFILE`/`ENFILE` a spare descriptor is
//!   given up so the waiting client gets in, and the connection that has
//!   waited longest for a request is evicted (libev's and libuv's trick).
//!   Every accepted connection can be evicted until it becomes a gateway.
//! - **The core frames the requests.** `FramedIo` sits between the socket
//!   and hyper and hands hyper only whole requests, as the core's
//!   `RequestFramer` delimits them. So a refused head gets the core's own
//!   JSON error (413 before the body, say), a request that does not arrive
//!   whole within `--request-timeout` gets 408, an idle connection is
//!   closed after `--idle-timeout`, and a stop answers every request whose
//!   bytes reached the socket before the connection closes.
//! - **hyper serves** what passes: keep-alive, pipelining (in order),
//!   `Connection: close`, HTTP/1.0, and the gateway's upgrade.

use crate::{Botspace, Role, UpgradeHook};
use botspace::{Framing, RequestFramer, RequestHead};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::{Instant, Sleep};

/// Bounds of the "lingering close" after an error that ends a connection
/// (the library's host policy, as every bound below).
const LINGER: Duration = Duration::from_millis(botspace::policy::host::LINGER_MS);
const LINGER_BYTES: usize = botspace::policy::host::LINGER_BYTES;
/// A peer that does not take our bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_millis(botspace::policy::host::WRITE_TIMEOUT_MS);
/// How long a stop waits for connections to finish.
const DRAIN: Duration = Duration::from_millis(botspace::policy::host::DRAIN_MS);
/// Longest single wait for store notifications: how late the loop sees a stop.
const NOTIFY_WAIT_MS: u64 = botspace::policy::host::NOTIFY_WAIT_MS;

/// The connection limits of `examples/server.rs`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Most connections at once (HTTP and gateway).
    pub max_connections: usize,
    /// A request must arrive whole within this long of its first byte.
    pub request_timeout: Duration,
    /// A keep-alive connection with nothing to read for this long is closed.
    pub idle_timeout: Duration,
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
    let rt = if app.answers_on_reactor() {
        tokio::runtime::Builder::new_current_thread().enable_all().thread_name("botspace").build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("botspace").build()?
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
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        io::Result::Ok(sh.connections())
    })?;
    // Tasks still running (a drain that ran out) are dropped here.
    rt.shutdown_timeout(Duration::from_secs(1));
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
                let report = Duration::from_millis(botspace::policy::host::NOTIFY_ERROR_REPORT_MS);
                if last_error.is_none_or(|t| t.elapsed() >= report) {
                    crate::say::log(
                        botspace::log::Level::Warn,
                        &format!("listening for notifications failed: {e}; retrying every second"),
                    );
                    last_error = Some(std::time::Instant::now());
                }
                let until = std::time::Instant::now() + Duration::from_millis(botspace::policy::host::NOTIFY_RETRY_MS);
                while std::time::Instant::now() < until && !sh.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
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
                        tokio::time::timeout(Duration::from_millis(1), listener.accept()).await
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
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    // The evicted task closes its descriptor within moments.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Err(e) => {
                errors.note(&e);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Refusals lingering at once (see `refuse_busy`); past it they close at once.
const MAX_LINGERING_REFUSALS: usize = 256;
static LINGERING_REFUSALS: AtomicUsize = AtomicUsize::new(0);

/// Over `--max-connections`: a short 503 (best effort, never blocking) and
/// close, so one client's flood of connections costs one accept each.
/// With `linger`, the refusal stops sending and discards what the client
/// still sends for a moment (a few at a time), so a client that was
/// writing its request reads the 503 rather than a reset.
fn refuse_busy(stream: TcpStream, linger: bool) {
    let _ = stream.try_write(&botspace::policy::server_busy());
    let Ok(std_stream) = stream.into_std() else { return };
    let _ = std_stream.shutdown(std::net::Shutdown::Write);
    if !linger || LINGERING_REFUSALS.fetch_add(1, Ordering::SeqCst) >= MAX_LINGERING_REFUSALS {
        if linger {
            LINGERING_REFUSALS.fetch_sub(1, Ordering::SeqCst);
        }
        let _ = std_stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    let Ok(mut stream) = TcpStream::from_std(std_stream) else {
        LINGERING_REFUSALS.fetch_sub(1, Ordering::SeqCst);
        return;
    };
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut sink = [0u8; 4096];
        let until = Instant::now() + Duration::from_millis(500);
        let mut total = 0;
        while total < 64 * 1024 {
            match tokio::time::timeout_at(until, stream.read(&mut sink)).await {
                Ok(Ok(n)) if n > 0 => total += n,
                _ => break,
            }
        }
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
        let every = Duration::from_millis(botspace::policy::host::ACCEPT_ERROR_REPORT_MS);
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
    let state = Arc::new(ConnState { id, shared: Arc::downgrade(sh), m: Mutex::default() });
    let io = FramedIo::new(stream, sh, state.clone(), id);
    let app = sh.app.clone().with_role(role).for_peer(peer.ip()).with_hook(state);
    let conn = hyper::server::conn::http1::Builder::new()
        // The bot may shut its side after its request and still wait for
        // the answer; FramedIo also ends the read side (408, a stop)
        // while answers are still due.
        .half_close(true)
        .title_case_headers(true)
        .auto_date_header(false)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
        .with_upgrades();
    let _ = conn.await;
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

/// What FramedIo and the app share about one connection: how many
/// requests were handed to hyper and how many answered, so that after a
/// gateway request FramedIo hands over nothing more until it is answered
/// (the bytes after an accepted upgrade are WebSocket frames, not HTTP).
struct ConnState {
    id: u64,
    shared: std::sync::Weak<Shared>,
    m: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    released: u64,
    answered: u64,
    upgraded: bool,
    waker: Option<Waker>,
}

impl UpgradeHook for ConnState {
    fn answered(&self, upgraded: bool) {
        let mut m = self.m.lock().unwrap_or_else(|e| e.into_inner());
        m.answered += 1;
        if upgraded {
            m.upgraded = true;
            // A gateway connection is not evicted for HTTP clients.
            if let Some(sh) = self.shared.upgrade() {
                sh.waiting.remove(self.id);
            }
        }
        if let Some(w) = m.waker.take() {
            w.wake();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Framing requests.
    Http,
    /// A gateway request was handed over: wait for its answer.
    Hold,
    /// Upgraded: bytes pass through.
    Raw,
    /// End of the requests: hyper reads EOF, answers what it has, and
    /// shuts the connection down (writing `tail` first).
    Ending,
}

/// The socket as hyper sees it: only whole requests come through (see the
/// module's documentation).
struct FramedIo {
    sock: TcpStream,
    state: Arc<ConnState>,
    shared: Arc<Shared>,
    id: u64,
    framer: RequestFramer,
    mode: Mode,
    /// Bytes read and not yet given to hyper; the first `ready` of them are
    /// whole requests.
    inbuf: Vec<u8>,
    ready: usize,
    /// When the first byte of the incomplete request in `inbuf` arrived.
    started: Option<Instant>,
    continue_sent: bool,
    last_activity: Instant,
    timer: Pin<Box<Sleep>>,
    stopped: Pin<Box<tokio::sync::futures::OwnedNotified>>,
    /// Written before the connection closes (an error that ends it).
    tail: Vec<u8>,
    tail_sent: usize,
    /// After `tail`: stop sending, and discard what still arrives for a
    /// bounded time, so the peer gets our answer rather than a reset.
    linger: bool,
    lingering: Option<(Instant, usize)>,
    write_blocked_since: Option<Instant>,
    write_timer: Pin<Box<Sleep>>,
}

impl FramedIo {
    fn new(sock: TcpStream, shared: &Arc<Shared>, state: Arc<ConnState>, id: u64) -> FramedIo {
        let mut stopped = Box::pin(shared.stop_notify.clone().notified_owned());
        stopped.as_mut().enable();
        FramedIo {
            sock,
            state,
            shared: shared.clone(),
            id,
            framer: shared.app.service().request_framer(),
            mode: Mode::Http,
            inbuf: Vec::new(),
            ready: 0,
            started: None,
            continue_sent: false,
            last_activity: Instant::now(),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            stopped,
            tail: Vec::new(),
            tail_sent: 0,
            linger: false,
            lingering: None,
            write_blocked_since: None,
            write_timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    fn end_with(&mut self, tail: Vec<u8>, linger: bool) {
        self.tail = tail;
        self.linger = linger;
        self.mode = Mode::Ending;
    }

    /// Requests handed to hyper and not answered yet.
    fn in_flight(&self) -> bool {
        let m = self.state.m.lock().unwrap_or_else(|e| e.into_inner());
        m.released > m.answered
    }

    /// Frames what is buffered; true when it moved on (a whole request,
    /// or an error that ends the connection).
    fn frame(&mut self) -> bool {
        if self.inbuf.len() == self.ready {
            return false;
        }
        match self.framer.frame(&self.inbuf[self.ready..]) {
            Framing::Complete { len: n, head } => {
                let start = self.ready;
                // hyper gets a chunked body decoded by the library: its own
                // decoder refuses codings the library takes, and would
                // answer with a bare 400 of its own.
                let (n, head) = match botspace::unchunk_request(&self.inbuf[start..start + n]) {
                    Some((plain, head)) => {
                        let m = plain.len();
                        self.inbuf.splice(start..start + n, plain);
                        (m, head)
                    }
                    None => (n, head),
                };
                self.ready += n;
                self.started = None;
                self.continue_sent = false;
                self.shared.waiting.touch(self.id);
                let h = Head::of(&self.inbuf[start..start + n], &head);
                // hyper would send its own `100 Continue` when the body is
                // read; it has the body already (or was sent one by us).
                if let Some(at) = h.expect_at {
                    self.inbuf[start + at..start + at + 6].copy_from_slice(b"X-Expe");
                }
                // hyper answers HTTP/1.0 with an HTTP/1.0 status line; this
                // server answers HTTP/1.1 (RFC 9110, section 6.2), as the
                // thread server did: the request goes on as HTTP/1.1 that
                // asks for the same `Connection` behaviour.
                if let Some(at) = h.version_minor_at {
                    self.inbuf[start + at] = b'1';
                    if h.close && !h.close_token {
                        let line_end = start + h.first_line_len;
                        self.inbuf.splice(line_end..line_end, b"Connection: close\r\n".iter().copied());
                        self.ready += 19;
                    }
                }
                let mut m = self.state.m.lock().unwrap_or_else(|e| e.into_inner());
                m.released += 1;
                drop(m);
                if h.gateway {
                    self.mode = Mode::Hold;
                } else if h.close {
                    // Nothing after it is answered: hyper closes after it.
                    self.inbuf.truncate(self.ready);
                    self.mode = Mode::Ending;
                }
                true
            }
            Framing::Incomplete => {
                self.started.get_or_insert_with(Instant::now);
                if !self.continue_sent
                    && !self.in_flight()
                    && self.framer.pending_head().is_some_and(|h| h.expect_continue)
                {
                    // A client that waits for `100 Continue` before its body
                    // (curl, for larger bodies) gets it once, when the head
                    // is whole and acceptable.
                    self.continue_sent = true;
                    let _ = self.sock.try_write(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                false
            }
            Framing::Invalid(resp) => {
                // Refused from its head: answered, then the connection ends.
                self.inbuf.truncate(self.ready);
                self.end_with(with_header(resp, "Connection: close"), true);
                true
            }
        }
    }

    /// The next deadline of the read side, if any.
    fn read_deadline(&self) -> Option<Instant> {
        if let Some(s) = self.started {
            return Some(s + self.shared.opts.request_timeout);
        }
        if self.ready == 0 && self.inbuf.is_empty() && !self.in_flight() {
            return Some(self.last_activity + self.shared.opts.idle_timeout);
        }
        None
    }
}

impl AsyncRead for FramedIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ready > 0 {
                let n = this.ready.min(out.remaining());
                out.put_slice(&this.inbuf[..n]);
                this.inbuf.drain(..n);
                this.ready -= n;
                // An idle connection keeps no buffer of its own (hyper keeps
                // one): 10 000 idle connections cost what they must.
                if this.inbuf.is_empty() && this.inbuf.capacity() > 0 {
                    this.inbuf = Vec::new();
                }
                return Poll::Ready(Ok(()));
            }
            match this.mode {
                Mode::Ending => return Poll::Ready(Ok(())),
                Mode::Raw => {
                    if !this.inbuf.is_empty() {
                        let n = this.inbuf.len().min(out.remaining());
                        out.put_slice(&this.inbuf[..n]);
                        this.inbuf.drain(..n);
                        return Poll::Ready(Ok(()));
                    }
                    return Pin::new(&mut this.sock).poll_read(cx, out);
                }
                Mode::Hold => {
                    let mut m = this.state.m.lock().unwrap_or_else(|e| e.into_inner());
                    if m.answered < m.released {
                        m.waker = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    this.mode = if m.upgraded { Mode::Raw } else { Mode::Http };
                    continue;
                }
                Mode::Http => {}
            }
            if this.frame() {
                continue;
            }
            // On a stop, a connection ends only once nothing it was sent is
            // left unanswered: bytes still in the socket are read first.
            let stopping = this.shared.stop.load(Ordering::SeqCst);
            if let Some(d) = this.read_deadline() {
                if Instant::now() >= d {
                    if this.started.is_some() {
                        let resp = this.shared.app.service().request_timed_out();
                        this.end_with(resp, false);
                    } else {
                        this.mode = Mode::Ending;
                    }
                    continue;
                }
                if this.timer.deadline() != d {
                    this.timer.as_mut().reset(d);
                }
            }
            // An uninitialised scratch buffer (no 16 KiB memset per read);
            // only what arrived is kept, so an idle connection holds no
            // buffer of its own while it waits.
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
            let mut rb = ReadBuf::uninit(&mut chunk);
            let polled = Pin::new(&mut this.sock).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            this.inbuf.extend_from_slice(rb.filled());
            match polled {
                Poll::Ready(Ok(())) if n == 0 => {
                    // The peer closed its side: what was framed is answered
                    // (half close), a partial request is dropped.
                    this.inbuf.truncate(this.ready);
                    this.mode = Mode::Ending;
                    continue;
                }
                Poll::Ready(Ok(())) => {
                    this.last_activity = Instant::now();
                    continue;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
            if stopping && this.inbuf.is_empty() {
                this.mode = Mode::Ending;
                continue;
            }
            if this.read_deadline().is_some() && this.timer.as_mut().poll(cx).is_ready() {
                continue;
            }
            if !stopping && this.stopped.as_mut().poll(cx).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

impl AsyncWrite for FramedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.sock).poll_write(cx, buf) {
            Poll::Ready(r) => {
                this.write_blocked_since = None;
                this.last_activity = Instant::now();
                Poll::Ready(r)
            }
            Poll::Pending => {
                let since = *this.write_blocked_since.get_or_insert_with(Instant::now);
                let d = since + WRITE_TIMEOUT;
                if this.write_timer.deadline() != d {
                    this.write_timer.as_mut().reset(d);
                }
                if this.write_timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
                }
                Poll::Pending
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.sock).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.tail_sent < this.tail.len() {
            let (tail, from) = (std::mem::take(&mut this.tail), this.tail_sent);
            let r = Pin::new(&mut *this).poll_write(cx, &tail[from..]);
            this.tail = tail;
            match r {
                Poll::Ready(Ok(n)) if n > 0 => this.tail_sent += n,
                Poll::Ready(_) => {
                    this.tail_sent = this.tail.len();
                    this.linger = false;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        if this.lingering.is_none() {
            let _ = std::task::ready!(Pin::new(&mut this.sock).poll_shutdown(cx));
            this.lingering = Some((Instant::now() + LINGER, 0));
            if this.linger {
                this.timer.as_mut().reset(Instant::now() + LINGER);
            }
        }
        if this.linger {
            let mut sink = [0u8; 16 * 1024];
            while let Some((_, total)) = this.lingering.as_mut() {
                if *total >= LINGER_BYTES || this.timer.as_mut().poll(cx).is_ready() {
                    break;
                }
                let mut rb = ReadBuf::new(&mut sink);
                match Pin::new(&mut this.sock).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if !rb.filled().is_empty() => *total += rb.filled().len(),
                    Poll::Ready(_) => break,
                    Poll::Pending => return Poll::Pending,
                }
            }
            this.linger = false;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for FramedIo {
    /// hyper shuts down what it closes; if it gave up instead, the answer
    /// that ends the connection still gets its chance.
    fn drop(&mut self) {
        if self.tail_sent < self.tail.len() {
            let _ = self.sock.try_write(&self.tail[self.tail_sent..]);
        }
    }
}

/// Adds a header line right after the status line of a response.
fn with_header(mut resp: Vec<u8>, line: &str) -> Vec<u8> {
    if let Some(p) = resp.windows(2).position(|w| w == b"\r\n") {
        resp.splice(p + 2..p + 2, format!("{line}\r\n").into_bytes());
    }
    resp
}

/// What FramedIo needs from a request head.
/// What this server does with a request, from the head the core's framer
/// read (no second parse).
struct Head {
    /// `GET /bot/gateway`, as the app sees it.
    gateway: bool,
    /// The connection ends after the answer.
    close: bool,
    /// Offset of the `Expect` header's name.
    expect_at: Option<usize>,
    /// HTTP/1.0: offset of the version's `0`.
    version_minor_at: Option<usize>,
    /// A `Connection: close` token is there.
    close_token: bool,
    /// The request line with its line end.
    first_line_len: usize,
}

impl Head {
    fn of(req: &[u8], h: &RequestHead) -> Head {
        let line = &req[..h.request_line_end];
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        Head {
            gateway: h.method(req) == "GET" && h.path(req) == "/bot/gateway",
            close: !h.keep_alive,
            expect_at: h.expect_offset,
            version_minor_at: (h.http_minor == 0).then(|| line.len() - 1),
            close_token: h.close_token,
            first_line_len: h.request_line_end,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn head(req: &[u8]) -> Head {
        match botspace::frame_request(req, 1 << 20) {
            Framing::Complete { head, .. } => Head::of(req, &head),
            _ => panic!("not a whole request"),
        }
    }

    #[test]
    fn the_head_names_the_gateway_close_and_expect() {
        let h = head(b"GET /bot/gateway?after=3 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(h.gateway && !h.close && h.expect_at.is_none());
        let h = head(b"POST /bot/gateway HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.gateway);
        let req = b"POST /a HTTP/1.0\nexpect: 100-continue\nContent-Length: 0\n\n";
        let h = head(req);
        assert!(h.close && !h.close_token);
        assert_eq!(&req[h.expect_at.unwrap()..h.expect_at.unwrap() + 6], b"expect");
        assert_eq!(h.version_minor_at, Some(15));
        assert_eq!(h.first_line_len, 17);
        assert!(!head(b"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n").close);
    }
}
