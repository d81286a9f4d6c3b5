//! Group commit across threads: concurrent `handle_request` calls on a file
//! database share transactions, and each is answered exactly as if it ran
//! alone. Groups are formed deterministically with `pause_commits` where a
//! test depends on them, never by timing.

mod common;
mod wire;

use botspace::{Config, Service, Synchronous};
use common::{admin, bot_request, split, TempDir};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const SECRET: &str = "group-commit-secret-01";

fn open(dir: &TempDir) -> Arc<Service> {
    Arc::new(
        Service::open(Config::default().with(|c| {
            c.database = dir.0.join("g.db").to_string_lossy().into_owned();
            c.admin_secret = SECRET.into();
            c.synchronous = Synchronous::Full;
        }))
        .unwrap(),
    )
}

fn id(v: &Value) -> String {
    v.as_str().unwrap().to_string()
}

/// A user, `n` official bots each with its started private chat, and one
/// group holding the user and every bot. Returns (user, [(token, bot, chat)], group).
fn populate(svc: &Service, n: usize) -> (String, Vec<(String, String, String)>, String) {
    let user = id(&admin(svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"]);
    let mut bots = Vec::new();
    for i in 0..n {
        let b = admin(
            svc,
            SECRET,
            "createBot",
            json!({"display_name": format!("B{i}"), "handle": format!("b{i}"), "quota_tier": "official"}),
        );
        let bot = id(&b["bot"]["id"]);
        let chat = id(&admin(svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"]);
        bots.push((id(&b["token"]), bot, chat));
    }
    let mut members: Vec<String> = bots.iter().map(|b| b.1.clone()).collect();
    members.push(user.clone());
    let group = id(&admin(svc, SECRET, "createGroup", json!({"title": "G", "member_ids": members}))["id"]);
    (user, bots, group)
}

/// `text` from `bot` (token, id, chat) into its private chat; the status.
fn send_private(svc: &Service, bot: &(String, String, String), text: &str) -> u16 {
    split(&svc.handle_request(&bot_request(&bot.0, "sendMessage", json!({"chat_id": bot.2, "text": text})))).0
}

/// The whole history of a chat, page by page.
fn history_with(svc: &Service, secret: &str, chat: &str) -> Vec<Value> {
    let mut all: Vec<Value> = Vec::new();
    loop {
        let after = all.last().map_or("0".to_string(), |m| id(&m["message_id"]));
        let page =
            admin(svc, secret, "getChatHistory", json!({"chat_id": chat, "after_message_id": after, "limit": 100}));
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

fn history(svc: &Service, chat: &str) -> Vec<Value> {
    history_with(svc, SECRET, chat)
}

#[test]
fn sixty_four_threads_keep_ids_and_seqs_gapless_and_lose_nothing() {
    const THREADS: usize = 64;
    const EACH: usize = 200;
    let dir = TempDir::new("group-64");
    let svc = open(&dir);
    let (_, bots, group) = populate(&svc, THREADS);
    let before = svc.commit_stats();
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = bots
        .iter()
        .enumerate()
        .map(|(t, (token, _, chat))| {
            let (svc, start, token, chat, group) =
                (svc.clone(), start.clone(), token.clone(), chat.clone(), group.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut sent = Vec::new();
                for i in 0..EACH {
                    // Every fourth message goes to the shared group.
                    let target = if i % 4 == 0 { &group } else { &chat };
                    let text = format!("t{t}-m{i}");
                    let r = svc.handle_request(&bot_request(
                        &token,
                        "sendMessage",
                        json!({"chat_id": target, "text": text}),
                    ));
                    let (status, v) = split(&r);
                    assert_eq!(status, 200, "{v}");
                    sent.push((target.clone(), id(&v["result"]["message_id"]), text));
                }
                sent
            })
        })
        .collect();
    let sent: Vec<(String, String, String)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let stats = svc.commit_stats();
    let requests = stats.requests - before.requests;
    assert_eq!(requests, (THREADS * EACH) as u64);
    assert!(stats.groups - before.groups < requests, "no request shared a commit: {stats:?}");
    assert_eq!(stats.durable_commits - before.durable_commits, stats.groups - before.groups, "every commit synced");

    // Every answered message is in its chat's history with its id and text,
    // each chat numbered 1..=n with no gap and no duplicate.
    let mut by_chat: HashMap<String, BTreeMap<i64, String>> = HashMap::new();
    for (chat, mid, text) in &sent {
        let prior = by_chat.entry(chat.clone()).or_default().insert(mid.parse().unwrap(), text.clone());
        assert!(prior.is_none(), "message id {mid} answered twice in {chat}");
    }
    for (chat, answered) in &by_chat {
        let stored: BTreeMap<i64, String> =
            history(&svc, chat).iter().map(|m| (id(&m["message_id"]).parse().unwrap(), id(&m["text"]))).collect();
        assert_eq!(&stored, answered, "chat {chat}");
        let ids: Vec<i64> = stored.keys().copied().collect();
        assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "chat {chat} has a gap");
    }
    // Per-bot event seqs: 1..=last with no gap (read with our own connection).
    drop(svc);
    let conn = rusqlite::Connection::open(dir.0.join("g.db")).unwrap();
    for (_, bot, _) in &bots {
        let seqs: Vec<i64> = conn
            .prepare("SELECT seq FROM bot_events WHERE bot_id = ?1 ORDER BY seq")
            .unwrap()
            .query_map([bot], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let last: i64 = conn.query_row("SELECT last_seq FROM bots WHERE id = ?1", [bot], |r| r.get(0)).unwrap();
        assert_eq!(seqs, (1..=last).collect::<Vec<_>>(), "bot {bot}");
    }
}

/// Starts one thread per request, in order, each queued before the next
/// starts, while commits are paused: resuming commits them as one group in
/// this order.
fn queue_while_paused(svc: &Arc<Service>, requests: Vec<Vec<u8>>) -> Vec<std::thread::JoinHandle<Vec<u8>>> {
    let mut handles = Vec::new();
    for r in requests {
        let waiting = svc.commit_stats().waiting;
        let s = svc.clone();
        handles.push(std::thread::spawn(move || s.handle_request(&r)));
        while svc.commit_stats().waiting == waiting {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    handles
}

#[test]
fn a_storage_failure_in_a_group_fails_its_writers_and_commits_nothing_of_them() {
    let dir = TempDir::new("group-fail");
    let svc = open(&dir);
    let (_, bots, _) = populate(&svc, 4);
    // Inserting the text 'boom' fails after the chat's counter moved: a
    // failure after writing, which only the whole group can undo.
    let side = rusqlite::Connection::open(dir.0.join("g.db")).unwrap();
    side.execute_batch(
        "CREATE TRIGGER boom BEFORE INSERT ON messages WHEN NEW.text = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
    )
    .unwrap();
    let send = |b: &(String, String, String), text: &str| {
        bot_request(&b.0, "sendMessage", json!({"chat_id": b.2, "text": text}))
    };
    let groups = svc.commit_stats().groups;
    let pause = svc.pause_commits();
    let handles = queue_while_paused(
        &svc,
        vec![
            send(&bots[0], "fine"),
            bot_request(&bots[1].0, "sendMessage", json!({"chat_id": "spc_nope", "text": "x"})),
            send(&bots[1], "boom"),
            send(&bots[2], "fine too"),
        ],
    );
    drop(pause);
    let answers: Vec<(u16, Value)> = handles.into_iter().map(|h| split(&h.join().unwrap())).collect();
    assert_eq!(svc.commit_stats().groups, groups + 1, "the four formed one group");
    let internal = json!({"ok": false, "error_code": 500, "error": "internal_error",
                          "description": "internal error, nothing was written; safe to retry"});
    // The request that had written, the failure, and the one never run answer
    // 500; the refusal, which wrote nothing, keeps its own answer.
    assert_eq!(answers[0], (500, internal.clone()));
    assert_eq!(answers[1].0, 404);
    assert_eq!(answers[1].1["error"], "chat_not_found");
    assert_eq!(answers[2], (500, internal.clone()));
    assert_eq!(answers[3], (500, internal));
    for b in &bots[..3] {
        assert_eq!(history(&svc, &b.2), Vec::<Value>::new(), "nothing of the group was written");
    }
    // The next group works, numbering from 1.
    side.execute_batch("DROP TRIGGER boom;").unwrap();
    let pause = svc.pause_commits();
    let handles = queue_while_paused(&svc, vec![send(&bots[0], "again"), send(&bots[1], "again")]);
    drop(pause);
    for h in handles {
        let (status, v) = split(&h.join().unwrap());
        assert_eq!((status, v["result"]["message_id"].as_str()), (200, Some("1")), "{v}");
    }
}

#[test]
fn racing_retries_of_one_idempotency_key_in_one_group_write_once() {
    let dir = TempDir::new("group-idem");
    let svc = open(&dir);
    let (_, bots, _) = populate(&svc, 1);
    let (token, _, chat) = &bots[0];
    let body = json!({"chat_id": chat, "text": "once"}).to_string();
    let req = common::request("/bot/sendMessage", &format!("Bot {token}"), "Idempotency-Key: k-1\r\n", body.as_bytes());
    let groups = svc.commit_stats().groups;
    let pause = svc.pause_commits();
    let handles = queue_while_paused(&svc, vec![req; 8]);
    drop(pause);
    let answers: Vec<(u16, Value)> = handles.into_iter().map(|h| split(&h.join().unwrap())).collect();
    assert_eq!(svc.commit_stats().groups, groups + 1);
    for (status, v) in &answers {
        assert_eq!(*status, 200, "{v}");
        assert_eq!(v, &answers[0].1, "every retry gets the first answer");
    }
    assert_eq!(history(&svc, chat).len(), 1, "written once");
}

#[test]
fn a_lone_request_is_not_held_for_company() {
    let dir = TempDir::new("group-lone");
    let svc = open(&dir);
    let (_, bots, _) = populate(&svc, 1);
    let before = svc.commit_stats();
    for i in 0..5 {
        assert_eq!(send_private(&svc, &bots[0], &i.to_string()), 200);
    }
    let after = svc.commit_stats();
    assert_eq!((after.requests - before.requests, after.groups - before.groups), (5, 5), "one commit each");
}

#[test]
fn a_200_is_on_disk_before_it_is_returned() {
    let dir = TempDir::new("group-durable");
    let svc = open(&dir);
    let (_, bots, _) = populate(&svc, 1);
    for i in 0..3 {
        let before = svc.commit_stats();
        assert_eq!(send_private(&svc, &bots[0], &i.to_string()), 200);
        let after = svc.commit_stats();
        // The commit left SQLite unsynced; the answer waited for its fsync.
        assert_eq!(
            (after.durable_commits - before.durable_commits, after.syncs - before.syncs),
            (1, 1),
            "{before:?} -> {after:?}"
        );
    }
    // A read sees nothing unsynced, so it costs no fsync.
    let before = svc.commit_stats();
    assert_eq!(split(&svc.handle_request(&bot_request(&bots[0].0, "getMe", json!({})))).0, 200);
    assert_eq!(svc.commit_stats().syncs, before.syncs);
}

#[test]
fn without_full_sync_the_service_runs_no_fsync_of_its_own() {
    let dir = TempDir::new("group-normal");
    let svc = Service::open(Config::default().with(|c| {
        c.database = dir.0.join("n.db").to_string_lossy().into_owned();
        c.admin_secret = SECRET.into();
        c.synchronous = Synchronous::Normal;
    }))
    .unwrap();
    let (_, bots, _) = populate(&svc, 1);
    assert_eq!(send_private(&svc, &bots[0], "x"), 200);
    let st = svc.commit_stats();
    assert_eq!((st.durable_commits, st.syncs), (0, 0));
}

#[test]
fn every_answered_message_survives_a_sigkill_of_the_server() {
    let dir = wire::temp_dir("group-crash");
    let mut srv = wire::Server::start_on(&dir);
    srv.wait_line("botspace ready");
    let worlds: Vec<wire::World> = (0..8).map(|_| srv.world("official")).collect();
    let addr = srv.base.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = worlds
        .iter()
        .map(|w| {
            let (addr, token, chat, stop) = (addr.clone(), w.token.clone(), w.chat.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut answered = Vec::new();
                let Ok(mut conn) = std::net::TcpStream::connect(addr.trim_start_matches("http://")) else {
                    return (chat, answered);
                };
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let text = format!("m{i}");
                    let req = bot_request(&token, "sendMessage", json!({"chat_id": chat, "text": text}));
                    // Only a whole 200 counts as answered; a cut answer does not.
                    match exchange(&mut conn, &req) {
                        Some((200, v)) => answered.push((id(&v["result"]["message_id"]), text)),
                        _ => break,
                    }
                }
                (chat, answered)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let status = std::process::Command::new("kill").args(["-KILL", &srv.pid().to_string()]).status().unwrap();
    assert!(status.success());
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let results: Vec<(String, Vec<(String, String)>)> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    drop(srv);
    assert!(results.iter().map(|r| r.1.len()).sum::<usize>() > 50, "the load ran before the kill");
    let svc = Service::open(Config::default().with(|c| {
        c.database = dir.join("botspace.db").to_string_lossy().into_owned();
        c.admin_secret = wire::SECRET.into();
    }))
    .unwrap();
    for (chat, answered) in results {
        let stored: BTreeMap<i64, String> = history_with(&svc, wire::SECRET, &chat)
            .iter()
            .map(|m| (id(&m["message_id"]).parse().unwrap(), id(&m["text"])))
            .collect();
        for (mid, text) in &answered {
            assert_eq!(stored.get(&mid.parse().unwrap()), Some(text), "answered message {mid} lost in {chat}");
        }
        let ids: Vec<i64> = stored.keys().copied().collect();
        assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "chat {chat} has a gap");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Writes `req` and reads one whole response; `None` if the server went away.
fn exchange(conn: &mut std::net::TcpStream, req: &[u8]) -> Option<(u16, Value)> {
    use std::io::Write;
    conn.write_all(req).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:"))?.trim().parse().ok()?;
            if buf.len() >= end + 4 + len {
                return Some(split(&buf[..end + 4 + len]));
            }
        }
        let n = wire::read_some(conn, &mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_panicking_wake_hook_neither_fails_the_request_nor_skips_other_bots() {
    let dir = TempDir::new("group-hook");
    let svc = open(&dir);
    let (user, bots, group) = populate(&svc, 3);
    let woken = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (w, first) = (woken.clone(), bots[0].1.clone());
    svc.set_wake_hook(Some(Arc::new(move |bot: &str| {
        if bot == first {
            panic!("a host bug in the wake hook");
        }
        w.lock().unwrap().push(bot.to_string());
    })));
    let r = svc.handle_request(&common::admin_request(
        SECRET,
        "sendUserMessage",
        json!({"user_id": user, "chat_id": group, "text": "to everyone"}),
    ));
    assert_eq!(split(&r).0, 200);
    let mut got = woken.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<String> = bots[1..].iter().map(|b| b.1.clone()).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn the_wal_is_checkpointed_outside_commits_and_reused_from_its_start() {
    // 300 groups of 64 messages, a chat each, write some 40 000 WAL pages
    // of 2 KiB. SQLite's own checkpoint is off: only the checkpoints run
    // after answers (and their inline catch-up) keep the WAL near 10 000
    // pages; without them it would grow to the backstop of 40 000.
    let dir = TempDir::new("group-wal-reuse");
    let svc = open(&dir);
    let (_, bots, _) = populate(&svc, 64);
    let wal = dir.0.join("g.db-wal");
    let mut largest = 0;
    for round in 0..300 {
        let requests: Vec<Vec<u8>> = bots
            .iter()
            .map(|b| bot_request(&b.0, "sendMessage", json!({"chat_id": b.2, "text": format!("round {round}")})))
            .collect();
        let refs: Vec<&[u8]> = requests.iter().map(Vec::as_slice).collect();
        for out in common::batch(&svc, &refs) {
            assert_eq!(split(&out).0, 200);
        }
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
    }
    assert!(largest < 12_000 * (2048 + 24), "the WAL grew to {largest} bytes");
    // Closing copies the rest and removes the WAL, second connection or not.
    drop(svc);
    assert!(!wal.exists());
    let svc = open(&dir);
    for b in [&bots[0], &bots[63]] {
        let msgs = history(&svc, &b.2);
        assert_eq!(msgs.len(), 300);
        assert_eq!(msgs[299]["message_id"], "300");
        assert_eq!(msgs[299]["text"], "round 299");
    }
}
