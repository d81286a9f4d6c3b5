// Serves the browser example on loopback: the page's files, and the botspace
// package under /botspace/ (wasm/pkg, or node_modules/botspace).
//
//   node serve.mjs [port]        # then open the printed URL
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { existsSync, realpathSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.png': 'image/png',
  '.ts': 'text/plain; charset=utf-8',
};

function packageDir() {
  if (process.env.BOTSPACE_PKG) return resolve(process.env.BOTSPACE_PKG);
  const linked = join(HERE, 'node_modules', 'botspace');
  if (existsSync(join(linked, 'package.json'))) return realpathSync(linked);
  return resolve(HERE, '../../wasm/pkg');
}

/** Resolves `rel` inside `root`, refusing anything that escapes it. */
function inside(root, rel) {
  const p = normalize(join(root, rel));
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep) ? p : null;
}

export function start({ port = 0, host = '127.0.0.1' } = {}) {
  const pkg = packageDir();
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://localhost');
      let path = decodeURIComponent(url.pathname);
      let file;
      if (path.startsWith('/botspace/')) file = inside(pkg, path.slice('/botspace/'.length));
      else file = inside(HERE, path === '/' ? 'index.html' : path.slice(1));
      if (!file || file.includes(`${sep}node_modules${sep}`) && !file.startsWith(pkg)) throw Object.assign(new Error('forbidden'), { status: 403 });
      const info = await stat(file).catch(() => null);
      if (!info || !info.isFile()) throw Object.assign(new Error('not found'), { status: 404 });
      const body = await readFile(file);
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'content-length': body.length,
        'cache-control': 'no-store',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (e) {
      res.writeHead(e.status ?? 500, { 'content-type': 'text/plain' });
      res.end(e.message);
    }
  });
  return new Promise((resolveStart, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: p } = server.address();
      resolveStart({ url: `http://${host}:${p}/`, close: () => new Promise((r) => server.close(r)), server });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { url } = await start({ port: Number(process.argv[2] ?? 8000) });
  console.log(`botspace browser example: ${url}`);
}
