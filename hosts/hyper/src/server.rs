//! The TCP front end of the example server: a host that reads raw
//! sockets, one tokio task per connection.
//!
//! - **Its own accept loop, the core's admission.** The file limit, not
//!   only `--max-connections`, bounds the connections: on `EMFILE`/`ENFILE`
//!   a spare descriptor is given up so the waiting client gets in, and the
//!   connection that has waited longest for a request is evicted (libev's
//!   and libuv's trick). Every accepted connection can be evicted until it
//!   becomes a gateway. Whom to serve, evict or refuse, when to accept
//!   again and what is said about it are the core's `Admission`; this
//!   holds the sockets, the spare and the tasks.
//! - **The core runs the connection.** Each connection is the core's
//!   sans-IO `HttpConnection` (the C server drives the same one): it frames
//!   each request in what the socket gives, so a refused head gets the
//!   core's own JSON error (413 before the body, say) and a lingering
//!   close, a request that does not arrive whole within `--request-timeout`
//!   gets 408, an idle connection is closed after `--idle-timeout`. This
//!   task only moves its bytes, keeps its clock and answers its requests;
//!   and a stop answers every request whose bytes reached the socket
//!   before the connection closes.
//! - **The core's bytes in and out.** A whole request goes to the app a
//!   hyper host mounts ([`Botspace`]) as the bytes the connection framed,
//!   with the lane the connection gave it (`Taken::route`) and the head
//!   its framer read: the core reads those bytes once, as the C server's
//!   are read (`Incoming::bytes`), and nothing here parses them into an
//!   `http::Request`. The answer comes back as the core wrote it and goes
//!   to the connection as it is, which adds the `Connection` header:
//!   keep-alive, pipelining (in order, one at a time), `Connection: close`,
//!   HTTP/1.0, `100 Continue`, and the gateway's upgrade (the socket goes
//!   to the gateway). hyper is not in front: it would parse every request
//!   again, and answer what it refuses with bare errors of its own.

use crate::{Answered, Botspace, Role};
use botspace::connection::http::{ConnectionOptions, ConnectionState, HttpConnection, Taken};
use botspace_runtime::admission::{AcceptError, Admission, Admit};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How long a stop waits for connections to finish.
const DRAIN: Duration = Duration::from_millis(botspace_runtime::host::DRAIN_MS);

/// The connection limits of `examples/server.rs`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Most connections at once (HTTP and gateway).
    pub max_connections: usize,
    /// A request must arrive whole within this long of its first byte.
    pub request_timeout: Duration,
    /// A keep-alive connection with nothing to read for this long is closed.
    pub idle_timeout: Duration,
    /// Threads of the reactor; `None`: the cores the core threads leave,
    /// at least one (one on `:memory:`, where bot requests are answered
    /// on the reactor itself).
    pub reactor_threads: Option<usize>,
}

struct Shared {
    app: Botspace,
    opts: Options,
    /// Open HTTP connections (gateways are counted by the app).
    active: AtomicUsize,
    /// The core's admission: whom to serve, evict or refuse, the order of
    /// the waiting connections (by `next_id`), the lingering refusals, the
    /// accept errors said.
    admission: Mutex<Admission>,
    /// The task of each HTTP connection, by its id in the admission.
    tasks: Mutex<HashMap<u64, AbortHandle>>,
    next_id: AtomicU64,
    /// The admission's clock: milliseconds since the server started.
    started: Instant,
    stop: AtomicBool,
    stop_notify: Arc<Notify>,
}

impl Shared {
    fn connections(&self) -> usize {
        self.active.load(Ordering::SeqCst) + self.app.open_gateways()
    }

