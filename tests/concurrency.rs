//! Many threads writing at once lose nothing: every accepted message is in
//! the history, message ids per chat are unique and gapless (1..=N), and the
//! host's update stream has one `message_created` per message.

mod common;

use botspace::{Config, Service};
use common::{admin, json_request, split};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Barrier};

const SECRET: &str = "concurrency-admin-secret-01";

fn service() -> Arc<Service> {
    let cfg = json!({"database": common::test_database(), "admin_secret": SECRET, "clock": "manual"});
    Arc::new(Service::open(Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap())
}

/// The whole history of a chat, paged 100 at a time with after_message_id.
fn full_history(svc: &Service, chat: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let page = admin(
            svc,
            SECRET,
            "getChatHistory",
            json!({"chat_id": chat, "after_message_id": after.to_string(), "limit": 100}),
        );
        let page = page.as_array().unwrap();
        if page.is_empty() {
            return out;
        }
        assert!(page.len() <= 100);
        after = page.last().unwrap()["message_id"].as_str().unwrap().parse().unwrap();
        out.extend(page.iter().cloned());
    }
}

/// Every update of the service, paged 1000 at a time with offset.
fn all_updates(svc: &Service) -> Vec<Value> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    loop {
        let page = admin(svc, SECRET, "getUpdates", json!({"offset": offset, "limit": 1000}));
        let page = page.as_array().unwrap();
        if page.is_empty() {
            return out;
        }
        offset = page.last().unwrap()["update_id"].as_u64().unwrap() + 1;
        out.extend(page.iter().cloned());
    }
}

/// Sent messages recorded by the threads: chat → (message id → text).
type Sent = HashMap<String, BTreeMap<u64, String>>;

fn check_chats(svc: &Service, sent: &Sent, expected_total: usize) {
    let mut total = 0;
    for (chat, msgs) in sent {
        let n = msgs.len() as u64;
        total += msgs.len();
        assert_eq!(
            msgs.keys().copied().collect::<Vec<_>>(),
            (1..=n).collect::<Vec<_>>(),
            "returned ids in {chat} are not exactly 1..={n}"
        );
        let hist = full_history(svc, chat);
        assert_eq!(hist.len() as u64, n, "history of {chat} has {} messages, {n} were accepted", hist.len());
        for (i, m) in hist.iter().enumerate() {
            let id: u64 = m["message_id"].as_str().unwrap().parse().unwrap();
            assert_eq!(id, i as u64 + 1, "history of {chat} is not gapless");
            assert_eq!(
                m["text"].as_str(),
                Some(msgs[&id].as_str()),
                "message {id} of {chat} has another text than was returned"
            );
        }
    }
    assert_eq!(total, expected_total, "some sends were lost");
}

