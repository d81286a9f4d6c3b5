//! Authentication decisions: who a request is from, or why it is refused.
//! The primitives (SHA-256, constant-time compare, the `Authorization`
//! header's split) are `crate::auth`'s; the admin-login throttle's buckets
//! are `crate::throttle`'s ([`AdminThrottle`]). Here are the decisions,
//! each a function of the header and what the store or cache found:
//!
//! - a bot request carries `Authorization: Bot <token>`; the bot is the one
//!   whose stored SHA-256 matches the token's ([`bot_token_hash`],
//!   [`bot_found`]); a suspended bot is refused after that ([`bot_status`]);
//! - a host request carries `Authorization: Admin <secret>`, compared by
//!   SHA-256 in constant time ([`admin`]);
//! - a host request from a known client is first throttled per client and
//!   network, and by one bound across all clients that did not log in
//!   within the hour ([`admin_login`]).

use crate::auth;
use crate::error::{ApiError, ApiResult};
use crate::model::Bot;
use crate::protocol::RateLimitScope;
pub(crate) use crate::throttle::AdminThrottle;
use crate::throttle::Client;

/// The scheme of bot credentials.
pub const BOT_SCHEME: &str = "Bot";
/// The scheme of the host API's credential.
pub const ADMIN_SCHEME: &str = "Admin";

/// The SHA-256 of the bot token in `Authorization: Bot <token>`, the key
/// bots are found by (so a lookup's timing is about a hash, not the
/// token); `missing_authorization` without one.
pub fn bot_token_hash(authorization: Option<&[u8]>) -> ApiResult<[u8; 32]> {
    Ok(auth::sha256(auth::credential(authorization, BOT_SCHEME)?))
}

/// A token no bot holds (never issued, or rotated away) is `invalid_token`.
pub fn bot_found<B>(found: Option<B>) -> ApiResult<B> {
    found.ok_or_else(ApiError::invalid_token)
}

/// Check 7 of `docs/errors.md`: a suspended bot is refused, after its
/// token was found (so a wrong token never learns the bot's status).
pub fn bot_status(bot: &Bot) -> ApiResult<()> {
    if bot.active {
        Ok(())
    } else {
        Err(ApiError::bot_suspended())
    }
}

/// `Authorization: Admin <secret>` against the SHA-256 of the configured
/// secret, in constant time: `missing_authorization` without the header
/// (or with another scheme), `invalid_token` for a wrong secret.
pub fn admin(authorization: Option<&[u8]>, admin_hash: &[u8; 32]) -> ApiResult<()> {
    let cred = auth::credential(authorization, ADMIN_SCHEME)?;
    if auth::constant_time_eq(&auth::sha256(cred), admin_hash) {
        Ok(())
    } else {
        Err(ApiError::invalid_token())
    }
}

/// An admin login from `client` at `now_ms`: a throttled client is refused
/// (429, scope `admin_auth`) before its credential is looked at, so a right
/// guess looks like a wrong one; otherwise [`admin`] decides, and a success
/// gives the attempt's tokens back.
pub fn admin_login(
    throttle: &AdminThrottle,
    client: &Client,
    now_ms: u64,
    authorization: Option<&[u8]>,
    admin_hash: &[u8; 32],
) -> ApiResult<()> {
    let attempt = throttle
        .attempt(client, now_ms)
        .map_err(|wait_ms| ApiError::rate_limited(wait_ms, RateLimitScope::AdminAuth))?;
    admin(authorization, admin_hash)?;
    throttle.succeeded(attempt, now_ms);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code<T>(r: ApiResult<T>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        }
    }

    #[test]
    fn admin_secret_compares_by_hash_and_scheme() {
        let h = auth::sha256(b"an-admin-secret-0123");
        assert_eq!(code(admin(Some(b"Admin an-admin-secret-0123"), &h)), "ok");
        assert_eq!(code(admin(Some(b"admin  an-admin-secret-0123 "), &h)), "ok");
        assert_eq!(code(admin(Some(b"Admin an-admin-secret-0124"), &h)), "invalid_token");
        assert_eq!(code(admin(Some(b"Admin an-admin-secret-012"), &h)), "invalid_token");
        assert_eq!(code(admin(Some(b"Bot an-admin-secret-0123"), &h)), "missing_authorization");
        assert_eq!(code(admin(Some(b"Admin"), &h)), "missing_authorization");
        assert_eq!(code(admin(None, &h)), "missing_authorization");
    }

    #[test]
    fn bot_token_is_looked_up_by_its_hash() {
        assert_eq!(bot_token_hash(Some(b"Bot bot_abc")).unwrap(), auth::sha256(b"bot_abc"));
        assert_eq!(bot_token_hash(Some(b"bot bot_abc")).unwrap(), auth::sha256(b"bot_abc"));
        assert_eq!(code(bot_token_hash(Some(b"Admin bot_abc"))), "missing_authorization");
        assert_eq!(code(bot_token_hash(None)), "missing_authorization");
        assert_eq!(code(bot_found(None::<()>)), "invalid_token");
        assert_eq!(code(bot_found(Some(()))), "ok");
    }

    #[test]
    fn a_suspended_bot_is_refused_once_found() {
        let mut bot = Bot {
            id: "bot_1".into(),
            display_name: "B".into(),
            handle: "b".into(),
            avatar_key: None,
            active: true,
            verified: false,
            official: false,
            tier: crate::model::Tier::Free,
            connection_limit: 1,
            identity_json: String::new(),
        };
        assert_eq!(code(bot_status(&bot)), "ok");
        bot.active = false;
        let e = bot_status(&bot).unwrap_err();
        assert_eq!(
            (e.status, e.code.as_str(), e.description.as_str()),
            (403, "bot_suspended", "this bot is suspended")
        );
    }

    #[test]
    fn throttled_login_is_refused_before_the_secret_is_read() {
        let t = AdminThrottle::default();
        let h = auth::sha256(b"an-admin-secret-0123");
        let c = Client::from_peer("192.0.2.7");
        for _ in 0..10 {
            assert_eq!(code(admin_login(&t, &c, 0, Some(b"Admin wrong"), &h)), "invalid_token");
        }
        // The right secret now gets the same answer as a wrong one.
        let e = admin_login(&t, &c, 0, Some(b"Admin an-admin-secret-0123"), &h).unwrap_err();
        assert_eq!(e.code, "rate_limited");
        assert_eq!(e.parameters.as_ref().unwrap()["scope"], "admin_auth");
        // A token later, a success gives its attempt back.
        assert_eq!(code(admin_login(&t, &c, 6_000, Some(b"Admin an-admin-secret-0123"), &h)), "ok");
        assert_eq!(code(admin_login(&t, &c, 6_000, Some(b"Admin an-admin-secret-0123"), &h)), "ok");
    }
}
