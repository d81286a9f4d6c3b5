//! The gateway over hyper's upgrade: one task per connection drives the
//! core's `GatewayConnection`. Its calls touch the database (acks, the
//! events to send), so they run on the blocking pool; the task itself
//! only waits: for the bot's bytes, for its socket to take ours, for a
//! wake-up from the service's wake hook, for a deadline, or for a stop.

use crate::Inner;
use botspace::gateway::Outbox;
use botspace::{ClockKind, CloseCode, GatewayConnection, GatewayEvent};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The close a stop sends: 1001 `server_shutdown`; the bot reconnects
/// elsewhere or later and gets everything it has not acknowledged.
pub const CLOSE_SERVER_SHUTDOWN: CloseCode = botspace::gateway::CLOSE_SERVER_SHUTDOWN;

/// How long an idle connection waits before it looks at the clock again.
const TICK: Duration = Duration::from_secs(1);
/// The same under the manual clock: its deadlines cannot be slept on (time
/// jumps with /admin/advanceClock), so this bounds how late a heartbeat
/// timeout is noticed after the clock moved.
const MANUAL_CLOCK_TICK: Duration = Duration::from_millis(botspace::policy::host::TICK_MS);
/// While output waits for the socket over the mark: how often the task
/// looks again (the library's slow-consumer deadline among others).
const WRITE_TICK: Duration = Duration::from_millis(20);
/// Unsent bytes past which the library gives no more (`poll_transmit`):
/// what the bot has not read yet stays in the database, not in memory.
const HIGH_WATER: usize = botspace::gateway::OUTPUT_BUDGET;
/// After a close the server decided on (slow consumer, stop, a session
/// that ended behind unread output), the connection is dropped after this
/// long, close frame delivered or not.
const CLOSE_GRACE: Duration = Duration::from_millis(botspace::policy::host::SLOW_CONSUMER_DROP_MS);
/// After a close the bot asked for: how long its last bytes may take.
const LINGER: Duration = Duration::from_millis(botspace::policy::host::LINGER_MS);

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

/// A `GatewayConnection` taken to the blocking pool and back (in the
/// core, see `core_thread::Gate`).
struct Conn(Option<Box<GatewayConnection>>, Arc<crate::core_thread::Gate>);

impl Conn {
    /// Runs `f` on the blocking pool; `None` if it panicked.
    async fn call<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut GatewayConnection) -> R + Send + 'static,
    ) -> Option<R> {
        let mut c = self.0.take()?;
        let gate = self.1.clone();
        let (c, r) = tokio::task::spawn_blocking(move || {
            let _in_core = gate.blocking();
            let r = f(&mut c);
            (c, r)
        })
        .await
        .ok()?;
        self.0 = Some(c);
        Some(r)
    }
}

/// Sends the session's close frame right after the frame being written,
/// dropping the frames not begun. With `code` (4008 `slow_consumer`, 1001
/// `server_shutdown`) the host ends the session; without, the session
/// has ended itself and its close frame waits behind output not pulled
/// yet. Either way the library writes the ack, frees the slot and gives
/// the close frame, last of what `poll_transmit` returns.
async fn close_next(conn: &mut Conn, unsent: &mut Outbox, code: Option<CloseCode>, peer_eof: bool) -> Ended {
    let out = unsent.take_spare();
    let Some(out) = conn
        .call(move |c| {
            let mut out = out;
            if code.is_none_or(|code| c.close(code)) {
                while c.poll_transmit(&mut out) > 0 {}
            }
            out
        })
        .await
    else {
        return Ended { peer_eof, abandon: true, ..Ended::default() };
    };
    unsent.append(out);
    unsent.close_next();
    Ended { server_closed: true, peer_eof, forced: true, ..Ended::default() }
}

/// How a gateway connection ended.
#[derive(Default)]
struct Ended {
    /// The server sent (or queued) a close frame.
    server_closed: bool,
    /// The bot closed its side.
    peer_eof: bool,
    /// The server closed on its own: the last bytes get `CLOSE_GRACE`.
    forced: bool,
    /// Nothing more is worth sending.
    abandon: bool,
}

