//! Bots as stored: loading one for authentication (alone, or with the chat
//! a request names), creating one, changing its fields and its token.

pub use super::schema::handle_key;
use super::schema::CLAIM_KEY;
use super::{Conn, Optional, Row, StoreResult, ToVal};
use crate::model::{Bot, Chat, ChatPrefetch, Tier};
use crate::params;

/// The columns [`read_bot`] reads, in its order.
pub const BOT_COLUMNS: &str =
    "id, display_name, handle, avatar_key, status, verified, official, quota_tier, gateway_connection_limit";

const BY_TOKEN_HASH: &str = "SELECT id, display_name, handle, avatar_key, status, verified, official, quota_tier, \
     gateway_connection_limit FROM bots WHERE token_hash = ?1";

const BY_ID: &str = "SELECT id, display_name, handle, avatar_key, status, verified, official, quota_tier, \
     gateway_connection_limit FROM bots WHERE id = ?1";

/// The columns [`bot_with_chat`] reads, in its order, from a bot `b`, a
/// chat `c` and the bot's membership `m` in it (21 columns); one text for
/// [`BOT_WITH_CHAT`] and the group's read (`store::group`, which sees it
/// through `#[macro_use]` on this module).
macro_rules! bot_with_chat_columns {
    () => {
        "b.id, b.display_name, b.handle, b.avatar_key, b.status, b.verified, b.official, \
         b.quota_tier, b.gateway_connection_limit, \
         c.id, c.type, c.title, c.user_id, c.bot_id, c.started, c.blocked_by_user, c.blocked_by_bot, \
         c.bots_can_send, c.dissolved, m.active, \
         (SELECT string_agg(x.member_id, ',') FROM members x WHERE x.chat_id = c.id AND x.is_bot = 1 AND x.active = 1)"
    };
}

/// The bot by token hash with the chat `?2`, the bot's membership in it
/// and the chat's current bots (see [`by_token_hash_with_chat`]).
const BOT_WITH_CHAT: &str = concat!(
    "SELECT ",
    bot_with_chat_columns!(),
    " FROM bots b LEFT JOIN chats c ON c.id = ?2 LEFT JOIN members m ON m.chat_id = c.id AND m.member_id = b.id \
     WHERE b.token_hash = ?1"
);

const INSERT: &str = "INSERT INTO bots (id, token_hash, op_token, display_name, handle, avatar_key, verified, \
     official, quota_tier, gateway_connection_limit, created_at, handle_key) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/// The bot other than `?2` that holds the handle key `?1` (unique index
/// `bots_handle_key`).
const HANDLE_HOLDER: &str = "SELECT id FROM bots WHERE handle_key = ?1 AND id != ?2";

const SET_HANDLE: &str = "UPDATE bots SET handle = ?1, handle_key = ?2 WHERE id = ?3";

const SET_TOKEN: &str = "UPDATE bots SET token_hash = ?1, op_token = ?2 WHERE id = ?3";

const OPERATIONAL_COPY: &str = "SELECT official, op_token FROM bots WHERE id = ?1";

/// A bot from [`BOT_COLUMNS`] starting at column `at`.
pub fn read_bot(r: &Row<'_>, at: usize) -> StoreResult<Bot> {
    let tier_s: String = r.get(at + 7)?;
    let tier = Tier::parse(&tier_s).unwrap_or(Tier::Free);
    let limit: Option<u32> = r.get(at + 8)?;
    let status: String = r.get(at + 4)?;
    Ok(Bot {
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
    }
    .with_identity())
}

pub fn by_token_hash(conn: &Conn, hash: &[u8; 32]) -> StoreResult<Option<Bot>> {
    conn.prepare_cached(BY_TOKEN_HASH)?.query_row([&hash[..]], |r| read_bot(r, 0)).optional()
}

pub fn by_id(conn: &Conn, id: &str) -> StoreResult<Option<Bot>> {
    conn.prepare_cached(BY_ID)?.query_row([id], |r| read_bot(r, 0)).optional()
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
    conn.prepare_cached(BOT_WITH_CHAT)?.query_row(params![&hash[..], chat_id], |r| bot_with_chat(r, chat_id)).optional()
}

/// A row of [`BOT_WITH_CHAT`] for `chat_id`.
pub(super) fn bot_with_chat(r: &Row<'_>, chat_id: &str) -> StoreResult<(Bot, ChatPrefetch)> {
    let bot = read_bot(r, 0)?;
    let found: Option<String> = r.get(9)?;
    let chat: Option<(Chat, Option<bool>)> = match found {
        Some(_) => Some((super::chats::read_chat(r, 9)?, r.get::<Option<bool>>(19)?)),
        None => None,
    };
    // Bot ids are base64url: a comma cannot occur in one.
    let bots = r.get::<Option<String>>(20)?.map(|s| s.split(',').map(str::to_string).collect()).unwrap_or_default();
    Ok((bot, ChatPrefetch { chat_id: chat_id.to_string(), chat, used: false, bots }))
}

