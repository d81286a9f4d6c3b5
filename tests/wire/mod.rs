//! Scenario plumbing shared by `tests/server_rest.rs` and
//! `tests/server_gateway.rs`: start a botspace server process, talk to it
//! over real TCP (ureq, raw sockets, tungstenite's client).
//!
//! By default the server is this crate's `examples/server.rs`, built once
//! with `cargo build --example server`. `BOTSPACE_SERVER_CMD` replaces it
//! with any shell command line; these placeholders are substituted:
//!
//! - `{addr}`   → `127.0.0.1:0` (the server must print
//!   `botspace listening on http://HOST:PORT` as its first stdout line)
//! - `{db}`     → a database path (`:memory:` or a file in a fresh temp dir)
//! - `{secret}` → the admin secret (also in `BOTSPACE_ADMIN_SECRET`)
//!
//! The server must run on the manual clock (`--manual-clock`). Example:
//! `BOTSPACE_SERVER_CMD='examples/c-server/botspace-server --addr {addr} --db {db} --admin-secret {secret} --manual-clock'`

#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

pub const SECRET: &str = "server-tests-admin-secret-0001";
/// `date` of everything written before the manual clock moves (2026-01-01).
pub const MANUAL_START_S: i64 = 1_767_225_600;
/// The default heartbeat interval (`Config::heartbeat_interval_ms`).
pub const HEARTBEAT_MS: u64 = 41_250;
/// How long a test waits for any single thing before it fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// Each scenario as a test against both servers, in modules `rust`
/// (`examples/server.rs`) and `c` (`examples/c-server`), under its own
/// name. A scenario is called with what it takes: `both` and `c_only` get
/// the start function (`Server::start_rust_with`, `Server::start_c_with`),
/// `binary` the server's binary, `on_binary` (also the bare list) and the
/// one-server `rust_on_binary` and `c_on_binary` a reference to it.
/// A test file takes it with `#[macro_use] mod wire;`.
#[allow(unused_macros)]
macro_rules! servers {
    ($($name:ident),* $(,)?) => {
        servers! { on_binary: [$($name),*], }
    };
    (
        $(both: [$($both:ident),* $(,)?],)?
        $(c_only: [$($c_start:ident),* $(,)?],)?
        $(binary: [$($bin:ident),* $(,)?],)?
        $(on_binary: [$($on:ident),* $(,)?],)?
        $(rust_on_binary: [$($r_on:ident),* $(,)?],)?
        $(c_on_binary: [$($c_on:ident),* $(,)?],)?
    ) => {
        mod rust {
            $($(#[test] fn $both() { super::$both(super::Server::start_rust_with) })*)?
            $($(#[test] fn $bin() { super::$bin(super::example_binary()) })*)?
            $($(#[test] fn $on() { super::$on(&super::example_binary()) })*)?
            $($(#[test] fn $r_on() { super::$r_on(&super::example_binary()) })*)?
        }
        mod c {
            $($(#[test] fn $both() { super::$both(super::Server::start_c_with) })*)?
            $($(#[test] fn $c_start() { super::$c_start(super::Server::start_c_with) })*)?
            $($(#[test] fn $bin() { super::$bin(super::c_binary()) })*)?
            $($(#[test] fn $on() { super::$on(&super::c_binary()) })*)?
            $($(#[test] fn $c_on() { super::$c_on(&super::c_binary()) })*)?
        }
    };
}

// ---------------------------------------------------------------------------
// The server process

/// Which database a server gets.
pub enum Db {
    Memory,
    /// A file in the given directory (kept across restarts).
    File(PathBuf),
}

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    pub base: String,
    /// Every stdout line so far.
    lines: Arc<(Mutex<Vec<String>>, Condvar)>,
    /// Every stderr line so far, when started by `start_in_shell` (else
    /// stderr is the test's own).
    errors: Arc<Mutex<Vec<String>>>,
    /// `Some` while this value owns a temp dir to remove.
    temp_dir: Option<PathBuf>,
}

/// A fresh, empty temp directory (removed by its server, or by the caller).
/// A `--log-format json` line's `msg`; any other line as it is.
pub fn msg_of(line: &str) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(v) if v["ts"].is_string() => v["msg"].as_str().unwrap_or(line).to_string(),
        _ => line.to_string(),
    }
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "botspace-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The example server binary, built once per test process.
pub fn example_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/<test> → target/<profile>/examples/server
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe.parent().and_then(|p| p.parent()).expect("target/<profile>").to_path_buf();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "--example", "server"]).current_dir(env!("CARGO_MANIFEST_DIR"));
        outer_cargo_env(&mut cmd);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        // The features of this test build: a server built without them would
        // overwrite the one `cargo test --features pg-tests` built, and could
        // not open the postgres:// databases of tests/server_nodes.rs.
        if cfg!(feature = "pg-tests") {
            cmd.args(["--features", "pg-tests"]);
        } else if cfg!(feature = "postgres") {
            cmd.args(["--features", "postgres"]);
        }
        let status = cmd.status().expect("run cargo build --example server");
        assert!(status.success(), "cargo build --example server failed");
        let bin = profile_dir.join("examples").join(if cfg!(windows) { "server.exe" } else { "server" });
        assert!(bin.exists(), "{} missing after the build", bin.display());
        bin
    })
    .clone()
}

/// The C example server (`examples/c-server`), once per test process:
/// `BOTSPACE_C_SERVER` names a built binary (the ASan build, say; relative
/// to the crate root), else `make -C examples/c-server` builds it.
pub fn c_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        if let Some(b) = std::env::var_os("BOTSPACE_C_SERVER").filter(|b| !b.is_empty()) {
            let bin = root.join(b);
            assert!(bin.exists(), "BOTSPACE_C_SERVER: {} does not exist", bin.display());
            return bin;
        }
        // target/<profile>/deps/<test> → target: the library is built there.
        let exe = std::env::current_exe().expect("current_exe");
        let target = exe.ancestors().nth(3).expect("target dir").to_path_buf();
        // A test build with PostgreSQL (tests/server_nodes.rs) needs a C
        // library with it too: the one switch is the C crate's feature, so
        // build the library here and let make only link (CARGO=:).
        let cargo = if cfg!(feature = "postgres") {
            let mut build = Command::new(env!("CARGO"));
            outer_cargo_env(&mut build);
            let status = build
                .args(["build", "--quiet", "--release", "-p", "botspace-c", "--features", "postgres"])
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(&root)
                .status()
                .expect("run cargo build -p botspace-c --features postgres");
            assert!(status.success(), "cargo build -p botspace-c --features postgres failed");
            ":".to_string()
        } else {
            env!("CARGO").to_string()
        };
        let mut make = Command::new("make");
        outer_cargo_env(&mut make);
        let status = make
            .args(["--quiet", "-C", "examples/c-server"])
            .arg(format!("CARGO={cargo}"))
            .arg(format!("BOTSPACE_LIBDIR={}", target.join("release").display()))
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(&root)
            .status()
            .expect("run make -C examples/c-server");
        assert!(status.success(), "make -C examples/c-server failed");
        root.join("examples/c-server/build/botspace-server")
    })
    .clone()
}

/// Leaves out what `cargo test` sets for the running test (CARGO_PKG_*,
/// CARGO_MANIFEST_DIR, ...): a build script that watches one (ring's) would
/// otherwise be rerun by this nested build and again by the next
/// `cargo test`, half a minute each time.
fn outer_cargo_env(cmd: &mut Command) {
    const SET_FOR_TESTS: [&str; 6] =
        ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR"];
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| SET_FOR_TESTS.iter().any(|p| k.starts_with(p))) {
            cmd.env_remove(k);
        }
    }
}

impl Server {
    /// A server on an in-memory database.
    pub fn start() -> Server {
        let mut s = Server::start_with(Db::Memory);
        s.wait_line("botspace ready");
        s
    }

    /// A server on a database file `dir/botspace.db`; `dir` is not removed.
    pub fn start_on(dir: &std::path::Path) -> Server {
        Server::start_with(Db::File(dir.to_path_buf()))
    }

    fn start_with(db: Db) -> Server {
        Server::spawn(db, None, None)
    }

    /// The Rust example server (whatever `BOTSPACE_SERVER_CMD` says) on
    /// `:memory:` with `args` instead of `--admin-secret` and
    /// `--manual-clock`; waits for `botspace ready`.
    #[allow(dead_code)]
    pub fn start_rust_with(args: &[&str]) -> Server {
        let mut s = Server::spawn(Db::Memory, Some(args), None);
        s.wait_line("botspace ready");
        s
    }

    /// The same with the C example server (see `c_binary`).
    #[allow(dead_code)]
    pub fn start_c_with(args: &[&str]) -> Server {
        let mut s = Server::spawn(Db::Memory, Some(args), Some(c_binary()));
        s.wait_line("botspace ready");
        s
    }

    fn spawn(db: Db, rust_args: Option<&[&str]>, bin: Option<PathBuf>) -> Server {
        let db_path = match &db {
            Db::Memory => ":memory:".to_string(),
            Db::File(dir) => dir.join("botspace.db").to_string_lossy().into_owned(),
        };
        let custom = std::env::var("BOTSPACE_SERVER_CMD").ok().filter(|_| rust_args.is_none());
        let mut cmd = match custom {
            Some(line) if !line.trim().is_empty() => {
                let line = line.replace("{addr}", "127.0.0.1:0").replace("{db}", &db_path).replace("{secret}", SECRET);
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("exec {line}")).current_dir(env!("CARGO_MANIFEST_DIR"));
                c
            }
            _ => {
                let mut c = Command::new(bin.unwrap_or_else(example_binary));
                c.args(["--addr", "127.0.0.1:0", "--db", &db_path]);
                match rust_args {
                    // `--demo` before the test's own arguments: the tour's
                    // demo data, which many tests use (a server makes
                    // none unless asked; `start_env` asks nothing).
                    Some(args) => c.arg("--demo").args(args),
                    // `--demo`: the tour's demo bot and chat, which many
                    // tests use (a server makes none unless asked).
                    None => c.args(["--admin-secret", SECRET, "--manual-clock", "--demo"]),
                };
                c
            }
        };
        cmd.env("BOTSPACE_ADMIN_SECRET", SECRET).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()); // echoed, and kept for errors()
        Server::launch(cmd)
    }

    /// `bin --addr 127.0.0.1:0 ARGS` run by `sh -c 'SETUP && exec BIN ARGS'`
    /// (behind `wrapper`, say `unshare -m`), so that the server is the
    /// process itself (its pid takes signals) under what SETUP set (a file
    /// limit, a mount). `env` is given to the shell. Its stderr is kept (see
    /// `errors`) as well as shown. Waits for `botspace ready`.
    pub fn start_in_shell(
        wrapper: &[&str],
        setup: &str,
        env: &[(&str, &str)],
        bin: &std::path::Path,
        args: &[&str],
    ) -> Server {
        let (program, pre) = match wrapper.split_first() {
            Some((p, rest)) => (*p, rest),
            None => ("sh", &[][..]),
        };
        let mut cmd = Command::new(program);
        cmd.args(pre);
        if !wrapper.is_empty() {
            cmd.arg("sh");
        }
        cmd.arg("-c")
            .arg(format!(r#"{setup} && exec "$0" "$@""#))
            .arg(bin)
            .args(["--addr", "127.0.0.1:0", "--demo"])
            .args(args);
        cmd.envs(env.iter().copied());
        cmd.env("BOTSPACE_ADMIN_SECRET", SECRET).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut s = Server::launch(cmd);
        s.wait_line("botspace ready");
        s
    }

    /// `bin ARGS` with no `BOTSPACE_*` variable from the test's environment
    /// but `env`: configured through the environment (and a config file).
    /// Waits for `botspace ready`.
    #[allow(dead_code)]
    pub fn start_env(bin: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Server {
        let mut cmd = Command::new(bin);
        for (k, _) in std::env::vars() {
            if k.starts_with("BOTSPACE_") {
                cmd.env_remove(k);
            }
        }
        cmd.args(args).envs(env.iter().copied());
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut s = Server::launch(cmd);
        s.wait_line("botspace ready");
        s
    }

    /// Stderr lines so far (`start_in_shell` only).
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }

    fn launch(mut cmd: Command) -> Server {
        let mut child = cmd.spawn().expect("start the server");
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        if let Some(stderr) = child.stderr.take() {
            let sink = errors.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("server: {line}");
                    sink.lock().unwrap().push(line);
                }
            });
        }
        let stdout = child.stdout.take().expect("stdout");
        let lines: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.0.lock().unwrap().push(line);
                sink.1.notify_all();
            }
        });
        let mut s =
            Server { child, addr: "127.0.0.1:1".parse().unwrap(), base: String::new(), lines, errors, temp_dir: None };
        let first = msg_of(&s.line(0));
        let url = first
            .strip_prefix("botspace listening on http://")
            .unwrap_or_else(|| panic!("first line must be `botspace listening on http://HOST:PORT`, got {first:?}"));
        s.addr = url.trim_end_matches('/').parse().unwrap_or_else(|e| panic!("bad address in {first:?}: {e}"));
        s.base = format!("http://{}", s.addr);
        s
    }

    /// Stdout line `i` (0-based), waiting for it.
    pub fn line(&mut self, i: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (m, cv) = &*self.lines;
        let mut g = m.lock().unwrap();
        loop {
            if let Some(l) = g.get(i) {
                return l.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("server exited ({status}) after printing {:?}", *g);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "server printed no line {i}; so far {:?}", *g);
            g = cv.wait_timeout(g, left.min(Duration::from_millis(200))).unwrap().0;
        }
    }

    /// Waits for a line equal to `text` (or, with `--log-format json`, one
    /// whose `msg` is); returns every line before it.
    pub fn wait_line(&mut self, text: &str) -> Vec<String> {
        let mut i = 0;
        loop {
            let l = self.line(i);
            if msg_of(&l) == text {
                return self.lines.0.lock().unwrap()[..i].to_vec();
            }
            i += 1;
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.0.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`-STOP`, `-TERM`, ...) to the server.
    pub fn signal(&self, signal: &str) {
        let st = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill");
        assert!(st.success(), "kill {signal} failed");
    }

    /// Waits (at most `within`) for the process to end on its own.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                std::thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGINT and waits (bounded) for the process to end.
    pub fn interrupt(&mut self) -> std::process::ExitStatus {
        let st = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status().expect("kill -INT");
        assert!(st.success(), "kill -INT failed");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the stdout thread catch the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(Instant::now() < deadline, "server did not stop within 15 s of SIGINT");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.set_write_timeout(Some(WAIT)).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    // -- HTTP through ureq ---------------------------------------------------

    /// POST `path` with a JSON body through ureq (a real HTTP client).
    pub fn post(&self, path: &str, auth: Option<&str>, body: &Value) -> Resp {
        let mut req = agent().post(format!("{}{}", self.base, path));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let r =
            req.content_type("application/json").send(body.to_string()).unwrap_or_else(|e| panic!("POST {path}: {e}"));
        Resp::from_ureq(r)
    }

    pub fn admin_resp(&self, method: &str, body: &Value) -> Resp {
        self.post(&format!("/admin/{method}"), Some(&format!("Admin {SECRET}")), body)
    }

    /// A host method that must succeed; returns its `result`.
    pub fn admin(&self, method: &str, body: &Value) -> Value {
        let r = self.admin_resp(method, body);
        assert_eq!(r.status, 200, "/admin/{method} {body} → {}", r.body);
        assert_eq!(r.body["ok"], json!(true));
        r.body["result"].clone()
    }

    pub fn bot(&self, token: &str, method: &str, body: &Value) -> Resp {
        self.post(&format!("/bot/{method}"), Some(&format!("Bot {token}")), body)
    }

    /// Moves the manual clock.
    pub fn advance(&self, seconds: f64) {
        assert_eq!(self.admin("advanceClock", &json!({ "seconds": seconds })), json!(true));
    }

    // -- fixtures --------------------------------------------------------------

    /// A user, a bot of `tier` and their started private chat.
    pub fn world(&self, tier: &str) -> World {
        let user = self.admin("createUser", &json!({"display_name": "Ann", "handle": "ann"}));
        // Handles are unique: the first world on a database gets
        // `echo_bot`, later ones the first free `echo_bot_N`.
        let created = (0..)
            .find_map(|n| {
                let handle = if n == 0 { "echo_bot".to_string() } else { format!("echo_bot_{n}") };
                let r = self
                    .admin_resp("createBot", &json!({"display_name": "Echo", "handle": handle, "quota_tier": tier}));
                if r.status == 409 && r.body["error"] == "handle_taken" {
                    return None;
                }
                assert_eq!(r.status, 200, "/admin/createBot → {}", r.body);
                Some(r.body["result"].clone())
            })
            .unwrap();
        let bot = created["bot"].clone();
        let token = created["token"].as_str().expect("token").to_string();
        let bot_id = bot["id"].as_str().unwrap().to_string();
        let user_id = user["id"].as_str().unwrap().to_string();
        let chat = self.admin("startBot", &json!({"user_id": user_id, "bot_id": bot_id}));
        World { chat: chat["id"].as_str().unwrap().to_string(), user, user_id, bot, bot_id, token }
    }

    /// A human message through the host API; returns the message.
    pub fn say(&self, user_id: &str, chat_id: &str, text: &str) -> Value {
        self.admin("sendUserMessage", &json!({"user_id": user_id, "chat_id": chat_id, "text": text}))
    }

    /// Opens a gateway connection; panics unless the server answers 101.
    pub fn gateway(&self, token: &str, query: &str) -> Gw {
        self.try_gateway(token, query)
            .unwrap_or_else(|r| panic!("gateway upgrade refused: {} {}", r.status, String::from_utf8_lossy(&r.body)))
    }

    /// Opens a gateway connection, or returns the refusal.
    pub fn try_gateway(&self, token: &str, query: &str) -> Result<Gw, RawResponse> {
        let stream = self.connect();
        let mut req = tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{}/bot/gateway{query}",
            self.addr
        ))
        .unwrap();
        req.headers_mut().insert("Authorization", format!("Bot {token}").parse().unwrap());
        match tungstenite::client::client(req, stream) {
            Ok((ws, resp)) => {
                assert_eq!(resp.status().as_u16(), 101);
                Ok(Gw { ws })
            }
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(resp))) => {
                // tungstenite keeps the body when it was sent; to get exact
                // headers and body, ask again with a raw request.
                let _ = resp;
                Err(self.raw_upgrade(token, query))
            }
            Err(e) => panic!("gateway handshake failed: {e}"),
        }
    }

    /// A raw `GET /bot/gateway` upgrade request; returns the answer (for refusals).
    pub fn raw_upgrade(&self, token: &str, query: &str) -> RawResponse {
        let mut s = self.connect();
        let req = format!(
            "GET /bot/gateway{query} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n",
            self.addr
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        read_response(&mut s, &mut buf)
    }

    /// Sends `requests` in one write and reads as many responses, in order.
    pub fn pipeline(&self, s: &mut TcpStream, requests: &[Vec<u8>]) -> Vec<RawResponse> {
        let all: Vec<u8> = requests.concat();
        s.write_all(&all).unwrap();
        let mut buf = Vec::new();
        let out: Vec<RawResponse> = requests.iter().map(|_| read_response(s, &mut buf)).collect();
        assert!(buf.is_empty(), "bytes after the last response: {:?}", String::from_utf8_lossy(&buf));
        out
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub struct World {
    pub user: Value,
    pub user_id: String,
    /// The bot identity createBot returned.
    pub bot: Value,
    pub bot_id: String,
    pub token: String,
    /// The started private chat.
    pub chat: String,
}

impl World {
    /// The `bot_started` event startBot gave the bot (its seq 1).
    pub fn bot_started(&self) -> Value {
        json!({"op": "event", "seq": 1, "type": "bot_started",
               "data": {"chat": {"id": self.chat, "type": "private"}, "user": self.user}})
    }
}

// ---------------------------------------------------------------------------
// HTTP

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(WAIT))
        .allow_non_standard_methods(true)
        .build()
        .into()
}

