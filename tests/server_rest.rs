//! REST scenarios against a real server process over TCP (see `tests/wire`).
//! `BOTSPACE_SERVER_CMD` runs them against another server implementation.

mod wire;

use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;
use wire::*;

fn sent_message(w: &World, id: &str, text: &str) -> Value {
    json!({"message_id": id, "chat": {"id": w.chat, "type": "private"}, "date": MANUAL_START_S, "text": text,
           "from": {"id": w.bot_id, "is_bot": true}})
}

#[test]
fn get_me_and_send_message_like_curl() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut s = srv.connect();
    // Exactly what `curl -s -X POST URL -H 'Authorization: Bot T'` sends.
    let get_me = format!(
        "POST /bot/getMe HTTP/1.1\r\nHost: {}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAuthorization: Bot {}\r\n\r\n",
        srv.addr, w.token
    );
    s.write_all(get_me.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    assert_eq!(r.json(), json!({"ok": true, "result": w.bot}));
    assert_eq!(
        w.bot,
        json!({"id": w.bot_id, "is_bot": true, "display_name": "Echo", "handle": "echo_bot", "avatar_key": null,
               "status": "active", "verified": false, "official": false, "quota_tier": "standard",
               "gateway_connection_limit": 4, "capabilities": {"edit_delete_messages": true}})
    );
    // ... and `-H 'Content-Type: application/json' -d '{...}'`.
    let body = json!({"chat_id": w.chat, "text": "Hello from the demo bot"}).to_string();
    let send = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: {}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        srv.addr,
        w.token,
        body.len()
    );
    s.write_all(send.as_bytes()).unwrap();
    let r = read_response(&mut s, &mut buf);
    assert_eq!(r.result(), sent_message(&w, "1", "Hello from the demo bot"));

    // The same through ureq.
    let r = srv.bot(&w.token, "getMe", &json!({}));
    assert_eq!((r.status, r.body.clone()), (200, json!({"ok": true, "result": w.bot})));
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "second"}));
    assert_eq!((r.status, r.body.clone()), (200, json!({"ok": true, "result": sent_message(&w, "2", "second")})));
    // Wrong credentials and content type, with the documented codes.
    srv.bot("bot_nope", "getMe", &json!({})).assert_error(401, "invalid_token");
    srv.post("/bot/getMe", None, &json!({})).assert_error(401, "missing_authorization");
    let r = agent()
        .post(format!("{}/bot/sendMessage", srv.base))
        .header("Authorization", format!("Bot {}", w.token))
        .content_type("text/plain")
        .send("hi")
        .unwrap();
    Resp::from_ureq(r).assert_error(415, "unsupported_media_type");
    srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": ""})).assert_error(400, "text_empty");
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat}));
    r.assert_error(400, "missing_field");
    assert_eq!(r.body["parameters"], json!({"field": "text"}));
    srv.bot(&w.token, "noSuchMethod", &json!({})).assert_error(404, "method_not_found");
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let srv = Server::start();
    let w = srv.world("official");
    let mut s = srv.connect();
    let mut buf = Vec::new();
    for i in 1..=5 {
        s.write_all(&bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": format!("m{i}")}))))
            .unwrap();
        let r = read_response(&mut s, &mut buf);
        assert_eq!(r.header("connection"), None, "keep-alive is the HTTP/1.1 default");
        assert_eq!(r.result(), sent_message(&w, &i.to_string(), &format!("m{i}")));
        std::thread::sleep(Duration::from_millis(20));
    }
    s.write_all(&bot_request(&w.token, "getMe", None)).unwrap();
    assert_eq!(read_response(&mut s, &mut buf).result(), w.bot);
}

