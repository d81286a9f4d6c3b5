//! `getUpdates`, long polling (docs/delivery.md): the bot reads the same
//! per-bot log the gateway replays, and its `offset` moves the same durable
//! cursor (`bots.acked_seq`) a gateway `ack` moves. This module parses the
//! request, writes the offset's acknowledgement and reads the log; waiting
//! (a `timeout` with nothing to return) is the service's parking registry
//! (`service/parked.rs`), which calls [`read`] again when woken.

use super::params::{self, Body};
use crate::error::{ApiError, ApiResult};
use crate::events::{push_event, read_from};
use crate::store::gateway as log;
use crate::store::{Conn, StoreResult};
use crate::EventKind;
use serde_json::Value;

/// Largest `limit`, and the default.
pub const MAX_LIMIT: u64 = 100;
/// Largest `timeout`, seconds.
pub const MAX_TIMEOUT_S: u64 = 50;
/// The `type` of the entry that says events were dropped before the first
/// one returned (kept past `event_retention_s` unacknowledged, or past
/// `max_unacked_events`).
pub const EVENTS_DROPPED: &str = "events_dropped";

/// The event types a bot receives (docs/gateway.md), in `EventKind` order:
/// a bit each in [`Poll::allowed`]. `chat_action` and `updates_dropped`
/// belong to the host's stream only.
pub const BOT_EVENT_KINDS: [EventKind; 10] = [
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
];

pub use crate::events::Poll;

const ALL_KINDS: u16 = (1 << BOT_EVENT_KINDS.len()) - 1;

fn kind_bit(kind: &str) -> Option<u16> {
    BOT_EVENT_KINDS.iter().position(|k| k.as_str() == kind).map(|i| 1 << i)
}

/// The fields, in the order the table of docs/api.md lists them; the first
/// bad one is the error.
pub fn parse(b: &Body) -> ApiResult<Poll> {
    let offset = params::opt_uint(b, "offset", i64::MAX as u64)
        .map_err(|_| ApiError::invalid_field("offset", "must be an integer, 0 or more"))?
        .map(|v| v as i64);
    let limit = match params::opt_uint(b, "limit", MAX_LIMIT) {
        Ok(Some(0)) | Err(_) => {
            return Err(ApiError::invalid_field("limit", &format!("must be an integer from 1 to {MAX_LIMIT}")))
        }
        Ok(v) => v.unwrap_or(MAX_LIMIT) as u8,
    };
    let timeout_s = params::opt_uint(b, "timeout", MAX_TIMEOUT_S)?.unwrap_or(0) as u8;
    let allowed = match b.get("allowed_updates") {
        None | Some(Value::Null) => ALL_KINDS,
        Some(Value::Array(kinds)) => {
            let mut bits = 0;
            for k in kinds {
                let bit = k.as_str().and_then(kind_bit).ok_or_else(|| {
                    ApiError::invalid_field(
                        "allowed_updates",
                        "must be an array of event types, such as \"message_created\"",
                    )
                })?;
                bits |= bit;
            }
            if bits == 0 {
                ALL_KINDS
            } else {
                bits
            }
        }
        Some(_) => {
            return Err(ApiError::invalid_field(
                "allowed_updates",
                "must be an array of event types, such as \"message_created\"",
            ))
        }
    };
    Ok(Poll { offset, limit, timeout_s, allowed })
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
        push_event(&mut json, "{\"update_id\":", through, EVENTS_DROPPED, &data);
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
        params::parse_body(s.as_bytes()).unwrap()
    }

    fn field_of(s: &str) -> (String, String) {
        let e = parse(&body(s)).unwrap_err();
        let field = e.parameters.as_ref().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("");
        (e.code.as_str().to_string(), field.to_string())
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
