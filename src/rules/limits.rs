//! Length and size limits of request fields, named, with the text rules
//! that use them. The numbers are the interface's: changing one changes
//! what callers may send.

use crate::error::{ApiError, ApiResult};
use crate::protocol::ParseMode;

/// A message's `text`: 1 to this many Unicode scalar values (not bytes).
pub const MAX_TEXT_CHARS: usize = 5000;
/// A user's or bot's `display_name`, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 128;
/// A user's or bot's `handle`, in characters (ASCII only, see
/// [`crate::rules::names::handle`]): a Telegram username's longest.
pub const MAX_HANDLE_CHARS: usize = 32;
/// A group's `title`, in characters.
pub const MAX_TITLE_CHARS: usize = 256;
/// A bot's `avatar_key`, in bytes.
pub const MAX_AVATAR_KEY_BYTES: usize = 256;
/// The largest `gateway_connection_limit` a host may set for a bot.
pub const MAX_GATEWAY_CONNECTION_LIMIT: u64 = 1024;
/// The `Idempotency-Key` header, in visible ASCII characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 64;
/// A message id given as a decimal string, in digits: 18 always fit an
/// `i64`.
pub const MAX_MESSAGE_ID_DIGITS: usize = 18;
/// The admin console's `query` filter, in characters.
pub const MAX_QUERY_CHARS: usize = 128;
/// The most messages one getChatHistory returns, and its default.
pub const MAX_HISTORY_PAGE: u64 = 100;
/// The most updates the host's getUpdates returns at once.
pub const MAX_HOST_UPDATES: u64 = 1000;

/// The `text` rule: `text_empty` for `""`, `text_too_long` past
/// [`MAX_TEXT_CHARS`] characters.
pub fn text(t: &str) -> ApiResult<()> {
    if t.is_empty() {
        return Err(ApiError::text_empty());
    }
    // Bytes bound chars from above: only long strings need counting.
    if t.len() > MAX_TEXT_CHARS && t.chars().count() > MAX_TEXT_CHARS {
        return Err(ApiError::text_too_long(MAX_TEXT_CHARS));
    }
    Ok(())
}

/// `parse_mode`: only the [`ParseMode`]s (`plain`; absent or null is
/// checked by the caller).
pub fn parse_mode(mode: &str) -> ApiResult<()> {
    if ParseMode::parse(mode).is_some() {
        Ok(())
    } else {
        Err(ApiError::unsupported_parse_mode())
    }
}

/// A message id as a decimal string: 1 to [`MAX_MESSAGE_ID_DIGITS`]
/// digits, at least 1.
pub fn message_id_str(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > MAX_MESSAGE_ID_DIGITS || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().filter(|v| *v >= 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_counts_characters_not_bytes() {
        assert_eq!(text("").unwrap_err().code, "text_empty");
        assert!(text("a").is_ok());
        assert!(text(&"é".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(text(&"😀".repeat(MAX_TEXT_CHARS)).is_ok());
        let e = text(&"a".repeat(MAX_TEXT_CHARS + 1)).unwrap_err();
        assert_eq!(e.code, "text_too_long");
        assert_eq!(e.description, "text must contain at most 5000 characters");
    }

    #[test]
    fn parse_mode_is_plain_only() {
        assert!(parse_mode("plain").is_ok());
        assert_eq!(parse_mode("Plain").unwrap_err().code, "unsupported_parse_mode");
        assert_eq!(parse_mode("html").unwrap_err().code, "unsupported_parse_mode");
    }

    #[test]
    fn message_ids_are_positive_decimal_strings() {
        assert_eq!(message_id_str("1"), Some(1));
        assert_eq!(message_id_str("000000000000000007"), Some(7));
        for bad in ["", "0", "-1", "+1", "1.0", " 1", "0x1", "1234567890123456789"] {
            assert_eq!(message_id_str(bad), None, "{bad}");
        }
    }
}
