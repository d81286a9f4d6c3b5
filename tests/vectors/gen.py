#!/usr/bin/env python3
"""Generates the test vector files in this directory (format: README.md).

Run `python3 tests/vectors/gen.py` after editing; the generated *.json files
are committed and are what the Rust, C and WASM runners read. Every step
asserts the exact status and the exact body; "{{*}}" stands only for random
values (ids, tokens). Gateway cases (gateway.json) set random_seed, so they
have no wildcard at all: Seeded below computes every id, token and session
id. Error descriptions are spelled once, in DESC below.
"""

import base64
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1767225600  # the manual clock's start, 2026-01-01T00:00:00Z
ANY = "{{*}}"
ADMIN = "Admin {{admin_secret}}"
OP_KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
ACTIONS = ["typing", "upload_photo", "upload_document", "record_voice", "upload_voice"]

# Error descriptions as the core spells them. The `error` codes are the
# stable contract; descriptions are for people and may be reworded here.
DESC = {
    "missing_authorization_bot": "expected the header Authorization: Bot <credential>",
    "missing_authorization_admin": "expected the header Authorization: Admin <credential>",
    "bad_scheme_bot": "expected the header Authorization: Bot <credential>",
    "bad_scheme_admin": "expected the header Authorization: Admin <credential>",
    "invalid_token": "the credential is unknown, rotated away or of the wrong kind",
    "bot_suspended": "this bot is suspended",
    "text_empty": "text must contain at least 1 character",
    "text_too_long": "text must contain at most 5000 characters",
    "unsupported_parse_mode": 'only parse_mode "plain" is supported',
    "reply_target_not_found": "reply_to_message_id names no live message in this chat",
    "chat_not_found": "no chat with this id is visible to the caller",
    "message_not_found": "no live message with this id in the chat",
    "not_member": "the sender is not a member of this chat",
    "user_not_member": "the sender is not a member of this chat",
    "chat_dissolved": "the group has been dissolved",
    "bot_not_started": "the user has not started this bot",
    "blocked_by_user": "the user has blocked this bot",
    "user_blocked_by_bot": "the bot has blocked the user",
    "bots_cannot_send": "the group's permissions do not allow bots to send",
    "not_message_owner": "the message was not sent by this bot",
    "idempotency_key_reused": "this Idempotency-Key was used with a different request",
    "unsupported_media_type": "Content-Type must be application/json",
    "not_object": "the request body must be a JSON object",
    "token_not_recoverable": "no operational token copy can be opened (only official bots have one, sealed with the configured operational_key); rotate to get a new token",
    "method_not_found": "no method at this path (method names are case-sensitive)",
    "token_in_path": "botspace takes the bot token in the header Authorization: Bot <token>, not in the path; call POST /bot/<method>",
    "advance_clock_404": "no method at this path (method names are case-sensitive)",
    "upgrade_required": "GET /bot/gateway needs a WebSocket upgrade (RFC 6455, version 13): connect with a WebSocket client",
    "gateway_405": "this path accepts GET only",
    "must_be_string": "must be a string",
    "message_id_format": 'must be a message id: a decimal string such as "1"',
    "actions": "must be one of typing, upload_photo, upload_document, record_voice, upload_voice",
    "idempotency_key_format": "must be 1 to 64 visible ASCII characters",
    "quota_tier": "must be free, standard or official",
    "handle_taken": "another bot already has this handle (handles compare case-insensitively)",
}


def tier_forbidden_desc(method):
    return f"{method} is not available to bots of the free tier"


def rate_desc(secs):
    return f"too many requests; retry after {secs} s"


# ---------------------------------------------------------------- builders

def ok(result):
    return {"ok": True, "result": result}


def err(status, code, desc, params=None):
    body = {"ok": False, "error_code": status, "error": code, "description": DESC.get(desc, desc)}
    if params is not None:
        body["parameters"] = params
    return body


def field_err(code, field, desc):
    return err(400, code, desc, {"field": field})


def missing(field):
    return err(400, "missing_field", f"field {field} is required", {"field": field})


def invalid(field, why):
    return err(400, "invalid_field", f"field {field} {DESC.get(why, why)}", {"field": field})


def request(path, body=None, auth=None, headers=None, method="POST", raw=None, content_type=True):
    r = {"method": method, "path": path}
    h = {}
    if auth is not None:
        h["Authorization"] = auth
    if headers:
        h.update(headers)
    if h:
        r["headers"] = h
    if raw is not None:
        r["raw_body"] = raw
    elif body is not None:
        r["body"] = body
    if not content_type:
        r["content_type"] = False
    return r


_NO = object()


def step(req, status, body=_NO, headers=None, save=None):
    e = {"status": status}
    if body is not _NO:
        e["body"] = body
    if headers:
        e["headers"] = headers
    s = {"request": req, "expect": e}
    if save:
        s["save"] = save
    return s


def admin(method, body=None, status=200, expect=_NO, save=None, headers=None):
    return step(request(f"/admin/{method}", body if body is not None else {}, auth=ADMIN), status, expect, headers, save)


def bot_call(b, method, body=None, status=200, expect=_NO, save=None, headers=None, resp_headers=None, raw=None):
    return step(request(f"/bot/{method}", body, auth=f"Bot {{{{{b}_tok}}}}", headers=headers, raw=raw), status, expect, resp_headers, save)


def ph(name):
    return "{{" + name + "}}"


def identity(b, name, handle, tier="free", official=False, verified=False, status="active", limit=None, avatar=None):
    if limit is None:
        limit = {"free": 1, "standard": 4, "official": 16}[tier]
    return {
        "id": ph(b) if b else ANY,
        "is_bot": True,
        "display_name": name,
        "handle": handle,
        "avatar_key": avatar,
        "status": status,
        "verified": verified,
        "official": official,
        "quota_tier": tier,
        "gateway_connection_limit": limit,
        "capabilities": {"edit_delete_messages": tier != "free"},
    }


# Bot names/handles/tiers by var, so later steps can build exact identities.
BOTS = {}


def mk_user(u, name=None, handle=None):
    name = name or u.capitalize()
    body = {"display_name": name}
    if handle is not None:
        body["handle"] = handle
    return admin("createUser", body, 200, ok({"id": ANY, "display_name": name, "handle": handle}), save={u: "result.id"})


def mk_bot(b, tier="free", official=False, verified=False, limit=None, name=None):
    name = name or f"{b.capitalize()} Bot"
    handle = f"{b}_bot"
    body = {"display_name": name, "handle": handle}
    if tier != "free":
        body["quota_tier"] = tier
    if official:
        body["official"] = True
    if verified:
        body["verified"] = True
    if limit is not None:
        body["gateway_connection_limit"] = limit
    BOTS[b] = (name, handle, tier, official, verified)
    return admin("createBot", body, 200, ok({"bot": identity(None, name, handle, tier, official, verified, limit=limit), "token": ANY}),
                 save={b: "result.bot.id", f"{b}_tok": "result.token"})


def ident_of(b, **kw):
    name, handle, tier, official, verified = BOTS[b]
    args = dict(tier=tier, official=official, verified=verified)
    args.update(kw)
    return identity(b, name, handle, **args)


def bot_live(b, sessions=0, unacked=0, last=None, created=T0, **kw):
    """getBot / listBots: the identity, created_at and the live figures."""
    ident = ident_of(b, **kw)
    return dict(ident, created_at=created, live={"gateway_sessions": sessions,
                                                 "gateway_connection_limit": ident["gateway_connection_limit"],
                                                 "unacked_events": unacked, "last_request_at": last})


def private_json(c, u, b, started=True, by_user=False, by_bot=False, bot_member=True):
    members = ([{"id": ph(b), "is_bot": True}] if bot_member else []) + [{"id": ph(u), "is_bot": False}]
    return {"id": ph(c) if c else ANY, "type": "private", "user_id": ph(u), "bot_id": ph(b), "started": started,
            "blocked_by_user": by_user, "blocked_by_bot": by_bot, "members": members}


def start(c, u, b):
    """startBot: creates the private chat of u and b, started; saves it as c."""
    return admin("startBot", {"user_id": ph(u), "bot_id": ph(b)}, 200, ok(private_json(None, u, b)), save={c: "result.id"})


def private_unstarted(c, u, b):
    return admin("createPrivateChat", {"user_id": ph(u), "bot_id": ph(b)}, 200, ok(private_json(None, u, b, started=False)), save={c: "result.id"})


def group_members(members):
    bots = [m for m in members if m in BOTS]
    users = [m for m in members if m not in BOTS]
    if len(bots) > 1 or len(users) > 1:
        return ANY  # ordered by random id
    return [{"id": ph(m), "is_bot": True} for m in bots] + [{"id": ph(m), "is_bot": False} for m in users]


def mk_group(g, members, title=None, bots_can_send=None):
    title = title or f"Group {g}"
    body = {"title": title, "member_ids": [ph(m) for m in members]}
    if bots_can_send is not None:
        body["bots_can_send"] = bots_can_send
    res = {"id": ANY, "type": "group", "title": title, "bots_can_send": bots_can_send is not False, "dissolved": False,
           "members": group_members(members)}
    return admin("createGroup", body, 200, ok(res), save={g: "result.id"})


def is_command_name(s):
    return 1 <= len(s) <= 32 and all(ch in "abcdefghijklmnopqrstuvwxyz0123456789_" for ch in s)


def command_of(text):
    """The command a message's text starts with, as the core reads it: "/name" or "/name@handle", then the end
    or one whitespace character (dropped) and the args."""
    if not text.startswith("/"):
        return None
    rest = text[1:]
    cut = next((i for i, ch in enumerate(rest) if ch.isspace()), None)
    head, args = (rest, "") if cut is None else (rest[:cut], rest[cut + 1:])
    handle = None
    if "@" in head:
        head, handle = head.split("@", 1)
        if not handle or len(handle) > 64 or "@" in handle or "/" in handle:
            return None
    if not is_command_name(head):
        return None
    return {"name": head, "args": args, "bot_handle": handle}


def msg(mid, c, ctype, text, sender, is_bot=True, date=T0, reply=None, edit=None, markup=None):
    m = {"message_id": str(mid), "chat": {"id": ph(c), "type": ctype}, "date": date, "text": text,
         "from": {"id": ph(sender), "is_bot": is_bot}}
    cmd = command_of(text)
    if cmd is not None:
        m["command"] = cmd
    if reply is not None:
        m["reply_to_message_id"] = str(reply)
    if edit is not None:
        m["edit_date"] = edit
    if markup is not None:
        m["reply_markup"] = markup
    return m


def send(b, c, text, mid, ctype="private", date=T0, reply=None, headers=None, extra=None, resp_headers=None):
    body = {"chat_id": ph(c), "text": text}
    if reply is not None:
        body["reply_to_message_id"] = str(reply)
    if extra:
        body.update(extra)
    return bot_call(b, "sendMessage", body, 200, ok(msg(mid, c, ctype, text, b, date=date, reply=reply)), headers=headers,
                    resp_headers=resp_headers)


def send_err(b, c, text, status, expect, **kw):
    body = {"chat_id": ph(c), "text": text}
    body.update(kw)
    return bot_call(b, "sendMessage", body, status, expect)


def user_send(u, c, text, mid, ctype="private", date=T0):
    return admin("sendUserMessage", {"user_id": ph(u), "chat_id": ph(c), "text": text}, 200,
                 ok(msg(mid, c, ctype, text, u, is_bot=False, date=date)))


def history(c, expected, **kw):
    body = {"chat_id": ph(c)}
    body.update(kw)
    return admin("getChatHistory", body, 200, ok(expected))


def advance(seconds):
    return admin("advanceClock", {"seconds": seconds}, 200, ok(True))


def deleted(mid):
    return {"message_id": str(mid), "deleted": True}


def rate_err(secs, ms, scope):
    return err(429, "rate_limited", rate_desc(secs), {"retry_after": secs, "retry_after_ms": ms, "scope": scope})


# The burst of each free-tier bucket: X-RateLimit-Limit when it is nearest.
FREE_LIMIT = {"chat": 5, "group": 20, "bot": 30}
NO_RATE_HEADERS = {"X-RateLimit-Limit": None, "X-RateLimit-Remaining": None, "X-RateLimit-Reset-After": None,
                   "X-RateLimit-Scope": None}


