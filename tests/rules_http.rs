//! HTTP rules the JSON vectors cannot express: bodies that are not valid
//! UTF-8, chunked transfer coding, missing Content-Length, and the framing
//! API a host uses to cut requests out of a TCP stream.

mod common;

use botspace::{frame_request, Config, Framing, Service};
use common::{admin_read, request, split_checked, split_with_headers};
use serde_json::json;

const SECRET: &str = "rules-admin-secret-0001";

fn service(max_body: usize) -> Service {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual", "max_body_bytes": max_body});
    Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap()
}

/// A user, a free bot and their started chat: (bot token, chat id).
fn world(svc: &Service) -> (String, String) {
    let u = admin_read(svc, SECRET, "createUser", json!({"display_name": "Ann"}), split_checked)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = admin_read(svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b"}), split_checked);
    let token = b["token"].as_str().unwrap().to_string();
    let bot_id = b["bot"]["id"].as_str().unwrap().to_string();
    let chat = admin_read(svc, SECRET, "startBot", json!({"user_id": u, "bot_id": bot_id}), split_checked)["id"]
        .as_str()
        .unwrap()
        .to_string();
    (token, chat)
}

fn history_len(svc: &Service, chat: &str) -> usize {
    admin_read(svc, SECRET, "getChatHistory", json!({"chat_id": chat}), split_checked).as_array().unwrap().len()
}

fn error_of(raw: &[u8]) -> (u16, String) {
    let (s, _, v) = split_with_headers(raw);
    (s, v["error"].as_str().unwrap_or("").to_string())
}

#[test]
fn invalid_utf8_body_is_invalid_json() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let auth = format!("Bot {token}");
    let mut body = format!("{{\"chat_id\":\"{chat}\",\"text\":\"").into_bytes();
    body.extend_from_slice(&[0xff, 0xfe, b'a', 0xc3]);
    body.extend_from_slice(b"\"}");
    let raw = svc.handle_request(&request("/bot/sendMessage", &auth, "", &body));
    let (status, _, v) = split_with_headers(&raw);
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_json")), "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(v["error_code"], 400);
    // An overlong encoding and a UTF-8-encoded surrogate are not UTF-8 either.
    for bad in [&[0xc0u8, 0xaf][..], &[0xed, 0xa0, 0x80][..]] {
        let mut body = format!("{{\"chat_id\":\"{chat}\",\"text\":\"").into_bytes();
        body.extend_from_slice(bad);
        body.extend_from_slice(b"\"}");
        assert_eq!(
            error_of(&svc.handle_request(&request("/bot/sendMessage", &auth, "", &body))),
            (400, "invalid_json".into())
        );
    }
    // Invalid UTF-8 on the host API too.
    let raw = svc.handle_request(&request(
        "/admin/createUser",
        &format!("Admin {SECRET}"),
        "",
        b"{\"display_name\":\"\xff\"}",
    ));
    assert_eq!(error_of(&raw), (400, "invalid_json".into()));
    assert_eq!(history_len(&svc, &chat), 0, "nothing was written");
}

#[test]
fn lone_surrogate_escapes_are_invalid_json() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let auth = format!("Bot {token}");
    for esc in [r"\ud800", r"\udc00", r"\ud800x", r"\ud800\u0041", r"\udfff\ud800"] {
        let body = format!("{{\"chat_id\":\"{chat}\",\"text\":\"{esc}\"}}");
        let raw = svc.handle_request(&request("/bot/sendMessage", &auth, "", body.as_bytes()));
        assert_eq!(error_of(&raw), (400, "invalid_json".into()), "escape {esc}");
    }
    // A proper surrogate pair is one character (U+1F600).
    let body = format!("{{\"chat_id\":\"{chat}\",\"text\":\"\\ud83d\\ude00\"}}");
    let (status, _, v) =
        split_with_headers(&svc.handle_request(&request("/bot/sendMessage", &auth, "", body.as_bytes())));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["text"], "😀");
    assert_eq!(history_len(&svc, &chat), 1);
}

fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut pos = 0;
    for &s in sizes.iter().chain(std::iter::repeat(&usize::MAX)) {
        if pos >= body.len() {
            break;
        }
        let n = s.min(body.len() - pos);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&body[pos..pos + n]);
        out.extend_from_slice(b"\r\n");
        pos += n;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn chunked_request(path: &str, auth: &str, encoded: &[u8]) -> Vec<u8> {
    let mut r = format!("POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    r.extend_from_slice(encoded);
    r
}

#[test]
fn chunked_body_is_decoded() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let auth = format!("Bot {token}");
    let body = json!({"chat_id": chat, "text": "chunked ✓ é"}).to_string();
    let encoded = chunked(body.as_bytes(), &[1, 7, 3, 100]);
    let req = chunked_request("/bot/sendMessage", &auth, &encoded);
    assert_eq!(frame_request(&req, 65_536).complete_len(), Some(req.len()));
    let (status, _, v) = split_with_headers(&svc.handle_request(&req));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["text"], "chunked ✓ é");

    // Chunk extensions and trailer fields are allowed and ignored.
    let body = json!({"chat_id": chat, "text": "ext"}).to_string();
    let mut enc = format!("{:x};name=value\r\n", body.len()).into_bytes();
    enc.extend_from_slice(body.as_bytes());
    enc.extend_from_slice(b"\r\n0\r\nX-Trailer: 1\r\n\r\n");
    let req = chunked_request("/bot/sendMessage", &auth, &enc);
    assert_eq!(frame_request(&req, 65_536).complete_len(), Some(req.len()));
    let (status, _, v) = split_with_headers(&svc.handle_request(&req));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["text"], "ext");
    assert_eq!(v["result"]["message_id"], "2");

    // Header name and value of Transfer-Encoding match case-insensitively.
    let body = json!({"chat_id": chat, "text": "case"}).to_string();
    let mut req = format!("POST /bot/sendMessage HTTP/1.1\r\nauthorization: {auth}\r\ncontent-type: application/json\r\ntransfer-encoding: Chunked\r\n\r\n").into_bytes();
    req.extend_from_slice(&chunked(body.as_bytes(), &[5]));
    let (status, _, v) = split_with_headers(&svc.handle_request(&req));
    assert_eq!(status, 200, "{v}");
    assert_eq!(history_len(&svc, &chat), 3);
}

