//! The error envelope of every failed request (docs/errors.md), and the
//! one place each error code is made.
//!
//! Every code has exactly one constructor below, with one description text
//! (a template when the text names a field, a method or a limit). Nothing
//! outside this module can build an `ApiError` from a bare code: `new` is
//! private. `docs/errors.md` lists the same table; a test renders
//! [`catalog`] and compares.

pub use crate::protocol::ErrorCode;
use crate::protocol::RateLimitScope;
use serde_json::{Map, Value};

/// A refused request: HTTP status, stable machine code, human description and
/// optional parameters. The HTTP status always equals `status`.
///
/// The fields are read through accessors, so the envelope can grow without
/// breaking hosts; only the constructors below make one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ApiError {
    pub(crate) status: u16,
    pub(crate) code: ErrorCode,
    pub(crate) description: String,
    pub(crate) parameters: Option<Map<String, Value>>,
    /// Extra response headers (`Allow`, `Retry-After`, `Upgrade`).
    pub(crate) headers: Vec<(&'static str, String)>,
    /// For a 500: what failed inside (SQLite's message, a caught panic),
    /// for the host's logs. Never part of the response.
    pub(crate) detail: Option<Box<str>>,
}

/// What a rule or a store call gives: its value, or the [`ApiError`] to answer.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: ErrorCode, description: impl Into<String>) -> ApiError {
        ApiError {
            status: code.status(),
            code,
            description: description.into(),
            parameters: None,
            headers: Vec::new(),
            detail: None,
        }
    }

    /// The HTTP status (always `code().status()`).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The stable machine code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The human description sent in the envelope.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The envelope's `parameters`, when the code has any.
    pub fn parameters(&self) -> Option<&Map<String, Value>> {
        self.parameters.as_ref()
    }

    /// Extra response headers (`Allow`, `Retry-After`, `Upgrade`).
    pub fn headers(&self) -> &[(&'static str, String)] {
        &self.headers
    }

    /// What failed inside (for a 5xx), for the host's logs; never sent.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    fn with_param(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.parameters.get_or_insert_with(Map::new).insert(key.to_string(), value.into());
        self
    }

    fn with_header(mut self, name: &'static str, value: String) -> ApiError {
        self.headers.push((name, value));
        self
    }

    /// The JSON body `{"ok":false,"error_code":..,"error":..,"description":..,"parameters"?:..}`.
    pub fn body(&self) -> Vec<u8> {
        // A struct keeps the envelope's field order (docs/errors.md): ok first.
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
            error: self.code.as_str(),
            description: &self.description,
            parameters: self.parameters.as_ref(),
        })
        .unwrap_or_default()
    }

    // ---- 400 ----

    /// The request is not one the API can read: malformed HTTP, framing, or
    /// a body that is JSON but not an object. `detail` says which.
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, detail)
    }
    pub fn invalid_json(detail: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidJson, format!("request body is not valid JSON: {detail}"))
    }
    pub fn missing_field(field: &str) -> Self {
        Self::new(ErrorCode::MissingField, format!("field {field} is required")).with_param("field", field)
    }
    /// `why` completes "field `<name>` …", e.g. "must be a string".
    pub fn invalid_field(field: &str, why: &str) -> Self {
        Self::new(ErrorCode::InvalidField, format!("field {field} {why}")).with_param("field", field)
    }
    /// A header the request may carry once came twice (`name` says which).
    pub fn duplicate_header(name: &str) -> Self {
        Self::new(ErrorCode::DuplicateHeader, format!("the {name} header may appear only once"))
            .with_param("field", name)
    }
    /// `why` completes "the webhook URL …", e.g. "must use https".
    pub fn invalid_webhook_url(why: &str) -> Self {
        Self::new(ErrorCode::InvalidWebhookUrl, format!("the webhook URL {why}")).with_param("field", "url")
    }
    /// `what` names the class of address, e.g. "a loopback address".
    pub fn webhook_address_forbidden(what: &str) -> Self {
        Self::new(
            ErrorCode::WebhookAddressForbidden,
            format!(
                "the webhook URL points at {what}, which this server does not deliver to{}",
                crate::webhook::target::ALLOW_PRIVATE_HINT
            ),
        )
        .with_param("field", "url")
    }
    pub fn text_empty() -> Self {
        Self::new(ErrorCode::TextEmpty, "text must contain at least 1 character").with_param("field", "text")
    }
    pub fn text_too_long(max: usize) -> Self {
        Self::new(ErrorCode::TextTooLong, format!("text must contain at most {max} characters"))
            .with_param("field", "text")
    }
    pub fn unsupported_parse_mode() -> Self {
        Self::new(ErrorCode::UnsupportedParseMode, "only parse_mode \"plain\" is supported")
            .with_param("field", "parse_mode")
    }
    pub fn reply_target_not_found() -> Self {
        Self::new(ErrorCode::ReplyTargetNotFound, "reply_to_message_id names no live message in this chat")
            .with_param("field", "reply_to_message_id")
    }

    /// answerCallbackQuery on a query already answered.
    pub fn callback_query_answered() -> Self {
        Self::new(ErrorCode::CallbackQueryAnswered, "this callback query was answered already")
            .with_param("field", "callback_query_id")
    }
    /// answerCallbackQuery after `callback_answer_timeout_s` (the user's
    /// client has given up waiting).
    pub fn callback_query_expired() -> Self {
        Self::new(ErrorCode::CallbackQueryExpired, "this callback query expired before it was answered")
            .with_param("field", "callback_query_id")
    }

    // ---- 401 ----

    /// No `Authorization` header, or one of another scheme.
    pub fn missing_authorization(scheme: &str) -> Self {
        Self::new(ErrorCode::MissingAuthorization, format!("expected the header Authorization: {scheme} <credential>"))
    }
    pub fn invalid_token() -> Self {
        Self::new(ErrorCode::InvalidToken, "the credential is unknown, rotated away or of the wrong kind")
    }

    // ---- 403 ----

    pub fn bot_suspended() -> Self {
        Self::new(ErrorCode::BotSuspended, "this bot is suspended")
    }
    pub fn tier_forbidden(method: &str) -> Self {
        Self::new(ErrorCode::TierForbidden, format!("{method} is not available to bots of the free tier"))
    }
    pub fn bot_not_started() -> Self {
        Self::new(ErrorCode::BotNotStarted, "the user has not started this bot")
    }
    pub fn blocked_by_user() -> Self {
        Self::new(ErrorCode::BlockedByUser, "the user has blocked this bot")
    }
    pub fn user_blocked_by_bot() -> Self {
        Self::new(ErrorCode::UserBlockedByBot, "the bot has blocked the user")
    }
    /// The sender (a bot, or a user through the host API) is not, or no
    /// longer, a member of the chat.
    pub fn not_member() -> Self {
        Self::new(ErrorCode::NotMember, "the sender is not a member of this chat")
    }
    pub fn chat_dissolved() -> Self {
        Self::new(ErrorCode::ChatDissolved, "the group has been dissolved")
    }
    pub fn bots_cannot_send() -> Self {
        Self::new(ErrorCode::BotsCannotSend, "the group's permissions do not allow bots to send")
    }
    pub fn not_message_owner() -> Self {
        Self::new(ErrorCode::NotMessageOwner, "the message was not sent by this bot")
    }
    pub fn token_not_recoverable() -> Self {
        Self::new(ErrorCode::TokenNotRecoverable,
            "no operational token copy can be opened (only official bots have one, sealed with the configured operational_key); rotate to get a new token",
        )
    }

    // ---- 404 ----

    /// No method at this path (unknown name, a path outside `/bot/` and
    /// `/admin/`, or a method this service does not offer). The path is not
    /// repeated: a client that put a credential in it (`/bot<token>/getMe`,
    /// `/bot/<token>/getMe`) would see it again in its error, and its
    /// library would log it.
    pub fn method_not_found() -> Self {
        Self::new(ErrorCode::MethodNotFound, "no method at this path (method names are case-sensitive)")
    }
    /// A path of the Telegram form `/bot<token>/<method>`: the client put
    /// its credential where botspace never reads one. Named, so the client
    /// learns where the token goes; the path is not repeated.
    pub fn token_in_path() -> Self {
        Self::new(ErrorCode::TokenInPath,
            "botspace takes the bot token in the header Authorization: Bot <token>, not in the path; call POST /bot/<method>",
        )
    }
    pub fn chat_not_found() -> Self {
        Self::new(ErrorCode::ChatNotFound, "no chat with this id is visible to the caller")
    }
    pub fn message_not_found() -> Self {
        Self::new(ErrorCode::MessageNotFound, "no live message with this id in the chat")
    }
    pub fn user_not_found() -> Self {
        Self::new(ErrorCode::UserNotFound, "no user with this id")
    }
    pub fn bot_not_found() -> Self {
        Self::new(ErrorCode::BotNotFound, "no bot with this id")
    }
    pub fn member_not_found(id: &str) -> Self {
        Self::new(ErrorCode::MemberNotFound, format!("no user or bot {id} in this chat"))
            .with_param("field", "member_id")
    }

    /// pressButton: the message is gone, or its current keyboard has no
    /// button with this `callback_data`.
    pub fn button_not_found() -> Self {
        Self::new(ErrorCode::ButtonNotFound, "the message's current keyboard has no button with this callback_data")
            .with_param("field", "callback_data")
    }
    /// answerCallbackQuery: no query with this id went to the calling bot.
    pub fn callback_query_not_found() -> Self {
        Self::new(ErrorCode::CallbackQueryNotFound, "no callback query with this id was sent to this bot")
            .with_param("field", "callback_query_id")
    }

    // ---- 405, 409, 411, 413, 415, 426, 429, 431 ----

    /// `allow` is the one method the path accepts.
    /// Says the allowed method, not the path, which may hold a credential
    /// (see [`ApiError::method_not_found`]).
    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self::new(ErrorCode::MethodNotAllowed, format!("this path accepts {allow} only"))
            .with_header("Allow", allow.into())
    }
    /// A host's deadline for a whole request passed before it arrived
    /// (the hosts' `--request-timeout`): answered, then the connection
    /// closes.
    pub fn request_timeout() -> Self {
        Self::new(ErrorCode::RequestTimeout, "the request did not arrive in time")
    }
    pub fn idempotency_key_reused() -> Self {
        Self::new(ErrorCode::IdempotencyKeyReused, "this Idempotency-Key was used with a different request")
    }
    pub fn handle_taken() -> Self {
        Self::new(ErrorCode::HandleTaken, "another bot already has this handle (handles compare case-insensitively)")
            .with_param("field", "handle")
    }
    pub fn webhook_active() -> Self {
        Self::new(
            ErrorCode::WebhookActive,
            "a webhook is set for this bot: its events are delivered there; call deleteWebhook to use getUpdates",
        )
    }
    /// A parked getUpdates answered early: its bot parked more than
    /// `MAX_PARKED_POLLS_PER_BOT` and this was its oldest.
    pub fn poll_superseded() -> Self {
        let max = crate::protocol::MAX_PARKED_POLLS_PER_BOT;
        Self::new(
            ErrorCode::PollSuperseded,
            format!(
                "terminated by a newer getUpdates of this bot: at most {max} may wait at once; run one poller per bot"
            ),
        )
    }
    pub fn length_required() -> Self {
        Self::new(ErrorCode::LengthRequired, "a request body needs Content-Length or Transfer-Encoding: chunked")
    }
    pub fn payload_too_large(max: usize) -> Self {
        Self::new(ErrorCode::PayloadTooLarge, format!("request body is larger than {max} bytes"))
    }
    pub fn unsupported_media_type() -> Self {
        Self::new(ErrorCode::UnsupportedMediaType, "Content-Type must be application/json")
    }
    /// The body of `importDatabase` is an image, not JSON.
    pub fn unsupported_image_type() -> Self {
        Self::new(
            ErrorCode::UnsupportedMediaType,
            "Content-Type must be application/vnd.sqlite3 or application/octet-stream",
        )
    }
    pub fn upgrade_required() -> Self {
        Self::new(
            ErrorCode::UpgradeRequired,
            "GET /bot/gateway needs a WebSocket upgrade (RFC 6455, version 13): connect with a WebSocket client",
        )
        .with_header("Upgrade", "websocket".into())
    }
    /// `scope` is what ran out.
    pub fn rate_limited(wait_ms: u64, scope: RateLimitScope) -> Self {
        let secs = wait_ms.div_ceil(1000).max(1);
        Self::new(ErrorCode::RateLimited, format!("too many requests; retry after {secs} s"))
            .with_param("retry_after", secs)
            .with_param("retry_after_ms", wait_ms)
            .with_param("scope", scope.as_str())
            .with_header("Retry-After", secs.to_string())
    }
    pub fn connection_limit(open: u32, limit: u32) -> Self {
        Self::new(
            ErrorCode::ConnectionLimit,
            format!("this bot already has {open} of {limit} gateway connections open"),
        )
        .with_param("retry_after", 1)
        .with_param("retry_after_ms", 1000)
        .with_header("Retry-After", "1".into())
    }
    pub fn headers_too_large(max_bytes: usize, max_fields: usize) -> Self {
        Self::new(
            ErrorCode::HeadersTooLarge,
            format!("request line and headers exceed {max_bytes} bytes or {max_fields} fields"),
        )
    }

    // ---- 500 ----

    /// The response says only that nothing was written: SQLite's own text
    /// (table names, paths) is for the host's logs, in `detail`.
    /// The database server cannot be reached (a PostgreSQL store that is
    /// down or restarting): nothing was written, retry later.
    pub fn storage_unavailable(detail: impl std::fmt::Display) -> Self {
        let mut e =
            Self::new(ErrorCode::StorageUnavailable, "the database is unreachable, nothing was written; retry later")
                .with_header("Retry-After", "1".into());
        e.detail = Some(detail.to_string().into());
        e
    }

    /// The connection to the database was lost while it committed, or a
    /// SQLite file's sync failed after it: the write may or may not have
    /// landed (or survive a crash), and only a retry with the same
    /// Idempotency-Key can tell without writing twice.
    pub fn commit_outcome_unknown(detail: impl std::fmt::Display) -> Self {
        let mut e = Self::new(ErrorCode::CommitOutcomeUnknown,
            "the commit could not be confirmed (the database connection was lost while committing, or the disk sync failed): the request may or may not have been written; retry with the same Idempotency-Key",
        )
        .with_header("Retry-After", "1".into());
        e.detail = Some(detail.to_string().into());
        e
    }

    /// The disk under a SQLite file is full (SQLITE_FULL, ENOSPC): the
    /// transaction was rolled back, nothing was written, and the same
    /// request succeeds once space is freed.
    pub fn storage_full(detail: impl std::fmt::Display) -> Self {
        let mut e = Self::new(
            ErrorCode::StorageFull,
            "the database's disk is full, nothing was written; safe to retry once space is freed",
        )
        .with_header("Retry-After", "5".into());
        e.detail = Some(detail.to_string().into());
        e
    }

    /// `GET /readyz` once the host began a graceful stop: the node answers
    /// what it has but should get no new traffic.
    pub fn shutting_down() -> Self {
        Self::new(ErrorCode::ShuttingDown, "the service is stopping; send new requests to another node")
    }

    pub fn internal(detail: impl std::fmt::Display) -> Self {
        let mut e = Self::new(ErrorCode::InternalError, "internal error, nothing was written; safe to retry");
        e.detail = Some(detail.to_string().into());
        e
    }

    /// A host could not get the core's answer to a request (the call
    /// panicked, or its thread is gone): whether the request was carried
    /// out is unknown ([`crate::connection::answer_failed`]).
    pub fn answer_failed() -> Self {
        Self::new(
            ErrorCode::AnswerFailed,
            "the server failed while answering: the request may or may not have been carried out; retry with the same Idempotency-Key",
        )
    }

    /// The WebAssembly build's page storage or SQLite failed outside a
    /// request (opening, exporting, importing, a commit the storage did
    /// not make durable): `detail` is the description.
    pub fn storage_error(detail: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::StorageError, detail.to_string())
    }

    /// A JavaScript runtime that offers no server-side WebSocket upgrade
    /// was asked for `GET /bot/gateway` through `fetch`.
    pub fn websocket_unavailable() -> Self {
        Self::new(
            ErrorCode::WebsocketUnavailable,
            "this runtime offers no server-side WebSocket upgrade: pass options.upgradeWebSocket, or use acceptGateway with your own socket",
        )
    }

    /// A host at its connection limit with every connection busy refuses
    /// a new one.
    pub fn server_busy() -> Self {
        Self::new(ErrorCode::ServerBusy, "too many connections; retry later").with_header("Retry-After", "1".into())
    }
}

