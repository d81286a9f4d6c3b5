#!/usr/bin/env bash
# The same answers on both stores: runs the shared vectors and the rule
# tests against a throwaway PostgreSQL cluster (scripts/with-postgres.sh:
# Debian's postgresql, installed when missing, initdb into target/, a free
# loopback port, stopped afterwards). Each test service gets a schema of
# its own. Then failover under load on a pg_auto_failover formation
# (scripts/test-pg-failover.sh, about 1.5 minutes). Fails, never skips,
# when PostgreSQL cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/with-postgres.sh cargo test \
  --test vectors --test rules_http --test rules_batch --test rules_admin_auth --test rules_console \
  --test concurrency --test gateway_sansio --test robustness --test postgres_store --test server_nodes --features pg-tests "$@"
scripts/test-pg-failover.sh
