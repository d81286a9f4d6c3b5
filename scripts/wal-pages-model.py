#!/usr/bin/env python3
"""WAL pages a group commit writes, per storage layout (a model, not the service).

    python3 scripts/wal-pages-model.py

Writes sendMessage's rows (schema 3: a message, its message_created update)
for 64 private chats, 300 messages each, then 1 500 commits of 14 messages
into 14 different chats, with 2 KiB pages and no checkpoint, and counts the
WAL frames those commits wrote:

- chat: `messages` keyed by (chat_id, message_id), as the service stores it;
- log: the same rows appended to a rowid table in write order (the layout a
  message log would use, before per-chat pages are built from it).

See docs/benchmarks.md ("What limits it now").
"""
import json
import os
import random
import shutil
import sqlite3
import tempfile

random.seed(1)
CHATS, GROUP, COMMITS, PRE = 64, 14, 1500, 300
DIR = tempfile.mkdtemp(prefix="wal-pages-")
def chat(i): return "spc_%020d" % i
def run(layout):
    path = os.path.join(DIR, f"{layout}.db")
    for s in ("", "-wal", "-shm"):
        try: os.remove(path + s)
        except FileNotFoundError: pass
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA page_size=2048"); c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=OFF")
    c.execute("""CREATE TABLE messages (chat_id TEXT NOT NULL, message_id INTEGER NOT NULL, sender_id TEXT NOT NULL,
      sender_is_bot INTEGER NOT NULL, text TEXT, date INTEGER NOT NULL, edit_date INTEGER, reply_to INTEGER,
      deleted INTEGER NOT NULL DEFAULT 0, created_update INTEGER, PRIMARY KEY (chat_id, message_id)) WITHOUT ROWID""")
    c.execute("CREATE TABLE log (chat_id TEXT NOT NULL, message_id INTEGER NOT NULL, sender_id TEXT NOT NULL, sender_is_bot INTEGER NOT NULL, text TEXT, date INTEGER NOT NULL, created_update INTEGER)")
    c.execute("CREATE TABLE updates (update_id INTEGER PRIMARY KEY AUTOINCREMENT, created_at_ms INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, ref_chat TEXT, ref_message INTEGER)")
    nxt = [1]*CHATS
    def send(i):
        mid = nxt[i]; nxt[i] += 1
        data = json.dumps({"message_id": str(mid), "chat": {"id": chat(i), "type": "private"}, "date": 1700000000, "text": "durable message", "from": {"id": "bot_%020d" % i, "is_bot": True}})
        u = c.execute("INSERT INTO updates (created_at_ms,type,data) VALUES (?,?,?) RETURNING update_id", (1700000000000, "message_created", data)).fetchone()[0]
        tbl = "log" if layout == "log" else "messages"
        c.execute(f"INSERT INTO {tbl} (chat_id,message_id,sender_id,sender_is_bot,text,date,created_update) VALUES (?,?,?,?,?,?,?)",
                  (chat(i), mid, "bot_%020d" % i, 1, "durable message", 1700000000, u))
    c.execute("BEGIN")
    for _ in range(PRE):
        for i in range(CHATS): send(i)
    c.execute("COMMIT")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.execute("PRAGMA wal_autocheckpoint=0")
    for _ in range(COMMITS):
        c.execute("BEGIN")
        for i in random.sample(range(CHATS), GROUP): send(i)
        c.execute("COMMIT")
    frames = (os.path.getsize(path + "-wal") - 32) / (2048 + 24)
    msgs = COMMITS * GROUP
    print(f"{layout}: {frames/COMMITS:.1f} pages per commit of {GROUP}, {frames*2072/msgs:.0f} WAL bytes per message")
if __name__ == "__main__":
    try:
        run("chat")
        run("log")
    finally:
        shutil.rmtree(DIR)
