//! Clean answers, clean exits and private files, against both example
//! servers over real TCP: every unclean request is answered with the
//! library's JSON (never an HTTP stack's own bare 400), an absolute-form
//! target is served by its path, the console works at `/admin/console/`,
//! a stop with stdout and stderr closed exits 0, a new database's
//! files are readable by their owner only, a HEAD answer has no body,
//! bytes no request starts with (TLS) get 400 at once, and hidden
//! characters in names are refused. Each scenario runs against the
//! Rust server (`rust::`) and the C server (`c::`), as in
//! tests/server_options.rs.

#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wire::*;

/// `Server::start_rust_with` or `Server::start_c_with`.
type Start = fn(&[&str]) -> Server;

servers! {
    both: [
        every_unclean_request_is_answered_with_the_librarys_json,
        an_absolute_form_target_is_served_by_its_path_and_big_numbers_are_json,
        the_console_works_at_its_trailing_slash_address,
        a_head_request_gets_the_status_and_headers_without_a_body,
        bytes_no_request_starts_with_get_400_at_once_and_the_connection_closes,
        handles_and_names_with_hidden_characters_are_refused_with_the_field_and_the_character,
    ],
    binary: [
        a_stop_with_stdout_and_stderr_closed_exits_0,
        a_new_database_and_its_wal_and_shm_are_0600,
    ],
}

/// One request on a fresh connection; the answer.
fn one(srv: &Server, req: &[u8]) -> RawResponse {
    let mut s = srv.connect();
    s.write_all(req).unwrap();
    read_response(&mut s, &mut Vec::new())
}

fn demo(srv: &Server, what: &str) -> String {
    let prefix = format!("demo {what}: ");
    srv.lines()
        .iter()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("no `{prefix}` line in {:?}", srv.lines()))
}

fn start(start: Start) -> Server {
    start(&["--admin-secret", SECRET, "--manual-clock"])
}

const BAD_CHAR: &str = "the request target is not valid: it holds a character a URI does not allow (percent-encode it)";
const NOT_A_TARGET: &str = "the request target is not valid: it must be a path starting with / or an http or https URL";