    fn admission(&self) -> MutexGuard<'_, Admission> {
        self.admission.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Ends the task of the connection the admission evicted: the runtime
    /// drops it (closing its socket) within moments.
    fn abort(&self, id: u64) {
        if let Some(h) = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
            h.abort();
        }
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
    // Outgoing webhook connections take their share of the same budget.
    app.set_connection_budget(opts.max_connections);
    // On `:memory:` the core never blocks and answers on the reactor: one
    // thread, as the C server's loop, so no request crosses a thread.
    // Elsewhere, unless told otherwise, the cores the core threads leave
    // (at least one): webhook deliveries and HTTP parsing spread over
    // them, and no more threads are runnable than there are cores.
    let threads = opts.reactor_threads.filter(|&n| n > 0).unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        botspace_runtime::host::reactor_threads(cores, app.core_threads())
    });
    let rt = if app.answers_on_reactor() || threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().thread_name("botspace").build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .thread_name("botspace")
            .build()?
    };
    let sh = Arc::new(Shared {
        app,
        opts,
        active: AtomicUsize::new(0),
        admission: Mutex::new(Admission::new()),
        tasks: Mutex::default(),
        next_id: AtomicU64::new(0),
        started: Instant::now(),
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
        crate::say::line(&botspace_runtime::options::stopping_line());
        sh.app.shutdown();
        let until = Instant::now() + DRAIN;
        while sh.connections() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(botspace_runtime::host::DRAIN_POLL_MS)).await;
        }
        io::Result::Ok(sh.connections())
    })?;
    // Tasks still running (a drain that ran out) are dropped here.
    rt.shutdown_timeout(Duration::from_millis(botspace_runtime::host::RUNTIME_SHUTDOWN_MS));
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
/// the wake hook; without it they would wait for the poll interval. The
/// loop, its retries and what it says are the core's
/// (`Service::run_store_notifications`); this thread runs it until the stop.
fn spawn_notification_loop(sh: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    if !sh.app.service().has_store_notifications() {
        return None;
    }
    let sh = sh.clone();
    let spawned = std::thread::Builder::new().name("botspace-notify".into()).spawn(move || {
        botspace_runtime::admission::run_store_notifications(sh.app.service(), &|| sh.stop.load(Ordering::SeqCst))
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

/// Accepts and asks the core's admission what to do with each socket, or
/// after each failed accept; this moves the sockets, holds the spare
/// descriptor and sleeps.
async fn accept_loop(sh: Arc<Shared>, listener: TcpListener, role: Role) {
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
            Ok((stream, peer)) => {
                // Counted before the admission's lock is taken: no other
                // lock is held under it.
                let open = sh.connections();
                let admit = botspace_runtime::admission::admit(
                    sh.app.service(),
                    &mut sh.admission(),
                    open,
                    sh.opts.max_connections,
                );
                match admit {
                    Admit::Serve => {}
                    Admit::ServeAfterEvicting(id) => sh.abort(id),
                    Admit::RefuseLingering => {
                        refuse_lingering(&sh, stream);
                        continue;
                    }
                    Admit::RefuseNow => {
                        refuse_now(stream);
                        continue;
                    }
                }
                spawn_connection(&sh, stream, peer, role);
                spare.reopen();
            }
            Err(e) => {
                let kind = if fds::out_of_descriptors(&e) { AcceptError::OutOfDescriptors } else { AcceptError::Other };
                let now = sh.now_ms();
                let after = botspace_runtime::admission::accept_failed(
                    sh.app.service(),
                    &mut sh.admission(),
                    kind,
                    &e.to_string(),
                    now,
                );
                if let Some(id) = after.evict {
                    sh.abort(id);
                }
                if after.use_spare && spare.release() {
                    // The evicted task closes its descriptor within
                    // moments; the waiting client gets in on the spare's.
                    if let Ok(Ok((stream, peer))) = tokio::time::timeout(
                        Duration::from_millis(botspace_runtime::host::EVICTION_SETTLE_MS),
                        listener.accept(),
                    )
                    .await
                    {
                        if after.evict.is_some() {
                            spawn_connection(&sh, stream, peer, role);
                        } else {
                            refuse_now(stream);
                        }
                    }
                    spare.reopen();
                }
                tokio::time::sleep_until(sh.started + Duration::from_millis(after.resume_at)).await;
            }
        }
    }
}

/// The core's busy refusal (`HttpConnection::refusing_busy`: the 503, then
/// a short linger) on a task of its own, not counted as a connection; the
/// admission counts it until it ends.
fn refuse_lingering(sh: &Arc<Shared>, stream: TcpStream) {
    struct Ended(Arc<Shared>);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.admission().refusal_ended();
        }
    }
    let ended = Ended(sh.clone());
    tokio::spawn(async move {
        let _ended = ended;
        let mut c = Conn { sock: stream, started: Instant::now(), http: HttpConnection::refusing_busy(0), shut: false };
        c.drive().await;
    });
}

