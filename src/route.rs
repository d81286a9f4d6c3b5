//! Request targets, parsed once into a [`Route`]: a path names a bot
//! method, the gateway, or a host method, and nothing downstream matches on
//! method-name strings again.

use crate::error::{ApiError, ApiResult};

/// Declares a method enum with its wire names: `ALL`, `name()`, `parse()`.
macro_rules! methods {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident = $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $ty { $($variant,)* }

        // `ALL` and `name` serve the tests and the method tables.
        #[cfg_attr(not(test), allow(dead_code))]
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];

            /// The name in the path (`/bot/<name>`, `/admin/<name>`).
            pub fn name(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }

            /// Method names are case-sensitive.
            pub fn parse(name: &str) -> Option<$ty> {
                match name { $($name => Some($ty::$variant),)* _ => None }
            }
        }
    };
}

methods! {
    /// The bot methods (`POST /bot/<name>`, docs/api.md).
    BotMethod {
        GetMe = "getMe",
        SendMessage = "sendMessage",
        SendChatAction = "sendChatAction",
        EditMessageText = "editMessageText",
        DeleteMessage = "deleteMessage",
        GetUpdates = "getUpdates",
        SetWebhook = "setWebhook",
        DeleteWebhook = "deleteWebhook",
        GetWebhookInfo = "getWebhookInfo",
        SetMyCommands = "setMyCommands",
        GetMyCommands = "getMyCommands",
        DeleteMyCommands = "deleteMyCommands",
        EditMessageReplyMarkup = "editMessageReplyMarkup",
        AnswerCallbackQuery = "answerCallbackQuery",
    }
}

methods! {
    /// The host API (`POST /admin/<name>`, docs/api.md).
    AdminMethod {
        CreateUser = "createUser",
        CreateBot = "createBot",
        UpdateBot = "updateBot",
        GetBot = "getBot",
        RotateBotToken = "rotateBotToken",
        GetOperationalToken = "getOperationalToken",
        CreatePrivateChat = "createPrivateChat",
        StartBot = "startBot",
        SetBlocked = "setBlocked",
        CreateGroup = "createGroup",
        AddMember = "addMember",
        RemoveMember = "removeMember",
        SetGroupPermissions = "setGroupPermissions",
        DissolveGroup = "dissolveGroup",
        SendUserMessage = "sendUserMessage",
        DeleteUserMessage = "deleteUserMessage",
        GetChat = "getChat",
        GetChatHistory = "getChatHistory",
        GetChatActions = "getChatActions",
        GetUpdates = "getUpdates",
        GetStats = "getStats",
        ListBots = "listBots",
        ListUsers = "listUsers",
        ListChats = "listChats",
        GetChatMembers = "getChatMembers",
        GetBotActivity = "getBotActivity",
        GetAuditLog = "getAuditLog",
        GetWebhookInfo = "getWebhookInfo",
        DeleteWebhook = "deleteWebhook",
        AdvanceClock = "advanceClock",
        GetChatCommands = "getChatCommands",
        GetBotCommands = "getBotCommands",
        PressButton = "pressButton",
        ExportDatabase = "exportDatabase",
        ImportDatabase = "importDatabase",
        GetStorageStats = "getStorageStats",
    }
}

/// The media type of a database image: the body `exportDatabase` answers
/// and `importDatabase` takes (`application/octet-stream` is taken too).
pub const IMAGE_MEDIA_TYPE: &str = "application/vnd.sqlite3";

/// The path of `importDatabase`, whose body is an image, not JSON.
pub const IMPORT_PATH: &str = "/admin/importDatabase";

impl AdminMethod {
    /// The methods that act on the whole database (export, import, the
    /// storage figures): answered by the service outside any transaction
    /// (an export reads a consistent image, an import replaces
    /// everything), never in a group.
    pub fn whole_database(self) -> bool {
        matches!(self, AdminMethod::ExportDatabase | AdminMethod::ImportDatabase | AdminMethod::GetStorageStats)
    }
}

