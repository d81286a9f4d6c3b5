#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: Debian's `postgresql`
# (installed with apt when missing), `initdb` as the `postgres` user into
# the build folder, a free loopback port, stopped and deleted afterwards
# whatever the command does. The command sees
#
#   BOTSPACE_TEST_POSTGRES=postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable
#   BOTSPACE_PG_CA=<the CA of the server's TLS certificate>
#
#   scripts/with-postgres.sh cargo test --test vectors
#
# When PostgreSQL cannot be installed or started this says so and exits 1:
# it never passes without running the command.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[with-postgres] %s\n' "$*" >&2; }
[[ $# -gt 0 ]] || { echo "usage: $0 command [args...]" >&2; exit 2; }

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
PG_BIN=$(pg_bin)
if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" ]]; then
  # shellcheck source=lib/install.sh
  source "$ROOT/scripts/lib/install.sh"
  need_apt postgresql || true
  PG_BIN=$(pg_bin)
fi
if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" ]]; then
  log "FAILED: PostgreSQL is not installed and could not be installed (Debian package postgresql)"
  exit 1
fi

# initdb refuses to run as root: run the server as `postgres` (or as the
# current user when that is not root).
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

WORK=$(mktemp -d "$ROOT/target/pg.XXXXXX" 2>/dev/null || { mkdir -p "$ROOT/target" && mktemp -d "$ROOT/target/pg.XXXXXX"; })
[[ $(id -u) -eq 0 ]] && chown postgres "$WORK"
# The folder must be reachable by the postgres user.
chmod 755 "$WORK" "$ROOT/target" 2>/dev/null || true
PORT=""
stop() {
  if [[ -n "$PORT" ]]; then as_pg "$PG_BIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap stop EXIT

as_pg "$PG_BIN/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 >"$WORK/initdb.log" 2>&1 ||
  { cat "$WORK/initdb.log" >&2; log "FAILED: initdb"; exit 1; }
# TLS with a throwaway CA, so `sslmode=require` is tested for real.
mkdir -p "$WORK/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=botspace test CA" \
  -keyout "$WORK/tls/ca.key" -out "$WORK/tls/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$WORK/tls/server.key" -out "$WORK/tls/server.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$WORK/tls/ext"
openssl x509 -req -in "$WORK/tls/server.csr" -CA "$WORK/tls/ca.pem" -CAkey "$WORK/tls/ca.key" -CAcreateserial \
  -days 2 -extfile "$WORK/tls/ext" -out "$WORK/tls/server.pem" >/dev/null 2>&1 ||
  { log "FAILED: openssl could not make the test certificates"; exit 1; }
chmod 600 "$WORK/tls/server.key"
[[ $(id -u) -eq 0 ]] && chown -R postgres "$WORK/tls"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PG_OPTS="-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories='$WORK' -c max_connections=300 -c fsync=on -c ssl=on -c ssl_cert_file=$WORK/tls/server.pem -c ssl_key_file=$WORK/tls/server.key"
as_pg "$PG_BIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -o "$PG_OPTS" \
  start >/dev/null || { cat "$WORK/server.log" >&2; log "FAILED: the server did not start"; exit 1; }
log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT"

# Plain TCP by default; BOTSPACE_PG_CA verifies the server for sslmode=require.
export BOTSPACE_TEST_POSTGRES="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
export BOTSPACE_PG_CA="$WORK/tls/ca.pem"
# For tests that stop and start the server (same options).
export BOTSPACE_PG_BIN="$PG_BIN" BOTSPACE_PG_DATA="$WORK/data" BOTSPACE_PG_OPTS="$PG_OPTS"
set +e
"$@"
rc=$?
set -e
exit $rc
