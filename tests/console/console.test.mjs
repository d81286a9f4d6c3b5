// The admin console in a real browser (Debian's Chromium through
// playwright-core) against the example server: an operator signs in,
// creates a bot, copies its token, rotates it while a gateway session is
// open, suspends and restores it, makes a group, reads its history and the
// audit log; keyboard-only rotation; every control labelled; a wrong
// secret is told clearly and throttled; sparklines drawn from the
// per-minute figures of a bot the test drives, sessions against the limit,
// labelled audit details, pickers and plural-aware words. Each step checks what the page
// shows and what the API answers afterwards. Every screen is checked at
// 360, 390, 1280 and 1920 px wide (never wider than the viewport, no
// "[object" text) and photographed at 390 and 1280 px.
//
// Run by scripts/test-console.sh, which starts the server and sets
// BOTSPACE_URL and BOTSPACE_ADMIN_SECRET.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';

const BASE = process.env.BOTSPACE_URL;
const SECRET = process.env.BOTSPACE_ADMIN_SECRET;
const OUT = process.env.TEST_OUTPUT_DIR || new URL('../../test-output/', import.meta.url).pathname;
assert.ok(BASE && SECRET, 'BOTSPACE_URL and BOTSPACE_ADMIN_SECRET must be set (scripts/test-console.sh)');
mkdirSync(OUT, { recursive: true });

let browser, page;
const pageErrors = [];

async function call(path, auth, body) {
  const r = await fetch(BASE + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: auth },
    body: JSON.stringify(body || {}),
  });
  return { status: r.status, body: await r.json() };
}
const bot = (token, method, body) => call('/bot/' + method, 'Bot ' + token, body);
async function admin(method, body) {
  const r = await call('/admin/' + method, 'Admin ' + SECRET, body);
  assert.equal(r.status, 200, method + ': ' + JSON.stringify(r.body));
  return r.body.result;
}

const PREFIX = process.env.SHOT_PREFIX || 'console';
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };
const shot = (name) => page.screenshot({ path: OUT + PREFIX + '-' + name + '.png', fullPage: true });

// What a screen must be at the current width: no wider than the viewport,
// on a phone no table scrolling sideways in its box either (rows are
// cards), no "[object ...]" text and no "(s)" plural.
async function assertFits(where) {
  const m = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    inner: window.innerWidth,
    object: document.body.innerText.includes('[object'),
    plural: (document.body.innerText.match(/\w+\(s\)/) || [''])[0],
    boxes: [...document.querySelectorAll('.table-box')].filter((b) => b.scrollWidth > b.clientWidth)
      .map((b) => b.getAttribute('aria-label') + ' ' + b.scrollWidth + ' > ' + b.clientWidth + ' px'),
    // The outermost elements that stick out, to name them on failure.
    wide: [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5
        && !(el.parentElement && el.parentElement.getBoundingClientRect().right > window.innerWidth + 0.5))
      .map((el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + el.className : '')
        + ' ' + Math.round(el.getBoundingClientRect().right) + ' px'),
  }));
  assert.ok(m.scroll <= m.inner, where + ': the page is ' + m.scroll + ' px wide at a ' + m.inner + ' px viewport; '
    + 'sticking out: ' + m.wide.join(', '));
  assert.equal(m.object, false, where + ': text reads "[object"');
  assert.equal(m.plural, '', where + ': a count is worded "(s)"');
  if (m.inner <= 640) assert.deepEqual(m.boxes, [], where + ': a table scrolls sideways');
}

// Checks the current screen at 360, 390, 1280 and 1920 px and saves it at
// 390 (NAME-390.png) and 1280 px (NAME.png); ends at 1280 px.
async function screen(name) {
  for (const width of [1920, 360]) {
    await page.setViewportSize({ width, height: 900 });
    await assertFits(name + ' at ' + width + ' px');
  }
  await page.setViewportSize(PHONE);
  await assertFits(name + ' at 390 px');
  await shot(name + '-390');
  await page.setViewportSize(DESKTOP);
  await assertFits(name + ' at 1280 px');
  await shot(name);
}