#[test]
fn chunked_body_over_the_limit_is_413() {
    let svc = service(1024);
    let (token, chat) = world(&svc);
    let auth = format!("Bot {token}");
    let body = json!({"chat_id": chat, "text": "x".repeat(1500)}).to_string();
    let req = chunked_request("/bot/sendMessage", &auth, &chunked(body.as_bytes(), &[100]));
    assert_eq!(error_of(&svc.handle_request(&req)), (413, "payload_too_large".into()));
    // The framer refuses it as soon as the declared chunks pass the limit,
    // before the rest arrives.
    let cut = &req[..req.len() / 2 + 200];
    match frame_request(cut, 1024) {
        Framing::Invalid(resp) => assert_eq!(error_of(&resp), (413, "payload_too_large".into())),
        other => panic!("expected Invalid(413), got {other:?}"),
    }
    // A single chunk declared over the limit is refused from its size line.
    let mut head = chunked_request("/bot/sendMessage", &auth, b"");
    head.extend_from_slice(b"10000\r\n{\"a\":");
    match frame_request(&head, 1024) {
        Framing::Invalid(resp) => assert_eq!(error_of(&resp), (413, "payload_too_large".into())),
        other => panic!("expected Invalid(413), got {other:?}"),
    }
    // Chunked exactly at the limit is fine.
    let pad = 1024 - json!({"chat_id": chat, "text": "ok", "p": ""}).to_string().len();
    let body = json!({"chat_id": chat, "text": "ok", "p": "y".repeat(pad)}).to_string();
    assert_eq!(body.len(), 1024);
    let req = chunked_request("/bot/sendMessage", &auth, &chunked(body.as_bytes(), &[300]));
    let (status, _, v) = split_with_headers(&svc.handle_request(&req));
    assert_eq!(status, 200, "{v}");
    assert_eq!(history_len(&svc, &chat), 1);
}

#[test]
fn body_without_content_length_is_411() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let body = json!({"chat_id": chat, "text": "no length"}).to_string();
    let req = format!("POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\n\r\n{body}");
    let raw = svc.handle_request(req.as_bytes());
    let (status, _, v) = split_with_headers(&raw);
    assert_eq!((status, v["error"].as_str()), (411, Some("length_required")), "{v}");
    // A transfer coding other than chunked cannot be decoded: 411 too.
    let req = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n{body}"
    );
    assert_eq!(error_of(&svc.handle_request(req.as_bytes())), (411, "length_required".into()));
    // 411 is a transport error: it comes before authentication.
    let req = format!("POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\r\n{body}");
    assert_eq!(error_of(&svc.handle_request(req.as_bytes())), (411, "length_required".into()));
    // ...and after 405.
    let req = format!("GET /bot/sendMessage HTTP/1.1\r\nHost: t\r\n\r\n{body}");
    let raw = svc.handle_request(req.as_bytes());
    let (status, headers, _) = split_with_headers(&raw);
    assert_eq!(status, 405);
    assert!(headers.iter().any(|(n, v)| n == "allow" && v == "POST"));
    assert_eq!(history_len(&svc, &chat), 0);
}

#[test]
fn content_length_and_chunked_together_are_refused() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let body = json!({"chat_id": chat, "text": "smuggle"}).to_string();
    let enc = chunked(body.as_bytes(), &[10]);
    let mut req = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        enc.len()
    )
    .into_bytes();
    req.extend_from_slice(&enc);
    let (status, _) = error_of(&svc.handle_request(&req));
    assert!(status == 400 || status == 411, "status {status}");
    assert!(matches!(frame_request(&req, 65_536), Framing::Invalid(_)));
    assert_eq!(history_len(&svc, &chat), 0);
}

fn simple(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn frame_request_complete_incomplete_and_pipelined() {
    let a = simple("/bot/getMe", "{}");
    let b = simple("/admin/createUser", "{\"display_name\":\"Zed\"}");
    let c = b"POST /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
    assert_eq!(frame_request(&a, 65_536).complete_len(), Some(a.len()));
    assert_eq!(frame_request(&c, 65_536).complete_len(), Some(c.len()));
    assert_eq!(frame_request(b"", 65_536), Framing::Incomplete);
    // Every strict prefix is incomplete.
    for n in 0..a.len() {
        assert_eq!(frame_request(&a[..n], 65_536), Framing::Incomplete, "prefix of {n} bytes");
    }
    // Pipelined: three requests back to back are cut one by one.
    let mut stream = Vec::new();
    stream.extend_from_slice(&a);
    stream.extend_from_slice(&b);
    stream.extend_from_slice(&c);
    stream.extend_from_slice(&a[..10]);
    let svc = service(65_536);
    let mut rest = &stream[..];
    let mut answers = Vec::new();
    for expected in [a.len(), b.len(), c.len()] {
        match svc.frame_request(rest) {
            Framing::Complete { len: n, .. } => {
                assert_eq!(n, expected);
                answers.push(svc.handle_request(&rest[..n]));
                rest = &rest[n..];
            }
            other => panic!("expected Complete({expected}), got {other:?}"),
        }
    }
    assert_eq!(svc.frame_request(rest), Framing::Incomplete, "the partial fourth request waits for more bytes");
    assert_eq!(error_of(&answers[0]), (401, "missing_authorization".into()));
    assert_eq!(error_of(&answers[1]), (401, "missing_authorization".into()));
    // Pipelined chunked request followed by another.
    let body = b"{\"display_name\":\"Q\"}";
    let mut ch = chunked_request("/admin/createUser", &format!("Admin {SECRET}"), &chunked(body, &[4]));
    let first = ch.len();
    ch.extend_from_slice(&a);
    assert_eq!(frame_request(&ch, 65_536).complete_len(), Some(first));
    let (status, _, v) = split_with_headers(&svc.handle_request(&ch[..first]));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["display_name"], "Q");
    // A partial chunked body is incomplete.
    assert_eq!(frame_request(&ch[..first - 3], 65_536), Framing::Incomplete);
}

