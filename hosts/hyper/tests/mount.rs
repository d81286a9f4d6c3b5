//! A host app mounts `Botspace` in its own hyper server (the crate's doc
//! example, run for real): bot REST methods, the host API and the
//! gateway's upgrade over TCP.

use botspace::{Config, Service};
use botspace_hyper::Botspace;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

const SECRET: &str = "mount-test-admin-secret-0001";

/// Reads one response (head and a Content-Length body) from `s`.
fn response(s: &mut TcpStream) -> (String, Value) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .map_or(0, |v| v.parse().unwrap());
            if buf.len() >= end + 4 + len {
                let body =
                    if len == 0 { Value::Null } else { serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap() };
                return (head, body);
            }
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn post(s: &mut TcpStream, path: &str, auth: &str, body: &Value) -> (String, Value) {
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    response(s)
}

#[test]
fn a_host_app_mounts_botspace_for_rest_the_host_api_and_the_gateway() {
    let config = Config::default().with(|c| {
        c.database = ":memory:".into();
        c.admin_secret = SECRET.into();
    });
    let app = Botspace::new(Arc::new(Service::open(config).unwrap()));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let svc = TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                let _ = conn.with_upgrades().await;
            });
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let admin = format!("Admin {SECRET}");
    let (head, created) = post(
        &mut s,
        "/admin/createBot",
        &admin,
        &json!({"display_name": "Echo", "handle": "echo_bot", "quota_tier": "standard"}),
    );
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let token = created["result"]["token"].as_str().unwrap().to_string();
    let bot_id = created["result"]["bot"]["id"].clone();
    // Keep-alive: the same connection answers the bot.
    let (head, me) = post(&mut s, "/bot/getMe", &format!("Bot {token}"), &json!({}));
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!((me["ok"].clone(), me["result"]["id"].clone()), (json!(true), bot_id.clone()));
    // The core's errors come through as they are.
    let (head, err) = post(&mut s, "/bot/getMe", "Bot nope", &json!({}));
    assert!(head.starts_with("HTTP/1.1 401 "), "{head}");
    assert_eq!(err["error"], json!("invalid_token"));
    s.write_all(b"GET /bot/getMe HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (head, err) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 405 ") && head.to_ascii_lowercase().contains("allow: post"), "{head}");
    assert_eq!(err["error"], json!("method_not_allowed"));

    // The gateway: 101 through hyper's upgrade, then the session's hello.
    let mut g = TcpStream::connect(addr).unwrap();
    g.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bot {token}\r\n\r\n"
    );
    g.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let hello = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 101 "), "{head}");
            assert!(head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="), "{head}");
            let frame = &buf[end + 4..];
            // An unmasked text frame with a 7- or 16-bit length.
            if frame.len() >= 4 {
                assert_eq!(frame[0], 0x81);
                let (start, len) = match frame[1] {
                    126 => (4, u16::from_be_bytes([frame[2], frame[3]]) as usize),
                    n => (2, n as usize),
                };
                if frame.len() >= start + len {
                    break serde_json::from_slice::<Value>(&frame[start..start + len]).unwrap();
                }
            }
        }
        let n = g.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    assert_eq!(hello["op"], json!("hello"), "{hello}");
    assert_eq!(hello["bot"]["id"], bot_id);
}

/// A mounted app on `:memory:` and the address it listens on.
fn serve(rt: &tokio::runtime::Runtime, max_body_bytes: usize) -> std::net::SocketAddr {
    let config = Config::default().with(|c| {
        c.database = ":memory:".into();
        c.admin_secret = SECRET.into();
        c.max_body_bytes = max_body_bytes;
    });
    let app = Botspace::new(Arc::new(Service::open(config).unwrap()));
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let svc = TowerToHyperService::new(app.clone());
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
        }
    });
    addr
}

/// What hyper parsed goes into the core as it is, and the core's rules hold
/// on it as on the bytes: the head alone refuses a body over the limit (the
/// body is never sent), a header that may appear once appears once, a
/// chunked body (decoded by hyper) is a body.
#[test]
fn a_parsed_request_meets_the_cores_rules() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let addr = serve(&rt, 1024);
    let connect = || {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let mut s = connect();
    let admin = format!("Admin {SECRET}");
    let bot = json!({"display_name": "Echo", "handle": "echo_bot", "quota_tier": "standard"});
    let (_, created) = post(&mut s, "/admin/createBot", &admin, &bot);
    let token = created["result"]["token"].as_str().unwrap().to_string();

    let mut s = connect();
    s.write_all(
        b"POST /bot/getMe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
    )
    .unwrap();
    let (head, err) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 413 ") && head.to_ascii_lowercase().contains("connection: close"), "{head}");
    assert_eq!((err["error"].clone(), err["error_code"].clone()), (json!("payload_too_large"), json!(413)));

    let mut s = connect();
    let twice = format!("POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nAuthorization: Bot {token}\r\nContent-Length: 0\r\n\r\n");
    s.write_all(twice.as_bytes()).unwrap();
    let (head, err) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
    assert_eq!(err["description"], json!("the Authorization header may appear only once"), "{err}");

    let chunked = format!("POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n1\r\n}}\r\n0\r\n\r\n");
    let mut s = connect();
    s.write_all(chunked.as_bytes()).unwrap();
    let (head, me) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(me["result"]["handle"], json!("echo_bot"), "{me}");

    // A chunked body past the core's limit (max_body_bytes) is refused as
    // the core refuses it, once the limit is passed, and the connection
    // ends (the rest is unread); so is one hyper cannot decode.
    let big = "x".repeat(1025);
    let over = format!("POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n401\r\n{big}\r\n0\r\n\r\n");
    let mut s = connect();
    s.write_all(over.as_bytes()).unwrap();
    let (head, err) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 413 ") && head.to_ascii_lowercase().contains("connection: close"), "{head}");
    assert_eq!(
        err,
        json!({"ok": false, "error_code": 413, "error": "payload_too_large",
               "description": "request body is larger than 1024 bytes"})
    );
    let bad = format!("POST /bot/getMe HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n");
    let mut s = connect();
    s.write_all(bad.as_bytes()).unwrap();
    let (head, err) = response(&mut s);
    assert!(head.starts_with("HTTP/1.1 400 ") && head.to_ascii_lowercase().contains("connection: close"), "{head}");
    assert_eq!(
        err,
        json!({"ok": false, "error_code": 400, "error": "invalid_request", "description": "malformed chunked body"})
    );
}
