// The gateway at the level edge runtimes use: accept an upgrade request,
// whole text messages in and out, poll(now), close codes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, world, upgradeRequest, texts, FakeSocket, round } from './helpers.mjs';

const tick = () => new Promise((r) => setTimeout(r, 0));

test('hello, replay, live event, ack, heartbeat', async () => {
  const w = world();
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  assert.ok(s instanceof bs.GatewaySession);
  assert.equal(s.botId, w.botInfo.id);
  assert.match(s.sessionId, /^gws_/);
  assert.equal(s.closed, false);
  assert.equal(s.pollTimeout(), w.svc.nowMs() + 2 * 41250 + 1, 'the heartbeat deadline, from the accept time');
  assert.equal(s.pollEvent(), null);
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 1);

  const first = texts(round(s));
  assert.equal(first[0].op, 'hello');
  assert.equal(first[0].session_id, s.sessionId);
  assert.equal(first[0].heartbeat_interval_ms, 41250);
  assert.deepEqual(first[0].bot, w.ok('/bot/getMe', undefined, w.bot(w.token)));
  assert.equal(first[0].replay_from, 1);
  assert.equal(first[0].replay_truncated, false);
  // startBot gave the bot its first event: replayed after hello.
  assert.equal(first.length, 2);
  assert.deepEqual([first[1].op, first[1].seq, first[1].type], ['event', 1, 'bot_started']);
  assert.deepEqual(round(s), [], 'nothing new');

  // A human writes; the wake hook fires; the bot polls and gets the event.
  const woken = [];
  w.svc.setWakeHook((id) => woken.push(id));
  const sent = w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'hi bot' });
  await tick();
  assert.deepEqual(woken, [w.botInfo.id]);
  const ev = texts(round(s));
  assert.equal(ev.length, 1);
  assert.equal(ev[0].op, 'event');
  assert.equal(ev[0].seq, 2);
  assert.equal(ev[0].type, 'message_created');
  assert.equal(ev[0].data.message.message_id, sent.message_id);
  assert.equal(ev[0].data.message.text, 'hi bot');

  s.handleText(JSON.stringify({ op: 'ack', seq: 2 }));
  assert.deepEqual(round(s), []);
  s.handleText('{"op":"heartbeat"}');
  assert.deepEqual(texts(round(s)), [{ op: 'heartbeat_ack' }]);
  const hb = w.svc.nowMs();
  assert.equal(s.pollTimeout(), hb + 2 * 41250 + 1);
  s.free();
  s.free();
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
});

test('replay after reconnect resumes after the last ack; ?after=N replays from N+1', () => {
  const w = world();
  let s = w.svc.acceptGateway(upgradeRequest(w.token));
  round(s);
  s.handleText('{"op":"ack","seq":1}');
  s.free();
  // Events while disconnected are kept and replayed.
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'while away 1' });
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'while away 2' });
  s = w.svc.acceptGateway(upgradeRequest(w.token));
  let out = texts(round(s));
  assert.equal(out[0].op, 'hello');
  assert.equal(out[0].replay_from, 2);
  assert.deepEqual(out.slice(1).map((e) => [e.seq, e.data.message.text]), [[2, 'while away 1'], [3, 'while away 2']]);
  s.free(); // no ack: replayed again
  s = w.svc.acceptGateway(upgradeRequest(w.token));
  out = texts(round(s));
  assert.deepEqual(out.slice(1).map((e) => e.seq), [2, 3]);
  s.handleText('{"op":"ack","seq":3}');
  s.free();
  s = w.svc.acceptGateway(upgradeRequest(w.token));
  out = texts(round(s));
  assert.equal(out.length, 1);
  assert.equal(out[0].replay_from, 4);
  s.free();
  s = w.svc.acceptGateway(upgradeRequest(w.token, '?after=0'));
  out = texts(round(s));
  assert.deepEqual(out.slice(1).map((e) => e.seq), [1, 2, 3]);
  s.free();
});

