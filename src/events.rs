//! Event logs: who hears of a change. Every change appends, inside the
//! change's own transaction, one row to the service-wide `updates` stream
//! (the host's getUpdates) and one row per concerned bot to `bot_events`
//! (the gateway), numbered per bot so the sequence has no gaps. How the
//! rows are written is `store::events`'s.

use crate::error::ApiResult;
use crate::store::{self, events::Entry, Conn};

pub use crate::store::events::{commit_with_updates, flush_updates, prune, scrub_message_text, PendingUpdates, Prune};

/// Event types delivered to bots (docs/gateway.md) plus `chat_action`,
/// which only the host stream carries.
pub const MESSAGE_CREATED: &str = crate::EventKind::MessageCreated.as_str();
pub const MESSAGE_EDITED: &str = crate::EventKind::MessageEdited.as_str();
pub const MESSAGE_DELETED: &str = crate::EventKind::MessageDeleted.as_str();
pub const BOT_STARTED: &str = crate::EventKind::BotStarted.as_str();
pub const BLOCKED: &str = crate::EventKind::Blocked.as_str();
pub const UNBLOCKED: &str = crate::EventKind::Unblocked.as_str();
pub const MEMBER_ADDED: &str = crate::EventKind::MemberAdded.as_str();
pub const MEMBER_REMOVED: &str = crate::EventKind::MemberRemoved.as_str();
pub const CHAT_PERMISSIONS_CHANGED: &str = crate::EventKind::ChatPermissionsChanged.as_str();
pub const CHAT_DISSOLVED: &str = crate::EventKind::ChatDissolved.as_str();
pub const CHAT_ACTION: &str = crate::EventKind::ChatAction.as_str();

/// One change in a chat, as it enters the logs.
pub struct Event<'a> {
    pub chat_id: &'a str,
    pub kind: &'a str,
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
    pub fn new(chat_id: &'a str, kind: &'a str, data: &'a [u8]) -> Self {
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
    let entry = Entry { at_ms: now_ms, kind, data, message: message.map(|m| (chat_id, m)) };
    let mut bots = Vec::new();
    match members {
        Some(m) => bots.extend_from_slice(m),
        None => store::chats::current_bots(conn, chat_id, &mut bots)?,
    }
    let update = store::events::append_update(conn, entry, kind == MESSAGE_CREATED, pending)?;
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
pub fn append_update(conn: &Conn, now_ms: u64, kind: &str, data: &str, pending: &mut PendingUpdates) -> ApiResult<()> {
    store::events::append_update(conn, Entry { at_ms: now_ms, kind, data, message: None }, false, pending)?;
    Ok(())
}

/// The type of the update getUpdates puts first when unconfirmed updates
/// were dropped by the cap: `data.dropped_through` is the last dropped id.
pub const UPDATES_DROPPED: &str = crate::EventKind::UpdatesDropped.as_str();
