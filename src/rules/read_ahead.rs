//! What a group of bot requests on a shared store reads ahead, once its
//! bots and chats are read: the rate buckets its requests take from and
//! the Idempotency-Keys they name (read in one more round trip, see
//! `store::group::read_limits`). A plain function of what was read, so
//! the choice can be tested without a database.

use super::ratelimit;
use crate::config::Limits;
use crate::model::{Bot, Chat};

/// One request of the group, as the read ahead sees it.
pub struct Asked<'a> {
    /// A method that takes from its bot's rate buckets.
    pub limited: bool,
    /// Its Idempotency-Key, when it sends one that is valid.
    pub idempotency_key: Option<&'a str>,
    /// Its bot and the chat it names, when both were found.
    pub found: Option<(&'a Bot, &'a Chat)>,
}

/// What to read ahead, in the requests' order (repeats are left in: the
/// store's read locks each row once).
#[derive(Debug, Default, PartialEq)]
pub struct Wanted<'a> {
    /// (bot id, chat id): the bot's bot-wide bucket and its bucket in that
    /// chat, locked and read.
    pub buckets: Vec<(&'a str, &'a str)>,
    /// (bot id, Idempotency-Key): looked up.
    pub lookups: Vec<(&'a str, &'a str)>,
}

/// The buckets of each limited request whose bot's tier limits it in its
/// chat's kind (the ones [`ratelimit::buckets`] says it takes from), and
/// the key of each request that names one. A request whose bot or chat
/// was not found reads nothing ahead: it is refused before either.
pub fn wanted<'a>(limits: &Limits, asked: impl IntoIterator<Item = Asked<'a>>) -> Wanted<'a> {
    let mut w = Wanted::default();
    for a in asked {
        let Some((bot, chat)) = a.found else { continue };
        let tier = ratelimit::of_tier(limits, bot.tier);
        if a.limited && ratelimit::buckets(tier, chat.kind) != (None, None) {
            w.buckets.push((&bot.id, &chat.id));
        }
        if let Some(key) = a.idempotency_key {
            w.lookups.push((&bot.id, key));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Rate, TierLimits};
    use crate::model::{ChatKind, Tier};

    fn bot(id: &str, tier: Tier) -> Bot {
        Bot {
            id: id.into(),
            display_name: "B".into(),
            handle: id.into(),
            avatar_key: None,
            active: true,
            verified: false,
            official: tier == Tier::Official,
            tier,
            connection_limit: 1,
            identity_json: "{}".into(),
        }
    }

    fn chat(id: &str, kind: ChatKind) -> Chat {
        Chat::open_for_tests(id, kind)
    }

    fn asked<'a>(limited: bool, key: Option<&'a str>, found: Option<(&'a Bot, &'a Chat)>) -> Asked<'a> {
        Asked { limited, idempotency_key: key, found }
    }

    #[test]
    fn limited_requests_of_a_limited_tier_read_their_buckets_and_keys_are_looked_up() {
        let limits = Limits::default();
        let (free, official) = (bot("bot_f", Tier::Free), bot("bot_o", Tier::Official));
        let (dm, group) = (chat("c1", ChatKind::Private), chat("g1", ChatKind::Group));
        let w = wanted(
            &limits,
            [
                // sendMessage with a key, free tier: both.
                asked(true, Some("k1"), Some((&free, &dm))),
                // A method that takes nothing (deleteMessage): neither.
                asked(false, None, Some((&free, &group))),
                // Unlimited tier: no buckets, but its key is looked up.
                asked(true, Some("k2"), Some((&official, &dm))),
                // Bot or chat not found: nothing, key or not.
                asked(true, Some("k3"), None),
                // The same bucket twice is asked twice.
                asked(true, None, Some((&free, &group))),
                asked(true, None, Some((&free, &group))),
            ],
        );
        assert_eq!(
            w,
            Wanted {
                buckets: vec![("bot_f", "c1"), ("bot_f", "g1"), ("bot_f", "g1")],
                lookups: vec![("bot_f", "k1"), ("bot_o", "k2")],
            }
        );
        assert_eq!(wanted(&limits, []), Wanted::default());
    }

    #[test]
    fn one_bucket_of_the_two_is_enough_to_read_both() {
        let rate = Some(Rate::new(1, 1_000, 1));
        // Standard: only groups are limited; free: only the bot-wide bucket.
        let limits = Limits {
            standard: TierLimits { bot: None, private_chat: None, group: rate },
            free: TierLimits { bot: rate, private_chat: None, group: None },
            ..Limits::default()
        };
        let (standard, free) = (bot("bot_s", Tier::Standard), bot("bot_f", Tier::Free));
        let (dm, group) = (chat("c1", ChatKind::Private), chat("g1", ChatKind::Group));
        let w = wanted(
            &limits,
            [
                asked(true, None, Some((&standard, &dm))),
                asked(true, None, Some((&standard, &group))),
                asked(true, None, Some((&free, &dm))),
            ],
        );
        assert_eq!(w.buckets, vec![("bot_s", "g1"), ("bot_f", "c1")]);
        assert!(w.lookups.is_empty());
    }
}
