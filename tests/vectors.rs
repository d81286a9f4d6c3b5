//! Runner for the language-neutral test vectors in `tests/vectors/*.json`
//! (format: `tests/vectors/README.md`). One `#[test]` per file; a failing
//! file lists every failing case with the step, the request and both bodies.
//! A case with gateway steps runs twice: once on the message-level
//! `GatewaySession`, once on the byte-level `GatewayConnection`.

mod common;
#[path = "support/ws_frame.rs"]
mod ws_frame;

use botspace::{Config, GatewayConnection, GatewayEvent, GatewayOutput, GatewaySession, Service};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const ADMIN_SECRET: &str = "vector-admin-secret-0001";

/// The files with their own test; any other `*.json` runs in `unlisted_files`.
const FILES: &[&str] = &[
    "auth.json",
    "transport.json",
    "send_message.json",
    "permissions.json",
    "edit_delete.json",
    "chat_action.json",
    "idempotency.json",
    "rate_limit.json",
    "host_api.json",
    "console.json",
    "gateway.json",
    "updates.json",
    "webhooks.json",
    "buttons.json",
    "backup.json",
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("vectors")
}

type Vars = HashMap<String, Value>;

/// Replaces `{{name}}` placeholders in every string of `v`. A string that is
/// exactly one placeholder takes the saved value as is (numbers stay
/// numbers); embedded placeholders take the value's text. `{{*}}` is the
/// wildcard of `expect` and is left alone.
fn subst(v: &Value, vars: &Vars) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => subst_str(s, vars)?,
        Value::Array(a) => Value::Array(a.iter().map(|x| subst(x, vars)).collect::<Result<_, _>>()?),
        Value::Object(o) => {
            let mut m = Map::new();
            for (k, x) in o {
                m.insert(k.clone(), subst(x, vars)?);
            }
            Value::Object(m)
        }
        other => other.clone(),
    })
}

fn lookup<'a>(name: &str, vars: &'a Vars) -> Result<&'a Value, String> {
    vars.get(name).ok_or_else(|| format!("runner error: placeholder {{{{{name}}}}} names no saved value"))
}

