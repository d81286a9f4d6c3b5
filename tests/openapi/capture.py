#!/usr/bin/env python3
"""Captures real answers of a running example server and writes them as a
TypeScript program typed by the client openapi-typescript generated from
docs/openapi.yaml, for tsc to check (scripts/test-openapi.sh).

Usage: capture.py BASE_URL ADMIN_SECRET OUT_DIR

It makes its own bots, user and chats, so the bot's getUpdates answer holds
one event of every type the bot stream has (events_dropped aside: it needs
retention to drop events; tests/vectors/updates.json has it), and the host's
stream a chat_action too. Writes OUT_DIR/answers.ts (must type-check),
OUT_DIR/bad.ts (the same answer with one event's data swapped for another
type's: must not) and prints the bot's token, for the docs' client snippet, and how many
events its getUpdates answer held.
"""
import base64
import json
import socket
import sys
import urllib.error
import urllib.request

BASE, SECRET, OUT = sys.argv[1], sys.argv[2], sys.argv[3]


def call(path, body=None, auth=None, expect=200):
    req = urllib.request.Request(BASE + path, data=json.dumps(body or {}).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    if auth:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if status != expect:
        sys.exit(f"FAIL: {path} answered {status}, expected {expect}: {raw!r}")
    return json.loads(raw)


def admin(method, body=None, expect=200):
    return call(f"/admin/{method}", body, f"Admin {SECRET}", expect)


def bot(token, method, body=None, expect=200):
    return call(f"/bot/{method}", body, f"Bot {token}", expect)


created = admin("createBot", {"display_name": "Typed Bot", "handle": "typed_bot", "quota_tier": "standard"})["result"]
b, tok = created["bot"]["id"], created["token"]
other = admin("createBot", {"display_name": "Other Bot", "handle": "other_typed_bot", "quota_tier": "standard"})["result"]
u = admin("createUser", {"display_name": "Ada", "handle": "ada_typed"})["result"]["id"]

chat = admin("startBot", {"user_id": u, "bot_id": b})["result"]["id"]  # bot_started
admin("sendUserMessage", {"user_id": u, "chat_id": chat, "text": "hello"})  # message_created
admin("setBlocked", {"chat_id": chat, "by": "user", "blocked": True})  # blocked
admin("setBlocked", {"chat_id": chat, "by": "user", "blocked": False})  # unblocked
group = admin("createGroup", {"title": "Typed", "member_ids": [u, b, other["bot"]["id"]]})["result"]["id"]  # member_added
sent = bot(other["token"], "sendMessage", {"chat_id": group, "text": "from the other bot"})["result"]
bot(other["token"], "editMessageText", {"chat_id": group, "message_id": sent["message_id"], "text": "edited"})  # message_edited
said = admin("sendUserMessage", {"user_id": u, "chat_id": group, "text": "to delete"})["result"]
admin("deleteUserMessage", {"chat_id": group, "message_id": said["message_id"]})  # message_deleted
admin("setGroupPermissions", {"chat_id": group, "bots_can_send": False})  # chat_permissions_changed
admin("removeMember", {"chat_id": group, "member_id": u})  # member_removed
admin("dissolveGroup", {"chat_id": group})  # chat_dissolved
bot(tok, "sendChatAction", {"chat_id": chat, "action": "typing"})  # chat_action (host stream)



def upgrade(token):
    """The head of the gateway's answer to a WebSocket upgrade: the 101
    docs/openapi.yaml declares, with its headers as the server names them."""
    host, port = BASE.split("//")[1].rsplit(":", 1)
    key = base64.b64encode(b"openapi-capture!").decode()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((f"GET /bot/gateway HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bot {token}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
    if not lines[0].startswith("HTTP/1.1 101 "):
        sys.exit(f"FAIL: the gateway upgrade answered {lines[0]!r}")
    names = {"upgrade": "Upgrade", "sec-websocket-accept": "Sec-WebSocket-Accept"}
    return {names[k.lower()]: v.strip() for k, v in (l.split(":", 1) for l in lines[1:]) if k.lower() in names}


answers = {
    "gatewayUpgrade": upgrade(tok),
    "getMe": bot(tok, "getMe"),
    "sendMessage": bot(tok, "sendMessage", {"chat_id": chat, "text": "Hi Ada"}),
    "getUpdates": bot(tok, "getUpdates"),
    "hostGetUpdates": admin("getUpdates", {"limit": 1000}),
    "textEmpty": bot(tok, "sendMessage", {"chat_id": chat, "text": ""}, expect=400),
    "invalidToken": bot("bot_" + "A" * 43, "getMe", expect=401),
    "tokenInPath": call(f"/bot{tok}/getMe", expect=404),
}

want = {"message_created", "message_edited", "message_deleted", "bot_started", "blocked", "unblocked",
        "member_added", "member_removed", "chat_permissions_changed", "chat_dissolved"}
seen = {e["type"] for e in answers["getUpdates"]["result"]}
if seen != want:
    sys.exit(f"FAIL: the bot's getUpdates has types {sorted(seen)}, expected {sorted(want)}")
host_seen = {e["type"] for e in answers["hostGetUpdates"]["result"]}
if not (want | {"chat_action"}) <= host_seen:
    sys.exit(f"FAIL: the host's getUpdates lacks {sorted((want | {'chat_action'}) - host_seen)}")
if tok in json.dumps(answers["tokenInPath"]):
    sys.exit("FAIL: the token_in_path answer repeats the token")

TYPES = {
    "gatewayUpgrade": 'paths["/bot/gateway"]["get"]["responses"][101]["headers"]',
    "getMe": 'Body<paths["/bot/getMe"]["post"]["responses"][200]>',
    "sendMessage": 'Body<paths["/bot/sendMessage"]["post"]["responses"][200]>',
    "getUpdates": 'Body<paths["/bot/getUpdates"]["post"]["responses"][200]>',
    "hostGetUpdates": 'Body<paths["/admin/getUpdates"]["post"]["responses"][200]>',
    "textEmpty": 'Body<paths["/bot/sendMessage"]["post"]["responses"][400]>',
    "invalidToken": 'Body<paths["/bot/getMe"]["post"]["responses"][401]>',
    "tokenInPath": 'components["schemas"]["Error"]',
}

HEAD = '''// Generated by tests/openapi/capture.py from the example server's answers.
import type { components, paths } from "./botspace-api.js";

type Body<R> = R extends { content: { "application/json": infer B } } ? B : never;
'''

PROGRAM = '''
// The discriminator narrows `data` by `type`: every field read below is typed.
export function describe(u: components["schemas"]["BotUpdate"]): string {
  switch (u.type) {
    case "message_created":
    case "message_edited":
      return `${u.data.message.chat.id} ${u.data.message.from.id}: ${u.data.message.text ?? "(deleted)"}`;
    case "message_deleted":
      return `${u.data.chat.id} ${u.data.message_id}`;
    case "bot_started":
      return `${u.data.user.display_name} ${u.data.user.handle ?? ""}`;
    case "blocked":
    case "unblocked":
      return `${u.data.chat.id} by ${u.data.by}`;
    case "member_added":
    case "member_removed":
      return `${u.data.member.id} bot=${u.data.member.is_bot}`;
    case "chat_permissions_changed":
      return `bots_can_send=${u.data.bots_can_send}`;
    case "chat_dissolved":
      return u.data.chat.type;
    case "callback_query":
      return `${u.data.from.id} pressed ${u.data.data} under ${u.data.message.message_id}`;
    case "events_dropped":
      return `dropped through ${u.data.dropped_through}`;
    default: {
      const unknown: never = u;
      return unknown;
    }
  }
}

const lines = getUpdates.result.map(describe);
if (lines.length < 10 || !getMe.ok || textEmpty.error !== "text_empty") throw new Error("unexpected answers");
console.log(`typed: ${lines.length} events, ${hostGetUpdates.result.length} host updates, ${sendMessage.result.message_id}, ${invalidToken.error}, ${tokenInPath.error}`);
'''


def program(ans):
    body = "".join(f"export const {k}: {TYPES[k]} = {json.dumps(v, indent=2)};\n" for k, v in ans.items())
    return HEAD + "\n" + body + PROGRAM


with open(f"{OUT}/answers.ts", "w") as f:
    f.write(program(answers))
# One event's data swapped for another type's: the discriminator must refuse it.
bad = json.loads(json.dumps(answers))
ev = next(e for e in bad["getUpdates"]["result"] if e["type"] == "message_created")
ev["data"] = next(e for e in bad["getUpdates"]["result"] if e["type"] == "bot_started")["data"]
with open(f"{OUT}/bad.ts", "w") as f:
    f.write(program(bad))
print(tok, len(answers["getUpdates"]["result"]))
