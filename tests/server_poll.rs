//! Long polling (`POST /bot/getUpdates` with a `timeout`) over real TCP,
//! against both example servers (`rust::` on hyper, `c::` on its poll
//! loop): a parked poll is answered within 50 ms of the commit that gives
//! its bot an event (every parked poller of the bot is), a poll that hears
//! nothing is answered `[]` at its deadline, an offset acknowledges for the
//! gateway too (and a gateway ack for getUpdates), 900 polls parked at
//! once under `ulimit -n 1024` cost the server little memory (the gauge
//! `botspace_parked_polls` counts them), a stop answers every parked poll,
//! a client that goes away has its poll cancelled at once (one client or
//! 10 000: the gauge and the server's descriptors are back within 2 s), on
//! the Rust server the oldest parked poll is evicted for a new client at
//! the connection cap, and a bot past its 16 parked polls has its oldest
//! answered 409 `poll_superseded` at once while another bot's poll still
//! parks. The servers run on the system clock here: the deadlines are real
//! seconds.

#[macro_use]
mod wire;

use serde_json::{json, Value};
use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use wire::*;

servers! {
    on_binary: [
        a_parked_poll_is_answered_within_50_ms_of_the_commit_that_gives_an_event,
        a_poll_that_hears_nothing_is_answered_empty_at_its_deadline,
        an_offset_acknowledges_for_the_gateway_and_a_gateway_ack_for_get_updates,
        nine_hundred_parked_polls_fit_under_1024_descriptors,
        a_stop_answers_every_parked_poll,
        a_bot_past_16_polls_has_its_oldest_answered_409_and_another_bot_still_parks,
        a_client_that_goes_away_cancels_its_poll,
        five_hundred_closed_clients_release_their_polls_and_descriptors_at_once,
        ten_thousand_closed_clients_release_their_polls_and_descriptors_at_once,
    ],
    // At the connection cap the Rust server evicts the parked poll that has
    // waited longest, as any waiting connection; the C server counts a
    // parked connection as busy (docs/delivery.md, "Which faces park").
    rust_on_binary: [at_the_connection_cap_the_oldest_parked_poll_is_evicted_for_a_new_client],
}

/// The example server on the system clock, under `ulimit -n 1024`.
fn start(bin: &Path) -> Server {
    Server::start_in_shell(&[], "ulimit -n 1024", &[], bin, &["--db", ":memory:", "--admin-secret", SECRET])
}

/// Sends a getUpdates on a new connection without reading the answer.
fn send_poll(srv: &Server, token: &str, body: &Value) -> TcpStream {
    let mut s = srv.connect();
    s.write_all(&bot_request(token, "getUpdates", Some(body))).unwrap();
    s
}

/// Asserts nothing has come back on `s` within `ms` (the poll is parked).
fn assert_parked(s: &mut TcpStream, ms: u64) {
    s.set_read_timeout(Some(Duration::from_millis(ms))).unwrap();
    let mut b = [0u8; 64];
    match read_some(s, &mut b) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(n) => panic!("the poll was answered at once: {:?}", String::from_utf8_lossy(&b[..n])),
        Err(e) => panic!("reading a parked poll: {e}"),
    }
    s.set_read_timeout(Some(WAIT)).unwrap();
}

/// A value of the server's `GET /admin/metrics`.
fn metric(srv: &Server, series: &str) -> f64 {
    let mut s = srv.connect();
    let req = format!("GET /admin/metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Admin {SECRET}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let r = read_response(&mut s, &mut Vec::new());
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} not in the exposition:\n{text}"))
        .parse()
        .unwrap()
}

