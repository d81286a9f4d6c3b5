// The browser example in headless Chromium (Debian's /usr/bin/chromium,
// never a downloaded browser): type a message, see the echo bot's reply,
// reload and find the conversation restored from IndexedDB (the page
// storage: only changed blocks are written), then close the page in the
// middle of a stream of writes and find every acknowledged message on
// reopening; no stale "typing…" after a reload, even when the gateway
// replays old messages; a layout that fits from a phone (one column) to a
// desktop (two), and a footer that says how the chat is stored; webhooks
// from a service in the page reach a receiver that allows CORS, and never
// one that does not. The bot's answers carry buttons; a press reaches it and
// its answer shows in the page.
// Screenshots go to test-output/ at the repository root.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { start } from './serve.mjs';
import { startReceiver, delivered } from '../../wasm/test/webhook-receiver.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUT = join(ROOT, 'test-output');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let server;
let context;
let profile;
const consoleErrors = [];
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

// The page at the current width: no wider than the viewport.
async function assertFits(page, where) {
  const m = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(m.scroll <= m.inner, `${where}: the page is ${m.scroll} px wide at a ${m.inner} px viewport`);
}

// Where the chat and the gateway panel are, relative to each other.
const layout = (page) => page.evaluate(() => {
  const c = document.querySelector('.chat').getBoundingClientRect();
  const f = document.querySelector('.frames').getBoundingClientRect();
  return { stacked: f.top >= c.bottom, sideBySide: f.left >= c.right && f.top < c.bottom };
});

// Records every text the status line shows, from the page's first moment
// (on every load of this page).
const recordStatus = (page) => page.addInitScript(() => {
  window.statusLog = [];
  new MutationObserver(() => {
    const s = document.getElementById('status');
    if (s && window.statusLog.at(-1) !== s.textContent) window.statusLog.push(s.textContent);
  }).observe(document, { subtree: true, childList: true, characterData: true });
});

before(async () => {
  mkdirSync(OUT, { recursive: true });
  server = await start({ port: 0 });
  profile = mkdtempSync(join(tmpdir(), 'botspace-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: DESKTOP,
  });
});

after(async () => {
  await context?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function openPage(prepare) {
  const page = await context.newPage();
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  if (prepare) await prepare(page);
  await page.goto(server.url);
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 });
  assert.equal(await page.evaluate(() => document.body.dataset.ready), '1', await page.textContent('#status'));
  return page;
}

