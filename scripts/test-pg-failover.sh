#!/usr/bin/env bash
# Failover under keyed load (tests/pg_failover.rs): two example servers on a
# throwaway pg_auto_failover formation (scripts/with-pg-failover.sh: a
# monitor and three nodes on loopback, installed with apt when missing)
# through a planned failover, a kill -9 of the primary and a frozen
# primary. About 2 minutes. Fails, never skips, when the formation cannot
# be had.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/with-pg-failover.sh cargo test --features pg-tests --test pg_failover -- --nocapture "$@"
