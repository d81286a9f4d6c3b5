//! Credentials: random ids and tokens (from [`Random`]), SHA-256 token hashes,
//! constant-time comparison, the `Authorization` header, and the encrypted
//! operational token copy of official bots.

use crate::error::ApiError;
use crate::random::Random;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use sha2::{Digest, Sha256};

/// Unpadded base64url (RFC 4648 §5).
pub fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A random id: `prefix` + 16 random bytes (128 bits) in base64url.
pub fn new_id(random: &Random, prefix: &str) -> Result<String, ApiError> {
    let mut b = [0u8; 16];
    random.fill(&mut b)?;
    Ok(format!("{prefix}{}", base64url(&b)))
}

/// A bot token: `bot_` + 43 base64url characters (256 random bits).
pub fn new_token(random: &Random) -> Result<String, ApiError> {
    let mut b = [0u8; 32];
    random.fill(&mut b)?;
    Ok(format!("bot_{}", base64url(&b)))
}

/// A `HashMap` keyed by SHA-256 digests of tokens.
pub type DigestMap<V> = std::collections::HashMap<[u8; 32], V, std::hash::BuildHasherDefault<DigestHasher>>;

/// Hashes a SHA-256 digest by its first 8 bytes instead of running SipHash
/// over all 32: a digest is already uniform, and only digests of valid
/// tokens are ever inserted, so nobody can crowd one bucket with chosen keys.
#[derive(Default, Clone, Copy)]
pub struct DigestHasher(u64);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        match bytes.first_chunk::<8>() {
            Some(b) => self.0 ^= u64::from_le_bytes(*b),
            // Not a digest: still a valid (if poor) hash.
            None => bytes.iter().for_each(|&b| self.0 = self.0.rotate_left(8) ^ b as u64),
        }
    }

    /// The array's length prefix carries nothing.
    fn write_usize(&mut self, _: usize) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Compares two byte strings in time that depends only on their lengths
/// (`subtle`, whose `Choice` keeps the optimiser from an early exit).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

/// Splits `Authorization: <Scheme> <credential>`; the scheme matches
/// case-insensitively, the credential exactly. Returns the credential only
/// when the scheme is `scheme`.
pub fn credential<'a>(header: Option<&'a [u8]>, scheme: &str) -> Result<&'a [u8], ApiError> {
    let Some(h) = header else {
        return Err(ApiError::missing_authorization(scheme));
    };
    let h = trim_ascii(h);
    let (word, rest) = match h.iter().position(|&b| b == b' ') {
        Some(i) => (&h[..i], trim_ascii(&h[i + 1..])),
        None => (h, &h[h.len()..]),
    };
    if !word.eq_ignore_ascii_case(scheme.as_bytes()) || rest.is_empty() {
        return Err(ApiError::missing_authorization(scheme));
    }
    Ok(rest)
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |i| i + 1);
    &b[start..end]
}

/// Encrypts an official bot's token under the host's operational key.
/// Output: 12-byte random nonce || ciphertext+tag. The bot id is bound as
/// associated data so a copy cannot be moved to another bot's row.
pub fn seal_token(random: &Random, key: &[u8; 32], bot_id: &str, token: &str) -> Result<Vec<u8>, ApiError> {
    let cipher = ChaCha20Poly1305::new(key.into());
    let mut nonce = [0u8; 12];
    random.fill(&mut nonce)?;
    let ct = cipher
        .encrypt(Nonce::from_slice(&nonce), Payload { msg: token.as_bytes(), aad: bot_id.as_bytes() })
        .map_err(|_| ApiError::internal("token encryption failed"))?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Reverses [`seal_token`]; `None` when the key is wrong or the copy damaged.
pub fn open_token(key: &[u8; 32], bot_id: &str, sealed: &[u8]) -> Option<String> {
    if sealed.len() < 12 + 16 {
        return None;
    }
    let cipher = ChaCha20Poly1305::new(key.into());
    let pt = cipher
        .decrypt(Nonce::from_slice(&sealed[..12]), Payload { msg: &sealed[12..], aad: bot_id.as_bytes() })
        .ok()?;
    String::from_utf8(pt).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_map_finds_each_digest_and_tells_apart_equal_prefixes() {
        let mut m = DigestMap::default();
        for i in 0..1000u32 {
            m.insert(sha256(&i.to_le_bytes()), i);
        }
        for i in 0..1000u32 {
            assert_eq!(m.get(&sha256(&i.to_le_bytes())), Some(&i));
        }
        // Same first 8 bytes, same bucket: equality still decides.
        let mut a = sha256(b"a");
        a[31] ^= 1;
        assert_eq!(m.get(&a), None);
        let b = sha256(b"a");
        m.insert(b, 7);
        assert_eq!(m.get(&a), None);
        assert_eq!(m.get(&b), Some(&7));
    }

    /// Tokens and ids travel in headers, paths and URLs and are compared
    /// as text: the URL-safe alphabet, unpadded, at their fixed lengths.
    /// (It used to test the base64 crate's RFC 4648 vectors.)
    #[test]
    fn tokens_and_ids_use_the_url_safe_alphabet_unpadded() {
        let r = Random::seeded(7);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let (t, id) = (new_token(&r).unwrap(), new_id(&r, "usr_").unwrap());
            assert_eq!((t.len(), id.len()), (4 + 43, 4 + 22), "{t} {id}");
            for c in t[4..].chars().chain(id[4..].chars()) {
                assert!(c.is_ascii_alphanumeric() || c == '-' || c == '_', "{t} {id}");
                seen.insert(c);
            }
        }
        assert!(seen.contains(&'-') && seen.contains(&'_'), "both URL-safe symbols appear: {seen:?}");
    }

    #[test]
    fn token_is_bot_prefix_plus_43_chars() {
        let t = new_token(&Random::Os).unwrap();
        assert_eq!(t.len(), 4 + 43);
        assert!(t.starts_with("bot_"));
        assert_ne!(t, new_token(&Random::Os).unwrap());
    }

    #[test]
    fn sealed_token_opens_only_with_its_key_and_bot() {
        let key = [7u8; 32];
        let sealed = seal_token(&Random::Os, &key, "bot_a", "bot_secret").unwrap();
        assert_eq!(open_token(&key, "bot_a", &sealed).as_deref(), Some("bot_secret"));
        assert_eq!(open_token(&[8u8; 32], "bot_a", &sealed), None);
        assert_eq!(open_token(&key, "bot_b", &sealed), None);
    }

    #[test]
    fn credential_scheme_is_case_insensitive_token_exact() {
        assert_eq!(credential(Some(b"bot abc"), "Bot").unwrap(), b"abc");
        assert_eq!(credential(Some(b"BOT abc"), "Bot").unwrap(), b"abc");
        assert_eq!(credential(Some(b"Bearer abc"), "Bot").unwrap_err().code, "missing_authorization");
        assert_eq!(credential(Some(b"Bot"), "Bot").unwrap_err().code, "missing_authorization");
        assert_eq!(credential(None, "Bot").unwrap_err().code, "missing_authorization");
    }
}