/// Every constructor above, called with placeholder arguments (`{field}`),
/// in the order of `docs/errors.md`'s code table.
pub fn catalog() -> Vec<ApiError> {
    type E = ApiError;
    vec![
        E::invalid_request("{detail}"),
        E::invalid_json("{detail}"),
        E::missing_field("{field}"),
        E::invalid_field("{field}", "{why}"),
        E::invalid_webhook_url("{why}"),
        E::webhook_address_forbidden("{address}"),
        E::text_empty(),
        E::text_too_long(5000),
        E::unsupported_parse_mode(),
        E::reply_target_not_found(),
        E::duplicate_header("{header}"),
        E::callback_query_answered(),
        E::callback_query_expired(),
        E::missing_authorization("{scheme}"),
        E::invalid_token(),
        E::bot_suspended(),
        E::tier_forbidden("{method}"),
        E::bot_not_started(),
        E::blocked_by_user(),
        E::user_blocked_by_bot(),
        E::not_member(),
        E::chat_dissolved(),
        E::bots_cannot_send(),
        E::not_message_owner(),
        E::token_not_recoverable(),
        E::method_not_found(),
        E::token_in_path(),
        E::chat_not_found(),
        E::message_not_found(),
        E::user_not_found(),
        E::bot_not_found(),
        E::member_not_found("{id}"),
        E::button_not_found(),
        E::callback_query_not_found(),
        E::method_not_allowed("POST"),
        E::request_timeout(),
        E::idempotency_key_reused(),
        E::handle_taken(),
        E::webhook_active(),
        E::poll_superseded(),
        E::length_required(),
        E::payload_too_large(usize::MAX),
        E::unsupported_media_type(),
        E::upgrade_required(),
        E::rate_limited(1000, RateLimitScope::Bot),
        E::connection_limit(1, 1),
        E::headers_too_large(16 * 1024, 64),
        E::internal("{detail}"),
        E::storage_error("{detail}"),
        E::answer_failed(),
        E::websocket_unavailable(),
        E::storage_unavailable("{detail}"),
        E::commit_outcome_unknown("{detail}"),
        E::storage_full("{detail}"),
        E::shutting_down(),
        E::server_busy(),
    ]
}

