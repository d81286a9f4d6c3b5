//! Where random bytes come from: the operating system, or — for tests
//! only — a seeded stream, so a test can know every id and token in
//! advance. Every id, token and nonce the service makes is drawn here.

use crate::error::ApiError;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of random bytes.
#[derive(Debug)]
pub enum Random {
    /// `getrandom`: the OS's secure source. The only choice in production.
    Os,
    /// SHA-256(seed ‖ counter) blocks: reproducible, and therefore only
    /// accepted with the manual clock (see `Config::random_seed`).
    Seeded { seed: u64, counter: AtomicU64 },
}

impl Random {
    pub fn seeded(seed: u64) -> Random {
        Random::Seeded { seed, counter: AtomicU64::new(0) }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&self, buf: &mut [u8]) -> Result<(), ApiError> {
        match self {
            Random::Os => {
                getrandom::fill(buf).map_err(|e| ApiError::internal(format!("OS randomness unavailable: {e}")))
            }
            Random::Seeded { seed, counter } => {
                for chunk in buf.chunks_mut(32) {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let mut h = Sha256::new();
                    h.update(seed.to_le_bytes());
                    h.update(n.to_le_bytes());
                    chunk.copy_from_slice(&h.finalize()[..chunk.len()]);
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_bytes_and_another_seed_others() {
        let (a, b, c) = (Random::seeded(7), Random::seeded(7), Random::seeded(8));
        let mut x = [[0u8; 40]; 3];
        a.fill(&mut x[0]).unwrap();
        b.fill(&mut x[1]).unwrap();
        c.fill(&mut x[2]).unwrap();
        assert_eq!(x[0], x[1]);
        assert_ne!(x[0], x[2]);
        let mut next = [0u8; 40];
        a.fill(&mut next).unwrap();
        assert_ne!(next, x[0], "the stream moves on");
    }
}
