# workerd configuration of the example: `npm start` (see package.json)
# serves it on 127.0.0.1:$PORT with the Durable Object's storage in
# $STATE_DIR. Module names mirror what wrangler bundles: the example's
# worker.js, and the botspace package's "workerd" entry under the bare name
# `botspace`, its relative imports resolving beside it.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .botspaceWorker),
    # Durable Object storage on local disk; `--directory-path state=DIR`
    # (npm start passes $STATE_DIR) says where.
    (name = "state", disk = (path = ".state", writable = true)),
    # Where the worker's `fetch` (webhook deliveries) may connect: workerd
    # checks the address each name resolves to against this list, so a
    # webhook cannot reach loopback, the private network or link-local
    # addresses (169.254.169.254) through a name.
    (name = "internet", network = (allow = ["public"], tlsOptions = (trustBrowserCas = true))),
  ],
  sockets = [
    # `--socket-addr http=127.0.0.1:PORT` (npm start passes $PORT) overrides this.
    (name = "http", address = "127.0.0.1:8787", http = (), service = "main"),
  ],
);

const botspaceWorker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "botspace", esModule = embed "node_modules/botspace/worker.js"),
    (name = "core.js", esModule = embed "node_modules/botspace/core.js"),
    (name = "botspace.js", esModule = embed "node_modules/botspace/botspace.js"),
    (name = "errors.js", esModule = embed "node_modules/botspace/errors.js"),
    (name = "http.js", esModule = embed "node_modules/botspace/http.js"),
    (name = "slab.js", esModule = embed "node_modules/botspace/slab.js"),
    (name = "storage.js", esModule = embed "node_modules/botspace/storage.js"),
    (name = "botspace_bg.wasm", wasm = embed "node_modules/botspace/botspace_bg.wasm"),
  ],
  # WeakRef (used by the package) exists from 2025-05-05 on.
  compatibilityDate = "2025-05-05",
  durableObjectNamespaces = [
    # enableSql: a SQLite-backed object (ctx.storage.sql, transactionSync),
    # as `new_sqlite_classes` in wrangler.toml.
    (className = "BotspaceDurableObject", uniqueKey = "botspace-edge-worker-example", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  bindings = [
    (name = "BOTSPACE", durableObjectNamespace = "BotspaceDurableObject"),
    (name = "ADMIN_SECRET", fromEnvironment = "ADMIN_SECRET"),
    # More configuration as JSON (limits, say); null when unset. Not
    # BOTSPACE_CONFIG: the example servers take a file's path by that name.
    (name = "BOTSPACE_CONFIG_JSON", fromEnvironment = "BOTSPACE_CONFIG_JSON"),
    # "true" allows `http` webhook URLs / literal private addresses in them.
    (name = "WEBHOOK_ALLOW_HTTP", fromEnvironment = "WEBHOOK_ALLOW_HTTP"),
    (name = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", fromEnvironment = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES"),
  ],
);
