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
# PostgreSQL: a throwaway cluster, the Rust server on it, and pgbench
# (shared with scripts/bench-ab.sh).
# shellcheck source=bench-pg.sh
source scripts/bench-pg.sh

cleanup() {
  server_stop
  pg_stop
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
