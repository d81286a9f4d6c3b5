//! Inline keyboards: the `reply_markup` of sendMessage, editMessageText
//! and editMessageReplyMarkup, the button a press names, and the answer's
//! text. Plain functions of the request and of the stored keyboard.

use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

/// Rows of one keyboard.
pub const MAX_ROWS: usize = 10;
/// Buttons of one row.
pub const MAX_ROW_BUTTONS: usize = 8;
/// Buttons of one keyboard.
pub const MAX_BUTTONS: usize = 100;
/// A button's `text`, in characters.
pub const MAX_BUTTON_TEXT_CHARS: usize = 64;
/// A button's `callback_data`, in bytes.
pub const MAX_CALLBACK_DATA_BYTES: usize = 64;
/// A button's `url`, in characters.
pub const MAX_URL_CHARS: usize = 2048;
/// answerCallbackQuery's `text`, in characters.
pub const MAX_ANSWER_TEXT_CHARS: usize = 200;

const MARKUP_WHY: &str = "must be {\"inline_keyboard\": [[button, ...], ...]}";
const ROWS_WHY: &str = "must be an array of at most 10 rows";
const ROW_WHY: &str = "must be an array of 1 to 8 buttons";
const TOTAL_WHY: &str = "must hold at most 100 buttons in all";
const BUTTON_WHY: &str = "must be {\"text\", \"callback_data\"} or {\"text\", \"url\"}";
const TEXT_WHY: &str = "must be a string of 1 to 64 characters";
const DATA_WHY: &str = "must be a string of 1 to 64 bytes";
const URL_WHY: &str = "must be an http or https URL of at most 2048 characters";
const BOTH_WHY: &str = "must have exactly one of callback_data and url";

/// A keyboard as checked, ready to store: the canonical JSON of
/// `{"inline_keyboard": [[{"text", "callback_data" | "url"}, ...], ...]}`
/// (unknown fields of the request dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyboard(pub String);

/// `reply_markup`: absent or `null` is `None`; otherwise a keyboard
/// within the limits, or the first refusal in reading order, its field
/// named as a path (`reply_markup.inline_keyboard.0.1.url`).
pub fn parse(v: Option<&Value>) -> ApiResult<Option<Keyboard>> {
    let o = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ApiError::invalid_field("reply_markup", MARKUP_WHY)),
    };
    let rows = match o.get("inline_keyboard") {
        None | Some(Value::Null) => return Err(ApiError::missing_field("reply_markup.inline_keyboard")),
        Some(Value::Array(rows)) => rows,
        Some(_) => return Err(ApiError::invalid_field("reply_markup.inline_keyboard", ROWS_WHY)),
    };
    // The total first: within 10 rows of 8 it cannot pass 100, so a
    // keyboard over 100 buttons hears of that limit, not of the rows'.
    let total: usize = rows.iter().map(|r| r.as_array().map_or(0, Vec::len)).sum();
    if total > MAX_BUTTONS {
        return Err(ApiError::invalid_field("reply_markup.inline_keyboard", TOTAL_WHY));
    }
    if rows.len() > MAX_ROWS {
        return Err(ApiError::invalid_field("reply_markup.inline_keyboard", ROWS_WHY));
    }
    let mut out_rows = Vec::with_capacity(rows.len());
    for (r, row) in rows.iter().enumerate() {
        let at = format!("reply_markup.inline_keyboard.{r}");
        let buttons = match row {
            Value::Array(b) if (1..=MAX_ROW_BUTTONS).contains(&b.len()) => b,
            _ => return Err(ApiError::invalid_field(&at, ROW_WHY)),
        };
        let mut out_row = Vec::with_capacity(buttons.len());
        for (i, b) in buttons.iter().enumerate() {
            out_row.push(Value::Object(button(b, &format!("{at}.{i}"))?));
        }
        out_rows.push(Value::Array(out_row));
    }
    let mut k = Map::new();
    k.insert("inline_keyboard".into(), Value::Array(out_rows));
    Ok(Some(Keyboard(Value::Object(k).to_string())))
}

