//! The request body as a JSON object, with the error codes of
//! docs/errors.md; its fields are read by the typed bodies of
//! [`super::requests`].

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