#[test]
fn pipelined_requests_answer_in_order() {
    let srv = Server::start();
    let w = srv.world("official");
    let mut s = srv.connect();
    // Two requests in one write, two responses in order.
    let rs = srv.pipeline(
        &mut s,
        &[
            bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "one"}))),
            bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "two"}))),
        ],
    );
    assert_eq!(rs[0].result(), sent_message(&w, "1", "one"));
    assert_eq!(rs[1].result(), sent_message(&w, "2", "two"));

    // A failure in the middle of a pipeline affects only its own answer.
    let bad = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{{nope",
        w.token
    )
    .into_bytes();
    let rs = srv.pipeline(
        &mut s,
        &[
            bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "three"}))),
            bad,
            bot_request(&w.token, "getMe", None),
            bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "four"}))),
        ],
    );
    assert_eq!(rs[0].result(), sent_message(&w, "3", "three"));
    rs[1].assert_error(400, "invalid_json");
    assert_eq!(rs[2].result(), w.bot);
    assert_eq!(rs[3].result(), sent_message(&w, "4", "four"));

    // A long pipeline (more than one batch) keeps its order too.
    let reqs: Vec<Vec<u8>> = (5..=204)
        .map(|i| bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": format!("p{i}")}))))
        .collect();
    for (i, r) in (5..=204).zip(srv.pipeline(&mut s, &reqs)) {
        assert_eq!(r.result(), sent_message(&w, &i.to_string(), &format!("p{i}")));
    }
    let history = srv.admin("getChatHistory", &json!({"chat_id": w.chat, "after_message_id": "200"}));
    assert_eq!(history.as_array().unwrap().len(), 4);
}

#[test]
fn request_split_into_tiny_writes() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut s = srv.connect();
    let req = bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "drip"})));
    for (i, b) in req.iter().enumerate() {
        s.write_all(std::slice::from_ref(b)).unwrap();
        if i % 8 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).result(), sent_message(&w, "1", "drip"));
    // The connection is still usable, and a request split across a
    // write boundary right after the head works too.
    let req = bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "halves"})));
    let cut = req.windows(4).position(|x| x == b"\r\n\r\n").unwrap() + 4;
    s.write_all(&req[..cut]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(&req[cut..]).unwrap();
    assert_eq!(read_response(&mut s, &mut buf).result(), sent_message(&w, "2", "halves"));
}

#[test]
fn oversized_content_length_is_413_without_the_body() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut s = srv.connect();
    // Only the head: the server must answer without waiting for 100 MB.
    let head = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n",
        w.token
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf);
    r.assert_error(413, "payload_too_large");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(buf.is_empty());
    assert_eof(&mut s);
    // Just over the default limit of 65 536 bytes is refused the same way.
    let mut s = srv.connect();
    let head = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: 65537\r\n\r\n",
        w.token
    );
    s.write_all(head.as_bytes()).unwrap();
    read_response(&mut s, &mut Vec::new()).assert_error(413, "payload_too_large");
    // Nothing was written.
    assert_eq!(srv.admin("getChatHistory", &json!({"chat_id": w.chat})), json!([]));
}

#[test]
fn wrong_method_is_405_with_allow() {
    let srv = Server::start();
    let w = srv.world("standard");
    let r = agent()
        .get(format!("{}/bot/getMe", srv.base))
        .header("Authorization", format!("Bot {}", w.token))
        .call()
        .unwrap();
    let r = Resp::from_ureq(r);
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = agent().put(format!("{}/bot/sendMessage", srv.base)).send("").unwrap();
    let r = Resp::from_ureq(r);
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = agent()
        .get(format!("{}/admin/createUser", srv.base))
        .header("Authorization", format!("Admin {SECRET}"))
        .call()
        .unwrap();
    let r = Resp::from_ureq(r);
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    // The gateway takes GET only.
    let r = Resp::from_ureq(agent().post(format!("{}/bot/gateway", srv.base)).send("").unwrap());
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("GET"));
}

