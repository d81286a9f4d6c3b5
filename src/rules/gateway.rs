//! Admission to the gateway: the checks a `GET /bot/gateway` passes before
//! it is upgraded, in the order of docs/gateway.md: 403 `bot_suspended`,
//! 426 `upgrade_required` (not a WebSocket version 13 upgrade), 429
//! `connection_limit`. [`admit`] runs once per request: with the count
//! the registry holds under its lock as it takes the slot (so the count
//! checked is the one raised), or, for a request arriving where no upgrade
//! can happen (bytes in, bytes out), with the count now, before the 426.

use crate::error::{ApiError, ApiResult};
use crate::http::Request;
use crate::model::Bot;

/// Whether the request asks for a WebSocket (RFC 6455, version 13):
/// `Upgrade: websocket`, a `Connection: upgrade` token, a
/// `Sec-WebSocket-Key` and `Sec-WebSocket-Version: 13`.
pub fn is_websocket_upgrade(req: &Request<'_>) -> bool {
    req.header_has_token("upgrade", "websocket")
        && req.header_has_token("connection", "upgrade")
        && req.header("sec-websocket-key").is_some()
        && req.header_str("sec-websocket-version") == Some("13")
}

/// The bot, found by its token, may open one more connection: it is not
/// suspended, the request is an upgrade (`websocket`) and it has fewer
/// than its `gateway_connection_limit` open (`open`).
pub fn admit(bot: &Bot, websocket: bool, open: u32) -> ApiResult<()> {
    super::auth::bot_status(bot)?;
    if !websocket {
        return Err(ApiError::upgrade_required());
    }
    if open >= bot.connection_limit {
        return Err(ApiError::connection_limit(open, bot.connection_limit));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Tier;

    fn bot(active: bool, connection_limit: u32) -> Bot {
        Bot {
            id: "bot_1".into(),
            display_name: "B".into(),
            handle: "b".into(),
            avatar_key: None,
            active,
            verified: false,
            official: false,
            tier: Tier::Free,
            connection_limit,
            identity_json: String::new(),
        }
    }

    fn code(r: ApiResult<()>) -> &'static str {
        r.err().map_or("ok", |e| e.code.as_str())
    }

    #[test]
    fn suspended_then_not_an_upgrade_then_the_limit() {
        assert_eq!(code(admit(&bot(false, 0), false, 5)), "bot_suspended");
        assert_eq!(code(admit(&bot(true, 0), false, 5)), "upgrade_required");
        let e = admit(&bot(true, 2), true, 2).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.description.as_str()),
            ("connection_limit", "this bot already has 2 of 2 gateway connections open")
        );
        assert_eq!(code(admit(&bot(true, 2), true, 1)), "ok");
        assert_eq!(code(admit(&bot(true, 0), true, 0)), "connection_limit");
    }

    #[test]
    fn an_upgrade_needs_all_four_headers() {
        let full = "GET /bot/gateway HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
                    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let parsed = |raw: &str| is_websocket_upgrade(&crate::http::parse_request(raw.as_bytes(), 1024).unwrap());
        assert!(parsed(full));
        assert!(!parsed(&full.replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8")));
        assert!(!parsed(&full.replace("Upgrade: websocket\r\n", "")));
        assert!(!parsed(&full.replace("keep-alive, Upgrade", "keep-alive")));
        assert!(!parsed(&full.replace("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "")));
    }
}
