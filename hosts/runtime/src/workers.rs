//! The core threads: a batch queue for a threaded Rust host, where the bot
//! requests of every connection meet and are answered in batches, as the
//! C server's loop answers them ([`botspace::HttpRound`]).
//!
//! A host queues a request with its reply ([`CoreWorkers::submit`]) and
//! awaits the reply. The request is what the host has ([`Received`]): the
//! `http::Request` its HTTP stack parsed (a tower service under hyper), or
//! the bytes of one whole request as the core's connection framed them (a
//! host that reads its own sockets, as the example server and the C server
//! do), which the core reads as they are. A core thread takes *everything*
//! queued at once and answers it ([`answer_take`]): the bot writes in one
//! [`Service::handle`] call (one transaction and one fsync for
//! all of them: the group commit forms on its own, from what arrived while
//! the last take ran), getMe and the rest one by one (they take no
//! transaction). Then it sends each answer back, as the core wrote it
//! (HTTP/1.1 bytes): a host with a socket writes them out, a host whose
//! stack wants an `http::Response` reads them into one
//! ([`botspace::into_http_response`]). Under load that is one
//! thread wake per batch instead of two per request (a hop to a blocking
//! pool and back), and the host's event loop never runs a blocking call.
//!
//! As many threads as the host asks, normally [`Service::batch_threads`]
//! (one on SQLite, as the C server has one loop: what arrives while a
//! batch runs its statements and its fsync is the next batch). A second
//! thread overlaps one batch's COMMIT with the next one's statements but
//! splits the batches, so it starts a batch beside another only for a
//! large group ([`crate::host::starts_batch`]).
//!
//! A 200 still means durable: `handle` returns only once its
//! commit is on disk, and only then is the reply sent.
//!
//! The library starts these threads only when a host asks for them; it
//! needs threads, so it is not in the WebAssembly build.

use crate::host::{starts_batch, MAX_QUEUED_BATCH};
use botspace::connection::lane::Kind;
use botspace::{Incoming, RequestHead, Service};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

/// Where the answer to a queued request goes: the host's own channel back
/// to the connection that sent it (hyper's host: a tokio one-shot).
///
/// A reply dropped without [`ReplyTo::send`] means the core call failed (it
/// panicked, or the queue was dropped with the job in it): the host then
/// answers the core's 500 `answer_failed` ([`botspace::connection::answer_failed`]).
///
/// A trait the queue is generic over, rather than a boxed closure: the
/// reply is stored in the queue as it is, with no allocation and no
/// indirect call per request (a host's channel sender is already the
/// whole reply), and the core needs no async runtime of its own.
pub trait ReplyTo: Send + 'static {
    /// Delivers the core's answer as the core wrote it (HTTP/1.1 bytes:
    /// status line, header lines, body), with no `Connection` header (the
    /// host's connection adds the one the request calls for). Called on a
    /// core thread: it must not block (a channel send does not).
    fn send(self, answer: Vec<u8>);
}

impl ReplyTo for std::sync::mpsc::Sender<Vec<u8>> {
    fn send(self, answer: Vec<u8>) {
        // The receiver gone: its connection is too, nobody to answer.
        let _ = std::sync::mpsc::Sender::send(&self, answer);
    }
}

impl ReplyTo for Box<dyn FnOnce(Vec<u8>) + Send> {
    fn send(self, answer: Vec<u8>) {
        self(answer)
    }
}

/// A request read whole, as the host that read it holds it: the core reads
/// either where it is ([`Received::incoming`]), with no second parse and
/// no copy into the other form.
pub enum Received<B> {
    /// As the host's HTTP stack parsed it (hyper's, under a tower
    /// service), with its body read whole.
    Http(http::Request<B>),
    /// One whole HTTP/1.1 request as the core's connection framed it
    /// (`HttpConnection::request`, [`botspace::RequestFramer`]), with the
    /// head the framer read from it.
    Bytes {
        /// The request's bytes: request line, header lines, body.
        request: B,
        /// Where its method and path are (`Taken::head`).
        head: RequestHead,
    },
}