// Whether the element is wholly inside the viewport.
const inView = (locator) => locator.evaluate((el) => {
  const r = el.getBoundingClientRect();
  // Within a pixel: the page scrolls by whole pixels, its boxes end anywhere.
  return r.top >= -1 && r.left >= 0 && r.bottom <= window.innerHeight + 1 && r.right <= window.innerWidth;
});

// Every input, select, textarea and button on the page has an accessible name.
async function assertLabelled(where) {
  const unlabelled = await page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('input, select, textarea, button')) {
      if (el.closest('[hidden]')) continue;
      const named = el.tagName === 'BUTTON'
        ? (el.textContent.trim() || el.getAttribute('aria-label'))
        : ((el.labels && el.labels.length) || el.getAttribute('aria-label'));
      if (!named) bad.push(el.outerHTML.slice(0, 80));
    }
    return bad;
  });
  assert.deepEqual(unlabelled, [], 'unlabelled controls on ' + where);
}

// Opens a gateway session; resolves with the socket once hello arrived.
function openGateway(token) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(BASE.replace('http', 'ws') + '/bot/gateway', { headers: { Authorization: 'Bot ' + token } });
    ws.closed = new Promise((res) => ws.on('close', (code, reason) => res({ code, reason: String(reason) })));
    ws.once('message', (data) => {
      const hello = JSON.parse(String(data));
      if (hello.op === 'hello') resolve(ws); else reject(new Error('first frame: ' + data));
    });
    ws.once('unexpected-response', (_, res) => reject(new Error('gateway refused: ' + res.statusCode)));
    ws.once('error', reject);
  });
}

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const context = await browser.newContext({ viewport: DESKTOP });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE });
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error' && !/status of (401|403|429)/.test(m.text())) pageErrors.push(m.text() + ' ' + JSON.stringify(m.location())); });
});

after(async () => { await browser?.close(); });

