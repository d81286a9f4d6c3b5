//! Long polls the core parked (`getUpdates` with a `timeout` and nothing
//! to return, [`Service::handle`]): each waiting request's future
//! awaits a oneshot, and one task (the "parking task") calls
//! [`Service::poll_parked`] when the wake hook says a parked poll is due or
//! when the core's next deadline ([`Service::parked_timeout`]) comes, and
//! completes the oneshots. No thread waits on a poll: the task sleeps on a
//! `Notify` and a timer, and its core calls run on the blocking pool. The
//! core's answers go back as the core wrote them (bytes): the tower service
//! reads them into `http::Response`s for hyper, the example server's
//! connection sends them as they are.

use crate::Inner;
use botspace::{Handled, PollId, Service};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// The core's answer, as it wrote it.
type Response = Vec<u8>;

/// The waiting requests of one app, by poll.
#[derive(Default)]
pub(crate) struct Waiters {
    slots: Mutex<HashMap<PollId, Slot>>,
    /// Wakes the parking task: a poll is due, a new one parked (its
    /// deadline may be the earliest), or the app stops.
    pub(crate) notify: Arc<Notify>,
    started: AtomicBool,
}

enum Slot {
    Waiting(oneshot::Sender<Response>),
    /// Answered before its request's future came to wait for it (rare:
    /// boxed, so that a parked answer stays small on its way back from the
    /// blocking pool).
    Ready(Box<Response>),
}

enum Wait {
    Ready(Box<Response>),
    Rx(oneshot::Receiver<Response>),
}

impl Waiters {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<PollId, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait(&self, id: PollId) -> Wait {
        let mut slots = self.slots();
        if let Some(Slot::Ready(out)) = slots.remove(&id) {
            return Wait::Ready(out);
        }
        let (tx, rx) = oneshot::channel();
        slots.insert(id, Slot::Waiting(tx));
        Wait::Rx(rx)
    }

    fn deliver(&self, id: PollId, out: Response) {
        let mut slots = self.slots();
        match slots.remove(&id) {
            Some(Slot::Waiting(tx)) => {
                // A request gone meanwhile has cancelled its poll: nothing to do.
                let _ = tx.send(out);
            }
            _ => {
                slots.insert(id, Slot::Ready(Box::new(out)));
            }
        }
    }

    /// The wake hook ran: wakes the task only when a poll is due.
    pub(crate) fn woken(&self, svc: &Service) {
        if svc.parked_timeout() == Some(0) {
            self.notify.notify_one();
        }
    }
}

/// Forgets a parked poll whose request future is dropped unanswered (the
/// connection closed or was evicted, the server stopped).
struct Cancel<'a> {
    inner: &'a Arc<Inner>,
    id: PollId,
    done: bool,
}

impl Drop for Cancel<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.svc.cancel_parked(self.id);
            self.inner.parked.slots().remove(&self.id);
        }
    }
}

/// Answers a getUpdates: at once, or when the core has its answer.
pub(crate) async fn answer(inner: &Arc<Inner>, req: crate::Received, peer: Option<Arc<str>>) -> Result<Response, ()> {
    start(inner);
    let app = inner.clone();
    let answered = tokio::task::spawn_blocking(move || {
        let _in_core = app.gate.blocking();
        let one = [req.incoming().from_peer(peer.as_deref().unwrap_or(""))];
        // Stopping, the core parks nothing more (the drain would wait).
        match app.svc.handle(&one, app.svc.now_ms()).pop() {
            Some(Handled::Now(out)) => Ok(out),
            // The slot is taken here, on the blocking thread, which runs to
            // the end even if the request's future is dropped meanwhile:
            // then the receiver is dropped with the join handle, the
            // answer finds no one and the slot goes.
            Some(Handled::Parked(id)) => Err((id, app.parked.wait(id))),
            None => Ok(botspace::connection::answer_failed()),
        }
    })
    .await
    .map_err(|_| ())?;
    let (id, wait) = match answered {
        Ok(out) => return Ok(out),
        Err(parked) => parked,
    };
    let mut cancel = Cancel { inner, id, done: false };
    let rx = match wait {
        Wait::Ready(out) => {
            cancel.done = true;
            return Ok(*out);
        }
        Wait::Rx(rx) => rx,
    };
    // Its deadline may be the earliest: the task sets its timer again.
    inner.parked.notify.notify_one();
    let out = rx.await.map_err(|_| ());
    cancel.done = true;
    out
}

/// Starts the parking task, once per app, on the runtime of the first
/// getUpdates.
fn start(inner: &Arc<Inner>) {
    if inner.parked.started.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(run(Arc::downgrade(inner), inner.parked.notify.clone()));
}

/// The parking task: takes the ready answers, then sleeps until a wake-up
/// or the next deadline. Holds the app only while it works, so dropping
/// the app ends it at its next wake-up.
async fn run(app: Weak<Inner>, notify: Arc<Notify>) {
    loop {
        let Some(inner) = app.upgrade() else { return };
        let svc = inner.svc.clone();
        let gate = inner.gate.clone();
        // Stopping: every parked poll is answered now (`[]`, or its events).
        let stopping = inner.stop.load(Ordering::SeqCst);
        let work = tokio::task::spawn_blocking(move || {
            let _in_core = gate.blocking();
            let now = if stopping { u64::MAX } else { svc.now_ms() };
            let answers = svc.poll_parked(now);
            (answers, svc.parked_timeout().map(|at| at.saturating_sub(svc.now_ms())))
        })
        .await;
        let Ok((answers, next)) = work else { return };
        for (id, out) in answers {
            inner.parked.deliver(id, out);
        }
        drop(inner);
        match next {
            Some(0) => continue,
            Some(ms) => {
                let _ = tokio::time::timeout(Duration::from_millis(ms), notify.notified()).await;
            }
            None => notify.notified().await,
        }
    }
}
