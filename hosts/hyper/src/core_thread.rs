//! The core threads on tokio: where the bot requests of every connection
//! meet and are answered in batches, as the C server's event loop answers
//! them.
//!
//! A connection's task queues its request as it has it
//! ([`botspace_runtime::Received`]: the example server's connection queues
//! the bytes the core's `HttpConnection` framed, the tower service the
//! `http::Request` hyper parsed) with a one-shot channel for the answer,
//! and awaits it. The answer is the core's bytes: the example server hands
//! them to its connection as they are, the tower service reads them into
//! an `http::Response` for hyper. The queue, its threads, the takes and
//! the gate are the library's ([`botspace_runtime::CoreWorkers`],
//! [`botspace_runtime::workers::answer_take`], [`botspace_runtime::CoreGate`]):
//! this file only gives them tokio's one-shot as the reply.
//!
//! On a database whose calls cannot block (`:memory:`: no disk, no
//! network) there is no core thread: [`OnReactor`] answers the same takes
//! on the reactor, in a task that runs once the connections made ready by
//! one turn of the reactor have queued their requests. That is the C
//! server's loop (read everything ready, answer it in one batch, write
//! the answers) with no thread hop at all.

use botspace::Service;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// The answer to a queued request (the core's bytes), back to its
/// connection's task.
pub(crate) struct Oneshot(oneshot::Sender<Vec<u8>>);

impl botspace_runtime::ReplyTo for Oneshot {
    fn send(self, answer: Vec<u8>) {
        // The task gone: its connection is too, nobody to answer.
        let _ = self.0.send(answer);
    }
}

/// A reply and where its task awaits it.
pub(crate) fn reply() -> (Oneshot, oneshot::Receiver<Vec<u8>>) {
    let (tx, rx) = oneshot::channel();
    (Oneshot(tx), rx)
}

/// The library's core threads, answering into tokio's one-shots.
pub(crate) type CoreThreads = botspace_runtime::CoreWorkers<Bytes, Oneshot>;

pub(crate) type Job = botspace_runtime::QueuedRequest<Bytes, Oneshot>;

/// The queue of [`OnReactor`], shared with its task.
#[derive(Default)]
struct ReactorQueue {
    jobs: Mutex<Vec<Job>>,
    wake: Notify,
    started: AtomicBool,
    closed: AtomicBool,
    /// Takes answered so far (each one `answer_take` call).
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
/// thread would ([`botspace_runtime::workers::answer_take`]). On a current-thread runtime
/// (the example server on `:memory:`) nothing crosses a thread. The task
/// ends once the app is dropped.
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
                        botspace_runtime::workers::answer_take(&svc, jobs);
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

    /// A sendMessage of `text` queued as a batch job, as the example
    /// server queues it (the bytes its connection framed); its answer
    /// arrives on the returned receiver.
    fn send_job(token: &str, chat: &str, text: &str) -> (Job, oneshot::Receiver<Vec<u8>>) {
        let body = format!(r#"{{"chat_id":"{chat}","text":"{text}"}}"#);
        let raw = format!(
            "POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let botspace::Framing::Complete { head, .. } = botspace::frame_request(raw.as_bytes(), 1 << 20) else {
            panic!("not a whole request: {raw}")
        };
        let request = botspace_runtime::Received::Bytes { request: Bytes::from(raw), head };
        let (tx, rx) = reply();
        (Job { request, kind: botspace::connection::lane::Kind::Batch, reply: tx }, rx)
    }

    fn body_of(resp: &[u8]) -> serde_json::Value {
        let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&resp[at..]).unwrap()
    }

    /// The text of a sendMessage's 200.
    fn sent_text(out: Vec<u8>) -> String {
        let out = botspace::into_http_response(out);
        assert_eq!(out.status(), 200, "{}", String::from_utf8_lossy(out.body()));
        let v: serde_json::Value = serde_json::from_slice(out.body()).unwrap();
        v["result"]["text"].as_str().unwrap().to_string()
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
}
