#!/usr/bin/env bash
# Durable sendMessage: the Rust example server, the C server, the Rust
# server on the PostgreSQL store (Rust-on-PG, the same cluster) and
# PostgreSQL itself through pgbench, in one run.
#
#   scripts/bench-durable.sh [SECONDS_PER_RUN] [CONNECTION_COUNTS] [ROUNDS]
#   scripts/bench-durable.sh 5 "16 64" 2        # the defaults
#   BENCH_SYSTEMS="Rust-on-PG PostgreSQL" scripts/bench-durable.sh 5 64 1
#
# Every run writes to a fresh database file with `synchronous = full` (the
# default of Config): a 200 means the message is on disk. Each connection
# is its own official bot (no rate limits) sending into its own started
# private chat: every bot has exactly one request in flight at a time (see
# the Lua script below; WRK_THREADS wrk threads, default 2). PostgreSQL (when its binaries are there,
# or after `apt-get install postgresql`) runs as a throwaway cluster under
# target/bench-durable/, on a free loopback port, with
# `synchronous_commit = on`; pgbench sends the same rows per transaction
# at the same client count, one chat per client: UPDATE chats …
# RETURNING last_message_id, INSERT messages, INSERT updates (the schema
# of src/store/sqlite.rs, the statements of src/methods/messages.rs and
# src/events.rs). Systems alternate within a round; the table shows each
# one's best round and its ratio to PostgreSQL at the same count.
# Loopback only; every run is bounded by SECONDS_PER_RUN.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
COUNTS=${2:-"16 64"}
ROUNDS=${3:-2}
# wrk threads: more than the cores only adds the client's own switching.
WRK_THREADS=${WRK_THREADS:-2}
SECRET=bench-durable-admin-secret-01
WORK="$(pwd)/target/bench-durable"
rm -rf "$WORK"
mkdir -p "$WORK"
TMP="$WORK/run"
mkdir -p "$TMP"
# shellcheck source=bench-lib.sh
source scripts/bench-lib.sh