#[test]
fn frame_request_invalid_cases() {
    // 413 from the headers alone: the body never needs to be buffered.
    let head = b"POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n";
    match frame_request(head, 65_536) {
        Framing::Invalid(resp) => assert_eq!(error_of(&resp), (413, "payload_too_large".into())),
        other => panic!("expected Invalid(413), got {other:?}"),
    }
    let svc = service(1024);
    match svc.frame_request(b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 1025\r\n\r\n") {
        Framing::Invalid(resp) => assert_eq!(error_of(&resp), (413, "payload_too_large".into())),
        other => panic!("expected Invalid(413) under the service's own limit, got {other:?}"),
    }
    assert_eq!(svc.frame_request(b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 1024\r\n\r\n"), Framing::Incomplete);
    // Garbage is invalid with a JSON error response.
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
    ] {
        match frame_request(garbage, 65_536) {
            Framing::Invalid(resp) => {
                let (status, _, v) = split_with_headers(&resp);
                assert!((400..500).contains(&status), "status {status}");
                assert_eq!(v["ok"], false);
            }
            other => panic!("expected Invalid for {:?}, got {other:?}", String::from_utf8_lossy(garbage)),
        }
    }
    // Endless headers are refused instead of buffered forever.
    let mut huge = b"POST /bot/getMe HTTP/1.1\r\n".to_vec();
    while huge.len() < 40_000 {
        huge.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    assert!(matches!(frame_request(&huge, 65_536), Framing::Invalid(_)));
}

#[test]
fn handle_request_answers_incomplete_input_with_an_error_not_a_panic() {
    let svc = service(65_536);
    for input in [&b""[..], b"POST", b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}", b"\xff\xfe\r\n\r\n"] {
        let raw = svc.handle_request(input);
        let (status, _, v) = split_with_headers(&raw);
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["ok"], false);
    }
}

#[test]
fn every_response_is_json_with_exact_content_length() {
    let svc = service(1024);
    let (token, chat) = world(&svc);
    let requests: Vec<Vec<u8>> = vec![
        request("/bot/getMe", &format!("Bot {token}"), "", b""),
        request(
            "/bot/sendMessage",
            &format!("Bot {token}"),
            "",
            json!({"chat_id": chat, "text": "é😀"}).to_string().as_bytes(),
        ),
        request("/bot/nothing", "Bot x", "", b"{}"),
        b"DELETE /bot/getMe HTTP/1.1\r\n\r\n".to_vec(),
        request("/bot/getMe", "Bot x", "", &[b'x'; 2000]),
        simple("/admin/getUpdates", "{}"),
    ];
    for r in requests {
        let raw = svc.handle_request(&r);
        split_with_headers(&raw); // asserts Content-Type and Content-Length
    }
}

/// Feeds `stream` to a RequestFramer one byte at a time, as a host reading a
/// trickling client would, and checks every answer against the stateless
/// `frame_request` on the same buffer.
fn framer_agrees_byte_by_byte(stream: &[u8], max: usize) -> Vec<Framing> {
    let mut framer = botspace::RequestFramer::new(max);
    let (mut start, mut answers) = (0, Vec::new());
    for end in 1..=stream.len() {
        let buf = &stream[start..end];
        let f = framer.frame(buf);
        assert_eq!(f, frame_request(buf, max), "at byte {end} of {:?}", String::from_utf8_lossy(stream));
        match f {
            Framing::Incomplete => {}
            Framing::Complete { len: n, .. } => {
                start += n;
                answers.push(f);
            }
            Framing::Invalid(_) => {
                answers.push(f);
                break;
            }
        }
    }
    answers
}

fn one_byte_chunks(body: &str) -> String {
    let mut s = String::new();
    for c in body.chars() {
        s.push_str(&format!("{:x}\r\n{c}\r\n", c.len_utf8()));
    }
    s + "0\r\nX-Trailer: 1\r\n\r\n"
}

#[test]
fn the_resuming_framer_answers_as_frame_request_at_every_byte() {
    let body = r#"{"chat_id":"c","text":"hello"}"#;
    let chunked = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        one_byte_chunks(body)
    );
    let sized = format!("POST /bot/sendMessage HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let bare_lf = "POST /bot/getMe HTTP/1.1\nHost: t\n\n";
    // Pipelined: three requests back to back, each framed in turn.
    let all = format!("{sized}{chunked}{bare_lf}");
    let answers = framer_agrees_byte_by_byte(all.as_bytes(), 1024);
    assert_eq!(
        answers.iter().map(Framing::complete_len).collect::<Vec<_>>(),
        vec![Some(sized.len()), Some(chunked.len()), Some(bare_lf.len())]
    );
    // Refusals come at the same byte, with the same response.
    for bad in [
        "POST /bot/sendMessage HTTP/1.1\r\nContent-Length: 5000\r\n\r\n".to_string(),
        "POST /bot/sendMessage HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_string(),
        "GET /bot/sendMessage HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n".to_string(),
        format!("POST /bot/x HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(17 * 1024)),
        format!(
            "POST /bot/sendMessage HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            one_byte_chunks(&"a".repeat(1100))
        ),
    ] {
        let answers = framer_agrees_byte_by_byte(bad.as_bytes(), 1024);
        assert!(matches!(answers.last(), Some(Framing::Invalid(_))), "{bad:.80}");
    }
    // Bytes no request starts with are refused at their first wrong byte,
    // before any head is whole.
    for (bad, at) in [(&b"\x16\x03\x01\x02\x00\x01\x00"[..], 1), (b"\r\n\r\x16\x03", 4), (b"GET\x00/ HTTP/1.1\r\n", 4)]
    {
        let mut framer = botspace::RequestFramer::new(1024);
        for end in 1..=bad.len() {
            let f = framer.frame(&bad[..end]);
            assert_eq!(f, frame_request(&bad[..end], 1024), "{bad:?} at {end}");
            assert_eq!(matches!(f, Framing::Invalid(_)), end >= at, "{bad:?} at {end}: {f:?}");
            if end >= at {
                break;
            }
        }
    }
}

/// The standard reason phrases (IANA's HTTP status code registry, RFC 9110
/// §15) of every status botspace or its example servers send. A status
/// missing here fails the tests below until it is added.
const STANDARD_REASONS: &[(u16, &str)] = &[
    (100, "Continue"),
    (101, "Switching Protocols"),
    (200, "OK"),
    (204, "No Content"),
    (304, "Not Modified"),
    (400, "Bad Request"),
    (401, "Unauthorized"),
    (403, "Forbidden"),
    (404, "Not Found"),
    (405, "Method Not Allowed"),
    (408, "Request Timeout"),
    (409, "Conflict"),
    (411, "Length Required"),
    (413, "Content Too Large"),
    (415, "Unsupported Media Type"),
    (426, "Upgrade Required"),
    (429, "Too Many Requests"),
    (431, "Request Header Fields Too Large"),
    (500, "Internal Server Error"),
    (501, "Not Implemented"),
    (503, "Service Unavailable"),
];

fn standard_reason(status: u16) -> &'static str {
    STANDARD_REASONS
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("status {status} is sent but has no entry in STANDARD_REASONS"))
}

