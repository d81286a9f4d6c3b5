//! Bot commands: the lists a bot sets per scope (setMyCommands), the
//! scope a chat's autocomplete reads (getChatCommands), and the command
//! a message's text carries. Plain functions of the request and of what
//! the store read.

use crate::error::{ApiError, ApiResult};
use crate::protocol::ChatKind;
use serde::Serialize;
use serde_json::Value;

/// The most commands one list holds.
pub const MAX_COMMANDS: usize = 100;
/// A command's name: 1 to this many characters of `a-z`, `0-9`, `_`.
pub const MAX_COMMAND_CHARS: usize = 32;
/// A command's description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 256;

const NAME_WHY: &str = "must be 1 to 32 characters of a-z, 0-9 and _";
const DESCRIPTION_WHY: &str = "must be a string of 1 to 256 characters";
const COMMANDS_WHY: &str = "must be an array of at most 100 {\"command\", \"description\"} objects";
const SCOPE_WHY: &str = "must be {\"type\": \"default\" | \"all_private_chats\" | \"all_group_chats\"} \
     or {\"type\": \"chat\", \"chat_id\": \"spc_...\"}";

/// Whether `s` is a command's name.
pub fn is_name(s: &str) -> bool {
    (1..=MAX_COMMAND_CHARS).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// One entry of a list, as stored and returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BotCommand {
    pub command: String,
    pub description: String,
}

/// setMyCommands' `commands`: 0 to [`MAX_COMMANDS`] entries, each name a
/// command's, each description 1 to 256 characters, no name twice. A
/// refusal names the entry (`commands.3.command`).
pub fn parse_list(v: Option<&Value>) -> ApiResult<Vec<BotCommand>> {
    let items = match v {
        None | Some(Value::Null) => return Err(ApiError::missing_field("commands")),
        Some(Value::Array(a)) if a.len() <= MAX_COMMANDS => a,
        Some(_) => return Err(ApiError::invalid_field("commands", COMMANDS_WHY)),
    };
    let mut out: Vec<BotCommand> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(ApiError::invalid_field(&format!("commands.{i}"), COMMANDS_WHY));
        };
        let command = match o.get("command") {
            Some(Value::String(s)) if is_name(s) => s.clone(),
            None | Some(Value::Null) => return Err(ApiError::missing_field(&format!("commands.{i}.command"))),
            Some(_) => return Err(ApiError::invalid_field(&format!("commands.{i}.command"), NAME_WHY)),
        };
        let description = match o.get("description") {
            Some(Value::String(s)) if (1..=MAX_DESCRIPTION_CHARS).contains(&s.chars().count()) => s.clone(),
            None | Some(Value::Null) => return Err(ApiError::missing_field(&format!("commands.{i}.description"))),
            Some(_) => return Err(ApiError::invalid_field(&format!("commands.{i}.description"), DESCRIPTION_WHY)),
        };
        if out.iter().any(|c| c.command == command) {
            return Err(ApiError::invalid_field(
                &format!("commands.{i}.command"),
                "names a command already in the list",
            ));
        }
        out.push(BotCommand { command, description });
    }
    Ok(out)
}

/// Which chats a list is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Default,
    AllPrivateChats,
    AllGroupChats,
    Chat(&'a str),
}

impl Scope<'_> {
    /// The scope's key as stored: its type, and the chat id for a chat
    /// scope (`""` otherwise).
    pub fn key(&self) -> (&'static str, &str) {
        match self {
            Scope::Default => ("default", ""),
            Scope::AllPrivateChats => ("all_private_chats", ""),
            Scope::AllGroupChats => ("all_group_chats", ""),
            Scope::Chat(c) => ("chat", c),
        }
    }
}

/// The `scope` field: absent or `null` is the default scope.
pub fn parse_scope(v: Option<&Value>) -> ApiResult<Scope<'_>> {
    let o = match v {
        None | Some(Value::Null) => return Ok(Scope::Default),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ApiError::invalid_field("scope", SCOPE_WHY)),
    };
    let scope = match o.get("type").and_then(Value::as_str) {
        Some("default") => Scope::Default,
        Some("all_private_chats") => Scope::AllPrivateChats,
        Some("all_group_chats") => Scope::AllGroupChats,
        Some("chat") => match o.get("chat_id") {
            Some(Value::String(c)) => Scope::Chat(c),
            None | Some(Value::Null) => return Err(ApiError::missing_field("scope.chat_id")),
            Some(_) => return Err(ApiError::invalid_field("scope.chat_id", "must be a string")),
        },
        _ => return Err(ApiError::invalid_field("scope", SCOPE_WHY)),
    };
    Ok(scope)
}

/// The scopes whose list a chat's autocomplete shows, narrowest first:
/// the chat's own, then all chats of its type, then the default.
pub fn narrowest_first(chat_id: &str, kind: ChatKind) -> [Scope<'_>; 3] {
    let by_type = match kind {
        ChatKind::Private => Scope::AllPrivateChats,
        ChatKind::Group => Scope::AllGroupChats,
    };
    [Scope::Chat(chat_id), by_type, Scope::Default]
}

/// Of a bot's lists (scope key → list), the one the chat shows: the
/// narrowest scope that has one. `None` when the bot set none that
/// applies.
pub fn pick<'a, L>(lists: &'a [((String, String), L)], chat_id: &str, kind: ChatKind) -> Option<&'a L> {
    narrowest_first(chat_id, kind).iter().find_map(|s| {
        let (t, c) = s.key();
        lists.iter().find(|((lt, lc), _)| lt == t && lc == c).map(|(_, l)| l)
    })
}

pub use crate::model::Command;

