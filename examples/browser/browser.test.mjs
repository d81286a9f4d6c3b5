// The browser example in headless Chromium (Debian's /usr/bin/chromium,
// never a downloaded browser): type a message, see the echo bot's reply,
// reload and find the conversation restored from IndexedDB (the page
// storage: only changed blocks are written), then close the page in the
// middle of a stream of writes and find every acknowledged message on
// reopening. Screenshots go to test-output/ at the repository root.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { start } from './serve.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUT = join(ROOT, 'test-output');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let server;
let context;
let profile;
const consoleErrors = [];

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
    viewport: { width: 1100, height: 720 },
  });
});

after(async () => {
  await context?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function openPage() {
  const page = await context.newPage();
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
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
  await page.screenshot({ path: join(OUT, 'browser-chat.png') });

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
