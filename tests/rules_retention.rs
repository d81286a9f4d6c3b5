//! Retention: a bot's events are kept at least `event_retention_s` and
//! until acknowledged; host updates at least as long and until confirmed by
//! getUpdates. Pruning runs with a commit at most once a minute, walks each
//! log from its oldest row and stops at the first row it must keep.
//!
//! The database is a file so the tests can read what is left with their own
//! connection.

mod common;

use botspace::Service;
use common::{admin, bot_call, TempDir};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

const SECRET: &str = "retention-admin-secret-01";
const RETENTION_S: u64 = 3600;

struct World {
    _dir: TempDir,
    db: PathBuf,
    svc: Arc<Service>,
    user: String,
    bot: String,
    token: String,
    chat: String,
}

fn open(db: &std::path::Path) -> Arc<Service> {
    open_with(db, json!({}))
}

/// A service on `db` with `extra` configuration fields.
fn open_with(db: &std::path::Path, extra: Value) -> Arc<Service> {
    let mut cfg = json!({
        "database": db.to_str().unwrap(),
        "admin_secret": SECRET,
        "clock": "manual",
        "event_retention_s": RETENTION_S,
    });
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    Arc::new(Service::open(botspace::Config::from_json(cfg.to_string().as_bytes()).unwrap()).unwrap())
}

fn world(tag: &str) -> World {
    world_with(tag, json!({}))
}

fn world_with(tag: &str, extra: Value) -> World {
    let dir = TempDir::new(tag);
    let db = dir.0.join("bots.db");
    let svc = open_with(&db, extra);
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b =
        admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo", "quota_tier": "official"}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    World { _dir: dir, db, svc, user, bot, token, chat }
}

impl World {
    /// A user message: one event for the bot, one update for the host.
    fn user_says(&self, text: &str) {
        admin(&self.svc, SECRET, "sendUserMessage", json!({"user_id": self.user, "chat_id": self.chat, "text": text}));
    }

    fn advance(&self, seconds: u64) {
        admin(&self.svc, SECRET, "advanceClock", json!({"seconds": seconds}));
    }