/// Waits (at most `WAIT`) until the metric reads `want`.
fn wait_metric(srv: &Server, series: &str, want: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = metric(srv, series);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{series} stayed {got}, expected {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn update(seq: i64, kind: &str, data: Value) -> Value {
    json!({"update_id": seq, "type": kind, "data": data})
}

fn a_parked_poll_is_answered_within_50_ms_of_the_commit_that_gives_an_event(bin: &Path) {
    let srv = start(bin);
    let w = srv.world("free");
    let started = w.bot_started();
    let first = srv.bot(&w.token, "getUpdates", &json!({}));
    assert_eq!(first.status, 200);
    assert_eq!(first.body, json!({"ok": true, "result": [update(1, "bot_started", started["data"].clone())]}));
    // Two pollers of the bot, both past the cursor: both park.
    let mut p1 = send_poll(&srv, &w.token, &json!({"offset": 2, "timeout": 30}));
    let mut p2 =
        send_poll(&srv, &w.token, &json!({"offset": 2, "timeout": 30, "allowed_updates": ["message_created"]}));
    assert_parked(&mut p1, 300);
    assert_parked(&mut p2, 10);
    // The user blocks the bot (event 2, `blocked`): p1 is answered with it;
    // p2 did not ask for that type and stays parked.
    let block = |blocked: bool| {
        let mut admin = srv.connect();
        let body = json!({"chat_id": w.chat, "by": "user", "blocked": blocked});
        admin.write_all(&admin_request("setBlocked", &body)).unwrap();
        let r = read_response(&mut admin, &mut Vec::new());
        (Instant::now(), r.result())
    };
    let (blocked_at, _) = block(true);
    let r1 = read_response(&mut p1, &mut Vec::new()).result();
    let took1 = blocked_at.elapsed();
    assert_eq!(r1.as_array().map(Vec::len), Some(1), "{r1}");
    assert_eq!((r1[0]["update_id"].clone(), r1[0]["type"].clone()), (json!(2), json!("blocked")));
    assert_parked(&mut p2, 200);
    block(false);
    assert_parked(&mut p2, 100);
    // A message (event 4) answers p2.
    let mut admin = srv.connect();
    admin
        .write_all(&admin_request("sendUserMessage", &json!({"user_id": w.user_id, "chat_id": w.chat, "text": "hi"})))
        .unwrap();
    let sent = read_response(&mut admin, &mut Vec::new());
    let sent_at = Instant::now();
    let message = sent.result();
    let r2 = read_response(&mut p2, &mut Vec::new());
    let took2 = sent_at.elapsed();
    let expect = json!([update(4, "message_created", json!({"message": message}))]);
    assert_eq!(r2.result(), expect);
    println!("parked polls answered {} µs and {} µs after the commit's 200", took1.as_micros(), took2.as_micros());
    assert!(took1 < Duration::from_millis(50), "first poll answered {took1:?} after the commit");
    assert!(took2 < Duration::from_millis(50), "second poll answered {took2:?} after the commit");
    // The connection stays usable: a poll that finds events answers at once.
    p2.write_all(&bot_request(&w.token, "getUpdates", Some(&json!({"offset": 4, "timeout": 30})))).unwrap();
    assert_eq!(read_response(&mut p2, &mut Vec::new()).result(), expect);
}

fn a_poll_that_hears_nothing_is_answered_empty_at_its_deadline(bin: &Path) {
    let srv = start(bin);
    let w = srv.world("free");
    let t0 = Instant::now();
    let mut p = send_poll(&srv, &w.token, &json!({"offset": 2, "timeout": 1}));
    let r = read_response(&mut p, &mut Vec::new());
    let took = t0.elapsed();
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"ok": true, "result": []}));
    assert_eq!(r.header("content-type"), Some("application/json"));
    println!("timeout 1 answered [] after {} ms", took.as_millis());
    assert!(took >= Duration::from_millis(950) && took < Duration::from_millis(1500), "answered after {took:?}");
    // A poll with a bad field is refused at once, parked or not.
    let t0 = Instant::now();
    let mut bad = send_poll(&srv, &w.token, &json!({"timeout": 51}));
    read_response(&mut bad, &mut Vec::new()).assert_error(400, "invalid_field");
    assert!(t0.elapsed() < Duration::from_millis(500));
}