def reset_after(ms):
    """Milliseconds as X-RateLimit-Reset-After: seconds, at most three decimals, no trailing zeros."""
    whole, frac = divmod(ms, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def rate_headers(limit, remaining, ms, scope):
    return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset-After": reset_after(ms), "X-RateLimit-Scope": scope}


def refused_headers(secs, ms, scope, limit=None):
    """A 429's headers: Retry-After and the refusing bucket, with the figures of its parameters."""
    return dict({"Retry-After": str(secs)}, **rate_headers(limit or FREE_LIMIT[scope], 0, ms, scope))


def rate_step(b, c, secs, ms, scope, text="x", limit=None):
    return bot_call(b, "sendMessage", {"chat_id": ph(c), "text": text}, 429, rate_err(secs, ms, scope),
                    resp_headers=refused_headers(secs, ms, scope, limit))


def case(name, steps, config=None, store=None):
    c = {"name": name}
    if config:
        c["config"] = config
    if store:
        # The one store the case holds for: the others answer otherwise
        # (a PostgreSQL store has no SQLite image to export or import).
        c["store"] = store
    c["steps"] = steps
    return c


def setup_private(u="u", b="b", c="c", tier="free", official=False):
    """A user, a bot and their started private chat."""
    return [mk_user(u), mk_bot(b, tier, official), start(c, u, b)]


# ---------------------------------------------------------------- auth.json

def auth_cases():
    cs = []
    base = setup_private()

    def getme(auth, status, expect, body=None):
        return step(request("/bot/getMe", body, auth=auth), status, expect)

    me = lambda **kw: ok(ident_of("b", **kw))
    cs.append(case("getMe with a valid token returns the bot identity", base + [getme("Bot {{b_tok}}", 200, me())]))
    cs.append(case("getMe of a standard-tier bot reports edit_delete_messages true and 4 gateway connections",
                   [mk_bot("s", "standard"), step(request("/bot/getMe", auth="Bot {{s_tok}}"), 200, ok(ident_of("s")))]))
    cs.append(case("getMe of an official verified bot reports 16 gateway connections",
                   [mk_bot("o", "official", official=True, verified=True), step(request("/bot/getMe", auth="Bot {{o_tok}}"), 200, ok(ident_of("o")))]))
    cs.append(case("gateway_connection_limit set by the host overrides the tier default",
                   [mk_bot("l", limit=3), step(request("/bot/getMe", auth="Bot {{l_tok}}"), 200, ok(ident_of("l", limit=3)))]))
    cs.append(case("Authorization header missing is 401 missing_authorization",
                   base + [getme(None, 401, err(401, "missing_authorization", "missing_authorization_bot"))]))
    cs.append(case("Authorization with the Bearer scheme is 401 missing_authorization",
                   base + [getme("Bearer {{b_tok}}", 401, err(401, "missing_authorization", "bad_scheme_bot"))]))
    cs.append(case("Authorization 'Bot' without a token is 401 missing_authorization",
                   base + [getme("Bot", 401, err(401, "missing_authorization", "bad_scheme_bot"))]))
    cs.append(case("Authorization scheme in lower case 'bot <token>' is accepted",
                   base + [getme("bot {{b_tok}}", 200, me())]))
    cs.append(case("Authorization scheme in upper case 'BOT <token>' is accepted",
                   base + [getme("BOT {{b_tok}}", 200, me())]))
    cs.append(case("the admin secret presented as a bot token is 401 invalid_token",
                   base + [getme("Bot {{admin_secret}}", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("a user id presented as a bot token is 401 invalid_token",
                   base + [getme("Bot {{u}}", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("an unknown well-formed token is 401 invalid_token",
                   base + [getme("Bot bot_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("the token is compared exactly: a token with an extra character is invalid_token",
                   base + [getme("Bot {{b_tok}}x", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("the bot id presented as a token is invalid_token",
                   base + [getme("Bot {{b}}", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("after rotateBotToken the old token is invalid_token at once and the new token works",
                   base + [
                       getme("Bot {{b_tok}}", 200, me()),
                       admin("rotateBotToken", {"bot_id": "{{b}}"}, 200, ok({"token": ANY}), save={"new_tok": "result.token"}),
                       getme("Bot {{b_tok}}", 401, err(401, "invalid_token", "invalid_token")),
                       step(request("/bot/sendMessage", {"chat_id": "{{c}}", "text": "hi"}, auth="Bot {{b_tok}}"), 401,
                            err(401, "invalid_token", "invalid_token")),
                       getme("Bot {{new_tok}}", 200, me()),
                       step(request("/bot/sendMessage", {"chat_id": "{{c}}", "text": "hi"}, auth="Bot {{new_tok}}"), 200,
                            ok(msg(1, "c", "private", "hi", "b"))),
                   ]))
    cs.append(case("rotating twice invalidates both older tokens",
                   base + [
                       admin("rotateBotToken", {"bot_id": "{{b}}"}, 200, ok({"token": ANY}), save={"t2": "result.token"}),
                       admin("rotateBotToken", {"bot_id": "{{b}}"}, 200, ok({"token": ANY}), save={"t3": "result.token"}),
                       getme("Bot {{b_tok}}", 401, err(401, "invalid_token", "invalid_token")),
                       getme("Bot {{t2}}", 401, err(401, "invalid_token", "invalid_token")),
                       getme("Bot {{t3}}", 200, me()),
                   ]))
    cs.append(case("a bad token with a malformed body is 401, not 400 (authentication before body)",
                   base + [step(request("/bot/sendMessage", auth="Bot bot_nope", raw="{not json"), 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("no Authorization with a malformed body is 401 missing_authorization",
                   base + [step(request("/bot/sendMessage", raw="[1,"), 401, err(401, "missing_authorization", "missing_authorization_bot"))]))
    susp = [admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200, ok(ident_of("b", status="suspended")))]
    cs.append(case("a suspended bot gets 403 bot_suspended on getMe and sendMessage",
                   base + susp + [
                       getme("Bot {{b_tok}}", 403, err(403, "bot_suspended", "bot_suspended")),
                       send_err("b", "c", "hi", 403, err(403, "bot_suspended", "bot_suspended")),
                       bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 403, err(403, "bot_suspended", "bot_suspended")),
                       history("c", []),
                   ]))
    cs.append(case("a suspended bot with a malformed body is 403 bot_suspended, not 400",
                   base + susp + [bot_call("b", "sendMessage", raw="{", status=403, expect=err(403, "bot_suspended", "bot_suspended"))]))
    cs.append(case("a suspended free-tier bot calling editMessageText is bot_suspended before tier_forbidden",
                   base + susp + [bot_call("b", "editMessageText", {"chat_id": "{{c}}", "message_id": "1", "text": "x"}, 403,
                                           err(403, "bot_suspended", "bot_suspended"))]))
    cs.append(case("a suspended bot reactivated with status active works again",
                   base + susp + [
                       admin("updateBot", {"bot_id": "{{b}}", "status": "active"}, 200, ok(ident_of("b"))),
                       getme("Bot {{b_tok}}", 200, me()),
                       send("b", "c", "back", 1),
                   ]))
    cs.append(case("a suspended bot with an invalid token is still 401 (authentication before status)",
                   base + susp + [getme("Bot bot_wrong", 401, err(401, "invalid_token", "invalid_token"))]))

    def adm(auth, status, expect):
        return step(request("/admin/createUser", {"display_name": "X"}, auth=auth), status, expect)
    cs.append(case("host API without Authorization is 401 missing_authorization",
                   [adm(None, 401, err(401, "missing_authorization", "missing_authorization_admin"))]))
    cs.append(case("host API with a wrong admin secret is 401 invalid_token",
                   [adm("Admin vector-admin-secret-0002", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("host API with a bot token as the admin secret is 401 invalid_token",
                   [mk_bot("b"), adm("Admin {{b_tok}}", 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("host API with the admin secret under the Bot scheme is 401 missing_authorization",
                   [adm("Bot {{admin_secret}}", 401, err(401, "missing_authorization", "bad_scheme_admin"))]))
    cs.append(case("host API scheme word is case-insensitive: 'admin <secret>' works",
                   [adm("admin {{admin_secret}}", 200, ok({"id": ANY, "display_name": "X", "handle": None}))]))
    cs.append(case("a Bot credential on a host method is 401 missing_authorization",
                   [mk_bot("b"), step(request("/admin/getUpdates", {}, auth="Bot {{b_tok}}"), 401,
                                      err(401, "missing_authorization", "bad_scheme_admin"))]))
    return cs


# ---------------------------------------------------------------- transport.json

def transport_cases():
    cs = []
    base = [mk_bot("b")]
    me = ok(ident_of("b"))
    allow = {"Allow": "POST"}
    for m in ["GET", "PUT", "DELETE", "PATCH"]:
        cs.append(case(f"{m} on a bot method is 405 with Allow: POST",
                       base + [step(request("/bot/getMe", auth="Bot {{b_tok}}", method=m), 405,
                                    err(405, "method_not_allowed", "this path accepts POST only"), headers=allow)]))
    cs.append(case("GET on a host method is 405 with Allow: POST",
                   [step(request("/admin/createUser", auth=ADMIN, method="GET"), 405,
                         err(405, "method_not_allowed", "this path accepts POST only"), headers=allow)]))
    cs.append(case("GET without Authorization is 405, not 401 (transport before authentication)",
                   [step(request("/bot/sendMessage", method="GET"), 405, err(405, "method_not_allowed", "this path accepts POST only"),
                         headers=allow)]))
    cs.append(case("POST on the gateway path is 405 with Allow: GET",
                   base + [step(request("/bot/gateway", auth="Bot {{b_tok}}"), 405, err(405, "method_not_allowed", "gateway_405"),
                                headers={"Allow": "GET"})]))
    cs.append(case("GET /bot/gateway without a WebSocket upgrade is 426 upgrade_required",
                   base + [step(request("/bot/gateway", auth="Bot {{b_tok}}", method="GET"), 426, err(426, "upgrade_required", "upgrade_required"),
                                headers={"Upgrade": "websocket"})]))
    cs.append(case("GET /bot/gateway with a bad token is 401 before 426",
                   base + [step(request("/bot/gateway", auth="Bot bot_nope", method="GET"), 401, err(401, "invalid_token", "invalid_token"))]))
    cs.append(case("Content-Type text/plain is 415 unsupported_media_type",
                   base + [step(request("/bot/getMe", {}, auth="Bot {{b_tok}}", headers={"Content-Type": "text/plain"}), 415,
                                err(415, "unsupported_media_type", "unsupported_media_type"))]))
    cs.append(case("Content-Type application/x-www-form-urlencoded is 415",
                   base + [step(request("/bot/sendMessage", auth="Bot {{b_tok}}", headers={"Content-Type": "application/x-www-form-urlencoded"},
                                        raw="chat_id=x&text=y"), 415, err(415, "unsupported_media_type", "unsupported_media_type"))]))
    cs.append(case("a body without Content-Type is 415",
                   base + [step(request("/bot/getMe", {}, auth="Bot {{b_tok}}", content_type=False), 415,
                                err(415, "unsupported_media_type", "unsupported_media_type"))]))
    cs.append(case("wrong Content-Type without Authorization is 415, not 401",
                   [step(request("/bot/getMe", {}, headers={"Content-Type": "text/plain"}), 415,
                         err(415, "unsupported_media_type", "unsupported_media_type"))]))
    cs.append(case("Content-Type application/json; charset=utf-8 is accepted",
                   base + [step(request("/bot/getMe", {}, auth="Bot {{b_tok}}", headers={"Content-Type": "application/json; charset=utf-8"}),
                                200, me, headers={"Content-Type": "application/json"})]))
    cs.append(case("Content-Type media type matches case-insensitively",
                   base + [step(request("/bot/getMe", {}, auth="Bot {{b_tok}}", headers={"content-type": "Application/JSON"}), 200, me)]))
    cs.append(case("header names are case-insensitive on input",
                   base + [step(request("/bot/getMe", {}, headers={"AUTHORIZATION": "Bot {{b_tok}}", "CONTENT-TYPE": "application/json"}),
                                200, me)]))
    cs.append(case("a request without a body and without Content-Type is the same as {}",
                   base + [step(request("/bot/getMe", auth="Bot {{b_tok}}", content_type=False), 200, me)]))
    cs.append(case("an empty body is the same as {}: sendMessage says chat_id is missing",
                   base + [step(request("/bot/sendMessage", auth="Bot {{b_tok}}", raw=""), 400, missing("chat_id"))]))
    pad = lambda n: '{"pad":"' + "x" * (n - 10) + '"}'
    assert len(pad(1024)) == 1024
    cfg = {"max_body_bytes": 1024}
    cs.append(case("a body of exactly max_body_bytes is accepted",
                   base + [step(request("/bot/getMe", auth="Bot {{b_tok}}", raw=pad(1024)), 200, me)], cfg))
    cs.append(case("a body one byte over max_body_bytes is 413 payload_too_large",
                   base + [step(request("/bot/getMe", auth="Bot {{b_tok}}", raw=pad(1025)), 413,
                                err(413, "payload_too_large", "request body is larger than 1024 bytes"))], cfg))
    cs.append(case("a body over the limit without Authorization is 413, not 401",
                   [step(request("/bot/sendMessage", raw=pad(4000)), 413, err(413, "payload_too_large", "request body is larger than 1024 bytes"))], cfg))
    cs.append(case("a body over the limit with the wrong Content-Type is 413 before 415",
                   [step(request("/bot/sendMessage", raw=pad(4000), headers={"Content-Type": "text/plain"}), 413,
                         err(413, "payload_too_large", "request body is larger than 1024 bytes"))], cfg))
    cs.append(case("GET with a body over the limit is 405 before 413",
                   [step(request("/bot/sendMessage", raw=pad(4000), method="GET"), 405, err(405, "method_not_allowed", "this path accepts POST only"),
                         headers=allow)], cfg))
    cs.append(case("sendMessage text that makes the body exceed the limit is 413, not text_too_long",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    send_err("b", "c", "a" * 2000, 413, err(413, "payload_too_large", "request body is larger than 1024 bytes"))], cfg))
    for meth in ["getMe", "sendMessage"]:
        for raw, what, detail in [("{", "malformed JSON", "EOF while parsing an object at line 1 column 1"),
                                  ('{"a":1,}', "JSON with a trailing comma", "trailing comma at line 1 column 8"),
                                  ("{} x", "JSON followed by garbage", "trailing characters at line 1 column 4"),
                                  ('{"text":"\\ud800"}', "a lone surrogate escape", "unexpected end of hex escape at line 1 column 16")]:
            cs.append(case(f"{meth} with {what} is 400 invalid_json",
                           base + [step(request(f"/bot/{meth}", auth="Bot {{b_tok}}", raw=raw), 400,
                                        err(400, "invalid_json", f"request body is not valid JSON: {detail}"))]))
    for meth in ["sendMessage", "sendChatAction"]:
        cs.append(case(f"{meth} with a truncated JSON body is 400 invalid_json",
                       base + [step(request(f"/bot/{meth}", auth="Bot {{b_tok}}", raw='{"chat_id":'), 400,
                                    err(400, "invalid_json", "request body is not valid JSON: EOF while parsing a value at line 1 column 11"))]))
        cs.append(case(f"{meth} with a JSON array body is 400 invalid_request",
                       base + [step(request(f"/bot/{meth}", auth="Bot {{b_tok}}", raw='[{"chat_id":"x"}]'), 400,
                                    err(400, "invalid_request", "not_object"))]))
    for raw, what in [("[]", "a JSON array"), ('"text"', "a JSON string"), ("42", "a JSON number"), ("null", "JSON null"), ("true", "JSON true")]:
        for meth in ["getMe", "sendMessage"]:
            cs.append(case(f"{meth} with a body that is {what} is 400 invalid_request",
                           base + [step(request(f"/bot/{meth}", auth="Bot {{b_tok}}", raw=raw), 400, err(400, "invalid_request", "not_object"))]))
    cs.append(case("a host method with a JSON array body is 400 invalid_request",
                   [step(request("/admin/createUser", auth=ADMIN, raw='[{"display_name":"A"}]'), 400, err(400, "invalid_request", "not_object"))]))
    for path, name in [("/bot/sendPhoto", "sendPhoto"), ("/bot/sendmessage", "sendmessage"), ("/bot/GETME", "GETME"), ("/admin/dropEverything", "dropEverything")]:
        cs.append(case(f"unknown method {path} is 404 method_not_found (names are case-sensitive)",
                       base + [step(request(path, {}, auth="Bot {{b_tok}}"), 404, err(404, "method_not_found", "method_not_found"))]))
    cs.append(case("a path outside /bot/ and /admin/ is 404 method_not_found",
                   [step(request("/api/getMe", {}), 404, err(404, "method_not_found", "method_not_found"))]))
    # A credential in the path is never repeated in the answer (a client
    # library puts the description in its error, and logs print it).
    cs.append(case("a Telegram-style /bot<token>/<method> path is 404 token_in_path, which names the header and repeats nothing",
                   base + [step(request("/bot{{b_tok}}/getMe", {}), 404, err(404, "token_in_path", "token_in_path")),
                           step(request("/bot{{b_tok}}/sendMessage", {"chat_id": "x", "text": "hi"}), 404,
                                err(404, "token_in_path", "token_in_path")),
                           step(request("/bot{{b_tok}}/getMe", method="GET"), 404, err(404, "token_in_path", "token_in_path"))]))
    cs.append(case("a token inside a /bot/ or other path is not repeated by 404 method_not_found",
                   base + [step(request("/bot/{{b_tok}}/getMe", {}, auth="Bot {{b_tok}}"), 404,
                                err(404, "method_not_found", "method_not_found")),
                           step(request("/api/{{b_tok}}", {}), 404, err(404, "method_not_found", "method_not_found"))]))
    cs.append(case("unknown fields in the body are ignored",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    send("b", "c", "hi", 1, extra={"future_field": {"x": [1, 2]}, "disable_notification": True})]))
    cs.append(case("error responses carry Content-Type: application/json",
                   [step(request("/bot/getMe"), 401, err(401, "missing_authorization", "missing_authorization_bot"),
                         headers={"Content-Type": "application/json"})]))
    cs.append(case("a query string is ignored for routing",
                   base + [step(request("/bot/getMe?x=1", auth="Bot {{b_tok}}"), 200, me)]))
    for target in ["http://127.0.0.1/bot/getMe", "http://localhost:8080/bot/getMe?x=1", "HTTPS://[::1]/bot/getMe"]:
        cs.append(case(f"an absolute-form target ({target}) is served by its path",
                       base + [step(request(target, auth="Bot {{b_tok}}"), 200, me)]))
    bad_char = "the request target is not valid: it holds a character a URI does not allow (percent-encode it)"
    for target in ["/admin/console?x=<script>", "/bot/getMe?x=%22%3E\"", "/bot/get`Me", "/bot/getMe#top", "/bot/getMe?x=100%"]:
        cs.append(case(f"a target with a character a URI does not allow ({target}) is 400 invalid_request",
                       base + [step(request(target, auth="Bot {{b_tok}}", method="GET"), 400, err(400, "invalid_request", bad_char))]))
    cs.append(case("a target that is neither a path nor an http(s) URL is 400 invalid_request",
                   [step(request("ftp://h/bot/getMe", {}), 400,
                         err(400, "invalid_request", "the request target is not valid: it must be a path starting with / or an http or https URL"))]))
    cs.append(case("an absolute-form URL with user info is 400 invalid_request",
                   [step(request("http://u@h/bot/getMe", {}), 400,
                         err(400, "invalid_request", "the request target is not valid: the URL's host is not a host name or address with an optional port"))]))
    big = "9" * 400
    cs.append(case("numbers beyond 64 bits in a field no method reads are JSON like any other",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    step(request("/bot/sendMessage", auth="Bot {{b_tok}}",
                                 raw='{"chat_id":"{{c}}","text":"hi","extra":[' + big + ',1e999999,-1e999999]}'), 200)]))
    cs.append(case("a number beyond 64 bits in a field that is read gets the field's error",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    step(request("/bot/sendMessage", auth="Bot {{b_tok}}",
                                 raw='{"chat_id":"{{c}}","text":"hi","reply_to_message_id":' + big + '}'), 400,
                         field_err("invalid_field", "reply_to_message_id", "field reply_to_message_id " + DESC["message_id_format"]))]))
    return cs


# ---------------------------------------------------------------- send_message.json

def send_message_cases():
    cs = []
    base = setup_private()
    cs.append(case("sendMessage in a started private chat returns the message", base + [send("b", "c", "Hello!", 1)]))
    cs.append(case("message ids are 1, 2, 3 per chat and independent between chats",
                   base + [mk_user("v", "Vic"), start("c2", "v", "b"),
                           send("b", "c", "a", 1), send("b", "c", "b", 2), send("b", "c2", "c", 1), send("b", "c", "d", 3),
                           history("c", [msg(1, "c", "private", "a", "b"), msg(2, "c", "private", "b", "b"), msg(3, "c", "private", "d", "b")])]))
    cs.append(case("human and bot messages share the chat's numbering",
                   base + [user_send("u", "c", "hi bot", 1), send("b", "c", "hi human", 2), user_send("u", "c", "bye", 3),
                           history("c", [msg(1, "c", "private", "hi bot", "u", False), msg(2, "c", "private", "hi human", "b"),
                                         msg(3, "c", "private", "bye", "u", False)])]))
    cs.append(case("date is the clock's Unix seconds", base + [advance(90), send("b", "c", "later", 1, date=T0 + 90)]))
    cs.append(case("sendMessage into a group the bot belongs to has chat.type group",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), send("b", "g", "hi all", 1, ctype="group")]))
    cs.append(case("text of 0 characters is 400 text_empty", base + [send_err("b", "c", "", 400, field_err("text_empty", "text", "text_empty"))]))
    cs.append(case("text of 1 character is accepted", base + [send("b", "c", "a", 1)]))
    cs.append(case("text of one space is accepted (1 character)", base + [send("b", "c", " ", 1)]))
    cs.append(case("text of 5000 ASCII characters is accepted", base + [send("b", "c", "a" * 5000, 1)]))
    cs.append(case("text of 5001 ASCII characters is 400 text_too_long",
                   base + [send_err("b", "c", "a" * 5001, 400, field_err("text_too_long", "text", "text_too_long")), history("c", [])]))
    cs.append(case("text of 5000 'é' (10000 bytes) is accepted: length counts characters", base + [send("b", "c", "é" * 5000, 1)]))
    cs.append(case("text of 5001 'é' is 400 text_too_long",
                   base + [send_err("b", "c", "é" * 5001, 400, field_err("text_too_long", "text", "text_too_long"))]))
    cs.append(case("text of 5000 emoji (4-byte characters) is accepted", base + [send("b", "c", "😀" * 5000, 1)]))
    cs.append(case("text of 5001 emoji is 400 text_too_long",
                   base + [send_err("b", "c", "😀" * 5001, 400, field_err("text_too_long", "text", "text_too_long"))]))
    cs.append(case("text of 4999 ASCII characters and one emoji at the boundary is accepted", base + [send("b", "c", "a" * 4999 + "😀", 1)]))
    cs.append(case("text of 5000 ASCII characters and one 'é' is text_too_long",
                   base + [send_err("b", "c", "a" * 5000 + "é", 400, field_err("text_too_long", "text", "text_too_long"))]))
    cs.append(case("text with newlines, quotes and a NUL escape is stored verbatim",
                   base + [send("b", "c", "line1\nline2\t\"quoted\" \\ → ✓ 日本語 end", 1)]))
    cs.append(case("text missing is 400 missing_field text",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}"}, 400, missing("text"))]))
    cs.append(case("text null is 400 missing_field text",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": None}, 400, missing("text"))]))
    cs.append(case("text as a number is 400 invalid_field text",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": 5}, 400, invalid("text", "must_be_string"))]))
    cs.append(case("chat_id missing is 400 missing_field chat_id",
                   base + [bot_call("b", "sendMessage", {"text": "hi"}, 400, missing("chat_id"))]))
    cs.append(case("chat_id as a number is 400 invalid_field chat_id",
                   base + [bot_call("b", "sendMessage", {"chat_id": 12, "text": "hi"}, 400, invalid("chat_id", "must_be_string"))]))
    cs.append(case("with chat_id and text both missing, chat_id is reported",
                   base + [bot_call("b", "sendMessage", {}, 400, missing("chat_id"))]))
    cs.append(case("parse_mode absent is accepted", base + [send("b", "c", "plain text", 1)]))
    cs.append(case("parse_mode null is accepted", base + [send("b", "c", "x", 1, extra={"parse_mode": None})]))
    cs.append(case("parse_mode plain is accepted", base + [send("b", "c", "<b>x</b>", 1, extra={"parse_mode": "plain"})]))
    for pm in ["html", "HTML", "markdown", "MarkdownV2", "Plain", ""]:
        cs.append(case(f"parse_mode {pm!r} is 400 unsupported_parse_mode",
                       base + [send_err("b", "c", "x", 400, field_err("unsupported_parse_mode", "parse_mode", "unsupported_parse_mode"), parse_mode=pm)]))
    cs.append(case("a valid reply_to_message_id is echoed in the result",
                   base + [user_send("u", "c", "question", 1), send("b", "c", "answer", 2, reply=1),
                           history("c", [msg(1, "c", "private", "question", "u", False), msg(2, "c", "private", "answer", "b", reply=1)])]))
    rt = field_err("reply_target_not_found", "reply_to_message_id", "reply_target_not_found")
    cs.append(case("reply to a message id that does not exist is 400 reply_target_not_found",
                   base + [user_send("u", "c", "q", 1), send_err("b", "c", "a", 400, rt, reply_to_message_id="2"), history("c", [msg(1, "c", "private", "q", "u", False)])]))
    cs.append(case("reply to a deleted message is 400 reply_target_not_found",
                   base + [user_send("u", "c", "q", 1), admin("deleteUserMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True)),
                           send_err("b", "c", "a", 400, rt, reply_to_message_id="1")]))
    cs.append(case("reply to a message of another chat is 400 reply_target_not_found",
                   base + [mk_user("v", "Vic"), start("c2", "v", "b"), user_send("v", "c2", "elsewhere", 1),
                           send_err("b", "c", "a", 400, rt, reply_to_message_id="1")]))
    cs.append(case("reply_to_message_id that is not a decimal string is 400 invalid_field",
                   base + [send_err("b", "c", "a", 400, invalid("reply_to_message_id", "message_id_format"), reply_to_message_id="one")]))
    cs.append(case("reply_to_message_id \"0\" is 400 invalid_field",
                   base + [send_err("b", "c", "a", 400, invalid("reply_to_message_id", "message_id_format"), reply_to_message_id="0")]))
    cs.append(case("a chat id that does not exist is 404 chat_not_found",
                   base + [bot_call("b", "sendMessage", {"chat_id": "spc_doesnotexist000000", "text": "hi"}, 404,
                                    err(404, "chat_not_found", "chat_not_found"))]))
    cs.append(case("field errors come before chat lookup: empty text to an unknown chat is text_empty",
                   base + [bot_call("b", "sendMessage", {"chat_id": "spc_doesnotexist000000", "text": ""}, 400,
                                    field_err("text_empty", "text", "text_empty"))]))
    cs.append(case("field errors come before permission rules: parse_mode html in an unstarted chat is 400",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"),
                    send_err("b", "c", "x", 400, field_err("unsupported_parse_mode", "parse_mode", "unsupported_parse_mode"), parse_mode="html")]))
    cs.append(case("a message deleted keeps its number: the next message gets the next id",
                   base + [user_send("u", "c", "1", 1), admin("deleteUserMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True)),
                           send("b", "c", "2", 2), history("c", [deleted(1), msg(2, "c", "private", "2", "b")])]))
    return cs


# ---------------------------------------------------------------- permissions.json

def permissions_cases():
    cs = []
    cnf = err(404, "chat_not_found", "chat_not_found")
    e403 = lambda code: err(403, code, code)
    cs.append(case("private rule 1: a chat the user has not started is 403 bot_not_started",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"), send_err("b", "c", "hi", 403, e403("bot_not_started")),
                    history("c", [])]))
    cs.append(case("private rule 1: after startBot the same chat accepts messages",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"), send_err("b", "c", "hi", 403, e403("bot_not_started")),
                    admin("startBot", {"user_id": "{{u}}", "bot_id": "{{b}}"}, 200, ok(private_json("c", "u", "b"))), send("b", "c", "hi", 1)]))
    blk = lambda by, v: admin("setBlocked", {"chat_id": "{{c}}", "by": by, "blocked": v}, 200, ok(True))
    base = setup_private()
    cs.append(case("private rule 2: the user blocked the bot is 403 blocked_by_user",
                   base + [blk("user", True), send_err("b", "c", "hi", 403, e403("blocked_by_user")), history("c", [])]))
    cs.append(case("private rule 2: the bot blocked the user is 403 user_blocked_by_bot",
                   base + [blk("bot", True), send_err("b", "c", "hi", 403, e403("user_blocked_by_bot"))]))
    cs.append(case("private rule 2: blocked by both sides reports blocked_by_user",
                   base + [blk("bot", True), blk("user", True), send_err("b", "c", "hi", 403, e403("blocked_by_user"))]))
    cs.append(case("private rule 2: unblocking lets the bot send again",
                   base + [blk("user", True), send_err("b", "c", "hi", 403, e403("blocked_by_user")), blk("user", False), send("b", "c", "hi", 1)]))
    cs.append(case("private rule 3: after removeMember of the bot, sendMessage is 403 not_member",
                   base + [send("b", "c", "first", 1), admin("removeMember", {"chat_id": "{{c}}", "member_id": "{{b}}"}, 200, ok(True)),
                           send_err("b", "c", "hi", 403, e403("not_member")),
                           admin("getChat", {"chat_id": "{{c}}"}, 200, ok(private_json("c", "u", "b", bot_member=False)))]))
    cs.append(case("private rules in order: not started and blocked reports bot_not_started",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"), blk("user", True),
                    send_err("b", "c", "hi", 403, e403("bot_not_started"))]))
    cs.append(case("private rules in order: blocked and removed reports blocked_by_user",
                   base + [admin("removeMember", {"chat_id": "{{c}}", "member_id": "{{b}}"}, 200, ok(True)), blk("user", True),
                           send_err("b", "c", "hi", 403, e403("blocked_by_user"))]))
    cs.append(case("a private chat of another bot is 404 chat_not_found, not not_member",
                   base + [mk_bot("x"), send_err("x", "c", "hi", 404, cnf)]))
    cs.append(case("a group the bot never belonged to is 404 chat_not_found",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u"]), send_err("b", "g", "hi", 404, cnf)]))
    gbase = [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"])]
    cs.append(case("group rule 1: a bot removed from the group is 403 not_member",
                   gbase + [send("b", "g", "hi", 1, ctype="group"),
                            admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                            send_err("b", "g", "hi", 403, e403("not_member"))]))
    cs.append(case("group rule 1: a bot added with addMember can send",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u"]), send_err("b", "g", "hi", 404, cnf),
                    admin("addMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)), send("b", "g", "hi", 1, ctype="group")]))
    cs.append(case("group rule 1: a bot removed and added again can send again",
                   gbase + [admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                            send_err("b", "g", "hi", 403, e403("not_member")),
                            admin("addMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)), send("b", "g", "hi", 1, ctype="group")]))
    cs.append(case("group rule 2: a dissolved group is 403 chat_dissolved",
                   gbase + [admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)), send_err("b", "g", "hi", 403, e403("chat_dissolved"))]))
    cs.append(case("group rule 3: bots_can_send false is 403 bots_cannot_send",
                   gbase + [admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                            send_err("b", "g", "hi", 403, e403("bots_cannot_send")), history("g", [])]))
    cs.append(case("group rule 3: a group created with bots_can_send false is 403 bots_cannot_send",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"], bots_can_send=False), send_err("b", "g", "hi", 403, e403("bots_cannot_send"))]))
    cs.append(case("group rule 3: bots_can_send back to true lets the bot send",
                   gbase + [admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                            send_err("b", "g", "hi", 403, e403("bots_cannot_send")),
                            admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": True}, 200, ok(True)),
                            send("b", "g", "hi", 1, ctype="group")]))
    cs.append(case("group rules in order: removed from a dissolved group reports not_member",
                   gbase + [admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                            admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)), send_err("b", "g", "hi", 403, e403("not_member"))]))
    cs.append(case("group rules in order: dissolved with bots_can_send false reports chat_dissolved",
                   gbase + [admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                            admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)), send_err("b", "g", "hi", 403, e403("chat_dissolved"))]))
    cs.append(case("a bot's permission in one group does not leak to another",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), mk_group("h", ["u"]), send("b", "g", "ok", 1, ctype="group"),
                    send_err("b", "h", "no", 404, cnf)]))
    cs.append(case("sendChatAction follows the private rules: blocked_by_user",
                   base + [blk("user", True), bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 403, e403("blocked_by_user"))]))
    cs.append(case("sendChatAction follows the group rules: bots_cannot_send",
                   gbase + [admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                            bot_call("b", "sendChatAction", {"chat_id": "{{g}}", "action": "typing"}, 403, e403("bots_cannot_send"))]))
    cs.append(case("a user's own messages keep working in a group where bots cannot send",
                   gbase + [admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                            user_send("u", "g", "humans only", 1, ctype="group")]))
    cs.append(case("sendUserMessage by a user who is not a member is 403 not_member",
                   gbase + [mk_user("v", "Vic"), admin("sendUserMessage", {"user_id": "{{v}}", "chat_id": "{{g}}", "text": "hi"}, 403,
                                                       err(403, "not_member", "user_not_member"))]))
    return cs


# ---------------------------------------------------------------- edit_delete.json

def edit_delete_cases():
    cs = []
    e403 = lambda code: err(403, code, code)

    def edit(b, c, mid, text, status=200, expect=_NO, **kw):
        body = {"chat_id": ph(c), "message_id": str(mid), "text": text}
        body.update(kw)
        return bot_call(b, "editMessageText", body, status, expect)

    def delete(b, c, mid, status=200, expect=_NO):
        return bot_call(b, "deleteMessage", {"chat_id": ph(c), "message_id": str(mid)}, status, expect if expect is not _NO else ok(True))

    free = setup_private()
    std = setup_private(tier="standard")
    cs.append(case("free tier: editMessageText is 403 tier_forbidden",
                   free + [send("b", "c", "hi", 1), edit("b", "c", 1, "edited", 403, err(403, "tier_forbidden", tier_forbidden_desc("editMessageText"))),
                           history("c", [msg(1, "c", "private", "hi", "b")])]))
    cs.append(case("free tier: deleteMessage is 403 tier_forbidden",
                   free + [send("b", "c", "hi", 1), delete("b", "c", 1, 403, err(403, "tier_forbidden", tier_forbidden_desc("deleteMessage"))),
                           history("c", [msg(1, "c", "private", "hi", "b")])]))
    cs.append(case("free tier: editMessageText with a malformed body is 403 tier_forbidden, not 400",
                   free + [bot_call("b", "editMessageText", raw="{bad", status=403, expect=err(403, "tier_forbidden", tier_forbidden_desc("editMessageText")))]))
    cs.append(case("free tier: editMessageText with missing fields is 403 tier_forbidden, not 400",
                   free + [bot_call("b", "editMessageText", {}, 403, err(403, "tier_forbidden", tier_forbidden_desc("editMessageText")))]))
    cs.append(case("free tier: deleteMessage of an unknown chat is 403 tier_forbidden, not 404",
                   free + [bot_call("b", "deleteMessage", {"chat_id": "spc_nope", "message_id": "9"}, 403,
                                    err(403, "tier_forbidden", tier_forbidden_desc("deleteMessage")))]))
    cs.append(case("standard tier: editMessageText returns the message with edit_date",
                   std + [send("b", "c", "hi", 1), advance(60),
                          edit("b", "c", 1, "edited", 200, ok(msg(1, "c", "private", "edited", "b", edit=T0 + 60))),
                          history("c", [msg(1, "c", "private", "edited", "b", edit=T0 + 60)])]))
    cs.append(case("standard tier: deleteMessage returns true and history shows the message as deleted",
                   std + [send("b", "c", "one", 1), send("b", "c", "two", 2), delete("b", "c", 1),
                          history("c", [deleted(1), msg(2, "c", "private", "two", "b")])]))
    cs.append(case("official tier: edit and delete are allowed",
                   setup_private(tier="official", official=True) + [send("b", "c", "hi", 1),
                                                                     edit("b", "c", 1, "hey", 200, ok(msg(1, "c", "private", "hey", "b", edit=T0))),
                                                                     delete("b", "c", 1)]))
    cs.append(case("a free bot upgraded to standard with updateBot may edit",
                   free + [send("b", "c", "hi", 1),
                           admin("updateBot", {"bot_id": "{{b}}", "quota_tier": "standard"}, 200, ok(ident_of("b", tier="standard", official=False))),
                           edit("b", "c", 1, "edited", 200, ok(msg(1, "c", "private", "edited", "b", edit=T0)))]))
    cs.append(case("editing to the same text succeeds and changes nothing (no edit_date)",
                   std + [send("b", "c", "same", 1), advance(5), edit("b", "c", 1, "same", 200, ok(msg(1, "c", "private", "same", "b"))),
                          history("c", [msg(1, "c", "private", "same", "b")])]))
    cs.append(case("an edit is a message_edited update; an edit to the same text is no update",
                   std + [send("b", "c", "v1", 1), advance(7), edit("b", "c", 1, "v2", 200, ok(msg(1, "c", "private", "v2", "b", edit=T0 + 7))),
                          edit("b", "c", 1, "v2", 200, ok(msg(1, "c", "private", "v2", "b", edit=T0 + 7))),
                          admin("getUpdates", {"offset": 3}, 200, ok([{"update_id": 3, "type": "message_edited",
                                                                        "data": {"message": msg(1, "c", "private", "v2", "b", edit=T0 + 7)}}]))]))
    cs.append(case("editing twice keeps the latest text and edit_date",
                   std + [send("b", "c", "v1", 1), advance(10), edit("b", "c", 1, "v2", 200, ok(msg(1, "c", "private", "v2", "b", edit=T0 + 10))),
                          advance(10), edit("b", "c", 1, "v3", 200, ok(msg(1, "c", "private", "v3", "b", edit=T0 + 20))),
                          history("c", [msg(1, "c", "private", "v3", "b", edit=T0 + 20)])]))
    cs.append(case("editing keeps reply_to_message_id",
                   std + [user_send("u", "c", "q", 1), send("b", "c", "a", 2, reply=1),
                          edit("b", "c", 2, "a2", 200, ok(msg(2, "c", "private", "a2", "b", reply=1, edit=T0)))]))
    grp = [mk_user("u"), mk_bot("b", "standard"), mk_bot("o", "standard"), mk_group("g", ["u", "b", "o"])]
    cs.append(case("editing another bot's message is 403 not_message_owner",
                   grp + [send("o", "g", "other's", 1, ctype="group"), edit("b", "g", 1, "mine now", 403, e403("not_message_owner")),
                          history("g", [msg(1, "g", "group", "other's", "o")])]))
    cs.append(case("deleting another bot's message is 403 not_message_owner",
                   grp + [send("o", "g", "other's", 1, ctype="group"), delete("b", "g", 1, 403, e403("not_message_owner")),
                          history("g", [msg(1, "g", "group", "other's", "o")])]))
    cs.append(case("editing a human's message is 403 not_message_owner",
                   std + [user_send("u", "c", "human", 1), edit("b", "c", 1, "bot was here", 403, e403("not_message_owner"))]))
    cs.append(case("deleting a human's message is 403 not_message_owner",
                   std + [user_send("u", "c", "human", 1), delete("b", "c", 1, 403, e403("not_message_owner")),
                          history("c", [msg(1, "c", "private", "human", "u", False)])]))
    mnf = err(404, "message_not_found", "message_not_found")
    cs.append(case("editing an unknown message is 404 message_not_found", std + [send("b", "c", "hi", 1), edit("b", "c", 2, "x", 404, mnf)]))
    cs.append(case("deleting an unknown message is 404 message_not_found", std + [delete("b", "c", 1, 404, mnf)]))
    cs.append(case("deleting twice: the second delete is 404 message_not_found",
                   std + [send("b", "c", "hi", 1), delete("b", "c", 1), delete("b", "c", 1, 404, mnf)]))
    cs.append(case("editing a deleted message is 404 message_not_found",
                   std + [send("b", "c", "hi", 1), delete("b", "c", 1), edit("b", "c", 1, "back", 404, mnf), history("c", [deleted(1)])]))
    cs.append(case("a deleted human message is message_not_found, not not_message_owner",
                   std + [user_send("u", "c", "hi", 1), admin("deleteUserMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True)),
                          delete("b", "c", 1, 404, mnf)]))
    cs.append(case("a message id of another chat is message_not_found here",
                   std + [mk_user("v", "Vic"), start("c2", "v", "b"), send("b", "c2", "there", 1), delete("b", "c", 1, 404, mnf)]))
    cs.append(case("a message deleted keeps its number; the next message gets a new one",
                   std + [send("b", "c", "1", 1), send("b", "c", "2", 2), delete("b", "c", 2), send("b", "c", "3", 3),
                          history("c", [msg(1, "c", "private", "1", "b"), deleted(2), msg(3, "c", "private", "3", "b")])]))
    cs.append(case("edit text rules: empty text is 400 text_empty",
                   std + [send("b", "c", "hi", 1), edit("b", "c", 1, "", 400, field_err("text_empty", "text", "text_empty"))]))
    cs.append(case("edit text rules: 5001 characters is 400 text_too_long",
                   std + [send("b", "c", "hi", 1), edit("b", "c", 1, "é" * 5001, 400, field_err("text_too_long", "text", "text_too_long"))]))
    cs.append(case("edit text rules: 5000 emoji is accepted",
                   std + [send("b", "c", "hi", 1), edit("b", "c", 1, "😀" * 5000, 200, ok(msg(1, "c", "private", "😀" * 5000, "b", edit=T0)))]))
    cs.append(case("edit parse_mode html is 400 unsupported_parse_mode",
                   std + [send("b", "c", "hi", 1),
                          edit("b", "c", 1, "x", 400, field_err("unsupported_parse_mode", "parse_mode", "unsupported_parse_mode"), parse_mode="html")]))
    cs.append(case("edit parse_mode plain is accepted",
                   std + [send("b", "c", "hi", 1), edit("b", "c", 1, "x", 200, ok(msg(1, "c", "private", "x", "b", edit=T0)), parse_mode="plain")]))
    cs.append(case("edit without message_id is 400 missing_field message_id",
                   std + [bot_call("b", "editMessageText", {"chat_id": "{{c}}", "text": "x"}, 400, missing("message_id"))]))
    cs.append(case("edit without text is 400 missing_field text",
                   std + [send("b", "c", "hi", 1), bot_call("b", "editMessageText", {"chat_id": "{{c}}", "message_id": "1"}, 400, missing("text"))]))
    cs.append(case("delete without chat_id is 400 missing_field chat_id",
                   std + [bot_call("b", "deleteMessage", {"message_id": "1"}, 400, missing("chat_id"))]))
    cs.append(case("delete with message_id 'abc' is 400 invalid_field message_id",
                   std + [bot_call("b", "deleteMessage", {"chat_id": "{{c}}", "message_id": "abc"}, 400, invalid("message_id", "message_id_format"))]))
    cs.append(case("edit field errors come before ownership: empty text on a human's message is text_empty",
                   std + [user_send("u", "c", "human", 1), edit("b", "c", 1, "", 400, field_err("text_empty", "text", "text_empty"))]))
    cs.append(case("edit in a chat the bot never saw is 404 chat_not_found",
                   std + [mk_bot("x", "standard"), edit("x", "c", 1, "x", 404, err(404, "chat_not_found", "chat_not_found"))]))
    cs.append(case("edit after the bot was removed from the group is 403 not_member",
                   grp + [send("b", "g", "hi", 1, ctype="group"), admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                          edit("b", "g", 1, "x", 403, e403("not_member")), delete("b", "g", 1, 403, e403("not_member"))]))
    cs.append(case("edit and delete in a dissolved group are 403 chat_dissolved",
                   grp + [send("b", "g", "hi", 1, ctype="group"), admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)),
                          edit("b", "g", 1, "x", 403, e403("chat_dissolved")), delete("b", "g", 1, 403, e403("chat_dissolved"))]))
    cs.append(case("edit in a group where bots cannot send still works (only membership and dissolution matter)",
                   grp + [send("b", "g", "hi", 1, ctype="group"),
                          admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                          edit("b", "g", 1, "x", 200, ok(msg(1, "g", "group", "x", "b", edit=T0))), delete("b", "g", 1)]))
    cs.append(case("edit and delete in a private chat blocked by the user still work",
                   std + [send("b", "c", "hi", 1), admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": True}, 200, ok(True)),
                          edit("b", "c", 1, "x", 200, ok(msg(1, "c", "private", "x", "b", edit=T0))), delete("b", "c", 1)]))
    cs.append(case("deleted text is no longer served in the host's update stream",
                   std + [send("b", "c", "secret", 1), delete("b", "c", 1),
                          admin("getUpdates", {"offset": 3}, 200, ok([{"update_id": 3, "type": "message_deleted",
                                                                        "data": {"chat": {"id": "{{c}}", "type": "private"}, "message_id": "1"}}])),
                          history("c", [deleted(1)])]))
    return cs


# ---------------------------------------------------------------- chat_action.json

def chat_action_cases():
    cs = []
    base = setup_private()

    def act(b, c, a, status=200, expect=_NO):
        return bot_call(b, "sendChatAction", {"chat_id": ph(c), "action": a}, status, expect if expect is not _NO else ok(True))

    def actions(c, lst):
        return admin("getChatActions", {"chat_id": ph(c)}, 200, ok(lst))

    def entry(b, a, exp=T0 * 1000 + 5000):
        return {"bot_id": ph(b), "action": a, "expires_at_ms": exp}

    for a in ACTIONS:
        cs.append(case(f"sendChatAction {a} returns true and shows in getChatActions",
                       base + [act("b", "c", a), actions("c", [entry("b", a)])]))
    for a in ["dancing", "Typing", "", "find_location"]:
        cs.append(case(f"sendChatAction with action {a!r} is 400 invalid_field action",
                       base + [act("b", "c", a, 400, invalid("action", "actions")), actions("c", [])]))
    cs.append(case("sendChatAction without action is 400 missing_field action",
                   base + [bot_call("b", "sendChatAction", {"chat_id": "{{c}}"}, 400, missing("action"))]))
    cs.append(case("sendChatAction with action as a number is 400 invalid_field action",
                   base + [bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": 1}, 400, invalid("action", "must_be_string"))]))
    cs.append(case("sendChatAction without chat_id is 400 missing_field chat_id",
                   base + [bot_call("b", "sendChatAction", {"action": "typing"}, 400, missing("chat_id"))]))
    cs.append(case("a chat action is visible for 5 seconds and expires at 5 s",
                   base + [act("b", "c", "typing"), advance(4), actions("c", [entry("b", "typing")]), advance(0.999),
                           actions("c", [entry("b", "typing")]), advance(0.001), actions("c", [])]))
    cs.append(case("a chat action has expired after advanceClock 5",
                   base + [act("b", "c", "record_voice"), actions("c", [entry("b", "record_voice")]), advance(5), actions("c", [])]))
    cs.append(case("a chat action is cleared by the bot's next sendMessage in that chat",
                   base + [act("b", "c", "typing"), actions("c", [entry("b", "typing")]), send("b", "c", "done", 1), actions("c", [])]))
    cs.append(case("a human message does not clear the bot's chat action",
                   base + [act("b", "c", "typing"), user_send("u", "c", "waiting", 1), actions("c", [entry("b", "typing")])]))
    cs.append(case("a message in another chat does not clear the chat action",
                   base + [mk_user("v", "Vic"), start("c2", "v", "b"), act("b", "c", "typing"), send("b", "c2", "elsewhere", 1),
                           actions("c", [entry("b", "typing")])]))
    cs.append(case("a new chat action replaces the previous one and restarts the 5 s",
                   base + [act("b", "c", "typing"), advance(3), act("b", "c", "upload_photo"),
                           actions("c", [entry("b", "upload_photo", T0 * 1000 + 8000)]), advance(3),
                           actions("c", [entry("b", "upload_photo", T0 * 1000 + 8000)]), advance(2), actions("c", [])]))
    cs.append(case("a chat action is not stored in the chat history",
                   base + [act("b", "c", "typing"), history("c", [])]))
    cs.append(case("a chat action is in the host's update stream",
                   base + [act("b", "c", "upload_document"),
                           admin("getUpdates", {"offset": 2}, 200, ok([{"update_id": 2, "type": "chat_action", "data": {
                               "chat": {"id": "{{c}}", "type": "private"}, "from": {"id": "{{b}}", "is_bot": True},
                               "action": "upload_document", "expires_at_ms": T0 * 1000 + 5000}}]))]))
    cs.append(case("sendChatAction into a group shows per bot",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), act("b", "g", "typing"), actions("g", [entry("b", "typing")])]))
    cs.append(case("sendChatAction in an unstarted chat is 403 bot_not_started",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"), act("b", "c", "typing", 403, err(403, "bot_not_started", "bot_not_started")),
                    actions("c", [])]))
    cs.append(case("sendChatAction in a chat the bot never saw is 404 chat_not_found",
                   base + [mk_bot("x"), act("x", "c", "typing", 404, err(404, "chat_not_found", "chat_not_found"))]))
    cs.append(case("sendChatAction after removal from the private chat is 403 not_member",
                   base + [admin("removeMember", {"chat_id": "{{c}}", "member_id": "{{b}}"}, 200, ok(True)),
                           act("b", "c", "typing", 403, err(403, "not_member", "not_member"))]))
    cs.append(case("sendChatAction in a dissolved group is 403 chat_dissolved",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)),
                    act("b", "g", "typing", 403, err(403, "chat_dissolved", "chat_dissolved"))]))
    cs.append(case("invalid action comes before chat lookup: a bad action to an unknown chat is 400",
                   base + [bot_call("b", "sendChatAction", {"chat_id": "spc_nope", "action": "dancing"}, 400, invalid("action", "actions"))]))
    return cs


# ---------------------------------------------------------------- idempotency.json

def idempotency_cases():
    cs = []
    base = setup_private()
    key = lambda k: {"Idempotency-Key": k}
    reused = err(409, "idempotency_key_reused", "idempotency_key_reused")
    one = history("c", [msg(1, "c", "private", "hi", "b")])
    cs.append(case("a retry with the same Idempotency-Key and body returns the original result and writes nothing",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")), send("b", "c", "hi", 1, headers=key("k-1")),
                           send("b", "c", "hi", 1, headers=key("k-1")), one]))
    cs.append(case("a retry later returns the original result with the original date",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")), advance(3600), send("b", "c", "hi", 1, headers=key("k-1")), one]))
    cs.append(case("the same key with a different body is 409 idempotency_key_reused and writes nothing",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")),
                           bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "different"}, 409, reused, headers=key("k-1")), one]))
    cs.append(case("the same key with an added optional field is a different body: 409",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")),
                           bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "hi", "parse_mode": "plain"}, 409, reused, headers=key("k-1"))]))
    cs.append(case("the same body with its fields in another order is the same request",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")),
                           bot_call("b", "sendMessage", raw='{"text":"hi","chat_id":"{{c}}"}', status=200, expect=ok(msg(1, "c", "private", "hi", "b")),
                                    headers=key("k-1")),
                           bot_call("b", "sendMessage", raw='{ "chat_id" : "{{c}}" ,\n "text" : "hi" }', status=200,
                                    expect=ok(msg(1, "c", "private", "hi", "b")), headers=key("k-1")), one]))
    cs.append(case("different keys are different messages",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")), send("b", "c", "hi", 2, headers=key("k-2")),
                           history("c", [msg(1, "c", "private", "hi", "b"), msg(2, "c", "private", "hi", "b")])]))
    cs.append(case("without a key, two identical sends are two messages",
                   base + [send("b", "c", "hi", 1), send("b", "c", "hi", 2)]))
    cs.append(case("the key survives token rotation",
                   base + [send("b", "c", "hi", 1, headers=key("k-rot")),
                           admin("rotateBotToken", {"bot_id": "{{b}}"}, 200, ok({"token": ANY}), save={"b_tok": "result.token"}),
                           send("b", "c", "hi", 1, headers=key("k-rot")),
                           bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "other"}, 409, reused, headers=key("k-rot")), one]))
    cs.append(case("keys are per bot: another bot may use the same key",
                   [mk_user("u"), mk_bot("b"), mk_bot("x"), mk_group("g", ["u", "b", "x"]),
                    send("b", "g", "from b", 1, ctype="group", headers=key("shared")), send("x", "g", "from x", 2, ctype="group", headers=key("shared")),
                    send("b", "g", "from b", 1, ctype="group", headers=key("shared"))]))
    cs.append(case("a refused request does not store its key: the retry after fixing the chat is sent",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"),
                    bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "hi"}, 403, err(403, "bot_not_started", "bot_not_started"), headers=key("k-1")),
                    admin("startBot", {"user_id": "{{u}}", "bot_id": "{{b}}"}, 200, ok(private_json("c", "u", "b"))),
                    send("b", "c", "hi", 1, headers=key("k-1")), one]))
    cs.append(case("a key of 64 visible characters is accepted",
                   base + [send("b", "c", "hi", 1, headers=key("K" * 64)), send("b", "c", "hi", 1, headers=key("K" * 64))]))
    bad_key = invalid("Idempotency-Key", "idempotency_key_format")
    cs.append(case("a key of 65 characters is 400 invalid_field Idempotency-Key",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "hi"}, 400, bad_key, headers=key("K" * 65)), history("c", [])]))
    cs.append(case("an empty key is 400 invalid_field Idempotency-Key",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "hi"}, 400, bad_key, headers=key(""))]))
    cs.append(case("a key with a space is 400 invalid_field Idempotency-Key",
                   base + [bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "hi"}, 400, bad_key, headers=key("a b"))]))
    cs.append(case("a key is forgotten after 24 hours: the same key with another body is sent",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")), advance(86401),
                           send("b", "c", "new day", 2, date=T0 + 86401, headers=key("k-1"))]))
    cs.append(case("a key is remembered just under 24 hours",
                   base + [send("b", "c", "hi", 1, headers=key("k-1")), advance(86399),
                           bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "other"}, 409, reused, headers=key("k-1"))]))
    cs.append(case("an idempotent replay is not rate limited and does not consume quota",
                   base + [send("b", "c", f"m{i}", i, headers=key(f"k{i}")) for i in range(1, 6)]
                   + [send("b", "c", "m1", 1, headers=key("k1"), resp_headers=NO_RATE_HEADERS), rate_step("b", "c", 1, 1000, "chat"),
                      advance(1), send("b", "c", "m6", 6, date=T0 + 1)]))
    return cs


