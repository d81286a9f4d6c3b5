// Benchmark baseline only (wasm/bench/storage.mjs): the persistence this
// example used before page storage — the whole database in module memory,
// saved after every write as an exportDatabase() image in 64 KiB storage
// values. Not for use: a save of more than 128 chunks is several puts, so it
// is not atomic, and it writes the whole database per write.
import { Service } from 'botspace';

const CHUNK = 64 * 1024;
const META = 'botspace/meta';
const chunkKey = (i) => `botspace/chunk/${i}`;
const READ_ONLY = new Set(['/bot/getMe', '/admin/getChatHistory', '/admin/getStats', '/admin/getStorageStats', '/admin/exportDatabase']);

export class ExportPerWriteObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    this.stats = { commits: 0, pages: 0, bytes: 0, reads: 0 };
    // POST /admin/getStorageStats reports what the saves wrote (under `host`).
    this.service = new Service(
      { admin_secret: env.ADMIN_SECRET, clock: 'system', limits: { free: {}, standard: {}, official: {} } },
      { hostStats: () => this.stats },
    );
    ctx.blockConcurrencyWhile(async () => {
      const meta = await ctx.storage.get(META);
      if (!meta) return;
      const keys = Array.from({ length: meta.chunks }, (_, i) => chunkKey(i));
      const image = new Uint8Array(meta.length);
      let pos = 0;
      for (let i = 0; i < keys.length; i += 128) {
        const got = await ctx.storage.get(keys.slice(i, i + 128));
        for (const k of keys.slice(i, i + 128)) {
          const part = new Uint8Array(got.get(k));
          image.set(part, pos);
          pos += part.byteLength;
        }
      }
      this.service.importDatabase(image);
    });
  }

  async save() {
    const image = this.service.exportDatabase();
    const names = [];
    const entries = {};
    for (let i = 0; i * CHUNK < image.length; i++) {
      entries[chunkKey(i)] = image.slice(i * CHUNK, (i + 1) * CHUNK);
      names.push(chunkKey(i));
    }
    for (let i = 0; i < names.length; i += 128) {
      const batch = {};
      for (const k of names.slice(i, i + 128)) batch[k] = entries[k];
      await this.ctx.storage.put(batch);
      this.stats.commits++;
    }
    await this.ctx.storage.put(META, { chunks: names.length, length: image.length });
    this.stats.commits++;
    this.stats.pages += names.length;
    this.stats.bytes += image.length;
  }

  async fetch(request) {
    const url = new URL(request.url);
    // Every request is the core's (an import through the host API too);
    // a write that succeeded is saved.
    const response = await this.service.fetch(request);
    if (request.method === 'POST' && response.status === 200 && !READ_ONLY.has(url.pathname)) await this.save();
    return response;
  }
}

export default {
  async fetch(request, env) {
    return env.EXPORT_PER_WRITE.get(env.EXPORT_PER_WRITE.idFromName('botspace')).fetch(request);
  },
};
