//! Records as stored, their JSON shapes, and the queries that load them.
//! Every query is a cached prepared statement on an indexed key.

use crate::error::{ApiError, ApiResult};
use crate::params;
use crate::store::{Conn, Dialect, Optional, Row, StoreResult, Val};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Free,
    Standard,
    Official,
}

impl Tier {
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "free" => Some(Tier::Free),
            "standard" => Some(Tier::Standard),
            "official" => Some(Tier::Official),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Standard => "standard",
            Tier::Official => "official",
        }
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
    status: &'a str,
    verified: bool,
    official: bool,
    quota_tier: &'a str,
    gateway_connection_limit: u32,
    capabilities: Capabilities,
}

pub const BOT_COLUMNS: &str =
    "id, display_name, handle, avatar_key, status, verified, official, quota_tier, gateway_connection_limit";

impl Bot {
    pub fn from_row(r: &Row<'_>) -> StoreResult<Bot> {
        Bot::from_row_at(r, 0)
    }

    /// A bot from [`BOT_COLUMNS`] starting at column `at`.
    fn from_row_at(r: &Row<'_>, at: usize) -> StoreResult<Bot> {
        let tier_s: String = r.get(at + 7)?;
        let tier = Tier::parse(&tier_s).unwrap_or(Tier::Free);
        let limit: Option<u32> = r.get(at + 8)?;
        let status: String = r.get(at + 4)?;
        let mut bot = Bot {
            id: r.get(at)?,
            display_name: r.get(at + 1)?,
            handle: r.get(at + 2)?,
            avatar_key: r.get(at + 3)?,
            active: status == "active",
            verified: r.get(at + 5)?,
            official: r.get(at + 6)?,
            tier,
            connection_limit: limit.unwrap_or(tier.default_connection_limit()),
            identity_json: String::new(),
        };
        bot.identity_json = serde_json::to_string(&bot.identity()).unwrap_or_default();
        Ok(bot)
    }

    fn identity(&self) -> Identity<'_> {
        Identity {
            id: &self.id,
            is_bot: true,
            display_name: &self.display_name,
            handle: &self.handle,
            avatar_key: self.avatar_key.as_deref(),
            status: if self.active { "active" } else { "suspended" },
            verified: self.verified,
            official: self.official,
            quota_tier: self.tier.as_str(),
            gateway_connection_limit: self.connection_limit,
            capabilities: Capabilities { edit_delete_messages: self.tier != Tier::Free },
        }
    }

    pub fn by_token_hash(conn: &Conn, hash: &[u8; 32]) -> StoreResult<Option<Bot>> {
        conn.prepare_cached(&format!("SELECT {BOT_COLUMNS} FROM bots WHERE token_hash = ?1"))?
            .query_row([&hash[..]], Bot::from_row)
            .optional()
    }

    /// On a database server: the bot by token hash and, in the same round
    /// trip, the chat a bot method names with the bot's membership and the
    /// chat's current bots (for the events the method may emit). A bot
    /// method changes no membership, so the list holds for the request.
    pub fn by_token_hash_with_chat(
        conn: &Conn,
        hash: &[u8; 32],
        chat_id: &str,
    ) -> StoreResult<Option<(Bot, ChatPrefetch)>> {
        conn.prepare_cached(BOT_WITH_CHAT)?
            .query_row(params![&hash[..], chat_id], |r| bot_with_chat(r, chat_id))
            .optional()
    }

    /// [`Bot::by_token_hash_with_chat`] for each (token hash, chat id), in
    /// one round trip: what a group of bot requests needs before it runs.
    pub fn by_token_hashes_with_chats(
        conn: &Conn,
        keys: &[([u8; 32], &str)],
    ) -> StoreResult<Vec<Option<(Bot, ChatPrefetch)>>> {
        let runs: Vec<Vec<Val<'_>>> = keys.iter().map(|(h, c)| vec![Val::Blob(&h[..]), Val::Text(c)]).collect();
        let mut out: Vec<Option<(Bot, ChatPrefetch)>> = keys.iter().map(|_| None).collect();
        conn.query_pipelined(BOT_WITH_CHAT, &runs, |i, r| {
            out[i] = Some(bot_with_chat(r, keys[i].1)?);
            Ok(())
        })?;
        Ok(out)
    }

    pub fn by_id(conn: &Conn, id: &str) -> StoreResult<Option<Bot>> {
        conn.prepare_cached(&format!("SELECT {BOT_COLUMNS} FROM bots WHERE id = ?1"))?
            .query_row([id], Bot::from_row)
            .optional()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatKind {
    Private,
    Group,
}

impl ChatKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatKind::Private => "private",
            ChatKind::Group => "group",
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
    pub kind: &'a str,
}

