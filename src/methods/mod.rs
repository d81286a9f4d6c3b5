//! Method implementations: the five bot methods (`bot`), the host API
//! (`admin`), field parsing shared by both (`params`) and the one write path
//! every message takes, whoever sends it (`messages`).

pub mod admin;
pub mod bot;
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
