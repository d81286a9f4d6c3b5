//! `getUpdates`, long polling (docs/delivery.md): the bot reads the same
//! per-bot log the gateway replays, and its `offset` moves the same durable
//! cursor (`bots.acked_seq`) a gateway `ack` moves. This module parses the
//! request, writes the offset's acknowledgement and reads the log; waiting
//! (a `timeout` with nothing to return) is the service's parking registry
//! (`service/parked.rs`), which calls [`read`] again when woken.

use super::requests::{self, body, Body, Bounded, Bounds, Field, FromField, Uint};
use crate::error::ApiResult;
use crate::events::{push_event, read_from};
use crate::protocol::{EventKind, GapMarker};
use crate::store::gateway as log;
use crate::store::{Conn, StoreResult};
use serde_json::Value;

/// Largest `limit`, and the default.
pub const MAX_LIMIT: u64 = 100;
/// Largest `timeout`, seconds.
pub const MAX_TIMEOUT_S: u64 = 50;

/// The event types a bot receives (docs/gateway.md), in `EventKind` order:
/// a bit each in [`Poll::allowed`]. `chat_action` and `updates_dropped`
/// belong to the host's stream only.
pub const BOT_EVENT_KINDS: [EventKind; 11] = [
    EventKind::MessageCreated,
    EventKind::MessageEdited,
    EventKind::MessageDeleted,
    EventKind::BotStarted,
    EventKind::Blocked,
    EventKind::Unblocked,
    EventKind::MemberAdded,
    EventKind::MemberRemoved,
    EventKind::ChatPermissionsChanged,
    EventKind::ChatDissolved,
    EventKind::CallbackQuery,
];

pub use crate::events::Poll;

const ALL_KINDS: u16 = (1 << BOT_EVENT_KINDS.len()) - 1;

fn kind_bit(kind: &str) -> Option<u16> {
    BOT_EVENT_KINDS.iter().position(|k| k.as_str() == kind).map(|i| 1 << i)
}

struct Offset;
impl Bounds for Offset {
    const MIN: u64 = 0;
    const MAX: u64 = i64::MAX as u64;
    const WHY: &'static str = "must be an integer, 0 or more";
}

struct Limit;
impl Bounds for Limit {
    const MIN: u64 = 1;
    const MAX: u64 = MAX_LIMIT;
    const WHY: &'static str = "must be an integer from 1 to 100";
}

/// `allowed_updates`: event types as bits of [`Poll::allowed`]; an empty
/// list is every type.
struct Kinds(u16);

const KINDS_WHY: &str = "must be an array of event types, such as \"message_created\"";

impl<'a> FromField<'a> for Kinds {
    fn from_field(f: Field<'a>) -> ApiResult<Self> {
        let Value::Array(items) = f.present()? else { return Err(f.invalid(KINDS_WHY)) };
        let mut bits = 0;
        for item in items {
            bits |= item.as_str().and_then(kind_bit).ok_or_else(|| f.invalid(KINDS_WHY))?;
        }
        Ok(Kinds(if bits == 0 { ALL_KINDS } else { bits }))
    }
}

body! {
    /// getUpdates' body: the fields in the order the table of docs/api.md
    /// lists them; the first bad one is the error.
    struct GetUpdates {
        offset: Option<Bounded<Offset>>,
        limit: Option<Bounded<Limit>>,
        timeout: Option<Uint<MAX_TIMEOUT_S>>,
        allowed_updates: Option<Kinds>,
    }
}

/// Reads getUpdates' body.
pub fn parse(b: &Body) -> ApiResult<Poll> {
    let GetUpdates { offset, limit, timeout, allowed_updates } = requests::parse(b)?;
    Ok(Poll {
        offset: offset.map(|o| o.0 as i64),
        limit: limit.map_or(MAX_LIMIT, |l| l.0) as u8,
        timeout_s: timeout.map_or(0, |t| t.0) as u8,
        allowed: allowed_updates.map_or(ALL_KINDS, |k| k.0),
    })
}