test('a person chats with the echo bot, both running in the page', { timeout: 120_000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing (apt-get install -y chromium)`);
  const page = await openPage();
  await page.fill('#message', 'Hello, bot! ¿Qué tal? ✓');
  await page.click('#send');
  await page.waitForSelector('.msg.user', { timeout: 10_000 });
  assert.equal(await page.locator('.msg.user').first().evaluate((el) => el.firstChild.textContent), 'Hello, bot! ¿Qué tal? ✓');
  await page.waitForSelector('.msg.bot', { timeout: 10_000 });
  assert.equal(await page.locator('.msg.bot').first().evaluate((el) => el.firstChild.textContent), 'Echo: Hello, bot! ¿Qué tal? ✓');

  await page.fill('#message', 'second message');
  await page.press('#message', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.bot').length === 2, null, { timeout: 10_000 });
  assert.equal(await page.locator('.msg.bot').nth(1).evaluate((el) => el.firstChild.textContent), 'Echo: second message');
  // The bot's side: hello, then the two events it acknowledged.
  const frames = await page.locator('#frames li').allTextContents();
  assert.ok(frames.some((f) => f.includes('"op":"hello"')));
  assert.equal(frames.filter((f) => f.includes('"type":"message_created"')).length, 2);
  assert.ok(frames.some((f) => f.includes('"op":"ack"')));

  // The answers carry two buttons; a press reaches the bot as a
  // callback_query event, and its answer comes back on the host's stream.
  const buttons = page.locator('.msg.bot').nth(1).locator('.keyboard button');
  assert.deepEqual(await buttons.allTextContents(), ['Like', 'Dislike']);
  await buttons.first().click();
  await page.waitForFunction(() => !document.getElementById('answer').hidden, null, { timeout: 10_000 });
  assert.equal(await page.textContent('#answer'), 'Glad you liked it!');
  const queries = (await page.locator('#frames li').allTextContents()).filter((f) => f.includes('"type":"callback_query"'));
  assert.equal(queries.length, 1);
  assert.match(queries[0], /"data":"like"/);
  await page.screenshot({ path: join(OUT, 'browser-chat.png') });

  // The footer says how the chat is kept, truly.
  const footer = await page.textContent('footer');
  assert.match(footer, /indexedDBPageStorage/);
  assert.doesNotMatch(footer, /exportDatabase/);

  // Two columns on a desktop; one on a phone (chat first), never wider
  // than the screen.
  assert.deepEqual(await layout(page), { stacked: false, sideBySide: true });
  await page.screenshot({ path: join(OUT, 'browser-chat-1280.png') });
  for (const width of [1920, 360]) {
    await page.setViewportSize({ width, height: 800 });
    await assertFits(page, `${width} px`);
  }
  await page.setViewportSize(PHONE);
  await assertFits(page, '390 px');
  assert.deepEqual(await layout(page), { stacked: true, sideBySide: false });
  await page.screenshot({ path: join(OUT, 'browser-chat-390.png'), fullPage: true });
  await page.setViewportSize(DESKTOP);
  await assertFits(page, '1280 px');

  // Reload: the database comes back from its IndexedDB page storage.
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelectorAll('.msg').length === 4, null, { timeout: 10_000 });
  const texts = await page.locator('.msg').evaluateAll((els) => els.map((el) => el.firstChild.textContent));
  assert.deepEqual(texts, ['Hello, bot! ¿Qué tal? ✓', 'Echo: Hello, bot! ¿Qué tal? ✓', 'second message', 'Echo: second message']);
  await page.fill('#message', 'after reload');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.msg.bot').length === 3, null, { timeout: 10_000 });
  assert.equal(await page.locator('.msg.bot').nth(2).evaluate((el) => el.firstChild.textContent), 'Echo: after reload');
  await page.screenshot({ path: join(OUT, 'browser-chat-after-reload.png') });
  await page.close();
  assert.deepEqual(consoleErrors, []);
});

test('no stale "typing…" after a reload, even when the gateway replays answered messages', { timeout: 120_000 }, async () => {
  const page = await openPage(recordStatus);
  const count = () => page.locator('.msg').count();
  const before = await count();
  // The indicator works: the bot types, then its answer ends the action.
  await page.fill('#message', 'are you typing?');
  await page.click('#send');
  await page.waitForFunction((n) => document.querySelectorAll('.msg').length === n + 2, before, { timeout: 10_000 });
  const sentAt = Date.now();
  assert.equal(await page.locator('.msg.bot').last().evaluate((el) => el.firstChild.textContent), 'Echo: are you typing?');
  assert.ok((await page.evaluate(() => window.statusLog)).includes('typing…'), 'the bot showed typing');
  assert.equal(await page.textContent('#status'), 'bot · runs in this page on botspace');

  // Reload at once: the answered event is not replayed, nothing types.
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  await page.waitForTimeout(1500);
  assert.deepEqual(await page.evaluate(() => window.statusLog.filter((t) => t === 'typing…')), [], 'no typing after a reload');
  assert.equal(await count(), before + 2);

  // The bot's whole log again (?after=0), once the last message is older
  // than a chat action lives: every event comes again, the bot answers
  // each with its Idempotency-Key (nothing new) and types for none.
  await page.waitForTimeout(Math.max(0, sentAt + 5200 - Date.now()));
  await page.goto(`${server.url}?after=0`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  const lastSeq = await page.waitForFunction(() => {
    const events = [...document.querySelectorAll('#frames li')].map((li) => li.textContent)
      .filter((t) => t.includes('"type":"message_created"') && t.includes('are you typing?'));
    return events.length ? JSON.parse(events[0].slice(2)).seq : null;
  }, null, { timeout: 10_000 }).then((h) => h.jsonValue());
  await page.waitForFunction((seq) => [...document.querySelectorAll('#frames li')]
    .some((li) => li.textContent === `→ {"op":"ack","seq":${seq}}`), lastSeq, { timeout: 10_000 });
  await page.waitForTimeout(500);
  const replayed = await page.locator('#frames li', { hasText: '"type":"message_created"' }).count();
  assert.ok(replayed >= 4, `the log was replayed (${replayed} message events)`);
  assert.deepEqual(await page.evaluate(() => window.statusLog.filter((t) => t === 'typing…')), [], 'no typing for replayed messages');
  assert.equal(await page.textContent('#status'), 'bot · runs in this page on botspace');
  assert.equal(await count(), before + 2, 'no answer twice');
  await page.screenshot({ path: join(OUT, 'browser-chat-replayed.png') });
  await page.close();
  assert.deepEqual(consoleErrors, []);
});

test('a page closed in the middle of a stream of writes reopens consistent, with every acknowledged message', { timeout: 120_000 }, async () => {
  const page = await openPage();
  const acked = [];
  await page.exposeFunction('reportAcked', (text) => acked.push(text));
  // Writes one after another; each is reported once durable (acknowledged).
  await page.evaluate(() => {
    (async () => {
      for (let i = 0; ; i++) {
        const text = `stream ${i}`;
        await window.botspaceDemo.sendUserMessage(text);
        window.reportAcked(text);
      }
    })().catch(() => {});
  });
  while (acked.length < 40) await new Promise((r) => setTimeout(r, 20));
  await page.close({ runBeforeUnload: false });
  const reported = [...acked];

  const again = await openPage();
  const texts = await again.evaluate(() => window.botspaceDemo.history().map((m) => m.text));
  const streamed = texts.filter((t) => t.startsWith('stream '));
  assert.deepEqual(reported.filter((t) => !streamed.includes(t)), [], 'every acknowledged message is there');
  // Consistent: the stream is a prefix, in order, with no gap.
  assert.deepEqual(streamed, streamed.map((_, i) => `stream ${i}`));
  // And the database takes writes again.
  await again.evaluate(() => window.botspaceDemo.sendUserMessage('after reopening'));
  const last = await again.evaluate(() => window.botspaceDemo.history().map((m) => m.text));
  assert.ok(last.includes('after reopening'));
  await again.close();
  assert.deepEqual(consoleErrors, []);
});

test("webhooks from the page's service: delivered to a receiver that allows CORS, never sent to one that does not", { timeout: 120_000 }, async () => {
  const open = await startReceiver({ cors: true });
  const closed = await startReceiver();
  const page = await openPage();
  try {
    // A service of its own in the page, next to the demo's.
    const setup = await page.evaluate(async ({ openUrl, closedUrl }) => {
      const bs = await import('botspace');
      const svc = new bs.Service({
        admin_secret: 'browser-webhooks-secret-01',
        clock: 'system',
        webhook_allow_http: true,
        webhook_allow_private_addresses: true,
      });
      const call = (path, body, auth) =>
        bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, { Authorization: auth }, body))).json().result;
      const admin = 'Admin browser-webhooks-secret-01';
      const user = call('/admin/createUser', { display_name: 'Ann' }, admin);
      const bots = [];
      for (const [handle, url] of [['open_hook_bot', openUrl], ['closed_hook_bot', closedUrl]]) {
        const { bot, token } = call('/admin/createBot', { display_name: handle, handle }, admin);
        const chat = call('/admin/startBot', { user_id: user.id, bot_id: bot.id }, admin);
        const { secret } = call('/bot/setWebhook', { url }, `Bot ${token}`);
        bots.push({ botId: bot.id, token, chatId: chat.id, secret });
      }
      window.hookTest = { svc, call, admin, user, bots };
      return { user, bots };
    }, { openUrl: open.url, closedUrl: closed.url });
    const [ob, cb] = setup.bots;
    open.secret = ob.secret;
    // bot_started, verified (retried if it came before the secret was set here).
    await open.waitFor((s) => delivered(s).length >= 1, 'bot_started from the page', 20_000);
    const sent = await page.evaluate(
      ({ chatId }) => {
        const t = window.hookTest;
        return t.call('/admin/sendUserMessage', { user_id: t.user.id, chat_id: chatId, text: 'from the page' }, t.admin);
      },
      { chatId: ob.chatId },
    );
    await open.waitFor((s) => delivered(s).length >= 2, 'the message from the page', 20_000);
    const ok = open.seen.filter((e) => e.step === 'ok');
    assert.deepEqual(ok.map((e) => [e.id, e.verified]), [
      [`msg_${ob.botId}_1`, true],
      [`msg_${ob.botId}_2`, true],
    ]);
    assert.deepEqual(ok[0].body, { update_id: 1, type: 'bot_started', data: { chat: { id: ob.chatId, type: 'private' }, user: setup.user } });
    assert.deepEqual(ok[1].body, { update_id: 2, type: 'message_created', data: { message: sent } });
    assert.ok(open.preflights >= 1, 'the browser asked first');

    // The receiver without CORS: the browser never sends the delivery.
    const info = await page.evaluate(async ({ token }) => {
      const t = window.hookTest;
      for (let i = 0; i < 200; i++) {
        const info = t.call('/bot/getWebhookInfo', {}, `Bot ${token}`);
        if (info.last_error_message) return info;
        await new Promise((r) => setTimeout(r, 50));
      }
      return null;
    }, { token: cb.token });
    assert.equal(info.last_error_message, 'the request failed: Failed to fetch');
    assert.equal(info.pending_update_count, 1);
    assert.deepEqual(closed.seen, []);
    assert.ok(closed.preflights >= 1);
    await page.evaluate(() => window.hookTest.svc.free());
  } finally {
    await page.close();
    await open.close();
    await closed.close();
  }
  // Chromium logs each refused cross-origin request; nothing else may have failed.
  assert.deepEqual(consoleErrors.filter((e) => !/CORS|Failed to load resource|Failed to fetch/.test(e)), []);
});