impl<B: AsRef<[u8]>> Received<B> {
    /// The request as the core's way in takes it: [`Incoming::http`] or
    /// [`Incoming::bytes`].
    pub fn incoming(&self) -> Incoming<'_> {
        match self {
            Received::Http(r) => Incoming::http(r),
            Received::Bytes { request, .. } => Incoming::bytes(request.as_ref()),
        }
    }

    /// The path without the query: the parsed URI's, or the one the framer
    /// found in the request line.
    pub fn path(&self) -> &str {
        match self {
            Received::Http(r) => r.uri().path(),
            Received::Bytes { request, head } => head.path(request.as_ref()),
        }
    }

    /// The method, as the request line has it.
    pub fn method(&self) -> &str {
        match self {
            Received::Http(r) => r.method().as_str(),
            Received::Bytes { request, head } => head.method(request.as_ref()),
        }
    }
}

/// A request queued for the core, with how it is answered and where its
/// answer goes.
pub struct QueuedRequest<B, R> {
    /// The request, with its body whole, as the host has it.
    pub request: Received<B>,
    /// [`Kind::of`] its route.
    pub kind: Kind,
    /// Where its answer goes.
    pub reply: R,
}

impl<B: AsRef<[u8]>, R> std::fmt::Debug for QueuedRequest<B, R> {
    // Neither the body nor the reply need be `Debug`: what names the job
    // is its method, path and kind.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedRequest")
            .field("method", &self.request.method())
            .field("path", &self.request.path())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Who is in the core now, for a host that answers a request from the
/// core's caches on the thread at hand ([`botspace::connection::lane::answers_from_cache`]).
///
/// Every blocking call a host makes into the service (a core thread's
/// take with its fsync, which [`CoreWorkers`] holds it for; a gateway
/// session's call; a host call on a blocking pool) holds it shared
/// ([`CoreGate::blocking`]) for the whole call; a getMe answered on an
/// event-loop thread holds it exclusively and only if it is free at once
/// ([`CoreGate::try_exclusive`]). So that getMe never waits: nothing of
/// the host's holds the service's lock, and every commit made has been
/// synced (each blocking call returns only after its fsync). Shared
/// holders never wait for each other; they wait at most for one getMe (a
/// cache lookup) to finish.
#[derive(Debug, Default)]
pub struct CoreGate(RwLock<()>);

impl CoreGate {
    /// Held for a blocking call into the core.
    pub fn blocking(&self) -> RwLockReadGuard<'_, ()> {
        // The guarded value is `()`: a poisoned lock is as good as any.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Held for a call answered from the caches on the thread at hand;
    /// `None` while anything is in the core (then queue the request).
    pub fn try_exclusive(&self) -> Option<RwLockWriteGuard<'_, ()>> {
        self.0.try_write().ok()
    }
}

struct Queue<B, R> {
    jobs: Vec<QueuedRequest<B, R>>,
    closed: bool,
    /// Core threads asleep on the condition variable: only then does a
    /// submit pay for a wake-up.
    idle: usize,
    /// Core threads answering a take now.
    running: usize,
}

struct Shared<B, R> {
    q: Mutex<Queue<B, R>>,
    cv: Condvar,
}

