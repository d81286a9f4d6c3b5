// exportDatabase / importDatabase: a host persists the whole state and
// restores it in a fresh service with nothing lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bs, setup, upgradeRequest, texts, SECRET, ADMIN, round } from './helpers.mjs';

const OP_KEY = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';

/** Builds a service with some of everything. */
function populate() {
  const t = setup({ operational_key: OP_KEY });
  const ann = t.ok('/admin/createUser', { display_name: 'Ann', handle: 'ann' });
  const bob = t.ok('/admin/createUser', { display_name: 'Bob' });
  const free = t.ok('/admin/createBot', { display_name: 'Free', handle: 'free_bot' });
  const std = t.ok('/admin/createBot', { display_name: 'Std', handle: 'std_bot', quota_tier: 'standard', verified: true, avatar_key: 'av1' });
  const off = t.ok('/admin/createBot', { display_name: 'Off', handle: 'off_bot', quota_tier: 'official', official: true });
  const rotated = t.ok('/admin/rotateBotToken', { bot_id: free.bot.id });
  const dm = t.ok('/admin/startBot', { user_id: ann.id, bot_id: std.bot.id });
  const dm2 = t.ok('/admin/startBot', { user_id: bob.id, bot_id: free.bot.id });
  t.ok('/admin/setBlocked', { chat_id: dm2.id, by: 'user', blocked: true });
  const group = t.ok('/admin/createGroup', { title: 'G', member_ids: [ann.id, bob.id, std.bot.id, off.bot.id] });
  const S = t.bot(std.token);
  t.ok('/admin/sendUserMessage', { user_id: ann.id, chat_id: dm.id, text: 'hello std' });
  const m2 = t.ok('/bot/sendMessage', { chat_id: dm.id, text: 'hello ann', reply_to_message_id: '1' }, S);
  t.ok('/bot/editMessageText', { chat_id: dm.id, message_id: m2.message_id, text: 'hello Ann' }, S);
  const m3 = t.ok('/bot/sendMessage', { chat_id: dm.id, text: 'to delete' }, S);
  t.ok('/bot/deleteMessage', { chat_id: dm.id, message_id: m3.message_id }, S);
  const idem = bs.decodeResponse(t.svc.handleRequest(bs.encodeRequest('POST', '/bot/sendMessage', { ...S, 'Idempotency-Key': 'key-1' }, { chat_id: group.id, text: 'once' })));
  assert.equal(idem.status, 200);
  t.ok('/admin/sendUserMessage', { user_id: bob.id, chat_id: group.id, text: 'hi group ✓ 😀' });
  t.ok('/bot/sendChatAction', { chat_id: group.id, action: 'typing' }, S);
  // The std bot reads and acknowledges some of its events.
  const s = t.svc.acceptGateway(upgradeRequest(std.token));
  const evs = texts(round(s)).filter((e) => e.op === 'event');
  s.handleText(JSON.stringify({ op: 'ack', seq: evs[1].seq }));
  s.free();
  return { t, ann, bob, free, std, off, rotated, dm, dm2, group, idem: idem.json(), ackedSeq: evs[1].seq, lastSeq: evs.at(-1).seq };
}

/** Everything a host can observe through the API. */
function observe(svc, w) {
  const call = (path, body, headers = ADMIN) => bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  const ok = (path, body, headers) => {
    const r = call(path, body, headers);
    assert.equal(r.status, 200, `${path}: ${r.text()}`);
    return r.json().result;
  };
  return {
    history: [w.dm, w.dm2, w.group].map((c) => ok('/admin/getChatHistory', { chat_id: c.id })),
    chats: [w.dm, w.dm2, w.group].map((c) => ok('/admin/getChat', { chat_id: c.id })),
    updates: ok('/admin/getUpdates', { limit: 1000 }),
    // `live` holds this process's figures (last request, sessions), not stored state.
    bots: [w.free, w.std, w.off].map((b) => { const { live, ...stored } = ok('/admin/getBot', { bot_id: b.bot.id }); return stored; }),
    getMe: [w.rotated.token, w.std.token, w.off.token].map((tok) => ok('/bot/getMe', undefined, { Authorization: `Bot ${tok}` })),
  };
}

