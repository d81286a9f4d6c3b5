//! The protocol's words (`ErrorCode`, `CloseCode`, `EventKind`, the
//! gateway's ops, chat actions...) are one table each in `src/words.rs`;
//! what the faces and docs list must be exactly those tables.

use botspace::{BlockedBy, GatewayOp, ParseMode, RateLimitScope, Tier};
use botspace::{BotStatus, ChatAction, ChatKind, CloseCode, ErrorCode, EventKind, GapMarker};

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

/// `"`a`, `b` or `c`"`: how the docs list a table's words in prose.
fn either<T: Copy>(all: &[T], name: fn(T) -> &'static str, quote: &str) -> String {
    let w: Vec<String> = all.iter().map(|w| format!("{quote}{}{quote}", name(*w))).collect();
    match w.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => w.join(""),
    }
}

fn assert_lists(doc: &str, file: &str, text: &str) {
    assert!(doc.contains(text), "{file} does not list {text}");
}

/// Every other word table is listed, whole and in table order, where the
/// docs define it: a word added to a table without its docs fails here.
#[test]
fn the_docs_list_every_word_of_the_other_tables() {
    let api = include_str!("../docs/api.md");
    let gateway = include_str!("../docs/gateway.md");
    let operations = include_str!("../docs/operations.md");
    let delivery = include_str!("../docs/delivery.md");

    for op in GatewayOp::ALL {
        assert_lists(gateway, "docs/gateway.md", &format!("{{\"op\":\"{}\"", op.as_str()));
    }
    let actions: Vec<String> = ChatAction::ALL.iter().map(|a| format!("`{a}`")).collect();
    assert_lists(api, "docs/api.md", &format!("| `action` | string | yes | one of {} ", actions.join(", ")));
    assert_lists(api, "docs/api.md", &format!("`by` ({})", either(BlockedBy::ALL, BlockedBy::as_str, "`")));
    assert_lists(gateway, "docs/gateway.md", &format!("\"by\": {}", either(BlockedBy::ALL, BlockedBy::as_str, "\"")));
    let scopes: Vec<String> = RateLimitScope::ALL.iter().map(|s| format!("`{s}`")).collect();
    assert_lists(operations, "docs/operations.md", &format!("by the limit that ran out: {} |", scopes.join(", ")));
    assert_lists(api, "docs/api.md", &format!("\"type\": {}", either(ChatKind::ALL, ChatKind::as_str, "\"")));
    assert_lists(api, "docs/api.md", &format!("| `quota_tier` | string | {} |", either(Tier::ALL, Tier::as_str, "`")));
    assert_lists(
        api,
        "docs/api.md",
        &format!("| `status` | string | {} |", either(BotStatus::ALL, BotStatus::as_str, "`")),
    );
    let modes: Vec<String> = ParseMode::ALL.iter().map(|m| format!("`\"{m}\"`")).collect();
    assert_lists(api, "docs/api.md", &format!("| `parse_mode` | string | no | only {} (or `null`)", modes.join(", ")));
    for gap in GapMarker::ALL {
        assert_lists(delivery, "docs/delivery.md", &format!("\"type\":\"{gap}\""));
    }
}

/// The wire names go out and come back through serde as they are.
#[test]
fn words_round_trip_through_json() {
    assert_eq!(serde_json::to_string(&RateLimitScope::AdminAuth).unwrap(), "\"admin_auth\"");
    assert_eq!(serde_json::from_str::<ChatAction>("\"upload_voice\"").unwrap(), ChatAction::UploadVoice);
    assert_eq!(serde_json::from_str::<Tier>("\"official\"").unwrap(), Tier::Official);
    assert!(serde_json::from_str::<BlockedBy>("\"admin\"").is_err());
    assert_eq!(GatewayOp::parse("heartbeat"), Some(GatewayOp::Heartbeat));
    assert_eq!(GatewayOp::parse("Heartbeat"), None);
}