fn subst_str(s: &str, vars: &Vars) -> Result<Value, String> {
    if s == "{{*}}" {
        return Ok(Value::String(s.to_string()));
    }
    if let Some(inner) = s.strip_prefix("{{").and_then(|r| r.strip_suffix("}}")) {
        if !inner.contains("{{") && !inner.contains("}}") {
            return Ok(lookup(inner, vars)?.clone());
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        if name == "*" {
            out.push_str("{{*}}");
        } else {
            match lookup(name, vars)? {
                Value::String(v) => out.push_str(v),
                other => out.push_str(&other.to_string()),
            }
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

/// Whether `actual` matches `expected`, where `"{{*}}"` matches anything and
/// objects must have exactly the same keys. On mismatch, the JSON path.
fn matches(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    if expected.as_str() == Some("{{*}}") {
        return Ok(());
    }
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for k in e.keys() {
                if !a.contains_key(k) {
                    return Err(format!("{path}.{k}: missing"));
                }
            }
            for k in a.keys() {
                if !e.contains_key(k) {
                    return Err(format!("{path}.{k}: unexpected key"));
                }
            }
            for (k, ev) in e {
                matches(ev, &a[k], &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!("{path}: array of {} elements, expected {}", a.len(), e.len()));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                matches(ev, av, &format!("{path}.{i}"))?;
            }
            Ok(())
        }
        _ if expected == actual => Ok(()),
        _ => Err(format!("{path}: expected {}, got {}", short(expected), short(actual))),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!(
            "{}… ({} bytes)",
            &s[..s.char_indices().take_while(|(i, _)| *i < 200).last().map_or(0, |(i, c)| i + c.len_utf8())],
            s.len()
        )
    } else {
        s
    }
}

/// Follows `result.bot.id` / `result.0.update_id` into a value.
fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path.split('.') {
        cur = match cur {
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            Value::Object(o) => o.get(seg)?,
            _ => return None,
        };
    }
    Some(cur)
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("response has no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "response head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for l in lines {
        let (n, v) = l.split_once(':').ok_or_else(|| format!("bad header line {l:?}"))?;
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    let body = raw[end + 4..].to_vec();
    let cl = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.clone());
    if cl.as_deref() != Some(body.len().to_string().as_str()) {
        return Err(format!("Content-Length {cl:?} does not match body of {} bytes", body.len()));
    }
    Ok(Response { status, headers, body })
}

/// Builds the request bytes exactly as the README says.
fn build_request(req: &Map<String, Value>) -> Result<Vec<u8>, String> {
    let method = req.get("method").and_then(Value::as_str).unwrap_or("POST");
    let path = req.get("path").and_then(Value::as_str).ok_or("request has no path")?;
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: botspace\r\n");
    let mut has_ct = false;
    if let Some(h) = req.get("headers") {
        let h = h.as_object().ok_or("headers is not an object")?;
        for (k, v) in h {
            let v = v.as_str().ok_or_else(|| format!("header {k} is not a string"))?;
            if k.eq_ignore_ascii_case("content-type") {
                has_ct = true;
            }
            let _ = write!(out, "{k}: {v}\r\n");
        }
    }
    if !has_ct && req.get("content_type") != Some(&Value::Bool(false)) {
        out.push_str("Content-Type: application/json\r\n");
    }
    let body: Option<Vec<u8>> = if let Some(raw) = req.get("raw_body") {
        Some(raw.as_str().ok_or("raw_body is not a string")?.as_bytes().to_vec())
    } else {
        req.get("body").map(|b| serde_json::to_vec(b).unwrap())
    };
    let mut bytes;
    match body {
        Some(b) => {
            let _ = write!(out, "Content-Length: {}\r\n\r\n", b.len());
            bytes = out.into_bytes();
            bytes.extend_from_slice(&b);
        }
        None => {
            out.push_str("\r\n");
            bytes = out.into_bytes();
        }
    }
    Ok(bytes)
}

fn shorten_bytes(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 600 {
        format!("{}… ({} bytes)", s.chars().take(600).collect::<String>(), b.len())
    } else {
        s.into_owned()
    }
}

fn base_config() -> Value {
    serde_json::json!({"database": common::test_database(), "admin_secret": ADMIN_SECRET, "clock": "manual"})
}

/// Which Rust shape runs the gateway steps of a case.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// `accept_gateway_session`: whole text messages in and out.
    Session,
    /// `accept_gateway`: WebSocket bytes in and out.
    Connection,
}

enum Gateway {
    Session(Box<GatewaySession>),
    Connection(Box<GatewayConnection>),
}

/// What one host round produced.
struct Round {
    /// Text messages, in order.
    texts: Vec<String>,
    close: Option<(u16, String)>,
    events: Vec<GatewayEvent>,
}

impl Gateway {
    fn text(&mut self, text: &str, now: u64) {
        match self {
            Gateway::Session(s) => s.handle_text(text, now),
            Gateway::Connection(c) => c.handle_input(&client_frame(0x1, text.as_bytes()), now),
        }
    }

    fn binary(&mut self, now: u64) {
        match self {
            Gateway::Session(s) => s.handle_binary(),
            Gateway::Connection(c) => c.handle_input(&client_frame(0x2, &[0, 1, 2]), now),
        }
    }

    /// One host round at `now`: `handle_timeout`, then `poll_transmit`
    /// until it gives nothing, then `poll_event` until it gives nothing.
    fn round(&mut self, now: u64) -> Result<Round, String> {
        let mut r = Round { texts: Vec::new(), close: None, events: Vec::new() };
        match self {
            Gateway::Session(s) => {
                s.handle_timeout(now);
                while let Some(o) = s.poll_transmit() {
                    if r.close.is_some() {
                        return Err(format!("{o:?} sent after the close"));
                    }
                    match o {
                        GatewayOutput::Text(t) => r.texts.push(t),
                        GatewayOutput::Close { code, reason } => r.close = Some((code, reason.to_string())),
                    }
                }
                while let Some(e) = s.poll_event() {
                    r.events.push(e);
                }
            }
            Gateway::Connection(c) => {
                c.handle_timeout(now);
                let mut out = Vec::new();
                while c.poll_transmit(&mut out) > 0 {}
                for (opcode, payload) in server_frames(&out)? {
                    if r.close.is_some() {
                        return Err(format!("frame with opcode {opcode} sent after the close"));
                    }
                    match opcode {
                        0x1 => r.texts.push(String::from_utf8(payload).map_err(|_| "text frame is not UTF-8")?),
                        0x8 => {
                            let code = payload.get(..2).ok_or("close frame without a code")?;
                            let reason = std::str::from_utf8(&payload[2..]).map_err(|_| "close reason is not UTF-8")?;
                            r.close = Some((u16::from_be_bytes([code[0], code[1]]), reason.to_string()));
                        }
                        op => return Err(format!("unexpected frame with opcode {op}")),
                    }
                }
                while let Some(e) = c.poll_event() {
                    r.events.push(e);
                }
            }
        }
        // What every round must leave behind, whatever the case expects: a
        // deadline still ahead while open, none once the close is out.
        let (deadline, closed) = match self {
            Gateway::Session(s) => (s.poll_timeout(), s.is_closed()),
            Gateway::Connection(c) => (c.poll_timeout(), c.is_closed()),
        };
        match deadline {
            Some(t) if t <= now => return Err(format!("poll_timeout {t} is not after now {now}")),
            Some(_) if closed => return Err("poll_timeout is set on a closed session".into()),
            None if !closed => return Err("poll_timeout is None on an open session".into()),
            _ => {}
        }
        if r.close.is_some() && !closed {
            return Err("the close was sent but is_closed() is false".into());
        }
        Ok(r)
    }
}

/// A masked client frame (RFC 6455 requires clients to mask).
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x5a, 0x13, 0xc4, 0x7e];
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n < 65536 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// Splits what the server wrote into whole, unmasked, final frames.
fn server_frames(mut b: &[u8]) -> Result<Vec<(u8, Vec<u8>)>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (h, _) = ws_frame::header(b).ok_or("truncated frame header")?;
        if !h.is_final || h.rsv1 || h.rsv2 || h.rsv3 {
            return Err(format!("frame byte 0 is {:#04x}: not a final frame without RSV bits", b[0]));
        }
        if h.mask.is_some() {
            return Err("a server frame is masked".into());
        }
        let f = ws_frame::frame(b).ok_or("truncated frame payload")?;
        out.push((f.opcode(), f.payload.to_vec()));
        b = &b[f.len..];
    }
    Ok(out)
}

