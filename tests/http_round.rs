//! `HttpRound`: one round of a host's HTTP connections (the group commit
//! across connections that the C server drives): which requests each
//! round takes, in which batches, with how many commits, and what it
//! leaves to the host.

mod common;

use botspace::connection::http::{ConnectionOptions, HttpConnection};
use botspace::connection::Listener;
use botspace::{Config, HttpRound, RoundConnection, RoundStep, Service, Synchronous};
use common::{admin, admin_request, bot_request, TempDir};
use serde_json::{json, Value};

const SECRET: &str = "http-round-secret-0001";

fn open(database: String) -> Service {
    Service::open(Config::default().with(|c| {
        c.database = database;
        c.admin_secret = SECRET.into();
        c.synchronous = Synchronous::Full;
    }))
    .unwrap()
}

/// An official bot (no rate limits) with its started private chat: its
/// token and the chat's id.
fn bot_with_chat(svc: &Service) -> (String, String) {
    let user = admin(svc, SECRET, "createUser", json!({"display_name": "U"}))["id"].clone();
    let bot =
        admin(svc, SECRET, "createBot", json!({"display_name": "B", "handle": "b_bot", "quota_tier": "official"}));
    let chat = admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot["bot"]["id"]}));
    (bot["token"].as_str().unwrap().into(), chat["id"].as_str().unwrap().into())
}

fn conn(svc: &Service, listener: Listener) -> HttpConnection {
    HttpConnection::new(listener, ConnectionOptions::default(), svc.request_framer(), 0)
}

fn send(token: &str, chat: &str, text: &str) -> Vec<u8> {
    bot_request(token, "sendMessage", json!({"chat_id": chat, "text": text}))
}

/// Takes what the connection has to send, as whole responses: status and body.
fn answers(c: &mut HttpConnection) -> Vec<(u16, Value)> {
    let mut out = Vec::new();
    let bytes = c.poll_transmit().to_vec();
    c.sent(bytes.len(), 0);
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let head_end = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = std::str::from_utf8(&rest[..head_end]).unwrap();
        let len: usize =
            head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).map_or(0, |v| v.trim().parse().unwrap());
        let status = head[9..12].parse().unwrap();
        out.push((status, serde_json::from_slice(&rest[head_end..head_end + len]).unwrap()));
        rest = &rest[head_end + len..];
    }
    out
}

/// (message_id, text) of each sendMessage answer, all 200.
fn sent(answers: &[(u16, Value)]) -> Vec<(String, String)> {
    answers
        .iter()
        .map(|(s, v)| {
            assert_eq!(*s, 200, "{v}");
            (v["result"]["message_id"].as_str().unwrap().into(), v["result"]["text"].as_str().unwrap().into())
        })
        .collect()
}

fn pair(id: u32, text: &str) -> (String, String) {
    (id.to_string(), text.into())
}

#[test]
fn two_connections_pipelining_are_answered_in_order_with_one_commit() {
    let dir = TempDir::new("round-two");
    let svc = open(dir.0.join("r.db").to_string_lossy().into_owned());
    let (token, chat) = bot_with_chat(&svc);
    let (mut a, mut b) = (conn(&svc, Listener::All), conn(&svc, Listener::All));
    let mut input = Vec::new();
    for t in ["a0", "a1", "a2"] {
        input.extend(send(&token, &chat, t));
    }
    a.handle_input(&input, 1);
    input.clear();
    for t in ["b0", "b1"] {
        input.extend(send(&token, &chat, t));
    }
    b.handle_input(&input, 1);
    let before = svc.commit_stats();
    let mut round = HttpRound::new();
    let mut conns = [
        RoundConnection { conn: Some(&mut a), fresh: true, peer: "10.0.0.1" },
        RoundConnection { conn: Some(&mut b), fresh: true, peer: "10.0.0.2" },
    ];
    assert_eq!(round.serve(&svc, &mut conns[..], 2), &[]);
    let after = svc.commit_stats();
    assert_eq!((after.durable_commits - before.durable_commits, after.syncs - before.syncs), (1, 1));
    // The batch ran a's requests, then b's: the chat numbers them so.
    assert_eq!(sent(&answers(&mut a)), [pair(1, "a0"), pair(2, "a1"), pair(3, "a2")]);
    assert_eq!(sent(&answers(&mut b)), [pair(4, "b0"), pair(5, "b1")]);
    assert!(!a.has_request() && !b.has_request());
}

