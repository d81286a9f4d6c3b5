//! The operations endpoints of both example servers over real TCP
//! (docs/operations.md): a real Prometheus server scrapes
//! `GET /admin/metrics` with the `Admin` authorization scheme during a
//! load and its query API reads back exactly what the load did; `promtool
//! check metrics` accepts the exposition; `/readyz` turns 503
//! `shutting_down` the moment a stop begins while the request in flight
//! is still answered and `/healthz` stays 200. (`/readyz` on a full disk:
//! tests/server_reliability.rs.) Each scenario runs against the Rust
//! server (`rust::`) and the C server (`c::`).

#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wire::*;

servers! {
    prometheus_scrapes_the_metrics_during_a_load_and_reads_back_exact_counts,
    readyz_says_shutting_down_from_the_stop_on_while_the_request_in_flight_is_answered,
}

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

/// `GET path` through ureq, with `Authorization: Admin` when `admin`.
fn get(srv: &Server, path: &str, admin: bool) -> (u16, Option<String>, String) {
    let mut req = agent().get(format!("{}{}", srv.base, path));
    if admin {
        req = req.header("Authorization", format!("Admin {SECRET}"));
    }
    let mut r = req.call().unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
    (r.status().as_u16(), ct, r.body_mut().read_to_string().unwrap())
}

/// One sample of the exposition, by its exact series text.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} not in the exposition:\n{text}"))
        .parse()
        .unwrap()
}

/// A Prometheus server of our own: a temp config, a temp TSDB, a free port.
struct Prometheus {
    child: Child,
    base: String,
    dir: PathBuf,
}

