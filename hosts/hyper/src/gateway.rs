//! The gateway over hyper's upgrade: one task per connection drives the
//! core's `GatewayLink` (the session, its unsent output and its closing
//! rules). The link's calls that run the session touch the database
//! (acks, the events to send), so they run on the blocking pool; the task
//! itself only moves bytes and waits: for the bot's bytes, for its socket
//! to take ours, for a wake-up from the service's wake hook, for the
//! link's deadline, or for a stop.

use crate::Inner;
use botspace::connection::http::ConnectionState;
use botspace::gateway::GatewayLink;
use botspace::{CloseCode, GatewayConnection};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The close a stop sends: 1001 `server_shutdown`; the bot reconnects
/// elsewhere or later and gets everything it has not acknowledged.
pub const CLOSE_SERVER_SHUTDOWN: CloseCode = botspace::gateway::CLOSE_SERVER_SHUTDOWN;

/// One gateway connection's wake-up, by its registration id.
type Wakeup = (u64, Arc<Notify>);

/// Bot id → the wake-ups of that bot's gateway connections.
#[derive(Default)]
pub(crate) struct Registry {
    map: Mutex<HashMap<String, Vec<Wakeup>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn register(&self, bot_id: &str, n: Arc<Notify>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.map.lock().unwrap_or_else(|e| e.into_inner()).entry(bot_id.to_string()).or_default().push((id, n));
        id
    }

    fn unregister(&self, bot_id: &str, id: u64) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get_mut(bot_id) {
            v.retain(|(i, _)| *i != id);
            if v.is_empty() {
                map.remove(bot_id);
            }
        }
    }

    /// The service's wake hook: runs on a committing thread, never blocks.
    /// `notify_one` keeps one permit: wake-ups coalesce.
    pub(crate) fn wake(&self, bot_id: &str) {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get(bot_id) {
            for (_, n) in v {
                n.notify_one();
            }
        }
    }
}

/// Counts a running gateway connection (for a stop's drain).
pub(crate) struct Count<'a>(pub(crate) &'a AtomicUsize);

impl Drop for Count<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A `GatewayLink` taken to the blocking pool and back (in the core, see
/// `botspace_runtime::CoreGate`) for the calls that run its session.
struct Link(Option<Box<GatewayLink>>, Arc<botspace_runtime::CoreGate>);

impl Link {
    /// Runs `f` on the blocking pool; `None` if it panicked.
    async fn call(&mut self, f: impl FnOnce(&mut GatewayLink) + Send + 'static) -> Option<()> {
        let mut l = self.0.take()?;
        let gate = self.1.clone();
        let l = tokio::task::spawn_blocking(move || {
            let _in_core = gate.blocking();
            f(&mut l);
            l
        })
        .await
        .ok()?;
        self.0 = Some(l);
        Some(())
    }
}

/// Runs one gateway connection until it closes; `head` is written ahead
/// of its frames.
pub(crate) async fn run<T>(inner: &Arc<Inner>, conn: GatewayConnection, head: Vec<u8>, io: T)
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let bot_id = conn.bot_id().to_string();
    let wake = Arc::new(Notify::new());
    // Registered before the first poll, so no event can slip between.
    let id = inner.registry.register(&bot_id, wake.clone());
    let (mut rd, mut wr) = tokio::io::split(io);
    let mut link = Link(Some(Box::new(GatewayLink::new(conn, head))), inner.gate.clone());
    pump(inner, &mut link, &mut rd, &mut wr, &wake).await;
    inner.registry.unregister(&bot_id, id);
    // A link given up while its session runs (the socket broke, a core
    // call panicked) writes its pending ack and frees its slot as it is
    // dropped: on the blocking pool.
    if let Some(l) = link.0.take().filter(|l| l.connection().is_some()) {
        let gate = inner.gate.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let _in_core = gate.blocking();
            drop(l)
        })
        .await;
    }
    shutdown_now(&mut wr).await;
}

/// Shuts the write side as far as it goes now, without waiting on the
/// peer: the link's deadlines bound a closing socket (its close frame's
/// time, the lingering close), and a socket dropped after this closes
/// anyway; no write timer of the host's own.
async fn shutdown_now<W: AsyncWrite + Unpin>(wr: &mut W) {
    std::future::poll_fn(|cx| {
        let _ = Pin::new(&mut *wr).poll_shutdown(cx);
        Poll::Ready(())
    })
    .await
}

/// Moves the link's bytes and runs it when it is due, until it is closed
/// or the socket breaks.
async fn pump<R, W>(inner: &Inner, link: &mut Link, rd: &mut R, wr: &mut W, wake: &Notify)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let origin = Instant::now();
    // The host's monotonic clock: the link reads the session's (the
    // service's) itself.
    let clock = move || origin.elapsed().as_millis() as u64;
    let mut input = vec![0u8; 16 * 1024];
    let (mut due, mut shut) = (true, false);
    loop {
        if due {
            due = false;
            let now = clock();
            if link.call(move |l| l.handle_timeout(now)).await.is_none() {
                return;
            }
        }
        let Some(l) = link.0.as_deref_mut() else { return };
        if l.state() == ConnectionState::Open && inner.stop.load(Ordering::SeqCst) {
            let now = clock();
            if link
                .call(move |l| {
                    l.close(CLOSE_SERVER_SHUTDOWN, now);
                })
                .await
                .is_none()
            {
                return;
            }
            continue;
        }
        match l.state() {
            ConnectionState::Closed => return,
            ConnectionState::Lingering if !shut => {
                // Stop sending; what still arrives is discarded, so the bot
                // reads the close rather than a reset.
                shut = true;
                shutdown_now(wr).await;
            }
            _ => {}
        }
        let deadline = l.poll_timeout().map(|ms| origin + Duration::from_millis(ms));
        if deadline.is_some_and(|d| d <= Instant::now()) {
            due = true;
            continue;
        }
        let stopped = inner.stop_notify.notified();
        tokio::pin!(stopped);
        // Registered before the flag is read again: a stop in between
        // still wakes this wait.
        stopped.as_mut().enable();
        if inner.stop.load(Ordering::SeqCst) && l.state() == ConnectionState::Open {
            continue;
        }
        let (wants_read, out) = (l.wants_read(), l.poll_transmit());
        tokio::select! {
            biased;
            // Not while the session holds its budget of replies: the bot's
            // bytes stay in its socket, and then it blocks.
            r = rd.read(&mut input), if wants_read => match r {
                Ok(0) | Err(_) => {
                    let now = clock();
                    if link.call(move |l| l.handle_eof(now)).await.is_none() {
                        return;
                    }
                }
                Ok(n) if l.state() == ConnectionState::Open => {
                    let (bytes, now) = (input[..n].to_vec(), clock());
                    if link.call(move |l| l.handle_input(&bytes, now)).await.is_none() {
                        return;
                    }
                }
                // Closing or lingering: discarded, counted, no core call.
                Ok(n) => l.handle_input(&input[..n], clock()),
            },
            w = wr.write(out), if !out.is_empty() => match w {
                Ok(0) | Err(_) => return,
                Ok(n) => l.sent(n, clock()),
            },
            _ = wake.notified() => due = true,
            _ = &mut stopped => {}
            _ = sleep_until_some(deadline) => due = true,
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
