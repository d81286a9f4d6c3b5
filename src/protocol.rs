//! The protocol's words: error codes (docs/errors.md), the reasons a
//! gateway session ends with (docs/gateway.md), the kinds of events in
//! the logs, the gateway's ops, chat actions, the two kinds of chat party,
//! parse modes, chat types, quota tiers, bot statuses,
//! rate-limit scopes and the marker of dropped events. Each is an enum generated from one table, as `route.rs`
//! generates the methods, so the wire name, the number and the list of all
//! of them cannot drift apart, and the faces (C, WebAssembly) map them with
//! exhaustive matches instead of comparing strings.
//!
//! The enums are deliberately not `#[non_exhaustive]`: a new word must
//! break the build of every face that maps the words until it is mapped
//! there too.

/// Declares a word enum: `ALL`, `as_str()`, `parse()`, `FromStr`,
/// `Display`, serialization as the wire name, and, with `number`, a
/// `const fn` giving each word's number.
macro_rules! words {
    (
        $(#[$doc:meta])*
        $ty:ident: $num_fn:ident -> $num_ty:ty {
            $( $(#[$vdoc:meta])* $variant:ident = $name:literal => $num:expr, )*
        }
    ) => {
        words! { $(#[$doc])* $ty { $( $(#[$vdoc])* $variant = $name, )* } }

        impl $ty {
            /// The word's number.
            pub const fn $num_fn(self) -> $num_ty {
                match self { $($ty::$variant => $num,)* }
            }
        }
    };
    (
        $(#[$doc:meta])*
        $ty:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $name:literal, )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty { $( $(#[$vdoc])* $variant, )* }

        impl $ty {
            /// Every word, in the order of the table.
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }

            /// The word with this wire name (case-sensitive).
            pub fn parse(name: &str) -> Option<$ty> {
                match name { $($name => Some($ty::$variant),)* _ => None }
            }

            /// The wire name as a NUL-terminated C string, for the C face:
            /// made from the same table, so no word can lack one.
            pub const fn as_c_str(self) -> &'static std::ffi::CStr {
                match self {
                    $($ty::$variant => match std::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                        Ok(c) => c,
                        Err(_) => panic!("a wire name holds a NUL byte"),
                    },)*
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<$ty, UnknownWord> {
                $ty::parse(s).ok_or(UnknownWord)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("one of the words of ", stringify!($ty)))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$ty, E> {
                        $ty::parse(s).ok_or_else(|| E::unknown_variant(s, &[$($name,)*]))
                    }
                }
                d.deserialize_str(V)
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

/// A name that is not one of the words of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownWord;

impl std::fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a known protocol word")
    }
}

impl std::error::Error for UnknownWord {}

/// Parked getUpdates polls one bot may hold at once. Its next poll parks
/// and its own oldest one is answered 409 `poll_superseded` (as Telegram
/// answers the older of two polls 409 `Conflict`), so one bot cannot fill
/// the shared `max_parked_polls` and leave the others answered at once. A
/// bot's client needs one poll; 16 leave room for a few workers and
/// reconnects.
pub const MAX_PARKED_POLLS_PER_BOT: usize = 16;

words! {
    /// The stable machine code of a refused request (`error` in the JSON
    /// envelope) and the HTTP status it always goes out with. The order is
    /// docs/errors.md's code table.
    ErrorCode: status -> u16 {
        InvalidRequest = "invalid_request" => 400,
        InvalidJson = "invalid_json" => 400,
        MissingField = "missing_field" => 400,
        InvalidField = "invalid_field" => 400,
        InvalidWebhookUrl = "invalid_webhook_url" => 400,
        WebhookAddressForbidden = "webhook_address_forbidden" => 400,
        TextEmpty = "text_empty" => 400,
        TextTooLong = "text_too_long" => 400,
        UnsupportedParseMode = "unsupported_parse_mode" => 400,
        ReplyTargetNotFound = "reply_target_not_found" => 400,
        DuplicateHeader = "duplicate_header" => 400,
        CallbackQueryAnswered = "callback_query_answered" => 400,
        CallbackQueryExpired = "callback_query_expired" => 400,
        MissingAuthorization = "missing_authorization" => 401,
        InvalidToken = "invalid_token" => 401,
        BotSuspended = "bot_suspended" => 403,
        TierForbidden = "tier_forbidden" => 403,
        BotNotStarted = "bot_not_started" => 403,
        BlockedByUser = "blocked_by_user" => 403,
        UserBlockedByBot = "user_blocked_by_bot" => 403,
        NotMember = "not_member" => 403,
        ChatDissolved = "chat_dissolved" => 403,
        BotsCannotSend = "bots_cannot_send" => 403,
        NotMessageOwner = "not_message_owner" => 403,
        TokenNotRecoverable = "token_not_recoverable" => 403,
        MethodNotFound = "method_not_found" => 404,
        TokenInPath = "token_in_path" => 404,
        ChatNotFound = "chat_not_found" => 404,
        MessageNotFound = "message_not_found" => 404,
        UserNotFound = "user_not_found" => 404,
        BotNotFound = "bot_not_found" => 404,
        MemberNotFound = "member_not_found" => 404,
        ButtonNotFound = "button_not_found" => 404,
        CallbackQueryNotFound = "callback_query_not_found" => 404,
        MethodNotAllowed = "method_not_allowed" => 405,
        RequestTimeout = "request_timeout" => 408,
        IdempotencyKeyReused = "idempotency_key_reused" => 409,
        HandleTaken = "handle_taken" => 409,
        WebhookActive = "webhook_active" => 409,
        PollSuperseded = "poll_superseded" => 409,
        LengthRequired = "length_required" => 411,
        PayloadTooLarge = "payload_too_large" => 413,
        UnsupportedMediaType = "unsupported_media_type" => 415,
        UpgradeRequired = "upgrade_required" => 426,
        RateLimited = "rate_limited" => 429,
        ConnectionLimit = "connection_limit" => 429,
        HeadersTooLarge = "headers_too_large" => 431,
        InternalError = "internal_error" => 500,
        StorageError = "storage_error" => 500,
        AnswerFailed = "answer_failed" => 500,
        WebsocketUnavailable = "websocket_unavailable" => 501,
        StorageUnavailable = "storage_unavailable" => 503,
        CommitOutcomeUnknown = "commit_outcome_unknown" => 503,
        StorageFull = "storage_full" => 503,
        ShuttingDown = "shutting_down" => 503,
        ServerBusy = "server_busy" => 503,
    }
}

words! {
    /// Why a gateway session ended: the reason in the close frame the
    /// library sends (with its close code), or what ended it from the other
    /// side. `code()` is the close code the reason always goes with, `None`
    /// for [`CloseCode::ClosedByBot`], whose code is the bot's own.
    CloseCode: code -> Option<u16> {
        /// The bot sent something the gateway does not read.
        InvalidPayload = "invalid_payload" => Some(4001),
        /// The token was rotated or the bot suspended or deleted.
        AuthenticationFailed = "authentication_failed" => Some(4004),
        /// Sent by hosts, not by the library: the bot read too slowly, its
        /// unsent output stayed over the host's budget for two heartbeat
        /// intervals.
        SlowConsumer = "slow_consumer" => Some(4008),
        /// No heartbeat for two intervals.
        SessionTimeout = "session_timeout" => Some(4009),
        /// A shared store (PostgreSQL) stayed unreachable; reconnect.
        StorageUnavailable = "storage_unavailable" => Some(4010),
        /// The bot's bytes broke the WebSocket protocol (no close frame is
        /// sent back).
        ProtocolError = "protocol_error" => Some(1002),
        /// A text message that is not UTF-8.
        InvalidUtf8 = "invalid_utf8" => Some(1007),
        /// A message over the inbound limit.
        MessageTooBig = "message_too_big" => Some(1009),
        /// Sent by hosts, not by the library: the host is stopping (a
        /// graceful shutdown); the bot reconnects, to another node if any.
        ServerShutdown = "server_shutdown" => Some(1001),
        /// The bot closed first, with its own code (1005 when its close
        /// frame had none).
        ClosedByBot = "closed_by_bot" => None,
    }
}

impl CloseCode {
    /// The reason that goes with a close code the library sends, if any.
    pub fn from_code(code: u16) -> Option<CloseCode> {
        CloseCode::ALL.iter().copied().find(|c| c.code() == Some(code))
    }
}

impl TryFrom<u16> for CloseCode {
    type Error = UnknownWord;
    fn try_from(code: u16) -> Result<CloseCode, UnknownWord> {
        CloseCode::from_code(code).ok_or(UnknownWord)
    }
}

impl TryFrom<u16> for ErrorCode {
    type Error = UnknownWord;
    /// Only the statuses with exactly one code convert.
    fn try_from(status: u16) -> Result<ErrorCode, UnknownWord> {
        let mut it = ErrorCode::ALL.iter().copied().filter(|c| c.status() == status);
        match (it.next(), it.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(UnknownWord),
        }
    }
}

words! {
    /// The `type` of an event: what the gateway delivers to bots
    /// (docs/gateway.md) and the host's getUpdates stream carries, plus
    /// `chat_action` (the host stream only) and `updates_dropped` (the
    /// marker getUpdates puts first when the cap dropped unconfirmed
    /// updates).
    EventKind {
        MessageCreated = "message_created",
        MessageEdited = "message_edited",
        MessageDeleted = "message_deleted",
        BotStarted = "bot_started",
        Blocked = "blocked",
        Unblocked = "unblocked",
        MemberAdded = "member_added",
        MemberRemoved = "member_removed",
        ChatPermissionsChanged = "chat_permissions_changed",
        ChatDissolved = "chat_dissolved",
        ChatAction = "chat_action",
        UpdatesDropped = "updates_dropped",
        CallbackQuery = "callback_query",
        CallbackAnswered = "callback_answered",
        CallbackExpired = "callback_expired",
    }
}

impl EventKind {
    /// True for the kinds stored in the logs (all but the
    /// `updates_dropped` marker, which getUpdates makes up).
    pub const fn is_logged(self) -> bool {
        !matches!(self, EventKind::UpdatesDropped)
    }

    /// True for the kinds a bot's log carries: all but those only the
    /// host's stream has (`chat_action`, the callback queries' outcomes
    /// and the `updates_dropped` marker).
    pub const fn reaches_bots(self) -> bool {
        !matches!(
            self,
            EventKind::ChatAction
                | EventKind::UpdatesDropped
                | EventKind::CallbackAnswered
                | EventKind::CallbackExpired
        )
    }
}

words! {
    /// The `op` of a gateway frame (docs/gateway.md): `hello`, `event` and
    /// `heartbeat_ack` go to the bot, `heartbeat` and `ack` come from it.
    GatewayOp {
        Hello = "hello",
        Event = "event",
        HeartbeatAck = "heartbeat_ack",
        Heartbeat = "heartbeat",
        Ack = "ack",
    }
}

words! {
    /// What sendChatAction shows (`action`, docs/api.md).
    ChatAction {
        Typing = "typing",
        UploadPhoto = "upload_photo",
        UploadDocument = "upload_document",
        RecordVoice = "record_voice",
        UploadVoice = "upload_voice",
    }
}

words! {
    /// The two sides of a private chat: who blocked whom (setBlocked's
    /// `by`, the `blocked` / `unblocked` events' `by`).
    BlockedBy {
        User = "user",
        Bot = "bot",
    }
}

words! {
    /// Which limit refused a request: a 429's `parameters.scope`, the
    /// `X-RateLimit-Scope` header and the `scope` label of
    /// `botspace_rate_limited_total`. `bot`, `chat` and `group` are a bot's
    /// buckets; `admin_auth` is the throttle of failed admin logins.
    RateLimitScope {
        Bot = "bot",
        Chat = "chat",
        Group = "group",
        AdminAuth = "admin_auth",
    }
}

words! {
    /// The `parse_mode`s a message's text may be given in: plain text only
    /// (absent or `null` mean the same).
    ParseMode {
        Plain = "plain",
    }
}

words! {
    /// A chat's `type`.
    ChatKind {
        Private = "private",
        Group = "group",
    }
}

words! {
    /// A bot's `quota_tier` (docs/errors.md's rate-limit table).
    Tier {
        Free = "free",
        Standard = "standard",
        Official = "official",
    }
}

words! {
    /// A bot's `status`: a suspended bot's requests are refused
    /// (`bot_suspended`) and its gateway sessions closed.
    BotStatus {
        Active = "active",
        Suspended = "suspended",
    }
}

words! {
    /// The `type` of the entry a bot's own stream (getUpdates, webhooks)
    /// puts first when events after its cursor were dropped;
    /// `data.dropped_through` is the last dropped seq. (The host's stream
    /// says it with [`EventKind::UpdatesDropped`].)
    GapMarker {
        EventsDropped = "events_dropped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_parses_back_from_its_name_and_names_are_unique() {
        fn check<T: Copy + PartialEq + std::fmt::Debug + std::str::FromStr>(
            all: &[T],
            name: fn(T) -> &'static str,
            c_name: fn(T) -> &'static std::ffi::CStr,
        ) {
            let mut names: Vec<&str> = all.iter().map(|w| name(*w)).collect();
            for w in all {
                assert_eq!(name(*w).parse::<T>().ok(), Some(*w));
                assert_eq!(c_name(*w).to_str().unwrap(), name(*w));
            }
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all.len());
        }
        check(ErrorCode::ALL, ErrorCode::as_str, ErrorCode::as_c_str);
        check(CloseCode::ALL, CloseCode::as_str, CloseCode::as_c_str);
        check(EventKind::ALL, EventKind::as_str, EventKind::as_c_str);
        check(GatewayOp::ALL, GatewayOp::as_str, GatewayOp::as_c_str);
        check(ChatAction::ALL, ChatAction::as_str, ChatAction::as_c_str);
        check(BlockedBy::ALL, BlockedBy::as_str, BlockedBy::as_c_str);
        check(RateLimitScope::ALL, RateLimitScope::as_str, RateLimitScope::as_c_str);
        check(GapMarker::ALL, GapMarker::as_str, GapMarker::as_c_str);
        check(ChatKind::ALL, ChatKind::as_str, ChatKind::as_c_str);
        check(ParseMode::ALL, ParseMode::as_str, ParseMode::as_c_str);
        check(Tier::ALL, Tier::as_str, Tier::as_c_str);
        check(BotStatus::ALL, BotStatus::as_str, BotStatus::as_c_str);
        assert_eq!("Invalid_token".parse::<ErrorCode>(), Err(UnknownWord));
    }

    #[test]
    fn words_serialize_as_their_names_and_deserialize_only_from_them() {
        assert_eq!(serde_json::to_string(&RateLimitScope::AdminAuth).unwrap(), "\"admin_auth\"");
        assert_eq!(serde_json::from_str::<GatewayOp>("\"heartbeat_ack\"").unwrap(), GatewayOp::HeartbeatAck);
        assert_eq!(serde_json::from_str::<BlockedBy>("\"user\"").unwrap(), BlockedBy::User);
        let e = serde_json::from_str::<BlockedBy>("\"User\"").unwrap_err().to_string();
        assert!(e.starts_with("unknown variant `User`, expected `user` or `bot`"), "{e}");
        assert!(serde_json::from_str::<ChatAction>("1").is_err());
    }

    #[test]
    fn close_codes_are_the_gateway_documents_codes() {
        let codes: Vec<(u16, &str)> = CloseCode::ALL.iter().filter_map(|c| Some((c.code()?, c.as_str()))).collect();
        assert_eq!(
            codes,
            [
                (4001, "invalid_payload"),
                (4004, "authentication_failed"),
                (4008, "slow_consumer"),
                (4009, "session_timeout"),
                (4010, "storage_unavailable"),
                (1002, "protocol_error"),
                (1007, "invalid_utf8"),
                (1009, "message_too_big"),
                (1001, "server_shutdown"),
            ]
        );
        assert_eq!(CloseCode::try_from(4010), Ok(CloseCode::StorageUnavailable));
        assert_eq!(CloseCode::try_from(1000), Err(UnknownWord));
        assert_eq!(CloseCode::ClosedByBot.code(), None);
    }
}
