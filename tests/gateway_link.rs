//! `GatewayLink`: a gateway connection with its unsent output and its
//! closing rules, as both servers drive it. Exact frames, states and
//! deadlines on both clocks: the host passes its own clock (one that only
//! these calls move, for the socket), and the link reads the service's
//! manual clock for the session.

mod common;
#[path = "support/ws_frame.rs"]
mod ws_frame;

use botspace::connection::http::ConnectionState;
use botspace::connection::limits;
use botspace::gateway::{GatewayLink, OUTPUT_BUDGET};
use botspace::{ClockKind, CloseCode, Config, Service};
use common::admin;
use serde_json::{json, Value};
use std::sync::Arc;

const SECRET: &str = "gateway-link-secret-0001";

struct World {
    svc: Arc<Service>,
    user: String,
    bot: String,
    token: String,
    chat: String,
}

fn world() -> World {
    world_on(ClockKind::Manual)
}

fn world_on(clock: ClockKind) -> World {
    let svc = Arc::new(
        Service::open(Config::default().with(|c| {
            c.admin_secret = SECRET.into();
            c.clock = clock;
            c.database = common::test_database();
        }))
        .unwrap(),
    );
    let user = admin(&svc, SECRET, "createUser", json!({"display_name": "Ann"}))["id"].as_str().unwrap().to_string();
    let b =
        admin(&svc, SECRET, "createBot", json!({"display_name": "Echo", "handle": "echo", "quota_tier": "official"}));
    let bot = b["bot"]["id"].as_str().unwrap().to_string();
    let token = b["token"].as_str().unwrap().to_string();
    let chat =
        admin(&svc, SECRET, "startBot", json!({"user_id": user, "bot_id": bot}))["id"].as_str().unwrap().to_string();
    World { svc, user, bot, token, chat }
}

fn link(w: &World) -> GatewayLink {
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        w.token
    );
    let acc = w.svc.accept_gateway(req.as_bytes(), w.svc.now_ms());
    assert!(acc.response.starts_with(b"HTTP/1.1 101 "), "{}", String::from_utf8_lossy(&acc.response));
    GatewayLink::new(acc.connection.unwrap(), Vec::new())
}

/// A masked client frame.
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [1, 2, 3, 4];
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// Server frames as (opcode, payload), with the tests' one frame reader.
fn frames(b: &[u8]) -> Vec<(u8, Vec<u8>)> {
    ws_frame::server_frames(b)
}

/// Bytes of the frame at the start of `b`, header and payload.
fn frame_len(b: &[u8]) -> usize {
    ws_frame::server_frame(b).expect("a whole frame").len
}

fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason.as_bytes());
    p
}

fn texts(b: &[u8]) -> Vec<Value> {
    frames(b).into_iter().map(|(op, p)| (assert_eq!(op, 1), serde_json::from_slice(&p).unwrap()).1).collect()
}

/// `n` user messages of 1 000 bytes each, committed in one batch.
fn backlog(w: &World, n: usize) {
    let body = "x".repeat(1000);
    let reqs: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            common::admin_request(
                SECRET,
                "sendUserMessage",
                json!({"user_id": w.user, "chat_id": w.chat, "text": body}),
            )
        })
        .collect();
    let refs: Vec<&[u8]> = reqs.iter().map(|r| r.as_slice()).collect();
    assert!(common::batch(&w.svc, &refs).iter().all(|o| o.starts_with(b"HTTP/1.1 200 ")));
}