#[test]
fn connection_close_is_honoured() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut s = srv.connect();
    let req = format!(
        "POST /bot/getMe HTTP/1.1\r\nHost: botspace\r\nConnection: close\r\nAuthorization: Bot {}\r\n\r\n",
        w.token
    );
    // A request pipelined after `Connection: close` is not answered.
    let mut both = req.clone().into_bytes();
    both.extend_from_slice(&bot_request(&w.token, "sendMessage", Some(&json!({"chat_id": w.chat, "text": "never"}))));
    s.write_all(&both).unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf);
    assert_eq!(r.result(), w.bot);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(buf.is_empty());
    assert_eof(&mut s);
    assert_eq!(srv.admin("getChatHistory", &json!({"chat_id": w.chat})), json!([]));
    // HTTP/1.0 closes by default.
    let mut s = srv.connect();
    s.write_all(format!("POST /bot/getMe HTTP/1.0\r\nAuthorization: Bot {}\r\n\r\n", w.token).as_bytes()).unwrap();
    let r = read_response(&mut s, &mut Vec::new());
    assert_eq!(r.result(), w.bot);
    assert_eof(&mut s);
}

#[test]
fn expect_100_continue_is_answered() {
    let srv = Server::start();
    let w = srv.world("standard");
    let mut s = srv.connect();
    let body = json!({"chat_id": w.chat, "text": "after continue"}).to_string();
    let head = format!(
        "POST /bot/sendMessage HTTP/1.1\r\nHost: botspace\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        w.token,
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    std::io::Read::read_exact(&mut s, &mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(body.as_bytes()).unwrap();
    let r = read_response(&mut s, &mut Vec::new());
    assert_eq!(r.result(), sent_message(&w, "1", "after continue"));
}

#[test]
fn human_message_and_chat_history() {
    let srv = Server::start();
    let w = srv.world("standard");
    let human = srv.say(&w.user_id, &w.chat, "hi bot");
    assert_eq!(
        human,
        json!({"message_id": "1", "chat": {"id": w.chat, "type": "private"}, "date": MANUAL_START_S, "text": "hi bot",
               "from": {"id": w.user_id, "is_bot": false}})
    );
    let reply =
        srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "hi human", "reply_to_message_id": "1"}));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mut expected_reply = sent_message(&w, "2", "hi human");
    expected_reply["reply_to_message_id"] = json!("1");
    assert_eq!(reply.body["result"], expected_reply);
    srv.advance(60.0);
    let later = srv.say(&w.user_id, &w.chat, "later");
    assert_eq!(later["date"], json!(MANUAL_START_S + 60));
    let history = srv.admin("getChatHistory", &json!({"chat_id": w.chat}));
    assert_eq!(history, json!([human, expected_reply, later]));
    let tail = srv.admin("getChatHistory", &json!({"chat_id": w.chat, "after_message_id": "1", "limit": 1}));
    assert_eq!(tail, json!([expected_reply]));
    // Host API errors use the same envelope.
    srv.admin_resp("sendUserMessage", &json!({"user_id": w.user_id, "chat_id": "spc_nope", "text": "x"}))
        .assert_error(404, "chat_not_found");
    srv.post("/admin/getChatHistory", Some("Admin wrong-secret-wrong-secret"), &json!({"chat_id": w.chat}))
        .assert_error(401, "invalid_token");
}

