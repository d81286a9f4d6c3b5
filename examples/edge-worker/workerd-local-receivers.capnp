# The example's configuration for webhook receivers on this machine or its
# network (tests, local development): the same worker as workerd.capnp,
# with the `internet` network service also allowing private and loopback
# addresses. Run it with WEBHOOK_ALLOW_HTTP=true and
# WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true:
#   workerd serve workerd-local-receivers.capnp --directory-path state=DIR
using Workerd = import "/workerd/workerd.capnp";
using Example = import "workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = Example.botspaceWorker),
    (name = "state", disk = (path = ".state", writable = true)),
    (name = "internet", network = (allow = ["public", "private", "local"], tlsOptions = (trustBrowserCas = true))),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:8787", http = (), service = "main"),
  ],
);
