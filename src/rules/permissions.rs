//! The sending permission rules (`docs/api.md`, "Permission rules"), in
//! one place for every sender: a bot's sendMessage and sendChatAction, a
//! bot's edit and delete ("still visible"), and a human's sendUserMessage
//! through the host API. Each rule is written once ([`Rule::holds`]); a
//! sender's check is the list of rules it is held to, in its order.

use crate::error::{ApiError, ApiResult};
use crate::model::{Chat, ChatKind};

/// One permission rule: what must hold, and the error when it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Private rule 1: the user has started the bot.
    Started,
    /// Private rule 2, the user's side: the user has not blocked the bot.
    NotBlockedByUser,
    /// Private rule 2, the bot's side: the bot has not blocked the user.
    NotBlockedByBot,
    /// Private rule 3 / group rule 1: the sender is (still) a member.
    Member,
    /// Group rule 2: the group is not dissolved.
    NotDissolved,
    /// Group rule 3: the group's permissions let bots send.
    BotsCanSend,
}

impl Rule {
    /// Whether the rule holds for `chat`, where the sender's membership is
    /// `member` (active, as the store read it).
    pub fn holds(self, chat: &Chat, member: bool) -> bool {
        match self {
            Rule::Started => chat.started,
            Rule::NotBlockedByUser => !chat.blocked_by_user,
            Rule::NotBlockedByBot => !chat.blocked_by_bot,
            Rule::Member => member,
            Rule::NotDissolved => !chat.dissolved,
            Rule::BotsCanSend => chat.bots_can_send,
        }
    }

    /// The refusal when the rule does not hold.
    pub fn refusal(self) -> ApiError {
        match self {
            Rule::Started => ApiError::bot_not_started(),
            Rule::NotBlockedByUser => ApiError::blocked_by_user(),
            Rule::NotBlockedByBot => ApiError::user_blocked_by_bot(),
            Rule::Member => ApiError::not_member(),
            Rule::NotDissolved => ApiError::chat_dissolved(),
            Rule::BotsCanSend => ApiError::bots_cannot_send(),
        }
    }
}

/// Who acts on the chat, which picks the rules and their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A bot sends (sendMessage, sendChatAction).
    BotSends,
    /// A bot edits or deletes its own earlier message: the chat must still
    /// be visible; blocking and `bots_can_send` do not stop it.
    BotEdits,
    /// A human sends through the host API (sendUserMessage): a member of
    /// a live chat, not blocked either way.
    UserSends,
}

const BOT_PRIVATE: &[Rule] = &[Rule::Started, Rule::NotBlockedByUser, Rule::NotBlockedByBot, Rule::Member];
const BOT_GROUP: &[Rule] = &[Rule::Member, Rule::NotDissolved, Rule::BotsCanSend];
const STILL_VISIBLE: &[Rule] = &[Rule::Member, Rule::NotDissolved];
const USER: &[Rule] = &[Rule::Member, Rule::NotDissolved, Rule::NotBlockedByUser, Rule::NotBlockedByBot];

/// The rules `act` is held to in a chat of `kind`, in the order they are
/// checked (the first that fails answers).
pub fn rules_for(act: Act, kind: ChatKind) -> &'static [Rule] {
    match (act, kind) {
        (Act::BotSends, ChatKind::Private) => BOT_PRIVATE,
        (Act::BotSends, ChatKind::Group) => BOT_GROUP,
        (Act::BotEdits, _) => STILL_VISIBLE,
        (Act::UserSends, _) => USER,
    }
}

/// Checks `act` in `chat` for a sender whose membership is `member`.
pub fn check(act: Act, chat: &Chat, member: bool) -> ApiResult<()> {
    match rules_for(act, chat.kind).iter().find(|r| !r.holds(chat, member)) {
        Some(r) => Err(r.refusal()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(kind: ChatKind) -> Chat {
        Chat::open_for_tests("spc_1", kind)
    }

    fn code(act: Act, c: &Chat, member: bool) -> &'static str {
        match check(act, c, member) {
            Ok(()) => "ok",
            Err(e) => e.code.as_str(),
        }
    }

    #[test]
    fn bot_in_private_chat_started_then_blocks_then_membership() {
        let mut c = chat(ChatKind::Private);
        assert_eq!(code(Act::BotSends, &c, true), "ok");
        assert_eq!(code(Act::BotSends, &c, false), "not_member");
        c.blocked_by_bot = true;
        assert_eq!(code(Act::BotSends, &c, false), "user_blocked_by_bot");
        c.blocked_by_user = true;
        assert_eq!(code(Act::BotSends, &c, false), "blocked_by_user");
        c.started = false;
        assert_eq!(code(Act::BotSends, &c, false), "bot_not_started");
    }

    #[test]
    fn bot_in_group_membership_then_dissolved_then_permissions() {
        let mut c = chat(ChatKind::Group);
        assert_eq!(code(Act::BotSends, &c, true), "ok");
        c.bots_can_send = false;
        assert_eq!(code(Act::BotSends, &c, true), "bots_cannot_send");
        c.dissolved = true;
        assert_eq!(code(Act::BotSends, &c, true), "chat_dissolved");
        assert_eq!(code(Act::BotSends, &c, false), "not_member");
        // A group's `started` and blocking flags are not its rules.
        let mut g = chat(ChatKind::Group);
        g.started = false;
        g.blocked_by_user = true;
        assert_eq!(code(Act::BotSends, &g, true), "ok");
    }

    #[test]
    fn edit_needs_only_a_visible_chat() {
        let mut c = chat(ChatKind::Private);
        c.started = false;
        c.blocked_by_user = true;
        c.blocked_by_bot = true;
        assert_eq!(code(Act::BotEdits, &c, true), "ok");
        assert_eq!(code(Act::BotEdits, &c, false), "not_member");
        let mut g = chat(ChatKind::Group);
        g.bots_can_send = false;
        assert_eq!(code(Act::BotEdits, &g, true), "ok");
        g.dissolved = true;
        assert_eq!(code(Act::BotEdits, &g, true), "chat_dissolved");
        assert_eq!(code(Act::BotEdits, &g, false), "not_member");
    }

    #[test]
    fn user_membership_then_dissolved_then_blocks() {
        let mut c = chat(ChatKind::Private);
        // A user needs no start: it is the bot that is started.
        c.started = false;
        assert_eq!(code(Act::UserSends, &c, true), "ok");
        c.blocked_by_bot = true;
        assert_eq!(code(Act::UserSends, &c, true), "user_blocked_by_bot");
        c.blocked_by_user = true;
        assert_eq!(code(Act::UserSends, &c, true), "blocked_by_user");
        assert_eq!(code(Act::UserSends, &c, false), "not_member");
        let mut g = chat(ChatKind::Group);
        g.bots_can_send = false;
        assert_eq!(code(Act::UserSends, &g, true), "ok");
        g.dissolved = true;
        assert_eq!(code(Act::UserSends, &g, true), "chat_dissolved");
        assert_eq!(code(Act::UserSends, &g, false), "not_member");
    }
}
