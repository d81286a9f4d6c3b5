//! Runner for the language-neutral test vectors in `tests/vectors/*.json`
//! (format: `tests/vectors/README.md`). One `#[test]` per file; a failing
//! file lists every failing case with the step, the request and both bodies.

use botspace::{Config, Service};
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
    serde_json::json!({"database": ":memory:", "admin_secret": ADMIN_SECRET, "clock": "manual"})
}

/// Runs one case; Err describes the first failing step.
fn run_case(case: &Value) -> Result<(), String> {
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
    let steps = case.get("steps").and_then(Value::as_array).ok_or("case has no steps")?;
    for (i, step) in steps.iter().enumerate() {
        let fail = |msg: String, req: &[u8], body: &[u8]| {
            format!("step {i}: {msg}\n      request: {}\n      response: {}", shorten_bytes(req), shorten_bytes(body))
        };
        let req = step.get("request").ok_or_else(|| format!("step {i}: no request"))?;
        let req = subst(req, &vars).map_err(|e| format!("step {i}: {e}"))?;
        let req_bytes =
            build_request(req.as_object().ok_or("request is not an object")?).map_err(|e| format!("step {i}: {e}"))?;
        let raw = svc.handle_request(&req_bytes);
        let resp = parse_response(&raw).map_err(|e| fail(e, &req_bytes, &raw))?;
        let expect = subst(step.get("expect").unwrap_or(&Value::Null), &vars).map_err(|e| format!("step {i}: {e}"))?;
        if let Some(st) = expect.get("status") {
            if st.as_u64() != Some(resp.status as u64) {
                return Err(fail(format!("status {} (expected {st})", resp.status), &req_bytes, &resp.body));
            }
        }
        let parsed: Result<Value, _> = serde_json::from_slice(&resp.body);
        if let Some(eb) = expect.get("body") {
            let actual =
                parsed.as_ref().map_err(|e| fail(format!("response body is not JSON: {e}"), &req_bytes, &resp.body))?;
            matches(eb, actual, "body").map_err(|m| {
                fail(format!("body mismatch at {m}\n      expected: {}", short(eb)), &req_bytes, &resp.body)
            })?;
        }
        if let Some(eh) = expect.get("headers") {
            for (name, want) in eh.as_object().ok_or("expect.headers is not an object")? {
                let got = resp.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
                if got != want.as_str() {
                    return Err(fail(format!("header {name}: expected {want}, got {got:?}"), &req_bytes, &resp.body));
                }
            }
        }
        if let Some(save) = step.get("save") {
            let actual = parsed
                .as_ref()
                .map_err(|e| fail(format!("cannot save from a non-JSON body: {e}"), &req_bytes, &resp.body))?;
            for (name, path) in save.as_object().ok_or("save is not an object")? {
                let path = path.as_str().ok_or("save path is not a string")?;
                let v = at_path(actual, path)
                    .ok_or_else(|| fail(format!("save {name}: nothing at {path}"), &req_bytes, &resp.body))?;
                vars.insert(name.clone(), v.clone());
            }
        }
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
        if let Err(e) = run_case(case) {
            failures.push(format!("  FAIL {name}\n    {e}"));
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
