// The JavaScript faces carry bytes: every HTTP status, close code and
// route is the core's (exported by the module: routeKind, hostAnswer,
// closeCode, peerCloseCode, hostFailureClose, upgradeStatus, requestCap,
// errorStatus). This fails when the package's core.js or worker.js, or the
// edge worker's worker.js, regains a status or close-code literal, a
// limit of the core's, or compares a path itself. It proves first that it catches what those
// files once held.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const ROOT = new URL('../../', import.meta.url);
const FACES = ['wasm/js/core.js', 'wasm/js/worker.js', 'examples/edge-worker/worker.js'];

/** The code without its comments (whole-line and trailing `//`, and block comments). */
function code(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .split('\n')
    .map((l) => (/^\s*\/\//.test(l) ? '' : l.replace(/\s\/\/\s.*$/, '')))
    .join('\n');
}

const RULES = [
  // An HTTP status: a `status` compared with or set to a number, or any
  // number from 100 to 599 on its own.
  ['an HTTP status literal', /\bstatus\s*(?:[=!]==?|:|[<>]=?)\s*\d/],
  ['an HTTP status literal', /(?<![\w.$])[1-5]\d\d(?![\w.])/],
  // A close code: any number from 1000 to 4999 on its own.
  ['a close-code literal', /(?<![\w.$])[1-4]\d\d\d(?![\w.])/],
  // A limit of the core's (the request cap was 16384 + ...): any number
  // of five digits or more.
  ['a limit literal', /(?<![\w.$])\d{5,}(?![\w.])/],
  // A path: a string naming one of the service's paths, or a comparison
  // of a URL's path.
  ['a path literal', /['"`]\/(?:bot|admin|_botspace|healthz|readyz)\b/],
  ['a path comparison', /\bpathname\s*(?:[=!]==?|\.startsWith|\.endsWith|\.includes|\.match)/],
];

function offences(text) {
  const src = code(text);
  const out = [];
  src.split('\n').forEach((line, i) => {
    for (const [what, re] of RULES) if (re.test(line)) out.push(`${i + 1}: ${what}: ${line.trim()}`);
  });
  return out;
}

test('the check catches the literals and path comparisons the faces once held', () => {
  const old = [
    "if (url.pathname === '/bot/gateway' && request.method === 'GET') return up;",
    "const response = out === null ? new Response(null, { status: 499 }) : fetchResponse(out);",
    "ws.close(1011, 'internal_error');",
    '((code >= 1000 && code <= 1003) || (code >= 3000 && code <= 4999))',
    'return Math.max(64 << 20, 16384 + 4 * this.#maxBody + (1 << 20));',
    "if (url.pathname.startsWith('/_botspace/')) return this.hostTools(request, url);",
    "return new Response(null, { status: 101, webSocket: client });",
    "if (res.status === 0) return { failure: 'hidden_redirect' };",
    "return new Response('missing', { status: 500 });",
  ];
  for (const line of old) assert.notDeepEqual(offences(line), [], line);
  // Comments may name them: they say why, and carry no policy.
  assert.deepEqual(offences('// closes with 1001 server_shutdown, never 1011\n/* a 499 */ const x = 1;'), []);
  assert.deepEqual(offences('const MAX_COPY = 1 << 30; setTimeout(f, Math.min(d, 2 ** 31 - 1));'), []);
});

for (const face of FACES) {
  test(`${face} holds no HTTP status or close-code literal and compares no path`, () => {
    assert.deepEqual(offences(readFileSync(new URL(face, ROOT), 'utf8')), []);
  });
}