/// The upgrade request of an `open` step, as the README gives it.
fn upgrade_request(query: &str, token: &str) -> Vec<u8> {
    format!(
        "GET /bot/gateway{query} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// Checks `expect.status`, `expect.body` and `expect.headers` against a
/// response; saves what `save` names.
fn check_response(
    expect: &Value,
    save: Option<&Value>,
    resp: &Response,
    vars: &mut Vars,
    fail: &dyn Fn(String, &[u8]) -> String,
) -> Result<(), String> {
    if let Some(st) = expect.get("status") {
        if st.as_u64() != Some(resp.status as u64) {
            return Err(fail(format!("status {} (expected {st})", resp.status), &resp.body));
        }
    }
    let parsed: Result<Value, _> = serde_json::from_slice(&resp.body);
    if let Some(eb) = expect.get("body") {
        let actual = parsed.as_ref().map_err(|e| fail(format!("response body is not JSON: {e}"), &resp.body))?;
        matches(eb, actual, "body")
            .map_err(|m| fail(format!("body mismatch at {m}\n      expected: {}", short(eb)), &resp.body))?;
    }
    if let Some(eh) = expect.get("headers") {
        for (name, want) in eh.as_object().ok_or("expect.headers is not an object")? {
            let got = resp.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
            // `null`: the header must be absent.
            let want_str = match want {
                Value::Null => None,
                Value::String(w) => Some(w.as_str()),
                _ => return Err(format!("runner error: expect.headers.{name} is neither a string nor null")),
            };
            if got != want_str {
                return Err(fail(format!("header {name}: expected {want}, got {got:?}"), &resp.body));
            }
        }
    }
    if let Some(save) = save {
        let actual = parsed.as_ref().map_err(|e| fail(format!("cannot save from a non-JSON body: {e}"), &resp.body))?;
        for (name, path) in save.as_object().ok_or("save is not an object")? {
            let path = path.as_str().ok_or("save path is not a string")?;
            let v = at_path(actual, path).ok_or_else(|| fail(format!("save {name}: nothing at {path}"), &resp.body))?;
            vars.insert(name.clone(), v.clone());
        }
    }
    Ok(())
}

fn str_field<'a>(step: &'a Value, key: &str) -> Result<&'a str, String> {
    step.get(key).and_then(Value::as_str).ok_or_else(|| format!("gateway step has no string {key}"))
}

