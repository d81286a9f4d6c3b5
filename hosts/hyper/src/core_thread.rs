//! The core threads: where the bot requests of every connection meet and
//! are answered in batches, as the C server's event loop answers them.
//!
//! A connection's task queues its request's bytes here with a one-shot
//! channel for the answer, and awaits it. A core thread takes *everything*
//! queued at once and answers it: the bot writes in one
//! [`Service::handle_batch`] call (one transaction and one fsync for all of
//! them: the group commit forms on its own, from what arrived while the
//! last batch ran), getMe and the rest one by one (they take no
//! transaction). Then it sends each answer back. Under load that is one
//! thread wake per batch instead of two per request (a hop to tokio's
//! blocking pool and back), and the reactor never runs a blocking call.
//!
//! Two threads by default: while one waits for its batch's fsync (after
//! the database lock is released), the other runs the next batch's
//! statements; so one batch's disk wait overlaps the next one's work, as
//! the core's own group commit arranges for threads.
//!
//! A 200 still means durable: `handle_batch` returns only once its commit
//! is on disk.

use botspace::Service;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// Who is in the core now. Every blocking call this crate makes into the
/// service (a core thread's batch with its fsync, a gateway session's
/// call, a host call on the blocking pool) holds it shared for the whole
/// call; a getMe answered on a tokio worker holds it exclusively and only
/// if it is free at once (`try_write`). So a getMe on the worker never
/// waits: nothing of ours holds the service's lock, and every commit made
/// has been synced (each blocking call returns only after its fsync).
/// Shared holders never wait for each other; they wait at most for one
/// getMe (a cache lookup) to finish.
#[derive(Default)]
pub(crate) struct Gate(RwLock<()>);

impl Gate {
    pub(crate) fn blocking(&self) -> RwLockReadGuard<'_, ()> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn try_exclusive(&self) -> Option<RwLockWriteGuard<'_, ()>> {
        self.0.try_write().ok()
    }
}

/// How a queued request is answered.
pub(crate) enum Kind {
    /// A bot method that may write: with the other writes of the batch.
    Batch,
    /// On its own (`handle_request`): getMe, which reads a cached identity
    /// and takes no transaction, and anything that is not a bot method.
    Alone,
}

pub(crate) struct Job {
    pub request: Vec<u8>,
    pub kind: Kind,
    pub reply: oneshot::Sender<Vec<u8>>,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    closed: bool,
    /// Core threads asleep on the condition variable: only then does a
    /// submit pay for a wake-up.
    idle: usize,
}

struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Every step leaves the queue consistent: a poisoned lock is usable.
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) struct CoreThreads {
    shared: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl CoreThreads {
    /// Starts `n` core threads on `svc`; none when they cannot be started
    /// (the caller then uses tokio's blocking pool).
    pub(crate) fn start(svc: &Arc<Service>, gate: &Arc<Gate>, n: usize) -> Option<CoreThreads> {
        let shared = Arc::new(Shared { q: Mutex::default(), cv: Condvar::new() });
        let mut handles = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let (svc, sh, gate) = (svc.clone(), shared.clone(), gate.clone());
            match std::thread::Builder::new().name(format!("botspace-core-{i}")).spawn(move || run(&svc, &sh, &gate)) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    eprintln!("cannot start a core thread (requests go to the blocking pool): {e}");
                    let me = CoreThreads { shared, handles: Mutex::new(handles) };
                    me.close();
                    return None;
                }
            }
        }
        Some(CoreThreads { shared, handles: Mutex::new(handles) })
    }

    /// Queues a job; gives it back when the threads have been closed.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let mut q = self.shared.lock();
        if q.closed {
            return Err(job);
        }
        q.jobs.push(job);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.shared.cv.notify_one();
        }
        Ok(())
    }

    /// Answers what is queued, then ends the threads and waits for them
    /// (they hold the service: once joined, it can close).
    pub(crate) fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.cv.notify_all();
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        let me = std::thread::current().id();
        for h in handles {
            // The last clone of the app may be dropped by a core thread
            // itself (a wake hook upgrades its weak reference): it ends
            // when its loop sees the queue closed.
            if h.thread().id() == me {
                continue;
            }
            let _ = h.join();
        }
    }
}

impl Drop for CoreThreads {
    fn drop(&mut self) {
        self.close();
    }
}

fn run(svc: &Service, sh: &Shared, gate: &Gate) {
    loop {
        let jobs = {
            let mut q = sh.lock();
            while q.jobs.is_empty() && !q.closed {
                q.idle += 1;
                q = sh.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                q.idle -= 1;
            }
            if q.jobs.is_empty() {
                return;
            }
            std::mem::take(&mut q.jobs)
        };
        let _in_core = gate.blocking();
        answer(svc, jobs);
    }
}

/// Answers one take of the queue. A panic in the core drops the
/// affected replies: their connections answer 500, the thread goes on.
fn answer(svc: &Service, jobs: Vec<Job>) {
    let mut batch = Vec::new();
    for job in jobs {
        match job.kind {
            Kind::Alone => {
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| svc.handle_request(&job.request)));
                if let Ok(out) = out {
                    let _ = job.reply.send(out);
                }
            }
            Kind::Batch => batch.push(job),
        }
    }
    if batch.is_empty() {
        return;
    }
    let requests: Vec<&[u8]> = batch.iter().map(|j| j.request.as_slice()).collect();
    let outs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| svc.handle_batch(&requests)));
    drop(requests);
    if let Ok(outs) = outs {
        for (job, out) in batch.into_iter().zip(outs) {
            let _ = job.reply.send(out);
        }
    }
}
