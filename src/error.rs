//! The error envelope of every failed request (contract section 3).

use serde_json::{Map, Value};

/// A refused request: HTTP status, stable machine code, human description and
/// optional parameters. The HTTP status always equals `status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub description: String,
    pub parameters: Option<Map<String, Value>>,
    /// Extra response headers (`Allow`, `Retry-After`).
    pub headers: Vec<(&'static str, String)>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: u16, code: &'static str, description: impl Into<String>) -> ApiError {
        ApiError { status, code, description: description.into(), parameters: None, headers: Vec::new() }
    }

    pub fn with_param(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.parameters.get_or_insert_with(Map::new).insert(key.to_string(), value.into());
        self
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> ApiError {
        self.headers.push((name, value));
        self
    }

    /// The JSON body `{"ok":false,"error_code":..,"error":..,"description":..,"parameters"?:..}`.
    pub fn body(&self) -> Vec<u8> {
        // A struct keeps the contract's field order: ok first.
        #[derive(serde::Serialize)]
        struct Envelope<'a> {
            ok: bool,
            error_code: u16,
            error: &'a str,
            description: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            parameters: Option<&'a Map<String, Value>>,
        }
        serde_json::to_vec(&Envelope {
            ok: false,
            error_code: self.status,
            error: self.code,
            description: &self.description,
            parameters: self.parameters.as_ref(),
        })
        .unwrap_or_default()
    }

    // Constructors for the contract's codes, so each is spelled once.
    pub fn invalid_json(detail: impl std::fmt::Display) -> Self {
        Self::new(400, "invalid_json", format!("request body is not valid JSON: {detail}"))
    }
    pub fn invalid_request(desc: impl Into<String>) -> Self {
        Self::new(400, "invalid_request", desc)
    }
    pub fn missing_field(field: &str) -> Self {
        Self::new(400, "missing_field", format!("field {field} is required")).with_param("field", field)
    }
    pub fn invalid_field(field: &str, why: &str) -> Self {
        Self::new(400, "invalid_field", format!("field {field} {why}")).with_param("field", field)
    }
    pub fn missing_authorization(desc: &str) -> Self {
        Self::new(401, "missing_authorization", desc)
    }
    pub fn invalid_token() -> Self {
        Self::new(401, "invalid_token", "the credential is unknown, rotated away or of the wrong kind")
    }
    pub fn chat_not_found() -> Self {
        Self::new(404, "chat_not_found", "no chat with this id is visible to the caller")
    }
    pub fn message_not_found() -> Self {
        Self::new(404, "message_not_found", "no live message with this id in the chat")
    }
    pub fn not_member() -> Self {
        Self::new(403, "not_member", "the bot is no longer a member of this chat")
    }
    pub fn chat_dissolved() -> Self {
        Self::new(403, "chat_dissolved", "the group has been dissolved")
    }
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        // The detail names the storage failure, never a secret.
        Self::new(500, "internal_error", format!("internal error, nothing was written; safe to retry ({detail})"))
    }
}

impl From<rusqlite::types::FromSqlError> for ApiError {
    fn from(e: rusqlite::types::FromSqlError) -> Self {
        ApiError::internal(e)
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> Self {
        ApiError::internal(e)
    }
}
