//! Helpers shared by the sans-IO integration tests: building raw HTTP
//! requests for `Service::handle_request` / `Service::handle` and reading the
//! raw responses back. (The TCP tests have their own helpers in `wire/`.)

#![allow(dead_code)]

use botspace::Service;
use serde_json::Value;
use std::path::PathBuf;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let p = std::env::temp_dir().join(format!("botspace-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A raw `POST` request with `Host`, `Authorization`, a JSON `Content-Type`
/// and an exact `Content-Length`. `extra_headers` is inserted verbatim before
/// `Content-Length`: empty, or complete lines each ending in `\r\n`.
pub fn request(path: &str, auth: &str, extra_headers: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n{extra_headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// [`request`] with a JSON body and no extra headers.
pub fn json_request(path: &str, auth: &str, body: &Value) -> Vec<u8> {
    request(path, auth, "", body.to_string().as_bytes())
}

/// A request for `/admin/{method}`, authorized with `Admin {secret}`.
pub fn admin_request(secret: &str, method: &str, body: Value) -> Vec<u8> {
    json_request(&format!("/admin/{method}"), &format!("Admin {secret}"), &body)
}

/// A request for `/bot/{method}`, authorized with `Bot {token}`.
pub fn bot_request(token: &str, method: &str, body: Value) -> Vec<u8> {
    json_request(&format!("/bot/{method}"), &format!("Bot {token}"), &body)
}

/// The status code of a raw `HTTP/1.1 NNN ...` response.
pub fn status(resp: &[u8]) -> u16 {
    std::str::from_utf8(&resp[9..12]).unwrap().parse().unwrap()
}

/// The status codes of a batch of raw responses.
pub fn statuses(resps: &[Vec<u8>]) -> Vec<u16> {
    resps.iter().map(|r| status(r)).collect()
}

/// Where the body starts: just after the `\r\n\r\n` that ends the head.
pub fn body_start(resp: &[u8]) -> usize {
    resp.windows(4).position(|w| w == b"\r\n\r\n").expect("end of head") + 4
}

/// (status, body as JSON) of a raw response; panics if the body is not JSON.
pub fn split(resp: &[u8]) -> (u16, Value) {
    (status(resp), serde_json::from_slice(&resp[body_start(resp)..]).expect("JSON body"))
}

/// (status, headers, body as JSON) of a raw response. Header names are
/// lower-cased; asserts that `Content-Length` matches the body and that
/// `Content-Type` is `application/json`.
pub fn split_with_headers(resp: &[u8]) -> (u16, Vec<(String, String)>, Value) {
    let start = body_start(resp);
    let head = std::str::from_utf8(&resp[..start - 4]).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let body = &resp[start..];
    let cl: usize = headers.iter().find(|(n, _)| n == "content-length").unwrap().1.parse().unwrap();
    assert_eq!(cl, body.len(), "Content-Length must match the body");
    assert!(
        headers.iter().any(|(n, v)| n == "content-type" && v == "application/json"),
        "Content-Type must be application/json"
    );
    (status, headers, serde_json::from_slice(body).expect("JSON body"))
}

/// [`split_with_headers`] without the headers: same checks, same result
/// shape as [`split`].
pub fn split_checked(resp: &[u8]) -> (u16, Value) {
    let (status, _, v) = split_with_headers(resp);
    (status, v)
}

/// How a response is read: [`split`] or [`split_checked`].
pub type Reader = fn(&[u8]) -> (u16, Value);

/// Sends a JSON request through `handle_request`: (status, body).
pub fn call(svc: &Service, path: &str, auth: &str, body: Value) -> (u16, Value) {
    split(&svc.handle_request(&json_request(path, auth, &body)))
}

/// An admin call that must answer 200: its `result`.
pub fn admin(svc: &Service, secret: &str, method: &str, body: Value) -> Value {
    admin_read(svc, secret, method, body, split)
}

/// [`admin`], reading the response with `read`.
pub fn admin_read(svc: &Service, secret: &str, method: &str, body: Value, read: Reader) -> Value {
    let (status, v) = read(&svc.handle_request(&admin_request(secret, method, body.clone())));
    assert_eq!(status, 200, "{method} {body}: {v}");
    v["result"].clone()
}

/// A bot call: (status, body).
pub fn bot_call(svc: &Service, token: &str, method: &str, body: Value) -> (u16, Value) {
    split(&svc.handle_request(&bot_request(token, method, body)))
}

/// The database a test's service opens: `:memory:`, or, when
/// `BOTSPACE_TEST_POSTGRES` names a PostgreSQL server (set by
/// `scripts/with-postgres.sh`), a fresh schema of its own there, so the
/// same test runs against both stores.
pub fn test_database() -> String {
    match std::env::var("BOTSPACE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => fresh_pg_schema(&url),
        _ => ":memory:".into(),
    }
}

fn fresh_pg_schema(url: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let schema = format!("t{}_{}_{}", std::process::id(), nanos, N.fetch_add(1, Ordering::Relaxed));
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("BOTSPACE_TEST_POSTGRES is not reachable");
    c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

// ---------------------------------------------------------------------------
// Stopping and starting the cluster of scripts/with-postgres.sh

/// Runs `pg_ctl -w ACTION` on the cluster of scripts/with-postgres.sh
/// (`BOTSPACE_PG_BIN`, `BOTSPACE_PG_DATA`, `BOTSPACE_PG_OPTS`), as the
/// `postgres` user when this runs as root; whether it succeeded.
fn pg_ctl(action: &str, mode: &str) -> bool {
    let bin = std::env::var("BOTSPACE_PG_BIN").expect("BOTSPACE_PG_BIN (scripts/with-postgres.sh)");
    let data = std::env::var("BOTSPACE_PG_DATA").expect("BOTSPACE_PG_DATA (scripts/with-postgres.sh)");
    let log = format!("{data}/../server.log");
    let opts = std::env::var("BOTSPACE_PG_OPTS").expect("BOTSPACE_PG_OPTS (scripts/with-postgres.sh)");
    let ctl = format!("{bin}/pg_ctl");
    let mut args = vec!["-D", &data, "-w", "-l", &log, action];
    if action == "stop" {
        args.extend(["-m", mode]);
    } else {
        args.extend(["-o", &opts]);
    }
    let as_root = std::process::Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    let status = if as_root {
        std::process::Command::new("runuser").args(["-u", "postgres", "--", &ctl]).args(&args).status()
    } else {
        std::process::Command::new(&ctl).args(&args).status()
    };
    status.is_ok_and(|s| s.success())
}

/// The stopped cluster: [`PgDown::start`] starts it again, and so does
/// dropping it (a failing test must not leave the database down for the
/// tests after it).
#[must_use = "the cluster starts again when this is dropped"]
pub struct PgDown(bool);

/// Stops the cluster with `pg_ctl stop -m MODE` (`fast`: sessions are
/// terminated; `immediate`: every server process quits at once) and waits
/// until it is down.
pub fn pg_stop(mode: &str) -> PgDown {
    assert!(pg_ctl("stop", mode), "pg_ctl stop -m {mode}");
    PgDown(true)
}

impl PgDown {
    /// Starts the cluster again and waits until it accepts connections.
    pub fn start(mut self) {
        self.0 = false;
        assert!(pg_ctl("start", ""), "pg_ctl start");
    }
}

impl Drop for PgDown {
    fn drop(&mut self) {
        if self.0 && !pg_ctl("start", "") {
            eprintln!("pg_ctl start failed while dropping PgDown");
        }
    }
}

/// The cluster of scripts/with-postgres.sh stopped with SIGSTOP: the
/// postmaster and every server process, so connections stay open and
/// nothing answers (a stalled disk, a partition that keeps TCP up).
/// [`PgFrozen::thaw`] sends SIGCONT, and so does dropping it.
#[must_use = "the cluster is thawed when this is dropped"]
pub struct PgFrozen(Vec<String>);

/// Freezes the cluster: the postmaster first (so it forks nothing more),
/// then its children, each a process group of its own.
pub fn pg_freeze() -> PgFrozen {
    let data = std::env::var("BOTSPACE_PG_DATA").expect("BOTSPACE_PG_DATA (scripts/with-postgres.sh)");
    let pid_file = std::fs::read_to_string(format!("{data}/postmaster.pid")).expect("postmaster.pid");
    let postmaster = pid_file.lines().next().expect("the postmaster's pid").trim().to_string();
    signal("STOP", std::slice::from_ref(&postmaster));
    let mut pids = vec![postmaster.clone()];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …: comm may hold spaces, so after the last ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid == Some(postmaster.as_str()) {
            pids.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    signal("STOP", &pids[1..]);
    PgFrozen(pids)
}

fn signal(sig: &str, pids: &[String]) {
    if !pids.is_empty() {
        let ok = std::process::Command::new("kill").arg(format!("-{sig}")).args(pids).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{sig} {pids:?}");
    }
}

impl PgFrozen {
    pub fn thaw(mut self) {
        signal("CONT", &std::mem::take(&mut self.0));
    }
}

impl Drop for PgFrozen {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            signal("CONT", &std::mem::take(&mut self.0));
        }
    }
}

/// Many requests answered at once through the one way in
/// (`Service::handle`, each `Incoming::at_once`): a run of bot writes
/// commits as one group.
pub fn batch<R: AsRef<[u8]>>(svc: &Service, requests: &[R]) -> Vec<Vec<u8>> {
    let reqs: Vec<botspace::Incoming<'_>> =
        requests.iter().map(|r| botspace::Incoming::bytes(r.as_ref()).at_once()).collect();
    svc.handle(&reqs, svc.now_ms()).into_iter().map(|a| a.now_or_failed(svc)).collect()
}

/// One request from `peer` (the admin login throttle's client), answered
/// at once.
pub fn from_peer(svc: &Service, request: &[u8], peer: &str) -> Vec<u8> {
    svc.handle(&[botspace::Incoming::bytes(request).from_peer(peer).at_once()], svc.now_ms())
        .remove(0)
        .now_or_failed(svc)
}

/// One request from `peer` that may park (a getUpdates with a timeout).
pub fn answer(svc: &Service, request: &[u8], peer: &str, now_ms: u64) -> botspace::Handled {
    svc.handle(&[botspace::Incoming::bytes(request).from_peer(peer)], now_ms).remove(0)
}
