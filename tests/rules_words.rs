//! The protocol's words (`ErrorCode`, `CloseCode`, `EventKind`) are one
//! table each in `src/words.rs`; what the faces and docs list must be
//! exactly those tables.

use botspace::{CloseCode, ErrorCode, EventKind};

/// The members of the TypeScript union `export type <name> = | 'a' | 'b';`
/// in the WASM face's typescript_custom_section.
fn ts_union(name: &str) -> Vec<String> {
    let src = include_str!("../wasm/src/imp.rs");
    let start = src.find(&format!("export type {name} =")).unwrap_or_else(|| panic!("no union {name}"));
    let body = &src[start..];
    let body = &body[..body.find(';').unwrap()];
    body.split('|').skip(1).map(|m| m.trim().trim_matches('\'').to_string()).collect()
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<String> {
    all.iter().map(|w| name(*w).to_string()).collect()
}

#[test]
fn the_typescript_unions_are_the_rust_tables() {
    assert_eq!(ts_union("ErrorCode"), names(ErrorCode::ALL, ErrorCode::as_str));
    assert_eq!(ts_union("CloseReason"), names(CloseCode::ALL, CloseCode::as_str));
    assert_eq!(ts_union("EventKind"), names(EventKind::ALL, EventKind::as_str));
}

/// docs/gateway.md's close-code table names each code with its reason.
#[test]
fn the_gateway_docs_list_every_close_code_with_its_reason() {
    let docs = include_str!("../docs/gateway.md");
    for c in CloseCode::ALL {
        if let Some(code) = c.code() {
            let row = format!("| {code} | `{}` |", c.as_str());
            assert!(docs.contains(&row), "docs/gateway.md has no row starting {row}");
        }
    }
}

#[test]
fn error_codes_parse_from_their_names_and_carry_their_status() {
    assert_eq!("rate_limited".parse::<ErrorCode>(), Ok(ErrorCode::RateLimited));
    assert_eq!(ErrorCode::RateLimited.status(), 429);
    assert_eq!(ErrorCode::StorageUnavailable.status(), 503);
    assert_eq!(ErrorCode::parse("RATE_LIMITED"), None);
    assert_eq!(botspace::ApiError::text_empty().code(), ErrorCode::TextEmpty);
    assert_eq!(botspace::gateway::CLOSE_STORAGE_UNAVAILABLE.code(), Some(4010));
    assert_eq!(CloseCode::try_from(4004), Ok(CloseCode::AuthenticationFailed));
    assert_eq!(EventKind::parse("updates_dropped"), Some(EventKind::UpdatesDropped));
}
