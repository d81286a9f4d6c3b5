// A person chats with an echo bot; both run in this page on botspace.
//
// The page plays two roles:
//  - the host (the messaging service): it owns the human user, sends what
//    they type through the host API (/admin/sendUserMessage) and renders the
//    chat from /admin/getChatHistory;
//  - the bot: it holds a gateway session (the message-level gateway an edge
//    runtime would put behind a WebSocket), receives `message_created`
//    events, answers with /bot/sendMessage and acknowledges them.
//    Its answers carry two buttons (reply_markup); a press goes through the
//    host API (/admin/pressButton), reaches the bot as a `callback_query`
//    event, and the bot's answer (/bot/answerCallbackQuery) comes back on the
//    host's stream (/admin/getUpdates, `callback_answered`), shown here.
// The database lives in IndexedDB as 2 KiB blocks (indexedDBPageStorage):
// each change writes only the blocks it touched, in one IndexedDB
// transaction, and nothing is shown as sent, nor handed to the bot, before
// that transaction is complete (`await svc.durable()`).

import { init, Service, encodeRequest, decodeResponse, BotspaceError, indexedDBPageStorage } from 'botspace';

const $ = (id) => document.getElementById(id);
const STATE_KEY = 'botspace-demo-ids';
const DB_NAME = 'botspace-demo-pages';
// How long a chat action shows (botspace keeps one for 5 s, see
// /admin/getChatActions' expires_at_ms). The bot shows none for a message
// older than that: such an event is a replay (after a reload, or with
// ?after=N) of a message that was already answered.
const ACTION_LIFETIME_MS = 5000;
// ?after=N: the bot's first gateway connection asks for every event after
// seq N again (?after=0: its whole log), to show at-least-once delivery.
const REPLAY_AFTER = new URLSearchParams(location.search).get('after');
// The buttons under each answer, and what the bot says when one is pressed.
const KEYBOARD = { inline_keyboard: [[{ text: 'Like', callback_data: 'like' }, { text: 'Dislike', callback_data: 'dislike' }]] };
const ANSWERS = { like: 'Glad you liked it!', dislike: 'Sorry, I only echo.' };

// ------------------------------------------------------------ the service

await init(); // fetches and compiles botspace_bg.wasm next to web.js

let svc;
let storage;
let ids; // { secret, userId, botId, token, chatId }

function call(path, body, auth) {
  const res = decodeResponse(svc.handleRequest(encodeRequest('POST', path, { Authorization: auth }, body)));
  const json = res.json();
  if (!json.ok) throw new Error(`${path}: ${json.error} — ${json.description}`);
  return json.result;
}
const admin = (path, body) => call(path, body, `Admin ${ids.secret}`);
const asBot = (path, body, extraHeaders) => {
  if (!extraHeaders) return call(path, body, `Bot ${ids.token}`);
  const res = decodeResponse(
    svc.handleRequest(encodeRequest('POST', path, { Authorization: `Bot ${ids.token}`, ...extraHeaders }, body)),
  );
  return res.json();
};

function deleteDatabase() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.deleteDatabase(DB_NAME);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}

async function open() {
  const saved = JSON.parse(localStorage.getItem(STATE_KEY) || 'null');
  storage = await indexedDBPageStorage(DB_NAME);
  if (saved?.chatId && storage.size() > 0) {
    ids = saved;
    svc = new Service({ admin_secret: ids.secret }, { storage });
    return;
  }
  // A first visit, or a visit cut short before the ids were kept: start over.
  if (storage.size() > 0) {
    storage.close();
    await deleteDatabase();
    storage = await indexedDBPageStorage(DB_NAME);
  }
  const secret = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  ids = { secret };
  svc = new Service({ admin_secret: secret }, { storage });
  const you = admin('/admin/createUser', { display_name: 'You' });
  const { bot, token } = admin('/admin/createBot', { display_name: 'Echo Bot', handle: 'echo_bot', quota_tier: 'standard' });
  const chat = admin('/admin/startBot', { user_id: you.id, bot_id: bot.id });
  Object.assign(ids, { userId: you.id, botId: bot.id, token, chatId: chat.id });
  await svc.durable();
  localStorage.setItem(STATE_KEY, JSON.stringify(ids));
}

// ---------------------------------------------------------------- the bot

let session;