/// Runs one gateway step (README, "Gateway steps").
fn gateway_step(
    svc: &Service,
    shape: Shape,
    conns: &mut HashMap<String, Gateway>,
    step: &Value,
    vars: &mut Vars,
) -> Result<(), String> {
    let step = subst(step, vars)?;
    let kind = str_field(&step, "gateway")?;
    let name = str_field(&step, "conn")?;
    let now = svc.now_ms();
    let conn = |conns: &mut HashMap<String, Gateway>| -> Result<Gateway, String> {
        conns.remove(name).ok_or_else(|| format!("runner error: no connection named {name}"))
    };
    match kind {
        "open" => {
            if conns.contains_key(name) {
                return Err(format!("runner error: connection {name} is still open (drop it first)"));
            }
            let query = step.get("query").and_then(Value::as_str).unwrap_or("");
            let req = upgrade_request(query, str_field(&step, "token")?);
            let (gateway, raw) = match shape {
                Shape::Session => match svc.accept_gateway_session(&req, now) {
                    Ok(s) => (Some(Gateway::Session(Box::new(s))), Vec::new()),
                    Err(resp) => (None, resp),
                },
                Shape::Connection => {
                    let acc = svc.accept_gateway(&req, now);
                    (acc.connection.map(|c| Gateway::Connection(Box::new(c))), acc.response)
                }
            };
            let expect = step.get("expect").ok_or("open step has no expect")?;
            let want = expect.get("status").and_then(Value::as_u64).ok_or("open step has no expect.status")?;
            let fail = |msg: String, body: &[u8]| {
                format!("{msg}\n      request: {}\n      response: {}", shorten_bytes(&req), shorten_bytes(body))
            };
            match gateway {
                Some(g) => {
                    if want != 101 {
                        return Err(fail(format!("the connection opened (expected status {want})"), &raw));
                    }
                    if let Shape::Connection = shape {
                        let head = String::from_utf8_lossy(&raw);
                        // RFC 6455 section 1.3's sample key and its accept value.
                        if !head.starts_with("HTTP/1.1 101 Switching Protocols\r\n")
                            || !head.contains("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n")
                        {
                            return Err(fail("not the 101 response for the sample key".into(), &raw));
                        }
                    }
                    conns.insert(name.to_string(), g);
                }
                None => {
                    let resp = parse_response(&raw).map_err(|e| fail(e, &raw))?;
                    check_response(expect, None, &resp, vars, &|m, b| fail(m, b))?;
                }
            }
        }
        "text" => {
            let text = str_field(&step, "text")?;
            let mut g = conn(conns)?;
            g.text(text, now);
            conns.insert(name.to_string(), g);
        }
        "binary" => {
            let mut g = conn(conns)?;
            g.binary(now);
            conns.insert(name.to_string(), g);
        }
        "drop" => drop(conn(conns)?),
        "poll" => {
            let mut g = conn(conns)?;
            let round = g.round(now);
            conns.insert(name.to_string(), g);
            let round = round?;
            let expect = step.get("expect").ok_or("poll step has no expect")?;
            let want = expect.get("frames").and_then(Value::as_array).ok_or("poll step has no expect.frames")?;
            let got: Vec<Value> = round
                .texts
                .iter()
                .map(|t| serde_json::from_str(t).map_err(|e| format!("sent text is not JSON ({e}): {t}")))
                .collect::<Result<_, _>>()?;
            let all = || round.texts.join("\n        ");
            matches(&Value::Array(want.clone()), &Value::Array(got), "frames")
                .map_err(|m| format!("frames mismatch at {m}\n      sent: {}", all()))?;
            let close = expect.get("close").map(|c| (c["code"].as_u64(), c["reason"].as_str()));
            let got_close = round.close.as_ref().map(|(c, r)| (Some(*c as u64), Some(r.as_str())));
            if close != got_close {
                return Err(format!("close {got_close:?}, expected {close:?}\n      sent: {}", all()));
            }
            let event = expect.get("closed_event").map(|c| (c["code"].as_u64(), c["reason"].as_str()));
            let got_events: Vec<_> = round
                .events
                .iter()
                .map(|GatewayEvent::Closed { code, reason }| (Some(*code as u64), Some(reason.as_str())))
                .collect();
            if got_events != event.into_iter().collect::<Vec<_>>() {
                return Err(format!("events {got_events:?}, expected {event:?}"));
            }
        }
        other => return Err(format!("runner error: unknown gateway step {other:?}")),
    }
    Ok(())
}

