//! Idempotent sendMessage: a request with an `Idempotency-Key` that the
//! same bot sent within [`TTL_MS`] is answered with the stored result when
//! its body is the same request, and refused (`idempotency_key_reused`)
//! when it is not. The store keeps `(bot, key) → (hash, result)`; pruning
//! drops entries older than [`TTL_MS`].

use super::limits::MAX_IDEMPOTENCY_KEY_CHARS;
use crate::auth;
use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

/// How long an Idempotency-Key is remembered.
pub const TTL_MS: u64 = 24 * 3600 * 1000;

/// The `Idempotency-Key` header's value: 1 to
/// [`MAX_IDEMPOTENCY_KEY_CHARS`] visible ASCII characters; `None` without
/// the header.
pub fn key(header: Option<&[u8]>) -> ApiResult<Option<&str>> {
    let Some(raw) = header else {
        return Ok(None);
    };
    match std::str::from_utf8(raw) {
        Ok(k) if (1..=MAX_IDEMPOTENCY_KEY_CHARS).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => {
            Ok(Some(k))
        }
        _ => Err(ApiError::invalid_field(
            "Idempotency-Key",
            &format!("must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters"),
        )),
    }
}

/// The oldest store time (ms) whose entry still counts at `now_ms`.
pub fn cutoff(now_ms: u64) -> i64 {
    now_ms.saturating_sub(TTL_MS) as i64
}

/// SHA-256 of the body's canonical JSON (keys sorted, no whitespace), so a
/// retry that reorders fields is still the same request. serde_json's
/// `Map` is a `BTreeMap` (no `preserve_order` in the build): it writes its
/// keys, nested ones too, in sorted order already.
pub fn request_hash(body: &Map<String, Value>) -> [u8; 32] {
    auth::sha256(&serde_json::to_vec(body).unwrap_or_default())
}

/// What a remembered key means for this request.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision<R> {
    /// Not seen within the TTL: run the request, then remember it.
    Run,
    /// The same request: answer with its stored result, write nothing.
    Replay(R),
}

/// Decides from what the store found for the key (`prior`: the stored
/// hash and result, handed back on a replay) and this request's hash; the
/// hashes compare in constant time.
pub fn decide<R>(prior: Option<(&[u8], R)>, hash: &[u8; 32]) -> ApiResult<Decision<R>> {
    match prior {
        None => Ok(Decision::Run),
        Some((prior_hash, result)) if auth::constant_time_eq(prior_hash, hash) => Ok(Decision::Replay(result)),
        Some(_) => Err(ApiError::idempotency_key_reused()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Map<String, Value> {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn key_is_one_to_64_visible_ascii() {
        assert_eq!(key(None).unwrap(), None);
        assert_eq!(key(Some(b"k-1")).unwrap(), Some("k-1"));
        assert_eq!(key(Some("k".repeat(64).as_bytes())).unwrap().map(str::len), Some(64));
        for bad in [&b""[..], b"a b", "k".repeat(65).as_bytes(), "é".as_bytes(), b"\x7f"] {
            let e = key(Some(bad)).unwrap_err();
            assert_eq!(e.code, "invalid_field");
            assert_eq!(e.description, "field Idempotency-Key must be 1 to 64 visible ASCII characters");
        }
    }

    #[test]
    fn same_request_replays_another_is_refused() {
        let h = request_hash(&body(r#"{"chat_id":"c","text":"hi"}"#));
        // Field order and whitespace do not matter; added fields do.
        assert_eq!(h, request_hash(&body(r#"{ "text": "hi", "chat_id": "c" }"#)));
        // The hash is of the keys in sorted order (hashes are stored: the
        // form must not change), nested objects' keys too.
        assert_eq!(h, auth::sha256(br#"{"chat_id":"c","text":"hi"}"#));
        let nested = request_hash(&body(r#"{"z":{"b":1,"a":[{"d":0,"c":null}]},"a":true}"#));
        assert_eq!(nested, auth::sha256(br#"{"a":true,"z":{"a":[{"c":null,"d":0}],"b":1}}"#));
        let other = request_hash(&body(r#"{"chat_id":"c","text":"hi","parse_mode":"plain"}"#));
        assert_ne!(h, other);
        assert_eq!(decide::<&str>(None, &h).unwrap(), Decision::Run);
        assert_eq!(decide(Some((&h, "{\"r\":1}")), &h).unwrap(), Decision::Replay("{\"r\":1}"));
        assert_eq!(decide(Some((&other, "x")), &h).unwrap_err().code, "idempotency_key_reused");
    }

    #[test]
    fn cutoff_is_a_day_back_and_never_negative() {
        assert_eq!(cutoff(TTL_MS + 5), 5);
        assert_eq!(cutoff(10), 0);
    }
}
