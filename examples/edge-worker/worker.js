// botspace on an edge runtime: a Cloudflare Workers module that serves the
// bot REST API, the host API and the bot gateway, with the whole state kept
// in a Durable Object's storage through exportDatabase / importDatabase.
//
// Why a Durable Object: the state is one SQLite image in memory. Exactly one
// object instance may own it, or two isolates would each write their own
// copy. The stateless `fetch` below forwards every request to that one
// object, which restores the image when it starts and saves it after every
// request that changed something, before answering — so a 200 is durable.
//
// Bindings (see wrangler.toml): BOTSPACE (the Durable Object namespace) and
// the secret ADMIN_SECRET (16+ characters).

import { Service } from 'botspace';

/** Storage values are limited in size (128 KiB on Cloudflare): chunk the image. */
const CHUNK = 64 * 1024;
const META = 'botspace/meta';
const chunkKey = (i) => `botspace/chunk/${i}`;

/** Host and bot methods that never change the database. */
const READ_ONLY = new Set([
  '/bot/getMe',
  '/admin/getBot',
  '/admin/getChat',
  '/admin/getChatHistory',
  '/admin/getChatActions',
  '/admin/getUpdates',
  '/admin/getStats',
  // The admin console's reads (getOperationalToken writes an audit entry).
  '/admin/listBots',
  '/admin/listUsers',
  '/admin/listChats',
  '/admin/getChatMembers',
  '/admin/getBotActivity',
  '/admin/getAuditLog',
]);

/** Loads the image saved by `saveImage`, or null. */
export async function loadImage(storage) {
  const meta = await storage.get(META);
  if (!meta) return null;
  const keys = Array.from({ length: meta.chunks }, (_, i) => chunkKey(i));
  const image = new Uint8Array(meta.length);
  let pos = 0;
  for (let i = 0; i < keys.length; i += 128) {
    const got = await storage.get(keys.slice(i, i + 128));
    for (const k of keys.slice(i, i + 128)) {
      const part = got.get(k);
      if (!part) throw new Error(`botspace state is incomplete: ${k} is missing`);
      image.set(new Uint8Array(part), pos);
      pos += part.byteLength;
    }
  }
  if (pos !== meta.length) throw new Error('botspace state is incomplete');
  return image;
}

/** Saves an image in chunks; the meta record is written last. */
export async function saveImage(storage, image, previousChunks = 0) {
  const chunks = Math.ceil(image.length / CHUNK);
  const entries = {};
  for (let i = 0; i < chunks; i++) entries[chunkKey(i)] = image.slice(i * CHUNK, (i + 1) * CHUNK);
  const names = Object.keys(entries);
  for (let i = 0; i < names.length; i += 128) {
    const batch = {};
    for (const k of names.slice(i, i + 128)) batch[k] = entries[k];
    await storage.put(batch);
  }
  await storage.put(META, { chunks, length: image.length });
  const stale = [];
  for (let i = chunks; i < previousChunks; i++) stale.push(chunkKey(i));
  if (stale.length) await storage.delete(stale);
  return chunks;
}

/** The Durable Object that owns the service. */
export class BotspaceDurableObject {
  constructor(state, env) {
    this.state = state;
    this.env = env;
    this.service = null;
    this.chunks = 0;
    this.saving = Promise.resolve();
    // Restore before any request is delivered.
    state.blockConcurrencyWhile(async () => {
      this.service = new Service({ admin_secret: env.ADMIN_SECRET, clock: 'system' });
      const image = await loadImage(state.storage);
      if (image) {
        this.service.importDatabase(image);
        this.chunks = Math.ceil(image.length / CHUNK);
      }
    });
  }

  async fetch(request) {
    const url = new URL(request.url);
    const response = await this.service.fetch(request);
    if (request.method === 'POST' && response.status === 200 && !READ_ONLY.has(url.pathname)) {
      await this.save();
    }
    return response;
  }

  /** Saves the current image (one save at a time, in order). */
  save() {
    this.saving = this.saving.then(async () => {
      this.chunks = await saveImage(this.state.storage, this.service.exportDatabase(), this.chunks);
    });
    return this.saving;
  }
}

export default {
  /** The stateless front: every request goes to the one object. */
  async fetch(request, env) {
    if (!env.BOTSPACE) return new Response('the BOTSPACE Durable Object binding is missing', { status: 500 });
    const stub = env.BOTSPACE.get(env.BOTSPACE.idFromName('botspace'));
    return stub.fetch(request);
  },
};