/// Runs one case with its gateway steps on `shape`; Err describes the first
/// failing step.
fn run_case(case: &Value, shape: Shape) -> Result<(), String> {
    let mut cfg = base_config();
    if let Some(extra) = case.get("config") {
        let extra = extra.as_object().ok_or("config is not an object")?;
        for (k, v) in extra {
            cfg[k] = v.clone();
        }
    }
    let config =
        Config::from_json(cfg.to_string().as_bytes()).map_err(|e| format!("runner error: config refused: {e}"))?;
    let svc = Service::open(config).map_err(|e| format!("runner error: service did not open: {e}"))?;
    let mut vars: Vars = HashMap::new();
    vars.insert("admin_secret".into(), Value::String(ADMIN_SECRET.into()));
    let mut conns: HashMap<String, Gateway> = HashMap::new();
    let steps = case.get("steps").and_then(Value::as_array).ok_or("case has no steps")?;
    for (i, step) in steps.iter().enumerate() {
        if step.get("gateway").is_some() {
            gateway_step(&svc, shape, &mut conns, step, &mut vars)
                .map_err(|e| format!("step {i} ({shape:?}): {e}\n      step: {}", short(step)))?;
            continue;
        }
        let req = step.get("request").ok_or_else(|| format!("step {i}: no request"))?;
        let req = subst(req, &vars).map_err(|e| format!("step {i}: {e}"))?;
        let req_bytes =
            build_request(req.as_object().ok_or("request is not an object")?).map_err(|e| format!("step {i}: {e}"))?;
        let fail = |msg: String, body: &[u8]| {
            format!(
                "step {i}: {msg}\n      request: {}\n      response: {}",
                shorten_bytes(&req_bytes),
                shorten_bytes(body)
            )
        };
        // `peer`: the client the host names (the login throttle is per client).
        let raw = match req.get("peer").and_then(Value::as_str) {
            Some(peer) => common::from_peer(&svc, &req_bytes, peer),
            None => svc.handle_request(&req_bytes),
        };
        let resp = parse_response(&raw).map_err(|e| fail(e, &raw))?;
        let expect = subst(step.get("expect").unwrap_or(&Value::Null), &vars).map_err(|e| format!("step {i}: {e}"))?;
        check_response(&expect, step.get("save"), &resp, &mut vars, &fail)?;
    }
    Ok(())
}