PG_BIN=""
PG_DATA="$WORK/pg/data"
PG_PORT=""
cleanup() {
  server_stop
  if [[ -n "$PG_PORT" ]]; then runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------------------
# botspace servers

cat > "$TMP/per-conn.lua" <<'LUA'
-- Each connection its own bot: with N connections there are N bots, and
-- every bot has exactly one request in flight at any time. wrk's Lua sees
-- threads, not connections, so a thread keeps a queue of its idle bots:
-- request() takes the next one, response() hands a bot back when its
-- answer (which names the chat) arrives. setup() gives thread k the bots
-- k, k+T, k+2T, ... of $BOTS ("TOKEN CHAT" lines).
local lines = {}
for line in io.lines(os.getenv("BOTS")) do lines[#lines + 1] = line end
local threads = tonumber(os.getenv("THREADS"))
local next_thread = 0

function setup(thread)
  local mine = {}
  for i = next_thread + 1, #lines, threads do mine[#mine + 1] = lines[i] end
  next_thread = next_thread + 1
  thread:set("bots", table.concat(mine, "\n"))
end

function init(args)
  reqs, queue, head, tail, spare = {}, {}, 1, 0, {}
  for token, chat in bots:gmatch("(%S+) (%S+)") do
    reqs[chat] = wrk.format("POST", "/bot/sendMessage",
      { ["Authorization"] = "Bot " .. token, ["Content-Type"] = "application/json" },
      '{"chat_id":"' .. chat .. '","text":"durable message"}')
    tail = tail + 1
    queue[tail] = chat
    spare[#spare + 1] = chat
  end
end

function request()
  if head > tail then
    -- Only after an answer without a chat (an error, counted by wrk).
    return reqs[spare[math.random(#spare)]]
  end
  local chat = queue[head]
  queue[head] = nil
  head = head + 1
  return reqs[chat]
end

function response(status, headers, body)
  local chat = body:match('"chat":{"id":"([^"]+)"')
  if chat ~= nil and reqs[chat] ~= nil then
    tail = tail + 1
    queue[tail] = chat
  end
end
LUA

run_server() { # binary connections [db] → "rps p50 p99 non2xx"
  rm -f "$TMP"/durable.db*
  server_start "$1" "${3:-$TMP/durable.db}"
  make_bots "$2" "$TMP/bots"
  BOTS="$TMP/bots" THREADS=$WRK_THREADS wrk -t"$WRK_THREADS" -c"$2" -d"${SECS}s" --latency -s "$TMP/per-conn.lua" \
    "http://127.0.0.1:$PORT/bot/sendMessage" | wrk_figures
  server_stop
}

# ---------------------------------------------------------------------------
# PostgreSQL

pg_find() {
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [[ -z "$PG_BIN" && $(id -u) -eq 0 ]]; then
    need_apt postgresql || true
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  [[ -n "$PG_BIN" && -x "$PG_BIN/pgbench" ]] && id postgres >/dev/null 2>&1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

psql_() { "$PG_BIN/psql" -q -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }

pg_start() {
  mkdir -p "$WORK/pg"
  chown postgres "$WORK/pg"
  runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U postgres -E UTF8 > "$WORK/initdb.log" 2>&1
  PG_PORT=$(free_port)
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$WORK/pg/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories='$WORK/pg' \
        -c synchronous_commit=on -c fsync=on -c max_connections=200" start > /dev/null
  # The rows sendMessage writes (src/store/sqlite.rs), one private chat per client.
  psql_ -d postgres <<'SQL'
CREATE TABLE chats (
  id text PRIMARY KEY, type text NOT NULL, title text, user_id text, bot_id text,
  started int NOT NULL DEFAULT 0, blocked_by_user int NOT NULL DEFAULT 0, blocked_by_bot int NOT NULL DEFAULT 0,
  bots_can_send int NOT NULL DEFAULT 1, dissolved int NOT NULL DEFAULT 0,
  last_message_id bigint NOT NULL DEFAULT 0, created_at bigint NOT NULL);
CREATE TABLE messages (
  chat_id text NOT NULL, message_id bigint NOT NULL, sender_id text NOT NULL, sender_is_bot int NOT NULL,
  text text, date bigint NOT NULL, edit_date bigint, reply_to bigint, deleted int NOT NULL DEFAULT 0,
  PRIMARY KEY (chat_id, message_id));
CREATE TABLE updates (
  update_id bigserial PRIMARY KEY, created_at_ms bigint NOT NULL, type text NOT NULL, data text NOT NULL,
  ref_chat text, ref_message bigint);
CREATE INDEX updates_by_message ON updates (ref_chat, ref_message) WHERE ref_message IS NOT NULL;
SQL
  # pgbench reads `:name` as a variable, so the event's JSON is built with
  # json_build_object rather than written out.
  cat > "$TMP/send.sql" <<'SQL'
\set chat :client_id + 1
BEGIN;
UPDATE chats SET last_message_id = last_message_id + 1 WHERE id = 'spc_' || :chat::text RETURNING last_message_id AS mid \gset
INSERT INTO messages (chat_id, message_id, sender_id, sender_is_bot, text, date, reply_to) VALUES ('spc_' || :chat::text, :mid, 'bot_' || :chat::text, 1, 'durable message', extract(epoch FROM now())::bigint, NULL);
INSERT INTO updates (created_at_ms, type, data, ref_chat, ref_message) VALUES ((extract(epoch FROM now()) * 1000)::bigint, 'message_created', json_build_object('message_id', :mid::text, 'chat', json_build_object('id', 'spc_' || :chat::text, 'type', 'private'), 'date', extract(epoch FROM now())::bigint, 'text', 'durable message', 'from', json_build_object('id', 'bot_' || :chat::text, 'is_bot', true))::text, 'spc_' || :chat::text, :mid);
COMMIT;
SQL
}

run_server_pg() { # binary connections → the Rust server on a fresh PostgreSQL database
  psql_ -d postgres -c "DROP DATABASE IF EXISTS botspace_bench" -c "CREATE DATABASE botspace_bench" >/dev/null
  server_start "$1" "postgres://postgres@127.0.0.1:$PG_PORT/botspace_bench"
  make_bots "$2" "$TMP/bots"
  BOTS="$TMP/bots" THREADS=$WRK_THREADS wrk -t"$WRK_THREADS" -c"$2" -d"${SECS}s" --latency -s "$TMP/per-conn.lua" \
    "http://127.0.0.1:$PORT/bot/sendMessage" | wrk_figures
  server_stop
}

run_pg() { # clients → "tps p50 p99 failed"
  psql_ -d postgres -c "TRUNCATE chats, messages, updates;
    INSERT INTO chats (id, type, user_id, bot_id, started, created_at)
    SELECT 'spc_' || g, 'private', 'usr_load', 'bot_' || g, 1, 0 FROM generate_series(1, $1) g;
    CHECKPOINT;"
  rm -rf "$TMP/pglog" && mkdir -p "$TMP/pglog"
  local out
  out=$(cd "$TMP/pglog" && "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PG_PORT" -U postgres -n -M prepared \
    -c "$1" -j 2 -T "$SECS" -f "$TMP/send.sql" -l --log-prefix=tx postgres 2>&1)
  local tps failed
  tps=$(awk '/^tps = / {printf "%.0f", $3}' <<<"$out")
  [[ -n "$tps" ]] || { echo "pgbench failed: $out" >&2; echo "0 ? ? ?"; return; }
  failed=$(awk '/number of failed transactions/ {print $5}' <<<"$out")
  # Per-transaction log: the third field is the latency in microseconds.
  cat "$TMP"/pglog/tx* | awk '{print $3}' | sort -n > "$TMP/pglat"
  local n p50 p99
  n=$(wc -l < "$TMP/pglat")
  p50=$(awk -v n="$n" 'NR == int(n * 0.50) + 1 {printf "%.2f", $1 / 1000}' "$TMP/pglat")
  p99=$(awk -v n="$n" 'NR == int(n * 0.99) + 1 {printf "%.2f", $1 / 1000}' "$TMP/pglat")
  echo "${tps:-0} ${p50:-?} ${p99:-?} ${failed:-0}"
}

# ---------------------------------------------------------------------------

bench_tools
bench_build
SYSTEMS="C Rust"
if pg_find && pg_start; then
  SYSTEMS="$SYSTEMS Rust-on-PG PostgreSQL"
else
  echo "PostgreSQL not available: the table has no baseline" >&2
fi
# Opt-in systems, only by name in BENCH_SYSTEMS:
# - C-memory, Rust-memory: the servers on `:memory:`, the ceiling without a
#   disk (what the HTTP and request work alone allow on this machine);
# - Rust-before-on-PG: that server on the PostgreSQL store (BEFORE_REV must
#   have it), e.g. BEFORE_REV=<commit> BENCH_SYSTEMS="Rust-before-on-PG
#   Rust-on-PG PostgreSQL" for an A/B of a change to the PostgreSQL store;
# - Rust-before: the Rust server built from BEFORE_REV in a worktree under
#   target/ (default: the last commit before group commit, every request
#   its own transaction and fsync: the latency baseline group commit is
#   measured against); BEFORE_REV=<commit> compares any earlier version.
BEFORE_REV=${BEFORE_REV:-5a2055d^}
# BEFORE_BIN=<path> takes a server built already instead.
BEFORE_BIN=${BEFORE_BIN:-}
if [[ -z $BEFORE_BIN && ( " ${BENCH_SYSTEMS:-} " == *" Rust-before "* || " ${BENCH_SYSTEMS:-} " == *" Rust-before-on-PG "* ) ]]; then
  tree="$(pwd)/target/bench-before"
  rev=$(git rev-parse "$BEFORE_REV")
  if [[ ! -d "$tree" || $(git -C "$tree" rev-parse HEAD 2>/dev/null) != "$rev" ]]; then
    git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"
    git worktree prune
    git worktree add -q --detach "$tree" "$rev"
  fi
  # Before PostgreSQL became opt-in the feature did not exist: build with it
  # when the old tree has it and it is not a default there.
  feat=""
  grep -q '^postgres = \[' "$tree/Cargo.toml" && ! grep -q '^default = \["postgres"\]' "$tree/Cargo.toml" && feat="--features postgres"
  # shellcheck disable=SC2086
  (cd "$tree" && cargo build -q --release $feat --example server)
  BEFORE_BIN="$tree/target/release/examples/server"
fi
SYSTEMS="$SYSTEMS Rust-before C-memory Rust-memory"
[[ $SYSTEMS == *Rust-on-PG* ]] && SYSTEMS="$SYSTEMS Rust-before-on-PG"
# BENCH_SYSTEMS="Rust-on-PG PostgreSQL" runs only those (of the ones available).
if [[ -z ${BENCH_SYSTEMS:-} ]]; then
  SYSTEMS="${SYSTEMS% Rust-before-on-PG}"
  SYSTEMS="${SYSTEMS% Rust-before C-memory Rust-memory}"
else
  keep=""
  for sys in $SYSTEMS; do [[ " $BENCH_SYSTEMS " == *" $sys "* ]] && keep="$keep $sys"; done
  SYSTEMS="${keep# }"
fi

for r in $(seq "$ROUNDS"); do
  for n in $COUNTS; do
    for sys in $SYSTEMS; do
      case $sys in
        C) f=$(run_server "$C_BIN" "$n") ;;
        Rust) f=$(run_server "$RUST_BIN" "$n") ;;
        Rust-before) f=$(run_server "$BEFORE_BIN" "$n") ;;
        C-memory) f=$(run_server "$C_BIN" "$n" :memory:) ;;
        Rust-memory) f=$(run_server "$RUST_BIN" "$n" :memory:) ;;
        Rust-on-PG) f=$(run_server_pg "$RUST_BIN" "$n") ;;
        Rust-before-on-PG) f=$(run_server_pg "$BEFORE_BIN" "$n") ;;
        PostgreSQL) f=$(run_pg "$n") ;;
      esac
      echo "round $r, $n connections, $sys: $f" >&2
      record "$sys $n" "$f"
    done
  done
done

echo "durable sendMessage, ${SECS}s per run, best of $ROUNDS alternating rounds; each connection its own bot and chat"
echo "botspace: wrk -t$WRK_THREADS -cN, one bot per connection, file database, synchronous = full"
[[ $SYSTEMS == *PostgreSQL* ]] && echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'): pgbench -M prepared -cN -j2, synchronous_commit = on"
echo
echo "| system | connections | requests/s | p50 ms | p99 ms | vs PostgreSQL | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for n in $COUNTS; do
  base=${BEST[PostgreSQL $n]:-}
  for sys in $SYSTEMS; do
    read -r rps p50 p99 bad <<<"${BEST[$sys $n]:-0 ? ? ?}"
    ratio="—"
    if [[ -n "$base" ]]; then ratio=$(awk -v a="$rps" -v b="${base%% *}" 'BEGIN {if (b > 0) printf "%.1f×", a / b; else print "—"}'); fi
    echo "| $sys | $n | $rps | $p50 | $p99 | $ratio | $bad |"
  done
done
