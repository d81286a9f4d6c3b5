// Page storages: where a Service's database lives when it is given
// `{ storage }` (see docs/wasm.md, "Persistence"). The module's
// `botspace-pages` VFS (wasm/src/pages.rs) reads 2 KiB blocks on demand and
// hands each commit's changed blocks to `commit(pages, size)` in one call,
// before the call that committed returns. Each storage below writes such a
// batch all-or-nothing:
//
// - durableObjectPageStorage: SQLite-backed Durable Object storage, one
//   `transactionSync` (workerd's output gate holds every response and
//   WebSocket message of the turn until it is durable);
// - filePageStorage (Node.js): a redo log, fsynced, then the pages;
// - indexedDBPageStorage (browsers): one IndexedDB transaction; commit
//   returns a promise, and the Service lets nothing out before it settles;
// - MemoryPageStorage: a Map, for tests and throwaway services.

import { BotspaceError } from './errors.js';

/** Bytes per block, as the module's VFS uses them. */
export const PAGE_BLOCK_BYTES = 2048;

function checkPages(pages, size) {
  if (!Array.isArray(pages) || !Number.isSafeInteger(size) || size < 0) {
    throw new TypeError('commit(pages, size) takes an array of [index, Uint8Array] and a byte count');
  }
}

/** Blocks in a Map. Not durable: for tests and throwaway services. */
export class MemoryPageStorage {
  constructor() {
    this.blocks = new Map();
    this.bytes = 0;
  }
  size() {
    return this.bytes;
  }
  read(index) {
    return this.blocks.get(index);
  }
  commit(pages, size) {
    checkPages(pages, size);
    for (const [i, data] of pages) this.blocks.set(i, data);
    for (const i of this.blocks.keys()) if (i * PAGE_BLOCK_BYTES >= size) this.blocks.delete(i);
    this.bytes = size;
  }
}

/**
 * A SQLite-backed Durable Object's storage (`ctx.storage`, with
 * `new_sqlite_classes` / `enableSql`). Blocks are rows of a table of their
 * own; reads and the commit are synchronous `ctx.storage.sql` calls, and a
 * commit is one `transactionSync`, so a crash keeps all of it or none.
 */
export function durableObjectPageStorage(storage, table = 'botspace_pages') {
  if (!storage || !storage.sql || typeof storage.transactionSync !== 'function') {
    throw new BotspaceError('durableObjectPageStorage needs a SQLite-backed Durable Object storage (ctx.storage with .sql)', {
      code: 'invalid_config',
    });
  }
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(table)) throw new TypeError('the table name must be an SQL identifier');
  const sql = storage.sql;
  sql.exec(`CREATE TABLE IF NOT EXISTS ${table} (n INTEGER PRIMARY KEY, data BLOB NOT NULL)`);
  sql.exec(`CREATE TABLE IF NOT EXISTS ${table}_size (one INTEGER PRIMARY KEY CHECK (one = 1), bytes INTEGER NOT NULL)`);
  return {
    size() {
      const rows = sql.exec(`SELECT bytes FROM ${table}_size WHERE one = 1`).toArray();
      return rows.length ? Number(rows[0].bytes) : 0;
    },
    read(index) {
      const rows = sql.exec(`SELECT data FROM ${table} WHERE n = ?`, index).toArray();
      return rows.length ? new Uint8Array(rows[0].data) : undefined;
    },
    commit(pages, size) {
      checkPages(pages, size);
      storage.transactionSync(() => {
        for (const [i, data] of pages) sql.exec(`INSERT OR REPLACE INTO ${table} (n, data) VALUES (?, ?)`, i, data);
        sql.exec(`DELETE FROM ${table} WHERE n >= ?`, Math.ceil(size / PAGE_BLOCK_BYTES));
        sql.exec(`INSERT OR REPLACE INTO ${table}_size (one, bytes) VALUES (1, ?)`, size);
      });
    },
  };
}

/**
 * A file in Node.js (`path`), written through a redo log (`path + '.log'`):
 * a commit appends nothing to the database file before the whole batch is
 * in the log and fsynced, with a checksum; then the pages go into the file
 * (fsynced) and the log is emptied. Opening replays a complete log and
 * drops a torn one, so a crash at any point leaves the state before or
 * after the commit.
 */