#[test]
fn eight_threads_times_500_sends_lose_nothing() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 500;
    let svc = service();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    // Official bots are not rate limited; two of the threads write as the user.
    let bots: Vec<(String, String)> = (0..3)
        .map(|i| {
            let b = admin(&svc, SECRET, "createBot", json!({"display_name": format!("Bot {i}"), "handle": format!("b{i}"), "quota_tier": "official", "official": true}));
            (b["bot"]["id"].as_str().unwrap().to_string(), b["token"].as_str().unwrap().to_string())
        })
        .collect();
    let mut members = vec![user.clone()];
    members.extend(bots.iter().map(|b| b.0.clone()));
    let chats: Vec<String> = (0..3)
        .map(|i| {
            admin(&svc, SECRET, "createGroup", json!({"title": format!("G{i}"), "member_ids": members}))["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let updates_before = all_updates(&svc).len();

    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (svc, barrier, chats, bots, user) =
                (svc.clone(), barrier.clone(), chats.clone(), bots.clone(), user.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut got: Vec<(String, u64, String)> = Vec::with_capacity(PER_THREAD);
                let mut i = 0;
                while i < PER_THREAD {
                    let chat = &chats[(t + i) % chats.len()];
                    let text = format!("t{t}-m{i}");
                    let req = if t >= 6 {
                        json_request(
                            "/admin/sendUserMessage",
                            &format!("Admin {SECRET}"),
                            &json!({"user_id": user, "chat_id": chat, "text": text}),
                        )
                    } else {
                        json_request(
                            "/bot/sendMessage",
                            &format!("Bot {}", bots[t % bots.len()].1),
                            &json!({"chat_id": chat, "text": text}),
                        )
                    };
                    // Thread 5 uses group commit in batches of 10.
                    if t == 5 && i + 10 <= PER_THREAD {
                        let mut reqs = Vec::new();
                        let mut meta = Vec::new();
                        for k in 0..10 {
                            let chat = &chats[(t + i + k) % chats.len()];
                            let text = format!("t{t}-m{}", i + k);
                            reqs.push(json_request(
                                "/bot/sendMessage",
                                &format!("Bot {}", bots[t % bots.len()].1),
                                &json!({"chat_id": chat, "text": text}),
                            ));
                            meta.push((chat.clone(), text));
                        }
                        let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
                        for (raw, (chat, text)) in common::batch(&svc, &refs).iter().zip(meta) {
                            let (s, v) = split(raw);
                            assert_eq!(s, 200, "{v}");
                            got.push((chat, v["result"]["message_id"].as_str().unwrap().parse().unwrap(), text));
                        }
                        i += 10;
                        continue;
                    }
                    let (s, v) = split(&svc.handle_request(&req));
                    assert_eq!(s, 200, "{v}");
                    assert_eq!(v["result"]["text"].as_str(), Some(text.as_str()));
                    got.push((chat.clone(), v["result"]["message_id"].as_str().unwrap().parse().unwrap(), text));
                    i += 1;
                }
                got
            })
        })
        .collect();
    let mut sent: Sent = HashMap::new();
    for h in handles {
        for (chat, id, text) in h.join().expect("a sender thread panicked") {
            let prev = sent.entry(chat.clone()).or_default().insert(id, text);
            assert!(prev.is_none(), "message id {id} of {chat} was returned twice");
        }
    }
    check_chats(&svc, &sent, THREADS * PER_THREAD);
    let ups = all_updates(&svc);
    let created = ups[updates_before..].iter().filter(|u| u["type"] == "message_created").count();
    assert_eq!(created, THREADS * PER_THREAD, "one message_created update per message");
    let ids: Vec<u64> = ups.iter().map(|u| u["update_id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "update ids are strictly increasing");
}

#[test]
fn concurrent_sends_to_one_chat_number_exactly_one_to_n() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 200;
    let svc = service();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let mut members = vec![user.clone()];
    let mut tokens = Vec::new();
    for i in 0..THREADS {
        let b = admin(
            &svc,
            SECRET,
            "createBot",
            json!({"display_name": format!("B{i}"), "handle": format!("b{i}"), "quota_tier": "official"}),
        );
        members.push(b["bot"]["id"].as_str().unwrap().to_string());
        tokens.push(b["token"].as_str().unwrap().to_string());
    }
    let chat = admin(&svc, SECRET, "createGroup", json!({"title": "One", "member_ids": members}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(t, tok)| {
            let (svc, barrier, chat) = (svc.clone(), barrier.clone(), chat.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..PER_THREAD)
                    .map(|i| {
                        let text = format!("b{t}-{i}");
                        let (s, v) = split(&svc.handle_request(&json_request(
                            "/bot/sendMessage",
                            &format!("Bot {tok}"),
                            &json!({"chat_id": chat, "text": text}),
                        )));
                        assert_eq!(s, 200, "{v}");
                        (v["result"]["message_id"].as_str().unwrap().parse::<u64>().unwrap(), text)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sent: Sent = HashMap::new();
    for h in handles {
        let mine = h.join().expect("a sender thread panicked");
        // Each thread sees its own ids increasing.
        assert!(mine.windows(2).all(|w| w[0].0 < w[1].0), "one thread's ids must increase");
        for (id, text) in mine {
            assert!(sent.entry(chat.clone()).or_default().insert(id, text).is_none(), "id {id} returned twice");
        }
    }
    check_chats(&svc, &sent, THREADS * PER_THREAD);
}

#[test]
fn concurrent_free_tier_sends_never_exceed_the_burst() {
    // 8 threads race for one free bot's private chat: exactly 5 get through
    // at a fixed clock, the rest are 429 and write nothing.
    let svc = service();
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b = admin(&svc, SECRET, "createBot", json!({"display_name": "F", "handle": "f"}));
    let tok = b["token"].as_str().unwrap().to_string();
    let chat = admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": b["bot"]["id"]}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (svc, barrier, chat, tok) = (svc.clone(), barrier.clone(), chat.clone(), tok.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..5)
                    .map(|i| {
                        split(&svc.handle_request(&json_request(
                            "/bot/sendMessage",
                            &format!("Bot {tok}"),
                            &json!({"chat_id": chat, "text": format!("{t}-{i}")}),
                        )))
                        .0
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let statuses: Vec<u16> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 35);
    assert_eq!(full_history(&svc, &chat).len(), 5);
}