impl<B, R> Shared<B, R> {
    fn lock(&self) -> MutexGuard<'_, Queue<B, R>> {
        // Every step leaves the queue consistent: a poisoned lock is usable.
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The core threads of a threaded Rust host: a queue of requests read whole
/// that threads named `botspace-core-{i}` answer in takes
/// ([`answer_take`]), each take under the [`CoreGate`]'s shared
/// hold. `B` is the host's body type, `R` its [`ReplyTo`].
///
/// The threads end at [`CoreWorkers::close`] (or the drop), after
/// answering what was queued. They hold the service: once they are
/// joined, it can close.
pub struct CoreWorkers<B, R> {
    shared: Arc<Shared<B, R>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    gate: Arc<CoreGate>,
}

impl<B, R> CoreWorkers<B, R>
where
    B: AsRef<[u8]> + Send + 'static,
    R: ReplyTo,
{
    /// Starts `n` core threads (at least one) on `svc`. If one cannot be
    /// started, those already started are ended and the error returned
    /// (the host answers some other way, e.g. on its blocking pool).
    pub fn start(svc: Arc<Service>, n: usize) -> std::io::Result<Self> {
        let me = CoreWorkers {
            shared: Arc::new(Shared {
                q: Mutex::new(Queue { jobs: Vec::new(), closed: false, idle: 0, running: 0 }),
                cv: Condvar::new(),
            }),
            handles: Mutex::new(Vec::with_capacity(n.max(1))),
            gate: Arc::default(),
        };
        for i in 0..n.max(1) {
            let (svc, sh, gate) = (svc.clone(), me.shared.clone(), me.gate.clone());
            // On an error `me` is dropped: it closes and joins the others.
            let h =
                std::thread::Builder::new().name(format!("botspace-core-{i}")).spawn(move || run(&svc, &sh, &gate))?;
            me.handles.lock().unwrap_or_else(|e| e.into_inner()).push(h);
        }
        Ok(me)
    }

    /// Queues a request of `kind` ([`Kind::of`] its route); its answer
    /// goes to `reply`. `Err` gives the job back once the threads have
    /// been closed (boxed: a job is a whole request, and only that rare
    /// refusal pays for the box).
    pub fn submit(&self, request: Received<B>, kind: Kind, reply: R) -> Result<(), Box<QueuedRequest<B, R>>> {
        let job = QueuedRequest { request, kind, reply };
        let mut q = self.shared.lock();
        if q.closed {
            return Err(Box::new(job));
        }
        q.jobs.push(job);
        // Only a thread that would take the queue is woken: while a batch
        // runs, a small queue waits for that batch's thread.
        let wake = q.idle > 0 && starts_batch(q.running, q.jobs.len());
        drop(q);
        if wake {
            self.shared.cv.notify_one();
        }
        Ok(())
    }
}

impl<B, R> CoreWorkers<B, R> {
    /// The gate the threads hold around each take: the host holds the same
    /// one around its other blocking calls, and asks it before answering
    /// from the caches on the thread at hand.
    pub fn gate(&self) -> &Arc<CoreGate> {
        &self.gate
    }

    /// Refuses further submits, lets the threads answer what is queued,
    /// then waits for them. Called on a core thread itself (the host's
    /// last handle dropped inside a reply or a wake hook), it does not
    /// wait for that thread, which ends when its loop sees the queue
    /// closed.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.cv.notify_all();
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        let me = std::thread::current().id();
        for h in handles {
            // Joining itself would fail (and wait forever, were it allowed).
            if h.thread().id() == me {
                continue;
            }
            let _ = h.join();
        }
    }
}

impl<B, R> Drop for CoreWorkers<B, R> {
    fn drop(&mut self) {
        self.close();
    }
}

