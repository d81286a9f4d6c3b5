// Compiled with `tsc --noEmit --strict` by package.test.mjs against the
// installed package: every public type is exercised here.
import {
  Service,
  GatewaySession,
  BotspaceError,
  ConfigError,
  DatabaseError,
  StorageError,
  InvalidImageError,
  GatewayRejectedError,
  PanicError,
  init,
  initSync,
  isReady,
  version,
  encodeRequest,
  decodeResponse,
  type ServiceConfig,
  type GatewayOutput,
  type GatewayEvent,
  type Framing,
  type RequestHead,
  type ErrorCode,
  type CloseReason,
  type EventKind,
  type DecodedResponse,
  type ServerWebSocketLike,
  type WebhookRequest,
  type WebhookOutcome,
} from 'botspace';

export async function main(): Promise<void> {
  await init();
  initSync();
  const ready: boolean = isReady();
  const v: string = version();
  const config: ServiceConfig = {
    admin_secret: 'x'.repeat(16),
    clock: 'manual',
    synchronous: 'normal',
    max_body_bytes: 1024,
    limits: { free: { bot: { count: 1, period_ms: 1000, burst: 1 }, group: null } },
  };
  const svc = new Service(config);
  const raw: Uint8Array = svc.handleRequest(encodeRequest('POST', '/bot/getMe', { Authorization: 'Bot x' }));
  const res: DecodedResponse = decodeResponse(raw);
  const status: number = res.status;
  const answers: Array<Uint8Array | Promise<Response>> = svc.handle([{ request: raw }, { request: 'GET / HTTP/1.1\r\n\r\n', peer: '203.0.113.7', atOnce: true, unordered: true }], svc.nowMs());
  const f: Framing = svc.frameRequest(raw);
  if (f.kind === 'complete') {
    const head: RequestHead = f.head;
    const keep: boolean = head.keepAlive && !head.upgrade && !head.expectContinue;
    console.log(f.length, head.length, head.method, head.path, head.httpMinor, head.closeToken, keep);
  }
  const code: ErrorCode = 'rate_limited';
  const reason: CloseReason = 'session_timeout';
  const kind: EventKind = 'message_created';
  console.log(code, reason, kind);
  svc.setWakeHook((botId: string) => console.log(botId));
  svc.setWakeHook(null);
  const response: Response = await svc.fetch(new Request('http://127.0.0.1:8080/bot/getMe', { method: 'POST' }));
  const worker = { fetch: (req: Request) => svc.fetch(req) };
  try {
    const s: GatewaySession = svc.acceptGateway(new Request('http://x/bot/gateway'));
    s.handleTimeout(svc.nowMs());
    for (let o: GatewayOutput | null = s.pollTransmit(); o !== null; o = s.pollTransmit()) {
      if (o.type === 'text') console.log(o.data.length);
      else console.log(o.code, o.reason);
    }
    s.handleText('{"op":"heartbeat"}', svc.nowMs());
    s.handleBinary();
    s.handleClose(1000);
    const ended: boolean = s.close(4008);
    console.log(ended, s.close(1001));
    // @ts-expect-error a host may not close with the library's own codes
    s.close(4001);
    const ev: GatewayEvent | null = s.pollEvent();
    if (ev) console.log(ev.code, ev.reason);
    const d: number | null = s.pollTimeout();
    const closed: boolean = s.closed;
    const ws: ServerWebSocketLike = { send() {}, close() {}, addEventListener() {} };
    svc.attachWebSocket(s, ws);
    s.free();
    console.log(d, closed, s.botId, s.sessionId);
  } catch (e) {
    if (e instanceof GatewayRejectedError) {
      const r: Response = e.toResponse();
      console.log(e.status, e.code, e.description, e.response.length, r.status);
    }
  }
  const image: Uint8Array = svc.exportDatabase();
  svc.importDatabase(image);
  const n: number = svc.gatewayConnections('bot_x') + svc.maxBodyBytes + svc.heartbeatIntervalMs;
  for (const E of [BotspaceError, ConfigError, DatabaseError, StorageError, InvalidImageError, GatewayRejectedError, PanicError]) console.log(E.name);
  try {
    svc.importDatabase(new Uint8Array(10));
  } catch (e) {
    if (e instanceof InvalidImageError) {
      const db: DatabaseError = e;
      console.log(db.status, db.code);
    }
  }
  try {
    new Service('{}');
  } catch (e) {
    if (e instanceof DatabaseError) console.log(e.status);
    if (e instanceof BotspaceError) console.log(e.code);
  }
  // Webhooks sent by the host itself.
  const hooks = new Service({ admin_secret: 'x'.repeat(16), webhook_allow_http: true }, { webhooks: false, webhookSchedule: (at: number | null) => console.log(at) });
  const due: WebhookRequest | null = hooks.pollWebhook();
  if (due !== null) {
    const outcome: WebhookOutcome = due.target.https ? { status: 200, retryAfter: null } : { failed: 'could not connect' };
    hooks.webhookOutcome(due.id, outcome);
    hooks.webhookOutcome(due.id, { timedOut: true }, due.deadline);
    console.log(due.headers['webhook-id'], due.body, due.hostHeader);
  }
  const refused: string | null = hooks.webhookAddressAllowed('127.0.0.1');
  const next: number | null = hooks.webhookTimeout();
  await hooks.deliverWebhooks();
  svc.free();
  console.log(ready, v, status, answers, response, worker, n, refused, next);
}
