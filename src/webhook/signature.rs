//! Webhook signatures, as the Standard Webhooks specification defines
//! them (<https://www.standardwebhooks.com/>): the secret is `whsec_`
//! followed by the base64 of its key bytes; a delivery carries
//! `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature: v1,<base64 of HMAC-SHA256(key, id.timestamp.body)>`.
//! Receivers verify them with that project's libraries, so nothing here
//! may differ from the specification, down to the base64 alphabet
//! (standard, padded).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The prefix every webhook secret carries.
pub const SECRET_PREFIX: &str = "whsec_";

/// Key bytes in a secret this service makes. The specification allows
/// 24 to 64; 32 is the size of the HMAC's own output.
pub const SECRET_KEY_BYTES: usize = 32;

/// A secret in its wire form (`whsec_…`) from key bytes drawn by the
/// caller from the service's random source.
pub fn secret_from_key(key: &[u8; SECRET_KEY_BYTES]) -> String {
    let mut s = String::with_capacity(SECRET_PREFIX.len() + 44);
    s.push_str(SECRET_PREFIX);
    STANDARD.encode_string(key, &mut s);
    s
}

/// The key bytes of a `whsec_…` secret; `None` when it is not one.
pub fn key_of_secret(secret: &str) -> Option<Vec<u8>> {
    let b64 = secret.strip_prefix(SECRET_PREFIX)?;
    let key = STANDARD.decode(b64).ok()?;
    (!key.is_empty()).then_some(key)
}

/// The value of the `webhook-signature` header for one attempt.
pub fn sign(key: &[u8], webhook_id: &str, timestamp_s: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(webhook_id.as_bytes());
    mac.update(b".");
    mac.update(itoa::Buffer::new().format(timestamp_s).as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let mut out = String::with_capacity(3 + 44);
    out.push_str("v1,");
    STANDARD.encode_string(tag, &mut out);
    out
}

/// The keys a bot's deliveries are signed with: its secret's, and for a
/// while after a rotation the replaced secret's too (until `until_ms`,
/// Unix ms), so a receiver still on the old secret verifies every delivery
/// of the overlap and one on the new secret does as well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeys {
    pub current: Vec<u8>,
    pub previous: Option<(Vec<u8>, u64)>,
}

impl SigningKeys {
    /// The value of `webhook-signature` for an attempt made at `now_ms`:
    /// `v1,<current>`, then ` v1,<previous>` while the overlap lasts (the
    /// specification's space-separated list; a receiver accepts a delivery
    /// when any entry matches its secret).
    pub fn sign(&self, webhook_id: &str, timestamp_s: u64, body: &[u8], now_ms: u64) -> String {
        let mut out = sign(&self.current, webhook_id, timestamp_s, body);
        if let Some((key, until_ms)) = &self.previous {
            if now_ms < *until_ms {
                out.push(' ');
                out.push_str(&sign(key, webhook_id, timestamp_s, body));
            }
        }
        out
    }
}

impl From<Vec<u8>> for SigningKeys {
    /// Only this key: no rotation overlaps.
    fn from(current: Vec<u8>) -> SigningKeys {
        SigningKeys { current, previous: None }
    }
}

/// The `webhook-id` of a bot's event: the same on every attempt, and
/// different for every (bot, event), so a receiver that serves several
/// bots can drop duplicates by id alone.
pub fn webhook_id(bot_id: &str, seq: i64) -> String {
    let mut id = String::with_capacity(5 + bot_id.len() + 20);
    id.push_str("msg_");
    id.push_str(bot_id);
    id.push('_');
    id.push_str(itoa::Buffer::new().format(seq));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification's own test suites (the Python and
    /// JavaScript `standardwebhooks` libraries test this exact triple).
    #[test]
    fn the_specifications_example_signs_as_its_libraries_do() {
        let key = key_of_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    /// Signed by the `standardwebhooks` Python library itself
    /// (`Webhook(secret).sign("msg_b_1_7", 1614265330, '{"update_id":7}')`).
    #[test]
    fn a_secret_of_ours_signs_as_the_python_library_does() {
        let key = key_of_secret("whsec_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=").unwrap();
        assert_eq!(
            sign(&key, "msg_b_1_7", 1614265330, br#"{"update_id":7}"#),
            "v1,dyANNi+G/ogiQVn64CL3QdsVCJQYiFkLWQIsrVdD+kg="
        );
    }

    #[test]
    fn secrets_round_trip_and_other_strings_are_not_secrets() {
        let key = [7u8; SECRET_KEY_BYTES];
        let s = secret_from_key(&key);
        assert_eq!(s, "whsec_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=");
        assert_eq!(key_of_secret(&s).unwrap(), key.to_vec());
        assert_eq!(key_of_secret("BwcHBwcH"), None);
        assert_eq!(key_of_secret("whsec_"), None);
        assert_eq!(key_of_secret("whsec_not base64!"), None);
    }

    #[test]
    fn during_an_overlap_both_keys_sign_the_new_one_first_then_only_the_new_one() {
        let keys = SigningKeys { current: vec![1; 32], previous: Some((vec![2; 32], 5_000)) };
        let (new, old) = (sign(&[1; 32], "msg_b_1_7", 4, b"{}"), sign(&[2; 32], "msg_b_1_7", 4, b"{}"));
        assert_eq!(keys.sign("msg_b_1_7", 4, b"{}", 4_999), format!("{new} {old}"));
        assert_eq!(keys.sign("msg_b_1_7", 4, b"{}", 5_000), new);
        assert_eq!(SigningKeys::from(vec![1; 32]).sign("msg_b_1_7", 4, b"{}", 0), new);
    }

    #[test]
    fn ids_are_per_bot_and_per_event() {
        assert_eq!(webhook_id("b_1", 42), "msg_b_1_42");
        assert_ne!(webhook_id("b_1", 42), webhook_id("b_2", 42));
    }
}