fn an_offset_acknowledges_for_the_gateway_and_a_gateway_ack_for_get_updates(bin: &Path) {
    let srv = start(bin);
    let w = srv.world("free");
    let m1 = srv.say(&w.user_id, &w.chat, "one");
    let m2 = srv.say(&w.user_id, &w.chat, "two");
    let r = srv.bot(&w.token, "getUpdates", &json!({"offset": 3}));
    assert_eq!(r.body["result"], json!([update(3, "message_created", json!({"message": m2}))]));
    let _ = m1;
    // The offset acknowledged 1 and 2 durably: a gateway connect resumes at 3.
    let mut gw = srv.gateway(&w.token, "");
    let hello = gw.hello();
    assert_eq!(hello["replay_from"], json!(3));
    assert_eq!(hello["replay_truncated"], json!(false));
    assert_eq!(gw.event(), json!({"op": "event", "seq": 3, "type": "message_created", "data": {"message": m2}}));
    // The gateway's ack moves the same cursor; getUpdates sees it once written.
    gw.ack(3);
    gw.close();
    let deadline = Instant::now() + WAIT;
    loop {
        let r = srv.bot(&w.token, "getUpdates", &json!({}));
        if r.body["result"] == json!([]) {
            break;
        }
        assert!(Instant::now() < deadline, "the gateway ack was never seen: {}", r.body);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why 900 and not more: each parked poll holds its client's connection,
/// one descriptor in the server, and the server runs under `ulimit -n 1024`
/// with 64 descriptors kept for itself (its default `--max-connections` is
/// 960); the test process holds the other ends under the same limit.
const PARKED: usize = 900;
/// What the server's resident memory may grow by with them parked: 32 KB
/// a poll. The core's part is at most `botspace::BYTES_PER_PARKED_POLL`
/// (256 bytes); the rest is the host's connection (its read and write
/// buffers, the request; the Rust server measured about 16 KB a poll).
const RSS_BOUND_KB: u64 = 32 * PARKED as u64;

fn vm_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The 900 polls come from 60 bots, 15 each: one bot may park at most
/// `botspace::MAX_PARKED_POLLS_PER_BOT` (16).
const BOTS: usize = 60;
const _: () = assert!(PARKED.is_multiple_of(BOTS) && PARKED / BOTS <= botspace::MAX_PARKED_POLLS_PER_BOT);

/// `n` bots started by one user: (user id, [(token, chat id)]).
fn bots(srv: &Server, n: usize) -> (String, Vec<(String, String)>) {
    let user = srv.admin("createUser", &json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let bots = (0..n)
        .map(|i| {
            let b = srv.admin("createBot", &json!({"display_name": "Poll", "handle": format!("poll_bot_{i}")}));
            let chat = srv.admin("startBot", &json!({"user_id": user, "bot_id": b["bot"]["id"]}));
            (b["token"].as_str().unwrap().to_string(), chat["id"].as_str().unwrap().to_string())
        })
        .collect();
    (user, bots)
}

fn nine_hundred_parked_polls_fit_under_1024_descriptors(bin: &Path) {
    let srv = start(bin);
    let (user, bots) = bots(&srv, BOTS);
    // Warm the paths a poll takes before measuring.
    let mut warm = send_poll(&srv, &bots[0].0, &json!({"offset": 2, "timeout": 1}));
    assert_eq!(read_response(&mut warm, &mut Vec::new()).result(), json!([]));
    drop(warm);
    let before = vm_rss_kb(srv.pid());
    let mut polls: Vec<(usize, TcpStream)> = (0..PARKED)
        .map(|i| (i % BOTS, send_poll(&srv, &bots[i % BOTS].0, &json!({"offset": 2, "timeout": 30}))))
        .collect();
    // Every one parked: none answered yet (the last ones had time to arrive).
    assert_parked(&mut polls.last_mut().unwrap().1, 500);
    let after = vm_rss_kb(srv.pid());
    assert_eq!(metric(&srv, "botspace_parked_polls"), PARKED as f64);
    let grew = after.saturating_sub(before);
    println!(
        "{PARKED} parked polls: VmRSS {before} KB -> {after} KB (+{grew} KB, {} bytes a poll)",
        grew * 1024 / PARKED as u64
    );
    assert!(grew < RSS_BOUND_KB, "VmRSS grew by {grew} KB for {PARKED} parked polls (bound {RSS_BOUND_KB} KB)");
    // One event per bot answers all of them, each with its bot's event.
    let t0 = Instant::now();
    let expect: Vec<Value> = bots
        .iter()
        .map(|(_, chat)| {
            let message = srv.say(&user, chat, "to all");
            json!([update(2, "message_created", json!({"message": message}))])
        })
        .collect();
    for (bot, p) in &mut polls {
        assert_eq!(read_response(p, &mut Vec::new()).result(), expect[*bot]);
    }
    println!(
        "{PARKED} parked polls of {BOTS} bots answered in {} ms from the first of their commits",
        t0.elapsed().as_millis()
    );
    assert_eq!(metric(&srv, "botspace_parked_polls"), 0.0);
    // The server still answers others.
    assert_eq!(srv.bot(&bots[0].0, "getMe", &json!({})).status, 200);
}

fn a_bot_past_16_polls_has_its_oldest_answered_409_and_another_bot_still_parks(bin: &Path) {
    let cap = botspace::MAX_PARKED_POLLS_PER_BOT;
    let srv = start(bin);
    let (_, bots) = bots(&srv, 2);
    let (greedy, other) = (&bots[0].0, &bots[1].0);
    let body = json!({"offset": 2, "timeout": 30});
    let mut first: Vec<TcpStream> = (0..cap).map(|_| send_poll(&srv, greedy, &body)).collect();
    wait_metric(&srv, "botspace_parked_polls", cap as f64);
    // 16 more: each parks in place of the bot's oldest, which is answered
    // at once, the first 16 all of them.
    let t0 = Instant::now();
    let mut second: Vec<TcpStream> = (0..cap).map(|_| send_poll(&srv, greedy, &body)).collect();
    for p in &mut first {
        let r = read_response(p, &mut Vec::new());
        assert_eq!(
            (r.status, r.json()),
            (
                409,
                json!({"ok": false, "error_code": 409, "error": "poll_superseded",
                    "description": "terminated by a newer getUpdates of this bot: at most 16 may wait at once; run one poller per bot"})
            )
        );
    }
    let took = t0.elapsed();
    println!("{cap} superseded polls answered 409 within {} ms", took.as_millis());
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(metric(&srv, "botspace_parked_polls"), cap as f64);
    // Another bot's poll parks and is answered at its deadline.
    let t0 = Instant::now();
    let mut p = send_poll(&srv, other, &json!({"offset": 2, "timeout": 1}));
    assert_parked(&mut p, 300);
    assert_eq!(metric(&srv, "botspace_parked_polls"), cap as f64 + 1.0);
    assert_eq!(read_response(&mut p, &mut Vec::new()).json(), json!({"ok": true, "result": []}));
    assert!(t0.elapsed() >= Duration::from_millis(950), "answered after {:?}", t0.elapsed());
    // The greedy bot's 16 newest still wait.
    assert_parked(&mut second[0], 10);
    assert_eq!(metric(&srv, "botspace_parked_polls"), cap as f64);
}

fn a_client_that_goes_away_cancels_its_poll(bin: &Path) {
    let srv = start(bin);
    let w = srv.world("free");
    let mut p = send_poll(&srv, &w.token, &json!({"offset": 2, "timeout": 50}));
    assert_parked(&mut p, 200);
    assert_eq!(metric(&srv, "botspace_parked_polls"), 1.0);
    drop(p);
    // The server sees the connection close and forgets the poll long
    // before its 50 s deadline.
    wait_metric(&srv, "botspace_parked_polls", 0.0);
    // Nothing was answered to nobody: the next poll gets the event.
    let message = srv.say(&w.user_id, &w.chat, "later");
    let r = srv.bot(&w.token, "getUpdates", &json!({"offset": 2, "timeout": 5}));
    assert_eq!(r.body["result"], json!([update(2, "message_created", json!({"message": message}))]));
}

fn a_stop_answers_every_parked_poll(bin: &Path) {
    let mut srv = start(bin);
    let w = srv.world("free");
    let mut p = send_poll(&srv, &w.token, &json!({"offset": 2, "timeout": 50}));
    assert_parked(&mut p, 200);
    let t0 = Instant::now();
    let status = srv.interrupt();
    assert!(status.success(), "{status:?}");
    // Answered `[]` at the stop, not 50 s later; the server then exited.
    let r = read_response(&mut p, &mut Vec::new());
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"ok": true, "result": []}));
    assert!(t0.elapsed() < Duration::from_secs(10), "stopped after {:?}", t0.elapsed());
}