test('an operator manages a bot and rotates a leaked token from the console', async () => {
  // The page and its headers.
  const resp = await page.goto(BASE + '/admin/console');
  assert.equal(resp.status(), 200);
  const h = resp.headers();
  assert.match(h['content-security-policy'], /script-src 'self';/);
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.match(h['content-security-policy'], /connect-src 'self'/);
  assert.equal(h['x-content-type-options'], 'nosniff');
  assert.equal(h['referrer-policy'], 'no-referrer');
  assert.equal(h['cache-control'], 'no-store');
  await assertLabelled('sign-in');
  await screen('0-sign-in');

  // Sign in; the secret is kept in this tab's sessionStorage only.
  await page.getByLabel('Admin secret', { exact: true }).fill(SECRET);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Bots', exact: true }).waitFor();
  const storage = await page.evaluate(() => ({ s: sessionStorage.getItem('botspace.admin'), l: localStorage.length, c: document.cookie }));
  assert.deepEqual(storage, { s: SECRET, l: 0, c: '' });
  assert.equal(await page.locator('#signin').isVisible(), false, 'the sign-in form is gone once signed in');
  await assertLabelled('bots');
  await screen('1-bots-empty');

  // Create a bot on a phone: its token is shown once, right where the
  // operator is looking (in view, its copy button focused), and the copy
  // button copies it.
  await page.setViewportSize(PHONE);
  await page.getByLabel('Display name', { exact: true }).fill('Leaky Bot');
  await page.getByLabel('Handle', { exact: true }).fill('leaky_bot');
  await page.getByRole('button', { name: 'Create bot' }).click();
  const tokenBox = page.getByLabel('Token of @leaky_bot', { exact: true });
  await tokenBox.waitFor();
  assert.equal(await inView(tokenBox), true, 'the new token is in view');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Copy token');
  await shot('1-created-390');
  await page.setViewportSize(DESKTOP);
  const oldToken = await tokenBox.inputValue();
  assert.match(oldToken, /^bot_[A-Za-z0-9_-]{43}$/);
  await page.getByRole('button', { name: 'Copy token' }).click();
  await page.getByText('Copied.').waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), oldToken);
  await page.getByRole('cell', { name: '@leaky_bot', exact: true }).waitFor();
  await screen('1-created');

  // The copied token works, and a gateway session opens with it.
  const me = await bot(oldToken, 'getMe');
  assert.equal(me.status, 200);
  assert.equal(me.body.result.handle, 'leaky_bot');
  const botId = me.body.result.id;
  const ws = await openGateway(oldToken);

  // The bot's page shows the live session.
  await page.getByRole('button', { name: 'Open bot @leaky_bot' }).click();
  await page.getByRole('heading', { name: 'Bot @leaky_bot', exact: true }).waitFor();
  assert.equal(await page.locator('#bot-sessions').textContent(), '1 of 1 session');
  await assertLabelled('bot');
  await screen('2-bot');

  // Rotation, keyboard only: Tab to "Rotate token", Enter; the confirmation
  // takes focus; Tab + Enter cancels and gives focus back; then confirm.
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  let found = false;
  for (let i = 0; i < 80 && !found; i++) {
    await page.keyboard.press('Tab');
    found = await page.evaluate(() => document.activeElement && document.activeElement.textContent === 'Rotate token');
  }
  assert.ok(found, 'Rotate token is reachable with Tab');
  await page.keyboard.press('Enter');
  await page.getByRole('alertdialog').waitFor();
  assert.match(await page.getByRole('alertdialog').textContent(), / 1 open gateway session will be closed with 4004\./);
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Yes, rotate the token');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Cancel');
  await page.keyboard.press('Enter');
  assert.equal(await page.getByRole('alertdialog').count(), 0);
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Rotate token');
  assert.equal((await bot(oldToken, 'getMe')).status, 200, 'cancel rotates nothing');
  await page.keyboard.press('Enter');
  await page.getByRole('alertdialog').waitFor();
  assert.equal(await inView(page.getByRole('alertdialog')), true, 'the confirmation is in view');
  await screen('2-confirm-rotation');
  await page.getByRole('button', { name: 'Yes, rotate the token' }).focus();
  await page.keyboard.press('Enter');
  const newBox = page.getByLabel('New token of @leaky_bot', { exact: true });
  await newBox.waitFor();
  const newToken = await newBox.inputValue();
  assert.match(newToken, /^bot_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(newToken, oldToken);
  assert.match(await page.locator('.secret-once').textContent(), / 1 gateway session closed with 4004\./);
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Copy token');
  assert.equal(await inView(newBox), true, 'the new token is in view');
  await screen('3-rotated');

  // The old token is refused at once, the session was closed with 4004,
  // the new token works.
  const stale = await bot(oldToken, 'getMe');
  assert.equal(stale.status, 401);
  assert.equal(stale.body.error, 'invalid_token');
  const closed = await ws.closed;
  assert.equal(closed.code, 4004);
  assert.equal(closed.reason, 'authentication_failed');
  assert.equal((await bot(newToken, 'getMe')).status, 200);

  // Edit the tier, then suspend and restore.
  await page.getByLabel('Tier', { exact: true }).selectOption('standard');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved @leaky_bot.').waitFor();
  assert.equal((await bot(newToken, 'getMe')).body.result.quota_tier, 'standard');
  await page.getByRole('button', { name: 'Suspend bot' }).click();
  await page.getByRole('button', { name: 'Restore bot' }).waitFor();
  assert.equal(await page.locator('#bot-status').textContent(), 'suspended');
  const susp = await bot(newToken, 'getMe');
  assert.equal(susp.status, 403);
  assert.equal(susp.body.error, 'bot_suspended');
  await screen('4-suspended');
  await page.getByRole('button', { name: 'Restore bot' }).click();
  await page.getByRole('button', { name: 'Suspend bot' }).waitFor();
  assert.equal(await page.locator('#bot-status').textContent(), 'active');
  assert.equal((await bot(newToken, 'getMe')).status, 200);

  // Delivery: no webhook, then one set by the bot, shown and cleared here.
  assert.equal(await page.locator('#bot-mode').textContent(), 'Gateway or getUpdates');
  assert.equal(await page.locator('#bot-webhook-url').textContent(), 'none');
  const set = await bot(newToken, 'setWebhook', { url: 'https://hooks.example.com/leaky' });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  await page.getByRole('button', { name: 'Back to bots' }).click();
  await page.getByRole('button', { name: 'Open bot @leaky_bot' }).click();
  await page.getByRole('heading', { name: 'Bot @leaky_bot', exact: true }).waitFor();
  assert.equal(await page.locator('#bot-mode').textContent(), 'Webhook');
  assert.equal(await page.locator('#bot-webhook-url').textContent(), 'https://hooks.example.com/leaky');
  await screen('4-webhook');
  await page.getByRole('button', { name: 'Clear webhook' }).click();
  await page.getByText('Cleared the webhook of @leaky_bot').waitFor();
  assert.equal(await page.locator('#bot-mode').textContent(), 'Gateway or getUpdates');
  const info = await bot(newToken, 'getWebhookInfo');
  assert.equal(info.body.result.url, '');

  // Commands: none yet, then the bot's lists by scope, as it set them.
  assert.equal(await page.locator('#bot-commands').textContent(), 'No commands set (setMyCommands).');
  const lists = [
    { commands: [{ command: 'menu', description: 'Show the menu' }, { command: 'help', description: 'What I do' }] },
    { commands: [{ command: 'poll', description: 'Start a poll' }], scope: { type: 'all_group_chats' } },
  ];
  for (const l of lists) {
    const r = await bot(newToken, 'setMyCommands', l);
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  await page.getByRole('button', { name: 'Back to bots' }).click();
  await page.getByRole('button', { name: 'Open bot @leaky_bot' }).click();
  await page.getByRole('heading', { name: 'Bot @leaky_bot', exact: true }).waitFor();
  assert.deepEqual(await page.locator('#bot-commands tbody tr').allTextContents(),
    ['Every chat (default)/menu Show the menu/help What I do', 'Groups/poll Start a poll']);
  await screen('4-commands');

  // A user, then a group with the user and the bot.
  await page.getByRole('button', { name: 'Users' }).click();
  await page.getByRole('heading', { name: 'Users', exact: true }).waitFor();
  await assertLabelled('users');
  await page.getByLabel('Display name', { exact: true }).fill('Ann Operator');
  await page.getByRole('button', { name: 'Create user' }).click();
  await page.getByRole('cell', { name: 'Ann Operator', exact: true }).waitFor();
  const userId = (await admin('listUsers', { query: 'Ann Operator' })).users[0].id;
  await screen('5-users');

  // Start the bot for the user, both chosen by name from pickers filled
  // from the lists: the private chat is named by its members.
  const userPicker = page.getByLabel('User', { exact: true });
  const botPicker = page.getByLabel('Bot', { exact: true });
  // Every user and bot, newest first, by name (the server's demo ones too).
  const everyUser = (await admin('listUsers', { limit: 100 })).users;
  const everyBot = (await admin('listBots', { limit: 100 })).bots;
  const userName = (u) => u.display_name + (u.handle ? ' (@' + u.handle + ')' : '');
  const botName = (b) => '@' + b.handle + ' (' + b.display_name + ')';
  assert.equal(userName(everyUser[0]), 'Ann Operator');
  assert.equal(botName(everyBot[0]), '@leaky_bot (Leaky Bot)');
  assert.deepEqual(await userPicker.locator('option').allTextContents(), ['Choose a user…', ...everyUser.map(userName)]);
  assert.deepEqual(await botPicker.locator('option').allTextContents(), ['Choose a bot…', ...everyBot.map(botName)]);
  await userPicker.selectOption({ label: 'Ann Operator' });
  await botPicker.selectOption({ label: '@leaky_bot (Leaky Bot)' });
  assert.deepEqual([await userPicker.inputValue(), await botPicker.inputValue()], [userId, botId]);
  await page.getByRole('button', { name: 'Start bot' }).click();
  await page.getByRole('heading', { name: 'Private chat of Ann Operator and @leaky_bot', exact: true }).waitFor();
  await assertLabelled('private chat');
  await screen('5-private-chat');
  await page.getByRole('button', { name: 'Chats', exact: true }).click();
  await page.getByRole('heading', { name: 'Chats', exact: true }).waitFor();
  await assertLabelled('chats');
  await page.getByRole('cell', { name: 'Ann Operator and @leaky_bot', exact: true }).waitFor();
  assert.equal(await page.getByText(userId).count(), 0, 'the chat list names the user, not its id');
  await screen('5-chats');
  await page.getByLabel('Group title', { exact: true }).fill('Ops room');
  await page.getByLabel('Members', { exact: true }).selectOption([{ label: 'Ann Operator' }]);
  await page.getByRole('button', { name: 'Create group' }).click();
  await page.getByRole('heading', { name: 'Group Ops room', exact: true }).waitFor();
  await page.getByRole('cell', { name: 'Ann Operator', exact: true }).waitFor();
  assert.equal(await page.getByRole('cell', { name: '@leaky_bot', exact: true }).count(), 0);
  // The picker offers only who is not a member yet.
  const addPicker = page.getByLabel('Member to add', { exact: true });
  assert.deepEqual(await addPicker.locator('option').allTextContents(), ['Choose a user or bot…',
    ...everyUser.filter((u) => u.id !== userId).map(userName), ...everyBot.map(botName)]);
  await addPicker.selectOption({ label: '@leaky_bot (Leaky Bot)' });
  await page.getByRole('button', { name: 'Add member' }).click();
  await page.getByText('Added @leaky_bot (Leaky Bot).').waitFor();
  await page.getByRole('cell', { name: '@leaky_bot', exact: true }).waitFor();
  await assertLabelled('chat');
  const chatId = (await admin('listChats', { query: 'Ops room' })).chats[0].id;
  assert.deepEqual((await admin('getChat', { chat_id: chatId })).members.map((m) => m.id).sort(), [botId, userId].sort());

  // Send as the user; the bot answers and deletes its answer; the history
  // shows the deleted message as deleted.
  await page.getByLabel('Message text', { exact: true }).fill('hello bot');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await page.getByText('Sent message 1.').waitFor();
  const sent = await bot(newToken, 'sendMessage', { chat_id: chatId, text: 'a reply to retract' });
  assert.equal(sent.status, 200);
  assert.equal((await bot(newToken, 'deleteMessage', { chat_id: chatId, message_id: sent.body.result.message_id })).status, 200);
  await page.getByRole('button', { name: 'Chats', exact: true }).click();
  await page.getByRole('button', { name: 'Open chat Ops room' }).click();
  await page.getByRole('cell', { name: 'hello bot', exact: true }).waitFor();
  await page.getByRole('cell', { name: '(deleted)', exact: true }).waitFor();
  assert.equal(await page.getByText('a reply to retract').count(), 0);
  await screen('6-chat-history');

  // A bot's chats, named.
  await page.getByRole('button', { name: 'Bots', exact: true }).click();
  await page.getByRole('button', { name: 'Open bot @leaky_bot' }).click();
  await page.getByRole('button', { name: 'Chats of @leaky_bot' }).click();
  await page.getByRole('heading', { name: 'Chats of @leaky_bot', exact: true }).waitFor();
  await page.getByRole('cell', { name: 'Ops room', exact: true }).waitFor();
  await page.getByRole('cell', { name: 'Ann Operator and @leaky_bot', exact: true }).waitFor();
  await screen('6-chats-of-bot');

  // Activity: the bot's requests and refusals of the last hour.
  await page.getByRole('button', { name: 'Activity' }).click();
  await page.getByRole('heading', { name: 'Activity', exact: true }).waitFor();
  const row = page.getByRole('row').filter({ hasText: '@leaky_bot' });
  assert.match(await row.textContent(), /bot_suspended: 1/);
  await assertLabelled('activity');
  // The service counts, each a term and its figure.
  const stats = await admin('getStats');
  const counts = await page.locator('dl[aria-label="Service counts"]').evaluate((dl) =>
    [...dl.children].map((el) => el.tagName + ' ' + el.textContent));
  assert.deepEqual(counts, [['users', 'Users'], ['bots', 'Bots'], ['chats', 'Chats'], ['messages', 'Messages'], ['schema_version', 'Schema version']]
    .flatMap(([k, label]) => ['DT ' + label, 'DD ' + stats[k]]));
  await screen('7-activity');

  // The audit log shows each step, with the peer, and no token or secret.
  await page.getByRole('button', { name: 'Audit log' }).click();
  await page.getByRole('heading', { name: 'Audit log', exact: true }).waitFor();
  await assertLabelled('audit');
  // The heading shows before the entries arrive: read the table once they
  // are in it (one render puts them all in).
  await page.locator('table[aria-label="Audit log"] td', { hasText: 'createBot' }).first().waitFor();
  const text = await page.locator('table[aria-label="Audit log"]').textContent();
  for (const m of ['createBot', 'rotateBotToken', 'updateBot', 'createUser', 'createGroup', 'addMember', 'sendUserMessage']) {
    assert.ok(text.includes(m), 'audit log shows ' + m);
  }
  assert.ok(text.includes('admin from 127.0.0.1'), 'the peer is named');
  // Targets are named: the bot by its handle, the group by its title.
  const targetOf = (method) => page.locator('table[aria-label="Audit log"] tr', { hasText: method }).first().locator('td').nth(2).textContent();
  assert.equal(await targetOf('rotateBotToken'), '@leaky_bot' + botId);
  assert.equal(await targetOf('sendUserMessage'), 'Ops room' + chatId);
  assert.equal(await targetOf('createUser'), 'Ann Operator' + userId);
  // Each entry's detail is labelled fields, not JSON.
  const detailOf = (method, target) => page.locator('table[aria-label="Audit log"] tr', { hasText: method })
    .filter({ hasText: target }).last().locator('td').nth(4)
    .evaluate((td) => [...td.querySelectorAll('dl.kv > *')].map((el) => el.tagName + ' ' + el.textContent));
  assert.deepEqual(await detailOf('createBot', '@leaky_bot'), ['DT Display name', 'DD Leaky Bot', 'DT Handle', 'DD leaky_bot',
    'DT Official', 'DD no', 'DT Quota tier', 'DD free', 'DT Verified', 'DD no']);
  assert.deepEqual(await detailOf('createGroup', 'Ops room'), ['DT Bots can send', 'DD yes', 'DT Member ids', 'DD ' + userId, 'DT Title', 'DD Ops room']);
  assert.equal(await page.locator('table[aria-label="Audit log"] td', { hasText: '{' }).count(), 0, 'no JSON in the audit table');
  for (const secretText of [oldToken, newToken, SECRET, oldToken.slice(4, 20), newToken.slice(4, 20)]) {
    assert.ok(!text.includes(secretText), 'the audit log holds no token or secret');
  }
  const log = await admin('getAuditLog', { target: botId });
  assert.deepEqual(log.entries.map((e) => e.method),
    ['startBot', 'deleteWebhook', 'updateBot', 'updateBot', 'updateBot', 'rotateBotToken', 'createBot']);
  assert.deepEqual(log.entries.map((e) => e.detail.status ?? e.detail.quota_tier ?? null),
    [null, null, 'active', 'suspended', 'standard', null, 'free']);
  const raw = JSON.stringify(await admin('getAuditLog', { limit: 100 }));
  assert.ok(![oldToken, newToken, SECRET].some((s) => raw.includes(s)));
  await screen('8-audit');

  // From a bot's page, the audit log says whose entries it shows.
  await page.getByRole('button', { name: 'Bots', exact: true }).click();
  await page.getByRole('button', { name: 'Open bot @leaky_bot' }).click();
  await page.getByRole('button', { name: 'Audit entries of @leaky_bot' }).click();
  await page.locator('#audit-about', { hasText: 'Entries about @leaky_bot.' }).waitFor();
  assert.equal(await page.locator('table[aria-label="Audit log"] tbody tr').count(), 7);
  await screen('8-audit-of-bot');

  assert.deepEqual(pageErrors, [], 'no script errors or CSP violations');
});