/// Whether `content_type` is one an image is sent with
/// ([`IMAGE_MEDIA_TYPE`] or `application/octet-stream`, parameters and
/// case aside).
pub fn is_image_media_type(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim();
    mime.eq_ignore_ascii_case(IMAGE_MEDIA_TYPE) || mime.eq_ignore_ascii_case("application/octet-stream")
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Bot(BotMethod),
    /// `GET /bot/gateway`, the WebSocket upgrade.
    Gateway,
    Admin(AdminMethod),
    /// `GET /admin/console` and its assets: the admin console's static
    /// files, served without authentication (they hold no data).
    Console(crate::console::Asset),
    /// `GET /healthz`: the process serves (no authentication).
    Health,
    /// `GET /readyz`: the service can take writes (no authentication).
    Ready,
    /// `GET /admin/metrics`: the Prometheus exposition (host credential).
    Metrics,
}

/// Whether `path` has the Telegram form `/bot<token>/<method>`: `/bot`
/// followed at once by something other than `/`, then a `/` later. Such a
/// client put its credential in the path; it gets 404 `token_in_path`,
/// which says where the token goes and does not repeat the path.
pub fn token_in_path(path: &str) -> bool {
    path.strip_prefix("/bot").is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/') && rest.contains('/'))
}

/// The 404 of a path with no method: `token_in_path` for the Telegram form
/// ([`token_in_path`]), `method_not_found` otherwise. Neither repeats the
/// path.
pub fn no_method_at(path: &str) -> ApiError {
    if token_in_path(path) {
        ApiError::token_in_path()
    } else {
        ApiError::method_not_found()
    }
}

/// The operations paths (docs/operations.md): outside the bot and host
/// areas, GET only.
const OPS_PATHS: [(&str, Route); 3] =
    [("/healthz", Route::Health), ("/readyz", Route::Ready), ("/admin/metrics", Route::Metrics)];

/// A path's area and name, after the HTTP method check but before the name
/// is looked up: the body framing and media type are checked between the
/// two (stages 3–4 of the check order in docs/errors.md).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub path: &'a str,
    admin: bool,
    name: &'a str,
}

