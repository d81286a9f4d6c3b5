//! The example servers' demo: the start-up lines that give a newcomer a
//! bot token to try, the same from the Rust server (`examples/server.rs`)
//! and the C server (`examples/c-server/server.c`, through
//! `botspace_service_demo_start`).
//!
//! The policy, once: on a database with no bot, create a demo user, a demo
//! bot (handle `demo_bot`) and their started private chat and print the
//! bot's token. On a later start the demo bot is found again by its handle
//! (unique among bots); its token was shown once and is not stored, so the
//! lines say how to get a new one: start again with `--demo-token` (both
//! servers' flag, which asks this function to rotate the token and print
//! it), or call `rotateBotToken`. Everything goes through the host API in
//! process, so it is audited and written like any host call.

use botspace::Service;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The demo bot's handle; handles are unique, so it names one bot.
pub const DEMO_BOT_HANDLE: &str = "demo_bot";
const DEMO_USER_HANDLE: &str = "demo_user";

/// The demo's start-up lines for an example server, each ending in
/// `\n`, to print as they are. `base` is the server's URL for bots
/// (`http://127.0.0.1:8080`), `admin_base` the one serving `/admin/`
/// (the same unless the host API has an address of its own).
///
/// * No bot in the database: creates the demo user, bot and started
///   chat and prints the token and an `export BOTSPACE_TOKEN=…
///   BOTSPACE_CHAT=… BOTSPACE_USER=…` line.
/// * The demo bot exists and `rotate_token`: rotates its token (the
///   previous one stops working) and prints the same lines.
/// * The demo bot exists, no `rotate_token`: prints its ids and how to
///   get a working token (`--demo-token`, or a `rotateBotToken` curl).
/// * Other bots but no demo bot: creates the demo with `rotate_token`,
///   else says so.
///
/// The error names the host call that failed.
pub fn start(svc: &Service, base: &str, admin_base: &str, rotate_token: bool) -> Result<String, String> {
    let d = Demo { svc };
    let stats = d.call("getStats", json!({}))?;
    let bot = if stats["bots"].as_i64() == Some(0) { None } else { d.find_bot()? };
    let mut out = String::new();
    match bot {
        None if stats["bots"].as_i64() != Some(0) && !rotate_token => {
            out.push_str(
                "demo: none (this database has bots, none with the handle demo_bot); \
                 start with --demo-token to create it\n",
            );
        }
        None => {
            let seeded = d.seed()?;
            seeded.print(&mut out, base);
        }
        Some(bot_id) => {
            let chat = d.find_chat(&bot_id)?;
            if rotate_token {
                let token = d.str_of(&d.call("rotateBotToken", json!({"bot_id": bot_id}))?, "token")?;
                let (user_id, chat_id) = match chat {
                    Some(c) => c,
                    None => d.start_chat(&bot_id)?,
                };
                out.push_str(
                    "demo: the demo bot's token was rotated (--demo-token); the previous one no longer works\n",
                );
                Seeded { user_id, bot_id, chat_id, token }.print(&mut out, base);
            } else {
                let (user_id, chat_id) = chat.unwrap_or_default();
                if !user_id.is_empty() {
                    let _ = writeln!(out, "demo user: {user_id}");
                }
                let _ = writeln!(out, "demo bot: {bot_id}");
                if !chat_id.is_empty() {
                    let _ = writeln!(out, "demo chat: {chat_id}");
                }
                out.push_str(
                    "demo bot token: shown only when it was made; for a working one (the old one stops working), \
                     start again with --demo-token, or with BOTSPACE_ADMIN set to the admin secret run:\n",
                );
                let _ = writeln!(
                    out,
                    "  curl -s -X POST {admin_base}/admin/rotateBotToken -H \"Authorization: Admin $BOTSPACE_ADMIN\" \
                     -H 'Content-Type: application/json' -d '{{\"bot_id\":\"{bot_id}\"}}'"
                );
                if !chat_id.is_empty() {
                    let _ = writeln!(out, "export BOTSPACE_CHAT='{chat_id}' BOTSPACE_USER='{user_id}'");
                }
            }
        }
    }
    Ok(out)
}