/// A refusal that does not linger (past the core's cap on lingering
/// refusals, or out of descriptors): the 503 best effort, never blocking,
/// and the socket closes at once.
fn refuse_now(stream: TcpStream) {
    let _ = stream.try_write(&botspace::connection::server_busy());
    if let Ok(s) = stream.into_std() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

fn spawn_connection(sh: &Arc<Shared>, stream: TcpStream, peer: SocketAddr, role: Role) {
    sh.active.fetch_add(1, Ordering::SeqCst);
    let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
    // A new connection waits for its first request.
    sh.admission().touch(id, sh.now_ms());
    // Made here and moved into the task: a task evicted (aborted) before
    // it first ran is dropped unpolled, and its count must go with it, or
    // the stop would wait for, then report as cut, connections long gone.
    let active = ActiveGuard(sh.clone(), id);
    let task_sh = sh.clone();
    let task = tokio::spawn(async move {
        let _active = active;
        serve_connection(&task_sh, stream, peer, role, id).await;
    });
    sh.tasks.lock().unwrap_or_else(|e| e.into_inner()).insert(id, task.abort_handle());
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
    // One timer for the connection's life, moved only when the core's
    // deadline comes earlier than the one it is set to: a deadline that
    // moves later (the idle deadline after every request) leaves it where
    // it is, and when it goes off early the core finds nothing due. So a
    // request costs no timer of its own.
    let timer = tokio::time::sleep_until(started);
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    loop {
        // Answers in order, one request at a time.
        while let Some(t) = c.http.poll_request(c.now()) {
            // Taken: it waits afresh after its answer.
            sh.admission().touch(id, sh.now_ms());
            match c.answer(&app, &t).await {
                Next::Read => {}
                Next::End => return,
                Next::Upgrade(conn, rest, head) => {
                    // The gateway's connection is not evicted for HTTP
                    // clients; what the bot sent after its request is the
                    // gateway's first input, and the answers not sent yet
                    // and the `101` go ahead of its frames (written by the
                    // gateway's link, under its rules).
                    sh.admission().remove(id);
                    let (rd, wr) = c.sock.into_split();
                    let io = tokio::io::join(io::Cursor::new(rest).chain(rd), wr);
                    app.spawn_gateway(conn, head, std::future::ready(Some(io)));
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
            let mut probe = [0u8; botspace_runtime::host::STOP_PROBE_BYTES];
            match c.sock.try_read(&mut probe) {
                Ok(n) if n > 0 => c.http.handle_input(&probe[..n], c.now()),
                _ => return,
            }
            continue;
        }
        if let Some(at) = c.http.poll_timeout().map(|ms| started + Duration::from_millis(ms)) {
            if armed.is_none_or(|a| at < a) {
                timer.as_mut().reset(at);
                armed = Some(at);
            }
        }
        let reads = c.http.wants_read();
        tokio::select! {
            read = c.read(), if reads => match read {
                Ok(0) => c.http.handle_eof(c.now()),
                Ok(_) => {}
                Err(_) => return,
            },
            _ = &mut timer, if armed.is_some() => {
                armed = None;
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
    /// The gateway's connection, what the bot sent after its request, and
    /// what to write ahead of the gateway's frames (answers not sent yet,
    /// then the `101`).
    Upgrade(Box<botspace::GatewayConnection>, Vec<u8>, Vec<u8>),
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
    /// of `botspace_runtime::host::READ_CHUNK_BYTES` (no memset per read), and only what
    /// arrived is kept, so an idle connection holds no buffer of its own.
    async fn read(&mut self) -> io::Result<usize> {
        let limit = self.http.read_limit().clamp(1, botspace_runtime::host::READ_CHUNK_BYTES);
        std::future::poll_fn(|cx| {
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); botspace_runtime::host::READ_CHUNK_BYTES];
            let mut rb = ReadBuf::uninit(&mut chunk[..limit]);
            std::task::ready!(Pin::new(&mut self.sock).poll_read(cx, &mut rb))?;
            let now = self.started.elapsed().as_millis() as u64;
            self.http.handle_input(rb.filled(), now);
            Poll::Ready(io::Result::Ok(rb.filled().len()))
        })
        .await
    }

    /// Writes what the connection has to send; false when the peer is
    /// gone, or the core closed the connection at its deadline (a peer
    /// that took nothing for the write timeout: `Expired::Write`). The
    /// core names the deadline; this keeps no timer of its own.
    async fn flush(&mut self) -> bool {
        while !self.http.poll_transmit().is_empty() {
            // An answer that fits the socket's buffer (nearly all) is
            // written at once, with no timer to set and clear.
            match self.sock.try_write(self.http.poll_transmit()) {
                Ok(n) if n > 0 => {
                    let now = self.now();
                    self.http.sent(n, now);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                _ => return false,
            }
            let deadline = self.http.poll_timeout().map(|ms| self.started + Duration::from_millis(ms));
            tokio::select! {
                sent = self.sock.write(self.http.poll_transmit()) => match sent {
                    Ok(n) if n > 0 => {
                        let now = self.now();
                        self.http.sent(n, now);
                    }
                    _ => return false,
                },
                _ = sleep_until_some(deadline), if deadline.is_some() => {
                    let now = self.now();
                    self.http.handle_timeout(now);
                    if self.http.state() == ConnectionState::Closed {
                        return false;
                    }
                }
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
        // Copied out of the connection's buffer: the request may wait in
        // a queue (a core thread's) while the socket is read. The framer
        // already applied the parse's rules to its head (the target, the
        // body's length), so no request it framed is refused for its form:
        // the core answers these bytes exactly as it answered their parsed
        // `http::Request` (tests/rules_http.rs compares the two).
        let req = crate::Received::Bytes { request: bytes::Bytes::copy_from_slice(self.http.request(t)), head: t.head };
        let answering = app.answer_read(req, t.route);
        let answered = if t.route == botspace::connection::Lane::Poll {
            // A long poll may park for up to 50 s: the socket is read
            // meanwhile, so that a client that closes it is noticed. The
            // core says what its end means (a closed peer cancels its poll,
            // `handle_eof`); dropping the answer's future cancels the
            // parked poll and frees its descriptor at once.
            tokio::pin!(answering);
            loop {
                let reads = self.http.wants_read();
                tokio::select! {
                    a = &mut answering => break a,
                    read = self.read(), if reads => match read {
                        Ok(0) => {
                            let now = self.now();
                            self.http.handle_eof(now);
                            if self.http.state() == ConnectionState::Closed {
                                return Next::End;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => return Next::End,
                    },
                }
            }
        } else {
            answering.await
        };
        let (bytes, upgrade) = match answered {
            Answered::Response(bytes) => (bytes, None),
            Answered::Upgrade(bytes, conn) => (bytes, Some(conn)),
        };
        match upgrade {
            Some(conn) => {
                // Answers not sent yet go first, then the 101.
                let (rest, mut out) = self.http.upgrade();
                out.extend_from_slice(&bytes);
                Next::Upgrade(conn, rest, out)
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

/// Counts an open HTTP connection; at its end it leaves the admission's
/// order and the task map.
struct ActiveGuard(Arc<Shared>, u64);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.admission().remove(self.1);
        self.0.tasks.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
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
                return botspace_runtime::host::FALLBACK_FILE_LIMIT;
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
    pub use botspace_runtime::host::default_max_connections;

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