/// Runs one gateway connection until it closes.
pub(crate) async fn run<T>(inner: &Arc<Inner>, conn: GatewayConnection, io: T)
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let bot_id = conn.bot_id().to_string();
    let wake = Arc::new(Notify::new());
    // Registered before the first poll, so no event can slip between.
    let id = inner.registry.register(&bot_id, wake.clone());
    let (mut rd, mut wr) = tokio::io::split(io);
    let mut conn = Conn(Some(Box::new(conn)), inner.gate.clone());
    let mut unsent = Outbox::default();
    let ended = pump(inner, &mut conn, &mut rd, &mut wr, &wake, &mut unsent).await;
    inner.registry.unregister(&bot_id, id);
    // Frees the connection slot (and writes a pending ack) before the
    // bounded last writes below.
    if let Some(c) = conn.0.take() {
        let gate = inner.gate.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let _in_core = gate.blocking();
            drop(c)
        })
        .await;
    }
    let until = Instant::now() + if ended.forced { CLOSE_GRACE } else { LINGER };
    if !ended.abandon {
        let _ = tokio::time::timeout_at(until, wr.write_all(unsent.pending())).await;
    }
    if ended.server_closed && !ended.peer_eof {
        // Lets the bot read the close frame and answer it.
        let _ = tokio::time::timeout_at(until, wr.shutdown()).await;
        let mut sink = vec![0u8; 4096];
        while let Ok(Ok(n)) = tokio::time::timeout_at(until, rd.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
    }
    let _ = tokio::time::timeout_at(until, wr.shutdown()).await;
}

/// Pulls the gateway's output while the bot keeps up, writes it as the
/// socket takes it, feeds the bot's input and checks deadlines; until
/// either side closes. Each turn: [`poll_gateway`], [`end_of_turn`],
/// then [`wait_for_io`].
async fn pump<R, W>(inner: &Inner, conn: &mut Conn, rd: &mut R, wr: &mut W, wake: &Notify, unsent: &mut Outbox) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let svc = inner.svc.clone();
    let manual = svc.config().clock == ClockKind::Manual;
    let mut st = PumpState::default();
    let mut input = vec![0u8; 16 * 1024];
    loop {
        let now = svc.now_ms();
        let drained = st.drained_at.take();
        let Some(step) = poll_gateway(conn, unsent, &mut st, now, drained).await else {
            return abandoned(st.peer_eof);
        };
        let over = unsent.len() >= HIGH_WATER && drained.is_none();
        if let Some(ended) = end_of_turn(inner, conn, unsent, &st, &step, over).await {
            return ended;
        }
        let wait = if unsent.is_empty() && step.more {
            // All written and the gateway has more: pull again at once.
            Duration::ZERO
        } else if over {
            WRITE_TICK
        } else {
            wait_for(step.deadline, now, manual)
        };
        let io = Io { rd: &mut *rd, wr: &mut *wr, input: &mut input };
        if let Err(ended) = wait_for_io(inner, conn, io, wake, unsent, &mut st, step.wants_input, wait).await {
            return ended;
        }
    }
}

/// What the pump remembers from one turn to the next.
#[derive(Default)]
struct PumpState {
    /// The session's end, once the gateway reported it.
    session_end: Option<(u16, CloseCode)>,
    /// The bot closed its side.
    peer_eof: bool,
    /// Service-clock time at which the socket took enough, since the last
    /// look, to bring the unsent bytes under the mark: the bot keeps up,
    /// however slowly. Their time over the mark ended then, not at the next
    /// look (the manual clock may have jumped in between); the library,
    /// which keeps that time (4008 `slow_consumer`), is told so.
    drained_at: Option<u64>,
}

/// What one look at the gateway said, besides the output it gave.
struct Step {
    /// It has more output past its budget.
    more: bool,
    /// It takes the bot's bytes now.
    wants_input: bool,
    closed: bool,
    /// Its next deadline.
    deadline: Option<u64>,
}

/// The socket's halves and the read buffer.
struct Io<'a, R, W> {
    rd: &'a mut R,
    wr: &'a mut W,
    input: &'a mut Vec<u8>,
}

/// The bot went away, or a core call panicked: nothing more is written.
fn abandoned(peer_eof: bool) -> Ended {
    Ended { peer_eof, abandon: true, ..Ended::default() }
}