# ---------------------------------------------------------------- rate_limit.json

def rate_limit_cases():
    cs = []
    base = setup_private()
    burst = [send("b", "c", f"m{i}", i) for i in range(1, 6)]
    cs.append(case("free tier private chat: a burst of 5, then 429 rate_limited with scope chat and Retry-After",
                   base + burst + [rate_step("b", "c", 1, 1000, "chat"),
                                   history("c", [msg(i, "c", "private", f"m{i}", "b") for i in range(1, 6)])]))
    cs.append(case("free tier private chat: after advanceClock 1 the bot may send again",
                   base + burst + [rate_step("b", "c", 1, 1000, "chat"), advance(1), send("b", "c", "again", 6, date=T0 + 1),
                                   rate_step("b", "c", 1, 1000, "chat")]))
    cs.append(case("a refused request consumes nothing: many refusals, then exactly one slot after 1 s",
                   base + burst + [rate_step("b", "c", 1, 1000, "chat") for _ in range(4)]
                   + [advance(1), send("b", "c", "m6", 6, date=T0 + 1), rate_step("b", "c", 1, 1000, "chat")]))
    cs.append(case("retry_after rounds up to whole seconds and retry_after_ms is exact",
                   base + burst + [advance(0.25), rate_step("b", "c", 1, 750, "chat"), advance(0.7), rate_step("b", "c", 1, 50, "chat"),
                                   advance(0.05), send("b", "c", "m6", 6, date=T0 + 1)]))
    cs.append(case("after a long pause the full burst is available again",
                   base + burst + [advance(10)] + [send("b", "c", f"n{i}", 5 + i, date=T0 + 10) for i in range(1, 6)]
                   + [rate_step("b", "c", 1, 1000, "chat")]))
    cs.append(case("the private chat limit is per chat: another chat of the same bot is not limited",
                   base + burst + [mk_user("v", "Vic"), start("c2", "v", "b"), send("b", "c2", "fresh", 1)]))
    cs.append(case("the private chat limit is per bot: another bot in its own chat with the same user is not limited",
                   base + burst + [mk_bot("x"), start("cx", "u", "x"), send("x", "cx", "fresh", 1)]))
    cs.append(case("sendChatAction counts toward the limit",
                   base + [bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 200, ok(True)) for _ in range(5)]
                   + [rate_step("b", "c", 1, 1000, "chat"),
                      bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 429, rate_err(1, 1000, "chat"),
                               resp_headers=refused_headers(1, 1000, "chat"))]))
    std = setup_private(tier="standard")
    cs.append(case("standard tier private chat: a burst of 10 then 429 after 200 ms worth",
                   std + [send("b", "c", f"m{i}", i) for i in range(1, 11)] + [rate_step("b", "c", 1, 200, "chat", limit=10), advance(0.2),
                                                                               send("b", "c", "m11", 11)]))
    cs.append(case("editMessageText counts toward the limit; deleteMessage does not",
                   std + [send("b", "c", "m", 1)]
                   + [bot_call("b", "editMessageText", {"chat_id": "{{c}}", "message_id": "1", "text": f"e{i}"}, 200,
                               ok(msg(1, "c", "private", f"e{i}", "b", edit=T0))) for i in range(1, 10)]
                   + [bot_call("b", "editMessageText", {"chat_id": "{{c}}", "message_id": "1", "text": "e10"}, 429, rate_err(1, 200, "chat"),
                               resp_headers=refused_headers(1, 200, "chat", limit=10)),
                      bot_call("b", "deleteMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True))]))
    cs.append(case("permission errors come before the rate limit: blocked while limited is 403",
                   base + burst + [admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": True}, 200, ok(True)),
                                   send_err("b", "c", "x", 403, err(403, "blocked_by_user", "blocked_by_user"))]))
    cs.append(case("field errors come before the rate limit: empty text while limited is 400",
                   base + burst + [send_err("b", "c", "", 400, field_err("text_empty", "text", "text_empty"))]))
    cs.append(case("reply target errors come before the rate limit",
                   base + burst + [send_err("b", "c", "x", 400, field_err("reply_target_not_found", "reply_to_message_id", "reply_target_not_found"),
                                            reply_to_message_id="99")]))
    gbase = [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"])]
    cs.append(case("free tier group: 20 per minute, then 429 with scope group",
                   gbase + [send("b", "g", f"g{i}", i, ctype="group") for i in range(1, 21)]
                   + [rate_step("b", "g", 3, 3000, "group"), advance(3), send("b", "g", "g21", 21, ctype="group", date=T0 + 3),
                      rate_step("b", "g", 3, 3000, "group")]))
    cs.append(case("standard tier group: 60 per minute, then 429 with scope group",
                   [mk_user("u"), mk_bot("b", "standard"), mk_group("g", ["u", "b"])]
                   + [send("b", "g", f"g{i}", i, ctype="group") for i in range(1, 61)]
                   + [rate_step("b", "g", 1, 1000, "group", limit=60), advance(1), send("b", "g", "g61", 61, ctype="group", date=T0 + 1)]))
    cs.append(case("a request refused by the chat limit does not consume the bot-wide quota",
                   base + burst + [rate_step("b", "c", 1, 1000, "chat") for _ in range(3)]
                   + [mk_user("v", "Vic"), start("c2", "v", "b"), send("b", "c2", "fits", 1), rate_step("b", "c2", 1, 167, "bot", limit=6)],
                   config={"limits": {"free": {"bot": {"count": 6, "period_ms": 1000, "burst": 6},
                                               "private_chat": {"count": 1, "period_ms": 1000, "burst": 5}}}}))
    cs.append(case("free tier bot-wide limit: 30 per second across chats, then 429 with scope bot",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), mk_group("h", ["u", "b"])]
                   + [send("b", "g", f"g{i}", i, ctype="group") for i in range(1, 21)]
                   + [send("b", "h", f"h{i}", i, ctype="group") for i in range(1, 11)]
                   + [rate_step("b", "h", 1, 34, "bot"), advance(0.034), send("b", "h", "h11", 11, ctype="group")]))
    cs.append(case("per-tier limits are configurable: a bot limit of 2 per second",
                   base + [send("b", "c", "1", 1), send("b", "c", "2", 2), rate_step("b", "c", 1, 500, "bot", limit=2), advance(0.5), send("b", "c", "3", 3)],
                   config={"limits": {"free": {"bot": {"count": 2, "period_ms": 1000, "burst": 2}}}}))
    cs.append(case("when both buckets refuse, the longer wait is reported",
                   base + [send("b", "c", "1", 1), rate_step("b", "c", 10, 10000, "chat", limit=1)],
                   config={"limits": {"free": {"bot": {"count": 1, "period_ms": 2000, "burst": 1},
                                               "private_chat": {"count": 1, "period_ms": 10000, "burst": 1}}}}))
    off = setup_private(tier="official", official=True)
    cs.append(case("official tier is unlimited by default: 60 messages at once",
                   off + [send("b", "c", f"m{i}", i) for i in range(1, 61)]))
    # X-RateLimit-* headers: the bucket nearest to refusing, after this request.
    cs.append(case("a counted send carries X-RateLimit-* of the nearest bucket; Remaining counts this request",
                   base + [send("b", "c", f"m{i}", i, resp_headers=rate_headers(5, 5 - i, 1000, "chat")) for i in range(1, 6)]
                   + [rate_step("b", "c", 1, 1000, "chat"), advance(0.25), rate_step("b", "c", 1, 750, "chat"), advance(0.75),
                      send("b", "c", "m6", 6, date=T0 + 1, resp_headers=rate_headers(5, 0, 1000, "chat"))]))
    cs.append(case("X-RateLimit-Reset-After is when Remaining next grows: a group refills one slot per 3 s",
                   gbase + [send("b", "g", "g1", 1, ctype="group", resp_headers=rate_headers(20, 19, 3000, "group")),
                            send("b", "g", "g2", 2, ctype="group", resp_headers=rate_headers(20, 18, 3000, "group")), advance(1),
                            send("b", "g", "g3", 3, ctype="group", date=T0 + 1, resp_headers=rate_headers(20, 17, 2000, "group"))]))
    cs.append(case("the bot-wide bucket is reported when it is nearer to refusing than the chat's",
                   base + [send("b", "c", "1", 1, resp_headers=rate_headers(2, 1, 500, "bot")),
                           send("b", "c", "2", 2, resp_headers=rate_headers(2, 0, 500, "bot")),
                           rate_step("b", "c", 1, 500, "bot", limit=2)],
                   config={"limits": {"free": {"bot": {"count": 2, "period_ms": 1000, "burst": 2}}}}))
    cs.append(case("a tie on Remaining goes to the bucket with the longer Reset-After",
                   base + [send("b", "c", "1", 1, resp_headers=rate_headers(5, 4, 2000, "chat"))],
                   config={"limits": {"free": {"bot": {"count": 1, "period_ms": 1000, "burst": 5},
                                               "private_chat": {"count": 1, "period_ms": 2000, "burst": 5}}}}))
    cs.append(case("a tie on Remaining and Reset-After goes to the bot-wide bucket",
                   base + [send("b", "c", "1", 1, resp_headers=rate_headers(5, 4, 1000, "bot"))],
                   config={"limits": {"free": {"bot": {"count": 1, "period_ms": 1000, "burst": 5},
                                               "private_chat": {"count": 1, "period_ms": 1000, "burst": 5}}}}))
    cs.append(case("editMessageText and sendChatAction carry X-RateLimit-*; deleteMessage and getMe do not count and carry none",
                   std + [send("b", "c", "m", 1, resp_headers=rate_headers(10, 9, 200, "chat")),
                          bot_call("b", "editMessageText", {"chat_id": "{{c}}", "message_id": "1", "text": "e"}, 200,
                                   ok(msg(1, "c", "private", "e", "b", edit=T0)), resp_headers=rate_headers(10, 8, 200, "chat")),
                          bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 200, ok(True),
                                   resp_headers=rate_headers(10, 7, 200, "chat")),
                          bot_call("b", "deleteMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True),
                                   resp_headers=NO_RATE_HEADERS),
                          bot_call("b", "getMe", None, 200, ok(identity("b", "B Bot", "b_bot", "standard")),
                                   resp_headers=NO_RATE_HEADERS)]))
    cs.append(case("a request refused before the rate limit is not counted and carries no X-RateLimit-*",
                   base + burst + [admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": True}, 200, ok(True)),
                                   bot_call("b", "sendMessage", {"chat_id": "{{c}}", "text": "x"}, 403,
                                            err(403, "blocked_by_user", "blocked_by_user"), resp_headers=NO_RATE_HEADERS)]))
    cs.append(case("an official bot has no limits and gets no X-RateLimit-* headers",
                   off + [send("b", "c", "m1", 1, resp_headers=NO_RATE_HEADERS),
                          bot_call("b", "sendChatAction", {"chat_id": "{{c}}", "action": "typing"}, 200, ok(True),
                                   resp_headers=NO_RATE_HEADERS)]))
    cs.append(case("human messages are not rate limited",
                   base + [user_send("u", "c", f"u{i}", i) for i in range(1, 11)] + [send("b", "c", "bot", 11)]))
    return cs


# ---------------------------------------------------------------- console.json

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def user_row(u, name, created, handle=None):
    return {"id": ph(u), "display_name": name, "handle": handle, "created_at": created}


def audit_entry(i, method, target, detail, at=T0):
    return {"id": i, "date": at, "at_ms": at * 1000, "method": method, "target": target, "actor": "admin",
            "peer": None, "detail": detail}


def console_cases():
    cs = []
    page_headers = {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": CSP,
                    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
    cs.append(case("GET /admin/console serves the page without a secret, with a strict CSP, nosniff and no-referrer",
                   [step(request("/admin/console", method="GET"), 200, headers=page_headers),
                    step(request("/admin/console/app.js", method="GET"), 200,
                         headers={"Content-Type": "text/javascript; charset=utf-8", "Content-Security-Policy": CSP,
                                  "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}),
                    step(request("/admin/console/app.css", method="GET"), 200,
                         headers={"Content-Type": "text/css; charset=utf-8", "Cache-Control": "no-cache"}),
                    step(request("/admin/console/", method="GET"), 200, headers=page_headers),
                    step(request("/admin/console/index.html", method="GET"), 200, headers=page_headers)]))
    cs.append(case("the console is GET only, and an unknown console file is 404 method_not_found",
                   [step(request("/admin/console", {}, auth=ADMIN), 405,
                         err(405, "method_not_allowed", "this path accepts GET only"), headers={"Allow": "GET"}),
                    step(request("/admin/console/other.js", method="GET"), 404,
                         err(404, "method_not_found", "method_not_found"))]))
    cs.append(case("listBots is newest first, pages with next_cursor and filters by handle or name (wildcards literal)",
                   [mk_bot("a"), advance(1), mk_bot("b"), advance(1), mk_bot("c"),
                    admin("listBots", {"limit": 2}, 200,
                          ok({"bots": [bot_live("c", created=T0 + 2), bot_live("b", created=T0 + 1)], "next_cursor": ANY}),
                          save={"cur": "result.next_cursor"}),
                    admin("listBots", {"limit": 2, "cursor": "{{cur}}"}, 200, ok({"bots": [bot_live("a")], "next_cursor": None})),
                    admin("listBots", {"query": "B_B"}, 200, ok({"bots": [bot_live("b", created=T0 + 1)], "next_cursor": None})),
                    admin("listBots", {"query": "a%"}, 200, ok({"bots": [], "next_cursor": None})),
                    admin("listBots", {"cursor": "nonsense"}, 400, invalid("cursor", "must be a next_cursor value from an earlier page")),
                    admin("listBots", {"limit": 101}, 400, invalid("limit", "must be an integer from 0 to 100"))]))
    cs.append(case("listUsers and listChats page newest first; listChats filters by member",
                   [mk_user("u", "Ann"), advance(1), mk_user("v", "Vic", handle="vic"), mk_bot("b"), start("c", "u", "b"),
                    advance(1), mk_group("g", ["v", "b"], title="Ops"),
                    admin("listUsers", {}, 200, ok({"users": [user_row("v", "Vic", T0 + 1, "vic"), user_row("u", "Ann", T0)],
                                                    "next_cursor": None})),
                    admin("listUsers", {"query": "VI"}, 200, ok({"users": [user_row("v", "Vic", T0 + 1, "vic")], "next_cursor": None})),
                    admin("listChats", {"member_id": "{{u}}"}, 200, ok({"chats": [
                        {"id": "{{c}}", "type": "private", "created_at": T0 + 1, "member_count": 2, "user_id": "{{u}}",
                         "bot_id": "{{b}}", "started": True, "blocked_by_user": False, "blocked_by_bot": False}],
                        "next_cursor": None})),
                    admin("listChats", {"query": "op"}, 200, ok({"chats": [
                        {"id": "{{g}}", "type": "group", "created_at": T0 + 2, "member_count": 2, "title": "Ops",
                         "bots_can_send": True, "dissolved": False}], "next_cursor": None})),
                    admin("getChatMembers", {"chat_id": "{{g}}"}, 200, ok([
                        {"id": "{{b}}", "is_bot": True, "display_name": "B Bot", "handle": "b_bot"},
                        {"id": "{{v}}", "is_bot": False, "display_name": "Vic", "handle": "vic"}])),
                    admin("getChatMembers", {"chat_id": "spc_nope"}, 404, err(404, "chat_not_found", "chat_not_found"))]))
    cs.append(case("getBotActivity counts requests, refusals by code and messages sent; getBot shows the last request",
                   setup_private() + [send("b", "c", "hi", 1), send_err("b", "c", "", 400, field_err("text_empty", "text", "text_empty")),
                                      bot_call("b", "getMe", None, 200, ok(ident_of("b"))),
                                      admin("getBotActivity", {"bot_id": "{{b}}"}, 200, ok({
                                          "bot_id": "{{b}}", "window_s": 3600, "requests": 3, "refused": 1,
                                          "refusals": {"text_empty": 1}, "messages_sent": 1, "last_request_at": T0,
                                          # T0 is a minute's start: every request is in the last slot.
                                          "per_minute": {"start": T0 - 59 * 60, "requests": [0] * 59 + [3],
                                                         "refused": [0] * 59 + [1], "messages_sent": [0] * 59 + [1]}})),
                                      admin("getBot", {"bot_id": "{{b}}"}, 200, ok(bot_live("b", unacked=1, last=T0))),
                                      admin("getBotActivity", {"bot_id": "bot_nope"}, 404, err(404, "bot_not_found", "no bot with this id"))]))
    cs.append(case("getAuditLog lists every change newest first, with no token or secret; reads are not logged",
                   [mk_user("u", "Ann"), mk_bot("b"), admin("listBots", {}, 200),
                    admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200),
                    admin("rotateBotToken", {"bot_id": "{{b}}"}, 200, ok({"token": ANY})),
                    admin("getAuditLog", {"limit": 3}, 200, ok({"entries": [
                        audit_entry(4, "rotateBotToken", "{{b}}", {"bot_id": "{{b}}"}),
                        audit_entry(3, "updateBot", "{{b}}", {"bot_id": "{{b}}", "status": "suspended"}),
                        audit_entry(2, "createBot", "{{b}}", {"display_name": "B Bot", "handle": "b_bot"})],
                        "next_before": 2})),
                    admin("getAuditLog", {"before": 2}, 200, ok({"entries": [
                        audit_entry(1, "createUser", "{{u}}", {"display_name": "Ann"})], "next_before": None})),
                    admin("getAuditLog", {"target": "{{u}}"}, 200, ok({"entries": [
                        audit_entry(1, "createUser", "{{u}}", {"display_name": "Ann"})], "next_before": None}))]))
    return cs


# ---------------------------------------------------------------- host_api.json

def host_api_cases():
    cs = []
    cs.append(case("createUser returns the user; handle defaults to null",
                   [mk_user("u", "Ann"), mk_user("v", "Vic", handle="vic")]))
    cs.append(case("createUser without display_name is 400 missing_field",
                   [admin("createUser", {}, 400, missing("display_name"))]))
    cs.append(case("createBot returns the identity and a token; defaults are free tier, not verified, not official",
                   [mk_bot("b"), admin("getBot", {"bot_id": "{{b}}"}, 200, ok(bot_live("b")))]))
    cs.append(case("createBot without handle is 400 missing_field handle",
                   [admin("createBot", {"display_name": "X"}, 400, missing("handle"))]))
    cs.append(case("createBot with an unknown quota_tier is 400 invalid_field",
                   [admin("createBot", {"display_name": "X", "handle": "x", "quota_tier": "gold"}, 400, invalid("quota_tier", "quota_tier"))]))
    cs.append(case("updateBot changes display_name, verified and avatar_key",
                   [mk_bot("b"),
                    admin("updateBot", {"bot_id": "{{b}}", "display_name": "Renamed", "verified": True, "avatar_key": "av/1.png"}, 200,
                          ok(dict(ident_of("b", verified=True, avatar="av/1.png"), display_name="Renamed"))),
                    step(request("/bot/getMe", auth="Bot {{b_tok}}"), 200, ok(dict(ident_of("b", verified=True, avatar="av/1.png"), display_name="Renamed")))]))
    taken = err(409, "handle_taken", "handle_taken", {"field": "handle"})
    cs.append(case("createBot with a handle another bot has, in any case, is 409 handle_taken and creates nothing",
                   [mk_bot("b"),
                    admin("createBot", {"display_name": "X", "handle": "b_bot"}, 409, taken),
                    admin("createBot", {"display_name": "X", "handle": "B_Bot"}, 409, taken),
                    admin("getStats", {}, 200, ok({"users": 0, "bots": 1, "chats": 0, "messages": 0, "schema_version": ANY}))]))
    cs.append(case("updateBot to a handle another bot has is 409 handle_taken and changes nothing; its own in another case is fine",
                   [mk_bot("b"), mk_bot("x"),
                    admin("updateBot", {"bot_id": "{{x}}", "display_name": "Renamed", "handle": "B_BOT"}, 409, taken),
                    step(request("/bot/getMe", auth="Bot {{x_tok}}"), 200, ok(ident_of("x"))),
                    admin("updateBot", {"bot_id": "{{x}}", "handle": "X_Bot"}, 200, ok(dict(ident_of("x"), handle="X_Bot")))]))
    cs.append(case("a suspended bot keeps its handle: createBot with it is 409 handle_taken",
                   [mk_bot("b"), admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200, ok(ident_of("b", status="suspended"))),
                    admin("createBot", {"display_name": "X", "handle": "b_bot"}, 409, taken)]))
    handle_chars = "may contain only letters a-z, digits 0-9 and _"
    cs.append(case("createBot with a handle outside a-z, 0-9 and _ is 400 invalid_field naming the character, and creates nothing",
                   [admin("createBot", {"display_name": "X", "handle": "echo-bot"}, 400, invalid("handle", f"{handle_chars} (found U+002D)")),
                    admin("createBot", {"display_name": "X", "handle": "überbot"}, 400, invalid("handle", f"{handle_chars} (found U+00FC)")),
                    admin("createUser", {"display_name": "X", "handle": "ann smith"}, 400, invalid("handle", f"{handle_chars} (found U+0020)")),
                    admin("getStats", {}, 200, ok({"users": 0, "bots": 0, "chats": 0, "messages": 0, "schema_version": ANY}))]))
    cs.append(case("createBot with a handle of 33 characters is 400 invalid_field; 32 is fine",
                   [admin("createBot", {"display_name": "X", "handle": "a" * 33}, 400, invalid("handle", "must be 1 to 32 characters")),
                    admin("createBot", {"display_name": "X", "handle": "a" * 32}, 200)]))
    control = "must not contain control characters"
    cs.append(case("a display_name with a control character (ESC, NUL) is 400 invalid_field naming it",
                   [admin("createUser", {"display_name": "\x1b[31mAdmin"}, 400, invalid("display_name", f"{control} (found U+001B)")),
                    admin("createUser", {"display_name": "Ann\x00"}, 400, invalid("display_name", f"{control} (found U+0000)")),
                    admin("createBot", {"display_name": "Two\nlines", "handle": "x"}, 400, invalid("display_name", f"{control} (found U+000A)")),
                    admin("getStats", {}, 200, ok({"users": 0, "bots": 0, "chats": 0, "messages": 0, "schema_version": ANY}))]))
    cs.append(case("updateBot to a display_name with a bidirectional override is 400 invalid_field and changes nothing",
                   [mk_bot("b"),
                    admin("updateBot", {"bot_id": "{{b}}", "display_name": "Pay\u202egnp.exe"}, 400,
                          invalid("display_name", "must not contain bidirectional override or isolate characters (found U+202E)")),
                    admin("updateBot", {"bot_id": "{{b}}", "display_name": "a\u2066b"}, 400,
                          invalid("display_name", "must not contain bidirectional override or isolate characters (found U+2066)")),
                    step(request("/bot/getMe", auth="Bot {{b_tok}}"), 200, ok(ident_of("b")))]))
    cs.append(case("a group title with a zero-width character is 400 invalid_field and creates nothing",
                   [admin("createGroup", {"title": "ad\u200bmins"}, 400, invalid("title", "must not contain zero-width characters (found U+200B)")),
                    admin("createGroup", {"title": "\ufeffTeam"}, 400, invalid("title", "must not contain zero-width characters (found U+FEFF)")),
                    admin("getStats", {}, 200, ok({"users": 0, "bots": 0, "chats": 0, "messages": 0, "schema_version": ANY}))]))
    cs.append(case("updateBot with status other than active or suspended is 400 invalid_field",
                   [mk_bot("b"), admin("updateBot", {"bot_id": "{{b}}", "status": "deleted"}, 400, invalid("status", "must be active or suspended"))]))
    cfg = {"operational_key": OP_KEY}
    cs.append(case("getOperationalToken of an official bot returns its current token",
                   [mk_bot("o", "official", official=True),
                    admin("getOperationalToken", {"bot_id": "{{o}}"}, 200, ok({"token": "{{o_tok}}"})),
                    admin("rotateBotToken", {"bot_id": "{{o}}"}, 200, ok({"token": ANY}), save={"o_tok2": "result.token"}),
                    admin("getOperationalToken", {"bot_id": "{{o}}"}, 200, ok({"token": "{{o_tok2}}"})),
                    step(request("/bot/getMe", auth="Bot {{o_tok2}}"), 200, ok(ident_of("o")))], cfg))
    cs.append(case("getOperationalToken of a non-official bot is 403 token_not_recoverable",
                   [mk_bot("b"), admin("getOperationalToken", {"bot_id": "{{b}}"}, 403, err(403, "token_not_recoverable", "token_not_recoverable"))], cfg))
    cs.append(case("getOperationalToken of a standard-tier bot that is not official is 403 token_not_recoverable",
                   [mk_bot("s", "standard"), admin("getOperationalToken", {"bot_id": "{{s}}"}, 403,
                                                   err(403, "token_not_recoverable", "token_not_recoverable"))], cfg))
    cs.append(case("getOperationalToken without an operational_key configured is 403 token_not_recoverable",
                   [mk_bot("o", "official", official=True),
                    admin("getOperationalToken", {"bot_id": "{{o}}"}, 403, err(403, "token_not_recoverable", "token_not_recoverable"))]))
    cs.append(case("an official bot made non-official loses its operational copy",
                   [mk_bot("o", "official", official=True),
                    admin("updateBot", {"bot_id": "{{o}}", "official": False}, 200, ok(ident_of("o", official=False))),
                    admin("getOperationalToken", {"bot_id": "{{o}}"}, 403, err(403, "token_not_recoverable", "token_not_recoverable"))], cfg))
    cs.append(case("createPrivateChat twice returns the same chat (one per pair)",
                   [mk_user("u"), mk_bot("b"), private_unstarted("c", "u", "b"),
                    admin("createPrivateChat", {"user_id": "{{u}}", "bot_id": "{{b}}"}, 200, ok(private_json("c", "u", "b", started=False))),
                    admin("startBot", {"user_id": "{{u}}", "bot_id": "{{b}}"}, 200, ok(private_json("c", "u", "b")))]))
    cs.append(case("setBlocked is reflected by getChat",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    admin("setBlocked", {"chat_id": "{{c}}", "by": "bot", "blocked": True}, 200, ok(True)),
                    admin("getChat", {"chat_id": "{{c}}"}, 200, ok(private_json("c", "u", "b", by_bot=True)))]))
    cs.append(case("setBlocked with by other than user or bot is 400 invalid_field by",
                   [mk_user("u"), mk_bot("b"), start("c", "u", "b"),
                    admin("setBlocked", {"chat_id": "{{c}}", "by": "admin", "blocked": True}, 400, invalid("by", "must be user or bot"))]))
    base = setup_private()
    cs.append(case("getChatHistory lists messages in order with deleted ones as {message_id, deleted:true}",
                   setup_private(tier="standard") + [user_send("u", "c", "u1", 1), send("b", "c", "b2", 2), send("b", "c", "b3", 3),
                                                      bot_call("b", "deleteMessage", {"chat_id": "{{c}}", "message_id": "2"}, 200, ok(True)),
                                                      admin("deleteUserMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True)),
                                                      history("c", [deleted(1), deleted(2), msg(3, "c", "private", "b3", "b")])]))
    msgs = [send("b", "c", f"m{i}", i) for i in range(1, 6)]
    cs.append(case("getChatHistory pages with after_message_id and limit",
                   base + msgs + [history("c", [msg(1, "c", "private", "m1", "b"), msg(2, "c", "private", "m2", "b")], limit=2),
                                  history("c", [msg(3, "c", "private", "m3", "b"), msg(4, "c", "private", "m4", "b")], after_message_id="2", limit=2),
                                  history("c", [msg(5, "c", "private", "m5", "b")], after_message_id="4", limit=2),
                                  history("c", [], after_message_id="5", limit=2)]))
    cs.append(case("getChatHistory with limit over 100 is 400 invalid_field limit",
                   base + [admin("getChatHistory", {"chat_id": "{{c}}", "limit": 101}, 400, invalid("limit", "must be an integer from 0 to 100"))]))
    cs.append(case("getChatHistory of an unknown chat is 404 chat_not_found",
                   [admin("getChatHistory", {"chat_id": "spc_nope"}, 404, err(404, "chat_not_found", "chat_not_found"))]))
    c_ref = {"id": "{{c}}", "type": "private"}
    upd1 = {"update_id": 1, "type": "bot_started", "data": {"chat": c_ref, "user": {"id": "{{u}}", "display_name": "U", "handle": None}}}
    upd2 = {"update_id": 2, "type": "message_created", "data": {"message": msg(1, "c", "private", "from bot", "b")}}
    upd3 = {"update_id": 3, "type": "message_created", "data": {"message": msg(2, "c", "private", "from human", "u", False)}}
    upd4 = {"update_id": 4, "type": "blocked", "data": {"chat": c_ref, "by": "user"}}
    ub = base + [send("b", "c", "from bot", 1), user_send("u", "c", "from human", 2),
                 admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": True}, 200, ok(True))]
    cs.append(case("getUpdates returns every event of the service in order, bot messages included",
                   ub + [admin("getUpdates", {}, 200, ok([upd1, upd2, upd3, upd4]))]))
    cs.append(case("getUpdates offset confirms earlier updates; later calls without offset start there",
                   ub + [admin("getUpdates", {"offset": 3}, 200, ok([upd3, upd4])), admin("getUpdates", {}, 200, ok([upd3, upd4])),
                         admin("getUpdates", {"offset": 5}, 200, ok([])), admin("getUpdates", {}, 200, ok([])),
                         admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": False}, 200, ok(True)),
                         admin("getUpdates", {}, 200, ok([{"update_id": 5, "type": "unblocked", "data": {"chat": c_ref, "by": "user"}}]))]))
    cs.append(case("getUpdates confirmation is durable across calls",
                   ub + [admin("getUpdates", {"offset": 4}, 200, ok([upd4])), admin("getUpdates", {}, 200, ok([upd4])),
                         admin("getUpdates", {}, 200, ok([upd4]))]))
    cs.append(case("getUpdates limit returns the first updates only",
                   ub + [admin("getUpdates", {"limit": 2}, 200, ok([upd1, upd2])), admin("getUpdates", {"offset": 3, "limit": 1}, 200, ok([upd3]))]))
    cs.append(case("getUpdates with limit over 1000 is 400 invalid_field limit",
                   [admin("getUpdates", {"limit": 1001}, 400, invalid("limit", "must be an integer from 0 to 1000"))]))
    cs.append(case("group membership changes are updates",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u"]),
                    admin("addMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                    admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                    admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                    admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)),
                    admin("getUpdates", {}, 200, ok([
                        {"update_id": 1, "type": "member_added", "data": {"chat": {"id": "{{g}}", "type": "group"}, "member": {"id": "{{u}}", "is_bot": False}}},
                        {"update_id": 2, "type": "member_added", "data": {"chat": {"id": "{{g}}", "type": "group"}, "member": {"id": "{{b}}", "is_bot": True}}},
                        {"update_id": 3, "type": "chat_permissions_changed", "data": {"chat": {"id": "{{g}}", "type": "group"}, "bots_can_send": False}},
                        {"update_id": 4, "type": "member_removed", "data": {"chat": {"id": "{{g}}", "type": "group"}, "member": {"id": "{{b}}", "is_bot": True}}},
                        {"update_id": 5, "type": "chat_dissolved", "data": {"chat": {"id": "{{g}}", "type": "group"}}},
                    ]))]))
    cs.append(case("advanceClock moves message dates", base + [advance(3600), send("b", "c", "hi", 1, date=T0 + 3600)]))
    cs.append(case("advanceClock without seconds is 400 missing_field seconds", [admin("advanceClock", {}, 400, missing("seconds"))]))
    cs.append(case("advanceClock with negative seconds is 400 invalid_field seconds",
                   [admin("advanceClock", {"seconds": -1}, 400, invalid("seconds", "must be a number from 0 to 1e9"))]))
    cs.append(case("advanceClock is 404 when the service runs on the system clock",
                   [admin("advanceClock", {"seconds": 5}, 404, err(404, "method_not_found", "advance_clock_404"))], {"clock": "system"}))
    cs.append(case("sendUserMessage follows the text rules",
                   base + [admin("sendUserMessage", {"user_id": "{{u}}", "chat_id": "{{c}}", "text": ""}, 400, field_err("text_empty", "text", "text_empty")),
                           admin("sendUserMessage", {"user_id": "{{u}}", "chat_id": "{{c}}", "text": "x" * 5001}, 400,
                                 field_err("text_too_long", "text", "text_too_long")),
                           admin("sendUserMessage", {"user_id": "{{u}}", "chat_id": "{{c}}", "text": "é" * 5000}, 200,
                                 ok(msg(1, "c", "private", "é" * 5000, "u", False)))]))
    cs.append(case("sendUserMessage with a reply to a missing message is reply_target_not_found",
                   base + [admin("sendUserMessage", {"user_id": "{{u}}", "chat_id": "{{c}}", "text": "x", "reply_to_message_id": "1"}, 400,
                                 field_err("reply_target_not_found", "reply_to_message_id", "reply_target_not_found"))]))
    cs.append(case("a dissolved group refuses human messages too",
                   [mk_user("u"), mk_bot("b"), mk_group("g", ["u", "b"]), admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)),
                    admin("sendUserMessage", {"user_id": "{{u}}", "chat_id": "{{g}}", "text": "x"}, 403, err(403, "chat_dissolved", "chat_dissolved"))]))
    return cs


# ---------------------------------------------------------------- gateway.json


class Seeded:
    """The service's seeded randomness (src/random.rs): draw n is
    SHA-256(seed as 8 LE bytes || n as 8 LE bytes); an id takes its first 16
    bytes, a token all 32 (src/auth.rs). Every helper below that makes the
    service draw calls it in the service's order, so ids are exact."""

    def __init__(self, seed):
        self.seed = seed
        self.n = 0
        self.sessions = {}  # conn -> session id of its last successful open

    def _draw(self):
        d = hashlib.sha256(self.seed.to_bytes(8, "little") + self.n.to_bytes(8, "little")).digest()
        self.n += 1
        return d

    def id(self, prefix):
        return prefix + base64.urlsafe_b64encode(self._draw()[:16]).decode().rstrip("=")

    def token(self):
        return "bot_" + base64.urlsafe_b64encode(self._draw()).decode().rstrip("=")


# Literal ids by placeholder name, and limits set by createBot, in the current gateway case.
IDS = {}
LIMITS = {}


def g_user(r, u):
    uid = r.id("usr_")  # createUser: one draw, after validation
    IDS[u] = uid
    return admin("createUser", {"display_name": u.capitalize()}, 200,
                 ok({"id": uid, "display_name": u.capitalize(), "handle": None}), save={u: "result.id"})


def g_bot(r, b, tier="free", limit=None):
    bid = r.id("bot_")  # createBot: the id, then the token (no operational copy here)
    tok = r.token()
    IDS[b] = bid
    LIMITS[b] = limit
    name, handle = f"{b.capitalize()} Bot", f"{b}_bot"
    BOTS[b] = (name, handle, tier, False, False)
    body = {"display_name": name, "handle": handle}
    if tier != "free":
        body["quota_tier"] = tier
    if limit is not None:
        body["gateway_connection_limit"] = limit
    ident = identity(None, name, handle, tier, limit=limit)
    ident["id"] = bid
    return admin("createBot", body, 200, ok({"bot": ident, "token": tok}), save={b: "result.bot.id", f"{b}_tok": "result.token"})


def g_start(r, c, u, b):
    """startBot of a new pair: the private chat's id is one draw."""
    IDS[c] = r.id("spc_")
    return admin("startBot", {"user_id": ph(u), "bot_id": ph(b)}, 200, ok(private_json(None, u, b) | {"id": IDS[c]}),
                 save={c: "result.id"})


def g_group(r, g, members):
    IDS[g] = r.id("spc_")  # createGroup: one draw, after every member id is checked
    title = f"Group {g}"
    ms = sorted(({"id": IDS[m], "is_bot": m in BOTS} for m in members), key=lambda m: m["id"])
    res = {"id": IDS[g], "type": "group", "title": title, "bots_can_send": True, "dissolved": False, "members": ms}
    return admin("createGroup", {"title": title, "member_ids": [ph(m) for m in members]}, 200, ok(res), save={g: "result.id"})


def g_rotate(r, b, new):
    tok = r.token()  # rotateBotToken: one draw
    return admin("rotateBotToken", {"bot_id": ph(b)}, 200, ok({"token": tok}), save={new: "result.token"})


def g_open(r, conn, tok, query="", status=101, body=None, headers=None):
    s = {"gateway": "open", "conn": conn, "token": ph(tok)}
    if query:
        s["query"] = query
    e = {"status": status}
    if status == 101:
        r.sessions[conn] = r.id("gws_")  # the session id: one draw, after every check passed
    else:
        e["body"] = body
        if headers:
            e["headers"] = headers
    s["expect"] = e
    return s


def g_text(conn, text):
    return {"gateway": "text", "conn": conn, "text": text if isinstance(text, str) else json.dumps(text, separators=(",", ":"))}


def g_binary(conn):
    return {"gateway": "binary", "conn": conn}


def g_drop(conn):
    return {"gateway": "drop", "conn": conn}


def g_poll(conn, frames=(), close=None):
    e = {"frames": list(frames)}
    if close is not None:
        code, reason = close
        e["close"] = {"code": code, "reason": reason}
        e["closed_event"] = {"code": code, "reason": reason}
    return {"gateway": "poll", "conn": conn, "expect": e}


def hello(r, conn, b, replay_from, truncated=False, interval=41250):
    return {"op": "hello", "session_id": r.sessions[conn], "heartbeat_interval_ms": interval, "bot": ident_of(b, limit=LIMITS[b]),
            "replay_from": replay_from, "replay_truncated": truncated}


def ev(seq, kind, data):
    return {"op": "event", "seq": seq, "type": kind, "data": data}


def chat_ref(c, kind="private"):
    return {"id": ph(c), "type": kind}


def started_ev(seq, c, u):
    return ev(seq, "bot_started", {"chat": chat_ref(c), "user": {"id": ph(u), "display_name": u.capitalize(), "handle": None}})


def created_ev(seq, m):
    return ev(seq, "message_created", {"message": m})


def member_ev(seq, kind, g, m, is_bot):
    return ev(seq, kind, {"chat": chat_ref(g, "group"), "member": {"id": ph(m), "is_bot": is_bot}})


HB = {"op": "heartbeat"}
HB_ACK = {"op": "heartbeat_ack"}
INVALID = (4001, "invalid_payload")
AUTH_FAILED = (4004, "authentication_failed")
TIMEOUT = (4009, "session_timeout")


def ack(seq):
    return {"op": "ack", "seq": seq}


def gateway_cases():
    cs = []

    def gcase(name, build, seed, config=None):
        IDS.clear()
        LIMITS.clear()
        BOTS.clear()
        r = Seeded(seed)
        cfg = {"random_seed": seed}
        cfg.update(config or {})
        cs.append(case(name, build(r), cfg))

    def base(r, tier="standard", limit=None):
        return [g_user(r, "u"), g_bot(r, "b", tier, limit), g_start(r, "c", "u", "b")]

    def hello_exact(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            g_poll("g"),
        ]
    gcase("hello gives the session id, heartbeat interval, bot identity and replay position, then the replay", hello_exact, 1)

    def hello_interval(r):
        return [g_bot(r, "b"), g_open(r, "g", "b_tok"), g_poll("g", [hello(r, "g", "b", 1, interval=1000)])]
    gcase("hello reports the configured heartbeat interval; a bot without events gets hello only", hello_interval, 2,
          {"heartbeat_interval_ms": 1000})

    def live(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            user_send("u", "c", "hello", 1),
            g_poll("g", [created_ev(2, msg(1, "c", "private", "hello", "u", False))]),
            send("b", "c", "mine", 2),
            g_poll("g"),
            user_send("u", "c", "again", 3),
            g_poll("g", [created_ev(3, msg(3, "c", "private", "again", "u", False))]),
        ]
    gcase("a human message is delivered live; the bot's own message is not", live, 3)

    def replay(r):
        m = [msg(i, "c", "private", f"m{i}", "u", False) for i in range(1, 4)]
        return base(r) + [user_send("u", "c", f"m{i}", i) for i in range(1, 4)] + [
            g_open(r, "g1", "b_tok"),
            g_poll("g1", [hello(r, "g1", "b", 1), started_ev(1, "c", "u")] + [created_ev(i + 1, m[i - 1]) for i in range(1, 4)]),
            g_text("g1", ack(2)),
            g_poll("g1"),
            g_drop("g1"),
            g_open(r, "g2", "b_tok"),
            g_poll("g2", [hello(r, "g2", "b", 3), created_ev(3, m[1]), created_ev(4, m[2])]),
            g_text("g2", ack(4)),
            g_poll("g2"),
            g_drop("g2"),
            g_open(r, "g3", "b_tok"),
            g_poll("g3", [hello(r, "g3", "b", 5)]),
        ]
    gcase("events replay until acked; each reconnect starts after the last ack", replay, 4)

    def unacked(r):
        return base(r) + [
            g_open(r, "g1", "b_tok"),
            g_poll("g1", [hello(r, "g1", "b", 1), started_ev(1, "c", "u")]),
            g_drop("g1"),
            user_send("u", "c", "while away", 1),
            g_open(r, "g2", "b_tok"),
            g_poll("g2", [hello(r, "g2", "b", 1), started_ev(1, "c", "u"),
                          created_ev(2, msg(1, "c", "private", "while away", "u", False))]),
        ]
    gcase("a dropped connection acked nothing: the reconnect replays everything, with what came meanwhile", unacked, 5)

    def after(r):
        m = [msg(i, "c", "private", f"m{i}", "u", False) for i in range(1, 4)]
        return base(r) + [user_send("u", "c", f"m{i}", i) for i in range(1, 4)] + [
            g_open(r, "g1", "b_tok"),
            g_poll("g1", [hello(r, "g1", "b", 1), started_ev(1, "c", "u")] + [created_ev(i + 1, m[i - 1]) for i in range(1, 4)]),
            g_text("g1", ack(4)),
            g_poll("g1"),
            g_drop("g1"),
            g_open(r, "g2", "b_tok", "?after=2"),
            g_poll("g2", [hello(r, "g2", "b", 3), created_ev(3, m[1]), created_ev(4, m[2])]),
            g_drop("g2"),
            g_open(r, "g3", "b_tok", "?after=0"),
            g_poll("g3", [hello(r, "g3", "b", 1), started_ev(1, "c", "u")] + [created_ev(i + 1, m[i - 1]) for i in range(1, 4)]),
            g_drop("g3"),
            g_open(r, "g4", "b_tok", "?after=99"),
            g_poll("g4", [hello(r, "g4", "b", 5)]),
            g_drop("g4"),
            g_open(r, "g5", "b_tok"),
            g_poll("g5", [hello(r, "g5", "b", 5)]),
        ]
    gcase("?after=N replays from N+1 whatever was acked, and past the last event replays nothing; the ack stays", after, 6)

    def after_bad(r):
        bad = invalid("after", "must be a non-negative integer")
        susp = err(403, "bot_suspended", "bot_suspended")
        # A free bot has one slot: the open at the end shows no refusal kept one.
        return base(r, "free") + [
            g_open(r, "g", "b_tok", "?after=x", 400, bad),
            g_open(r, "g", "b_tok", "?after=-1", 400, bad),
            g_open(r, "g", "b_tok", "?after=", 400, bad),
            admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200, ok(ident_of("b", status="suspended"))),
            g_open(r, "g", "b_tok", "?after=x", 403, susp),
            admin("updateBot", {"bot_id": "{{b}}", "status": "active"}, 200, ok(ident_of("b"))),
            g_open(r, "g", "b_tok", "?after=1"),
            g_poll("g", [hello(r, "g", "b", 2)]),
        ]
    gcase("?after that is not a non-negative integer is 400 invalid_field after, checked after the bot's status; refusals hold no slot",
          after_bad, 7)

    def truncated(r):
        return base(r) + [
            user_send("u", "c", "old", 1),
            g_open(r, "g1", "b_tok"),
            g_poll("g1", [hello(r, "g1", "b", 1), started_ev(1, "c", "u"), created_ev(2, msg(1, "c", "private", "old", "u", False))]),
            g_text("g1", ack(2)),
            g_poll("g1"),
            g_drop("g1"),
            advance(120),
            user_send("u", "c", "new", 2, date=T0 + 120),
            g_open(r, "g2", "b_tok", "?after=0"),
            g_poll("g2", [hello(r, "g2", "b", 3, truncated=True), created_ev(3, msg(2, "c", "private", "new", "u", False, date=T0 + 120))]),
        ]
    gcase("replay_truncated when retention dropped acked events that ?after asks for", truncated, 8, {"event_retention_s": 60})

    def scrubbed(r):
        return base(r) + [
            user_send("u", "c", "secret", 1),
            admin("deleteUserMessage", {"chat_id": "{{c}}", "message_id": "1"}, 200, ok(True)),
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u"),
                         created_ev(2, {k: v for k, v in msg(1, "c", "private", "secret", "u", False).items() if k != "text"}),
                         ev(3, "message_deleted", {"chat": chat_ref("c"), "message_id": "1"})]),
        ]
    gcase("a deleted message's text is gone from the replayed message_created", scrubbed, 9)

    def heartbeat(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            g_text("g", HB),
            g_poll("g", [HB_ACK]),
            g_text("g", HB),
            g_text("g", HB),
            g_poll("g", [HB_ACK, HB_ACK]),
            g_text("g", {"op": "heartbeat", "d": None}),
            g_poll("g", [HB_ACK]),
        ]
    gcase("each heartbeat is answered with heartbeat_ack, in order", heartbeat, 10)

    def timeout(r):
        return [g_bot(r, "b"),
                g_open(r, "g", "b_tok"),
                g_poll("g", [hello(r, "g", "b", 1, interval=1000)]),
                advance(2),
                g_poll("g"),
                advance(0.001),
                g_poll("g", close=TIMEOUT),
                g_poll("g"),
                g_open(r, "g2", "b_tok"),
                g_poll("g2", [hello(r, "g2", "b", 1, interval=1000)])]
    gcase("without heartbeats the session is alive at 2 intervals and closes 4009 at 2 intervals + 1 ms, freeing its slot",
          timeout, 11, {"heartbeat_interval_ms": 1000})

    def timeout_default(r):
        return [g_bot(r, "b"),
                g_open(r, "g", "b_tok"),
                g_poll("g", [hello(r, "g", "b", 1)]),
                advance(82.5),
                g_poll("g"),
                advance(0.001),
                g_poll("g", close=TIMEOUT)]
    gcase("with the default interval of 41250 ms the deadline is 82501 ms after the last heartbeat", timeout_default, 12)

    def heartbeat_moves(r):
        return [g_bot(r, "b"),
                g_open(r, "g", "b_tok"),
                g_poll("g", [hello(r, "g", "b", 1, interval=1000)]),
                advance(1.5),
                g_text("g", HB),
                g_poll("g", [HB_ACK]),
                advance(2),
                g_poll("g"),
                advance(0.001),
                g_poll("g", close=TIMEOUT)]
    gcase("a heartbeat moves the deadline to 2 intervals + 1 ms after it", heartbeat_moves, 13, {"heartbeat_interval_ms": 1000})

    def invalid_case(name, seed, text, frames_before=()):
        def build(r):
            steps = base(r, "free") + [
                g_open(r, "g", "b_tok"),
                g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            ]
            steps += [g_binary("g") if text is None else g_text("g", text)]
            steps += [g_poll("g", close=INVALID),
                      g_poll("g"),
                      # The closed session freed the free tier's only slot.
                      g_open(r, "g2", "b_tok"),
                      g_poll("g2", [hello(r, "g2", "b", 1), started_ev(1, "c", "u")])]
            return steps
        gcase(name, build, seed)

    invalid_case("a message that is not JSON closes 4001 invalid_payload", 20, "not json")
    invalid_case("a JSON message that is not an object closes 4001", 21, "[1]")
    invalid_case("a message without op closes 4001", 22, "{}")
    invalid_case("an unknown op closes 4001", 23, '{"op":"dance"}')
    invalid_case("an ack without seq closes 4001", 24, '{"op":"ack"}')
    invalid_case("an ack with a string seq closes 4001", 25, '{"op":"ack","seq":"1"}')
    invalid_case("an ack with a negative seq closes 4001", 26, '{"op":"ack","seq":-1}')
    invalid_case("an ack with a fractional seq closes 4001", 27, '{"op":"ack","seq":1.5}')
    invalid_case("an ack beyond the last event closes 4001 at the next poll", 28, '{"op":"ack","seq":2}')
    invalid_case("a binary message closes 4001", 29, None)

    def invalid_after_ack(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            g_text("g", HB),
            g_text("g", ack(1)),
            g_text("g", "not json"),
            g_text("g", HB),
            g_poll("g", [HB_ACK], close=INVALID),
            g_open(r, "g2", "b_tok"),
            g_poll("g2", [hello(r, "g2", "b", 2)]),
        ]
    gcase("frames before an invalid one are answered, later ones ignored, and an ack before it still counts", invalid_after_ack, 30)

    def coalesced(r):
        return base(r) + [user_send("u", "c", t, i) for i, t in ((1, "a"), (2, "b"))] + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u"),
                         created_ev(2, msg(1, "c", "private", "a", "u", False)), created_ev(3, msg(2, "c", "private", "b", "u", False))]),
        ] + [g_text("g", ack(s)) for s in (1, 3, 2, 1, 0)] + [
            g_poll("g"),
            g_drop("g"),
            g_open(r, "g2", "b_tok"),
            g_poll("g2", [hello(r, "g2", "b", 4)]),
        ]
    gcase("acks in one round are coalesced: the highest is written", coalesced, 31)

    def ack_ahead(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            user_send("u", "c", "x", 1),
            # Seq 2 is committed but not yet sent on this session: acking it is valid.
            g_text("g", ack(2)),
            g_poll("g", [created_ev(2, msg(1, "c", "private", "x", "u", False))]),
            g_drop("g"),
            g_open(r, "g2", "b_tok"),
            g_poll("g2", [hello(r, "g2", "b", 3)]),
        ]
    gcase("an ack of an event committed but not yet sent is accepted", ack_ahead, 32)

    def rotation(r):
        tok_err = err(401, "invalid_token", "invalid_token")
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            g_rotate(r, "b", "new_tok"),
            g_poll("g", close=AUTH_FAILED),
            g_poll("g"),
            g_open(r, "g2", "b_tok", status=401, body=tok_err),
            g_open(r, "g3", "new_tok"),
            g_poll("g3", [hello(r, "g3", "b", 1), started_ev(1, "c", "u")]),
            user_send("u", "c", "after", 1),
            g_poll("g3", [created_ev(2, msg(1, "c", "private", "after", "u", False))]),
        ]
    gcase("rotateBotToken closes open connections 4004 at their next poll; the old token is refused 401, the new one opens",
          rotation, 40)

    def suspension(r):
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200, ok(ident_of("b", status="suspended"))),
            g_poll("g", close=AUTH_FAILED),
            g_open(r, "g2", "b_tok", status=403, body=err(403, "bot_suspended", "bot_suspended")),
            admin("updateBot", {"bot_id": "{{b}}", "status": "active"}, 200, ok(ident_of("b"))),
            g_open(r, "g3", "b_tok"),
            g_poll("g3", [hello(r, "g3", "b", 1), started_ev(1, "c", "u")]),
        ]
    gcase("suspension closes open connections 4004; a suspended bot's open is 403 bot_suspended", suspension, 41)

    def bad_token(r):
        return [g_bot(r, "b"),
                {"gateway": "open", "conn": "g", "token": "bot_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                 "expect": {"status": 401, "body": err(401, "invalid_token", "invalid_token")}},
                g_open(r, "g", "b_tok"),
                g_poll("g", [hello(r, "g", "b", 1)])]
    gcase("an unknown token is 401 invalid_token and draws no session id", bad_token, 42)

    def limit(r):
        lim = lambda n, m: err(429, "connection_limit", f"this bot already has {n} of {m} gateway connections open",
                               {"retry_after": 1, "retry_after_ms": 1000})
        ra = {"Retry-After": "1"}
        return [g_bot(r, "f"), g_bot(r, "s", "standard", limit=2),
                g_open(r, "f1", "f_tok"),
                g_open(r, "f2", "f_tok", status=429, body=lim(1, 1), headers=ra),
                g_poll("f1", [hello(r, "f1", "f", 1)]),
                g_drop("f1"),
                g_open(r, "f2", "f_tok"),
                g_poll("f2", [hello(r, "f2", "f", 1)]),
                g_open(r, "s1", "s_tok"),
                g_open(r, "s2", "s_tok"),
                g_open(r, "s3", "s_tok", status=429, body=lim(2, 2), headers=ra),
                g_poll("s1", [hello(r, "s1", "s", 1)]),
                g_poll("s2", [hello(r, "s2", "s", 1)])]
    gcase("the connection limit refuses one more with 429 connection_limit; dropping one frees its slot", limit, 43)

    def fan_out(r):
        m = msg(1, "c", "private", "both", "u", False)
        return base(r) + [
            g_open(r, "g1", "b_tok"),
            g_open(r, "g2", "b_tok"),
            g_poll("g1", [hello(r, "g1", "b", 1), started_ev(1, "c", "u")]),
            g_poll("g2", [hello(r, "g2", "b", 1), started_ev(1, "c", "u")]),
            user_send("u", "c", "both", 1),
            g_poll("g1", [created_ev(2, m)]),
            g_poll("g2", [created_ev(2, m)]),
        ]
    gcase("every open connection of a bot receives every event", fan_out, 44)

    def private_events(r):
        by = lambda s, kind: ev(s, kind, {"chat": chat_ref("c"), "by": "user"})
        return base(r) + [
            g_open(r, "g", "b_tok"),
            g_poll("g", [hello(r, "g", "b", 1), started_ev(1, "c", "u")]),
            admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": True}, 200, ok(True)),
            admin("setBlocked", {"chat_id": "{{c}}", "by": "user", "blocked": False}, 200, ok(True)),
            g_poll("g", [by(2, "blocked"), by(3, "unblocked")]),
            admin("startBot", {"user_id": "{{u}}", "bot_id": "{{b}}"}, 200, ok(private_json("c", "u", "b"))),
            g_poll("g", [started_ev(4, "c", "u")]),
        ]
    gcase("blocked, unblocked and a second bot_started reach the bot of the private chat", private_events, 45)

    def group_events(r):
        g = "group"
        gm = lambda mid, text, sender, is_bot, edit=None: msg(mid, "g", g, text, sender, is_bot, edit=edit)
        gref = chat_ref("g", g)
        return [g_user(r, "u"), g_user(r, "v"), g_bot(r, "a", "standard"), g_bot(r, "b", "standard"),
                g_group(r, "g", ["u"]),
                admin("addMember", {"chat_id": "{{g}}", "member_id": "{{a}}"}, 200, ok(True)),
                admin("addMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                g_open(r, "ga", "a_tok"),
                g_open(r, "gb", "b_tok"),
                g_poll("ga", [hello(r, "ga", "a", 1), member_ev(1, "member_added", "g", "a", True),
                              member_ev(2, "member_added", "g", "b", True)]),
                g_poll("gb", [hello(r, "gb", "b", 1), member_ev(1, "member_added", "g", "b", True)]),
                # A bot's own message reaches the other bot only.
                send("a", "g", "from a", 1, ctype=g),
                g_poll("ga"),
                g_poll("gb", [created_ev(2, gm(1, "from a", "a", True))]),
                user_send("u", "g", "from u", 2, ctype=g),
                g_poll("ga", [created_ev(3, gm(2, "from u", "u", False))]),
                g_poll("gb", [created_ev(3, gm(2, "from u", "u", False))]),
                bot_call("a", "editMessageText", {"chat_id": "{{g}}", "message_id": "1", "text": "edited"}, 200,
                         ok(gm(1, "edited", "a", True, edit=T0))),
                g_poll("ga"),
                g_poll("gb", [ev(4, "message_edited", {"message": gm(1, "edited", "a", True, edit=T0)})]),
                bot_call("a", "deleteMessage", {"chat_id": "{{g}}", "message_id": "1"}, 200, ok(True)),
                g_poll("ga"),
                g_poll("gb", [ev(5, "message_deleted", {"chat": gref, "message_id": "1"})]),
                admin("deleteUserMessage", {"chat_id": "{{g}}", "message_id": "2"}, 200, ok(True)),
                g_poll("ga", [ev(4, "message_deleted", {"chat": gref, "message_id": "2"})]),
                g_poll("gb", [ev(6, "message_deleted", {"chat": gref, "message_id": "2"})]),
                admin("addMember", {"chat_id": "{{g}}", "member_id": "{{v}}"}, 200, ok(True)),
                g_poll("ga", [member_ev(5, "member_added", "g", "v", False)]),
                g_poll("gb", [member_ev(7, "member_added", "g", "v", False)]),
                # The removed bot still hears of its removal, then nothing more.
                admin("removeMember", {"chat_id": "{{g}}", "member_id": "{{b}}"}, 200, ok(True)),
                g_poll("ga", [member_ev(6, "member_removed", "g", "b", True)]),
                g_poll("gb", [member_ev(8, "member_removed", "g", "b", True)]),
                user_send("v", "g", "b is gone", 3, ctype=g),
                admin("setGroupPermissions", {"chat_id": "{{g}}", "bots_can_send": False}, 200, ok(True)),
                admin("dissolveGroup", {"chat_id": "{{g}}"}, 200, ok(True)),
                g_poll("ga", [created_ev(7, gm(3, "b is gone", "v", False)),
                              ev(8, "chat_permissions_changed", {"chat": gref, "bots_can_send": False}),
                              ev(9, "chat_dissolved", {"chat": gref})]),
                g_poll("gb")]
    gcase("group events as each bot sees them: messages, edits, deletes and member changes, never its own", group_events, 46)

    def group_created(r):
        return [g_user(r, "u"), g_bot(r, "a", "standard"), g_bot(r, "b", "standard"),
                g_group(r, "g", ["u", "a", "b"]),
                g_open(r, "ga", "a_tok"),
                g_open(r, "gb", "b_tok"),
                g_poll("ga", [hello(r, "ga", "a", 1), member_ev(1, "member_added", "g", "a", True),
                              member_ev(2, "member_added", "g", "b", True)]),
                g_poll("gb", [hello(r, "gb", "b", 1), member_ev(1, "member_added", "g", "b", True)])]
    gcase("createGroup adds members in the order given: each bot hears of itself and of bots added after it", group_created, 47)

    return cs


# ---------------------------------------------------------------- updates.json

def upd(e):
    """An update of getUpdates: the gateway's event frame, keyed by update_id."""
    return {"update_id": e["seq"], "type": e["type"], "data": e["data"]}


def updates(b, body, expected):
    return bot_call(b, "getUpdates", body, 200, ok(expected))


def dropped(n):
    return {"update_id": n, "type": "events_dropped", "data": {"dropped_through": n}}


def updates_cases():
    cs = []
    m1 = msg(1, "c", "private", "hi", "u", False)
    m3 = msg(2, "c", "private", "again", "u", False)
    e1, e2, e4 = upd(started_ev(1, "c", "u")), upd(created_ev(2, m1)), upd(created_ev(3, m3))
    base = setup_private() + [user_send("u", "c", "hi", 1)]
    cs.append(case("getUpdates of a bot without events returns []",
                   [mk_bot("b"), updates("b", None, []), updates("b", {}, [])]))
    cs.append(case("getUpdates returns the bot's events in seq order, as the gateway frames them; its own messages give none",
                   base + [send("b", "c", "hello", 2), updates("b", {}, [e1, e2]), updates("b", {}, [e1, e2])]))
    cs.append(case("offset acknowledges every event below it: later calls return only the events after it",
                   base + [updates("b", {"offset": 2}, [e2]), updates("b", {}, [e2]),
                           user_send("u", "c", "again", 2), updates("b", {"offset": 3}, [e4]),
                           updates("b", {"offset": 1}, [e4]), updates("b", {"offset": 4}, []), updates("b", {}, []),
                           updates("b", {"offset": 99}, [])]))
    cs.append(case("limit bounds the result; offset then pages through the log",
                   base + [updates("b", {"limit": 1}, [e1]), updates("b", {"limit": 1, "offset": 2}, [e2]),
                           updates("b", {"limit": 100, "offset": 3}, [])]))
    cs.append(case("allowed_updates filters this call's result only; an empty list allows every type",
                   base + [updates("b", {"allowed_updates": ["message_created"]}, [e2]),
                           updates("b", {"allowed_updates": ["blocked", "unblocked"]}, []),
                           updates("b", {"allowed_updates": ["bot_started"], "limit": 1}, [e1]),
                           updates("b", {"allowed_updates": []}, [e1, e2]),
                           updates("b", {"allowed_updates": None}, [e1, e2])]))
    cs.append(case("getUpdates with a timeout through the bytes entry point answers at once, as with timeout 0",
                   base + [updates("b", {"offset": 3, "timeout": 50}, [])]))
    bad = [
        ({"offset": -1}, "offset", "must be an integer, 0 or more"),
        ({"offset": "1"}, "offset", "must be an integer, 0 or more"),
        ({"limit": 0}, "limit", "must be an integer from 1 to 100"),
        ({"limit": 101}, "limit", "must be an integer from 1 to 100"),
        ({"timeout": 51}, "timeout", "must be an integer from 0 to 50"),
        ({"timeout": 1.5}, "timeout", "must be an integer from 0 to 50"),
        ({"allowed_updates": "message_created"}, "allowed_updates", 'must be an array of event types, such as "message_created"'),
        ({"allowed_updates": ["message_created", "chat_action"]}, "allowed_updates", 'must be an array of event types, such as "message_created"'),
        ({"allowed_updates": ["events_dropped"]}, "allowed_updates", 'must be an array of event types, such as "message_created"'),
        ({"offset": -1, "limit": 0}, "offset", "must be an integer, 0 or more"),
    ]
    cs.append(case("getUpdates with a bad field is 400 invalid_field naming it, and acknowledges nothing",
                   base + [bot_call("b", "getUpdates", dict(body, offset=body.get("offset", 3)) if f != "offset" else body, 400,
                                    invalid(f, why)) for body, f, why in bad] + [updates("b", {}, [e1, e2])]))
    cs.append(case("getUpdates checks authentication, then the bot's status, then the body",
                   base + [step(request("/bot/getUpdates", {}), 401, err(401, "missing_authorization", "missing_authorization_bot")),
                           bot_call("b", "getUpdates", raw="[]", status=400, expect=err(400, "invalid_request", "not_object")),
                           admin("updateBot", {"bot_id": ph("b"), "status": "suspended"}, 200, ok(ident_of("b", status="suspended"))),
                           bot_call("b", "getUpdates", {"limit": 0}, 403, err(403, "bot_suspended", "bot_suspended"))]))
    gap = setup_private() + [user_send("u", "c", "a", 1), user_send("u", "c", "b", 2), advance(61),
                             user_send("u", "c", "again", 3, date=T0 + 61)]
    e4late = upd(created_ev(4, msg(3, "c", "private", "again", "u", False, date=T0 + 61)))
    cs.append(case("dropped events show first as events_dropped until an offset above the last dropped seq acknowledges it",
                   gap + [updates("b", {}, [dropped(3), e4late]), updates("b", {"limit": 1}, [dropped(3)]),
                          updates("b", {"offset": 3}, [dropped(3), e4late]),
                          updates("b", {"offset": 4, "allowed_updates": ["blocked"]}, []),
                          updates("b", {}, [e4late])],
                   {"max_unacked_events": 1}))
    return cs


# ------------------------------------------------------------- webhooks.json

def webhook_cases():
    cs = []
    base = setup_private()
    url = "https://example.com/hook"

    def info(url="", pending=1, max_connections=None, allowed=None):
        return ok({"url": url, "pending_update_count": pending, "max_connections": max_connections,
                   "allowed_updates": allowed, "last_error_date": None, "last_error_message": None,
                   "next_attempt_date": None})

    cs.append(case("getWebhookInfo with no webhook set: url is empty, the pending count is the unacknowledged events",
                   base + [bot_call("b", "getWebhookInfo", {}, 200, info())]))
    cs.append(case("setWebhook returns its URL and a new whsec_ secret; getWebhookInfo shows it with the defaults",
                   base + [bot_call("b", "setWebhook", {"url": url}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "getWebhookInfo", {}, 200, info(url, 1, 40))]))
    cs.append(case("setWebhook again keeps the secret (no secret in the answer) and stores max_connections and allowed_updates, deduplicated",
                   base + [bot_call("b", "setWebhook", {"url": url}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "setWebhook", {"url": url + "2", "max_connections": 5,
                                                        "allowed_updates": ["message_created", "blocked", "message_created"]},
                                    200, ok({"url": url + "2"})),
                           bot_call("b", "getWebhookInfo", {}, 200, info(url + "2", 1, 5, ["message_created", "blocked"])),
                           bot_call("b", "setWebhook", {"url": url, "rotate_secret": True}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "setWebhook", {"url": url, "allowed_updates": []}, 200, ok({"url": url})),
                           bot_call("b", "getWebhookInfo", {}, 200, info(url, 1, 40))]))
    cs.append(case("setWebhook with drop_pending_updates acknowledges every event so far",
                   base + [user_send("u", "c", "hi", 1),
                           bot_call("b", "getWebhookInfo", {}, 200, info("", 2)),
                           bot_call("b", "setWebhook", {"url": url, "drop_pending_updates": True}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "getWebhookInfo", {}, 200, info(url, 0, 40))]))
    cs.append(case("deleteWebhook forgets the webhook and is true with none set; drop_pending_updates acknowledges",
                   base + [bot_call("b", "setWebhook", {"url": url}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "deleteWebhook", {}, 200, ok(True)),
                           bot_call("b", "getWebhookInfo", {}, 200, info("", 1)),
                           bot_call("b", "deleteWebhook", {"drop_pending_updates": True}, 200, ok(True)),
                           bot_call("b", "getWebhookInfo", {}, 200, info("", 0)),
                           bot_call("b", "setWebhook", {"url": url}, 200, ok({"url": url, "secret": ANY}))]))

    def bad_url(why):
        return err(400, "invalid_webhook_url", f"the webhook URL {why}", {"field": "url"})

    def forbidden(what):
        return err(400, "webhook_address_forbidden",
                   f"the webhook URL points at {what}, which this server does not deliver to (a server started with --webhook-allow-private-addresses, or webhook_allow_private_addresses in its Config, delivers there)", {"field": "url"})

    refused = [
        ({}, missing("url")),
        ({"url": 5}, invalid("url", "must_be_string")),
        ({"url": "http://example.com/hook"}, bad_url("must use https (a server started with --webhook-allow-http, or webhook_allow_http in its Config, also takes http)")),
        ({"url": "hooks.example.com"}, bad_url("is not an absolute URL")),
        ({"url": "https://bot:pw@example.com/"}, bad_url("must not carry a user or password")),
        ({"url": "https://example.com/#frag"}, bad_url("must not carry a fragment")),
        ({"url": "https://example.com:0/"}, bad_url("has an invalid port")),
        ({"url": "https://0x7f000001/"}, bad_url("has no valid host")),
        ({"url": "https://example.com/" + "a" * 2029}, bad_url("is longer than 2048 characters")),
        ({"url": "https://127.0.0.1/hook"}, forbidden("a loopback address")),
        ({"url": "https://[::1]:8443/hook"}, forbidden("a loopback address")),
        ({"url": "https://10.0.0.7/hook"}, forbidden("a private address")),
        ({"url": "https://169.254.169.254/latest/meta-data/"}, forbidden("a link-local address")),
        ({"url": url, "max_connections": 0}, invalid("max_connections", "must be an integer from 1 to 100")),
        ({"url": url, "max_connections": 101}, invalid("max_connections", "must be an integer from 1 to 100")),
        ({"url": url, "allowed_updates": "message_created"}, invalid("allowed_updates", "must be an array of event types")),
        ({"url": url, "allowed_updates": ["typing"]}, invalid("allowed_updates", "must list only event types bots receive")),
        ({"url": url, "allowed_updates": ["chat_action"]}, invalid("allowed_updates", "must list only event types bots receive")),
        ({"url": url, "drop_pending_updates": "yes"}, invalid("drop_pending_updates", "must be a boolean")),
        ({"url": url, "rotate_secret": 1}, invalid("rotate_secret", "must be a boolean")),
    ]
    cs.append(case("setWebhook refuses a missing, malformed or forbidden URL and bad fields with a named error, and sets nothing",
                   base + [bot_call("b", "setWebhook", body, 400, e) for body, e in refused]
                   + [bot_call("b", "getWebhookInfo", {}, 200, info())]))
    cs.append(case("with webhook_allow_http and webhook_allow_private_addresses, http and loopback URLs are taken",
                   base + [bot_call("b", "setWebhook", {"url": "http://127.0.0.1:9/hook"}, 200,
                                    ok({"url": "http://127.0.0.1:9/hook", "secret": ANY})),
                           bot_call("b", "getWebhookInfo", {}, 200, info("http://127.0.0.1:9/hook", 1, 40))],
                   config={"webhook_allow_http": True, "webhook_allow_private_addresses": True}))
    cs.append(case("the host API reads and clears a bot's webhook by bot_id; an unknown bot is 404",
                   base + [bot_call("b", "setWebhook", {"url": url, "max_connections": 3}, 200, ok({"url": url, "secret": ANY})),
                           admin("getWebhookInfo", {"bot_id": "{{b}}"}, 200, info(url, 1, 3)),
                           admin("deleteWebhook", {"bot_id": "{{b}}", "drop_pending_updates": True}, 200, ok(True)),
                           bot_call("b", "getWebhookInfo", {}, 200, info("", 0)),
                           admin("getWebhookInfo", {"bot_id": "bot_nope"}, 404, err(404, "bot_not_found", "no bot with this id")),
                           admin("deleteWebhook", {}, 400, missing("bot_id"))]))
    cs.append(case("getUpdates while a webhook is set is 409 webhook_active (after its fields are checked); after deleteWebhook it reads the log",
                   base + [bot_call("b", "setWebhook", {"url": url}, 200, ok({"url": url, "secret": ANY})),
                           bot_call("b", "getUpdates", {"limit": 0}, 400, invalid("limit", "must be an integer from 1 to 100")),
                           bot_call("b", "getUpdates", {}, 409, err(409, "webhook_active",
                                    "a webhook is set for this bot: its events are delivered there; call deleteWebhook to use getUpdates")),
                           bot_call("b", "deleteWebhook", {}, 200, ok(True)),
                           updates("b", {"limit": 1}, [upd(started_ev(1, "c", "u"))])]))
    cs.append(case("a suspended bot cannot set a webhook",
                   base + [admin("updateBot", {"bot_id": "{{b}}", "status": "suspended"}, 200),
                           bot_call("b", "setWebhook", {"url": url}, 403, err(403, "bot_suspended", "bot_suspended"))]))
    return cs


# ------------------------------------------------------------- buttons.json

def cmds(*names):
    return [{"command": n, "description": f"{n} it"} for n in names]


def kb(*rows):
    """A keyboard of callback buttons: each row a list of callback_data, the text its upper case."""
    return {"inline_keyboard": [[{"text": d.upper(), "callback_data": d} for d in row] for row in rows]}


def chat_scope(c):
    return {"type": "chat", "chat_id": ph(c)}


def press(u, c, mid, data, status=200, expect=_NO, save=None, headers=None):
    body = {"user_id": ph(u), "chat_id": ph(c), "message_id": str(mid), "callback_data": data}
    if status == 200 and expect is _NO:
        expect = ok({"callback_query_id": ANY})
    return step(request("/admin/pressButton", body, auth=ADMIN, headers=headers), status, expect, None, save)


def answer(b, q, status=200, expect=_NO, **kw):
    body = dict({"callback_query_id": ph(q)}, **kw)
    return bot_call(b, "answerCallbackQuery", body, status, ok(True) if status == 200 and expect is _NO else expect)


def query_ev(q, u, c, mid, data, ctype="private"):
    return {"id": ph(q) if q else ANY, "from": {"id": ph(u), "is_bot": False, "display_name": u.capitalize(), "handle": None},
            "message": {"message_id": str(mid), "chat": {"id": ph(c), "type": ctype}}, "data": data}


def host_upd(n, kind, data):
    return {"update_id": n, "type": kind, "data": data}


def outcome(q, u, c, mid, text=None, show_alert=False):
    d = {"callback_query_id": ph(q), "user_id": ph(u), "chat_id": ph(c), "message_id": str(mid)}
    if text is not None:
        d["text"] = text
        d["show_alert"] = show_alert
    return d


def buttons_cases():
    cs = []
    std = setup_private(tier="standard")
    # --- commands
    cs.append(case("setMyCommands replaces the list of a scope; getMyCommands returns exactly that scope's list",
                   std + [bot_call("b", "getMyCommands", {}, 200, ok([])),
                          bot_call("b", "setMyCommands", {"commands": cmds("start", "help")}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {}, 200, ok(cmds("start", "help"))),
                          bot_call("b", "getMyCommands", {"scope": {"type": "default"}}, 200, ok(cmds("start", "help"))),
                          bot_call("b", "getMyCommands", {"scope": {"type": "all_private_chats"}}, 200, ok([])),
                          bot_call("b", "setMyCommands", {"commands": cmds("menu"), "scope": chat_scope("c")}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {"scope": chat_scope("c")}, 200, ok(cmds("menu"))),
                          bot_call("b", "setMyCommands", {"commands": cmds("help")}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {}, 200, ok(cmds("help"))),
                          bot_call("b", "deleteMyCommands", {}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {}, 200, ok([])),
                          bot_call("b", "deleteMyCommands", {}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {"scope": chat_scope("c")}, 200, ok(cmds("menu"))),
                          bot_call("b", "setMyCommands", {"commands": [], "scope": chat_scope("c")}, 200, ok(True)),
                          bot_call("b", "getMyCommands", {"scope": chat_scope("c")}, 200, ok([]))]))
    hundred = [{"command": f"c{i}", "description": "d"} for i in range(100)]
    bad = [
        ({"commands": hundred + [{"command": "c100", "description": "d"}]}, invalid("commands", 'must be an array of at most 100 {"command", "description"} objects')),
        ({}, missing("commands")),
        ({"commands": "start"}, invalid("commands", 'must be an array of at most 100 {"command", "description"} objects')),
        ({"commands": [{"command": "Start", "description": "d"}]}, invalid("commands.0.command", "must be 1 to 32 characters of a-z, 0-9 and _")),
        ({"commands": [{"command": "a" * 33, "description": "d"}]}, invalid("commands.0.command", "must be 1 to 32 characters of a-z, 0-9 and _")),
        ({"commands": [{"command": "", "description": "d"}]}, invalid("commands.0.command", "must be 1 to 32 characters of a-z, 0-9 and _")),
        ({"commands": [{"command": "go", "description": ""}]}, invalid("commands.0.description", "must be a string of 1 to 256 characters")),
        ({"commands": [{"command": "go", "description": "é" * 257}]}, invalid("commands.0.description", "must be a string of 1 to 256 characters")),
        ({"commands": [{"command": "go"}]}, missing("commands.0.description")),
        ({"commands": [{"command": "go", "description": "a"}, {"command": "go", "description": "b"}]}, invalid("commands.1.command", "names a command already in the list")),
        ({"commands": cmds("go"), "scope": {"type": "everyone"}}, invalid("scope", 'must be {"type": "default" | "all_private_chats" | "all_group_chats"} or {"type": "chat", "chat_id": "spc_..."}')),
        ({"commands": cmds("go"), "scope": {"type": "chat"}}, missing("scope.chat_id")),
    ]
    cs.append(case("setMyCommands refuses each bad list with a named error and writes nothing; 100 commands and the longest name and description pass",
                   std + [bot_call("b", "setMyCommands", {"commands": cmds("keep")}, 200, ok(True))]
                   + [bot_call("b", "setMyCommands", body, 400, e) for body, e in bad]
                   + [bot_call("b", "setMyCommands", {"commands": cmds("go"), "scope": {"type": "chat", "chat_id": "spc_nope"}}, 404, err(404, "chat_not_found", "chat_not_found")),
                      bot_call("b", "getMyCommands", {"scope": {"type": "chat", "chat_id": "spc_nope"}}, 404, err(404, "chat_not_found", "chat_not_found")),
                      bot_call("b", "getMyCommands", {}, 200, ok(cmds("keep"))),
                      bot_call("b", "setMyCommands", {"commands": [{"command": "a" * 32, "description": "é" * 256}]}, 200, ok(True)),
                      bot_call("b", "getMyCommands", {}, 200, ok([{"command": "a" * 32, "description": "é" * 256}])),
                      bot_call("b", "setMyCommands", {"commands": hundred, "scope": {"type": "all_group_chats"}}, 200, ok(True)),
                      bot_call("b", "getMyCommands", {"scope": {"type": "all_group_chats"}}, 200, ok(hundred))]))
    grp = [mk_user("u"), mk_bot("b"), mk_bot("b2"), start("c", "u", "b"), mk_group("g", ["u", "b", "b2"]),
           bot_call("b", "setMyCommands", {"commands": cmds("start")}, 200, ok(True)),
           bot_call("b", "setMyCommands", {"commands": cmds("menu"), "scope": {"type": "all_private_chats"}}, 200, ok(True)),
           bot_call("b2", "setMyCommands", {"commands": cmds("poll"), "scope": {"type": "all_group_chats"}}, 200, ok(True))]
    entry_b = lambda l: {"bot_id": ph("b"), "handle": "b_bot", "commands": l}
    entry_b2 = lambda l: {"bot_id": ph("b2"), "handle": "b2_bot", "commands": l}
    cs.append(case("getChatCommands gives each bot that could send there the list of the narrowest scope that has one",
                   grp + [admin("getChatCommands", {"chat_id": ph("c")}, 200, ok([entry_b(cmds("menu"))])),
                          admin("getChatCommands", {"chat_id": ph("g")}, 200, ok([entry_b2(cmds("poll")), entry_b(cmds("start"))])),
                          bot_call("b2", "setMyCommands", {"commands": cmds("vote"), "scope": chat_scope("g")}, 200, ok(True)),
                          admin("getChatCommands", {"chat_id": ph("g")}, 200, ok([entry_b2(cmds("vote")), entry_b(cmds("start"))])),
                          bot_call("b2", "deleteMyCommands", {"scope": chat_scope("g")}, 200, ok(True)),
                          admin("getChatCommands", {"chat_id": ph("g")}, 200, ok([entry_b2(cmds("poll")), entry_b(cmds("start"))])),
                          admin("setGroupPermissions", {"chat_id": ph("g"), "bots_can_send": False}, 200, ok(True)),
                          admin("getChatCommands", {"chat_id": ph("g")}, 200, ok([])),
                          admin("getChatCommands", {"chat_id": "spc_nope"}, 404, err(404, "chat_not_found", "chat_not_found")),
                          admin("getChatCommands", {}, 400, missing("chat_id"))]))
    cs.append(case("getBotCommands lists every list a bot set with its scope: the default, private chats, groups, then each chat",
                   grp + [admin("getBotCommands", {"bot_id": ph("b")}, 200, ok([{"scope": {"type": "default"}, "commands": cmds("start")},
                                                                                  {"scope": {"type": "all_private_chats"}, "commands": cmds("menu")}])),
                          bot_call("b", "setMyCommands", {"commands": cmds("vote"), "scope": chat_scope("g")}, 200, ok(True)),
                          bot_call("b", "setMyCommands", {"commands": cmds("group"), "scope": {"type": "all_group_chats"}}, 200, ok(True)),
                          admin("getBotCommands", {"bot_id": ph("b")}, 200, ok([{"scope": {"type": "default"}, "commands": cmds("start")},
                                                                                  {"scope": {"type": "all_private_chats"}, "commands": cmds("menu")},
                                                                                  {"scope": {"type": "all_group_chats"}, "commands": cmds("group")},
                                                                                  {"scope": chat_scope("g"), "commands": cmds("vote")}])),
                          admin("getBotCommands", {"bot_id": ph("b2")}, 200, ok([{"scope": {"type": "all_group_chats"}, "commands": cmds("poll")}])),
                          admin("getBotCommands", {"bot_id": "bot_nope"}, 404, err(404, "bot_not_found", "no bot with this id"))]))
    m1 = msg(1, "c", "private", "/start@B_BOT hello world", "u", False)
    cs.append(case("a message starting with /name or /name@handle carries its command in the record and its events",
                   std + [user_send("u", "c", "/start@B_BOT hello world", 1),
                          updates("b", {"offset": 2}, [upd(created_ev(2, m1))]),
                          send("b", "c", "/help", 2), send("b", "c", "/Help me", 3), send("b", "c", "/go  two spaces", 4),
                          history("c", [m1, msg(2, "c", "private", "/help", "b"), msg(3, "c", "private", "/Help me", "b"),
                                        msg(4, "c", "private", "/go  two spaces", "b")])]))
    # --- keyboards
    k1 = kb(["yes", "no"], ["later"])
    url_kb = {"inline_keyboard": [[{"text": "Docs", "url": "https://example.org/docs"}]]}
    sent = msg(1, "c", "private", "Choose", "b", markup=k1)
    cs.append(case("sendMessage with reply_markup: the keyboard is part of the message in its result, history and the host's stream",
                   std + [bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "Choose", "reply_markup": k1}, 200, ok(sent)),
                          history("c", [sent]),
                          admin("getUpdates", {"offset": 2}, 200, ok([host_upd(2, "message_created", {"message": sent})])),
                          bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "Read", "reply_markup": url_kb}, 200,
                                   ok(msg(2, "c", "private", "Read", "b", markup=url_kb))),
                          bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "None", "reply_markup": None}, 200,
                                   ok(msg(3, "c", "private", "None", "b")))]))
    k2 = kb(["ok"])
    cs.append(case("editMessageText keeps the keyboard without reply_markup and replaces it with one; editMessageReplyMarkup changes only the keyboard",
                   std + [bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "v1", "reply_markup": k1}, 200, ok(msg(1, "c", "private", "v1", "b", markup=k1))),
                          advance(5),
                          bot_call("b", "editMessageText", {"chat_id": ph("c"), "message_id": "1", "text": "v2"}, 200,
                                   ok(msg(1, "c", "private", "v2", "b", edit=T0 + 5, markup=k1))),
                          bot_call("b", "editMessageText", {"chat_id": ph("c"), "message_id": "1", "text": "v2", "reply_markup": k2}, 200,
                                   ok(msg(1, "c", "private", "v2", "b", edit=T0 + 5, markup=k2))),
                          advance(5),
                          bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "1", "reply_markup": k1}, 200,
                                   ok(msg(1, "c", "private", "v2", "b", edit=T0 + 10, markup=k1))),
                          bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "1"}, 200,
                                   ok(msg(1, "c", "private", "v2", "b", edit=T0 + 10))),
                          history("c", [msg(1, "c", "private", "v2", "b", edit=T0 + 10)]),
                          bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "2"}, 404, err(404, "message_not_found", "message_not_found")),
                          user_send("u", "c", "mine", 2, date=T0 + 10),
                          bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "2", "reply_markup": k1}, 403, err(403, "not_message_owner", "not_message_owner"))]))
    cs.append(case("editMessageReplyMarkup is refused to free-tier bots before the body is read",
                   setup_private() + [bot_call("b", "editMessageReplyMarkup", {}, 403, err(403, "tier_forbidden", tier_forbidden_desc("editMessageReplyMarkup")))]))
    row8 = ["d%d" % i for i in range(8)]
    at = "reply_markup.inline_keyboard"
    bad_kb = [
        ({"inline_keyboard": [row8] * 12 + [row8[:5]]}, at, "must hold at most 100 buttons in all", True),
        ({"inline_keyboard": [["a"]] * 11}, at, "must be an array of at most 10 rows", True),
        ({"inline_keyboard": [row8 + ["d8"]]}, at + ".0", "must be an array of 1 to 8 buttons", True),
        ({"inline_keyboard": [[]]}, at + ".0", "must be an array of 1 to 8 buttons", True),
        ({"inline_keyboard": [[{"text": "a", "callback_data": "x", "url": "https://example.org"}]]}, at + ".0.0", "must have exactly one of callback_data and url", False),
        ({"inline_keyboard": [[{"text": "a"}]]}, at + ".0.0", "must have exactly one of callback_data and url", False),
        ({"inline_keyboard": [[{"text": "a", "callback_data": "x" * 65}]]}, at + ".0.0.callback_data", "must be a string of 1 to 64 bytes", False),
        ({"inline_keyboard": [[{"text": "a", "callback_data": "é" * 33}]]}, at + ".0.0.callback_data", "must be a string of 1 to 64 bytes", False),
        ({"inline_keyboard": [[{"text": "a", "url": "javascript:alert(1)"}]]}, at + ".0.0.url", "must be an http or https URL of at most 2048 characters", False),
        ({"inline_keyboard": [[{"text": "a", "url": "data:text/html,<b>x</b>"}]]}, at + ".0.0.url", "must be an http or https URL of at most 2048 characters", False),
        ({"inline_keyboard": [[{"text": "a", "url": "https://e.org/" + "a" * 2035}]]}, at + ".0.0.url", "must be an http or https URL of at most 2048 characters", False),
        ({"inline_keyboard": [[{"text": "", "callback_data": "x"}]]}, at + ".0.0.text", "must be a string of 1 to 64 characters", False),
        ({"inline_keyboard": [[{"text": "é" * 65, "callback_data": "x"}]]}, at + ".0.0.text", "must be a string of 1 to 64 characters", False),
        ({"keyboard": []}, at, None, False),
        ([], "reply_markup", 'must be {"inline_keyboard": [[button, ...], ...]}', False),
    ]

    def kb_of(k, rows_of_data):
        return {"inline_keyboard": [[{"text": d.upper(), "callback_data": d} for d in r] for r in k["inline_keyboard"]]} if rows_of_data else k

    steps = []
    for k, field, why, rows_of_data in bad_kb:
        k = kb_of(k, rows_of_data)
        e = missing(field) if why is None else invalid(field, why)
        steps.append(bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "x", "reply_markup": k}, 400, e))
        steps.append(bot_call("b", "editMessageText", {"chat_id": ph("c"), "message_id": "1", "text": "changed", "reply_markup": k}, 400, e))
        steps.append(bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "1", "reply_markup": k}, 400, e))
    full = kb(*[row8] * 10)
    edge = {"inline_keyboard": [[{"text": "é" * 64, "callback_data": "é" * 32}, {"text": "u", "url": "https://e.org/" + "a" * 2034}]]}
    cs.append(case("a keyboard past any limit is refused with a named error on every method and writes nothing; each limit itself passes",
                   std + [send("b", "c", "first", 1)] + steps
                   + [history("c", [msg(1, "c", "private", "first", "b")]),
                      bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "full", "reply_markup": full}, 200, ok(msg(2, "c", "private", "full", "b", markup=full))),
                      bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "edge", "reply_markup": edge}, 200, ok(msg(3, "c", "private", "edge", "b", markup=edge)))]))
    # --- presses and answers
    kstd = std + [bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "Choose", "reply_markup": k1}, 200, ok(sent))]
    cs.append(case("pressButton gives the bot a callback_query event; answerCallbackQuery puts callback_answered on the host's stream",
                   kstd + [press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}),
                           updates("b", {"offset": 2}, [{"update_id": 2, "type": "callback_query", "data": query_ev("q", "u", "c", 1, "yes")}]),
                           updates("b", {"offset": 2, "allowed_updates": ["callback_query"]}, [{"update_id": 2, "type": "callback_query", "data": query_ev("q", "u", "c", 1, "yes")}]),
                           updates("b", {"offset": 2, "allowed_updates": ["message_created"]}, []),
                           answer("b", "q", text="Saved", show_alert=True),
                           admin("getUpdates", {"offset": 3}, 200, ok([host_upd(3, "callback_query", query_ev("q", "u", "c", 1, "yes")),
                                                                       host_upd(4, "callback_answered", outcome("q", "u", "c", 1, "Saved", True))])),
                           answer("b", "q", 400, err(400, "callback_query_answered", "this callback query was answered already", {"field": "callback_query_id"})),
                           advance(60),
                           admin("getUpdates", {"offset": 5}, 200, ok([]))]))
    cs.append(case("an answer without text says text \"\" and show_alert false; the longest text passes, a longer one is refused",
                   kstd + [press("u", "c", 1, "no", save={"q": "result.callback_query_id"}),
                           answer("b", "q", 400, invalid("text", "must be a string of 0 to 200 characters"), text="é" * 201),
                           answer("b", "q"),
                           press("u", "c", 1, "no", save={"q2": "result.callback_query_id"}),
                           answer("b", "q2", text="é" * 200),
                           admin("getUpdates", {"offset": 4}, 200, ok([host_upd(4, "callback_answered", outcome("q", "u", "c", 1, "")),
                                                                       host_upd(5, "callback_query", query_ev("q2", "u", "c", 1, "no")),
                                                                       host_upd(6, "callback_answered", outcome("q2", "u", "c", 1, "é" * 200))]))]))
    cs.append(case("answerCallbackQuery by another bot or with an unknown id is 404 callback_query_not_found",
                   kstd + [mk_bot("o"), press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}),
                           answer("o", "q", 404, err(404, "callback_query_not_found", "no callback query with this id was sent to this bot", {"field": "callback_query_id"})),
                           bot_call("b", "answerCallbackQuery", {"callback_query_id": "cbq_nope"}, 404,
                                    err(404, "callback_query_not_found", "no callback query with this id was sent to this bot", {"field": "callback_query_id"})),
                           bot_call("b", "answerCallbackQuery", {}, 400, missing("callback_query_id")),
                           answer("b", "q")]))
    cs.append(case("an answer at the timeout is 400 callback_query_expired, and the host's stream has callback_expired once; one just before passes",
                   kstd + [press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}),
                           press("u", "c", 1, "no", save={"q2": "result.callback_query_id"}),
                           advance(14.999), answer("b", "q2"),
                           advance(0.001),
                           answer("b", "q", 400, err(400, "callback_query_expired", "this callback query expired before it was answered", {"field": "callback_query_id"})),
                           admin("getUpdates", {"offset": 3}, 200, ok([host_upd(3, "callback_query", query_ev("q", "u", "c", 1, "yes")),
                                                                       host_upd(4, "callback_query", query_ev("q2", "u", "c", 1, "no")),
                                                                       host_upd(5, "callback_answered", outcome("q2", "u", "c", 1, "")),
                                                                       host_upd(6, "callback_expired", outcome("q", "u", "c", 1))])),
                           answer("b", "q", 400, err(400, "callback_query_expired", "this callback query expired before it was answered", {"field": "callback_query_id"})),
                           advance(100),
                           admin("getUpdates", {"offset": 7}, 200, ok([])),
                           updates("b", {"offset": 2}, [{"update_id": 2, "type": "callback_query", "data": query_ev("q", "u", "c", 1, "yes")},
                                                        {"update_id": 3, "type": "callback_query", "data": query_ev("q2", "u", "c", 1, "no")}])]))
    cs.append(case("callback_answer_timeout_s sets the answer's deadline",
                   kstd + [press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}), advance(3),
                           answer("b", "q", 400, err(400, "callback_query_expired", "this callback query expired before it was answered", {"field": "callback_query_id"}))],
                   {"callback_answer_timeout_s": 3}))
    cs.append(case("a press with its outcome is forgotten with the event logs' retention: answering it then is callback_query_not_found",
                   kstd + [press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}), answer("b", "q"),
                           advance(59), user_send("u", "c", "tick", 2, date=T0 + 59),
                           answer("b", "q", 400, err(400, "callback_query_answered", "this callback query was answered already", {"field": "callback_query_id"})),
                           advance(62), user_send("u", "c", "tock", 3, date=T0 + 121),
                           answer("b", "q", 404, err(404, "callback_query_not_found", "no callback query with this id was sent to this bot", {"field": "callback_query_id"}))],
                   {"event_retention_s": 60}))
    bnf = err(404, "button_not_found", "the message's current keyboard has no button with this callback_data", {"field": "callback_data"})
    cs.append(case("a press must name a button on the message's current keyboard: else 404 button_not_found, and the bot hears nothing",
                   kstd + [press("u", "c", 1, "maybe", 404, bnf),
                           press("u", "c", 1, "YES", 404, bnf),
                           press("u", "c", 2, "yes", 404, bnf),
                           bot_call("b", "editMessageReplyMarkup", {"chat_id": ph("c"), "message_id": "1", "reply_markup": k2}, 200,
                                    ok(msg(1, "c", "private", "Choose", "b", edit=T0, markup=k2))),
                           press("u", "c", 1, "yes", 404, bnf),
                           press("u", "c", 1, "ok"),
                           bot_call("b", "sendMessage", {"chat_id": ph("c"), "text": "Read", "reply_markup": url_kb}, 200,
                                    ok(msg(2, "c", "private", "Read", "b", markup=url_kb))),
                           press("u", "c", 2, "https://example.org/docs", 404, bnf),
                           bot_call("b", "deleteMessage", {"chat_id": ph("c"), "message_id": "1"}, 200, ok(True)),
                           press("u", "c", 1, "ok", 404, bnf),
                           user_send("u", "c", "plain", 3),
                           press("u", "c", 3, "ok", 404, bnf),
                           updates("b", {"offset": 2, "allowed_updates": ["callback_query"]}, [{"update_id": 2, "type": "callback_query", "data": query_ev(None, "u", "c", 1, "ok")}])]))
    cs.append(case("a press follows sendUserMessage's rules: an unknown user, a non-member, a blocked chat, an unknown chat",
                   kstd + [mk_user("v"),
                           press("v", "c", 1, "yes", 403, err(403, "not_member", "user_not_member")),
                           admin("pressButton", {"user_id": "usr_nope", "chat_id": ph("c"), "message_id": "1", "callback_data": "yes"}, 404, err(404, "user_not_found", "no user with this id")),
                           admin("pressButton", {"user_id": ph("u"), "chat_id": "spc_nope", "message_id": "1", "callback_data": "yes"}, 404, err(404, "chat_not_found", "chat_not_found")),
                           admin("pressButton", {"user_id": ph("u"), "chat_id": ph("c"), "message_id": "1"}, 400, missing("callback_data")),
                           admin("setBlocked", {"chat_id": ph("c"), "by": "user", "blocked": True}, 200, ok(True)),
                           press("u", "c", 1, "yes", 403, err(403, "blocked_by_user", "blocked_by_user")),
                           admin("setBlocked", {"chat_id": ph("c"), "by": "user", "blocked": False}, 200, ok(True)),
                           admin("removeMember", {"chat_id": ph("c"), "member_id": ph("b")}, 200, ok(True)),
                           press("u", "c", 1, "yes", 404, bnf)]))
    cs.append(case("pressButton with an Idempotency-Key: a retry makes one query, not two; the same key with another body is 409",
                   kstd + [press("u", "c", 1, "yes", save={"q": "result.callback_query_id"}, headers={"Idempotency-Key": "press-1"}),
                           press("u", "c", 1, "yes", 200, ok({"callback_query_id": ph("q")}), headers={"Idempotency-Key": "press-1"}),
                           press("u", "c", 1, "no", 409, err(409, "idempotency_key_reused", "idempotency_key_reused"), headers={"Idempotency-Key": "press-1"}),
                           updates("b", {"offset": 2}, [{"update_id": 2, "type": "callback_query", "data": query_ev("q", "u", "c", 1, "yes")}])]))
    return cs


