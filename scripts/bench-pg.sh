# PostgreSQL for the benchmarks (sourced by scripts/bench-durable.sh and
# scripts/bench-ab.sh after bench-lib.sh, from the repository root, with
# WORK, TMP and SECS set): a throwaway PostgreSQL cluster under
# $WORK/pg on a free loopback port with `synchronous_commit = on`; the Rust
# server on a fresh database of it; pgbench writing the rows sendMessage
# writes, one chat per client. The caller stops the cluster
# (pg_stop) when it exits.
# shellcheck shell=bash

PG_BIN=""
PG_DATA="$WORK/pg/data"
PG_PORT=""

pg_stop() {
  if [[ -n "$PG_PORT" ]]; then runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true; fi
  PG_PORT=""
}

# CPU time (clock ticks, user + system) of every process the cluster's
# user runs: the backends, the WAL writer, the checkpointer.
pg_cpu_ticks() {
  local s=0 p t
  for p in $(pgrep -u postgres); do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) || continue
    s=$((s + t))
  done
  echo "$s"
}

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

