//! Method implementations: the bot methods (`bot`), the host API
//! (`admin`), the body as a JSON object (`params`) and its typed reading
//! (`requests`), and the one write path every message takes, whoever sends
//! it (`messages`). The rules they apply are `crate::rules`'.

pub mod admin;
pub mod bot;
pub mod buttons;
pub mod console;
pub mod messages;
pub mod params;
pub mod requests;
pub mod updates;
pub mod webhook;

/// Serializes a value the core built itself; failure would be a bug.
pub fn to_json<T: serde::Serialize>(v: &T) -> crate::error::ApiResult<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| crate::error::ApiError::internal(format!("serialization: {e}")))
}