/// Tells the gateway what this task still holds and the time, and takes
/// its output (into `unsent`) and events. `None` if a core call panicked.
async fn poll_gateway(
    conn: &mut Conn,
    unsent: &mut Outbox,
    st: &mut PumpState,
    now: u64,
    drained: Option<u64>,
) -> Option<Step> {
    let (held, at) = (unsent.len(), drained.unwrap_or(now));
    let mut out = unsent.take_spare();
    // The library gives output up to its budget, counting what this
    // task still holds; past it the events wait in the database.
    let (out, more, wants_input, end, closed, deadline) = conn
        .call(move |c| {
            c.handle_unsent(held, at);
            c.handle_timeout(now);
            while c.poll_transmit(&mut out) > 0 {}
            let mut end = None;
            while let Some(GatewayEvent::Closed { code, reason }) = c.poll_event() {
                end = Some((code, reason));
            }
            (out, c.wants_transmit(), c.wants_input(), end, c.is_closed(), c.poll_timeout())
        })
        .await?;
    unsent.append(out);
    if end.is_some() {
        st.session_end = end;
    }
    Some(Step { more, wants_input, closed, deadline })
}

/// Whether the connection ends after this look, and how: the session is
/// over behind output the bot does not read, the gateway closed, the bot
/// closed, or the server stops.
async fn end_of_turn(
    inner: &Inner,
    conn: &mut Conn,
    unsent: &mut Outbox,
    st: &PumpState,
    step: &Step,
    over: bool,
) -> Option<Ended> {
    if let (true, Some((_, reason))) = (over, st.session_end) {
        // The session is over (4008 `slow_consumer` among others) but
        // its close frame (the last one it gave) sits behind output the
        // bot is not reading: send the close next, drop the rest.
        if matches!(reason, CloseCode::ClosedByBot | CloseCode::ProtocolError) {
            return Some(abandoned(st.peer_eof));
        }
        return Some(close_next(conn, unsent, None, st.peer_eof).await);
    }
    if step.closed {
        return Some(Ended { server_closed: true, peer_eof: st.peer_eof, ..Ended::default() });
    }
    if st.peer_eof {
        return Some(Ended { peer_eof: true, ..Ended::default() });
    }
    if inner.stop.load(Ordering::SeqCst) {
        return Some(close_next(conn, unsent, Some(CLOSE_SERVER_SHUTDOWN), st.peer_eof).await);
    }
    None
}

/// Waits up to `wait` for the first of: the bot's bytes (fed to the
/// gateway), the socket taking ours, a wake-up, a stop. `Err` when the
/// connection is to be abandoned.
#[allow(clippy::too_many_arguments)]
async fn wait_for_io<R, W>(
    inner: &Inner,
    conn: &mut Conn,
    io: Io<'_, R, W>,
    wake: &Notify,
    unsent: &mut Outbox,
    st: &mut PumpState,
    wants_input: bool,
    wait: Duration,
) -> Result<(), Ended>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let svc = &inner.svc;
    let stopped = inner.stop_notify.notified();
    tokio::pin!(stopped);
    // Registered before the flag is read again: a stop in between
    // still wakes this wait.
    stopped.as_mut().enable();
    if inner.stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let has_output = !unsent.is_empty();
    tokio::select! {
        biased;
        // Not while the library holds its budget of replies: the bot's
        // bytes stay in its socket, and then it blocks.
        r = io.rd.read(io.input), if wants_input => match r {
            Ok(0) | Err(_) => st.peer_eof = true,
            Ok(n) => {
                let bytes = io.input[..n].to_vec();
                let now = svc.now_ms();
                if conn.call(move |c| c.handle_input(&bytes, now)).await.is_none() {
                    return Err(abandoned(st.peer_eof));
                }
            }
        },
        w = io.wr.write(unsent.pending()), if has_output => match w {
            Ok(0) | Err(_) => return Err(abandoned(st.peer_eof)),
            Ok(n) => {
                unsent.advance(n);
                if unsent.len() < HIGH_WATER && st.drained_at.is_none() {
                    st.drained_at = Some(svc.now_ms());
                }
            }
        },
        _ = wake.notified() => {}
        _ = &mut stopped => {}
        _ = tokio::time::sleep(wait) => {}
    }
    Ok(())
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