test('export → import into a fresh service loses nothing', () => {
  const w = populate();
  const before = observe(w.t.svc, w);
  const image = w.t.svc.exportDatabase();
  assert.ok(image instanceof Uint8Array);
  assert.equal(new TextDecoder().decode(image.subarray(0, 15)), 'SQLite format 3');

  const fresh = new bs.Service({ admin_secret: SECRET, clock: 'manual', operational_key: OP_KEY });
  fresh.importDatabase(image);
  const after = observe(fresh, w);
  assert.deepEqual(after, before);

  const call = (path, body, headers = ADMIN) => bs.decodeResponse(fresh.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  const S = { Authorization: `Bot ${w.std.token}` };
  // Rotated-away tokens stay refused; current ones work (checked above).
  assert.equal(call('/bot/getMe', undefined, { Authorization: `Bot ${w.free.token}` }).json().error, 'invalid_token');
  // The official bot's operational copy decrypts with the same key.
  assert.equal(call('/admin/getOperationalToken', { bot_id: w.off.bot.id }).json().result.token, w.off.token);
  // Idempotency keys survive: same result, nothing written.
  const again = call('/bot/sendMessage', { chat_id: w.group.id, text: 'once' }, { ...S, 'Idempotency-Key': 'key-1' });
  assert.deepEqual(again.json(), w.idem);
  assert.equal(call('/bot/sendMessage', { chat_id: w.group.id, text: 'other' }, { ...S, 'Idempotency-Key': 'key-1' }).status, 409);
  // Message numbers continue, never reusing the deleted one.
  assert.equal(call('/bot/sendMessage', { chat_id: w.dm.id, text: 'next' }, S).json().result.message_id, '4');
  // Block state survives.
  assert.equal(call('/bot/sendMessage', { chat_id: w.dm2.id, text: 'x' }, { Authorization: `Bot ${w.rotated.token}` }).json().error, 'blocked_by_user');
  // The gateway resumes after the acknowledged event.
  const s = fresh.acceptGateway(upgradeRequest(w.std.token));
  const out = texts(round(s));
  assert.equal(out[0].replay_from, w.ackedSeq + 1);
  assert.equal(out.filter((e) => e.op === 'event')[0].seq, w.ackedSeq + 1);
  s.free();
});

test('a second round trip is stable, and import replaces what was there', () => {
  const w = populate();
  const image = w.t.svc.exportDatabase();
  const other = setup();
  const stranger = other.ok('/admin/createUser', { display_name: 'Stranger' });
  other.svc.importDatabase(image);
  assert.equal(other.call('/admin/sendUserMessage', { user_id: stranger.id, chat_id: w.dm.id, text: 'x' }).status, 404);
  const again = setup();
  again.svc.importDatabase(other.svc.exportDatabase());
  assert.deepEqual(observe(again.svc, w), observe(w.t.svc, w));
  // An exported image imports into its own service too.
  w.t.svc.importDatabase(image);
  assert.deepEqual(observe(w.t.svc, w).updates, observe(again.svc, w).updates);
});

test('bad images are refused with InvalidImageError and change nothing', () => {
  const w = populate();
  const before = observe(w.t.svc, w);
  const image = w.t.svc.exportDatabase();
  const corrupt = image.slice();
  corrupt.fill(0xaa, 4096, 9000);
  const notBotspace = image.slice(0, 100); // a header and nothing else
  for (const bad of [new Uint8Array(0), new Uint8Array([1, 2, 3]), new TextEncoder().encode('SQLite format 3\0 but not really'), image.slice(0, image.length / 2), corrupt, notBotspace]) {
    assert.throws(() => w.t.svc.importDatabase(bad), (e) => {
      assert.ok(e instanceof bs.InvalidImageError, `${e.name}: ${e.message}`);
      assert.ok(e instanceof bs.DatabaseError);
      assert.ok(e instanceof bs.BotspaceError);
      assert.equal(e.name, 'InvalidImageError');
      assert.equal(e.code, 'invalid_request');
      assert.equal(e.status, 400);
      assert.ok(e.message.length > 0);
      return true;
    });
  }
  assert.throws(() => w.t.svc.importDatabase('text'), TypeError);
  assert.throws(() => w.t.svc.importDatabase(null), TypeError);
  assert.deepEqual(observe(w.t.svc, w), before);
  assert.equal(w.t.call('/bot/getMe', undefined, w.t.bot(w.std.token)).status, 200);
});

test('an import closes open gateway sessions with 4004; bots resume from the imported cursor', async () => {
  const w = populate();
  const s = w.t.svc.acceptGateway(upgradeRequest(w.std.token));
  round(s);
  const woken = [];
  w.t.svc.setWakeHook((id) => woken.push(id));
  w.t.svc.importDatabase(w.t.svc.exportDatabase());
  await new Promise((r) => setTimeout(r, 0));
  assert.ok(woken.includes(w.std.bot.id), 'the import wakes the bots whose sessions must close');
  assert.deepEqual(round(s), [{ type: 'close', code: 4004, reason: 'authentication_failed' }]);
  s.free();
  const again = w.t.svc.acceptGateway(upgradeRequest(w.std.token));
  const hello = texts(round(again))[0];
  assert.equal(hello.replay_from, w.ackedSeq + 1);
  w.t.ok('/admin/sendUserMessage', { user_id: w.ann.id, chat_id: w.dm.id, text: 'after import' });
  assert.equal(texts(round(again)).at(-1).data.message.text, 'after import');
  again.free();
});