# ---------------------------------------------------------------- backup.json

IMAGE = "application/vnd.sqlite3"
WRONG_ADMIN = "Admin not-the-admin-secret-0001"
STORAGE_STATS = {"requests": ANY, "transactions": ANY, "durable_commits": ANY, "round_trips": ANY, "host": ANY}


def image_request(raw, auth=ADMIN, content_type=IMAGE, peer=None):
    r = request("/admin/importDatabase", auth=auth, raw=raw, headers={"Content-Type": content_type})
    if peer is not None:
        r["peer"] = peer
    return r


def backup_cases():
    cs = []
    unauthorized = err(401, "invalid_token", "invalid_token")
    cs.append(case("exportDatabase answers the whole database as application/vnd.sqlite3, not cached",
                   [mk_user("u", "Ann"),
                    step(request("/admin/exportDatabase", {}, auth=ADMIN), 200,
                         headers={"Content-Type": IMAGE, "Cache-Control": "no-store"}),
                    step(request("/admin/exportDatabase", auth=ADMIN), 200, headers={"Content-Type": IMAGE})], store="sqlite"))
    cs.append(case("exportDatabase, importDatabase and getStorageStats with a wrong admin secret are 401 invalid_token",
                   [step(request("/admin/exportDatabase", {}, auth=WRONG_ADMIN), 401, unauthorized),
                    step(image_request("not an image", auth=WRONG_ADMIN), 401, unauthorized),
                    step(request("/admin/getStorageStats", {}, auth=WRONG_ADMIN), 401, unauthorized),
                    step(request("/admin/exportDatabase", {}), 401,
                         err(401, "missing_authorization", "missing_authorization_admin"))]))
    cs.append(case("importDatabase of bytes that are no database image is 400 invalid_request and changes nothing",
                   [mk_user("u", "Ann"),
                    step(image_request("not an image"), 400,
                         err(400, "invalid_request", "database image refused: not a SQLite database")),
                    step(image_request("not an image", content_type="application/octet-stream"), 400,
                         err(400, "invalid_request", "database image refused: not a SQLite database")),
                    admin("getStats", {}, 200, ok({"users": 1, "bots": 0, "chats": 0, "messages": 0, "schema_version": ANY}))], store="sqlite"))
    cs.append(case("importDatabase takes an image only as application/vnd.sqlite3 or application/octet-stream: JSON is 415",
                   [step(image_request("{}", content_type="application/json"), 415,
                         err(415, "unsupported_media_type",
                             "Content-Type must be application/vnd.sqlite3 or application/octet-stream"))]))
    cs.append(case("exportDatabase with a body that is not JSON is 400 invalid_json",
                   [step(request("/admin/exportDatabase", auth=ADMIN, raw="nope"), 400, ANY)]))
    cs.append(case("getStorageStats answers the commit figures and the host's own under host",
                   [mk_user("u", "Ann"),
                    admin("getStorageStats", {}, 200, ok(STORAGE_STATS))]))
    peer, other = "203.0.113.7", "198.51.100.9"
    wrong = [step(image_request("x", auth=WRONG_ADMIN, peer=peer), 401, unauthorized) for _ in range(10)]
    throttled = err(429, "rate_limited", rate_desc(6), {"retry_after": 6, "retry_after_ms": 6000, "scope": "admin_auth"})
    stats_req = request("/admin/getStorageStats", {}, auth=ADMIN)
    cs.append(case("the backup methods are behind the login throttle: a client's 11th failed attempt in a row is 429 admin_auth, whatever the credential; another client is served",
                   wrong + [
                       step(image_request("x", auth=WRONG_ADMIN, peer=peer), 429, throttled),
                       step(dict(stats_req, peer=peer), 429, throttled),
                       step(dict(request("/admin/exportDatabase", {}, auth=ADMIN), peer=peer), 429, throttled),
                       step(dict(stats_req, peer=other), 200, ok(STORAGE_STATS)),
                       advance(6),
                       step(dict(stats_req, peer=peer), 200, ok(STORAGE_STATS))]))
    return cs


