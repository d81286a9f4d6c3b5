//! Records as the rules see them and their JSON shapes. How they are
//! stored and loaded is the store's (`store::{bots,chats,messages}`).

use serde::Serialize;

pub use crate::protocol::{BotStatus, ChatKind, Tier};

impl Tier {
    /// Whether bots of this tier may edit and delete their messages (the
    /// identity's `capabilities.edit_delete_messages`; the gate is
    /// `src/rules/tier.rs`).
    pub fn may_edit_delete(self) -> bool {
        self != Tier::Free
    }
    /// Default `gateway_connection_limit` of the tier.
    pub fn default_connection_limit(self) -> u32 {
        match self {
            Tier::Free => 1,
            Tier::Standard => 4,
            Tier::Official => 16,
        }
    }
}

/// A bot as the service needs it on every request.
#[derive(Debug, Clone)]
pub struct Bot {
    pub id: String,
    pub display_name: String,
    pub handle: String,
    pub avatar_key: Option<String>,
    pub active: bool,
    pub verified: bool,
    pub official: bool,
    pub tier: Tier,
    pub connection_limit: u32,
    /// The getMe result, serialized once per change of the bot.
    pub identity_json: String,
}

#[derive(Serialize)]
struct Capabilities {
    edit_delete_messages: bool,
}

#[derive(Serialize)]
struct Identity<'a> {
    id: &'a str,
    is_bot: bool,
    display_name: &'a str,
    handle: &'a str,
    avatar_key: Option<&'a str>,
    status: BotStatus,
    verified: bool,
    official: bool,
    quota_tier: Tier,
    gateway_connection_limit: u32,
    capabilities: Capabilities,
}

impl Bot {
    /// The bot with its getMe result serialized from its fields.
    pub fn with_identity(mut self) -> Bot {
        self.identity_json = serde_json::to_string(&self.identity()).unwrap_or_default();
        self
    }

    fn identity(&self) -> Identity<'_> {
        Identity {
            id: &self.id,
            is_bot: true,
            display_name: &self.display_name,
            handle: &self.handle,
            avatar_key: self.avatar_key.as_deref(),
            status: if self.active { BotStatus::Active } else { BotStatus::Suspended },
            verified: self.verified,
            official: self.official,
            quota_tier: self.tier,
            gateway_connection_limit: self.connection_limit,
            capabilities: Capabilities { edit_delete_messages: self.tier.may_edit_delete() },
        }
    }
}

#[derive(Debug, Clone)]
pub struct Chat {
    pub id: String,
    pub kind: ChatKind,
    pub title: Option<String>,
    pub user_id: Option<String>,
    pub bot_id: Option<String>,
    pub started: bool,
    pub blocked_by_user: bool,
    pub blocked_by_bot: bool,
    pub bots_can_send: bool,
    pub dissolved: bool,
}

/// `{"id":..,"type":..}` as carried in messages and events.
#[derive(Serialize, Clone, Copy)]
pub struct ChatRef<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: ChatKind,
}

impl Chat {
    /// For the rules' unit tests: a started chat nobody blocked, open to
    /// bots, not dissolved, with no title or parties.
    #[cfg(test)]
    pub(crate) fn open_for_tests(id: &str, kind: ChatKind) -> Chat {
        Chat {
            id: id.into(),
            kind,
            title: None,
            user_id: None,
            bot_id: None,
            started: true,
            blocked_by_user: false,
            blocked_by_bot: false,
            bots_can_send: true,
            dissolved: false,
        }
    }

    pub fn reference(&self) -> ChatRef<'_> {
        ChatRef { id: &self.id, kind: self.kind }
    }

    /// The chat as the host API returns it, with its current members as
    /// (id, is_bot).
    pub fn to_json(&self, members: Vec<(String, bool)>) -> serde_json::Value {
        let members: Vec<serde_json::Value> =
            members.into_iter().map(|(id, is_bot)| serde_json::json!({"id": id, "is_bot": is_bot})).collect();
        match self.kind {
            ChatKind::Private => serde_json::json!({
                "id": self.id, "type": ChatKind::Private, "user_id": self.user_id, "bot_id": self.bot_id,
                "started": self.started, "blocked_by_user": self.blocked_by_user,
                "blocked_by_bot": self.blocked_by_bot, "members": members,
            }),
            ChatKind::Group => serde_json::json!({
                "id": self.id, "type": ChatKind::Group, "title": self.title,
                "bots_can_send": self.bots_can_send, "dissolved": self.dissolved, "members": members,
            }),
        }
    }
}

/// What [`store::bots::by_token_hash_with_chat`] read with the bot: the named chat
/// (`None` when there is none) with the bot's membership, and the chat's
/// current bots.
#[derive(Debug)]
pub struct ChatPrefetch {
    pub chat_id: String,
    pub chat: Option<(Chat, Option<bool>)>,
    /// `chat` was handed out (it is read once per request).
    pub used: bool,
    pub bots: Vec<String>,
}

#[derive(Serialize, Clone, Copy)]
pub struct Sender<'a> {
    pub id: &'a str,
    pub is_bot: bool,
}

/// A message as bots and the host see it.
#[derive(Serialize)]
pub struct MessageJson<'a> {
    pub message_id: String,
    pub chat: ChatRef<'a>,
    pub date: i64,
    pub text: &'a str,
    /// The command the text starts with, if any (read by
    /// `rules::commands::command_of`; see `methods::messages::message_json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Command<'a>>,
    pub from: Sender<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to_message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_date: Option<i64>,
    /// The message's current keyboard, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<serde_json::Value>,
}

/// The command a message's text starts with: `"/name"` or
/// `"/name@handle"` (the rule is `rules::commands::command_of`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command<'a> {
    pub name: &'a str,
    /// The text after the command and one space; `""` when none.
    pub args: &'a str,
    /// The handle after `@` as written (it matches a bot's
    /// case-insensitively), `None` without one.
    pub bot_handle: Option<&'a str>,
}

/// A stored keyboard's JSON as a value of the message (a keyboard the
/// store holds was checked when it was set).
pub fn keyboard_value(k: Option<&str>) -> Option<serde_json::Value> {
    k.and_then(|k| serde_json::from_slice(k.as_bytes()).ok())
}

#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub message_id: i64,
    pub sender_id: String,
    pub sender_is_bot: bool,
    pub text: Option<String>,
    pub date: i64,
    pub edit_date: Option<i64>,
    pub reply_to: Option<i64>,
    pub deleted: bool,
    /// Its current keyboard's JSON (read separately from the row, by the
    /// methods that show it).
    pub reply_markup: Option<String>,
}

impl StoredMessage {
    /// The message's JSON without its command (the methods add it, see
    /// `methods::messages::message_json`).
    pub fn json<'a>(&'a self, chat: ChatRef<'a>) -> MessageJson<'a> {
        let text = self.text.as_deref().unwrap_or("");
        MessageJson {
            message_id: self.message_id.to_string(),
            chat,
            date: self.date,
            text,
            command: None,
            from: Sender { id: &self.sender_id, is_bot: self.sender_is_bot },
            reply_to_message_id: self.reply_to.map(|m| m.to_string()),
            edit_date: self.edit_date,
            reply_markup: keyboard_value(self.reply_markup.as_deref()),
        }
    }
}