/// One button, checked: text, then exactly one of callback_data and url.
fn button(b: &Value, at: &str) -> ApiResult<Map<String, Value>> {
    let Value::Object(o) = b else { return Err(ApiError::invalid_field(at, BUTTON_WHY)) };
    let text = match o.get("text") {
        Some(Value::String(t)) if (1..=MAX_BUTTON_TEXT_CHARS).contains(&t.chars().count()) => t,
        None | Some(Value::Null) => return Err(ApiError::missing_field(&format!("{at}.text"))),
        Some(_) => return Err(ApiError::invalid_field(&format!("{at}.text"), TEXT_WHY)),
    };
    let present = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    let mut out = Map::new();
    out.insert("text".into(), Value::String(text.clone()));
    match (present("callback_data"), present("url")) {
        (true, false) => match o.get("callback_data") {
            Some(Value::String(d)) if (1..=MAX_CALLBACK_DATA_BYTES).contains(&d.len()) => {
                out.insert("callback_data".into(), Value::String(d.clone()));
            }
            _ => return Err(ApiError::invalid_field(&format!("{at}.callback_data"), DATA_WHY)),
        },
        (false, true) => match o.get("url") {
            Some(Value::String(u)) if url_allowed(u) => {
                out.insert("url".into(), Value::String(u.clone()));
            }
            _ => return Err(ApiError::invalid_field(&format!("{at}.url"), URL_WHY)),
        },
        _ => return Err(ApiError::invalid_field(at, BOTH_WHY)),
    }
    Ok(out)
}

/// A button's URL: `http://` or `https://` (the scheme in any case) with
/// a host, no whitespace or control character, at most
/// [`MAX_URL_CHARS`]. Every other scheme (`javascript:`, `data:`,
/// `file:`…) is refused: a client opens the URL when the button is
/// pressed.
pub fn url_allowed(u: &str) -> bool {
    if u.chars().count() > MAX_URL_CHARS || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let lower = u.get(..8).unwrap_or(u).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &u[8..]
    } else if lower.starts_with("http://") {
        &u[7..]
    } else {
        return false;
    };
    // A host must follow: "http://" alone or "http:///path" is no URL.
    !rest.is_empty() && !rest.starts_with(['/', '?', '#'])
}

/// Whether a stored keyboard (its JSON) has a button with exactly this
/// `callback_data`.
pub fn has_callback(keyboard: &str, data: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(keyboard.as_bytes()) else { return false };
    v.get("inline_keyboard").and_then(Value::as_array).is_some_and(|rows| {
        rows.iter()
            .filter_map(Value::as_array)
            .flatten()
            .any(|b| b.get("callback_data").and_then(Value::as_str) == Some(data))
    })
}

/// answerCallbackQuery's `text`: 0 to [`MAX_ANSWER_TEXT_CHARS`]
/// characters.
pub fn answer_text(t: &str) -> ApiResult<()> {
    if t.chars().count() > MAX_ANSWER_TEXT_CHARS {
        return Err(ApiError::invalid_field("text", "must be a string of 0 to 200 characters"));
    }
    Ok(())
}