impl<'a> Target<'a> {
    /// Stages 1–2: a path outside `/bot/` and `/admin/` is 404; a method
    /// other than POST (GET for the gateway) is 405.
    pub fn check(method: &str, path: &'a str) -> ApiResult<Target<'a>> {
        if OPS_PATHS.iter().any(|(p, _)| *p == path) {
            if method != "GET" {
                return Err(ApiError::method_not_allowed("GET"));
            }
            return Ok(Target { path, admin: false, name: "" });
        }
        let (admin, name) = if let Some(n) = path.strip_prefix("/bot/") {
            (false, n)
        } else if let Some(n) = path.strip_prefix("/admin/") {
            (true, n)
        } else {
            // Before the HTTP method: a `/bot<token>/getMe` is told where
            // the token goes whatever its method.
            return Err(no_method_at(path));
        };
        let console = admin && crate::console::Asset::is_console_path(name);
        let allow = if (!admin && name == "gateway") || console { "GET" } else { "POST" };
        if method != allow {
            return Err(ApiError::method_not_allowed(allow));
        }
        Ok(Target { path, admin, name })
    }

    /// Stage 5: the method name. `advance_clock` says whether the service
    /// offers `advanceClock` (only on its manual clock).
    pub fn resolve(self, advance_clock: bool) -> ApiResult<Route> {
        if let Some((_, r)) = OPS_PATHS.iter().find(|(p, _)| *p == self.path) {
            return Ok(*r);
        }
        let route = if self.admin && crate::console::Asset::is_console_path(self.name) {
            crate::console::Asset::parse(self.name).map(Route::Console)
        } else if self.admin {
            AdminMethod::parse(self.name).filter(|m| *m != AdminMethod::AdvanceClock || advance_clock).map(Route::Admin)
        } else if self.name == "gateway" {
            Some(Route::Gateway)
        } else {
            BotMethod::parse(self.name).map(Route::Bot)
        };
        route.ok_or_else(ApiError::method_not_found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_method() {
        for m in BotMethod::ALL {
            assert_eq!(BotMethod::parse(m.name()), Some(*m));
        }
        for m in AdminMethod::ALL {
            assert_eq!(AdminMethod::parse(m.name()), Some(*m));
        }
        assert_eq!(BotMethod::parse("getme"), None);
    }

    #[test]
    fn the_console_is_get_only_and_unknown_assets_are_404() {
        let t = Target::check("GET", "/admin/console").unwrap();
        assert!(matches!(t.resolve(false).unwrap(), Route::Console(_)));
        assert_eq!(Target::check("POST", "/admin/console").unwrap_err().code, "method_not_allowed");
        let t = Target::check("GET", "/admin/console/nope.js").unwrap();
        assert_eq!(t.resolve(false).unwrap_err().code, "method_not_found");
        // A method named like the console is not one.
        assert_eq!(Target::check("GET", "/admin/consoleX").unwrap_err().code, "method_not_allowed");
    }

    #[test]
    fn the_operations_paths_are_get_only() {
        for (path, route) in OPS_PATHS {
            assert_eq!(Target::check("GET", path).unwrap().resolve(false).unwrap(), route);
            let e = Target::check("POST", path).unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.headers.clone()),
                ("method_not_allowed", vec![("Allow", "GET".to_string())])
            );
        }
        assert_eq!(Target::check("GET", "/healthz/").unwrap_err().code, "method_not_found");
        assert_eq!(Target::check("GET", "/admin/metricsX").unwrap_err().code, "method_not_allowed");
    }

    #[test]
    fn a_token_in_the_path_is_named_and_no_404_or_405_repeats_the_path() {
        let tok = "bot_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        for method in ["POST", "GET"] {
            let e = Target::check(method, &format!("/bot{tok}/getMe")).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (404, "token_in_path"));
            assert!(e.description.contains("Authorization: Bot <token>"), "{}", e.description);
        }
        // Other paths that may hold one: the error never repeats them.
        let e = Target::check("POST", &format!("/bot/{tok}/getMe")).unwrap().resolve(false).unwrap_err();
        assert_eq!((e.code.as_str(), e.description.contains(tok)), ("method_not_found", false));
        let e = Target::check("GET", &format!("/bot/{tok}/getMe")).unwrap_err();
        assert_eq!((e.code.as_str(), e.description.contains(tok)), ("method_not_allowed", false));
        let e = Target::check("POST", &format!("/api/{tok}")).unwrap_err();
        assert_eq!((e.code.as_str(), e.description.contains(tok)), ("method_not_found", false));
        // Not the Telegram form: `/bot` alone, `/botX` with no method.
        for path in ["/bot", "/botX", "/bots"] {
            assert_eq!(Target::check("POST", path).unwrap_err().code, "method_not_found", "{path}");
        }
    }

    #[test]
    fn the_whole_database_methods_are_host_methods_with_an_image_type() {
        for (name, m) in [
            ("exportDatabase", AdminMethod::ExportDatabase),
            ("importDatabase", AdminMethod::ImportDatabase),
            ("getStorageStats", AdminMethod::GetStorageStats),
        ] {
            let t = Target::check("POST", &format!("/admin/{name}")).unwrap().resolve(false).unwrap();
            assert_eq!(t, Route::Admin(m));
            assert!(m.whole_database());
        }
        assert!(!AdminMethod::GetStats.whole_database());
        assert_eq!(IMPORT_PATH, format!("/admin/{}", AdminMethod::ImportDatabase.name()));
        assert!(is_image_media_type("application/vnd.sqlite3"));
        assert!(is_image_media_type("Application/Octet-Stream; x=1"));
        assert!(!is_image_media_type("application/json"));
        assert!(!is_image_media_type(""));
    }

    #[test]
    fn advance_clock_exists_only_on_the_manual_clock() {
        let t = Target::check("POST", "/admin/advanceClock").unwrap();
        assert_eq!(t.resolve(true).unwrap(), Route::Admin(AdminMethod::AdvanceClock));
        assert_eq!(t.resolve(false).unwrap_err().code, "method_not_found");
    }
}