// What a row's or a page's sparklines draw: per series, its points, the
// total beside it and its accessible name.
const sparklines = (locator) => locator.evaluate((root) => Object.fromEntries([...root.querySelectorAll('.spark')].map((s) => [
  s.dataset.series, {
    points: s.querySelector('polyline').getAttribute('points').split(' ').map((p) => p.split(',').map(Number)),
    total: s.querySelector('.total').textContent,
    label: s.querySelector('svg').getAttribute('aria-label'),
  }])));

// A line of 60 points, one per minute, oldest first: every minute but the
// last on the base line (y 19), the last at the top (y 1, the busiest).
function assertLastMinuteOnly(line, where) {
  assert.deepEqual(line.points.map(([x]) => x), Array.from({ length: 60 }, (_, i) => 2 * i), where + ': x');
  assert.deepEqual(line.points.map(([, y]) => y), [...Array(59).fill(19), 1], where + ': y');
}

test('sparklines draw the activity the test makes, minute by minute, and sessions against the limit', async () => {
  // A bot of its own, so every figure below is this test's.
  const made = await admin('createBot', { display_name: 'Spark Bot', handle: 'spark_bot' });
  const [id, token] = [made.bot.id, made.token];
  const user = await admin('createUser', { display_name: 'Sam Spark' });
  const chat = await admin('startBot', { user_id: user.id, bot_id: id });
  // Everything below happens in one minute: when this one is nearly over,
  // wait for the next.
  const left = 60000 - (Date.now() % 60000);
  if (left < 15000) await new Promise((r) => setTimeout(r, left + 250));
  const minute = Math.floor(Date.now() / 60000) * 60;
  const N = 4;
  for (let i = 0; i < N; i++) {
    const r = await bot(token, 'sendMessage', { chat_id: chat.id, text: 'spark ' + i });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  const refused = await bot(token, 'sendMessage', { chat_id: chat.id, text: '' });
  assert.equal(refused.status, 400);
  assert.equal(refused.body.error, 'text_empty');
  // The data endpoint: 60 minutes ending with this one, all in its last slot.
  const a = await admin('getBotActivity', { bot_id: id });
  const lastSlot = (n) => Array.from({ length: 60 }, (_, i) => (i === 59 ? n : 0));
  assert.deepEqual(a.per_minute, { start: minute - 59 * 60, requests: lastSlot(N + 1), refused: lastSlot(1), messages_sent: lastSlot(N) });
  assert.deepEqual([a.requests, a.refused, a.messages_sent, a.refusals], [N + 1, 1, N, { text_empty: 1 }]);

  // The Activity view draws them in the bot's row.
  await page.setViewportSize(DESKTOP);
  await page.getByRole('button', { name: 'Activity' }).click();
  const row = page.locator(`tr[data-bot="${id}"]`);
  await row.waitFor();
  const drawn = await sparklines(row);
  assert.deepEqual(Object.keys(drawn).sort(), ['messages_sent', 'refused', 'requests']);
  for (const [series, line] of Object.entries(drawn)) assertLastMinuteOnly(line, 'Activity ' + series);
  assert.deepEqual(Object.values(drawn).map((l) => [l.total, l.label]), [
    ['5', 'Requests of @spark_bot per minute, last hour: 5 in all, at most 5 in a minute'],
    ['4', 'Messages sent by @spark_bot per minute, last hour: 4 in all, at most 4 in a minute'],
    ['1', 'Refused requests of @spark_bot per minute, last hour: 1 in all, at most 1 in a minute']]);
  assert.match(await row.textContent(), /text_empty: 1/);
  await screen('10-activity-sparklines');

  // On a phone the rows are cards: the bot's Status and Gateway sessions
  // are on screen without scrolling sideways.
  await page.getByRole('button', { name: 'Bots', exact: true }).click();
  await page.getByRole('button', { name: 'Open bot @spark_bot' }).waitFor();
  await page.setViewportSize(PHONE);
  const card = page.locator('tbody tr').filter({ has: page.getByRole('button', { name: 'Open bot @spark_bot' }) });
  for (const [label, text] of [['Status', 'active'], ['Gateway sessions', '0 of 1 session']]) {
    const cell = card.locator(`td[data-label="${label}"]`);
    assert.equal(await cell.textContent(), text);
    const box = await cell.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, label + ' is within the phone width: ' + JSON.stringify(box));
    assert.equal(await cell.evaluate((td) => getComputedStyle(td, '::before').content), `"${label}"`, label + ' is labelled');
  }
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390);
  await shot('10-bots-cards-390');
  await page.setViewportSize(DESKTOP);

  // The bot's page draws the same hour.
  await page.getByRole('button', { name: 'Open bot @spark_bot' }).click();
  await page.getByRole('heading', { name: 'Last hour, per minute', exact: true }).waitFor();
  const own = await sparklines(page.locator('#bot-minutes'));
  for (const [series, line] of Object.entries(own)) assertLastMinuteOnly(line, 'bot page ' + series);
  assert.deepEqual(Object.entries(own).map(([k, l]) => [k, l.total]), [['requests', '5'], ['messages_sent', '4'], ['refused', '1']]);

  // Sessions against the limit: a bar and plural-aware words.
  assert.equal(await page.locator('#bot-sessions').textContent(), '0 of 1 session');
  await admin('updateBot', { bot_id: id, gateway_connection_limit: 1000 });
  const ws = await openGateway(token);
  await page.getByRole('button', { name: 'Back to bots' }).click();
  await page.getByRole('button', { name: 'Open bot @spark_bot' }).click();
  await page.getByRole('heading', { name: 'Bot @spark_bot', exact: true }).waitFor();
  assert.equal(await page.locator('#bot-sessions').textContent(), '1 of 1\u00a0000 sessions');
  assert.equal(await page.locator('#bot-sessions rect.fill').getAttribute('width'), '0.1');
  await page.getByRole('button', { name: 'Rotate token' }).click();
  assert.match(await page.getByRole('alertdialog').textContent(), / 1 open gateway session will be closed with 4004\./);
  await screen('10-bot-sparklines');
  await page.getByRole('button', { name: 'Cancel' }).click();
  ws.close();
  await ws.closed;
  for (let i = 0; i < 50 && (await admin('getBot', { bot_id: id })).live.gateway_sessions !== 0; i++) await new Promise((r) => setTimeout(r, 100));
  await page.getByRole('button', { name: 'Back to bots' }).click();
  await page.getByRole('button', { name: 'Open bot @spark_bot' }).click();
  await page.getByRole('heading', { name: 'Bot @spark_bot', exact: true }).waitFor();
  assert.equal(await page.locator('#bot-sessions').textContent(), '0 of 1\u00a0000 sessions');
  await page.getByRole('button', { name: 'Rotate token' }).click();
  assert.match(await page.getByRole('alertdialog').textContent(), / 0 open gateway sessions will be closed with 4004\./);
  await page.getByRole('button', { name: 'Cancel' }).click();
  assert.deepEqual(pageErrors, [], 'no script errors or CSP violations');
});