FILES = {
    "auth.json": auth_cases,
    "transport.json": transport_cases,
    "send_message.json": send_message_cases,
    "permissions.json": permissions_cases,
    "edit_delete.json": edit_delete_cases,
    "chat_action.json": chat_action_cases,
    "idempotency.json": idempotency_cases,
    "rate_limit.json": rate_limit_cases,
    "host_api.json": host_api_cases,
    "console.json": console_cases,
    "gateway.json": gateway_cases,
    "updates.json": updates_cases,
    "webhooks.json": webhook_cases,
    "buttons.json": buttons_cases,
    "backup.json": backup_cases,
}


def main():
    """Writes the files; with --check, writes nothing and exits 1 when a
    committed file differs from what this generator makes (CI runs that)."""
    import sys
    check = "--check" in sys.argv[1:]
    stale = []
    total = 0
    for name, fn in FILES.items():
        BOTS.clear()
        cases = fn()
        names = [c["name"] for c in cases]
        dup = {n for n in names if names.count(n) > 1}
        assert not dup, f"{name}: duplicate case names {dup}"
        doc = {"version": 1, "cases": cases}
        text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
        path = os.path.join(HERE, name)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        total += len(cases)
        print(f"{name}: {len(cases)} cases")
    print(f"total: {total} cases")
    if stale:
        print(f"stale: {', '.join(stale)} differ from tests/vectors/gen.py; run python3 tests/vectors/gen.py and commit")
        sys.exit(1)


if __name__ == "__main__":
    main()
