//! `examples/axum.rs` runs: built and started as a newcomer would, it
//! answers its own route and botspace's, side by side on one port.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

const SECRET: &str = "axum-example-admin-secret-01";

/// The example, built for this test's profile.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/axum
    let profile_dir = exe.parent().and_then(|p| p.parent()).expect("target/<profile>").to_path_buf();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", "botspace-hyper", "--example", "axum"]).current_dir(env!("CARGO_MANIFEST_DIR"));
    // What `cargo test` sets for the running test would make the nested
    // build rerun build scripts that watch them.
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("CARGO_PKG_") || k.starts_with("CARGO_MANIFEST_")) {
            cmd.env_remove(k);
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo build --example axum").success(), "cargo build --example axum failed");
    let bin = profile_dir.join("examples").join("axum");
    assert!(bin.exists(), "{} missing after the build", bin.display());
    bin
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request on a new connection: (status line, body).
fn request(addr: &str, req: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head in {out:?}"));
    (head.lines().next().unwrap().to_string(), body.to_string())
}

fn post(addr: &str, path: &str, auth: &str, body: &Value) -> (String, Value) {
    let body = body.to_string();
    let (status, text) = request(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {auth}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}")))
}

#[test]
fn the_axum_example_serves_its_own_route_and_botspace_side_by_side() {
    let dir = std::env::temp_dir().join(format!("botspace-axum-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(example_binary())
        .args(["--addr", "127.0.0.1:0", "--db"])
        .arg(dir.join("app.db"))
        .env("BOTSPACE_ADMIN_SECRET", SECRET)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the axum example");
    let mut running = Running(child);
    let mut first = String::new();
    BufReader::new(running.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("axum app listening on http://")
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_string();

    // The app's own route.
    let (status, body) = request(&addr, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "hello from the app\n"));

    // botspace beside it: the host API creates a bot, the bot calls getMe.
    let (status, created) = post(
        &addr,
        "/admin/createBot",
        &format!("Admin {SECRET}"),
        &json!({"display_name": "Axum Bot", "handle": "axum_bot"}),
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{created}");
    let token = created["result"]["token"].as_str().unwrap();
    let (status, me) = post(&addr, "/bot/getMe", &format!("Bot {token}"), &json!({}));
    assert_eq!(status, "HTTP/1.1 200 OK", "{me}");
    assert_eq!(
        (me["result"]["handle"].as_str(), &me["result"]["id"]),
        (Some("axum_bot"), &created["result"]["bot"]["id"])
    );
    // The operator's probes and metrics through the same mount.
    let (status, body) = request(&addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", r#"{"ok":true}"#));
    let (status, body) = request(&addr, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", r#"{"ok":true}"#));
    let (status, metrics) = request(
        &addr,
        &format!(
            "GET /admin/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Admin {SECRET}\r\n\r\n"
        ),
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(metrics.contains("# TYPE botspace_requests_total counter"), "{metrics}");
    // A path outside botspace's is the app's (axum's) 404, not botspace's.
    let (status, _) = request(&addr, "GET /elsewhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    drop(running);
    let _ = std::fs::remove_dir_all(dir);
}