impl Chat {
    pub fn load(conn: &Conn, id: &str) -> StoreResult<Option<Chat>> {
        conn.prepare_cached(
            "SELECT id, type, title, user_id, bot_id, started, blocked_by_user, blocked_by_bot, \
             bots_can_send, dissolved FROM chats WHERE id = ?1",
        )?
        .query_row([id], |r| Chat::from_row_at(r, 0))
        .optional()
    }

    /// The chat and `member_id`'s membership in it (as [`membership`]), in
    /// one query: every bot method needs both, and on a database server
    /// each query is a round trip.
    pub fn load_with_member(conn: &Conn, id: &str, member_id: &str) -> StoreResult<Option<(Chat, Option<bool>)>> {
        conn.prepare_cached(
            "SELECT c.id, c.type, c.title, c.user_id, c.bot_id, c.started, c.blocked_by_user, c.blocked_by_bot, \
             c.bots_can_send, c.dissolved, m.active FROM chats c \
             LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = ?2 WHERE c.id = ?1",
        )?
        .query_row([id, member_id], |r| Ok((Chat::from_row_at(r, 0)?, r.get::<Option<bool>>(10)?)))
        .optional()
    }

    /// A chat from its ten columns starting at column `at`.
    fn from_row_at(r: &Row<'_>, at: usize) -> StoreResult<Chat> {
        let kind: String = r.get(at + 1)?;
        Ok(Chat {
            id: r.get(at)?,
            kind: if kind == "private" { ChatKind::Private } else { ChatKind::Group },
            title: r.get(at + 2)?,
            user_id: r.get(at + 3)?,
            bot_id: r.get(at + 4)?,
            started: r.get(at + 5)?,
            blocked_by_user: r.get(at + 6)?,
            blocked_by_bot: r.get(at + 7)?,
            bots_can_send: r.get(at + 8)?,
            dissolved: r.get(at + 9)?,
        })
    }

    pub fn reference(&self) -> ChatRef<'_> {
        ChatRef { id: &self.id, kind: self.kind.as_str() }
    }

    /// The chat as the host API returns it.
    pub fn to_json(&self, conn: &Conn) -> ApiResult<serde_json::Value> {
        let members: Vec<serde_json::Value> = conn
            .prepare_cached(
                "SELECT member_id, is_bot FROM members WHERE chat_id = ?1 AND active = 1 ORDER BY member_id",
            )?
            .query_vec([&self.id], |r| {
                Ok(serde_json::json!({"id": r.get::<String>(0)?, "is_bot": r.get::<bool>(1)?}))
            })?;
        Ok(match self.kind {
            ChatKind::Private => serde_json::json!({
                "id": self.id, "type": "private", "user_id": self.user_id, "bot_id": self.bot_id,
                "started": self.started, "blocked_by_user": self.blocked_by_user,
                "blocked_by_bot": self.blocked_by_bot, "members": members,
            }),
            ChatKind::Group => serde_json::json!({
                "id": self.id, "type": "group", "title": self.title,
                "bots_can_send": self.bots_can_send, "dissolved": self.dissolved, "members": members,
            }),
        })
    }
}

