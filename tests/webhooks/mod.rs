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
    /// Where `/control` is served: `port`, or in TLS mode a plain-HTTP port
    /// of its own.
    control_port: u16,
    tls: bool,
    log: PathBuf,
}

impl Receiver {
    pub fn start(dir: &Path, port: u16) -> Receiver {
        Receiver::spawn(dir, port, None)
    }

    /// Serves `/hook` over TLS with `cert` (a PEM chain) and `key`; its log
    /// is `receiver.jsonl` in `dir` as for `start`, so one receiver per directory.
    pub fn start_tls(dir: &Path, cert: &Path, key: &Path) -> Receiver {
        Receiver::spawn(dir, 0, Some((cert, key)))
    }

    fn spawn(dir: &Path, port: u16, tls: Option<(&Path, &Path)>) -> Receiver {
        let log = dir.join("receiver.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks/receiver.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(port.to_string()).arg(&log);
        if let Some((cert, key)) = tls {
            cmd.arg("--tls").arg(cert).arg(key);
        }
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("start the receiver (python3)");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut read = |prefix: &str| -> u16 {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("receiver: {line:?} (is standardwebhooks installed?)"))
                .parse()
                .unwrap()
        };
        let port = read("listening ");
        let control_port = if tls.is_some() { read("control ") } else { port };
        Receiver { child, port, control_port, tls: tls.is_some(), log }
    }

    /// `http://127.0.0.1:PORT/hook`, or in TLS mode
    /// `https://localhost:PORT/hook` (the name the test certificates carry).
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://localhost:{}/hook", self.port)
        } else {
            format!("http://127.0.0.1:{}/hook", self.port)
        }
    }

    pub fn control(&self, body: &Value) {
        let r = agent().post(format!("http://127.0.0.1:{}/control", self.control_port)).send(body.to_string()).unwrap();
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

/// A throwaway certificate authority made with the `openssl` command-line
/// tool in `dir`: `cert` is its PEM certificate, the bundle a sender is
/// told to trust (`SSL_CERT_FILE`); `issue` signs server certificates.
pub struct TestCa {
    dir: PathBuf,
    pub cert: PathBuf,
    key: PathBuf,
    /// Serial numbers handed out.
    serial: std::cell::Cell<u32>,
}

/// Runs `openssl ARGS` in `dir`; panics with its output when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl (the CLI)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new P-256 key.
const EC_KEY: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

impl TestCa {
    /// A CA named `name`, its files in `dir/name` (created).
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let subject = format!("/CN=botspace test CA {name}");
        let mut args = vec!["req", "-x509", "-nodes", "-days", "2", "-subj", &subject];
        args.extend(EC_KEY);
        args.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]);
        openssl(&dir, &args);
        TestCa { cert: dir.join("ca.pem"), key: dir.join("ca.key"), dir, serial: std::cell::Cell::new(1) }
    }

    /// A server certificate for the names `san` (an OpenSSL subjectAltName
    /// value, `DNS:localhost,IP:127.0.0.1`), signed by this CA: its PEM
    /// certificate and key, as `file.pem` and `file.key` in the CA's dir.
    pub fn issue(&self, file: &str, san: &str) -> (PathBuf, PathBuf) {
        let (key, csr, pem, ext) =
            (format!("{file}.key"), format!("{file}.csr"), format!("{file}.pem"), format!("{file}.ext"));
        let mut args = vec!["req", "-new", "-nodes", "-subj", "/CN=botspace test receiver"];
        args.extend(EC_KEY);
        args.extend(["-keyout", &key, "-out", &csr]);
        openssl(&self.dir, &args);
        std::fs::write(
            self.dir.join(&ext),
            format!(
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
            ),
        )
        .unwrap();
        self.serial.set(self.serial.get() + 1);
        let serial = self.serial.get().to_string();
        let (ca, ca_key) = (self.cert.to_str().unwrap(), self.key.to_str().unwrap());
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                ca,
                "-CAkey",
                ca_key,
                "-set_serial",
                &serial,
                "-days",
                "2",
                "-out",
                &pem,
                "-extfile",
                &ext,
            ],
        );
        (self.dir.join(pem), self.dir.join(key))
    }
}