/// Why the database failed, as the public API shows it: a message, the
/// two questions a host acts on, and the driver's error only as an opaque
/// [`std::error::Error::source`], so no rusqlite or postgres type is part
/// of botspace's API.
#[derive(Debug)]
#[non_exhaustive]
pub struct StorageError {
    inner: crate::store::StoreError,
}

impl StorageError {
    /// True when the database server is unreachable (down, restarting, the
    /// connection broken): worth retrying later.
    pub fn is_unavailable(&self) -> bool {
        self.inner.is_unavailable()
    }

    /// True when SQLite refused a write because its disk is full.
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.inner)
    }
}

impl From<crate::store::StoreError> for StorageError {
    fn from(inner: crate::store::StoreError) -> Self {
        StorageError { inner }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        if matches!(e, crate::store::StoreError::CommitLost(_)) {
            ApiError::commit_outcome_unknown(e)
        } else if e.is_unavailable() {
            ApiError::storage_unavailable(e)
        } else if e.is_full() {
            ApiError::storage_full(e)
        } else {
            ApiError::internal(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_full_is_storage_full_and_other_sqlite_failures_stay_internal() {
        use crate::store::StoreError;
        let full = ApiError::from(StoreError::test_disk_full());
        assert_eq!((full.status, full.code), (503, ErrorCode::StorageFull));
        let io = ApiError::from(StoreError::test_io_error());
        assert_eq!((io.status, io.code), (500, ErrorCode::InternalError));
    }

    /// The code table of docs/errors.md, as this module renders it.
    fn rendered_table() -> String {
        let mut t = String::from("| status | error | description |\n|---|---|---|\n");
        for e in catalog() {
            let desc = match e.code.as_str() {
                // Placeholder numbers read better as names in the docs.
                "payload_too_large" => e.description.replace(&usize::MAX.to_string(), "{max_body_bytes}"),
                "method_not_allowed" => e.description.replace("POST only", "{allow} only"),
                "rate_limited" => e.description.replace("1 s", "{retry_after} s"),
                "connection_limit" => e.description.replace("1 of 1", "{open} of {limit}"),
                _ => e.description.clone(),
            };
            t.push_str(&format!("| {} | `{}` | {} |\n", e.status, e.code, desc.replace('|', "\\|")));
        }
        t
    }

    /// The catalog has one entry per code of the words table, in its
    /// order, and each entry's response carries its own status, code and
    /// description. (It used to count `Self::new(` in this file's text.)
    #[test]
    fn the_catalog_answers_each_code_once_with_its_own_envelope() {
        let codes: Vec<ErrorCode> = catalog().iter().map(|e| e.code).collect();
        assert_eq!(codes, ErrorCode::ALL, "one catalog entry per code, in the table's order");
        for e in catalog() {
            let (status, code, description) = (e.status, e.code, e.description.clone());
            assert_eq!(status, code.status(), "{code}");
            let resp = e.into_response();
            let text = std::str::from_utf8(&resp).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
            let v: Value = serde_json::from_str(body).unwrap();
            assert_eq!(
                (v["ok"].as_bool(), v["error_code"].as_u64(), v["error"].as_str(), v["description"].as_str()),
                (Some(false), Some(u64::from(status)), Some(code.as_str()), Some(description.as_str())),
                "{body}"
            );
        }
    }

    #[test]
    fn docs_list_every_code_with_its_description() {
        let docs = include_str!("../docs/errors.md");
        let table = rendered_table();
        assert!(
            docs.contains(&table),
            "docs/errors.md must contain this table exactly (copy it under \"## Codes\"):\n\n{table}"
        );
    }
}