export function filePageStorage(path) {
  const fs = globalThis.process?.getBuiltinModule?.('node:fs');
  if (!fs) throw new BotspaceError('filePageStorage needs Node.js 20.16 or later', { code: 'invalid_config' });
  const logPath = `${path}.log`;
  const fd = fs.openSync(path, fs.existsSync(path) ? 'r+' : 'w+');
  let bytes = 0;
  const readHeader = () => {
    const st = fs.fstatSync(fd);
    if (st.size < 8) return 0;
    const b = Buffer.alloc(8);
    fs.readSync(fd, b, 0, 8, 0);
    return Number(b.readBigUInt64LE(0));
  };
  // File layout: 8 bytes of logical size, then block i at 8 + i * 2048.
  const apply = (pages, size) => {
    for (const [i, data] of pages) fs.writeSync(fd, data, 0, data.length, 8 + i * PAGE_BLOCK_BYTES);
    const h = Buffer.alloc(8);
    h.writeBigUInt64LE(BigInt(size), 0);
    fs.writeSync(fd, h, 0, 8, 0);
    fs.ftruncateSync(fd, 8 + Math.ceil(size / PAGE_BLOCK_BYTES) * PAGE_BLOCK_BYTES);
    fs.fsyncSync(fd);
  };
  // Log layout: [u32 count][u64 size] then count × ([u32 index][u32 len][bytes]), then [u32 checksum]["DONE"].
  const checksum = (buf, end) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < end; i++) h = Math.imul(h ^ buf[i], 0x01000193) >>> 0;
    return h;
  };
  const replay = () => {
    if (!fs.existsSync(logPath)) return;
    const log = fs.readFileSync(logPath);
    const ok =
      log.length >= 20 &&
      log.toString('latin1', log.length - 4) === 'DONE' &&
      log.readUInt32LE(log.length - 8) === checksum(log, log.length - 8);
    if (ok) {
      const count = log.readUInt32LE(0);
      const size = Number(log.readBigUInt64LE(4));
      const pages = [];
      let at = 12;
      for (let k = 0; k < count; k++) {
        const i = log.readUInt32LE(at);
        const len = log.readUInt32LE(at + 4);
        pages.push([i, log.subarray(at + 8, at + 8 + len)]);
        at += 8 + len;
      }
      apply(pages, size);
    }
    // A torn log is a commit that never happened: the file is the state before it.
    fs.rmSync(logPath, { force: true });
  };
  replay();
  bytes = readHeader();
  return {
    size() {
      return bytes;
    },
    read(index) {
      if (index * PAGE_BLOCK_BYTES >= bytes) return undefined;
      const b = new Uint8Array(PAGE_BLOCK_BYTES);
      fs.readSync(fd, b, 0, PAGE_BLOCK_BYTES, 8 + index * PAGE_BLOCK_BYTES);
      return b;
    },
    commit(pages, size) {
      checkPages(pages, size);
      let total = 12 + 8;
      for (const [, data] of pages) total += 8 + data.length;
      const log = Buffer.alloc(total);
      log.writeUInt32LE(pages.length, 0);
      log.writeBigUInt64LE(BigInt(size), 4);
      let at = 12;
      for (const [i, data] of pages) {
        log.writeUInt32LE(i, at);
        log.writeUInt32LE(data.length, at + 4);
        log.set(data, at + 8);
        at += 8 + data.length;
      }
      log.writeUInt32LE(checksum(log, at), at);
      log.write('DONE', at + 4, 'latin1');
      const lfd = fs.openSync(logPath, 'w');
      try {
        fs.writeSync(lfd, log, 0, log.length, 0);
        fs.fsyncSync(lfd);
      } finally {
        fs.closeSync(lfd);
      }
      // The commit point is the fsynced log; the rest is redone on open if cut short.
      apply(pages, size);
      fs.rmSync(logPath, { force: true });
      bytes = size;
    },
    close() {
      fs.closeSync(fd);
    },
  };
}

/**
 * IndexedDB in a browser: database `name`, store `blocks`. Opening loads
 * every block into memory (IndexedDB has no synchronous read, and SQLite
 * reads synchronously), so the database must fit in memory here; each
 * commit is one `readwrite` transaction whose completion the Service
 * awaits before any response or gateway frame of that commit leaves.
 */
export async function indexedDBPageStorage(name = 'botspace') {
  const idb = globalThis.indexedDB;
  if (!idb) throw new BotspaceError('indexedDBPageStorage needs IndexedDB', { code: 'invalid_config' });
  const db = await new Promise((resolve, reject) => {
    const req = idb.open(name, 1);
    req.onupgradeneeded = () => req.result.createObjectStore('blocks');
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
  const blocks = new Map();
  let bytes = 0;
  await new Promise((resolve, reject) => {
    const tx = db.transaction('blocks', 'readonly');
    const store = tx.objectStore('blocks');
    const cur = store.openCursor();
    cur.onsuccess = () => {
      const c = cur.result;
      if (!c) return;
      if (c.key === 'size') bytes = c.value;
      else blocks.set(c.key, new Uint8Array(c.value));
      c.continue();
    };
    tx.oncomplete = resolve;
    tx.onerror = () => reject(tx.error);
  });
  return {
    size() {
      return bytes;
    },
    read(index) {
      return blocks.get(index);
    },
    commit(pages, size) {
      checkPages(pages, size);
      const tx = db.transaction('blocks', 'readwrite', { durability: 'strict' });
      const store = tx.objectStore('blocks');
      for (const [i, data] of pages) {
        blocks.set(i, data);
        store.put(data, i);
      }
      const first = Math.ceil(size / PAGE_BLOCK_BYTES);
      for (const i of [...blocks.keys()]) {
        if (i >= first) {
          blocks.delete(i);
          store.delete(i);
        }
      }
      store.put(size, 'size');
      bytes = size;
      return new Promise((resolve, reject) => {
        tx.oncomplete = () => resolve();
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error ?? new Error('the IndexedDB transaction was aborted'));
      });
    },
    close() {
      db.close();
    },
  };
}