impl Prometheus {
    fn start(target: &str, dir: &Path) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} missing: the suite installs the Debian package prometheus"
        );
        let secret_file = dir.join("admin-secret");
        std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
        // The scrape config docs/operations.md gives, with a 1 s interval.
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: botspace\n    \
             metrics_path: /admin/metrics\n    authorization:\n      type: Admin\n      credentials_file: {}\n    \
             static_configs:\n      - targets: ['{target}']\n",
            secret_file.display()
        );
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, base: format!("http://127.0.0.1:{port}"), dir: dir.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(60);
        while agent().get(format!("{}/-/ready", p.base)).call().map_or(true, |r| r.status() != 200) {
            assert!(Instant::now() < deadline, "prometheus not ready within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The value of an instant query with one result, `None` with none.
    fn query(&self, q: &str) -> Option<f64> {
        let mut r = agent()
            .get(format!("{}/api/v1/query", self.base))
            .query("query", q)
            .call()
            .unwrap_or_else(|e| panic!("query {q}: {e}"));
        let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        assert_eq!(v["status"], json!("success"), "{q}: {v}");
        let result = v["data"]["result"].as_array().unwrap();
        assert!(result.len() <= 1, "{q}: more than one series: {v}");
        result.first().map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
    }

    /// Waits until `q` reads `want` (a scrape or two after the load).
    fn expect(&self, q: &str, want: f64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.query(q);
            if got == Some(want) {
                return;
            }
            assert!(Instant::now() < deadline, "{q}: Prometheus reads {got:?}, the load says {want}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn prometheus_scrapes_the_metrics_during_a_load_and_reads_back_exact_counts(bin: &Path) {
    let dir = temp_dir("metrics");
    let db = dir.join("botspace.db");
    let srv = Server::start_in_shell(&[], "true", &[], bin, &["--db", db.to_str().unwrap(), "--admin-secret", SECRET]);
    // Without the credential: 401, and nothing of the metrics.
    let (status, _, body) = get(&srv, "/admin/metrics", false);
    assert_eq!(status, 401, "{body}");
    // What the server did at start (its quick-start bot's events, say).
    let (status, ct, before) = get(&srv, "/admin/metrics", true);
    assert_eq!(status, 200, "{before}");
    assert_eq!(ct.as_deref(), Some("text/plain; version=0.0.4; charset=utf-8"));
    let unacked_before = sample(&before, "botspace_unacked_events");
    let max_before = sample(&before, "botspace_unacked_events_max_per_bot");

    let prom = Prometheus::start(&srv.addr.to_string(), &temp_dir("prometheus"));
    prom.expect("up{job=\"botspace\"}", 1.0);

    let w = srv.world("official");
    // The load: from several connections at once, so the servers batch.
    const SENT: usize = 60;
    const EMPTY: usize = 6;
    const SAID: usize = 9;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (srv, w) = (&srv, &w);
            s.spawn(move || {
                for i in 0..SENT / 4 {
                    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": format!("{t}.{i}")}));
                    assert_eq!(r.status, 200, "{}", r.body);
                }
            });
        }
    });
    for _ in 0..EMPTY {
        srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": ""})).assert_error(400, "text_empty");
    }
    for i in 0..SAID {
        srv.say(&w.user_id, &w.chat, &format!("from the user {i}"));
    }
    // The bot's events: bot_started and the user's messages, none acked.
    let backlog = 1.0 + SAID as f64;

    // promtool reads the exposition as Prometheus does, with its lints.
    let (_, _, text) = get(&srv, "/admin/metrics", true);
    let mut check = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{text}");

    let sent = SENT as f64;
    let refused = EMPTY as f64;
    prom.expect(r#"botspace_requests_total{method="sendMessage",status="200",error="none"}"#, sent);
    prom.expect(r#"botspace_requests_total{method="sendMessage",status="400",error="text_empty"}"#, refused);
    prom.expect(r#"botspace_requests_total{method="sendUserMessage",status="200",error="none"}"#, SAID as f64);
    // Latency is timed for one request in 16 on each server thread (the
    // thread's first included; which thread serves which request is the
    // server's), so the histogram holds a sample of the 66: at least one,
    // at most all, and its +Inf bucket and count agree.
    let count = prom.query(r#"botspace_request_duration_seconds_count{method="sendMessage"}"#).unwrap();
    assert!((1.0..=sent + refused).contains(&count), "{count} sampled of {}", sent + refused);
    prom.expect(r#"botspace_request_duration_seconds_bucket{method="sendMessage",le="+Inf"}"#, count);
    prom.expect(r#"botspace_request_duration_seconds_bucket{method="sendMessage",le="10"}"#, count);
    prom.expect("botspace_unacked_events", unacked_before + backlog);
    prom.expect("botspace_unacked_events_max_per_bot", max_before.max(backlog));
    prom.expect("botspace_ready", 1.0);

    // The bot reads and acknowledges everything: the backlog goes back
    // to what it was, and the open session shows meanwhile.
    let mut gw = srv.gateway(&w.token, "");
    gw.hello();
    for seq in 1..=backlog as i64 {
        assert_eq!(gw.event()["seq"], json!(seq));
    }
    prom.expect("botspace_gateway_sessions", 1.0);
    gw.ack(backlog as i64);
    prom.expect("botspace_unacked_events", unacked_before);
    gw.close();
    prom.expect("botspace_gateway_sessions", 0.0);
    prom.expect(r#"botspace_gateway_closes_total{reason="closed_by_bot"}"#, 1.0);
    drop(prom);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

fn readyz_says_shutting_down_from_the_stop_on_while_the_request_in_flight_is_answered(bin: &Path) {
    let dir = temp_dir("shutting-down");
    let db = dir.join("botspace.db");
    let mut srv =
        Server::start_in_shell(&[], "true", &[], bin, &["--db", db.to_str().unwrap(), "--admin-secret", SECRET]);
    let w = srv.world("official");
    let ready = |s: &mut std::net::TcpStream, buf: &mut Vec<u8>| {
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: botspace\r\n\r\n").unwrap();
        read_response(s, buf)
    };
    let mut s = srv.connect();
    let mut buf = Vec::new();
    let r = ready(&mut s, &mut buf);
    assert_eq!((r.status, r.json()), (200, json!({"ok": true})));
    // A request in flight: its head and half its body are in.
    let req = bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "in flight at the stop"})));
    let (first, rest) = req.split_at(req.len() - 8);
    s.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    srv.signal("-TERM");
    srv.wait_line("botspace stopping");
    // The rest of it, then readiness and liveness on the same connection.
    let mut tail = rest.to_vec();
    tail.extend_from_slice(
        b"GET /readyz HTTP/1.1\r\nHost: botspace\r\n\r\nGET /healthz HTTP/1.1\r\nHost: botspace\r\n\r\n",
    );
    s.write_all(&tail).unwrap();
    let answered = read_response(&mut s, &mut buf);
    assert_eq!(answered.result()["text"], json!("in flight at the stop"));
    let not_ready = read_response(&mut s, &mut buf);
    assert_eq!(
        (not_ready.status, not_ready.json()),
        (
            503,
            json!({"ok": false, "error_code": 503, "error": "shutting_down",
                   "description": "the service is stopping; send new requests to another node"})
        )
    );
    let alive = read_response(&mut s, &mut buf);
    assert_eq!((alive.status, alive.json()), (200, json!({"ok": true})));
    assert!(srv.wait_exit(Duration::from_secs(10)).success());
    let _ = std::fs::remove_dir_all(dir);
}