/// Reads the command out of a message's text, if it starts with one.
pub fn command_of(text: &str) -> Option<Command<'_>> {
    let rest = text.strip_prefix('/')?;
    let (head, args) = match rest.find(|c: char| c.is_whitespace()) {
        // One separator is dropped (a space, a newline); the rest is kept.
        Some(i) => {
            let sep = rest[i..].chars().next().map_or(1, char::len_utf8);
            (&rest[..i], &rest[i + sep..])
        }
        None => (rest, ""),
    };
    let (name, bot_handle) = match head.split_once('@') {
        Some((n, h)) if !h.is_empty() && is_handle(h) => (n, Some(h)),
        Some(_) => return None,
        None => (head, None),
    };
    is_name(name).then_some(Command { name, args, bot_handle })
}

/// What may follow `@`: a handle's characters (no space, no second `@`,
/// no `/`), at most a handle's length.
fn is_handle(h: &str) -> bool {
    h.chars().count() <= super::limits::MAX_HANDLE_CHARS && !h.contains(['@', '/'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(e: ApiError) -> (String, String) {
        let f = e.parameters().and_then(|p| p.get("field")).and_then(|v| v.as_str()).unwrap_or("").to_string();
        (e.code().as_str().to_string(), f)
    }

    #[test]
    fn names_are_1_to_32_of_lowercase_digits_and_underscore() {
        assert!(is_name("a"));
        assert!(is_name(&"a".repeat(32)));
        assert!(!is_name(&"a".repeat(33)));
        assert!(!is_name(""));
        assert!(is_name("start_2"));
        for bad in ["Start", "st-art", "st art", "é", "a/b"] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_list_holds_up_to_100_distinct_commands() {
        let list = |n: usize| {
            json!((0..n).map(|i| json!({"command": format!("c{i}"), "description": "d"})).collect::<Vec<_>>())
        };
        assert_eq!(parse_list(Some(&list(100))).unwrap().len(), 100);
        assert_eq!(parse_list(Some(&list(0))).unwrap().len(), 0);
        assert_eq!(code(parse_list(Some(&list(101))).unwrap_err()), ("invalid_field".into(), "commands".into()));
        assert_eq!(code(parse_list(None).unwrap_err()), ("missing_field".into(), "commands".into()));
        let dup = json!([{"command": "a", "description": "x"}, {"command": "a", "description": "y"}]);
        let e = parse_list(Some(&dup)).unwrap_err();
        assert_eq!(e.description(), "field commands.1.command names a command already in the list");
        let long = json!([{"command": "a", "description": "é".repeat(256)}]);
        assert!(parse_list(Some(&long)).is_ok());
        let long = json!([{"command": "a", "description": "é".repeat(257)}]);
        assert_eq!(
            code(parse_list(Some(&long)).unwrap_err()),
            ("invalid_field".into(), "commands.0.description".into())
        );
        let empty = json!([{"command": "a", "description": ""}]);
        assert_eq!(
            code(parse_list(Some(&empty)).unwrap_err()),
            ("invalid_field".into(), "commands.0.description".into())
        );
        let bad = json!([{"command": "A", "description": "x"}]);
        assert_eq!(code(parse_list(Some(&bad)).unwrap_err()), ("invalid_field".into(), "commands.0.command".into()));
        let missing = json!([{"description": "x"}]);
        assert_eq!(
            code(parse_list(Some(&missing)).unwrap_err()),
            ("missing_field".into(), "commands.0.command".into())
        );
        assert_eq!(code(parse_list(Some(&json!(["a"]))).unwrap_err()), ("invalid_field".into(), "commands.0".into()));
    }

    #[test]
    fn scopes_parse_and_the_narrowest_list_wins() {
        assert_eq!(parse_scope(None).unwrap(), Scope::Default);
        assert_eq!(parse_scope(Some(&json!({"type": "all_group_chats"}))).unwrap(), Scope::AllGroupChats);
        assert_eq!(parse_scope(Some(&json!({"type": "chat", "chat_id": "spc_1"}))).unwrap(), Scope::Chat("spc_1"));
        assert_eq!(code(parse_scope(Some(&json!({"type": "chat"}))).unwrap_err()).1, "scope.chat_id");
        assert_eq!(code(parse_scope(Some(&json!({"type": "users"}))).unwrap_err()).1, "scope");
        assert_eq!(code(parse_scope(Some(&json!("default"))).unwrap_err()).1, "scope");
        let k = |t: &str, c: &str| (t.to_string(), c.to_string());
        let lists = vec![(k("default", ""), 1), (k("all_group_chats", ""), 2), (k("chat", "spc_g"), 3)];
        assert_eq!(pick(&lists, "spc_g", ChatKind::Group), Some(&3));
        assert_eq!(pick(&lists, "spc_h", ChatKind::Group), Some(&2));
        assert_eq!(pick(&lists, "spc_p", ChatKind::Private), Some(&1));
        assert_eq!(pick(&lists[1..], "spc_p", ChatKind::Private), None);
    }

    #[test]
    fn the_command_of_a_text() {
        let c = |name, args, bot_handle| Some(Command { name, args, bot_handle });
        assert_eq!(command_of("/start"), c("start", "", None));
        assert_eq!(command_of("/start a b"), c("start", "a b", None));
        assert_eq!(command_of("/start  two"), c("start", " two", None));
        assert_eq!(command_of("/start@Menu_Bot x"), c("start", "x", Some("Menu_Bot")));
        assert_eq!(command_of("/start\nline"), c("start", "line", None));
        for not in ["start", " /start", "/", "/Start", "/start@", "/start@a@b", "/st-art", "//x", "/start!"] {
            assert_eq!(command_of(not), None, "{not}");
        }
    }
}