/// Runs every case of a file; returns (cases, failures).
fn run_file(path: &Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    assert_eq!(doc.get("version"), Some(&Value::from(1)), "{}: version must be 1", path.display());
    let cases = doc.get("cases").and_then(Value::as_array).unwrap_or_else(|| panic!("{}: no cases", path.display()));
    let mut failures = Vec::new();
    let mut names = std::collections::HashSet::new();
    for case in cases {
        let name = case.get("name").and_then(Value::as_str).unwrap_or("<unnamed>");
        if !names.insert(name.to_string()) {
            failures.push(format!("  duplicate case name: {name}"));
        }
        // A case for one store only (`"store": "sqlite"`) is skipped on
        // the others.
        if let Some(store) = case.get("store").and_then(Value::as_str) {
            let db = common::test_database();
            let here = if db.starts_with("postgres") { "postgres" } else { "sqlite" };
            if store != here {
                continue;
            }
        }
        // Cases with gateway steps run on both Rust shapes of the gateway.
        let has_gateway = case["steps"].as_array().is_some_and(|s| s.iter().any(|s| s.get("gateway").is_some()));
        let shapes: &[Shape] = if has_gateway { &[Shape::Session, Shape::Connection] } else { &[Shape::Session] };
        for &shape in shapes {
            if let Err(e) = run_case(case, shape) {
                failures.push(format!("  FAIL {name}\n    {e}"));
            }
        }
    }
    (cases.len(), failures)
}

fn check_file(name: &str) {
    let (n, failures) = run_file(&dir().join(name));
    assert!(n > 0, "{name} has no cases");
    if !failures.is_empty() {
        panic!("{name}: {} of {n} cases failed:\n{}", failures.len(), failures.join("\n"));
    }
    eprintln!("{name}: {n} cases passed");
}

macro_rules! vector_tests {
    ($($test:ident => $file:literal,)*) => {
        $(#[test] fn $test() { check_file($file); })*
    };
}

vector_tests! {
    auth => "auth.json",
    transport => "transport.json",
    send_message => "send_message.json",
    permissions => "permissions.json",
    edit_delete => "edit_delete.json",
    chat_action => "chat_action.json",
    idempotency => "idempotency.json",
    rate_limit => "rate_limit.json",
    host_api => "host_api.json",
    console => "console.json",
    gateway => "gateway.json",
    updates => "updates.json",
    webhooks => "webhooks.json",
    buttons => "buttons.json",
    backup => "backup.json",
}

/// Any vector file without its own test above still runs.
#[test]
fn unlisted_files() {
    let mut report = Vec::new();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.extension().is_some_and(|e| e == "json") && !FILES.contains(&name.as_str()) {
            let (n, failures) = run_file(&p);
            if !failures.is_empty() {
                report.push(format!("{name}: {} of {n} cases failed:\n{}", failures.len(), failures.join("\n")));
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn runner_self_check() {
    let mut vars = Vars::new();
    vars.insert("n".into(), Value::from(7));
    vars.insert("s".into(), Value::from("spc_x"));
    assert_eq!(subst_str("{{n}}", &vars).unwrap(), Value::from(7));
    assert_eq!(subst_str("id {{s}}/{{n}}", &vars).unwrap(), Value::from("id spc_x/7"));
    assert_eq!(subst_str("{{*}}", &vars).unwrap(), Value::from("{{*}}"));
    assert!(subst_str("{{missing}}", &vars).is_err());
    let v = serde_json::json!({"result": [{"update_id": 3}]});
    assert_eq!(at_path(&v, "result.0.update_id"), Some(&Value::from(3)));
    assert!(matches(&serde_json::json!({"a": "{{*}}"}), &serde_json::json!({"a": [1]}), "b").is_ok());
    assert!(matches(&serde_json::json!({"a": 1}), &serde_json::json!({"a": 1, "b": 2}), "b").is_err());
    assert!(matches(&serde_json::json!({"a": 1, "b": 2}), &serde_json::json!({"a": 1}), "b").is_err());
}
