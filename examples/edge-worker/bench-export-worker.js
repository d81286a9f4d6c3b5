// Benchmark baseline only (wasm/bench/storage.mjs): the persistence this
// example used before page storage — the whole database in module memory,
// saved after every write as an exportDatabase() image in 64 KiB storage
// values. Not for use: a save of more than 128 chunks is several puts, so it
// is not atomic, and it writes the whole database per write.
import { Service } from 'botspace';

const CHUNK = 64 * 1024;
const META = 'botspace/meta';
const chunkKey = (i) => `botspace/chunk/${i}`;
const READ_ONLY = new Set(['/bot/getMe', '/admin/getChatHistory', '/admin/getStats']);

export class ExportPerWriteObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    this.service = new Service({ admin_secret: env.ADMIN_SECRET, clock: 'system', limits: { free: {}, standard: {}, official: {} } });
    this.stats = { commits: 0, pages: 0, bytes: 0, reads: 0 };
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
    if (url.pathname === '/_botspace/stats') {
      return Response.json({ ...this.stats, memoryBytes: this.service.memoryBytes() });
    }
    if (url.pathname === '/_botspace/import') {
      this.service.importDatabase(new Uint8Array(await request.arrayBuffer()));
      await this.save();
      return Response.json({ ok: true, result: true });
    }
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
