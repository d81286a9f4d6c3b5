//! The rules of names people read: a bot's or user's `handle`, and the
//! `display_name`s and group `title`s shown next to messages.
//!
//! A handle is typed and compared, so it is plain: ASCII letters, digits
//! and `_`, 1 to [`MAX_HANDLE_CHARS`], the shape of a Telegram username
//! (letters compare without case, see `store::bots::handle_key`). A
//! display name or title may be any language, but not the characters that
//! make one name look like another or hide part of it: control characters
//! (NUL, ESC, newlines), the bidirectional overrides and isolates that
//! reorder the text after them, and the zero-width characters that are
//! invisible. Each refusal is the `why` of an `invalid_field`, naming the
//! character found.

use crate::rules::limits::MAX_HANDLE_CHARS;

/// `handle`: 1 to [`MAX_HANDLE_CHARS`] ASCII letters (either case), digits
/// or `_`; the refusal's `why` otherwise.
pub fn handle(s: &str) -> Result<(), String> {
    // Only ASCII passes, so bytes are characters.
    if s.is_empty() || s.len() > MAX_HANDLE_CHARS && s.is_ascii() {
        return Err(format!("must be 1 to {MAX_HANDLE_CHARS} characters"));
    }
    match s.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        Some(c) => Err(format!("may contain only letters a-z, digits 0-9 and _ (found {})", code_point(c))),
        None => Ok(()),
    }
}

/// A `display_name` or `title`: 1 to `max` characters, none of them a
/// control, bidirectional-control or zero-width character; the refusal's
/// `why` otherwise.
pub fn display(s: &str, max: usize) -> Result<(), String> {
    let n = s.chars().count();
    if n == 0 || n > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    match s.chars().find_map(|c| refused(c).map(|what| (c, what))) {
        Some((c, what)) => Err(format!("must not contain {what} (found {})", code_point(c))),
        None => Ok(()),
    }
}

/// What kind of refused character `c` is, if it is one.
fn refused(c: char) -> Option<&'static str> {
    match c {
        // Unicode's Cc: C0, DEL and C1.
        c if c.is_control() => Some("control characters"),
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => Some("bidirectional override or isolate characters"),
        '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' => Some("zero-width characters"),
        _ => None,
    }
}

fn code_point(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_ascii_letters_digits_and_underscore() {
        for ok in ["b", "echo_bot", "Echo_Bot", "X", "_", "a1", &"a".repeat(MAX_HANDLE_CHARS)] {
            assert_eq!(handle(ok), Ok(()), "{ok}");
        }
        assert_eq!(handle(""), Err("must be 1 to 32 characters".into()));
        assert_eq!(handle(&"a".repeat(33)), Err("must be 1 to 32 characters".into()));
        let only = |found: &str| Err(format!("may contain only letters a-z, digits 0-9 and _ (found {found})"));
        assert_eq!(handle("echo bot"), only("U+0020"));
        assert_eq!(handle("echo-bot"), only("U+002D"));
        assert_eq!(handle("überbot"), only("U+00FC"));
        assert_eq!(handle("a\0"), only("U+0000"));
        assert_eq!(handle("bot\u{200B}"), only("U+200B"));
        // Long non-ASCII input is refused for its characters, whatever its length.
        assert_eq!(handle(&"ü".repeat(40)), only("U+00FC"));
        assert_eq!(handle("\u{0430}dmin"), only("U+0430"), "Cyrillic a");
    }

    #[test]
    fn display_names_refuse_control_bidi_and_zero_width_characters() {
        for ok in ["Echo", "Straße", "日本語の名前", "😀 bot", "a b", "\u{200E}x", "Ä"] {
            assert_eq!(display(ok, 128), Ok(()), "{ok}");
        }
        assert_eq!(display("", 128), Err("must be 1 to 128 characters".into()));
        assert_eq!(display(&"ü".repeat(129), 128), Err("must be 1 to 128 characters".into()));
        assert!(display(&"ü".repeat(128), 128).is_ok());
        let control = |c: &str| Err(format!("must not contain control characters (found {c})"));
        assert_eq!(display("a\0b", 128), control("U+0000"));
        assert_eq!(display("\u{1b}[31mred", 128), control("U+001B"));
        assert_eq!(display("two\nlines", 128), control("U+000A"));
        assert_eq!(display("tab\t", 128), control("U+0009"));
        assert_eq!(display("del\u{7f}", 128), control("U+007F"));
        assert_eq!(display("c1\u{85}", 128), control("U+0085"));
        for c in
            ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}']
        {
            let s = format!("evil{c}gpj.exe");
            let want =
                format!("must not contain bidirectional override or isolate characters (found U+{:04X})", c as u32);
            assert_eq!(display(&s, 128), Err(want), "{s:?}");
        }
        for c in ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}'] {
            let s = format!("ad{c}min");
            let want = format!("must not contain zero-width characters (found U+{:04X})", c as u32);
            assert_eq!(display(&s, 128), Err(want), "{s:?}");
        }
        // Neighbours of the refused ranges pass.
        for ok in ['\u{2029}', '\u{202F}', '\u{2065}', '\u{206A}', '\u{200A}', '\u{200E}', '\u{2061}', '\u{FEFE}'] {
            let s = format!("a{ok}b");
            assert_eq!(display(&s, 128), Ok(()), "{s:?}");
        }
    }
}
