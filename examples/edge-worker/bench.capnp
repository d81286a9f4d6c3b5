# Benchmark only (wasm/bench/storage.mjs): the example worker (page
# storage) on socket `pages` and the old export-per-write persistence
# (bench-export-worker.js) on socket `export`, on the same workerd.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "pages", worker = .pagesWorker),
    (name = "export", worker = .exportWorker),
    (name = "state", disk = (path = ".state", writable = true)),
  ],
  sockets = [
    (name = "pages", address = "127.0.0.1:8788", http = (), service = "pages"),
    (name = "export", address = "127.0.0.1:8789", http = (), service = "export"),
  ],
);

const pagesWorker :Workerd.Worker = (
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
  compatibilityDate = "2025-05-05",
  durableObjectNamespaces = [
    (className = "BotspaceDurableObject", uniqueKey = "botspace-bench-pages", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  bindings = [
    (name = "BOTSPACE", durableObjectNamespace = "BotspaceDurableObject"),
    # No rate limits: the benchmark writes as fast as it can, as the baseline does.
    (name = "BOTSPACE_CONFIG_JSON", text = "{\"limits\":{\"free\":{},\"standard\":{},\"official\":{}}}"),
    (name = "ADMIN_SECRET", fromEnvironment = "ADMIN_SECRET"),
  ],
);

const exportWorker :Workerd.Worker = (
  modules = [
    (name = "bench-export-worker.js", esModule = embed "bench-export-worker.js"),
    (name = "botspace", esModule = embed "node_modules/botspace/worker.js"),
    (name = "core.js", esModule = embed "node_modules/botspace/core.js"),
    (name = "botspace.js", esModule = embed "node_modules/botspace/botspace.js"),
    (name = "errors.js", esModule = embed "node_modules/botspace/errors.js"),
    (name = "http.js", esModule = embed "node_modules/botspace/http.js"),
    (name = "slab.js", esModule = embed "node_modules/botspace/slab.js"),
    (name = "storage.js", esModule = embed "node_modules/botspace/storage.js"),
    (name = "botspace_bg.wasm", wasm = embed "node_modules/botspace/botspace_bg.wasm"),
  ],
  compatibilityDate = "2025-05-05",
  durableObjectNamespaces = [
    (className = "ExportPerWriteObject", uniqueKey = "botspace-bench-export", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  bindings = [
    (name = "EXPORT_PER_WRITE", durableObjectNamespace = "ExportPerWriteObject"),
    (name = "ADMIN_SECRET", fromEnvironment = "ADMIN_SECRET"),
  ],
);