struct Demo<'a> {
    svc: &'a Service,
}

struct Seeded {
    user_id: String,
    bot_id: String,
    chat_id: String,
    token: String,
}

impl Seeded {
    fn print(&self, out: &mut String, base: &str) {
        let Seeded { user_id, bot_id, chat_id, token } = self;
        let _ = writeln!(out, "demo user: {user_id}");
        let _ = writeln!(out, "demo bot: {bot_id}");
        let _ = writeln!(out, "demo chat: {chat_id}");
        let _ = writeln!(out, "demo bot token: {token}");
        let _ = writeln!(out, "export BOTSPACE_TOKEN='{token}' BOTSPACE_CHAT='{chat_id}' BOTSPACE_USER='{user_id}'");
        out.push_str("try:\n");
        let _ = writeln!(out, "  curl -s -X POST {base}/bot/getMe -H 'Authorization: Bot {token}'");
        let _ = writeln!(
            out,
            "  curl -s -X POST {base}/bot/sendMessage -H 'Authorization: Bot {token}' -H 'Content-Type: application/json' \
             -d '{{\"chat_id\":\"{chat_id}\",\"text\":\"Hello from the demo bot\"}}'"
        );
    }
}

impl Demo<'_> {
    /// A host method called in process; its `result`.
    fn call(&self, method: &str, body: Value) -> Result<Value, String> {
        let body = body.to_string();
        let req = format!(
            "POST /admin/{method} HTTP/1.1\r\nHost: botspace\r\nAuthorization: Admin {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.svc.config().admin_secret,
            body.len()
        );
        let resp = self.svc.handle_request(req.as_bytes());
        let start = resp.windows(4).position(|w| w == b"\r\n\r\n").map_or(resp.len(), |p| p + 4);
        let v: Value =
            serde_json::from_slice(&resp[start..]).map_err(|e| format!("{method}: unreadable response: {e}"))?;
        if v["ok"] == Value::Bool(true) {
            Ok(v["result"].clone())
        } else {
            Err(format!("{method}: {} {}", v["error"], v["description"]))
        }
    }

    fn str_of(&self, v: &Value, key: &str) -> Result<String, String> {
        v[key].as_str().map(str::to_string).ok_or_else(|| format!("no {key} in {v}"))
    }

    /// The bot whose handle is `demo_bot` (in any case), if any.
    fn find_bot(&self) -> Result<Option<String>, String> {
        let list = self.call("listBots", json!({"query": DEMO_BOT_HANDLE}))?;
        Ok(list["bots"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|b| b["handle"].as_str().is_some_and(|h| h.eq_ignore_ascii_case(DEMO_BOT_HANDLE)))
            .and_then(|b| b["id"].as_str().map(str::to_string)))
    }

    /// (user id, chat id) of the demo bot's oldest private chat, if any.
    fn find_chat(&self, bot_id: &str) -> Result<Option<(String, String)>, String> {
        let list = self.call("listChats", json!({"member_id": bot_id}))?;
        Ok(list["chats"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .find(|c| c["type"] == "private" && c["bot_id"] == bot_id)
            .and_then(|c| Some((c["user_id"].as_str()?.to_string(), c["id"].as_str()?.to_string()))))
    }

    /// A demo user and its started chat with the bot.
    fn start_chat(&self, bot_id: &str) -> Result<(String, String), String> {
        let user = self.call("createUser", json!({"display_name": "Demo User", "handle": DEMO_USER_HANDLE}))?;
        let user_id = self.str_of(&user, "id")?;
        let chat = self.call("startBot", json!({"user_id": user_id, "bot_id": bot_id}))?;
        Ok((user_id, self.str_of(&chat, "id")?))
    }

    fn seed(&self) -> Result<Seeded, String> {
        let created = self.call(
            "createBot",
            json!({"display_name": "Demo Bot", "handle": DEMO_BOT_HANDLE, "quota_tier": "standard"}),
        )?;
        let bot_id = self.str_of(&created["bot"], "id")?;
        let token = self.str_of(&created, "token")?;
        let (user_id, chat_id) = self.start_chat(&bot_id)?;
        Ok(Seeded { user_id, bot_id, chat_id, token })
    }
}