/// A new bot's row.
pub struct NewBot<'a> {
    pub id: &'a str,
    pub token_hash: &'a [u8; 32],
    /// The sealed operational copy of the token, if kept.
    pub sealed: Option<&'a [u8]>,
    pub display_name: Option<&'a str>,
    pub handle: Option<&'a str>,
    pub avatar_key: Option<&'a str>,
    pub verified: bool,
    pub official: bool,
    pub tier: Tier,
    pub connection_limit: Option<i64>,
    pub created_at: i64,
}

/// Inserts the bot; it claims its handle's key (the caller checked with
/// [`handle_holder`] that no other bot holds it).
pub fn insert(conn: &Conn, b: &NewBot<'_>) -> StoreResult<()> {
    let key = b.handle.map(handle_key);
    conn.prepare_cached(INSERT)?.execute(params![
        b.id,
        &b.token_hash[..],
        b.sealed,
        b.display_name,
        b.handle,
        b.avatar_key,
        b.verified,
        b.official,
        b.tier.as_str(),
        b.connection_limit,
        b.created_at,
        key.as_deref()
    ])?;
    Ok(())
}

/// The id of a bot other than `except` whose handle is `handle` compared
/// case-insensitively, if any.
pub fn handle_holder(conn: &Conn, handle: &str, except: &str) -> StoreResult<Option<String>> {
    conn.prepare_cached(HANDLE_HOLDER)?.query_row(params![handle_key(handle).as_str(), except], |r| r.get(0)).optional()
}

/// Sets a bot's handle and claims its key (the caller checked with
/// [`handle_holder`] that no other bot holds it).
pub fn set_handle(conn: &Conn, bot_id: &str, handle: &str) -> StoreResult<()> {
    conn.prepare_cached(SET_HANDLE)?.execute(params![handle, handle_key(handle).as_str(), bot_id])?;
    Ok(())
}

/// After a bot gave up the handle whose key is `key`: the oldest bot left
/// without a key that shows the same handle (from a database written
/// before handles were unique) gets the key, so the handle stays held by a
/// bot that shows it and no new bot can take it.
pub fn pass_on_handle_key(conn: &Conn, key: &str) -> StoreResult<()> {
    if conn.prepare_cached(HANDLE_HOLDER)?.exists(params![key, ""])? {
        return Ok(());
    }
    let waiting: Vec<(String, String)> =
        conn.prepare_cached(WITHOUT_KEY)?.query_vec((), |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)))?;
    if let Some((id, _)) = waiting.into_iter().find(|(_, h)| handle_key(h) == key) {
        conn.prepare_cached(CLAIM_KEY)?.execute(params![key, id.as_str()])?;
    }
    Ok(())
}

/// Bots without a handle key, oldest first (index `bots_without_handle_key`).
const WITHOUT_KEY: &str = "SELECT id, handle FROM bots WHERE handle_key IS NULL ORDER BY created_at, id";

/// A bot field updateBot may change.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    DisplayName,
    QuotaTier,
    Verified,
    Official,
    /// The sealed operational copy of the token.
    OpToken,
    AvatarKey,
    ConnectionLimit,
    Status,
}

impl Field {
    fn statement(self) -> &'static str {
        match self {
            Field::DisplayName => "UPDATE bots SET display_name = ?1 WHERE id = ?2",
            Field::QuotaTier => "UPDATE bots SET quota_tier = ?1 WHERE id = ?2",
            Field::Verified => "UPDATE bots SET verified = ?1 WHERE id = ?2",
            Field::Official => "UPDATE bots SET official = ?1 WHERE id = ?2",
            Field::OpToken => "UPDATE bots SET op_token = ?1 WHERE id = ?2",
            Field::AvatarKey => "UPDATE bots SET avatar_key = ?1 WHERE id = ?2",
            Field::ConnectionLimit => "UPDATE bots SET gateway_connection_limit = ?1 WHERE id = ?2",
            Field::Status => "UPDATE bots SET status = ?1 WHERE id = ?2",
        }
    }
}

/// Sets one field of a bot.
pub fn set_field(conn: &Conn, bot_id: &str, field: Field, value: &dyn ToVal) -> StoreResult<()> {
    conn.prepare_cached(field.statement())?.execute(params![value.to_val(), bot_id])?;
    Ok(())
}

/// A new token (its hash) and its sealed operational copy, if kept.
pub fn set_token(conn: &Conn, bot_id: &str, token_hash: &[u8; 32], sealed: Option<&[u8]>) -> StoreResult<()> {
    conn.prepare_cached(SET_TOKEN)?.execute(params![&token_hash[..], sealed, bot_id])?;
    Ok(())
}

/// Whether the bot is official and its sealed operational copy; `None`
/// when there is no such bot.
pub fn operational_copy(conn: &Conn, bot_id: &str) -> StoreResult<Option<(bool, Option<Vec<u8>>)>> {
    conn.prepare_cached(OPERATIONAL_COPY)?.query_row([bot_id], |r| Ok((r.get(0)?, r.get(1)?))).optional()
}
