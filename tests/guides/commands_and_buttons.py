#!/usr/bin/env python3
"""Runs the two bots of docs/commands-and-buttons.md, taken from the doc as
a reader copies them (the code block after each `<!-- NAME: run by
scripts/test-docs.sh -->`), against the server scripts/test-docs.sh started
(BOTSPACE_URL, BOTSPACE_ADMIN; once on the Rust server, once on the C
server), and checks the menu flow through the host API: the user sends
/menu, the bot's message has the keyboard, the user presses a button, the
host's stream has the bot's answer with the expected text. Standard library
only; each test makes its own standard-tier bot, user and chat."""
import atexit, json, os, shutil, socket, subprocess, sys, tempfile, time, unittest, urllib.error, urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "commands-and-buttons.md")
BASE, ADMIN = os.environ["BOTSPACE_URL"], os.environ["BOTSPACE_ADMIN"]
MENU = {"inline_keyboard": [[{"text": "Pizza", "callback_data": "pizza"}, {"text": "Pasta", "callback_data": "pasta"}]]}
GEN = tempfile.mkdtemp(prefix="botspace-guide-")
atexit.register(shutil.rmtree, GEN, True)


def snippet(name):
    """The doc's code block after `<!-- NAME: run by ...`, as a file."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    marker = text.find(f"<!-- {name}: run by scripts/test-docs.sh -->")
    assert marker >= 0, f"no {name} snippet in {DOC}"
    start = text.index("```python\n", marker) + len("```python\n")
    end = text.index("\n```\n", start)
    path = os.path.join(GEN, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[start:end] + "\n")
    return path


def call(path, auth, body):
    req = urllib.request.Request(BASE + path, json.dumps(body).encode(),
                                 {"Authorization": auth, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def admin(method, body):
    status, v = call(f"/admin/{method}", f"Admin {ADMIN}", body)
    assert status == 200, f"/admin/{method} {body} → {status} {v}"
    return v["result"]


def bot(token, method, body):
    status, v = call(f"/bot/{method}", f"Bot {token}", body)
    assert status == 200, f"/bot/{method} {body} → {status} {v}"
    return v["result"]


def eventually(what, f, within=20.0):
    until = time.monotonic() + within
    while True:
        v = f()
        if v:
            return v
        assert time.monotonic() < until, f"not within {within} s: {what}"
        time.sleep(0.05)


N = [0]


def world():
    """A standard-tier bot (a free one may not edit), a user who started it, their chat."""
    N[0] += 1
    made = admin("createBot", {"display_name": "Menu", "handle": f"guide_menu_{N[0]}_bot", "quota_tier": "standard"})
    user = admin("createUser", {"display_name": "Ann"})
    chat = admin("startBot", {"user_id": user["id"], "bot_id": made["bot"]["id"]})
    return {"bot_id": made["bot"]["id"], "token": made["token"], "user_id": user["id"], "chat_id": chat["id"]}


STREAM = {"offset": 0, "seen": []}


def host_updates():
    """The host's stream so far (confirmed as it is read)."""
    got = admin("getUpdates", {"offset": STREAM["offset"], "limit": 1000})
    for u in got:
        STREAM["offset"] = max(STREAM["offset"], u["update_id"] + 1)
    STREAM["seen"].extend(got)
    return STREAM["seen"]


def answer_of(query_id):
    return next((u["data"] for u in host_updates()
                 if u["type"] == "callback_answered" and u["data"]["callback_query_id"] == query_id), None)


def bots_message(w, after):
    """The first message after `after` in the chat (the bot's reply)."""
    h = admin("getChatHistory", {"chat_id": w["chat_id"], "after_message_id": after})
    return h[0] if h else None


class Guide(unittest.TestCase):
    def run_snippet(self, name, env):
        p = subprocess.Popen([sys.executable, snippet(name)], env={**os.environ, "BASE": BASE, **env},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def stop():
            alive = p.poll() is None
            p.kill()
            out, err = p.communicate()
            self.assertTrue(alive, f"{name} exited early: {err}")
            self.assertEqual(out, "")
        self.addCleanup(stop)
        return p

    def menu_press(self, w, data):
        """/menu from the user → the bot's keyboard → a press; returns (message_id, the host's answer)."""
        said = admin("sendUserMessage", {"user_id": w["user_id"], "chat_id": w["chat_id"], "text": "/menu"})
        menu = eventually("the bot's menu", lambda: bots_message(w, said["message_id"]))
        self.assertEqual((menu["text"], menu["reply_markup"]), ("Pizza or pasta?", MENU))
        q = admin("pressButton", {"user_id": w["user_id"], "chat_id": w["chat_id"],
                                  "message_id": menu["message_id"], "callback_data": data})["callback_query_id"]
        answer = eventually("the bot's answer on the host's stream", lambda: answer_of(q))
        self.assertEqual(answer, {"callback_query_id": q, "user_id": w["user_id"], "chat_id": w["chat_id"],
                                  "message_id": menu["message_id"], "text": f"{data} it is", "show_alert": False})
        return menu["message_id"]

    def test_menu_bot_over_get_updates(self):
        w = world()
        self.run_snippet("menu_bot.py", {"TOKEN": w["token"]})
        eventually("the bot's commands", lambda: admin("getBotCommands", {"bot_id": w["bot_id"]}))
        self.assertEqual(admin("getBotCommands", {"bot_id": w["bot_id"]}),
                         [{"scope": {"type": "default"}, "commands": [{"command": "menu", "description": "Show the menu"}]}])
        mid = self.menu_press(w, "pizza")
        # The bot then removes the keyboard.
        eventually("the keyboard removed", lambda: "reply_markup" not in
                   next(m for m in admin("getChatHistory", {"chat_id": w["chat_id"]}) if m["message_id"] == mid))

    def test_menu_bot_over_a_webhook(self):
        w = world()
        # bot_started confirmed first: the webhook then starts with /menu.
        self.assertEqual(bot(w["token"], "getUpdates", {"offset": 2}), [])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        hook = bot(w["token"], "setWebhook", {"url": f"http://127.0.0.1:{port}/hook",
                                              "allowed_updates": ["message_created", "callback_query"]})
        self.assertEqual(hook["url"], f"http://127.0.0.1:{port}/hook")
        self.run_snippet("menu_hook.py", {"TOKEN": w["token"], "SECRET": hook["secret"], "PORT": str(port)})

        def listening():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        eventually("the hook listening", listening)
        # A request the server did not sign is refused.
        forged = urllib.request.Request(f"http://127.0.0.1:{port}/hook", b'{"type":"callback_query","data":{}}', {
            "webhook-id": "msg_x", "webhook-timestamp": str(int(time.time())), "webhook-signature": "v1,AAAA"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=10)
        self.assertEqual(refused.exception.code, 401)
        self.menu_press(w, "pasta")


if __name__ == "__main__":
    unittest.main(verbosity=2)