function frame(dir, text) {
  const li = document.createElement('li');
  li.className = dir;
  li.textContent = `${dir === 'out' ? '→' : '←'} ${text}`;
  $('frames').append(li);
  li.scrollIntoView({ block: 'end' });
}

function botSend(obj) {
  const text = JSON.stringify(obj);
  frame('out', text);
  session.handleText(text);
}

let replay = REPLAY_AFTER !== null && /^[0-9]{1,15}$/.test(REPLAY_AFTER) ? `?after=${REPLAY_AFTER}` : '';

function connectBot() {
  const path = `/bot/gateway${replay}`;
  replay = ''; // a reconnection resumes from the last ack
  const upgrade = encodeRequest('GET', path, {
    Authorization: `Bot ${ids.token}`,
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16)))),
    'Sec-WebSocket-Version': '13',
  });
  session = svc.acceptGateway(upgrade);
  const every = Math.max(1000, Math.floor(svc.heartbeatIntervalMs / 2));
  setInterval(() => {
    botSend({ op: 'heartbeat' });
    runBot();
  }, every);
}

let botRun = null;
let botAgain = false;
// The bot sees nothing before the commit behind it is durable. Resolves
// once the bot has read everything (a call during a run makes it go round
// again, and gets the same promise).
function runBot() {
  if (botRun) {
    botAgain = true;
    return botRun;
  }
  botRun = (async () => {
    try {
      do {
        botAgain = false;
        await svc.durable();
        pumpBot();
      } while (botAgain);
    } finally {
      botRun = null;
    }
  })();
  return botRun;
}

function pumpBot() {
  session.handleTimeout();
  for (let out = session.pollTransmit(); out !== null; out = session.pollTransmit()) {
    if (out.type === 'close') {
      frame('in', `close ${out.code} ${out.reason}`);
      session.free();
      setTimeout(() => {
        connectBot();
        runBot();
      }, 1000);
      return;
    }
    frame('in', out.data);
    const msg = JSON.parse(out.data);
    if (msg.op !== 'event') continue;
    if (msg.type === 'message_created' && !msg.data.message.from?.is_bot) {
      const m = msg.data.message;
      // Typing only for a message of the last few seconds: a replayed old
      // one was answered already (the Idempotency-Key below returns that
      // answer, which sends nothing and so would not end the action).
      // Best effort: under a burst of messages the chat's rate limit may refuse it.
      if (Date.now() - m.date * 1000 < ACTION_LIFETIME_MS) {
        asBot('/bot/sendChatAction', { chat_id: m.chat.id, action: 'typing' }, {});
        render();
      }
      // The Idempotency-Key makes a replayed event (after a reload) harmless.
      setTimeout(() => {
        const reply = asBot(
          '/bot/sendMessage',
          { chat_id: m.chat.id, text: `Echo: ${m.text}`, reply_to_message_id: m.message_id, reply_markup: KEYBOARD },
          { 'Idempotency-Key': `echo-${m.chat.id}-${m.message_id}` },
        );
        if (!reply.ok) console.warn('reply refused', reply);
        botSend({ op: 'ack', seq: msg.seq });
        // The session writes acks at its next poll: pump now, and show the
        // answer once the ack is stored too, so a reload does not replay
        // what was just answered.
        runBot()
          .then(() => svc.durable())
          .then(render);
      }, 300);
    } else if (msg.type === 'callback_query') {
      // A press of one of its buttons: answered at once (a late answer is
      // refused once callback_answer_timeout_s has passed).
      const q = msg.data;
      const r = asBot('/bot/answerCallbackQuery', { callback_query_id: q.id, text: ANSWERS[q.data] ?? q.data }, {});
      if (!r.ok) console.warn('answer refused', r);
      botSend({ op: 'ack', seq: msg.seq });
    } else {
      botSend({ op: 'ack', seq: msg.seq }); // written by the loop's next pollTransmit
    }
  }
}

// --------------------------------------------------------------- the host

let lastRendered = 0;
let typingTimer = null;