    /// Acknowledges the bot's events up to `seq` over the gateway.
    fn ack(&self, seq: i64) {
        let upgrade = format!(
            "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            self.token
        );
        let now = self.svc.now_ms();
        let mut s = self.svc.accept_gateway_session(upgrade.as_bytes(), now).unwrap_or_else(|r: Vec<u8>| {
            panic!("gateway refused: {}", String::from_utf8_lossy(&r));
        });
        s.poll_transmit(); // hello
        s.handle_text(&format!(r#"{{"op":"ack","seq":{seq}}}"#), now);
        while s.poll_transmit().is_some() {}
        assert!(!s.is_closed(), "the ack was refused");
    }

    /// Confirms host updates below `offset` (getUpdates' Telegram rule).
    fn confirm_updates(&self, offset: i64) {
        admin(&self.svc, SECRET, "getUpdates", json!({"offset": offset, "limit": 1}));
    }

    fn db(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn event_seqs(&self) -> Vec<i64> {
        let c = self.db();
        let mut st = c.prepare("SELECT seq FROM bot_events WHERE bot_id = ?1 ORDER BY seq").unwrap();
        st.query_map([&self.bot], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    }

    fn update_ids(&self) -> Vec<i64> {
        let c = self.db();
        let mut st = c.prepare("SELECT update_id FROM updates ORDER BY update_id").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    }

    fn pruned_seq(&self) -> i64 {
        self.db().query_row("SELECT pruned_seq FROM bots WHERE id = ?1", [&self.bot], |r| r.get(0)).unwrap()
    }

    fn kept_since_ms(&self) -> i64 {
        self.db().query_row("SELECT kept_since_ms FROM bots WHERE id = ?1", [&self.bot], |r| r.get(0)).unwrap()
    }

    fn created_at(&self, seq: i64) -> i64 {
        self.db()
            .query_row(
                "SELECT created_at_ms FROM bot_events WHERE bot_id = ?1 AND seq = ?2",
                rusqlite::params![self.bot, seq],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// Any commit past the once-a-minute mark prunes.
    fn commit_something(&self) {
        let (status, _): (u16, Value) =
            bot_call(&self.svc, &self.token, "sendChatAction", json!({"chat_id": self.chat, "action": "typing"}));
        assert_eq!(status, 200);
    }
}

#[test]
fn acknowledged_events_are_dropped_only_once_older_than_retention() {
    let w = world("ret-ack");
    // startBot wrote event 1 (chat_started) on creation; two messages more.
    w.user_says("one");
    w.user_says("two");
    let all = w.event_seqs();
    assert_eq!(all, vec![1, 2, 3]);
    w.ack(3);
    // Acknowledged but young: kept.
    w.advance(120);
    w.commit_something();
    assert_eq!(w.event_seqs(), all);
    // Old and acknowledged: dropped, and the bot's prune mark moves.
    w.advance(RETENTION_S);
    w.commit_something();
    assert_eq!(w.event_seqs(), Vec::<i64>::new());
    assert_eq!(w.pruned_seq(), 3);
}

#[test]
fn unacknowledged_events_are_kept_however_old() {
    let w = world("ret-unacked");
    w.user_says("one");
    w.user_says("two");
    w.ack(2);
    w.advance(10 * RETENTION_S);
    w.commit_something();
    assert_eq!(w.event_seqs(), vec![3], "event 3 was never acknowledged");
    assert_eq!(w.pruned_seq(), 2);
    w.ack(3);
    w.advance(120);
    w.commit_something();
    assert_eq!(w.event_seqs(), Vec::<i64>::new());
    assert_eq!(w.pruned_seq(), 3);
}

#[test]
fn pruning_stops_at_the_first_event_inside_retention() {
    let w = world("ret-boundary");
    w.user_says("old");
    w.advance(RETENTION_S / 2);
    w.user_says("middle");
    w.advance(RETENTION_S / 2 + 60);
    w.user_says("young");
    w.ack(4);
    w.advance(60);
    w.commit_something();
    // Events 1 and 2 are over an hour old; 3 is 32 minutes old; 4 is new.
    assert_eq!(w.event_seqs(), vec![3, 4]);
    assert_eq!(w.pruned_seq(), 2);
    let t3 = w.created_at(3);
    assert_eq!(w.kept_since_ms(), t3, "the bot is looked at again once event 3 ages out");
    // Event 3 one minute short of retention: kept.
    let age3 = (w.svc.now_ms() as i64 - t3) / 1000;
    w.advance(RETENTION_S - age3 as u64 - 60);
    w.commit_something();
    assert_eq!(w.event_seqs(), vec![3, 4]);
    // One minute past: dropped; event 4 is now the oldest kept.
    w.advance(120);
    w.commit_something();
    assert_eq!(w.event_seqs(), vec![4]);
    assert_eq!((w.pruned_seq(), w.kept_since_ms()), (3, w.created_at(4)));
    w.advance(RETENTION_S);
    w.commit_something();
    assert_eq!(w.event_seqs(), Vec::<i64>::new());
    assert_eq!((w.pruned_seq(), w.kept_since_ms()), (4, 0));
}

#[test]
fn host_updates_are_dropped_once_confirmed_and_older_than_retention() {
    let w = world("ret-updates");
    w.user_says("one");
    w.user_says("two");
    let ids = w.update_ids();
    assert!(ids.len() >= 3, "{ids:?}");
    let last = *ids.last().unwrap();
    // Confirm all but the last.
    w.confirm_updates(last);
    w.advance(120);
    w.commit_something();
    let now = w.update_ids();
    assert_eq!(&now[..ids.len()], &ids[..], "confirmed but young: kept");
    w.advance(10 * RETENTION_S);
    w.commit_something();
    let now = w.update_ids();
    assert_eq!(now[0], last, "the first unconfirmed update is kept however old: {now:?}");
    let newest = *now.last().unwrap();
    w.confirm_updates(newest + 1);
    w.advance(RETENTION_S + 60);
    w.commit_something();
    let now = w.update_ids();
    assert!(now.iter().all(|&id| id > newest), "only what the last commit wrote is left: {now:?}");
}

#[test]
fn pruning_runs_at_most_once_a_minute() {
    let w = world("ret-minute");
    w.user_says("one");
    w.ack(2);
    w.advance(RETENTION_S + 60);
    w.commit_something(); // prunes (at T)
    assert_eq!(w.event_seqs(), Vec::<i64>::new());
    w.user_says("two"); // event 3, written at T
    w.ack(3);
    w.advance(RETENTION_S - 30);
    w.commit_something(); // prunes (at T + R - 30), event 3 is still young
    assert_eq!(w.event_seqs(), vec![3]);
    w.advance(40);
    w.commit_something(); // event 3 is old now, but the last prune was 40 s ago
    assert_eq!(w.event_seqs(), vec![3]);
    w.advance(20);
    w.commit_something(); // a minute since the last prune
    assert_eq!(w.event_seqs(), Vec::<i64>::new());
    assert_eq!(w.pruned_seq(), 3);
}

#[test]
fn a_version_1_database_is_migrated_and_pruned() {
    let w = world("ret-migrate");
    w.user_says("one");
    w.ack(2);
    let db = w.db.clone();
    let World { svc, _dir, .. } = w;
    drop(svc);
    // Make it what version 1 of the schema wrote.
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch(
            "DROP TABLE bot_commands; DROP TABLE message_keyboards; DROP TABLE callback_queries; DROP TABLE webhooks; DROP INDEX bots_handle_key; DROP INDEX bots_without_handle_key; ALTER TABLE bots DROP COLUMN handle_key; \
             DROP TABLE audit_log; DROP INDEX bots_by_created; DROP INDEX users_by_created; DROP INDEX chats_by_created; \
             ALTER TABLE messages DROP COLUMN created_update; ALTER TABLE bots DROP COLUMN pruned_seq; \
             ALTER TABLE bots DROP COLUMN kept_since_ms; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let svc = open(&db);
    let c = Connection::open(&db).unwrap();
    assert_eq!(c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 8);
    admin(&svc, SECRET, "advanceClock", json!({"seconds": RETENTION_S + 60}));
    let user: String = c.query_row("SELECT id FROM users", [], |r| r.get(0)).unwrap();
    let chat: String = c.query_row("SELECT id FROM chats", [], |r| r.get(0)).unwrap();
    admin(&svc, SECRET, "sendUserMessage", json!({"user_id": user, "chat_id": chat, "text": "after"}));
    let seqs: Vec<i64> = c
        .prepare("SELECT seq FROM bot_events ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(seqs, vec![3], "events 1-2 were acknowledged and old");
    drop(_dir);
}

/// The hello and events a new gateway session of the bot gets.
fn replay(w: &World) -> Vec<Value> {
    let upgrade = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        w.token
    );
    let mut s = w.svc.accept_gateway_session(upgrade.as_bytes(), w.svc.now_ms()).unwrap();
    std::iter::from_fn(|| s.poll_transmit())
        .map(|o| match o {
            botspace::GatewayOutput::Text(t) => serde_json::from_str(&t).unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn a_backlog_past_the_cap_drops_its_oldest_events_and_says_replay_truncated() {
    let w = world_with("cap-events", json!({"max_unacked_events": 3}));
    for i in 0..5 {
        w.user_says(&format!("m{i}"));
    }
    // Events 1..=6 (bot_started and five messages), nothing acknowledged.
    assert_eq!(w.event_seqs(), vec![1, 2, 3, 4, 5, 6]);
    // Pruning runs with a commit, at most once a minute.
    w.advance(61);
    w.user_says("m5");
    assert_eq!(w.event_seqs(), vec![5, 6, 7], "the three newest are kept");
    let got = replay(&w);
    assert_eq!((got[0]["replay_from"].clone(), got[0]["replay_truncated"].clone()), (json!(5), json!(true)));
    let seqs: Vec<i64> = got[1..].iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, vec![5, 6, 7]);
}

#[test]
fn unconfirmed_updates_past_the_cap_are_dropped_and_getupdates_says_so_first() {
    let w = world_with("cap-updates", json!({"max_unconfirmed_updates": 2}));
    for i in 0..4 {
        w.user_says(&format!("m{i}"));
    }
    w.advance(61);
    w.user_says("m4");
    let ids = w.update_ids();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let got = admin(&w.svc, SECRET, "getUpdates", json!({}));
    let dropped = ids[0] - 1;
    assert_eq!(got[0], json!({"update_id": dropped, "type": "updates_dropped", "data": {"dropped_through": dropped}}));
    let rest: Vec<i64> = got.as_array().unwrap()[1..].iter().map(|u| u["update_id"].as_i64().unwrap()).collect();
    assert_eq!(rest, ids);
    // Confirming past the gap ends the signal.
    let got = admin(&w.svc, SECRET, "getUpdates", json!({"offset": dropped + 1}));
    assert_eq!(got.as_array().unwrap().iter().map(|u| u["update_id"].as_i64().unwrap()).collect::<Vec<_>>(), ids);
}
