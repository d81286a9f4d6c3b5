// botspace on an edge runtime: a Cloudflare Workers module that serves the
// bot REST API, the host API and the bot gateway from one SQLite-backed
// Durable Object.
//
// Why a Durable Object: exactly one instance may own the database, or two
// isolates would each write their own. The stateless `fetch` below forwards
// every request to that one object.
//
// Persistence: the service's database lives in the object's own storage
// (`durableObjectPageStorage(ctx.storage)`), 2 KiB blocks in a table, read
// on demand. Each commit hands over only the blocks it changed, written in
// one `transactionSync` before the call that committed returns; workerd's
// output gate then holds the response and any gateway frame of that turn
// until the write is durable. So a 200 or an event the bot sees is on disk,
// and a crash leaves the state before or after a commit, never a mix.
//
// Webhooks: the object sends its bots' webhook deliveries with `fetch`;
// workerd's output gate holds each request until the commits before it
// are durable. Retries wait for a Durable Object alarm
// (`ctx.storage.setAlarm`), which fires even after the object was evicted
// from memory: the service tells the object when it next needs the time
// (`webhookSchedule`) and the alarm handler delivers what is due. Which
// addresses `fetch` may reach is the runtime's rule: workerd's `internet`
// network service (workerd.capnp allows only public addresses); on
// Cloudflare, private addresses are out of reach anyway.
//
// Backup and restore are host API methods, answered by the core like every
// other: `POST /admin/exportDatabase`, `POST /admin/importDatabase` and
// `POST /admin/getStorageStats`, behind `Authorization: Admin <secret>` and
// the login throttle (per client: Cloudflare's `CF-Connecting-IP`; workerd
// on its own names no client). This file keeps no credential check of its
// own.
//
// Bindings (see wrangler.toml or workerd.capnp): BOTSPACE (the Durable
// Object namespace), the secret ADMIN_SECRET (16+ characters),
// optionally WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE_ADDRESSES
// ("true" allows `http` webhook URLs and literal private addresses in
// them; both off by default) and BOTSPACE_CONFIG_JSON (more configuration
// as JSON).

import { Service, durableObjectPageStorage, hostAnswer } from 'botspace';

/** The Durable Object that owns the service. */
export class BotspaceDurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    // BOTSPACE_CONFIG_JSON (optional): more configuration as JSON, e.g. limits.
    const extra = env.BOTSPACE_CONFIG_JSON ? JSON.parse(env.BOTSPACE_CONFIG_JSON) : {};
    this.service = new Service(
      {
        ...extra,
        admin_secret: env.ADMIN_SECRET,
        clock: 'system',
        webhook_allow_http: env.WEBHOOK_ALLOW_HTTP === 'true',
        webhook_allow_private_addresses: env.WEBHOOK_ALLOW_PRIVATE_ADDRESSES === 'true',
      },
      {
        storage: durableObjectPageStorage(ctx.storage),
        // The alarm keeps the time of the next retry (and of each attempt's
        // deadline), so deliveries go on after the object is evicted.
        webhookSchedule: (at) => {
          const set = at === null ? ctx.storage.deleteAlarm() : ctx.storage.setAlarm(at);
          Promise.resolve(set).catch((e) => console.error('botspace: the webhook alarm was not set', e));
        },
        // getStorageStats reports, besides the storage's figures, how many
        // alarms fired since the object started.
        hostStats: () => ({ alarms: this.alarms ?? 0 }),
      },
    );
  }

  /** The alarm: deliver what is due, and stay until each delivery is answered. */
  async alarm() {
    this.alarms = (this.alarms ?? 0) + 1;
    await this.service.deliverWebhooks();
  }

  async fetch(request) {
    // Everything is the core's, the host API's backup methods included.
    // Cloudflare names the client (`CF-Connecting-IP`, which it sets on
    // every request): the host API's failed logins are then throttled per
    // client. Without it (workerd on its own) no client is named.
    const peer = request.headers.get('cf-connecting-ip') ?? undefined;
    return this.service.fetch(request, { peer });
  }
}

export default {
  /** The stateless front: every request goes to the one object. */
  async fetch(request, env) {
    if (!env.BOTSPACE) return hostAnswer('storage_error', 'the BOTSPACE Durable Object binding is missing');
    const stub = env.BOTSPACE.get(env.BOTSPACE.idFromName('botspace'));
    return stub.fetch(request);
  },
};