fn run<B: AsRef<[u8]>, R: ReplyTo>(svc: &Service, sh: &Shared<B, R>, gate: &CoreGate) {
    loop {
        let jobs = {
            let mut q = sh.lock();
            while !starts_batch(q.running, q.jobs.len()) && !q.closed {
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
            answer_take(svc, jobs);
        }
        sh.lock().running -= 1;
    }
}

/// Answers one take of a batch queue, every request of many
/// connections queued meanwhile, through [`Service::handle`]: each
/// [`Kind::Alone`] one by one, the [`Kind::Batch`] ones as groups of at
/// most [`MAX_QUEUED_BATCH`] (one transaction and one fsync each), in the
/// order queued, each request read as its host queued it (bytes or
/// parsed). Each answer, as the core wrote it, goes to its job's reply
/// once its call returned, so after the commit is synced. A panic in a call drops the
/// replies it was to answer (the host answers them 500 `answer_failed`)
/// and the take goes on. The core threads ([`CoreWorkers`]) call it; so
/// may a host that answers takes on its own loop (a service whose calls
/// never block, [`Service::calls_may_block`]).
pub fn answer_take<B: AsRef<[u8]>, R: ReplyTo>(svc: &Service, jobs: Vec<QueuedRequest<B, R>>) {
    let now = svc.now_ms();
    let mut batch = Vec::new();
    for job in jobs {
        match job.kind {
            Kind::Alone => {
                // The request is read inside the boundary too: a body
                // that panics when read drops only this reply.
                // A queue cannot hold a connection: a poll queued here (its
                // host parks polls itself) is not left parked.
                let call = catch_unwind(AssertUnwindSafe(|| {
                    svc.handle(&[job.request.incoming()], now).remove(0).now_or_failed(svc)
                }));
                if let Ok(out) = call {
                    job.reply.send(out);
                }
            }
            Kind::Batch => batch.push(job),
        }
    }
    // At most one request per connection is in flight (an HTTP/1 stack
    // answers a connection's requests in turn), so a take is at most
    // the open connections; past `MAX_QUEUED_BATCH` it commits in
    // several transactions, so one does not grow without bound (a
    // loop's turn, as the C server's, takes up to `connection::limits::MAX_BATCH`).
    let mut batch = batch.into_iter();
    loop {
        let part: Vec<QueuedRequest<B, R>> = batch.by_ref().take(MAX_QUEUED_BATCH).collect();
        if part.is_empty() {
            return;
        }
        // Requests of many connections, arrived concurrently: a group.
        let answers = catch_unwind(AssertUnwindSafe(|| {
            let requests: Vec<Incoming<'_>> = part.iter().map(|j| j.request.incoming().unordered()).collect();
            svc.handle(&requests, now)
        }));
        if let Ok(answers) = answers {
            for (job, a) in part.into_iter().zip(answers) {
                job.reply.send(a.now_or_failed(svc));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botspace::Config;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const SECRET: &str = "core-thread-test-secret-0001";

    type Answered = mpsc::Receiver<Vec<u8>>;
    type TestJob = QueuedRequest<Vec<u8>, mpsc::Sender<Vec<u8>>>;

    fn call(svc: &Service, path: &str, auth: &str, body: &str) -> serde_json::Value {
        let req = format!(
            "POST {path} HTTP/1.1\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let resp = svc.handle_request(req.as_bytes());
        let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&resp[at..]).unwrap()
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

    /// A service on a database file of its own (commits are synced), with
    /// the directory to remove.
    fn on_disk(name: &str) -> (Service, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("botspace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("b.db").to_string_lossy().into_owned();
        let svc = Service::open(Config::default().with(|c| {
            c.database = db;
            c.admin_secret = SECRET.into();
        }))
        .unwrap();
        (svc, dir)
    }

    fn send_request<B: From<String>>(token: &str, chat: &str, text: &str) -> Received<B> {
        let body = format!(r#"{{"chat_id":"{chat}","text":"{text}"}}"#);
        Received::Http(
            http::Request::post("/bot/sendMessage")
                .header("authorization", format!("Bot {token}"))
                .header("content-type", "application/json")
                .body(B::from(body))
                .unwrap(),
        )
    }

    fn get_me_request(token: &str) -> Received<Vec<u8>> {
        Received::Http(
            http::Request::post("/bot/getMe").header("authorization", format!("Bot {token}")).body(Vec::new()).unwrap(),
        )
    }

    /// `request` as the core's framer delimits it on a connection: its
    /// bytes and the head the framer read.
    fn framed(request: &str) -> Received<Vec<u8>> {
        match botspace::frame_request(request.as_bytes(), 1 << 20) {
            botspace::Framing::Complete { len, head } => {
                assert_eq!(len, request.len());
                Received::Bytes { request: request.as_bytes().to_vec(), head }
            }
            _ => panic!("not a whole request: {request}"),
        }
    }

    /// A request of either form with its body read by `body`.
    fn with_body<B>(r: Received<Vec<u8>>, body: impl FnOnce(Vec<u8>) -> B) -> Received<B> {
        match r {
            Received::Http(r) => Received::Http(r.map(body)),
            Received::Bytes { request, head } => Received::Bytes { request: body(request), head },
        }
    }

    /// A sendMessage of `text` as a batch job; its answer arrives on the
    /// returned receiver.
    fn send_job(token: &str, chat: &str, text: &str) -> (TestJob, Answered) {
        let (tx, rx) = mpsc::channel();
        (QueuedRequest { request: send_request(token, chat, text), kind: Kind::Batch, reply: tx }, rx)
    }

    /// The text of a sendMessage's 200.
    fn sent_text(out: Vec<u8>) -> String {
        let out = botspace::into_http_response(out);
        assert_eq!(out.status(), 200, "{}", String::from_utf8_lossy(out.body()));
        let v: serde_json::Value = serde_json::from_slice(out.body()).unwrap();
        v["result"]["text"].as_str().unwrap().to_string()
    }

    fn answer_of(rx: &Answered) -> Vec<u8> {
        rx.recv_timeout(Duration::from_secs(10)).expect("answered")
    }

    /// Durable commits and syncs since `before`.
    fn commits_since(svc: &Service, before: botspace::CommitStats) -> (u64, u64) {
        let after = svc.commit_stats();
        (after.durable_commits - before.durable_commits, after.syncs - before.syncs)
    }

    /// Waits until the queue's state satisfies `ready` (the threads are
    /// scheduled by the system: a test waits for the state it needs).
    fn wait_for<B, R>(w: &CoreWorkers<B, R>, ready: impl Fn(&Queue<B, R>) -> bool) {
        let start = Instant::now();
        while !ready(&w.shared.lock()) {
            assert!(start.elapsed() < Duration::from_secs(10), "the core threads never got there");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A sendMessage of `text` as the bytes a connection framed.
    fn send_bytes(token: &str, chat: &str, text: &str) -> Received<Vec<u8>> {
        let body = format!(r#"{{"chat_id":"{chat}","text":"{text}"}}"#);
        framed(&format!(
            "POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ))
    }

    #[test]
    fn one_take_of_the_queue_is_one_transaction_and_one_fsync_with_each_request_answered() {
        let (svc, dir) = on_disk("core-take");
        let (token, chat) = bot_with_chat(&svc);

        let before = svc.commit_stats();
        let mut replies = Vec::new();
        let mut jobs = Vec::new();
        // Parsed requests and framed bytes, as two hosts queue them, in
        // one take.
        for i in 0..8 {
            let text = format!("m{i}");
            let request =
                if i % 2 == 0 { send_request(&token, &chat, &text) } else { send_bytes(&token, &chat, &text) };
            let (tx, rx) = mpsc::channel();
            jobs.push(QueuedRequest { request, kind: Kind::Batch, reply: tx });
            replies.push(rx);
        }
        let (tx, get_me) = mpsc::channel();
        jobs.push(QueuedRequest { request: get_me_request(&token), kind: Kind::Alone, reply: tx });
        let (tx, get_me_bytes) = mpsc::channel();
        let raw = format!("POST /bot/getMe HTTP/1.1\r\nAuthorization: Bot {token}\r\n\r\n");
        jobs.push(QueuedRequest { request: framed(&raw), kind: Kind::Alone, reply: tx });
        answer_take(&svc, jobs);
        assert_eq!(commits_since(&svc, before), (1, 1));
        let texts: Vec<String> = replies.iter().map(|rx| sent_text(rx.try_recv().expect("answered"))).collect();
        assert_eq!(texts, (0..8).map(|i| format!("m{i}")).collect::<Vec<_>>());
        // The reply is the core's answer as it wrote it: the same bytes
        // whichever form the request came in.
        let me = get_me.try_recv().unwrap();
        assert_eq!(String::from_utf8_lossy(&get_me_bytes.try_recv().unwrap()), String::from_utf8_lossy(&me));
        assert!(me.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", String::from_utf8_lossy(&me));
        let me: serde_json::Value = serde_json::from_slice(botspace::into_http_response(me).body()).unwrap();
        assert_eq!(me["result"]["handle"], "b_bot", "{me}");
        drop(svc);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_take_past_max_queued_batch_commits_in_groups_of_at_most_that_many() {
        let (svc, dir) = on_disk("core-groups");
        let (token, chat) = bot_with_chat(&svc);
        let before = svc.commit_stats();
        let (jobs, replies): (Vec<_>, Vec<_>) =
            (0..MAX_QUEUED_BATCH + 1).map(|i| send_job(&token, &chat, &format!("m{i}"))).unzip();
        answer_take(&svc, jobs);
        // Two groups: 256 requests, then the one left over.
        assert_eq!(svc.commit_stats().durable_commits - before.durable_commits, 2);
        let texts: Vec<String> = replies.iter().map(|rx| sent_text(rx.try_recv().expect("answered"))).collect();
        assert_eq!(texts, (0..=MAX_QUEUED_BATCH).map(|i| format!("m{i}")).collect::<Vec<_>>());
        drop(svc);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A body whose read panics: a core call that panics, for tests.
    struct Bomb(Option<Vec<u8>>);

    impl AsRef<[u8]> for Bomb {
        fn as_ref(&self) -> &[u8] {
            self.0.as_deref().expect("the test's bomb")
        }
    }

    impl From<String> for Bomb {
        fn from(s: String) -> Bomb {
            Bomb(Some(s.into_bytes()))
        }
    }

    #[test]
    fn a_panic_in_a_call_drops_only_the_replies_that_call_was_to_answer_and_the_take_goes_on() {
        let (svc, dir) = on_disk("core-panic");
        let (token, chat) = bot_with_chat(&svc);
        let before = svc.commit_stats();
        let mut jobs = Vec::new();
        let mut replies = Vec::new();
        let mut push = |request: Received<Bomb>, kind| {
            let (tx, rx) = mpsc::channel();
            jobs.push(QueuedRequest { request, kind, reply: tx });
            replies.push(rx);
        };
        // An alone request that panics, one that does not, then a group of
        // MAX_QUEUED_BATCH with a panic in it, then a group of one.
        push(with_body(get_me_request(&token), |_| Bomb(None)), Kind::Alone);
        push(with_body(get_me_request(&token), |b| Bomb(Some(b))), Kind::Alone);
        push(send_request(&token, &chat, "lost0"), Kind::Batch);
        push(with_body(send_request::<Vec<u8>>(&token, &chat, "lost1"), |_| Bomb(None)), Kind::Batch);
        for i in 2..MAX_QUEUED_BATCH {
            push(send_request(&token, &chat, &format!("lost{i}")), Kind::Batch);
        }
        push(send_request(&token, &chat, "kept"), Kind::Batch);
        answer_take(&svc, jobs);

        let answered: Vec<Option<u16>> = replies
            .iter()
            .map(|rx| rx.try_recv().ok().map(|r| botspace::into_http_response(r).status().as_u16()))
            .collect();
        let mut expected = vec![None, Some(200)];
        expected.extend(std::iter::repeat_n(None, MAX_QUEUED_BATCH));
        expected.push(Some(200));
        assert_eq!(answered, expected);
        // Each dropped reply is gone, not pending: its host answers 500.
        assert!(matches!(replies[0].try_recv(), Err(mpsc::TryRecvError::Disconnected)));
        assert!(matches!(replies[3].try_recv(), Err(mpsc::TryRecvError::Disconnected)));
        // The failed group wrote nothing; the last one committed once.
        assert_eq!(svc.commit_stats().durable_commits - before.durable_commits, 1);
        let history = call(
            &svc,
            "/admin/getChatHistory",
            &format!("Admin {SECRET}"),
            &format!(r#"{{"chat_id":"{chat}","limit":100}}"#),
        );
        let texts: Vec<&str> =
            history["result"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
        assert_eq!(texts, ["kept"], "{history}");
        drop(svc);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_queue_is_shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CoreWorkers<Vec<u8>, mpsc::Sender<Vec<u8>>>>();
        send_sync::<CoreWorkers<Vec<u8>, Box<dyn FnOnce(Vec<u8>) + Send>>>();
        send_sync::<CoreGate>();
    }

    #[test]
    fn a_get_me_on_the_worker_is_refused_while_anything_is_in_the_core() {
        let gate = CoreGate::default();
        let in_core = gate.blocking();
        assert!(gate.try_exclusive().is_none());
        let also = gate.blocking();
        drop(in_core);
        assert!(gate.try_exclusive().is_none(), "still one in the core");
        drop(also);
        assert!(gate.try_exclusive().is_some());
    }

    #[test]
    fn a_small_queue_waits_for_the_running_take_and_a_large_one_starts_the_second_thread() {
        let (svc, dir) = on_disk("core-workers");
        let svc = Arc::new(svc);
        let (token, chat) = bot_with_chat(&svc);
        let workers = CoreWorkers::<Vec<u8>, mpsc::Sender<_>>::start(svc.clone(), 2).unwrap();
        wait_for(&workers, |q| q.idle == 2);
        let before = svc.commit_stats();
        let mut replies = Vec::new();
        let mut submit = |text: String| {
            let (tx, rx) = mpsc::channel();
            assert!(workers.submit(send_request(&token, &chat, &text), Kind::Batch, tx).is_ok());
            replies.push(rx);
        };

        // A take held in the core (the test holds the gate as a getMe
        // would): the thread took the one request and waits to answer it.
        let held = workers.gate().try_exclusive().unwrap();
        submit("a".into());
        wait_for(&workers, |q| q.running == 1 && q.jobs.is_empty());
        // Fewer than OVERLAP_MIN_QUEUED: left for the running take's thread.
        for i in 1..crate::host::OVERLAP_MIN_QUEUED {
            submit(format!("b{i}"));
        }
        // Nor does a wake-up take it (a condition variable may wake a
        // thread spuriously): the sleeping thread looks and sleeps again.
        workers.shared.cv.notify_all();
        std::thread::sleep(Duration::from_millis(50));
        {
            let q = workers.shared.lock();
            assert_eq!((q.running, q.idle, q.jobs.len()), (1, 1, crate::host::OVERLAP_MIN_QUEUED - 1));
        }
        // The one that makes a large group wakes the second thread, which
        // takes all of it.
        submit("c".into());
        wait_for(&workers, |q| q.running == 2 && q.jobs.is_empty());
        drop(held);

        let texts: Vec<String> = replies.iter().map(|rx| sent_text(answer_of(rx))).collect();
        let mut expected = vec!["a".to_string()];
        expected.extend((1..crate::host::OVERLAP_MIN_QUEUED).map(|i| format!("b{i}")));
        expected.push("c".into());
        assert_eq!(texts, expected);
        // Two takes, one commit each (run at once, they may share an fsync).
        wait_for(&workers, |q| q.running == 0);
        let (commits, syncs) = commits_since(&svc, before);
        assert_eq!(commits, 2);
        assert!((1..=2).contains(&syncs), "{syncs}");
        drop(workers);
        drop(svc);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn close_answers_what_is_queued_then_refuses_with_the_job_back() {
        let svc = Arc::new(Service::open(Config::default().with(|c| c.admin_secret = SECRET.into())).unwrap());
        let (token, chat) = bot_with_chat(&svc);
        let workers = Arc::new(CoreWorkers::<Vec<u8>, mpsc::Sender<_>>::start(svc.clone(), 1).unwrap());
        wait_for(&workers, |q| q.idle == 1);
        let held = workers.gate().clone();
        let held = held.try_exclusive().unwrap();
        let (tx, first) = mpsc::channel();
        workers.submit(send_request(&token, &chat, "taken"), Kind::Batch, tx).unwrap();
        wait_for(&workers, |q| q.running == 1);
        let (tx, queued) = mpsc::channel();
        workers.submit(get_me_request(&token), Kind::Alone, tx).unwrap();

        let closer = {
            let w = workers.clone();
            std::thread::spawn(move || w.close())
        };
        wait_for(&workers, |q| q.closed);
        let (tx, refused) = mpsc::channel();
        let back = workers.submit(send_request(&token, &chat, "late"), Kind::Batch, tx).unwrap_err();
        assert_eq!((back.request.method(), back.request.path(), back.kind), ("POST", "/bot/sendMessage", Kind::Batch));
        let Received::Http(late) = &back.request else { panic!("{back:?}") };
        assert!(String::from_utf8_lossy(late.body()).contains(r#""text":"late""#));
        drop(held);
        closer.join().unwrap();

        assert_eq!(sent_text(answer_of(&first)), "taken");
        let me: serde_json::Value =
            serde_json::from_slice(botspace::into_http_response(answer_of(&queued)).body()).unwrap();
        assert_eq!(me["result"]["handle"], "b_bot", "{me}");
        drop(back);
        assert!(matches!(refused.try_recv(), Err(mpsc::TryRecvError::Disconnected)));
        assert_eq!(workers.shared.lock().running, 0);
    }

    /// A reply that drops the host's last handle to the queue on the core
    /// thread, before it reports the answer and the thread it came on.
    struct LastHandle {
        workers: Option<Arc<CoreWorkers<Vec<u8>, LastHandle>>>,
        done: mpsc::Sender<(Vec<u8>, Option<String>)>,
    }

    impl ReplyTo for LastHandle {
        fn send(mut self, response: Vec<u8>) {
            // Had it joined its own thread, close would have panicked or
            // hung here, and nothing would be reported.
            drop(self.workers.take());
            let _ = self.done.send((response, std::thread::current().name().map(str::to_string)));
        }
    }

    #[test]
    fn the_last_handle_dropped_on_a_core_thread_closes_without_joining_that_thread() {
        let svc = Arc::new(Service::open(Config::default().with(|c| c.admin_secret = SECRET.into())).unwrap());
        let (token, _) = bot_with_chat(&svc);
        let workers = Arc::new(CoreWorkers::<Vec<u8>, LastHandle>::start(svc.clone(), 1).unwrap());
        let gate = workers.gate().clone();
        let held = gate.try_exclusive().unwrap();
        let (done, rx) = mpsc::channel();
        let reply = LastHandle { workers: Some(workers.clone()), done };
        assert!(workers.submit(get_me_request(&token), Kind::Alone, reply).is_ok());
        drop(workers);
        drop(held);
        let (response, thread) = rx.recv_timeout(Duration::from_secs(10)).expect("answered");
        let response = botspace::into_http_response(response);
        assert_eq!(response.status(), 200, "{}", String::from_utf8_lossy(response.body()));
        assert_eq!(thread.as_deref(), Some("botspace-core-0"));
        // The thread ended and let go of the service.
        let start = Instant::now();
        while Arc::strong_count(&svc) > 1 {
            assert!(start.elapsed() < Duration::from_secs(10), "the core thread still holds the service");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
