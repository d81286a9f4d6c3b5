#!/usr/bin/env bash
# docs/openapi.yaml against reality and tools: every vector response fits it;
# Redocly's linter finds no error in it; openapi-typescript generates a client
# from it and tsc type-checks real answers of the example server against that
# client (and refuses a wrong one), and compiles and runs the openapi-fetch
# client of docs/api.md; and schemathesis, run against the example server for
# a bounded number of cases, finds no 5xx and no status, body or content type
# outside it.
# Loopback only; the server runs on a fresh temp database and is stopped after.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_EXAMPLES="${OPENAPI_MAX_EXAMPLES:-100}"
# shellcheck source=lib/install.sh
source scripts/lib/install.sh
need_pip jsonschema==4.26.0 PyYAML==6.0.3 schemathesis==4.32.5
python3 tests/openapi_vectors.py
# The npm tools, pinned by tests/openapi/package-lock.json.
command -v npm >/dev/null || need_apt nodejs npm
tsdir=tests/openapi
stamp="$tsdir/node_modules/.lock-stamp"
sum="$(sha256sum "$tsdir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
    (cd "$tsdir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$sum" >"$stamp"
fi
# Redocly's recommended rules: any error (a duplicate operationId, a broken
# $ref, a wrong discriminator) fails; warnings are printed.
(cd "$tsdir" && npx --no-install redocly lint ../../docs/openapi.yaml --format=summary) ||
    { echo "FAIL: redocly lint found errors in docs/openapi.yaml"; exit 1; }
rm -rf "$tsdir/gen" && mkdir -p "$tsdir/gen"
(cd "$tsdir" && npx --no-install openapi-typescript ../../docs/openapi.yaml -o gen/botspace-api.d.ts) >&2
# The client snippet of docs/api.md, as a reader would paste it.
awk '/^<!-- client.ts:/ {grab=1; next} grab && /^```ts$/ {on=1; next} on && /^```$/ {exit} on {print}' docs/api.md >"$tsdir/gen/client.ts"
[ -s "$tsdir/gen/client.ts" ] || { echo "FAIL: no client.ts snippet in docs/api.md"; exit 1; }
cargo build --release --example server
dir=$(mktemp -d)
secret="openapi-admin-secret-0001"
./target/release/examples/server --addr 127.0.0.1:0 --db "$dir/botspace.db" \
    --admin-secret "$secret" --manual-clock --demo >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q '^botspace ready' "$dir/server.log" && break; sleep 0.1; done
grep -q '^botspace ready' "$dir/server.log" || { echo "FAIL: the example server did not start:"; cat "$dir/server.log"; exit 1; }
base=$(sed -n 's/^botspace listening on //p' "$dir/server.log")
token=$(sed -n 's/^demo bot token: //p' "$dir/server.log")
[ -n "$base" ] && [ -n "$token" ] || { echo "FAIL: no address or demo token in the server output"; cat "$dir/server.log"; exit 1; }
# Real answers, typed by the generated client: tsc must accept them and
# refuse the same answer with one event's data swapped for another type's.
read -r bot_token events < <(python3 "$tsdir/capture.py" "$base" "$secret" "$tsdir/gen")
[ -n "${events:-}" ] || { echo "FAIL: capturing the server's answers failed"; exit 1; }
(cd "$tsdir" && npx --no-install tsc -p tsconfig.json) || { echo "FAIL: real answers do not type-check against docs/openapi.yaml"; exit 1; }
if (cd "$tsdir" && npx --no-install tsc --noEmit --strict --target es2022 --module nodenext --moduleResolution nodenext \
        --types node gen/bad.ts) >"$dir/bad.log" 2>&1; then
    echo "FAIL: tsc accepted a message_created event with bot_started data"; exit 1
fi
grep -q "gen/bad.ts" "$dir/bad.log" || { echo "FAIL: tsc failed on bad.ts for another reason:"; cat "$dir/bad.log"; exit 1; }
node "$tsdir/gen/out/answers.js"
BOTSPACE_URL="$base" BOTSPACE_TOKEN="$bot_token" node "$tsdir/gen/out/client.js" | tee "$dir/client.log"
grep -qx "answered $events events" "$dir/client.log" || { echo "FAIL: the docs/api.md client did not read the $events events"; exit 1; }
echo "openapi: redocly lint clean of errors; real answers type-check with openapi-typescript + tsc; the docs/api.md client runs"
checks=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
# GET /bot/gateway is left out: a valid upgrade answers 101 and hands the
# socket to the WebSocket protocol, which an HTTP fuzzer cannot follow
# (schemathesis reports the bodiless 101 as a failure). Its refusals are
# checked above through the vectors, and the gateway by tests/server_gateway.rs.
# POST /bot/getUpdates is left out too: on this manual-clock server a
# generated `timeout` parks the request until the clock moves, past the
# fuzzer's request timeout. Its answers are checked through the vectors
# (tests/vectors/updates.json), and the waiting by tests/server_poll.rs.
run() { # $1 = path regex, $2 = Authorization header value
    timeout 300 schemathesis run docs/openapi.yaml --url "$base" --include-path-regex "$1" \
        -H "Authorization: $2" --checks "$checks" --max-examples "$MAX_EXAMPLES" \
        --request-timeout 10 --no-color || { echo "FAIL: schemathesis found responses outside docs/openapi.yaml on $1"; exit 1; }
}
run '^/bot/(getMe|sendMessage|sendChatAction|editMessageText|deleteMessage)$' "Bot $token"
run '^/admin/' "Admin $secret"
# The operations paths take no credential (the header is ignored).
run '^/(healthz|readyz)$' "Admin $secret"
kill -0 "$pid" 2>/dev/null || { echo "FAIL: the example server died"; cat "$dir/server.log"; exit 1; }
echo "openapi: vectors and schemathesis ($MAX_EXAMPLES examples per operation) pass"