const BOT_WITH_CHAT: &str = "SELECT b.id, b.display_name, b.handle, b.avatar_key, b.status, b.verified, b.official, \
     b.quota_tier, b.gateway_connection_limit, \
     c.id, c.type, c.title, c.user_id, c.bot_id, c.started, c.blocked_by_user, c.blocked_by_bot, \
     c.bots_can_send, c.dissolved, m.active, \
     (SELECT string_agg(x.member_id, ',') FROM members x WHERE x.chat_id = c.id AND x.is_bot = 1 AND x.active = 1) \
     FROM bots b LEFT JOIN chats c ON c.id = ?2 LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = b.id \
     WHERE b.token_hash = ?1";

/// A row of [`BOT_WITH_CHAT`] for `chat_id`.
fn bot_with_chat(r: &Row<'_>, chat_id: &str) -> StoreResult<(Bot, ChatPrefetch)> {
    let bot = Bot::from_row_at(r, 0)?;
    let found: Option<String> = r.get(9)?;
    let chat = match found {
        Some(_) => Some((Chat::from_row_at(r, 9)?, r.get::<Option<bool>>(19)?)),
        None => None,
    };
    // Bot ids are base64url: a comma cannot occur in one.
    let bots = r.get::<Option<String>>(20)?.map(|s| s.split(',').map(str::to_string).collect()).unwrap_or_default();
    Ok((bot, ChatPrefetch { chat_id: chat_id.to_string(), chat, used: false, bots }))
}

/// What [`Bot::by_token_hash_with_chat`] read with the bot: the named chat
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

/// Membership of `member_id` in `chat_id`: None if never a member, else
/// Some(true) for a current and Some(false) for a former member.
pub fn membership(conn: &Conn, chat_id: &str, member_id: &str) -> StoreResult<Option<bool>> {
    conn.prepare_cached("SELECT active FROM members WHERE chat_id = ?1 AND member_id = ?2")?
        .query_row([chat_id, member_id], |r| r.get(0))
        .optional()
}

/// Ids of the bots currently in a chat.
pub fn bot_members(conn: &Conn, chat_id: &str, out: &mut Vec<String>) -> StoreResult<()> {
    // SQLite is told the partial index: its planner would pick the primary
    // key and scan a group's human members too.
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT member_id FROM members INDEXED BY members_current_bots WHERE chat_id = ?1 AND is_bot = 1 AND active = 1",
        Dialect::Postgres => "SELECT member_id FROM members WHERE chat_id = ?1 AND is_bot = 1 AND active = 1",
    };
    conn.prepare_cached(sql)?.query_each([chat_id], |r| {
        out.push(r.get(0)?);
        Ok(true)
    })
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
    pub from: Sender<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to_message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_date: Option<i64>,
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
}

impl StoredMessage {
    pub fn load(conn: &Conn, chat_id: &str, message_id: i64) -> StoreResult<Option<StoredMessage>> {
        conn.prepare_cached(
            "SELECT message_id, sender_id, sender_is_bot, text, date, edit_date, reply_to, deleted \
             FROM messages WHERE chat_id = ?1 AND message_id = ?2",
        )?
        .query_row(params![chat_id, message_id], StoredMessage::from_row)
        .optional()
    }

    pub fn from_row(r: &Row<'_>) -> StoreResult<StoredMessage> {
        Ok(StoredMessage {
            message_id: r.get(0)?,
            sender_id: r.get(1)?,
            sender_is_bot: r.get(2)?,
            text: r.get(3)?,
            date: r.get(4)?,
            edit_date: r.get(5)?,
            reply_to: r.get(6)?,
            deleted: r.get(7)?,
        })
    }

    pub fn json<'a>(&'a self, chat: ChatRef<'a>) -> MessageJson<'a> {
        MessageJson {
            message_id: self.message_id.to_string(),
            chat,
            date: self.date,
            text: self.text.as_deref().unwrap_or(""),
            from: Sender { id: &self.sender_id, is_bot: self.sender_is_bot },
            reply_to_message_id: self.reply_to.map(|m| m.to_string()),
            edit_date: self.edit_date,
        }
    }
}

/// Serializes a value the core built itself; failure would be a bug.
pub fn to_json<T: Serialize>(v: &T) -> ApiResult<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| ApiError::internal(format!("serialization: {e}")))
}