#[test]
fn a_bot_that_reads_nothing_gets_4008_right_after_the_frame_being_written_then_the_link_lingers_and_closes() {
    let w = world();
    backlog(&w, 600);
    let mut l = link(&w);
    l.handle_timeout(1_000);
    assert_eq!(l.state(), ConnectionState::Open);
    let held = l.unsent();
    assert!((OUTPUT_BUDGET..OUTPUT_BUDGET + 2048).contains(&held), "{held}");
    // The socket takes 10 bytes: the hello frame is begun.
    let hello = frame_len(l.poll_transmit());
    let hello_rest = l.poll_transmit()[10..hello].to_vec();
    l.sent(10, 1_000);
    assert!(!l.connection().unwrap().wants_transmit(), "still at the budget");
    // The bot heartbeats (it is alive), and stays at the budget for two
    // heartbeat intervals and one millisecond: 4008.
    admin(&w.svc, SECRET, "advanceClock", json!({"seconds": 40}));
    l.handle_input(&client_frame(0x1, br#"{"op":"heartbeat"}"#), 1_500);
    assert_eq!(l.state(), ConnectionState::Open);
    admin(&w.svc, SECRET, "advanceClock", json!({"seconds": 42.501}));
    l.handle_timeout(2_000);
    assert_eq!(l.state(), ConnectionState::Closing);
    assert_eq!(l.close_reason(), Some((4008, CloseCode::SlowConsumer)));
    assert_eq!(w.svc.gateway_connections(&w.bot), 0, "the slot is free at once");
    // The rest of the hello frame, then the close: the frames not begun are gone.
    assert_eq!(&l.poll_transmit()[..hello - 10], &hello_rest[..]);
    let f = frames(&l.poll_transmit()[hello - 10..]);
    assert_eq!(f, vec![(0x8, close_payload(4008, "slow_consumer"))]);
    // The close a server forces gets SLOW_CONSUMER_DROP_MS of host time.
    assert_eq!(l.poll_timeout(), Some(2_000 + limits::SLOW_CONSUMER_DROP_MS));
    assert!(l.wants_read(), "input is read and discarded");
    let n = l.poll_transmit().len();
    l.sent(n, 2_100);
    assert_eq!(l.state(), ConnectionState::Lingering);
    assert_eq!(l.poll_transmit(), b"");
    l.handle_input(&[0u8; 1000], 2_200);
    assert_eq!(l.state(), ConnectionState::Lingering);
    l.handle_timeout(2_000 + limits::SLOW_CONSUMER_DROP_MS - 1);
    assert_eq!(l.state(), ConnectionState::Lingering);
    l.handle_timeout(2_000 + limits::SLOW_CONSUMER_DROP_MS);
    assert_eq!(l.state(), ConnectionState::Closed);
    assert_eq!(l.poll_timeout(), None);
    assert!(!l.wants_read());
}

#[test]
fn a_stop_closes_with_1001_next_and_a_bot_that_closed_its_side_is_not_lingered_on() {
    let w = world();
    backlog(&w, 3);
    let mut l = link(&w);
    l.handle_timeout(0);
    assert_eq!(texts(l.poll_transmit()).len(), 5, "hello, bot_started and three messages");
    // Nothing written yet: the close goes first, every frame is dropped.
    assert!(l.close(CloseCode::ServerShutdown, 50));
    assert!(!l.close(CloseCode::ServerShutdown, 50), "once");
    assert_eq!(frames(l.poll_transmit()), vec![(0x8, close_payload(1001, "server_shutdown"))]);
    assert_eq!(l.close_reason(), Some((1001, CloseCode::ServerShutdown)));
    assert_eq!(w.svc.gateway_connections(&w.bot), 0);
    assert_eq!(l.poll_timeout(), Some(50 + limits::SLOW_CONSUMER_DROP_MS));
    // The bot closes its side before it read: the close still goes, then
    // the link closes without lingering.
    l.handle_eof(60);
    assert_eq!(l.state(), ConnectionState::Closing);
    assert!(!l.wants_read());
    let n = l.poll_transmit().len();
    l.sent(n, 70);
    assert_eq!(l.state(), ConnectionState::Closed);
}

#[test]
fn the_bots_close_is_answered_then_the_link_lingers_up_to_its_bytes_and_an_eof_ends_it() {
    let w = world();
    let mut l = link(&w);
    l.handle_timeout(0);
    let n = l.poll_transmit().len();
    l.sent(n, 0);
    // The bot acks the first event, then closes with 1000.
    l.handle_input(&client_frame(0x1, br#"{"op":"ack","seq":1}"#), 5);
    l.handle_input(&client_frame(0x8, &close_payload(1000, "")), 10);
    assert_eq!(l.close_reason(), Some((1000, CloseCode::ClosedByBot)));
    assert_eq!(l.state(), ConnectionState::Closing, "tungstenite's answer to the close goes out");
    assert_eq!(frames(l.poll_transmit()), vec![(0x8, 1000u16.to_be_bytes().to_vec())]);
    assert_eq!(w.svc.gateway_connections(&w.bot), 0);
    assert_eq!(l.poll_timeout(), Some(10 + limits::LINGER_MS));
    let n = l.poll_transmit().len();
    l.sent(n, 20);
    assert_eq!(l.state(), ConnectionState::Lingering);
    l.handle_input(&vec![0u8; limits::LINGER_BYTES - 1], 30);
    assert_eq!(l.state(), ConnectionState::Lingering);
    l.handle_input(&[0u8], 40);
    assert_eq!(l.state(), ConnectionState::Closed, "at LINGER_BYTES");

    // Another session, whose bot goes away after its close: EOF ends the linger.
    let mut l = link(&w);
    l.handle_timeout(0);
    let t = texts(l.poll_transmit());
    assert_eq!(t[0]["replay_from"], 2, "the ack before the close was written: {t:?}");
    let n = l.poll_transmit().len();
    l.sent(n, 0);
    l.handle_input(&client_frame(0x8, &close_payload(1000, "")), 10);
    let n = l.poll_transmit().len();
    l.sent(n, 10);
    assert_eq!(l.state(), ConnectionState::Lingering);
    l.handle_eof(11);
    assert_eq!(l.state(), ConnectionState::Closed);
}

#[test]
fn an_eof_while_open_ends_the_session_and_the_rest_goes_out_without_a_linger() {
    let w = world();
    let mut l = link(&w);
    l.handle_timeout(0);
    assert_eq!(texts(l.poll_transmit()).len(), 2);
    l.handle_eof(5);
    assert_eq!(w.svc.gateway_connections(&w.bot), 0);
    assert_eq!(l.state(), ConnectionState::Closing);
    assert_eq!(l.poll_timeout(), Some(5 + limits::LINGER_MS));
    l.handle_timeout(5 + limits::LINGER_MS);
    assert_eq!(l.state(), ConnectionState::Closed, "its time is up, sent or not");
    assert_eq!(l.poll_transmit(), b"");
    assert_eq!(l.unsent(), 0);
}

#[test]
fn while_open_the_link_asks_to_be_looked_at_by_its_sessions_deadline_within_the_tick() {
    let w = world();
    let mut l = link(&w);
    l.handle_timeout(100);
    // The heartbeat deadline is 82.5 s away; under the manual clock the
    // link is looked at every tick.
    assert_eq!(l.poll_timeout(), Some(100 + limits::TICK_MS));
    // Under the system clock: the session's deadline, at most a second away.
    let ws = world_on(ClockKind::System);
    let req = format!(
        "GET /bot/gateway HTTP/1.1\r\nHost: t\r\nAuthorization: Bot {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        ws.token
    );
    let acc = ws.svc.accept_gateway(req.as_bytes(), ws.svc.now_ms());
    let mut sys = GatewayLink::new(acc.connection.unwrap(), Vec::new());
    sys.handle_timeout(100);
    assert_eq!(sys.poll_timeout(), Some(100 + limits::GATEWAY_LOOK_MS));
    // A session that held output back at the budget, once the socket took
    // it: look now.
    backlog(&w, 600);
    let mut b = link(&w);
    b.handle_timeout(0);
    assert!(b.unsent() >= OUTPUT_BUDGET);
    assert_eq!(b.poll_timeout(), Some(limits::TICK_MS));
    let n = b.poll_transmit().len();
    b.sent(n, 7);
    assert_eq!(b.poll_timeout(), Some(7), "room again: run it now");
    b.handle_timeout(7);
    assert!(b.unsent() >= OUTPUT_BUDGET, "the next part of the backlog");
}
