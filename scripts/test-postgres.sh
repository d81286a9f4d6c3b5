#!/usr/bin/env bash
# The same answers on both stores: runs the shared vectors and the rule
# tests against a throwaway PostgreSQL cluster (scripts/with-postgres.sh:
# Debian's postgresql, installed when missing, initdb into target/, a free
# loopback port, stopped afterwards). Each test service gets a schema of
# its own. Then the C library built with its `postgres` feature (the one
# switch a C host needs: `cargo build -p botspace-c --features postgres`)
# opens the same cluster from C (tests/c/postgres.c). Fails, never skips,
# when PostgreSQL cannot be had. Last, failover under load on a
# pg_auto_failover formation (scripts/test-pg-failover.sh, about 1.5 minutes).
#
# PostgreSQL is not a default feature: every build here names it
# (`pg-tests` turns on `postgres` and the tests that need a server).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/install.sh
source scripts/lib/install.sh
need_cmd cc:gcc
# The C example server, when a test builds it, delivers webhooks with libcurl.
need_apt libcurl4-openssl-dev
scripts/with-postgres.sh bash -c '
  set -euo pipefail
  cargo test --features pg-tests --test vectors --test postgres_store --test server_nodes "$@"
  # The rule tests that take their database from common::test_database()
  # (tests/core.rs holds them as modules; the others there are SQLite-only).
  cargo test --features pg-tests --test core "$@" -- \
    rules_http:: rules_handles:: rules_batch:: rules_admin_auth:: rules_console:: rules_ops:: rules_updates:: concurrency:: gateway_sansio:: robustness::
  echo "=== the C library with --features postgres on PostgreSQL (tests/c/postgres.c)"
  # Up to date already: server_nodes built it for its C node (tests/wire).
  cargo build -q --release -p botspace-c --features postgres
  mkdir -p test-output/c
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror -Iinclude tests/c/postgres.c target/release/libbotspace.a \
    -lpthread -ldl -lm -lrt -lutil -o test-output/c/postgres
  test-output/c/postgres "$BOTSPACE_TEST_POSTGRES"
' test-postgres "$@"
scripts/test-pg-failover.sh
