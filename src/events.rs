//! Event logs: who hears of a change. Every change appends, inside the
//! change's own transaction, one row to the service-wide `updates` stream
//! (the host's getUpdates) and one row per concerned bot to `bot_events`
//! (the gateway), numbered per bot so the sequence has no gaps. How the
//! rows are written is `store::events`'s.

use crate::error::ApiResult;
use crate::protocol::EventKind;
use crate::store::{self, events::Entry, Conn};

pub use crate::store::events::{commit_with_updates, flush_updates, prune, scrub_message_text, PendingUpdates, Prune};

/// One change in a chat, as it enters the logs.
pub struct Event<'a> {
    pub chat_id: &'a str,
    pub kind: EventKind,
    /// The JSON payload.
    pub data: &'a [u8],
    /// A bot not to tell (the sender of its own message).
    pub exclude: Option<&'a str>,
    /// A bot to tell although it is no longer a member (it was just removed).
    pub extra: Option<&'a str>,
    /// The message the payload carries, if any, so its text can be scrubbed.
    pub message: Option<i64>,
}

impl<'a> Event<'a> {
    pub fn new(chat_id: &'a str, kind: EventKind, data: &'a [u8]) -> Self {
        Event { chat_id, kind, data, exclude: None, extra: None, message: None }
    }
}

/// Appends an event to the host stream and to every current bot member of
/// the chat, minus `exclude`, plus `extra`. Bots that got an event are
/// pushed to `woken`; host-stream rows may wait in `pending`. `members` is
/// the chat's current bots when the caller already read them. Returns the
/// host-stream update's id when the message row must keep it (see
/// `store::events::append_update`).
pub fn emit(
    conn: &Conn,
    now_ms: u64,
    ev: Event<'_>,
    members: Option<&[String]>,
    woken: &mut Vec<String>,
    pending: &mut PendingUpdates,
) -> ApiResult<Option<i64>> {
    let Event { chat_id, kind, data, exclude, extra, message } = ev;
    let data = std::str::from_utf8(data).unwrap_or("{}");
    let entry = Entry { at_ms: now_ms, kind: kind.as_str(), data, message: message.map(|m| (chat_id, m)) };
    let mut bots = Vec::new();
    match members {
        Some(m) => bots.extend_from_slice(m),
        None => store::chats::current_bots(conn, chat_id, &mut bots)?,
    }
    let update = store::events::append_update(conn, entry, kind == EventKind::MessageCreated, pending)?;
    if let Some(e) = extra {
        if !bots.iter().any(|b| b == e) {
            bots.push(e.to_string());
        }
    }
    bots.retain(|b| Some(b.as_str()) != exclude);
    store::events::append_to_bots(conn, &bots, entry)?;
    woken.append(&mut bots);
    Ok(update)
}

/// Appends to the service-wide stream only (an event no bot hears).
pub fn append_update(
    conn: &Conn,
    now_ms: u64,
    kind: EventKind,
    data: &str,
    pending: &mut PendingUpdates,
) -> ApiResult<()> {
    store::events::append_update(
        conn,
        Entry { at_ms: now_ms, kind: kind.as_str(), data, message: None },
        false,
        pending,
    )?;
    Ok(())
}

/// Appends one event as a JSON object opened by `head` (which names the
/// seq's key): the gateway's event frame and getUpdates' update are this
/// one writer, so `type` and `data` are the same bytes in both.
pub fn push_event(out: &mut String, head: &str, seq: i64, kind: &str, data: &str) {
    out.push_str(head);
    out.push_str(itoa::Buffer::new().format(seq));
    out.push_str(",\"type\":\"");
    out.push_str(kind);
    out.push_str("\",\"data\":");
    out.push_str(data);
    out.push('}');
}

/// Where reading a bot's log resumes after `start` (clamped to `last`, the
/// last event ever written), given the oldest event still kept: the first
/// seq to read, and whether events after `start` were dropped (then it is
/// the oldest kept one). The gateway's replay and getUpdates share it.
pub fn read_from(start: i64, last: i64, oldest: Option<i64>) -> (i64, bool) {
    let start = start.min(last);
    // Events after `start` that are no longer kept: the oldest kept one is
    // past start+1, or none is kept although some were written.
    let first_kept = oldest.unwrap_or(last + 1);
    let truncated = first_kept > start + 1 && last > start;
    (if truncated { first_kept } else { start + 1 }, truncated)
}

/// A parsed getUpdates request (`methods::updates`): what a parked poll
/// keeps (24 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// Events below it are acknowledged; `None` when not given.
    pub offset: Option<i64>,
    /// 1 to 100.
    pub limit: u8,
    /// 0 to 50 seconds.
    pub timeout_s: u8,
    /// A bit per entry of `methods::updates::BOT_EVENT_KINDS`; all set when
    /// not given or given empty (as Telegram reads an empty list).
    pub allowed: u16,
}
