//! botspace over real TCP, with the standard library only.
//!
//! ```text
//! cargo run --release --example server -- [--addr 127.0.0.1:8080] [--db botspace.db]
//!     [--admin-secret S] [--manual-clock]
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
//! (the bound address, so `--addr 127.0.0.1:0` works); the startup output
//! ends with the line `botspace ready`.

use botspace::{ClockKind, Config, Framing, GatewayConnection, Service};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: server [--addr HOST:PORT] [--db PATH] [--admin-secret S] [--manual-clock]

  --addr HOST:PORT     address to listen on (default 127.0.0.1:8080; port 0 picks a free port)
  --db PATH            SQLite database file, or :memory: (default botspace.db)
  --admin-secret S     secret for Authorization: Admin <S> on /admin/ (at least 16 characters);
                       BOTSPACE_ADMIN_SECRET may replace it; with neither, one is generated
  --manual-clock       time moves only through /admin/advanceClock (for tests)";

/// How often an idle thread looks at the stop flag (and a gateway
/// connection at the clock, even when its next deadline is further away).
const TICK: Duration = Duration::from_secs(1);
/// The same for gateway connections under the manual clock: its deadlines
/// cannot be slept on (time jumps with /admin/advanceClock), so this bounds
/// how late a heartbeat timeout is noticed after the clock moved.
const MANUAL_CLOCK_TICK: Duration = Duration::from_millis(250);
/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// A peer that does not take our bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
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
    db: String,
    admin_secret: Option<String>,
    manual_clock: bool,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a =
        Args { addr: "127.0.0.1:8080".into(), db: "botspace.db".into(), admin_secret: None, manual_clock: false };
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
            "--admin-secret" => a.admin_secret = Some(value(&mut it)?),
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
    let args = match parse_args(args) {
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
    let (secret, generated) =
        match args.admin_secret.or_else(|| std::env::var("BOTSPACE_ADMIN_SECRET").ok().filter(|s| !s.is_empty())) {
            Some(s) => (s, false),
            None => match generate_secret() {
                Ok(s) => (s, true),
                Err(e) => {
                    eprintln!("cannot generate an admin secret: {e}");
                    return 1;
                }
            },
        };
    let config = Config {
        database: args.db.clone(),
        admin_secret: secret.clone(),
        clock: if args.manual_clock { ClockKind::Manual } else { ClockKind::System },
        ..Config::default()
    };
    let svc = match Service::open(config) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("cannot open the service on {}: {e}", args.db);
            return 1;
        }
    };
    let listener = match TcpListener::bind(&args.addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {}: {e}", args.addr);
            return 1;
        }
    };
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cannot read the bound address: {e}");
            return 1;
        }
    };
    println!("botspace listening on http://{local}");
    if generated {
        println!("admin secret: {secret}");
    }
    if args.manual_clock {
        println!("clock: manual (moves only through /admin/advanceClock)");
    }
    let base = format!("http://{}", reachable(local));
    if let Err(e) = demo(&svc, &secret, &base) {
        eprintln!("cannot create the demo data: {e}");
        return 1;
    }
    println!("botspace ready");

    let shared = Arc::new(Shared {
        svc: svc.clone(),
        registry: Arc::new(Registry::default()),
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
    });
    let registry = shared.registry.clone();
    svc.set_wake_hook(Some(Arc::new(move |bot_id: &str| registry.wake(bot_id))));
    signals::install(reachable(local));

    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) || signals::requested() {
            shared.stop.store(true, Ordering::SeqCst);
            break;
        }
        match conn {
            Ok(stream) => {
                let sh = shared.clone();
                sh.active.fetch_add(1, Ordering::SeqCst);
                let spawned =
                    std::thread::Builder::new().name("botspace-conn".into()).stack_size(STACK).spawn(move || {
                        let _guard = ActiveGuard(&sh.active);
                        serve_http(&sh, stream);
                    });
                if let Err(e) = spawned {
                    // The closure (and its guard) was dropped with the error.
                    eprintln!("cannot start a connection thread: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                eprintln!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    println!("botspace stopping");
    drop(listener);
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
    0
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
    gateway: bool,
    /// The connection ends after the answer.
    close: bool,
    http10: bool,
    expect_continue: bool,
}

/// Reads the request line and headers of `req` (a complete head, at least).
fn head(req: &[u8]) -> Option<Head> {
    let end = req.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = String::from_utf8_lossy(&req[..end]);
    let mut lines = text.split("\r\n");
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
    Some(Head { gateway: path == "/bot/gateway", close: close_tok || (http10 && !keep_tok), http10, expect_continue })
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

fn serve_http(sh: &Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TICK));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let svc = &sh.svc;
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut last_activity = Instant::now();
    let mut continue_sent = false;
    loop {
        let mut out: Vec<u8> = Vec::new();
        let mut batch: Vec<(std::ops::Range<usize>, Head)> = Vec::new();
        let mut consumed = 0;
        let mut next = Next::Read;
        let mut invalid: Option<Vec<u8>> = None;
        let mut send_continue = false;
        loop {
            match svc.frame_request(&buf[consumed..]) {
                Framing::Complete(n) => {
                    let range = consumed..consumed + n;
                    consumed += n;
                    continue_sent = false;
                    let Some(h) = head(&buf[range.clone()]) else {
                        // frame_request accepted it, so this does not happen.
                        next = Next::Close { linger: true };
                        break;
                    };
                    if h.gateway {
                        answer(svc, &buf, &mut batch, &mut out);
                        let acc = svc.accept_gateway(&buf[range], svc.now_ms());
                        match acc.connection {
                            Some(conn) => {
                                out.extend_from_slice(&acc.response);
                                next = Next::Upgrade(Box::new(conn));
                                break;
                            }
                            None => {
                                out.extend(connection_header(acc.response, &h));
                                if h.close {
                                    next = Next::Close { linger: false };
                                    break;
                                }
                            }
                        }
                    } else {
                        let close = h.close;
                        batch.push((range, h));
                        if close {
                            next = Next::Close { linger: false };
                            break;
                        }
                        if batch.len() == MAX_BATCH {
                            next = Next::Again;
                            break;
                        }
                    }
                }
                Framing::Incomplete => {
                    // A client that waits for `100 Continue` before sending
                    // its body (curl does for larger bodies) gets it once the
                    // head is complete and acceptable.
                    if !continue_sent
                        && consumed < buf.len()
                        && head(&buf[consumed..]).is_some_and(|h| h.expect_continue)
                    {
                        continue_sent = true;
                        send_continue = true;
                    }
                    break;
                }
                Framing::Invalid(resp) => {
                    invalid = Some(with_header(resp, "Connection: close"));
                    next = Next::Close { linger: true };
                    break;
                }
            }
        }
        answer(svc, &buf, &mut batch, &mut out);
        if let Some(resp) = invalid {
            out.extend(resp);
        }
        if send_continue {
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        buf.drain(..consumed);
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
            Next::Upgrade(conn) => return serve_gateway(sh, stream, *conn, buf),
        }
        if sh.stop.load(Ordering::SeqCst) && buf.is_empty() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                last_activity = Instant::now();
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                if sh.stop.load(Ordering::SeqCst) || last_activity.elapsed() > IDLE_TIMEOUT {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Answers the batched requests in order: one commit for all of them.
fn answer(svc: &Service, buf: &[u8], batch: &mut Vec<(std::ops::Range<usize>, Head)>, out: &mut Vec<u8>) {
    match batch.len() {
        0 => {}
        1 => {
            let (r, h) = batch.pop().unwrap_or_else(|| unreachable!());
            out.extend(connection_header(svc.handle_request(&buf[r]), &h));
        }
        _ => {
            let reqs: Vec<&[u8]> = batch.iter().map(|(r, _)| &buf[r.clone()]).collect();
            for (resp, (_, h)) in svc.handle_batch(&reqs).into_iter().zip(batch.iter()) {
                out.extend(connection_header(resp, h));
            }
            batch.clear();
        }
    }
}

/// Closes after an answer. With `linger`, the request may have left bytes
/// unread (a refused body): stop sending, then discard what still arrives
/// for a bounded time, so the peer gets our answer rather than a reset.
fn close_http(mut stream: TcpStream, linger: bool) {
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
fn serve_gateway(sh: &Arc<Shared>, mut stream: TcpStream, mut conn: GatewayConnection, leftover: Vec<u8>) {
    let svc = &sh.svc;
    let manual = svc.config().clock == ClockKind::Manual;
    let tick = if manual { MANUAL_CLOCK_TICK } else { TICK };
    let bot_id = conn.bot_id().to_string();
    let (tx, rx) = mpsc::sync_channel::<Input>(64);
    let pending = Arc::new(AtomicBool::new(false));
    // Registered before the first poll, so no event can slip between.
    let id = sh.registry.register(&bot_id, tx.clone(), pending.clone());

    let reader = match stream.try_clone() {
        Ok(r) => r,
        Err(_) => {
            sh.registry.unregister(&bot_id, id);
            return;
        }
    };
    let _ = reader.set_read_timeout(None);
    let spawned = std::thread::Builder::new().name("botspace-gw-read".into()).stack_size(128 * 1024).spawn(move || {
        let mut reader = reader;
        let mut b = vec![0u8; 16 * 1024];
        loop {
            match reader.read(&mut b) {
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
    });
    if spawned.is_err() {
        sh.registry.unregister(&bot_id, id);
        return;
    }

    if !leftover.is_empty() {
        conn.handle_input(&leftover, svc.now_ms());
    }
    let mut peer_eof = false;
    let mut server_closed = false;
    let mut out = Vec::new();
    'serve: loop {
        pending.store(false, Ordering::SeqCst);
        let now = svc.now_ms();
        conn.handle_timeout(now);
        // Each transmit is bounded: write it, then ask for more.
        while conn.poll_transmit(&mut out) > 0 {
            if stream.write_all(&out).is_err() {
                break 'serve;
            }
            out.clear();
        }
        if conn.is_closed() {
            server_closed = true;
            break;
        }
        if peer_eof {
            break;
        }
        if sh.stop.load(Ordering::SeqCst) {
            // 1001 going away: the bot reconnects elsewhere or later and
            // gets everything it has not acknowledged.
            let reason = b"server_shutdown";
            let mut frame = vec![0x88, (2 + reason.len()) as u8, 0x03, 0xE9];
            frame.extend_from_slice(reason);
            let _ = stream.write_all(&frame);
            server_closed = true;
            break;
        }
        let wait = match conn.poll_timeout() {
            // A deadline that is already here right after a poll: the poll
            // found nothing due (the timeout fires strictly after it). Do
            // not spin on it: wait for the clock to move.
            Some(d) if d <= now => Duration::from_millis(1).max(if manual { tick } else { Duration::ZERO }),
            Some(d) => Duration::from_millis(d - now).min(tick),
            None => tick,
        };
        let first = if wait.is_zero() {
            rx.try_recv().ok()
        } else {
            match rx.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(Input::Eof),
            }
        };
        let mut input = first;
        while let Some(m) = input.take() {
            match m {
                Input::Data(b) => conn.handle_input(&b, svc.now_ms()),
                Input::Eof => peer_eof = true,
                Input::Wake => {}
            }
            input = match rx.try_recv() {
                Ok(m) => Some(m),
                Err(mpsc::TryRecvError::Empty) => None,
                Err(mpsc::TryRecvError::Disconnected) => None,
            };
        }
    }
    sh.registry.unregister(&bot_id, id);
    // Frees the connection slot before the (bounded) lingering below.
    drop(conn);
    if server_closed && !peer_eof {
        // Let the bot read the close frame and answer it; then cut.
        let _ = stream.shutdown(Shutdown::Write);
        let until = Instant::now() + LINGER;
        while Instant::now() < until {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(Input::Eof) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    // The reader thread ends on its own now that the socket is shut down.
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
