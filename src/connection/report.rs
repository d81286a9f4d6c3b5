//! A condition said at most once per period, with how often it happened
//! meanwhile: the operator hears of it, and a flood does not flood the log.

use std::sync::Mutex;

/// Counts occurrences and says when a line is due.
#[derive(Debug)]
pub struct Report {
    every_ms: u64,
    /// (when the last line was due, occurrences since).
    state: Mutex<(Option<u64>, u64)>,
}

impl Report {
    pub const fn new(every_ms: u64) -> Report {
        Report { every_ms, state: Mutex::new((None, 0)) }
    }

    /// One occurrence at `now_ms`: `Some(n)` when a line is due, `n` the
    /// occurrences since the last line (this one included).
    pub fn note(&self, now_ms: u64) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.1 += 1;
        match s.0 {
            Some(last) if now_ms.saturating_sub(last) < self.every_ms => None,
            _ => {
                let n = s.1;
                *s = (Some(now_ms), 0);
                Some(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_occurrence_is_said_then_at_most_once_a_period_with_the_count() {
        let r = Report::new(10_000);
        assert_eq!(r.note(5), Some(1));
        assert_eq!(r.note(6), None);
        assert_eq!(r.note(10_004), None);
        assert_eq!(r.note(10_005), Some(3));
        assert_eq!(r.note(20_005), Some(1));
        // A clock that went back waits out the period from the last line.
        assert_eq!(r.note(3), None);
        assert_eq!(r.note(30_005), Some(2));
    }
}
