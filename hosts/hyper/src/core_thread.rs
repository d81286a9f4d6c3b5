//! The core threads: where the bot requests of every connection meet and
//! are answered in batches, as the C server's event loop answers them.
//!
//! A connection's task queues its parsed request here with a one-shot
//! channel for the answer, and awaits it. A core thread takes *everything*
//! queued at once and answers it: the bot writes in one
//! [`Service::handle_http_batch`] call (one transaction and one fsync for all of
//! them: the group commit forms on its own, from what arrived while the
//! last batch ran), getMe and the rest one by one (they take no
//! transaction). Then it sends each answer back. Under load that is one
//! thread wake per batch instead of two per request (a hop to tokio's
//! blocking pool and back), and the reactor never runs a blocking call.
//!
//! As many threads as the library's `Service::batch_threads` (one on
//! SQLite, as the C server has one loop: what arrives while a batch runs
//! its statements and its fsync is the next batch). A second thread
//! overlaps one batch's COMMIT with the next one's statements but splits
//! the batches, so it starts a batch beside another only for a large group
//! (`policy::host::starts_batch`).
//!
//! A 200 still means durable: `handle_http_batch` returns only once its commit
//! is on disk.
//!
//! On a database whose calls cannot block (`:memory:`: no disk, no
//! network) there is no core thread: [`OnReactor`] answers the same takes
//! on the reactor, in a task that runs once the connections made ready by
//! one turn of the reactor have queued their requests. That is the C
//! server's loop (read everything ready, answer it in one batch, write
//! the answers) with no thread hop at all.

use botspace::Service;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use tokio::sync::{oneshot, Notify};

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

/// Most requests in one `handle_http_batch` call (the library's host policy).
const MAX_BATCH: usize = botspace::policy::host::MAX_QUEUED_BATCH;

/// How a queued request is answered.
pub(crate) enum Kind {
    /// A bot method that may write: with the other writes of the batch.
    Batch,
    /// On its own (`handle_http`): getMe, which reads a cached identity
    /// and takes no transaction, and anything that is not a bot method.
    Alone,
}

pub(crate) struct Job {
    /// As hyper parsed it, with its body read whole.
    pub request: http::Request<bytes::Bytes>,
    pub kind: Kind,
    pub reply: oneshot::Sender<http::Response<Vec<u8>>>,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    closed: bool,
    /// Core threads asleep on the condition variable: only then does a
    /// submit pay for a wake-up.
    idle: usize,
    /// Core threads answering a take now.
    running: usize,
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
                    crate::say::log(
                        botspace::log::Level::Warn,
                        &format!("cannot start a core thread (requests go to the blocking pool): {e}"),
                    );
                    let me = CoreThreads { shared, handles: Mutex::new(handles) };
                    me.close();
                    return None;
                }
            }
        }
        Some(CoreThreads { shared, handles: Mutex::new(handles) })
    }

    /// Queues a job; `Err` (the job dropped) when the threads have been
    /// closed.
    pub(crate) fn submit(&self, job: Job) -> Result<(), ()> {
        let mut q = self.shared.lock();
        if q.closed {
            return Err(());
        }
        q.jobs.push(job);
        // Only a thread that would take the queue is woken: while a batch
        // runs, a small queue waits for that batch's thread.
        let wake = q.idle > 0 && botspace::policy::host::starts_batch(q.running, q.jobs.len());
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
            while !botspace::policy::host::starts_batch(q.running, q.jobs.len()) && !q.closed {
                q.idle += 1;
                q = sh.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                q.idle -= 1;
            }
            if q.jobs.is_empty() {
                return;
            }
            q.running += 1;
            std::mem::take(&mut q.jobs)
        };
        {
            let _in_core = gate.blocking();
            answer(svc, jobs);
        }
        sh.lock().running -= 1;
    }
}

/// The queue of [`OnReactor`], shared with its task.
#[derive(Default)]
struct ReactorQueue {
    jobs: Mutex<Vec<Job>>,
    wake: Notify,
    started: AtomicBool,
    closed: AtomicBool,
    /// Takes answered so far (each one `answer` call).
    takes: std::sync::atomic::AtomicU64,
}