test('a wrong secret is told clearly, and failed attempts are throttled', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Admin secret', { exact: true }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('botspace.admin')), null);
  const error = page.locator('#signin-error');
  let message = '';
  for (let i = 0; i < 12 && !/Too many/.test(message); i++) {
    await page.evaluate(() => { document.getElementById('signin-error').textContent = ''; });
    await page.getByLabel('Admin secret', { exact: true }).fill('not-the-admin-secret-' + i);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForFunction(() => document.getElementById('signin-error').textContent !== '');
    message = await error.textContent();
    if (i === 0) assert.equal(message, 'Wrong admin secret. Check it and try again.');
  }
  assert.match(message, /^Too many failed attempts from this address\. Try again in [1-6] s\.$/);
  await screen('9-throttled');
  // The API agrees: even the right secret waits now.
  const r = await call('/admin/getStats', 'Admin ' + SECRET);
  assert.equal(r.status, 429);
  assert.equal(r.body.parameters.scope, 'admin_auth');
});

test('the console loads its files at /admin/console/ and /admin/console/index.html too', async () => {
  for (const address of ['/admin/console/', '/admin/console/index.html']) {
    const p = await page.context().newPage();
    const loaded = [];
    p.on('response', (r) => loaded.push([new URL(r.url()).pathname, r.status()]));
    const errors = [];
    p.on('pageerror', (e) => errors.push(String(e)));
    const resp = await p.goto(BASE + address, { waitUntil: 'load' });
    assert.equal(resp.status(), 200, address);
    // The page and its style sheet are there; the files it names are loaded below.
    await p.getByLabel('Admin secret', { exact: true }).waitFor();
    const styled = await p.evaluate(() => [...document.styleSheets].some((s) => s.cssRules.length > 0));
    assert.ok(styled, address + ': the style sheet applies');
    for (const file of ['/admin/console/app.js', '/admin/console/app.css']) {
      assert.deepEqual(loaded.find(([path]) => path === file), [file, 200], address + ' loads ' + file);
    }
    assert.deepEqual(loaded.filter(([, status]) => status >= 400), [], address + ': nothing it links to is missing');
    assert.deepEqual(errors, [], address);
    await p.close();
  }
});
