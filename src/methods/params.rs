//! Body parsing and field extraction with the error codes of docs/errors.md.

use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

pub type Body = Map<String, Value>;

/// Parses the body: empty is `{}`, malformed is `invalid_json`, a JSON value
/// that is not an object is `invalid_request`.
pub fn parse_body(bytes: &[u8]) -> ApiResult<Body> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::invalid_request("the request body must be a JSON object")),
        Err(e) => Err(ApiError::invalid_json(e)),
    }
}

/// A required string field; absent or null is `missing_field`.
pub fn req_str<'a>(b: &'a Body, field: &str) -> ApiResult<&'a str> {
    match b.get(field) {
        None | Some(Value::Null) => Err(ApiError::missing_field(field)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ApiError::invalid_field(field, "must be a string")),
    }
}

/// An optional string field; null is the same as absent.
pub fn opt_str<'a>(b: &'a Body, field: &str) -> ApiResult<Option<&'a str>> {
    match b.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid_field(field, "must be a string")),
    }
}

pub fn opt_bool(b: &Body, field: &str) -> ApiResult<Option<bool>> {
    match b.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(v)) => Ok(Some(*v)),
        Some(_) => Err(ApiError::invalid_field(field, "must be a boolean")),
    }
}

pub fn req_bool(b: &Body, field: &str) -> ApiResult<bool> {
    opt_bool(b, field)?.ok_or_else(|| ApiError::missing_field(field))
}

/// An optional non-negative integer no larger than `max`.
pub fn opt_uint(b: &Body, field: &str, max: u64) -> ApiResult<Option<u64>> {
    match b.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if v <= max => Ok(Some(v)),
            _ => Err(ApiError::invalid_field(field, &format!("must be an integer from 0 to {max}"))),
        },
        Some(_) => Err(ApiError::invalid_field(field, &format!("must be an integer from 0 to {max}"))),
    }
}

/// A message id: a decimal string (docs/decisions.md) ("1", "2", …); a JSON
/// integer is accepted too, as Telegram clients send one.
pub fn opt_message_id(b: &Body, field: &str) -> ApiResult<Option<i64>> {
    let bad = || ApiError::invalid_field(field, "must be a message id: a decimal string such as \"1\"");
    match b.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if s.is_empty() || s.len() > 18 || !s.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let v: i64 = s.parse().map_err(|_| bad())?;
            if v < 1 {
                return Err(bad());
            }
            Ok(Some(v))
        }
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) if v >= 1 => Ok(Some(v)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

pub fn req_message_id(b: &Body, field: &str) -> ApiResult<i64> {
    opt_message_id(b, field)?.ok_or_else(|| ApiError::missing_field(field))
}

pub const MAX_TEXT_CHARS: usize = 5000;

/// `text`: required, 1 to 5000 Unicode scalar values.
pub fn text(b: &Body) -> ApiResult<&str> {
    let t = req_str(b, "text")?;
    if t.is_empty() {
        return Err(ApiError::text_empty());
    }
    // Bytes bound chars from above: only long strings need counting.
    if t.len() > MAX_TEXT_CHARS && t.chars().count() > MAX_TEXT_CHARS {
        return Err(ApiError::text_too_long(MAX_TEXT_CHARS));
    }
    Ok(t)
}

/// `parse_mode`: absent, null or `plain`.
pub fn parse_mode(b: &Body) -> ApiResult<()> {
    match b.get("parse_mode") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s == "plain" => Ok(()),
        Some(_) => Err(ApiError::unsupported_parse_mode()),
    }
}

/// A short human-readable name: 1 to `max` characters.
pub fn name<'a>(b: &'a Body, field: &str, max: usize, required: bool) -> ApiResult<Option<&'a str>> {
    let v = if required { Some(req_str(b, field)?) } else { opt_str(b, field)? };
    if let Some(s) = v {
        let n = s.chars().count();
        if n == 0 || n > max {
            return Err(ApiError::invalid_field(field, &format!("must be 1 to {max} characters")));
        }
    }
    Ok(v)
}

/// The body's `chat_id` when it is a string, without building the body:
/// a hint for reading the chat early, never a validation (the method
/// parses the body itself).
pub fn peek_chat_id(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        chat_id: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Peek<'_>>(bytes).ok()?.chat_id.map(|c| c.into_owned())
}