fn every_unclean_request_is_answered_with_the_librarys_json(start_with: Start) {
    let srv = start(start_with);
    let many_headers: String = (0..70).map(|i| format!("X-H{i}: v\r\n")).collect();
    let long_header = format!("X-Long: {}\r\n", "a".repeat(17 * 1024));
    let cases: Vec<(Vec<u8>, u16, &str, Option<&str>)> = vec![
        (b"GET /admin/console?x=<script> HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"GET /admin/console?x=< HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"GET /admin/console?x=> HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"GET /admin/console?x=\" HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"GET /admin/con`sole HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"POST /bot/getMe{} HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"POST /bot/getMe#top HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"POST /bot/g\xc3\xa9tMe HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"POST /bot/getMe?q=100% HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(BAD_CHAR)),
        (b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(NOT_A_TARGET)),
        (b"POST ftp://h/bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", Some(NOT_A_TARGET)),
        (b"POST http://u@h/bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 400, "invalid_request", None),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 400, "invalid_request", None),
        (b"POST /bot/getMe HTTP/1.1\r\nBad Header: x\r\n\r\n".to_vec(), 400, "invalid_request", None),
        (b"POST /bot/getMe HTTP/1.1\r\nContent-Length: abc\r\n\r\n".to_vec(), 400, "invalid_request", None),
        (
            b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_vec(),
            400,
            "invalid_request",
            None,
        ),
        (b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(), 411, "length_required", None),
        (
            b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            400,
            "duplicate_header",
            Some("the Transfer-Encoding header may appear only once"),
        ),
        (
            b"POST /bot/sendMessage HTTP/1.1\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
            400,
            "duplicate_header",
            Some("the Idempotency-Key header may appear only once"),
        ),
        (b"POST /bot/getMe HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec(), 400, "duplicate_header", None),
        (format!("POST /bot/getMe HTTP/1.1\r\n{many_headers}\r\n").into_bytes(), 431, "headers_too_large", None),
        (format!("POST /bot/getMe HTTP/1.1\r\n{long_header}\r\n").into_bytes(), 431, "headers_too_large", None),
        // A chunk size after spaces: the library reads it (and so must
        // every face), so this is an ordinary request without a credential.
        (
            b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n  2\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            401,
            "missing_authorization",
            None,
        ),
        (
            b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2;ext=\"q\"\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            401,
            "missing_authorization",
            None,
        ),
        // HTTP/1.0 with a chunked body (hyper refuses a Transfer-Encoding
        // in HTTP/1.0; the library reads it).
        (
            b"POST /bot/getMe HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                .to_vec(),
            401,
            "missing_authorization",
            None,
        ),
        // A request target of `*` names no method.
        (b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(), 404, "method_not_found", Some("no method at this path (method names are case-sensitive)")),
    ];
    for (req, status, code, description) in cases {
        let shown = String::from_utf8_lossy(&req[..req.len().min(120)]).into_owned();
        let r = one(&srv, &req);
        assert_eq!(r.header("content-type"), Some("application/json"), "{shown}: {r:?}");
        let v: Value = serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{shown}: not JSON ({e}): {r:?}"));
        assert_eq!(
            (r.status, v["ok"].as_bool(), v["error_code"].as_u64(), v["error"].as_str()),
            (status, Some(false), Some(status as u64), Some(code)),
            "{shown}: {v}"
        );
        if let Some(d) = description {
            assert_eq!(v["description"].as_str(), Some(d), "{shown}");
        }
    }
}

fn an_absolute_form_target_is_served_by_its_path_and_big_numbers_are_json(start_with: Start) {
    let srv = start(start_with);
    let token = demo(&srv, "bot token");
    let chat = demo(&srv, "chat");
    for target in ["http://127.0.0.1/bot/getMe", &format!("http://{}/bot/getMe?x=1", srv.addr), "HTTPS://h/bot/getMe"] {
        let req = format!("POST {target} HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\n\r\n");
        let r = one(&srv, req.as_bytes());
        assert_eq!((r.status, r.json()["ok"].as_bool()), (200, Some(true)), "{target}: {r:?}");
    }
    // 400 digits and an exponent past any float, where no field reads them.
    let body = format!(r#"{{"chat_id":"{chat}","text":"big","x":{},"y":[1e999999,-1e999999]}}"#, "9".repeat(400));
    let req = format!(
        "POST http://127.0.0.1/bot/sendMessage HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = one(&srv, req.as_bytes());
    assert_eq!((r.status, r.json()["result"]["text"].as_str()), (200, Some("big")), "{r:?}");
}

fn the_console_works_at_its_trailing_slash_address(start_with: Start) {
    let srv = start(start_with);
    for page in ["/admin/console", "/admin/console/", "/admin/console/index.html"] {
        let r = one(&srv, format!("GET {page} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!((r.status, r.header("content-type")), (200, Some("text/html; charset=utf-8")), "{page}");
        let html = String::from_utf8(r.body).unwrap();
        let mut refs = Vec::new();
        for attr in ["src=\"", "href=\""] {
            for (i, _) in html.match_indices(attr) {
                let rest = &html[i + attr.len()..];
                refs.push(rest[..rest.find('"').unwrap()].to_string());
            }
        }
        assert_eq!(refs.len(), 3, "{refs:?}");
        for r in refs {
            // What a browser fetches: the reference resolved against the
            // page's URL (RFC 3986, section 5.2).
            let url = if r.starts_with('/') { r.clone() } else { format!("{}{r}", &page[..=page.rfind('/').unwrap()]) };
            let asset = one(&srv, format!("GET {url} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            assert_eq!(asset.status, 200, "{page} links {r} = {url}: {asset:?}");
            assert!(!asset.body.is_empty(), "{url}");
        }
    }
}

/// Runs `bin` on a database in `dir` with stdout and stderr piped, reads
/// stdout to `botspace ready`; returns the child and what it printed.
fn spawn_on(bin: &Path, db: &str) -> (std::process::Child, Vec<String>) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && exec "$0" "$@""#)
        .arg(bin)
        .args(["--addr", "127.0.0.1:0", "--db", db, "--admin-secret", SECRET, "--demo"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap_or(0) == 0 {
            break;
        }
        let l = l.trim_end().to_string();
        let ready = l == "botspace ready";
        lines.push(l);
        if ready {
            child.stdout = Some(out.into_inner());
            return (child, lines);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no `botspace ready`: {lines:?}");
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit within 20 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn a_stop_with_stdout_and_stderr_closed_exits_0(bin: std::path::PathBuf) {
    for db in [":memory:".to_string(), temp_dir("clean-exit").join("botspace.db").to_string_lossy().into_owned()] {
        let (mut child, lines) = spawn_on(&bin, &db);
        let addr = lines[0].strip_prefix("botspace listening on http://").expect("first line").to_string();
        // Whoever read the server's output went away.
        drop(child.stdout.take());
        drop(child.stderr.take());
        // A request still gets its answer.
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let r = read_response(&mut s, &mut Vec::new());
        assert_eq!(r.status, 401);
        drop(s);
        // The stop writes its lines to the closed pipe, and exits 0.
        let st = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(st.success());
        let status = wait_exit(&mut child);
        assert_eq!(status.code(), Some(0), "{db}: {status:?}");
    }
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

fn a_new_database_and_its_wal_and_shm_are_0600(bin: std::path::PathBuf) {
    let dir = temp_dir("clean-mode");
    let db = dir.join("botspace.db");
    let (mut child, lines) = spawn_on(&bin, &db.to_string_lossy());
    let mut rd = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = rd.read_to_end(&mut sink);
    });
    assert!(lines.iter().any(|l| l.starts_with("demo bot token: ")), "the demo data was written: {lines:?}");
    // Under umask 022 SQLite would make them 0644.
    for f in ["botspace.db", "botspace.db-wal", "botspace.db-shm"] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f} while the server runs");
    }
    let st = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    assert_eq!(wait_exit(&mut child).code(), Some(0));
    assert_eq!(mode(&db), 0o600, "after the stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The head of the next answer on `s`, up to its empty line; the bytes
/// read past it stay in `buf`.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    let deadline = Instant::now() + WAIT;
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf.drain(..end + 4).collect()).unwrap();
            return head;
        }
        assert!(Instant::now() < deadline, "no head in {:?}", String::from_utf8_lossy(buf));
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "closed before a head: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A HEAD answer has no body: the status and headers the GET gets (here
/// the 405 of a POST-only path, Content-Length included), then nothing,
/// and the connection carries the next request.
fn a_head_request_gets_the_status_and_headers_without_a_body(start_with: Start) {
    let srv = start(start_with);
    let mut get = srv.connect();
    get.write_all(b"GET /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let get_head = read_head(&mut get, &mut buf);
    assert!(get_head.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{get_head}");
    assert!(get_head.contains("\r\nAllow: POST\r\n") && get_head.contains("\r\nContent-Length: "), "{get_head}");

    let mut s = srv.connect();
    s.write_all(b"HEAD /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_head(&mut s, &mut buf), get_head, "the GET's status and headers");
    // No body follows: the next answer on the connection starts right
    // after the head.
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut extra = [0u8; 64];
    match s.read(&mut extra) {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
        other => panic!("bytes after a HEAD answer's head: {other:?} {:?}", String::from_utf8_lossy(&buf)),
    }
    assert!(buf.is_empty(), "{:?}", String::from_utf8_lossy(&buf));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"POST /bot/getMe HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").unwrap();
    let r = read_response(&mut s, &mut buf);
    assert_eq!((r.status, r.json()["error"].as_str()), (401, Some("missing_authorization")), "{r:?}");
}

/// Bytes no request line starts with (a TLS ClientHello, binary) get the
/// library's 400 at once, not the 408 of the request timeout (30 s), and
/// the connection closes.
fn bytes_no_request_starts_with_get_400_at_once_and_the_connection_closes(start_with: Start) {
    let srv = start(start_with);
    let mut hello = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    hello.extend_from_slice(&[0x5a; 32]);
    for start in [hello, b"\x00\x01\x02".to_vec(), b"GET\x00".to_vec()] {
        let t = Instant::now();
        let mut s = srv.connect();
        s.write_all(&start).unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf);
        let took = t.elapsed();
        assert!(took < Duration::from_secs(2), "{start:x?}: answered after {took:?}");
        assert_eq!((r.status, r.header("connection")), (400, Some("close")), "{start:x?}: {r:?}");
        assert_eq!(
            r.json(),
            json!({"ok": false, "error_code": 400, "error": "invalid_request",
                   "description": "malformed HTTP request: invalid token"}),
            "{start:x?}"
        );
        // Then the connection closes (after the lingering close).
        let mut rest = [0u8; 256];
        match s.read(&mut rest) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(_) => panic!("{start:x?}: bytes after the 400"),
            Err(e) => panic!("{start:x?}: no close: {e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{start:x?}: closed after {:?}", t.elapsed());
    }
}

/// The name rules (src/rules/names.rs) reach both servers' host API
/// unchanged: the exact refusal, and nothing created.
fn handles_and_names_with_hidden_characters_are_refused_with_the_field_and_the_character(start_with: Start) {
    let srv = start(start_with);
    let before = srv.admin("getStats", &json!({}));
    let cases = [
        (
            "createBot",
            json!({"display_name": "X", "handle": "echo-bot"}),
            "handle",
            "may contain only letters a-z, digits 0-9 and _ (found U+002D)",
        ),
        ("createBot", json!({"display_name": "X", "handle": "a".repeat(33)}), "handle", "must be 1 to 32 characters"),
        (
            "createUser",
            json!({"display_name": "\u{1b}[2JAdmin"}),
            "display_name",
            "must not contain control characters (found U+001B)",
        ),
        (
            "createUser",
            json!({"display_name": "Ann\u{0}"}),
            "display_name",
            "must not contain control characters (found U+0000)",
        ),
        (
            "createBot",
            json!({"display_name": "Pay\u{202e}gnp.exe", "handle": "pay_bot"}),
            "display_name",
            "must not contain bidirectional override or isolate characters (found U+202E)",
        ),
        (
            "createGroup",
            json!({"title": "ad\u{200b}mins"}),
            "title",
            "must not contain zero-width characters (found U+200B)",
        ),
    ];
    for (method, body, field, why) in cases {
        let r = srv.admin_resp(method, &body);
        assert_eq!(
            (r.status, r.body.clone()),
            (
                400,
                json!({"ok": false, "error_code": 400, "error": "invalid_field",
                         "description": format!("field {field} {why}"), "parameters": {"field": field}})
            ),
            "{method} {body}"
        );
    }
    assert_eq!(srv.admin("getStats", &json!({})), before, "nothing was created");
}