/// A response read through ureq.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Resp {
    pub fn from_ureq(mut r: ureq::http::Response<ureq::Body>) -> Resp {
        let status = r.status().as_u16();
        let headers =
            r.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let text = r.body_mut().read_to_string().expect("read body");
        let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text:?}"));
        Resp { status, headers, body }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Asserts the error envelope (docs/errors.md) with exact status and code.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_error(status, code, self.status, &self.body, self.header("content-type"));
    }
}

/// A response read from a raw socket.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn assert_error(&self, status: u16, code: &str) {
        assert_error(status, code, self.status, &self.json(), self.header("content-type"));
    }

    /// Asserts 200 and returns `result`.
    pub fn result(&self) -> Value {
        let v = self.json();
        assert_eq!(self.status, 200, "{v}");
        assert_eq!(v["ok"], json!(true), "{v}");
        v["result"].clone()
    }
}

fn assert_error(status: u16, code: &str, got_status: u16, body: &Value, content_type: Option<&str>) {
    assert_eq!(got_status, status, "status; body {body}");
    assert_eq!(content_type, Some("application/json"), "content-type; body {body}");
    let o = body.as_object().unwrap_or_else(|| panic!("not an object: {body}"));
    assert_eq!(o.get("ok"), Some(&json!(false)), "{body}");
    assert_eq!(o.get("error_code"), Some(&json!(status)), "{body}");
    assert_eq!(o.get("error"), Some(&json!(code)), "{body}");
    assert!(o.get("description").is_some_and(|d| d.as_str().is_some_and(|d| !d.is_empty())), "description: {body}");
    for k in o.keys() {
        assert!(
            ["ok", "error_code", "error", "description", "parameters"].contains(&k.as_str()),
            "unexpected field {k} in {body}"
        );
    }
}