#[test]
fn a_batch_holds_at_most_max_batch_requests_each_committed_once() {
    let dir = TempDir::new("round-max");
    let svc = open(dir.0.join("r.db").to_string_lossy().into_owned());
    let (token, chat) = bot_with_chat(&svc);
    let mut a = conn(&svc, Listener::All);
    let input: Vec<u8> = (0..100).flat_map(|i| send(&token, &chat, &format!("m{i}"))).collect();
    a.handle_input(&input, 1);
    let before = svc.commit_stats();
    let mut conns = [RoundConnection { conn: Some(&mut a), fresh: true, peer: "" }];
    assert_eq!(HttpRound::new().serve(&svc, &mut conns[..], 2), &[]);
    let after = svc.commit_stats();
    // 64 + 36: two batches, one commit each.
    assert_eq!(botspace::connection::limits::MAX_BATCH, 64);
    assert_eq!((after.durable_commits - before.durable_commits, after.syncs - before.syncs), (2, 2));
    let got = sent(&answers(&mut a));
    assert_eq!(got, (0..100).map(|i| pair(i + 1, &format!("m{i}"))).collect::<Vec<_>>());
}

#[test]
fn the_backlog_is_served_round_robin_at_most_max_batch_a_round() {
    let svc = open(":memory:".into());
    let (token, _) = bot_with_chat(&svc);
    let get_me: Vec<u8> = (0..40).flat_map(|_| bot_request(&token, "getMe", json!({}))).collect();
    let mut cs: Vec<HttpConnection> = (0..3).map(|_| conn(&svc, Listener::All)).collect();
    for c in &mut cs {
        c.handle_input(&get_me, 1);
    }
    let mut round = HttpRound::new();
    let answered = |round: &mut HttpRound, cs: &mut [HttpConnection]| -> Vec<usize> {
        let mut conns: Vec<RoundConnection> =
            cs.iter_mut().map(|c| RoundConnection { conn: Some(c), fresh: false, peer: "" }).collect();
        assert_eq!(round.serve(&svc, &mut conns[..], 2), &[]);
        cs.iter_mut()
            .map(|c| {
                let a = answers(c);
                assert!(a.iter().all(|(s, v)| *s == 200 && v["result"]["handle"] == "b_bot"), "{a:?}");
                a.len()
            })
            .collect()
    };
    // Nothing newly read: 64 a round, from where the last round stopped.
    assert_eq!(answered(&mut round, &mut cs), [40, 24, 0]);
    assert!(cs[1].has_request() && cs[2].has_request(), "the rest waits for the next round");
    assert_eq!(answered(&mut round, &mut cs), [0, 16, 40]);
    assert_eq!(answered(&mut round, &mut cs), [0, 0, 0]);
}

#[test]
fn fresh_connections_go_ahead_of_the_backlog() {
    let svc = open(":memory:".into());
    let (token, _) = bot_with_chat(&svc);
    let get_me: Vec<u8> = (0..200).flat_map(|_| bot_request(&token, "getMe", json!({}))).collect();
    let (mut old, mut new) = (conn(&svc, Listener::All), conn(&svc, Listener::All));
    old.handle_input(&get_me, 1);
    new.handle_input(&bot_request(&token, "getMe", json!({})), 1);
    let mut conns = [
        RoundConnection { conn: Some(&mut old), fresh: false, peer: "" },
        RoundConnection { conn: Some(&mut new), fresh: true, peer: "" },
    ];
    assert_eq!(HttpRound::new().serve(&svc, &mut conns[..], 2), &[]);
    // The fresh request took the first place of the first batch and the
    // backlog the other 63; under its share of 64 still, the backlog then
    // filled a second batch, and the round ended there.
    assert_eq!((answers(&mut old).len(), answers(&mut new).len()), (127, 1));
    assert!(old.has_request());
}

#[test]
fn a_step_ends_its_connections_share_and_the_rest_goes_to_the_next_batch() {
    let dir = TempDir::new("round-step");
    let svc = open(dir.0.join("r.db").to_string_lossy().into_owned());
    let (token, chat) = bot_with_chat(&svc);
    let (mut a, mut b) = (conn(&svc, Listener::All), conn(&svc, Listener::All));
    let mut input = send(&token, &chat, "a0");
    // A step: a getUpdates, which may park, is left to its own turn.
    input.extend(bot_request(&token, "getUpdates", json!({})));
    input.extend(send(&token, &chat, "a1"));
    a.handle_input(&input, 1);
    let mut input = send(&token, &chat, "b0");
    input.extend(send(&token, &chat, "b1"));
    b.handle_input(&input, 1);
    let before = svc.commit_stats();
    let mut conns = [
        RoundConnection { conn: Some(&mut a), fresh: true, peer: "10.0.0.1" },
        RoundConnection { conn: Some(&mut b), fresh: true, peer: "10.0.0.2" },
    ];
    assert_eq!(HttpRound::new().serve(&svc, &mut conns[..], 2), &[]);
    let after = svc.commit_stats();
    // a0 b0 b1 in one commit, the getUpdates in its own, a1 in the next
    // batch.
    assert_eq!((after.durable_commits - before.durable_commits, after.syncs - before.syncs), (3, 3));
    let got = answers(&mut a);
    assert_eq!(got.len(), 3);
    assert_eq!(sent(&got[..1]), [pair(1, "a0")]);
    assert_eq!(got[1].0, 200);
    let update = &got[1].1["result"][0];
    assert_eq!((update["type"].as_str(), update["update_id"].as_i64()), (Some("bot_started"), Some(1)), "{:?}", got[1]);
    assert_eq!(got[1].1["result"].as_array().map(Vec::len), Some(1));
    assert_eq!(sent(&got[2..]), [pair(4, "a1")]);
    assert_eq!(sent(&answers(&mut b)), [pair(2, "b0"), pair(3, "b1")]);
}