test('token rotation closes open sessions with 4004; the old token is refused', async () => {
  const w = world();
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  round(s);
  const woken = [];
  w.svc.setWakeHook((id) => woken.push(id));
  const { token: fresh } = w.ok('/admin/rotateBotToken', { bot_id: w.botInfo.id });
  await tick();
  assert.deepEqual(woken, [w.botInfo.id], 'rotation wakes the bot so sessions learn at once');
  assert.deepEqual(round(s), [{ type: 'close', code: 4004, reason: 'authentication_failed' }]);
  assert.equal(s.closed, true);
  assert.equal(s.pollTimeout(), null);
  assert.deepEqual(s.pollEvent(), { type: 'closed', code: 4004, reason: 'authentication_failed' });
  assert.equal(s.pollEvent(), null, 'reported once');
  assert.deepEqual(round(s), [], 'nothing after the close');
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0, 'a closed session frees its slot');
  assert.throws(() => w.svc.acceptGateway(upgradeRequest(w.token)), (e) => {
    assert.ok(e instanceof bs.GatewayRejectedError);
    assert.ok(e instanceof bs.BotspaceError);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_token');
    assert.equal(bs.decodeResponse(e.response).json().error, 'invalid_token');
    return true;
  });
  const again = w.svc.acceptGateway(upgradeRequest(fresh));
  assert.equal(texts(round(again))[0].op, 'hello');
  again.free();
  s.free();
});

test('suspension closes with 4004 and refuses new sessions with 403', () => {
  const w = world();
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  round(s);
  w.ok('/admin/updateBot', { bot_id: w.botInfo.id, status: 'suspended' });
  assert.deepEqual(round(s), [{ type: 'close', code: 4004, reason: 'authentication_failed' }]);
  assert.throws(() => w.svc.acceptGateway(upgradeRequest(w.token)), (e) => e.status === 403 && e.code === 'bot_suspended');
});

test('bad payloads close with 4001', () => {
  const w = world();
  for (const send of [
    (s) => s.handleText('not json'),
    (s) => s.handleText('{"op":"dance"}'),
    (s) => s.handleText('{"op":"ack","seq":"x"}'),
    (s) => s.handleText('{"op":"ack","seq":999}'),
    (s) => s.handleText('[]'),
    (s) => s.handleBinary(),
  ]) {
    const s = w.svc.acceptGateway(upgradeRequest(w.token));
    round(s);
    send(s);
    assert.deepEqual(round(s), [{ type: 'close', code: 4001, reason: 'invalid_payload' }]);
    assert.equal(s.closed, true);
    s.handleText('{"op":"heartbeat"}');
    assert.deepEqual(round(s), [], 'a closed session ignores input');
    s.free();
  }
  assert.throws(() => w.svc.acceptGateway(upgradeRequest(w.token)).handleText(42), TypeError);
});

test('no heartbeat for two intervals closes with 4009 (manual clock)', () => {
  const w = world({ heartbeat_interval_ms: 1000 });
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  const t0 = w.svc.nowMs();
  assert.equal(texts(round(s, t0))[0].heartbeat_interval_ms, 1000);
  const deadline = s.pollTimeout();
  assert.ok(deadline >= t0 + 2000 && deadline <= t0 + 2001, `deadline ${deadline}`);
  s.handleText('{"op":"heartbeat"}', t0 + 1500);
  assert.deepEqual(texts(round(s, t0 + 1500)), [{ op: 'heartbeat_ack' }]);
  assert.deepEqual(round(s, t0 + 3000), [], 'the heartbeat moved the deadline');
  // The default `now` is the service clock: advance the manual clock.
  w.ok('/admin/advanceClock', { seconds: 10 });
  assert.deepEqual(round(s), [{ type: 'close', code: 4009, reason: 'session_timeout' }]);
  s.free();
});

test('the host closes a session with 4008 slow_consumer: the close goes ahead of queued events', () => {
  const w = world();
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  assert.equal(s.pollTransmit().data.includes('"op":"hello"'), true, 'the hello is taken');
  assert.equal(JSON.parse(s.pollTransmit().data).seq, 1);
  // An event committed and not yet taken when the host closes is not sent.
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'not taken' });
  assert.throws(() => s.close(4001), (e) => e instanceof RangeError && /close code 4001 is not one a host may send/.test(e.message));
  assert.throws(() => s.close(70000), RangeError);
  assert.equal(s.closed, false, 'a refused code changes nothing');
  assert.equal(s.pollEvent(), null);
  assert.equal(s.close(4008), true);
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0, 'the slot is free at once');
  assert.deepEqual(round(s), [{ type: 'close', code: 4008, reason: 'slow_consumer' }]);
  assert.deepEqual(s.pollEvent(), { type: 'closed', code: 4008, reason: 'slow_consumer' });
  assert.equal(s.closed, true);
  assert.equal(s.close(1001), false, 'an ended session is not closed again');
  assert.deepEqual(round(s), []);
  s.free();
});