fn status_line(raw: &[u8]) -> &str {
    let end = raw.windows(2).position(|w| w == b"\r\n").expect("a status line");
    std::str::from_utf8(&raw[..end]).expect("an ASCII status line")
}

#[test]
fn every_status_the_library_sends_has_its_standard_reason_phrase() {
    let mut seen = std::collections::BTreeSet::new();
    for e in botspace::error::catalog() {
        let (status, code) = (e.status(), e.code());
        let resp = e.into_response();
        assert_eq!(status_line(&resp), format!("HTTP/1.1 {status} {}", standard_reason(status)), "{code}");
        seen.insert(status);
    }
    // 503 (storage_unavailable, commit_outcome_unknown) went out as
    // "503 Unknown" before the phrases came from the http crate.
    assert!(seen.contains(&503) && seen.contains(&413) && seen.contains(&431), "{seen:?}");
    let svc = service(1 << 20);
    let ok =
        svc.handle_request(&request("/admin/createUser", &format!("Admin {SECRET}"), "", br#"{"display_name":"Ann"}"#));
    assert_eq!(status_line(&ok), "HTTP/1.1 200 OK");
    // 101 Switching Protocols: tests/vectors.rs asserts the whole line on every upgrade.
}

/// Status lines written as text rather than from the catalog: the
/// gateway's 101, the console's 304, the metrics' 200, the hosts' 100
/// Continue, 408 and busy 503 (wherever they live today: the core, the
/// hyper host, the C server, the JavaScript). Each `"NNN Phrase` or
/// `HTTP/1.1 NNN Phrase` literal in those sources carries the standard
/// phrase. The example servers write none of their own: their 100, 408
/// and 503 come from the library.
#[test]
fn every_status_line_written_as_text_has_its_standard_reason_phrase_and_the_example_servers_write_none() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "hosts/hyper/src", "wasm/js"] {
        sources_under(&root.join(dir), &mut files);
    }
    files.push(root.join("examples/c-server/server.c"));
    files.push(root.join("examples/server.rs"));
    let mut found = std::collections::BTreeMap::<u16, Vec<String>>::new();
    for file in &files {
        let src = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file.strip_prefix(root).unwrap().display().to_string();
        for (status, phrase) in status_literals(&src) {
            assert_eq!(phrase, standard_reason(status), "{name}: status {status}");
            found.entry(status).or_default().push(name.clone());
        }
    }
    // The scan sees the lines it is about: a scan that finds nothing checks nothing.
    for s in [100, 101, 200, 304] {
        assert!(found.contains_key(&s), "no {s} status line found in {} files: {found:?}", files.len());
    }
    for name in ["examples/c-server/server.c", "examples/server.rs"] {
        let own: Vec<_> = found.iter().filter(|(_, files)| files.iter().any(|f| f == name)).map(|(s, _)| s).collect();
        assert!(own.is_empty(), "{name} writes status lines of its own: {own:?}");
    }
}

/// The `.rs`, `.c` and `.js` files under `dir`.
fn sources_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = entry.unwrap().path();
        if p.is_dir() {
            sources_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs" || e == "c" || e == "js") {
            out.push(p);
        }
    }
}

/// Each `"NNN Phrase` or `HTTP/1.1 NNN Phrase` in `src`: the status and
/// its phrase (letters, spaces and hyphens).
fn status_literals(src: &str) -> Vec<(u16, String)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    for i in 1..b.len().saturating_sub(5) {
        let starts_literal = b[i - 1] == b'"' || b[..i].ends_with(b"HTTP/1.1 ");
        if starts_literal
            && b[i..i + 3].iter().all(u8::is_ascii_digit)
            && b[i + 3] == b' '
            && b[i + 4].is_ascii_uppercase()
        {
            let phrase: String =
                src[i + 4..].chars().take_while(|c| c.is_ascii_alphabetic() || *c == ' ' || *c == '-').collect();
            out.push((src[i..i + 3].parse().unwrap(), phrase.trim_end().to_string()));
        }
    }
    out
}

#[test]
fn the_status_line_scan_reads_literals_in_each_language() {
    let rust = r#"out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n"); let s = "408 Request Timeout";"#;
    let c = r#"json_response(&out, "503 Service Unavailable", "Retry-After: 1\r\n", body, n);"#;
    let js = "head = `HTTP/1.1 200 OK\r\n`; x = '404'; y = \"12 Monkeys\";";
    let all: Vec<(u16, String)> = [rust, c, js].iter().flat_map(|s| status_literals(s)).collect();
    let want = [(101, "Switching Protocols"), (408, "Request Timeout"), (503, "Service Unavailable"), (200, "OK")];
    assert_eq!(all, want.map(|(s, p)| (s, p.to_string())));
}