impl ReactorQueue {
    fn take(&self) -> Vec<Job> {
        std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Bot requests answered on the reactor, in batches, for a service whose
/// calls never wait on a disk or a network (`:memory:`).
///
/// A request is queued and the answering task woken; that task first
/// yields, so that every connection the same turn of the reactor made
/// ready queues its request too, then answers the whole take as a core
/// thread would ([`answer`]). On a current-thread runtime (the example
/// server on `:memory:`) nothing crosses a thread. The task ends once the
/// app is dropped.
#[derive(Default)]
pub(crate) struct OnReactor {
    q: Arc<ReactorQueue>,
}

impl OnReactor {
    /// Queues a job; the answering task is started on the current runtime
    /// by the first one.
    pub(crate) fn submit(&self, svc: &Arc<Service>, job: Job) {
        self.q.jobs.lock().unwrap_or_else(|e| e.into_inner()).push(job);
        if !self.q.started.swap(true, Ordering::AcqRel) {
            let (q, svc) = (self.q.clone(), svc.clone());
            tokio::spawn(async move {
                loop {
                    q.wake.notified().await;
                    if q.closed.load(Ordering::Acquire) {
                        // Nothing queued is left unanswered: the app is
                        // gone, so every job's connection is too.
                        return;
                    }
                    // After the other ready connections have queued theirs.
                    tokio::task::yield_now().await;
                    let jobs = q.take();
                    if !jobs.is_empty() {
                        q.takes.fetch_add(1, Ordering::Relaxed);
                        answer(&svc, jobs);
                    }
                }
            });
        }
        // Stores a permit when the task is busy or not yet waiting: no
        // request is left behind.
        self.q.wake.notify_one();
    }
}

#[cfg(test)]
impl OnReactor {
    fn takes(&self) -> u64 {
        self.q.takes.load(Ordering::Relaxed)
    }
}

impl Drop for OnReactor {
    fn drop(&mut self) {
        self.q.closed.store(true, Ordering::Release);
        self.q.wake.notify_one();
    }
}

/// Answers one take of the queue. A panic in the core drops the
/// affected replies: their connections answer 500, the thread goes on.
fn answer(svc: &Service, jobs: Vec<Job>) {
    let mut batch = Vec::new();
    for job in jobs {
        match job.kind {
            Kind::Alone => {
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| svc.handle_http(&job.request)));
                if let Ok(out) = out {
                    let _ = job.reply.send(out);
                }
            }
            Kind::Batch => batch.push(job),
        }
    }
    // At most one request per connection is in flight (hyper answers a
    // connection's requests in turn), so a take is at most the open
    // connections; past `MAX_BATCH` it commits in several transactions, so
    // one does not grow without bound (a loop's turn, as the C server's,
    // takes up to `policy::host::MAX_BATCH`).
    let mut batch = batch.into_iter();
    loop {
        let part: Vec<Job> = batch.by_ref().take(MAX_BATCH).collect();
        if part.is_empty() {
            return;
        }
        let requests: Vec<&http::Request<bytes::Bytes>> = part.iter().map(|j| &j.request).collect();
        // Requests of many connections, arrived concurrently: a group.
        let outs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| svc.handle_http_group(&requests)));
        drop(requests);
        if let Ok(outs) = outs {
            for (job, out) in part.into_iter().zip(outs) {
                let _ = job.reply.send(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botspace::Config;

    const SECRET: &str = "core-thread-test-secret-0001";

    fn call(svc: &Service, path: &str, auth: &str, body: &str) -> serde_json::Value {
        let req = format!(
            "POST {path} HTTP/1.1\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        body_of(&svc.handle_request(req.as_bytes()))
    }

    /// An official bot (no rate limits) with its started private chat:
    /// its token and the chat's id.
    fn bot_with_chat(svc: &Service) -> (String, String) {
        let admin = format!("Admin {SECRET}");
        let user = call(svc, "/admin/createUser", &admin, r#"{"display_name":"U"}"#)["result"]["id"].clone();
        let bot =
            call(svc, "/admin/createBot", &admin, r#"{"display_name":"B","handle":"b_bot","quota_tier":"official"}"#);
        let token = bot["result"]["token"].as_str().unwrap().to_string();
        let start = serde_json::json!({"user_id": user, "bot_id": bot["result"]["bot"]["id"]}).to_string();
        let chat = call(svc, "/admin/startBot", &admin, &start)["result"]["id"].as_str().unwrap().to_string();
        (token, chat)
    }

    /// A sendMessage of `text` queued as a batch job; its answer arrives on
    /// the returned receiver.
    fn send_job(token: &str, chat: &str, text: &str) -> (Job, oneshot::Receiver<http::Response<Vec<u8>>>) {
        let body = format!(r#"{{"chat_id":"{chat}","text":"{text}"}}"#);
        let request = http::Request::post("/bot/sendMessage")
            .header("authorization", format!("Bot {token}"))
            .header("content-type", "application/json")
            .body(bytes::Bytes::from(body))
            .unwrap();
        let (tx, rx) = oneshot::channel();
        (Job { request, kind: Kind::Batch, reply: tx }, rx)
    }

    fn body_of(resp: &[u8]) -> serde_json::Value {
        let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&resp[at..]).unwrap()
    }

    /// The text of a sendMessage's 200.
    fn sent_text(out: http::Response<Vec<u8>>) -> String {
        assert_eq!(out.status(), 200, "{}", String::from_utf8_lossy(out.body()));
        let v: serde_json::Value = serde_json::from_slice(out.body()).unwrap();
        v["result"]["text"].as_str().unwrap().to_string()
    }

    #[test]
    fn one_take_of_the_queue_is_one_transaction_and_one_fsync_with_each_request_answered() {
        let dir = std::env::temp_dir().join(format!("botspace-core-thread-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("b.db").to_string_lossy().into_owned();
        let svc = Service::open(Config::default().with(|c| {
            c.database = db;
            c.admin_secret = SECRET.into();
        }))
        .unwrap();
        let (token, chat) = bot_with_chat(&svc);

        let before = svc.commit_stats();
        let mut replies = Vec::new();
        let mut jobs = Vec::new();
        for i in 0..8 {
            let (job, rx) = send_job(&token, &chat, &format!("m{i}"));
            jobs.push(job);
            replies.push(rx);
        }
        let (tx, get_me) = oneshot::channel();
        let request =
            http::Request::post("/bot/getMe").header("authorization", format!("Bot {token}")).body(Default::default());
        jobs.push(Job { request: request.unwrap(), kind: Kind::Alone, reply: tx });
        answer(&svc, jobs);
        let after = svc.commit_stats();
        assert_eq!((after.durable_commits - before.durable_commits, after.syncs - before.syncs), (1, 1));
        let texts: Vec<String> =
            replies.into_iter().map(|mut rx| sent_text(rx.try_recv().expect("answered"))).collect();
        assert_eq!(texts, (0..8).map(|i| format!("m{i}")).collect::<Vec<_>>());
        let me: serde_json::Value = serde_json::from_slice(get_me.blocking_recv().unwrap().body()).unwrap();
        assert_eq!(me["result"]["handle"], "b_bot", "{me}");
        drop(svc);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn on_the_reactor_the_requests_one_turn_made_ready_are_one_take_each_answered() {
        let svc = Arc::new(
            Service::open(Config::default().with(|c| {
                c.database = ":memory:".into();
                c.admin_secret = SECRET.into();
            }))
            .unwrap(),
        );
        let (token, chat) = bot_with_chat(&svc);

        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let reactor = Arc::new(OnReactor::default());
        let texts = rt.block_on(async {
            // Eight connections made ready by one turn: each queues its
            // request before the answering task runs.
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let (svc, reactor, chat, token) = (svc.clone(), reactor.clone(), chat.clone(), token.clone());
                    tokio::spawn(async move {
                        let (job, rx) = send_job(&token, &chat, &format!("m{i}"));
                        reactor.submit(&svc, job);
                        rx.await.unwrap()
                    })
                })
                .collect();
            let mut texts = Vec::new();
            for t in tasks {
                texts.push(sent_text(t.await.unwrap()));
            }
            texts
        });
        assert_eq!(texts, (0..8).map(|i| format!("m{i}")).collect::<Vec<_>>());
        assert_eq!(reactor.takes(), 1);
        // The history is whole, numbered in the order the take answered.
        let history = call(
            &svc,
            "/admin/getChatHistory",
            &format!("Admin {SECRET}"),
            &format!(r#"{{"chat_id":"{chat}","limit":100}}"#),
        );
        let ids: Vec<&str> =
            history["result"].as_array().unwrap().iter().map(|m| m["message_id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5", "6", "7", "8"], "{history}");
    }

    #[test]
    fn a_get_me_on_the_worker_is_refused_while_anything_is_in_the_core() {
        let gate = Gate::default();
        let in_core = gate.blocking();
        assert!(gate.try_exclusive().is_none());
        drop(in_core);
        assert!(gate.try_exclusive().is_some());
    }
}