test('upgrade refusals: 401, 426, 429 connection_limit, 404', () => {
  const w = world();
  const refused = (req) => {
    try {
      w.svc.acceptGateway(req).free();
    } catch (e) {
      assert.ok(e instanceof bs.GatewayRejectedError, String(e));
      return e;
    }
    assert.fail('accepted');
  };
  assert.equal(refused(upgradeRequest(null)).code, 'missing_authorization');
  assert.equal(refused(upgradeRequest('bot_nope')).status, 401);
  const noUpgrade = refused(bs.encodeRequest('GET', '/bot/gateway', w.bot(w.token)));
  assert.equal(noUpgrade.status, 426);
  assert.equal(noUpgrade.code, 'upgrade_required');
  assert.equal(refused('garbage').status, 400);
  assert.equal(refused(bs.encodeRequest('POST', '/bot/getMe', w.bot(w.token))).status, 404);

  const first = w.svc.acceptGateway(upgradeRequest(w.token));
  const limit = refused(upgradeRequest(w.token));
  assert.equal(limit.status, 429);
  assert.equal(limit.code, 'connection_limit');
  const resp = limit.toResponse();
  assert.equal(resp.status, 429);
  assert.equal(resp.headers.get('retry-after'), '1');
  first.free();
  w.svc.acceptGateway(upgradeRequest(w.token)).free();
  // The connection limit follows the bot's setting.
  w.ok('/admin/updateBot', { bot_id: w.botInfo.id, gateway_connection_limit: 3 });
  const three = [1, 2, 3].map(() => w.svc.acceptGateway(upgradeRequest(w.token)));
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 3);
  assert.equal(refused(upgradeRequest(w.token)).code, 'connection_limit');
  three.forEach((s) => s.free());
});

test('every open session of a bot receives every event', () => {
  const w = world({}, { quota_tier: 'standard' });
  const a = w.svc.acceptGateway(upgradeRequest(w.token));
  const b = w.svc.acceptGateway(upgradeRequest(w.token));
  round(a);
  round(b);
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'fan out' });
  for (const s of [a, b]) assert.deepEqual(texts(round(s)).map((e) => e.data.message.text), ['fan out']);
  a.free();
  b.free();
});

test('a freed session object throws invalid_state', () => {
  const w = world();
  const s = w.svc.acceptGateway(upgradeRequest(w.token));
  s.free();
  assert.throws(() => round(s), (e) => e instanceof bs.BotspaceError && e.code === 'invalid_state');
});

test('attachWebSocket drives a socket: wake-ups, acks, rotation close', async () => {
  const w = world();
  const ws = new FakeSocket();
  w.svc.attachWebSocket(w.svc.acceptGateway(upgradeRequest(w.token)), ws);
  assert.deepEqual(ws.sent.map((m) => JSON.parse(m).op), ['hello', 'event']);
  w.ok('/admin/sendUserMessage', { user_id: w.user.id, chat_id: w.chat.id, text: 'pushed' });
  await tick();
  assert.equal(JSON.parse(ws.sent.at(-1)).data.message.text, 'pushed', 'pushed without a poll by the host');
  ws.receive('{"op":"heartbeat"}');
  assert.deepEqual(JSON.parse(ws.sent.at(-1)), { op: 'heartbeat_ack' });
  w.ok('/admin/rotateBotToken', { bot_id: w.botInfo.id });
  await tick();
  assert.deepEqual(ws.closedWith, [4004, 'authentication_failed']);
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
});

test('attachWebSocket: the peer closing frees the slot', () => {
  const w = world();
  const ws = new FakeSocket();
  w.svc.attachWebSocket(w.svc.acceptGateway(upgradeRequest(w.token)), ws);
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 1);
  ws.dispatchEvent(new Event('close'));
  assert.equal(w.svc.gatewayConnections(w.botInfo.id), 0);
  assert.throws(() => w.svc.attachWebSocket({}, ws), TypeError);
});