/// Writes what `offset` acknowledges: every event below it, up to the last
/// one the bot was ever given (an offset past the end acknowledges all).
/// Never moves the cursor back. The same store call as the gateway's ack.
pub fn acknowledge(conn: &Conn, bot_id: &str, offset: Option<i64>) -> StoreResult<()> {
    let Some(offset) = offset.filter(|o| *o > 0) else { return Ok(()) };
    let b = log::log_bounds(conn, bot_id)?;
    let seq = (offset - 1).min(b.last);
    if seq > b.acked {
        log::write_ack(conn, bot_id, seq)?;
    }
    Ok(())
}

/// What one read found: the result array's JSON and how many entries it
/// holds (0: nothing to return, the poll may wait).
pub struct Read {
    pub json: String,
    pub count: usize,
}

/// Reads the bot's log after its cursor (the durable ack, or `offset - 1`
/// when that is further), as the result array: first the gap entry when
/// events after the cursor were dropped, then at most `limit` entries in
/// all, of the allowed types, in seq order.
pub fn read(conn: &Conn, bot_id: &str, poll: &Poll) -> StoreResult<Read> {
    let b = log::log_bounds(conn, bot_id)?;
    let after = b.acked.max(poll.offset.map_or(0, |o| o - 1));
    let (from, truncated) = read_from(after, b.last, b.oldest);
    let limit = usize::from(poll.limit);
    let mut json = String::from("[");
    let mut count = 0;
    if truncated {
        let through = from - 1;
        let data = format!("{{\"dropped_through\":{through}}}");
        // Events were dropped before the first one returned (kept past
        // `event_retention_s` unacknowledged, or past `max_unacked_events`).
        push_event(&mut json, "{\"update_id\":", through, GapMarker::EventsDropped.as_str(), &data);
        count += 1;
    }
    if count < limit {
        // Rows of types not asked for are skipped here, not by the store:
        // the scan ends once `limit` entries are held, so memory stays
        // bounded by the limit whatever the log holds.
        log::read_events_after(conn, bot_id, from - 1, usize::MAX >> 1, |seq, kind, data| {
            if kind_bit(kind).is_some_and(|bit| poll.allowed & bit != 0) {
                if count > 0 {
                    json.push(',');
                }
                push_event(&mut json, "{\"update_id\":", seq, kind, data);
                count += 1;
            }
            count < limit
        })?;
    }
    json.push(']');
    Ok(Read { json, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Body {
        super::super::params::parse_body(s.as_bytes()).unwrap()
    }

    fn field_of(s: &str) -> (String, String) {
        let e = parse(&body(s)).unwrap_err();
        let field = e.parameters.as_ref().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("");
        (e.code.as_str().to_string(), field.to_string())
    }

    #[test]
    fn the_limit_refusal_names_the_limit() {
        assert_eq!(Limit::WHY, format!("must be an integer from 1 to {MAX_LIMIT}"));
    }

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(parse(&body("{}")).unwrap(), Poll { offset: None, limit: 100, timeout_s: 0, allowed: ALL_KINDS });
        let p =
            parse(&body(r#"{"offset":7,"limit":1,"timeout":50,"allowed_updates":["blocked","bot_started"]}"#)).unwrap();
        assert_eq!(p, Poll { offset: Some(7), limit: 1, timeout_s: 50, allowed: 0b11000 });
        assert_eq!(parse(&body(r#"{"allowed_updates":[]}"#)).unwrap().allowed, ALL_KINDS);
        for (b, field) in [
            (r#"{"offset":-1}"#, "offset"),
            (r#"{"offset":"1"}"#, "offset"),
            (r#"{"limit":0}"#, "limit"),
            (r#"{"limit":101}"#, "limit"),
            (r#"{"limit":1.5}"#, "limit"),
            (r#"{"timeout":51}"#, "timeout"),
            (r#"{"allowed_updates":"blocked"}"#, "allowed_updates"),
            (r#"{"allowed_updates":["chat_action"]}"#, "allowed_updates"),
            (r#"{"allowed_updates":["events_dropped"]}"#, "allowed_updates"),
            (r#"{"allowed_updates":[1]}"#, "allowed_updates"),
            (r#"{"offset":-1,"limit":0}"#, "offset"),
        ] {
            assert_eq!(field_of(b), ("invalid_field".to_string(), field.to_string()), "{b}");
        }
    }
}