/// Descriptors the server process holds now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).expect("/proc fd").count()
}

/// Waits (at most 2 s: "at once", with room for a loaded machine) until
/// the server holds at most `want` descriptors.
fn wait_fds_at_most(pid: u32, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let n = open_fds(pid);
        if n <= want {
            return;
        }
        assert!(Instant::now() < deadline, "the server still holds {n} descriptors, expected at most {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` clients each park a poll, then all close their sockets: within 2 s
/// the gauge reads 0 and the server holds the descriptors it held before
/// (give or take the scrape's own), not one per closed client; then it
/// still answers.
fn closed_clients_release_their_polls(srv: &Server, n: usize) {
    let per_bot = botspace::MAX_PARKED_POLLS_PER_BOT;
    let (_, bots) = bots(srv, n.div_ceil(per_bot));
    let pid = srv.pid();
    // The set-up's connections (closed by the client) are gone first.
    std::thread::sleep(Duration::from_millis(200));
    let before = open_fds(pid);
    let mut polls: Vec<TcpStream> =
        (0..n).map(|i| send_poll(srv, &bots[i / per_bot].0, &json!({"offset": 2, "timeout": 50}))).collect();
    wait_metric(srv, "botspace_parked_polls", n as f64);
    assert_parked(polls.last_mut().unwrap(), 10);
    assert!(open_fds(pid) >= n, "each parked poll holds its connection");
    let t0 = Instant::now();
    drop(polls);
    let deadline = t0 + Duration::from_secs(2);
    loop {
        let left = metric(srv, "botspace_parked_polls");
        if left == 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} of {n} polls still parked 2 s after their clients closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{n} parked polls released {} ms after their clients closed", t0.elapsed().as_millis());
    wait_fds_at_most(pid, before + 2);
    assert_eq!(srv.bot(&bots[0].0, "getMe", &json!({})).status, 200);
}

fn five_hundred_closed_clients_release_their_polls_and_descriptors_at_once(bin: &Path) {
    let srv = start(bin);
    closed_clients_release_their_polls(&srv, 500);
}

/// The same with 10 000 clients, under `ulimit -n 20000` (the server's and
/// this process's): 10 000 connections are the point.
fn ten_thousand_closed_clients_release_their_polls_and_descriptors_at_once(bin: &Path) {
    assert!(raise_nofile(20_000) >= 10_500, "this test needs a hard file limit of at least 10 500");
    let srv = Server::start_in_shell(&[], "ulimit -n 20000", &[], bin, &["--db", ":memory:", "--admin-secret", SECRET]);
    closed_clients_release_their_polls(&srv, 10_000);
}

/// At `--max-connections`, a parked poll is an idle connection like any
/// other: the one that has waited longest is closed (its poll cancelled)
/// so that a new client is served.
fn at_the_connection_cap_the_oldest_parked_poll_is_evicted_for_a_new_client(bin: &Path) {
    const CAP: usize = 40;
    let srv = Server::start_in_shell(
        &[],
        "ulimit -n 1024",
        &[],
        bin,
        &["--db", ":memory:", "--admin-secret", SECRET, "--max-connections", &CAP.to_string()],
    );
    let (_, bots) = bots(&srv, 3);
    // The set-up's connections (closed by the client) are gone from the
    // server's count: none of them is older than the polls.
    std::thread::sleep(Duration::from_millis(200));
    let mut polls: Vec<TcpStream> = Vec::new();
    for i in 0..CAP {
        polls.push(send_poll(&srv, &bots[i % 3].0, &json!({"offset": 2, "timeout": 50})));
        // Parked one after another: the first has waited longest.
        assert_parked(&mut polls[i], 20);
    }
    // Each new client (kept open) takes the place of the oldest parked poll.
    let mut clients = Vec::new();
    for oldest in &mut polls[..2] {
        let mut c = srv.connect();
        c.write_all(&bot_request(&bots[0].0, "getMe", None)).unwrap();
        let r = read_response(&mut c, &mut Vec::new());
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["ok"], json!(true));
        assert_eof(oldest);
        clients.push(c);
    }
    // The newer polls still wait.
    assert_parked(&mut polls[2], 10);
    assert_parked(polls.last_mut().unwrap(), 10);
}
