// HTTP/1.1 bytes: encoding requests, decoding responses, and turning them
// into fetch `Response`s. No dependency on the WebAssembly module.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function toBytes(input, what = 'request') {
  if (input instanceof Uint8Array) return input;
  if (typeof input === 'string') return encoder.encode(input);
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  throw new TypeError(`${what} must be a Uint8Array, ArrayBuffer or string`);
}

/**
 * Encodes one HTTP/1.1 request. `body` may be an object (sent as JSON),
 * a string or bytes. Adds `Host`, `Content-Type: application/json` (for a
 * body, unless given) and `Content-Length`.
 */
export function encodeRequest(method, path, headers = {}, body = undefined) {
  let bodyBytes = null;
  if (body !== undefined && body !== null) {
    bodyBytes = typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer || ArrayBuffer.isView(body)
      ? toBytes(body, 'body')
      : encoder.encode(JSON.stringify(body));
  }
  const entries = headers instanceof Headers || headers instanceof Map ? [...headers.entries()] : Object.entries(headers);
  const lower = new Set(entries.map(([k]) => k.toLowerCase()));
  let head = `${method} ${path} HTTP/1.1\r\n`;
  if (!lower.has('host')) head += 'Host: botspace\r\n';
  for (const [k, v] of entries) head += `${k}: ${v}\r\n`;
  if (bodyBytes) {
    if (!lower.has('content-type')) head += 'Content-Type: application/json\r\n';
    if (!lower.has('content-length')) head += `Content-Length: ${bodyBytes.length}\r\n`;
  }
  head += '\r\n';
  const headBytes = encoder.encode(head);
  if (!bodyBytes) return headBytes;
  const out = new Uint8Array(headBytes.length + bodyBytes.length);
  out.set(headBytes, 0);
  out.set(bodyBytes, headBytes.length);
  return out;
}

function indexOfHeadEnd(bytes) {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) return i;
  }
  return -1;
}

/**
 * Decodes a complete HTTP/1.1 response from handleRequest: status, reason,
 * headers (lower-case names) and body, with `text()` and `json()` helpers.
 * Returns a string saying why when `bytes` is not a response (the public
 * `decodeResponse` in core.js throws it as a BotspaceError).
 */
export function parseResponse(bytes) {
  bytes = toBytes(bytes, 'response');
  const end = indexOfHeadEnd(bytes);
  if (end < 0) return 'not an HTTP response: no end of headers';
  const lines = decoder.decode(bytes.subarray(0, end)).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) ?(.*)$/.exec(lines[0]);
  if (!m) return `not an HTTP response: ${lines[0]}`;
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = bytes.subarray(end + 4);
  return {
    status: Number(m[1]),
    statusText: m[2],
    headers,
    body,
    text: () => decoder.decode(body),
    json: () => JSON.parse(decoder.decode(body)),
  };
}

/** A response from the module (always well-formed) as a fetch `Response`. */
export function toFetchResponse(bytes) {
  const r = parseResponse(bytes);
  const headers = new Headers();
  for (const [k, v] of Object.entries(r.headers)) headers.set(k, v);
  // Copy the body out of wasm memory's view (it is already a copy, but the
  // Response must own a plain ArrayBuffer-backed array).
  return new Response(r.body.length ? r.body.slice() : null, { status: r.status, statusText: r.statusText, headers });
}