#[test]
fn the_gateway_and_a_parked_poll_are_left_to_the_host_another_listeners_path_is_answered() {
    let svc = open(":memory:".into());
    let bot = admin(&svc, SECRET, "createBot", json!({"display_name": "P", "handle": "p_bot"}));
    let token = bot["token"].as_str().unwrap();
    let (mut poll, mut gw, mut public) =
        (conn(&svc, Listener::All), conn(&svc, Listener::All), conn(&svc, Listener::Public));
    poll.handle_input(&bot_request(token, "getUpdates", json!({"timeout": 30})), 1);
    let upgrade = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nAuthorization: Bot {token}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    let mut input = bot_request(token, "getMe", json!({}));
    input.extend(upgrade.as_bytes());
    gw.handle_input(&input, 1);
    public.handle_input(&admin_request(SECRET, "createUser", json!({"display_name": "W"})), 1);
    let mut round = HttpRound::new();
    let mut conns = [
        RoundConnection { conn: Some(&mut poll), fresh: true, peer: "" },
        RoundConnection { conn: None, fresh: true, peer: "" },
        RoundConnection { conn: Some(&mut gw), fresh: true, peer: "" },
        RoundConnection { conn: Some(&mut public), fresh: false, peer: "" },
    ];
    let steps = round.serve(&svc, &mut conns[..], 2).to_vec();
    let [RoundStep::Parked { conn: 0, poll: id }, RoundStep::Gateway { conn: 2, request }] = steps[..] else {
        panic!("{steps:?}")
    };
    assert_ne!(id.0, 0);
    assert_eq!(gw.request(&request), upgrade.as_bytes());
    assert!(!gw.has_request() && !poll.has_request(), "each waits for the host");
    assert_eq!(poll.poll_transmit(), b"", "the poll waits for its answer");
    let got = answers(&mut gw);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1["result"]["handle"], "p_bot", "getMe before the upgrade, in its batch");
    assert_eq!(public.poll_transmit(), &botspace::connection::not_here("/admin/createUser")[..]);
    // The parked poll is the service's, answered by its deadline.
    let parked = svc.poll_parked(svc.now_ms() + 31_000);
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].0, id);
}

/// Host calls on different connections, each with its client, commit as
/// one batch with the bot requests beside them (the login throttle is
/// still each client's), and each is audited with its connection's peer.
#[test]
fn host_calls_on_several_connections_commit_together_audited_with_their_peers() {
    let dir = TempDir::new("round-host");
    let svc = open(dir.0.join("r.db").to_string_lossy().into_owned());
    let (token, chat) = bot_with_chat(&svc);
    let (mut a, mut b, mut c) = (conn(&svc, Listener::All), conn(&svc, Listener::All), conn(&svc, Listener::All));
    a.handle_input(&admin_request(SECRET, "createUser", json!({"display_name": "A"})), 1);
    b.handle_input(&send(&token, &chat, "b0"), 1);
    c.handle_input(&admin_request(SECRET, "createUser", json!({"display_name": "C"})), 1);
    let before = svc.commit_stats();
    let mut conns = [
        RoundConnection { conn: Some(&mut a), fresh: true, peer: "10.0.0.1" },
        RoundConnection { conn: Some(&mut b), fresh: true, peer: "10.0.0.2" },
        RoundConnection { conn: Some(&mut c), fresh: true, peer: "10.0.0.3" },
    ];
    assert_eq!(HttpRound::new().serve(&svc, &mut conns[..], 2), &[]);
    let after = svc.commit_stats();
    assert_eq!((after.durable_commits - before.durable_commits, after.syncs - before.syncs), (1, 1));
    let got = answers(&mut a);
    assert_eq!((got.len(), got[0].0, got[0].1["result"]["display_name"].as_str()), (1, 200, Some("A")));
    assert_eq!(sent(&answers(&mut b)), [pair(1, "b0")]);
    let got = answers(&mut c);
    assert_eq!((got.len(), got[0].0, got[0].1["result"]["display_name"].as_str()), (1, 200, Some("C")));
    let log = admin(&svc, SECRET, "getAuditLog", json!({}));
    let mut peers: Vec<(String, String)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "createUser" && e["detail"]["display_name"] != "U")
        .map(|e| (e["detail"]["display_name"].as_str().unwrap().into(), e["peer"].as_str().unwrap_or("").into()))
        .collect();
    peers.sort();
    assert_eq!(peers, [("A".into(), "10.0.0.1".into()), ("C".into(), "10.0.0.3".into())]);
}