/// The head of a complete request, as the framer read it.
fn head_of(req: &[u8]) -> botspace::RequestHead {
    match frame_request(req, 65_536) {
        Framing::Complete { len, head } => {
            assert_eq!(len, req.len(), "{}", String::from_utf8_lossy(req));
            head
        }
        other => panic!("not complete: {other:?}"),
    }
}

/// A complete frame carries what hosts need from the head (keep-alive,
/// upgrade, expect-continue, where the method and path are), so a host
/// never parses the head again.
#[test]
fn a_complete_frame_carries_the_parsed_head() {
    let req = b"POST /bot/sendMessage?x=1 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}";
    let h = head_of(req);
    assert_eq!(h.len, req.len() - 2);
    assert_eq!(h.request_line_end, "POST /bot/sendMessage?x=1 HTTP/1.1\r\n".len());
    assert_eq!((h.method_start, h.method_len, h.method(req)), (0, 4, "POST"));
    assert_eq!((h.path_start, h.path_len, h.path(req)), (5, 16, "/bot/sendMessage"));
    assert_eq!(h.http_minor, 1);
    assert!(h.keep_alive && !h.close_token && !h.upgrade && h.expect_continue);
    assert_eq!(h.expect_offset, Some("POST /bot/sendMessage?x=1 HTTP/1.1\r\nHost: t\r\n".len()));

    // HTTP/1.0 closes unless it asks for keep-alive; a close token always closes.
    let h = head_of(b"GET /bot/getMe HTTP/1.0\r\n\r\n");
    assert_eq!((h.http_minor, h.keep_alive, h.close_token, h.expect_offset), (0, false, false, None));
    let h = head_of(b"GET /bot/getMe HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert_eq!((h.http_minor, h.keep_alive, h.close_token), (0, true, false));
    let h = head_of(b"GET /bot/getMe HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n");
    assert_eq!((h.http_minor, h.keep_alive, h.close_token), (1, false, true));

    // A WebSocket upgrade needs both the Upgrade header and the Connection token.
    let up = b"GET /bot/gateway?after=0 HTTP/1.1\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\r\n";
    let h = head_of(up);
    assert!(h.upgrade && h.keep_alive);
    assert_eq!((h.method(up), h.path(up)), ("GET", "/bot/gateway"));
    assert!(!head_of(b"GET /bot/gateway HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").upgrade);
    assert!(!head_of(b"GET /bot/gateway HTTP/1.1\r\nConnection: upgrade\r\n\r\n").upgrade);

    // Another expectation is not 100-continue, but its offset is still given.
    let h = head_of(b"POST /bot/getMe HTTP/1.1\nexpect: 200-ok\n\n");
    assert_eq!((h.expect_continue, h.expect_offset, h.request_line_end), (false, Some(25), 25));
}

/// While only body bytes are missing, the resuming framer already has the
/// head: the host answers `Expect: 100-continue` from it.
#[test]
fn the_framer_shows_the_head_while_the_body_is_missing() {
    let req = b"POST /bot/getMe HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}";
    let mut framer = botspace::RequestFramer::new(65_536);
    assert_eq!(framer.frame(&req[..20]), Framing::Incomplete);
    assert_eq!(framer.pending_head(), None, "no head before the head is whole");
    assert_eq!(framer.frame(&req[..req.len() - 2]), Framing::Incomplete);
    let pending = *framer.pending_head().expect("the head is whole");
    assert!(pending.expect_continue && pending.keep_alive);
    assert_eq!(pending.len, req.len() - 2);
    match framer.frame(req) {
        Framing::Complete { len, head } => assert_eq!((len, head), (req.len(), pending)),
        other => panic!("{other:?}"),
    }
    assert_eq!(framer.pending_head(), None, "a new request starts after a complete one");
}

// ---------------------------------------------------------------------------
// Request targets, repeated headers and out-of-range numbers

/// What the framer and `handle_request` answer for a raw request, as
/// (status, error); the framer's `Complete` is `(0, "")`.
fn framed(req: &[u8]) -> (u16, String) {
    match frame_request(req, 65_536) {
        Framing::Invalid(resp) => error_of(&resp),
        Framing::Complete { .. } => (0, String::new()),
        Framing::Incomplete => panic!("incomplete: {:?}", String::from_utf8_lossy(req)),
    }
}

const BAD_TARGET: &str =
    "the request target is not valid: it holds a character a URI does not allow (percent-encode it)";

#[test]
fn a_target_with_characters_a_uri_does_not_allow_is_400_invalid_request() {
    let svc = service(65_536);
    for target in [
        "/admin/console?x=<script>",
        "/admin/console?x=%3Cscript%3E<",
        "/bot/getMe?a=>",
        "/bot/getMe?a=\"",
        "/bot/get`Me",
        "/bot/getMe?x={}",
        "/bot/getMe|",
        "/bot/getMe#frag",
        "/bot/getMe?x=1#frag",
        "/bot/get\\Me",
        "/bot/getMe?x=%",
        "/bot/getMe?x=%4",
        "/bot/getMe?x=%zz",
        "/bot/g\u{e9}tMe",
        "/bot/getMe?x=^",
    ] {
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(framed(req.as_bytes()), (400, "invalid_request".into()), "{target}");
        let raw = svc.handle_request(req.as_bytes());
        let (status, _, v) = split_with_headers(&raw);
        assert_eq!(
            (status, &v),
            (400, &json!({"ok": false, "error_code": 400, "error": "invalid_request", "description": BAD_TARGET})),
            "{target}"
        );
    }
    // Authority form and other schemes are no request target of this API.
    for target in ["127.0.0.1:80", "ftp://h/bot/getMe", "http:/bot/getMe", "bot/getMe"] {
        let req = format!("POST {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        let (status, _, v) = split_with_headers(&svc.handle_request(req.as_bytes()));
        assert_eq!(
            (status, v["description"].as_str()),
            (400, Some("the request target is not valid: it must be a path starting with / or an http or https URL")),
            "{target}"
        );
    }
    // Escaped, every one of them is a path like any other.
    let ok = "/admin/console?x=%3Cscript%3E%22%60%7B%7D&y=a:b@c/d?e!$&'()*+,;=-._~";
    assert_eq!(framed(format!("GET {ok} HTTP/1.1\r\n\r\n").as_bytes()), (0, String::new()));
    let raw = svc.handle_request(format!("GET {ok} HTTP/1.1\r\n\r\n").as_bytes());
    assert!(raw.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", String::from_utf8_lossy(&raw[..60]));
    // `*` (asterisk form) names no method.
    let (status, _, v) = split_with_headers(&svc.handle_request(b"OPTIONS * HTTP/1.1\r\n\r\n"));
    assert_eq!((status, v["error"].as_str()), (404, Some("method_not_found")));
}

/// Whatever target the library takes, the `http` crate (hyper's URI
/// parser) takes too and reads the same path: a host on hyper never
/// answers a request the library would have answered.
#[test]
fn every_target_the_framer_takes_is_one_hyper_parses_to_the_same_path() {
    let mut targets = Vec::new();
    for b in 0x21u8..=0xff {
        let c = b as char;
        if b < 0x80 {
            targets.push(format!("/bot/get{c}Me"));
            targets.push(format!("/bot/getMe?x={c}"));
            targets.push(format!("http://h{c}/bot/getMe"));
            targets.push(format!("http://h:8{c}/bot/getMe"));
        }
        // Raw bytes beyond ASCII, as a client might send them.
        targets.push(format!("/bot/get{}", String::from_utf8_lossy(&[b])));
    }
    for t in [
        "http://127.0.0.1/bot/getMe",
        "http://127.0.0.1:8080/bot/getMe?x=1",
        "HTTPS://example.com/bot/getMe",
        "http://[::1]:80/bot/getMe",
        "http://[::1]/bot/getMe",
        "http://h?x=1",
        "http://h",
        "http://user@h/bot/getMe",
        "http://h:99999/bot/getMe",
        "http://h:/bot/getMe",
        "http://[::1/bot/getMe",
        "http://a%41b/bot/getMe",
        "*",
    ] {
        targets.push(t.to_string());
    }
    let mut taken = 0;
    for t in &targets {
        let req = format!("POST {t} HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        let Framing::Complete { head, .. } = frame_request(req.as_bytes(), 1024) else { continue };
        taken += 1;
        let uri: http::Uri = t.parse().unwrap_or_else(|e| panic!("the library takes {t:?}, the http crate not: {e}"));
        let path = head.path(req.as_bytes());
        // `*` and a URL without a path: hyper says `/`, the library the
        // target as it is (no method has either).
        if t != "*" && !path.is_empty() {
            assert_eq!(path, uri.path(), "{t}");
        }
    }
    assert!(taken > 100, "only {taken} taken");
}

#[test]
fn an_absolute_form_target_is_served_by_its_path() {
    let svc = service(65_536);
    let (token, _chat) = world(&svc);
    for target in [
        "http://127.0.0.1/bot/getMe",
        "http://localhost:8080/bot/getMe?x=1",
        "HTTPS://example.com/bot/getMe",
        "http://[::1]:8080/bot/getMe",
    ] {
        let req =
            format!("POST {target} HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {token}\r\nContent-Length: 0\r\n\r\n");
        let Framing::Complete { head, .. } = frame_request(req.as_bytes(), 1024) else { panic!("{target}") };
        assert_eq!(head.path(req.as_bytes()), "/bot/getMe", "{target}");
        let (status, _, v) = split_with_headers(&svc.handle_request(req.as_bytes()));
        assert_eq!((status, v["ok"].as_bool()), (200, Some(true)), "{target}: {v}");
    }
    // A URL without a path has the empty path: no method.
    let (status, _, v) = split_with_headers(&svc.handle_request(b"POST http://h HTTP/1.1\r\n\r\n"));
    assert_eq!((status, v["error"].as_str()), (404, Some("method_not_found")));
    // The 405 check reads the same path: a bot method's, so `Allow: POST`.
    let (status, headers, v) = split_with_headers(&svc.handle_request(b"GET http://h/bot/getMe HTTP/1.1\r\n\r\n"));
    assert_eq!((status, v["description"].as_str()), (405, Some("this path accepts POST only")));
    assert!(headers.contains(&("allow".to_string(), "POST".to_string())), "{headers:?}");
    // User info, another scheme, no host, a bad port: refused.
    for target in ["http://u:p@h/bot/getMe", "http:///bot/getMe", "http://h:x/bot/getMe", "http://h:65536/bot/getMe"] {
        let req = format!("POST {target} HTTP/1.1\r\nAuthorization: Bot {token}\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(framed(req.as_bytes()), (400, "invalid_request".into()), "{target}");
        let (status, _, v) = split_with_headers(&svc.handle_request(req.as_bytes()));
        assert_eq!(
            (status, v["description"].as_str()),
            (400, Some("the request target is not valid: the URL's host is not a host name or address with an optional port")),
            "{target}"
        );
    }
}

#[test]
fn a_header_a_request_may_carry_once_is_refused_when_repeated() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let body = json!({"chat_id": chat, "text": "hi"}).to_string();
    let dup = |name: &str| {
        json!({"ok": false, "error_code": 400, "error": "duplicate_header",
               "description": format!("the {name} header may appear only once"), "parameters": {"field": name}})
    };
    // A doubled chunked coding: refused by the framer and by handle_request.
    let req = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    match frame_request(req.as_bytes(), 65_536) {
        Framing::Invalid(resp) => assert_eq!(split_with_headers(&resp).2, dup("Transfer-Encoding")),
        other => panic!("{other:?}"),
    }
    assert_eq!(split_with_headers(&svc.handle_request(req.as_bytes())).2, dup("Transfer-Encoding"));
    // Two Idempotency-Keys, two Authorizations, two Hosts, two Content-Types.
    let auth = format!("Bot {token}");
    for (name, extra) in [
        ("Idempotency-Key", "Idempotency-Key: a\r\nIdempotency-Key: b\r\n"),
        ("Idempotency-Key", "Idempotency-Key: a\r\nidempotency-key: a\r\n"),
        ("Authorization", "Authorization: Bot nobody\r\n"),
        ("Host", "Host: other\r\n"),
        ("Content-Type", "Content-Type: application/json\r\n"),
    ] {
        let raw = svc.handle_request(&request("/bot/sendMessage", &auth, extra, body.as_bytes()));
        let (status, _, v) = split_with_headers(&raw);
        assert_eq!((status, v), (400, dup(name)), "{extra}");
    }
    assert_eq!(history_len(&svc, &chat), 0, "nothing was written");
    // After the method check (405 first), before the media type.
    let req = b"GET /bot/sendMessage HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    assert_eq!(error_of(&svc.handle_request(req)), (405, "method_not_allowed".into()));
    // Content-Length may repeat with one value.
    let raw = svc.handle_request(&request(
        "/bot/sendMessage",
        &auth,
        &format!("Content-Length: {}\r\n", body.len()),
        body.as_bytes(),
    ));
    assert_eq!(error_of(&raw).0, 200);
}

#[test]
fn numbers_beyond_64_bits_are_json_and_only_a_field_that_reads_one_refuses_it() {
    let svc = service(65_536);
    let (token, chat) = world(&svc);
    let auth = format!("Bot {token}");
    let huge = "9".repeat(400);
    // In a field no method reads, any JSON number is taken.
    for extra in [huge.as_str(), "-1e999999", "1e999999", "1.5e-999999", "18446744073709551616"] {
        let body = format!(r#"{{"chat_id":"{chat}","text":"hi","extra":{extra},"nested":{{"n":[{extra}]}}}}"#);
        let raw = svc.handle_request(&request("/bot/sendMessage", &auth, "", body.as_bytes()));
        assert_eq!(error_of(&raw).0, 200, "{extra}: {}", String::from_utf8_lossy(&raw));
    }
    // In a field that is read, the field's own error.
    for n in [huge.as_str(), "1e999999", "18446744073709551616", "-9223372036854775809"] {
        let body = format!(r#"{{"chat_id":"{chat}","text":"hi","reply_to_message_id":{n}}}"#);
        let (status, _, v) =
            split_with_headers(&svc.handle_request(&request("/bot/sendMessage", &auth, "", body.as_bytes())));
        assert_eq!(
            (status, v["error"].as_str(), v["parameters"]["field"].as_str()),
            (400, Some("invalid_field"), Some("reply_to_message_id")),
            "{n}"
        );
        let body = format!(r#"{{"chat_id":"{chat}","limit":{n}}}"#);
        let raw =
            svc.handle_request(&request("/admin/getChatHistory", &format!("Admin {SECRET}"), "", body.as_bytes()));
        let (status, _, v) = split_with_headers(&raw);
        assert_eq!(
            (status, v["error"].as_str(), v["parameters"]["field"].as_str()),
            (400, Some("invalid_field"), Some("limit")),
            "{n}"
        );
    }
    // Still not JSON: a number cut short, a leading zero, a bare sign.
    for bad in ["1e", "01", "-", "1.", ".5"] {
        let body = format!(r#"{{"chat_id":"{chat}","text":"hi","extra":{bad}}}"#);
        let raw = svc.handle_request(&request("/bot/sendMessage", &auth, "", body.as_bytes()));
        assert_eq!(error_of(&raw), (400, "invalid_json".into()), "{bad}");
    }
    assert_eq!(history_len(&svc, &chat), 5);
}

#[test]
fn parse_http_request_reads_a_framed_request_once() {
    let req = b"POST /bot/getMe?x=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n  1;a=\"b\"\r\n{\r\n1 \r\n}\r\n0\r\nX-Trailer: v\r\n\r\n";
    let r = botspace::parse_http_request(req).expect("a whole request");
    assert_eq!((r.method().as_str(), r.uri().path(), r.uri().query()), ("POST", "/bot/getMe", Some("x=1")));
    assert_eq!(r.version(), http::Version::HTTP_11);
    // The chunked body decoded, its coding and trailer gone.
    assert_eq!(r.body(), b"{}");
    let names: Vec<&str> = r.headers().keys().map(|k| k.as_str()).collect();
    assert_eq!(names, ["host", "content-type"]);
    let r = botspace::parse_http_request(b"GET http://h:1/readyz HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!((r.uri().path(), r.version(), r.body().len()), ("/readyz", http::Version::HTTP_10, 0));
    let r = botspace::parse_http_request(b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET /b").unwrap();
    assert_eq!(r.body(), b"{}");
    // Not a whole request: the library's own answer to send.
    for bad in [
        &b"POST /bot/getMe HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}"[..],
        b"POST /bot/getMe HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}",
        b"POST /bot/getMe HTTP/1.1\r\n",
    ] {
        let refusal = botspace::parse_http_request(bad).unwrap_err();
        assert_eq!(error_of(&refusal), (400, "invalid_request".into()), "{}", String::from_utf8_lossy(bad));
    }
}

/// A host that reads its own sockets (both servers) hands the core the
/// bytes its connection framed; before, the Rust server parsed them into an
/// `http::Request` first. Every request the framer takes is one that parse
/// takes too (the framer applies its rules to the head: the target, the
/// body's length), and the core answers its bytes exactly as it answers
/// its parsed form: the same status, headers and body.
#[test]
fn a_framed_request_is_answered_as_bytes_exactly_as_in_its_parsed_form() {
    let svc = service(1024);
    let seeds: Vec<Vec<u8>> = vec![
        b"POST /bot/getMe HTTP/1.1\r\nAuthorization: Bot 12:x\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        b"POST http://h:80/bot/sendMessage?a=b HTTP/1.0\r\nX-Y: \xe9t\xe9\r\nTransfer-Encoding: chunked\r\n\r\n2;e=1\r\n{}\r\n0\r\nT: v\r\n\r\n".to_vec(),
        b"GET /bot/gateway HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n".to_vec(),
        b"OPTIONS * HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
        b"PATCH /admin/createBot HTTP/1.1\r\nAuthorization: Admin no\r\nContent-Length: 0\r\n\r\n".to_vec(),
    ];
    // The seeds, then seeded mutations of them (a byte changed, added or
    // dropped): what a client gets wrong.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut framed, mut tried) = (0, 0);
    while tried < 3000 {
        let mut req = seeds[tried % seeds.len()].clone();
        if tried >= seeds.len() {
            for _ in 0..1 + next() % 3 {
                let at = (next() % req.len() as u64) as usize;
                let b = (next() % 256) as u8;
                match next() % 3 {
                    0 => req[at] = b,
                    1 => req.insert(at, b),
                    _ => drop(req.remove(at)),
                }
            }
        }
        tried += 1;
        let Framing::Complete { len, .. } = frame_request(&req, 1024) else { continue };
        framed += 1;
        let req = &req[..len];
        let parsed = botspace::parse_http_request(req)
            .unwrap_or_else(|e| panic!("{:?}: {}", String::from_utf8_lossy(req), String::from_utf8_lossy(&e)));
        let typed = svc.handle(&[botspace::Incoming::http(&parsed).at_once()], svc.now_ms()).remove(0);
        let bytes = svc.handle(&[botspace::Incoming::bytes(req).at_once()], svc.now_ms()).remove(0);
        let (botspace::Handled::Now(typed), botspace::Handled::Now(bytes)) = (typed, bytes) else {
            panic!("parked at once: {:?}", String::from_utf8_lossy(req))
        };
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&typed),
            "{:?}",
            String::from_utf8_lossy(req)
        );
    }
    // Hundreds of them were still whole requests: the comparison covered them.
    assert!(framed >= 500, "{framed}");
}

#[test]
fn http_request_from_parts_answers_as_the_bytes_do() {
    // A request split into strings (a JavaScript fetch `Request`) reads as
    // the same request as bytes: Transfer-Encoding dropped, the body whole.
    let r = botspace::http_request_from_parts(
        "POST",
        "/bot/getMe?x=1",
        [("host", "t"), ("Transfer-Encoding", "chunked"), ("content-type", "application/json")],
        &b"{}"[..],
    )
    .expect("valid parts");
    assert_eq!((r.method().as_str(), r.uri().path(), r.uri().query()), ("POST", "/bot/getMe", Some("x=1")));
    let names: Vec<&str> = r.headers().keys().map(|k| k.as_str()).collect();
    assert_eq!(names, ["host", "content-type"]);
    assert_eq!(*r.body(), b"{}");
    // Parts the `http` crate refuses: exactly the answer the service gives
    // the same request as bytes.
    let svc = service(65_536);
    let none: [(&str, &str); 0] = [];
    type Parts<'a> = Result<http::Request<&'a [u8]>, Vec<u8>>;
    let cases: [(Parts<'_>, &[u8], &str); 3] = [
        (
            botspace::http_request_from_parts("POST", "/bot/getMe", [("x-a", "a\u{1}b")], &b""[..]),
            b"POST /bot/getMe HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n",
            "malformed HTTP request: invalid header value",
        ),
        (
            botspace::http_request_from_parts("POST", "/bot/getMe", [("x a", "v")], &b""[..]),
            b"POST /bot/getMe HTTP/1.1\r\nHost: t\r\nX A: v\r\n\r\n",
            "malformed HTTP request: invalid header name",
        ),
        (
            botspace::http_request_from_parts("G\u{1}T", "/bot/getMe", none, &b""[..]),
            b"G\x01T /bot/getMe HTTP/1.1\r\nHost: t\r\n\r\n",
            "malformed HTTP request: invalid token",
        ),
    ];
    for (parts, wire, description) in cases {
        let refused = parts.expect_err("refused parts");
        let (status, _, body) = split_with_headers(&refused);
        assert_eq!(
            (status, body["error"].as_str(), body["description"].as_str()),
            (400, Some("invalid_request"), Some(description))
        );
        let (wire_status, _, wire_body) = split_with_headers(&svc.handle_request(wire));
        assert_eq!((status, &body), (wire_status, &wire_body), "{}", String::from_utf8_lossy(wire));
    }
    // The reason phrase the core writes on the wire (RFC 9110's for 413).
    assert_eq!((botspace::reason_phrase(200), botspace::reason_phrase(413)), ("OK", "Content Too Large"));
}

/// What a host that parses requests itself (hyper) sends when it cannot
/// take a request: the head's refusal and the body's are the core's, each
/// with `Connection: close` (the body is unread), and the limit the host
/// reads to is the core's.
#[test]
fn a_parsed_requests_refusals_are_the_cores_and_close_the_connection() {
    let svc = service(1024);
    assert_eq!(svc.http_body_limit(), 1024, "max_body_bytes, the framer's limit");
    let body = |why| {
        let r = svc.refuse_http_body(why);
        let v: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        (r.status().as_u16(), r.headers()["connection"].to_str().unwrap().to_string(), v)
    };
    assert_eq!(
        body(botspace::BodyRefusal::TooLarge),
        (
            413,
            "close".into(),
            json!({"ok": false, "error_code": 413, "error": "payload_too_large",
                   "description": "request body is larger than 1024 bytes"})
        )
    );
    assert_eq!(
        body(botspace::BodyRefusal::Malformed),
        (
            400,
            "close".into(),
            json!({"ok": false, "error_code": 400, "error": "invalid_request",
                   "description": "malformed chunked body"})
        )
    );
    let head = |req: http::Request<()>| svc.refuse_http_head(&req.into_parts().0);
    let over = http::Request::post("/bot/getMe").header("content-length", "1025").body(()).unwrap();
    let r = head(over).expect("over the limit by its Content-Length");
    assert_eq!((r.status().as_u16(), r.headers()["connection"].to_str().unwrap()), (413, "close"));
    let within = http::Request::post("/bot/getMe").header("content-length", "1024").body(()).unwrap();
    assert!(head(within).is_none(), "read the body");
}