/// Where a callback query stands when its bot answers, given what the
/// store holds of it (its bot, whether an outcome was written, its
/// deadline) and the time: the refusal, or `Ok` to answer it now.
pub fn may_answer(query_bot: &str, bot: &str, outcome: Option<&str>, deadline_ms: u64, now_ms: u64) -> ApiResult<()> {
    if query_bot != bot {
        return Err(ApiError::callback_query_not_found());
    }
    match outcome {
        Some("answered") => Err(ApiError::callback_query_answered()),
        Some(_) => Err(ApiError::callback_query_expired()),
        None if now_ms >= deadline_ms => Err(ApiError::callback_query_expired()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(v: Value) -> (String, String) {
        let e = parse(Some(&v)).unwrap_err();
        let f = e.parameters().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("").to_string();
        (e.code().as_str().to_string(), f)
    }

    fn kb(rows: usize, per_row: usize) -> Value {
        let row: Vec<Value> = (0..per_row).map(|i| json!({"text": "b", "callback_data": format!("d{i}")})).collect();
        json!({"inline_keyboard": vec![Value::Array(row); rows]})
    }

    #[test]
    fn rows_buttons_and_totals() {
        // 10 rows of 8 = 80 buttons: every limit at most reached.
        let ok = parse(Some(&kb(10, 8)));
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(field(kb(11, 1)), ("invalid_field".into(), "reply_markup.inline_keyboard".into()));
        assert_eq!(field(kb(1, 9)), ("invalid_field".into(), "reply_markup.inline_keyboard.0".into()));
        assert_eq!(field(kb(1, 0)), ("invalid_field".into(), "reply_markup.inline_keyboard.0".into()));
        assert!(parse(Some(&kb(0, 0))).unwrap().is_some(), "an empty keyboard is a keyboard");
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(&Value::Null)).unwrap(), None);
        assert_eq!(field(json!({})), ("missing_field".into(), "reply_markup.inline_keyboard".into()));
        assert_eq!(field(json!([])), ("invalid_field".into(), "reply_markup".into()));
    }

    #[test]
    fn buttons_have_text_and_exactly_one_action() {
        let one = |b: Value| field(json!({"inline_keyboard": [[b]]}));
        let at = "reply_markup.inline_keyboard.0.0";
        assert_eq!(one(json!({"text": "a"})), ("invalid_field".into(), at.into()));
        assert_eq!(
            one(json!({"text": "a", "callback_data": "x", "url": "https://e.org"})),
            ("invalid_field".into(), at.into())
        );
        assert_eq!(one(json!({"callback_data": "x"})), ("missing_field".into(), format!("{at}.text")));
        assert_eq!(one(json!({"text": "", "callback_data": "x"})), ("invalid_field".into(), format!("{at}.text")));
        assert_eq!(
            one(json!({"text": "é".repeat(65), "callback_data": "x"})),
            ("invalid_field".into(), format!("{at}.text"))
        );
        assert_eq!(
            one(json!({"text": "a", "callback_data": "x".repeat(65)})),
            ("invalid_field".into(), format!("{at}.callback_data"))
        );
        // 64 bytes, not characters: 32 two-byte characters fit, 33 do not.
        assert_eq!(
            one(json!({"text": "a", "callback_data": "é".repeat(33)})),
            ("invalid_field".into(), format!("{at}.callback_data"))
        );
        assert_eq!(
            one(json!({"text": "a", "callback_data": ""})),
            ("invalid_field".into(), format!("{at}.callback_data"))
        );
        for bad in [
            "javascript:alert(1)",
            "data:text/html,x",
            "JAVASCRIPT://x",
            "ftp://e.org",
            "https://",
            "http:///x",
            "https://e.org/a b",
        ] {
            assert_eq!(one(json!({"text": "a", "url": bad})), ("invalid_field".into(), format!("{at}.url")), "{bad}");
        }
        let long = format!("https://e.org/{}", "a".repeat(2048 - 14));
        assert!(parse(Some(&json!({"inline_keyboard": [[{"text": "a", "url": long}]]}))).is_ok());
        let long = format!("{long}a");
        assert_eq!(one(json!({"text": "a", "url": long})), ("invalid_field".into(), format!("{at}.url")));
        let ok = parse(Some(&json!({"inline_keyboard": [[{"text": "é".repeat(64), "callback_data": "é".repeat(32), "extra": 1}, {"text": "u", "url": "HTTP://e.org"}]]})))
            .unwrap()
            .unwrap();
        assert_eq!(
            ok.0,
            format!(
                r#"{{"inline_keyboard":[[{{"callback_data":"{}","text":"{}"}},{{"text":"u","url":"HTTP://e.org"}}]]}}"#,
                "é".repeat(32),
                "é".repeat(64)
            )
        );
        assert!(has_callback(&ok.0, &"é".repeat(32)));
        assert!(!has_callback(&ok.0, "é"));
    }

    #[test]
    fn over_100_buttons_in_all_is_said_before_the_rows() {
        let e = parse(Some(&kb(13, 8))).unwrap_err();
        assert_eq!(e.description(), "field reply_markup.inline_keyboard must hold at most 100 buttons in all");
        // 100 exactly passes the total, and the row count refuses it.
        let mut v = kb(12, 8);
        v["inline_keyboard"].as_array_mut().unwrap().push(kb(1, 4)["inline_keyboard"][0].clone());
        let e = parse(Some(&v)).unwrap_err();
        assert_eq!(e.description(), "field reply_markup.inline_keyboard must be an array of at most 10 rows");
    }

    #[test]
    fn the_answer_rule() {
        assert_eq!(may_answer("bot_a", "bot_b", None, 10, 0).unwrap_err().code().as_str(), "callback_query_not_found");
        assert_eq!(
            may_answer("bot_a", "bot_a", Some("answered"), 10, 0).unwrap_err().code().as_str(),
            "callback_query_answered"
        );
        assert_eq!(
            may_answer("bot_a", "bot_a", Some("expired"), 10, 0).unwrap_err().code().as_str(),
            "callback_query_expired"
        );
        assert_eq!(may_answer("bot_a", "bot_a", None, 10, 10).unwrap_err().code().as_str(), "callback_query_expired");
        assert!(may_answer("bot_a", "bot_a", None, 10, 9).is_ok());
        assert!(answer_text(&"é".repeat(200)).is_ok());
        assert_eq!(answer_text(&"é".repeat(201)).unwrap_err().code().as_str(), "invalid_field");
    }
}
