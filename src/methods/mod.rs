//! Method implementations: the five bot methods (`bot`), the host API
//! (`admin`), field parsing shared by both (`params`) and the one write path
//! every message takes, whoever sends it (`messages`).

pub mod admin;
pub mod bot;
pub mod console;
pub mod messages;
pub mod params;

/// How long an Idempotency-Key is remembered.
pub const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;