function render() {
  for (;;) {
    const page = admin('/admin/getChatHistory', { chat_id: ids.chatId, after_message_id: String(lastRendered), limit: 100 });
    if (!page.length) break;
    for (const m of page) {
      lastRendered = Number(m.message_id);
      if (m.deleted) continue;
      const li = document.createElement('li');
      li.className = `msg ${m.from?.is_bot ? 'bot' : 'user'}`;
      li.dataset.messageId = m.message_id;
      li.textContent = m.text;
      const time = document.createElement('time');
      time.textContent = new Date(m.date * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      li.append(time);
      if (m.reply_markup) li.append(keyboard(m));
      $('messages').append(li);
      li.scrollIntoView({ block: 'end' });
    }
  }
  const typing = admin('/admin/getChatActions', { chat_id: ids.chatId });
  const status = $('status');
  status.textContent = typing.length ? 'typing…' : 'bot · runs in this page on botspace';
  status.classList.toggle('typing', typing.length > 0);
  // Draw again when the action expires: "typing…" never outlives it, even
  // when no message comes to end it.
  clearTimeout(typingTimer);
  if (typing.length) {
    const until = Math.max(...typing.map((a) => a.expires_at_ms));
    typingTimer = setTimeout(render, Math.max(0, until - Date.now()) + 20);
  }
}

// A message's keyboard: one button per callback_data; a press goes to the
// bot through the host API, and the bot's answer is shown when it comes.
function keyboard(m) {
  const box = document.createElement('div');
  box.className = 'keyboard';
  for (const row of m.reply_markup.inline_keyboard) {
    for (const b of row) {
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = b.text;
      if (b.url) button.addEventListener('click', () => window.open(b.url, '_blank', 'noopener'));
      else button.addEventListener('click', () => press(m.message_id, b.callback_data).catch(showError));
      box.append(button);
    }
  }
  return box;
}

// The host's own stream: where the bots' answers to presses come back.
let hostOffset = 0;

/** Presses a button; resolves with the bot's answer once it is shown. */
async function press(messageId, data) {
  const { callback_query_id: id } = admin('/admin/pressButton', { user_id: ids.userId, chat_id: ids.chatId, message_id: messageId, callback_data: data });
  await svc.durable();
  await runBot(); // the bot hears the press and answers
  await svc.durable();
  for (const u of admin('/admin/getUpdates', { offset: hostOffset, limit: 1000 })) {
    hostOffset = u.update_id + 1;
    if ((u.type === 'callback_answered' || u.type === 'callback_expired') && u.data.callback_query_id === id) {
      const text = u.type === 'callback_answered' ? u.data.text : 'The bot did not answer.';
      const answer = $('answer');
      answer.textContent = text;
      answer.hidden = false;
      return text;
    }
  }
  return null;
}

function showError(e) {
  $('status').textContent = e.message;
  $('status').className = 'status error';
}

/** Sends what the person typed; resolves once it is durable (then it is shown). */
async function sendUserMessage(text) {
  admin('/admin/sendUserMessage', { user_id: ids.userId, chat_id: ids.chatId, text });
  await svc.durable();
  render();
}

$('composer').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = $('message');
  const text = input.value;
  if (!text.trim()) return;
  try {
    input.value = '';
    await sendUserMessage(text);
  } catch (e) {
    input.value = text;
    $('status').textContent = e.message;
    $('status').className = 'status error';
  }
});

$('reset').addEventListener('click', async () => {
  localStorage.removeItem(STATE_KEY);
  svc.free();
  storage.close();
  await deleteDatabase();
  location.reload();
});

// For the tests: send without the form, and read the whole history.
window.botspaceDemo = {
  sendUserMessage,
  press,
  history: () => {
    const all = [];
    for (let after = 0; ; ) {
      const page = admin('/admin/getChatHistory', { chat_id: ids.chatId, after_message_id: String(after), limit: 100 });
      if (!page.length) return all;
      all.push(...page);
      after = Number(page.at(-1).message_id);
    }
  },
};

try {
  await open();
  // The wake hook tells the bot it has events (it runs in a microtask).
  svc.setWakeHook((botId) => {
    if (botId === ids.botId) runBot();
  });
  connectBot();
  runBot();
  render();
  $('message').disabled = false;
  $('send').disabled = false;
  $('message').focus();
  document.body.dataset.ready = '1';
} catch (e) {
  $('status').textContent = `botspace failed to start: ${e instanceof BotspaceError ? `${e.name} (${e.code}): ` : ''}${e.message}`;
  $('status').className = 'status error';
  document.body.dataset.ready = 'error';
  throw e;
}