/// Reads one response (`Content-Length` framed) from `s`; bytes beyond it
/// stay in `buf` for the next call.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> RawResponse {
    let deadline = Instant::now() + WAIT;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let status_line = lines.next().unwrap_or("");
            let mut parts = status_line.splitn(3, ' ');
            assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {status_line:?}");
            let status: u16 =
                parts.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("status line {status_line:?}"));
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
                .collect();
            if status == 100 {
                buf.drain(..end + 4);
                continue;
            }
            let len: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.parse().expect("content-length"))
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = buf[end + 4..end + 4 + len].to_vec();
                buf.drain(..end + 4 + len);
                return RawResponse { status, headers, body };
            }
        }
        assert!(Instant::now() < deadline, "no complete response; have {:?}", String::from_utf8_lossy(buf));
        match read_some(s, &mut chunk) {
            Ok(0) => panic!("connection closed before a complete response; have {:?}", String::from_utf8_lossy(buf)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("reading a response: {e}; have {:?}", String::from_utf8_lossy(buf)),
        }
    }
}

/// `r.read(b)`, again after a signal ends it early. A stop and continue
/// of this process (a frozen machine, a debugger) makes a socket read
/// that has a timeout fail with `Interrupted` even without a handler.
#[allow(dead_code)]
pub fn read_some(r: &mut impl Read, b: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match r.read(b) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Asserts the peer closes the connection (EOF) without sending more.
pub fn assert_eof(s: &mut TcpStream) {
    let mut b = [0u8; 1024];
    match read_some(s, &mut b) {
        Ok(0) => {}
        Ok(n) => panic!("expected the server to close; got {:?}", String::from_utf8_lossy(&b[..n])),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("expected the server to close; got {e}"),
    }
}

/// A bot method request, byte for byte.
pub fn bot_request(token: &str, method: &str, body: Option<&Value>) -> Vec<u8> {
    match body {
        None => {
            format!("POST /bot/{method} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {token}\r\n\r\n").into_bytes()
        }
        Some(b) => {
            let b = b.to_string();
            format!(
                "POST /bot/{method} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            )
            .into_bytes()
        }
    }
}

/// A host method request, byte for byte.
pub fn admin_request(method: &str, body: &Value) -> Vec<u8> {
    let b = body.to_string();
    format!(
        "POST /admin/{method} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Admin {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    )
    .into_bytes()
}

// ---------------------------------------------------------------------------
// Gateway client

pub struct Gw {
    pub ws: WebSocket<TcpStream>,
}

impl Gw {
    /// The next text frame; panics on a close, a binary frame or a timeout.
    pub fn text(&mut self) -> String {
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => return t.as_str().to_string(),
                Ok(Message::Ping(_)) | Ok(Message::Pong(_)) => {}
                Ok(Message::Close(f)) => panic!("expected a text frame, got close {f:?}"),
                Ok(m) => panic!("expected a text frame, got {m:?}"),
                Err(e) => panic!("expected a text frame: {e}"),
            }
        }
    }

    pub fn json(&mut self) -> Value {
        let t = self.text();
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("frame is not JSON ({e}): {t}"))
    }

    /// The hello frame, checked for its exact field set.
    pub fn hello(&mut self) -> Value {
        let h = self.json();
        assert_eq!(h["op"], json!("hello"), "{h}");
        let mut keys: Vec<&str> = h.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["bot", "heartbeat_interval_ms", "op", "replay_from", "replay_truncated", "session_id"],
            "{h}"
        );
        h
    }

    /// The next frame must be an event; returns it parsed.
    pub fn event(&mut self) -> Value {
        let t = self.text();
        assert!(t.starts_with("{\"op\":\"event\",\"seq\":"), "expected an event frame, got {t}");
        serde_json::from_str(&t).unwrap()
    }

    pub fn send(&mut self, text: &str) {
        self.ws.send(Message::text(text)).expect("send");
    }

    pub fn ack(&mut self, seq: i64) {
        self.send(&format!("{{\"op\":\"ack\",\"seq\":{seq}}}"));
    }

    /// Reads until the server's close frame; returns (code, reason). Any
    /// text frame before it fails the test.
    pub fn closed(&mut self) -> (u16, String) {
        loop {
            match self.ws.read() {
                Ok(Message::Close(Some(f))) => {
                    let code = u16::from(f.code);
                    let reason = f.reason.as_str().to_string();
                    // Complete the closing handshake.
                    while self.ws.read().is_ok() {}
                    return (code, reason);
                }
                Ok(Message::Close(None)) => panic!("close frame without a code"),
                Ok(Message::Ping(_)) | Ok(Message::Pong(_)) => {}
                Ok(m) => panic!("expected a close frame, got {m:?}"),
                Err(e) => panic!("expected a close frame: {e}"),
            }
        }
    }

    /// Closes from the bot's side with a normal close and completes the handshake.
    pub fn close(mut self) {
        let _ =
            self.ws.close(Some(tungstenite::protocol::CloseFrame { code: CloseCode::Normal, reason: "bye".into() }));
        while self.ws.read().is_ok() {}
    }

    /// Drops the TCP connection without a closing handshake.
    pub fn cut(self) {
        let _ = self.ws.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

/// Retries `f` every 50 ms until it returns `Some`, for at most `WAIT`.
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Raises this process's soft file limit to `want` (or the hard limit):
/// the server children inherit it.
#[cfg(target_os = "linux")]
#[allow(dead_code)]
pub fn raise_nofile(want: u64) -> u64 {
    #[repr(C)]
    struct Rlimit {
        cur: u64,
        max: u64,
    }
    extern "C" {
        fn getrlimit(resource: i32, rlim: *mut Rlimit) -> i32;
        fn setrlimit(resource: i32, rlim: *const Rlimit) -> i32;
    }
    const RLIMIT_NOFILE: i32 = 7;
    let mut r = Rlimit { cur: 0, max: 0 };
    // SAFETY: plain libc calls on a local struct of the C layout.
    unsafe {
        assert_eq!(getrlimit(RLIMIT_NOFILE, &mut r), 0);
        if r.cur < want {
            r.cur = want.min(r.max);
            assert_eq!(setrlimit(RLIMIT_NOFILE, &r), 0);
        }
    }
    r.cur
}

/// A group with a user and `writers` bots in it, bot `t` created through
/// `nodes[t % nodes.len()]` (so each node has written): (the user's id, the
/// group id, the bots' tokens). The several-node tests write into it from
/// keep-alive connections; the delivery bench parks its polls in it.
#[allow(dead_code)]
pub fn group_of_writers(nodes: &[&Server], title: &str, writers: usize) -> (String, String, Vec<String>) {
    let a = nodes[0];
    let user = a.admin("createUser", &json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let group = a.admin("createGroup", &json!({"title": title}))["id"].as_str().unwrap().to_string();
    a.admin("addMember", &json!({"chat_id": group, "member_id": user}));
    let tokens = (0..writers)
        .map(|t| {
            let node = nodes[t % nodes.len()];
            let bot = node
                .admin("createBot", &json!({"display_name": "W", "handle": format!("w{t}"), "quota_tier": "official"}));
            node.admin("addMember", &json!({"chat_id": group, "member_id": bot["bot"]["id"]}));
            bot["token"].as_str().unwrap().to_string()
        })
        .collect();
    (user, group, tokens)
}

/// The descriptions (docs/errors.md) of the two 503s a shared store answers.
#[allow(dead_code)]
pub const UNAVAILABLE: &str = "the database is unreachable, nothing was written; retry later";
#[allow(dead_code)]
pub const OUTCOME_UNKNOWN: &str = "the commit could not be confirmed (the database connection was lost while committing, or the disk sync failed): the request may or may not have been written; retry with the same Idempotency-Key";

/// A message's id (the API writes it as a string).
#[allow(dead_code)]
pub fn message_id(m: &Value) -> u64 {
    m["message_id"].as_str().unwrap_or_else(|| panic!("message_id in {m}")).parse().unwrap()
}

/// How a sendMessage of `text` was answered while the store was in
/// trouble (`during` names the trouble): its message id, or the 503's code
/// (the body checked to be exactly the documented envelope, with
/// `Retry-After: 1`). Anything else fails the test.
#[allow(dead_code)]
pub fn write_outcome(r: &RawResponse, text: &str, during: &str) -> Result<u64, &'static str> {
    match r.status {
        200 => {
            let m = r.result();
            assert_eq!(m["text"], text, "{m}");
            Ok(message_id(&m))
        }
        503 => {
            let body = r.json();
            let (code, description) = match body["error"].as_str() {
                Some("storage_unavailable") => ("storage_unavailable", UNAVAILABLE),
                Some("commit_outcome_unknown") => ("commit_outcome_unknown", OUTCOME_UNKNOWN),
                _ => panic!("503 with another error: {body}"),
            };
            r.assert_error(503, code);
            assert_eq!(body, json!({"ok": false, "error_code": 503, "error": code, "description": description}));
            assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
            Err(code)
        }
        s => panic!("{s} {:?}: only 200 or 503 {during}", String::from_utf8_lossy(&r.body)),
    }
}
