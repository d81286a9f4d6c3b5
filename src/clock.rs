//! The service's only source of time. The core never reads the system clock
//! except through `Clock::System`, so tests and hosts can replace it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a manual clock starts: 2026-01-01T00:00:00Z, so tests see fixed dates.
pub const MANUAL_CLOCK_START_MS: u64 = 1_767_225_600_000;

/// A replaceable clock returning Unix time in milliseconds.
#[derive(Clone)]
pub enum Clock {
    /// `std::time::SystemTime` (not available on wasm32-unknown-unknown).
    System,
    /// Moves only when told to (`advance`, or the host API's `advanceClock`).
    Manual(Arc<AtomicU64>),
    /// Supplied by the host, e.g. `Date.now()` in JavaScript.
    Custom(Arc<dyn Fn() -> u64 + Send + Sync>),
}

impl Clock {
    /// A manual clock starting at [`MANUAL_CLOCK_START_MS`].
    pub fn manual() -> Clock {
        Clock::Manual(Arc::new(AtomicU64::new(MANUAL_CLOCK_START_MS)))
    }

    /// A clock that calls `f` for the current Unix time in milliseconds.
    pub fn custom(f: impl Fn() -> u64 + Send + Sync + 'static) -> Clock {
        Clock::Custom(Arc::new(f))
    }

    /// Current Unix time in milliseconds.
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            Clock::Manual(t) => t.load(Ordering::SeqCst),
            Clock::Custom(f) => f(),
        }
    }

    /// True for a manual clock.
    pub fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual(_))
    }

    /// Moves a manual clock forward; returns false for any other clock.
    pub fn advance_ms(&self, ms: u64) -> bool {
        match self {
            Clock::Manual(t) => {
                t.fetch_add(ms, Ordering::SeqCst);
                true
            }
            _ => false,
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clock::System => f.write_str("Clock::System"),
            Clock::Manual(t) => write!(f, "Clock::Manual({})", t.load(Ordering::SeqCst)),
            Clock::Custom(_) => f.write_str("Clock::Custom"),
        }
    }
}