#[test]
fn demo_data_on_empty_database_then_not_again() {
    let dir = temp_dir("demo");
    let (token, chat, bot_id);
    {
        let mut srv = Server::start_on(&dir);
        let lines = srv.wait_line("botspace ready");
        let find = |prefix: &str| -> String {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no line starting with {prefix:?} in {lines:#?}"))
                .trim()
                .to_string()
        };
        token = find("demo bot token: ");
        chat = find("demo chat: ");
        bot_id = find("demo bot: ");
        let user_id = find("demo user: ");
        assert!(token.starts_with("bot_") && token.len() == 47, "{token}");
        assert!(chat.starts_with("spc_") && bot_id.starts_with("bot_") && user_id.starts_with("usr_"));
        let curls: Vec<&String> = lines.iter().filter(|l| l.trim_start().starts_with("curl ")).collect();
        assert_eq!(curls.len(), 2, "{lines:#?}");
        assert!(curls[0].contains(&format!("{}/bot/getMe", srv.base)) && curls[0].contains(&token), "{}", curls[0]);
        assert!(
            curls[1].contains(&format!("{}/bot/sendMessage", srv.base)) && curls[1].contains(&chat),
            "{}",
            curls[1]
        );
        // The printed lines work as printed, when curl is installed.
        let has_curl = std::process::Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
        if has_curl {
            let out = std::process::Command::new("sh").arg("-c").arg(curls[0].trim()).output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["result"]["id"], json!(bot_id));
            assert_eq!(v["result"]["quota_tier"], json!("standard"));
            let out = std::process::Command::new("sh").arg("-c").arg(curls[1].trim()).output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["ok"], json!(true), "{v}");
            assert_eq!(v["result"]["chat"], json!({"id": chat, "type": "private"}));
        } else {
            let r = srv.bot(&token, "sendMessage", &json!({"chat_id": chat, "text": "Hello from the demo bot"}));
            assert_eq!(r.status, 200, "{}", r.body);
        }
        let me = srv.bot(&token, "getMe", &json!({}));
        assert_eq!(me.body["result"]["display_name"], json!("Demo Bot"));
        // The chat is the demo user's started private chat.
        let history = srv.admin("getChatHistory", &json!({"chat_id": chat}));
        assert_eq!(history.as_array().unwrap().len(), 1);
    }
    // Second start on the same file: no new demo, the same ids, no token
    // (it was shown once), and the old token still works.
    let mut srv = Server::start_on(&dir);
    let lines = srv.wait_line("botspace ready");
    assert!(
        lines.contains(&format!("demo bot: {bot_id}")) && lines.contains(&format!("demo chat: {chat}")),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains(&token) || l.contains("BOTSPACE_TOKEN")),
        "a token printed again: {lines:#?}"
    );
    assert_eq!(srv.admin("getStats", &json!({}))["bots"], json!(1), "demo created twice: {lines:#?}");
    let me = srv.bot(&token, "getMe", &json!({}));
    assert_eq!(me.status, 200, "{}", me.body);
    assert_eq!(me.body["result"]["id"], json!(bot_id));
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigint_stops_cleanly_and_keeps_every_answered_write() {
    let dir = temp_dir("sigint");
    let (token, chat);
    {
        let mut srv = Server::start_on(&dir);
        let lines = srv.wait_line("botspace ready");
        token = lines.iter().find_map(|l| l.strip_prefix("demo bot token: ")).unwrap().to_string();
        chat = lines.iter().find_map(|l| l.strip_prefix("demo chat: ")).unwrap().to_string();
        let r = srv.bot(&token, "sendMessage", &json!({"chat_id": chat, "text": "before the stop"}));
        assert_eq!(r.status, 200);
        // An idle keep-alive connection and a gateway connection are open.
        let mut idle = srv.connect();
        idle.write_all(&bot_request(&token, "getMe", None)).unwrap();
        read_response(&mut idle, &mut Vec::new());
        let mut gw = srv.gateway(&token, "");
        gw.hello();
        let status = srv.interrupt();
        assert!(status.success(), "exit status {status}");
        assert!(srv.lines().iter().any(|l| l.starts_with("botspace stopped")), "{:#?}", srv.lines());
    }
    let mut srv = Server::start_on(&dir);
    srv.wait_line("botspace ready");
    let history = srv.admin("getChatHistory", &json!({"chat_id": chat}));
    assert_eq!(history[0]["text"], json!("before the stop"));
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

/// Many keep-alive connections write into one chat at once, so a server
/// that commits the requests of several connections together (the C
/// server's batches across connections, group commit in the library) is
/// exercised: every answer is a 200 with its own id, ids are gapless, each
/// connection sees its own ids rise, and the history holds exactly the
/// answered messages.
#[test]
fn concurrent_connections_into_one_chat_get_gapless_ids_and_every_answer_is_stored() {
    const CONNS: usize = 32;
    const PER_CONN: usize = 20;
    let dir = temp_dir("concurrent");
    let mut srv = Server::start_on(&dir);
    srv.wait_line("botspace ready");
    let w = srv.world("official");
    let start = std::sync::Barrier::new(CONNS);
    let answered: Vec<Vec<Value>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CONNS)
            .map(|c| {
                let (srv, w, start) = (&srv, &w, &start);
                scope.spawn(move || {
                    let mut s = srv.connect();
                    let mut buf = Vec::new();
                    start.wait();
                    (0..PER_CONN)
                        .map(|i| {
                            let body = json!({"chat_id": w.chat, "text": format!("c{c} m{i}")});
                            s.write_all(&bot_request(&w.token, "sendMessage", Some(&body))).unwrap();
                            read_response(&mut s, &mut buf).result()
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let id = |m: &Value| m["message_id"].as_str().unwrap().parse::<usize>().unwrap();
    for (c, msgs) in answered.iter().enumerate() {
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(m, &sent_message(&w, m["message_id"].as_str().unwrap(), &format!("c{c} m{i}")));
        }
        assert!(msgs.windows(2).all(|p| id(&p[0]) < id(&p[1])), "connection {c} got ids out of order");
    }
    let mut all: Vec<Value> = answered.into_iter().flatten().collect();
    all.sort_by_key(id);
    let ids: Vec<usize> = all.iter().map(id).collect();
    assert_eq!(ids, (1..=CONNS * PER_CONN).collect::<Vec<_>>(), "ids are not distinct and gapless");
    let mut history = Vec::new();
    loop {
        let after = history.last().map_or("0".to_string(), |m: &Value| m["message_id"].as_str().unwrap().to_string());
        let page = srv.admin("getChatHistory", &json!({"chat_id": w.chat, "after_message_id": after, "limit": 100}));
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        history.extend(page);
    }
    assert_eq!(history, all);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn failed_admin_logins_are_throttled_per_peer() {
    let srv = Server::start_rust_with(&["--admin-secret", SECRET]);
    for _ in 0..10 {
        srv.post("/admin/getStats", Some("Admin wrong-secret-0000000"), &json!({})).assert_error(401, "invalid_token");
    }
    let r = srv.post("/admin/getStats", Some(&format!("Admin {SECRET}")), &json!({}));
    r.assert_error(429, "rate_limited");
    assert_eq!(r.body["parameters"]["scope"], "admin_auth");
    assert_eq!(r.header("retry-after"), Some("6"));
    // Bot methods from the same peer are not affected.
    srv.post("/bot/getMe", Some("Bot nope"), &json!({})).assert_error(401, "invalid_token");
}

/// The X-RateLimit-* headers the core writes reach a real HTTP client
/// unchanged (through the hyper host, or the C server under
/// `BOTSPACE_SERVER_CMD`), on the 200s and the 429, and not for a bot
/// without limits.
#[test]
fn rate_limit_headers_cross_the_wire() {
    let srv = Server::start();
    let w = srv.world("free");
    let rate = |r: &Resp| {
        ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset-After", "X-RateLimit-Scope"]
            .map(|h| r.header(h).map(str::to_string))
    };
    let some = |l: &str, rem: &str, reset: &str, scope: &str| [l, rem, reset, scope].map(|v| Some(v.to_string()));
    for i in 1..=5 {
        let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": format!("m{i}")}));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(rate(&r), some("5", &(5 - i).to_string(), "1", "chat"), "send {i}");
    }
    let r = srv.bot(&w.token, "sendMessage", &json!({"chat_id": w.chat, "text": "m6"}));
    r.assert_error(429, "rate_limited");
    assert_eq!(r.body["parameters"], json!({"retry_after": 1, "retry_after_ms": 1000, "scope": "chat"}));
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert_eq!(rate(&r), some("5", "0", "1", "chat"));
    srv.advance(0.25);
    let r = srv.bot(&w.token, "sendChatAction", &json!({"chat_id": w.chat, "action": "typing"}));
    r.assert_error(429, "rate_limited");
    assert_eq!(rate(&r), some("5", "0", "0.75", "chat"));
    let r = srv.bot(&w.token, "getMe", &json!({}));
    assert_eq!((r.status, rate(&r)), (200, [None, None, None, None]));

    let o = srv.world("official");
    let r = srv.bot(&o.token, "sendMessage", &json!({"chat_id": o.chat, "text": "unlimited"}));
    assert_eq!((r.status, rate(&r)), (200, [None, None, None, None]));
}
