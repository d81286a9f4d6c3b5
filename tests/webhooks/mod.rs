//! The test receiver of webhooks (`receiver.py`, which verifies every
//! delivery with the Standard Webhooks project's own Python library) and
//! what the tests read from its log.

#![allow(dead_code)]

use super::wire::agent;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A receiver process; its log is one JSON object per request.
pub struct Receiver {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Receiver {
    pub fn start(dir: &Path, port: u16) -> Receiver {
        let log = dir.join("receiver.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks/receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the receiver (python3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("receiver: {line:?} (is standardwebhooks installed?)"))
            .parse()
            .unwrap();
        Receiver { child, port, log }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn control(&self, body: &Value) {
        let r = agent().post(format!("http://127.0.0.1:{}/control", self.port)).send(body.to_string()).unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits (up to `within`) until `f` holds for what was seen.
    pub fn wait_for(&self, within: Duration, what: &str, f: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let until = Instant::now() + within;
        loop {
            let seen = self.seen();
            if f(&seen) {
                return seen;
            }
            assert!(Instant::now() < until, "timed out waiting for {what}; seen: {seen:#?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the receiver answered this request 2xx within the deadline.
pub fn answered_ok(e: &Value) -> bool {
    e["step"] == "ok" || e["step"] == "hang:0.3" || e["step"] == "big"
}

/// The update_ids answered 2xx.
pub fn delivered(seen: &[Value]) -> Vec<i64> {
    seen.iter().filter(|e| answered_ok(e)).map(|e| e["body"]["update_id"].as_i64().unwrap()).collect()
}

/// The chat of an update (`data.chat`, or `data.message.chat`).
pub fn chat_of(update: &Value) -> String {
    let d = &update["data"];
    let chat = if d["chat"].is_object() { &d["chat"] } else { &d["message"]["chat"] };
    chat["id"].as_str().unwrap_or_else(|| panic!("no chat in {update}")).to_string()
}

/// In each chat, no attempt of an event comes before the event ahead of it
/// was answered 2xx.
pub fn assert_per_chat_order(seen: &[Value]) {
    use std::collections::HashMap;
    let mut done: HashMap<String, i64> = HashMap::new();
    for e in seen {
        let chat = chat_of(&e["body"]);
        let id = e["body"]["update_id"].as_i64().unwrap();
        let last = done.get(&chat).copied().unwrap_or(0);
        assert!(id >= last, "chat {chat}: update {id} attempted after {last} was delivered: {seen:#?}");
        if answered_ok(e) {
            done.insert(chat, id);
        }
    }
}
