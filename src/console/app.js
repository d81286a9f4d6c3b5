// botspace admin console: plain DOM, no build step. Every figure comes from
// the host API (/admin/<method>) called with the secret the operator typed;
// the secret lives in memory and this tab's sessionStorage only. Text from
// the API is only ever set with textContent, never parsed as HTML.
'use strict';

const KEY = 'botspace.admin';
let secret = sessionStorage.getItem(KEY) || '';
const $ = (id) => document.getElementById(id);

// A host-API failure, with the envelope's code and description.
class ApiFailure extends Error {
  constructor(status, body) {
    super((body && body.description) || 'HTTP ' + status);
    this.status = status;
    this.code = body && body.error;
    this.parameters = (body && body.parameters) || {};
  }
}

async function api(method, body) {
  const resp = await fetch('/admin/' + method, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Admin ' + secret },
    body: JSON.stringify(body || {}),
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  });
  let data = null;
  try { data = await resp.json(); } catch (_) { /* not JSON: reported below */ }
  if (!resp.ok || !data || !data.ok) throw new ApiFailure(resp.status, data);
  return data.result;
}

// h('tag', {attrs}, ...children): strings become text nodes; arrays of
// children are flattened to any depth (a map that returns pairs of
// elements gives an array of arrays).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

// An SVG element (the sparklines and bars are drawn, not styled: SVG
// attributes are not inline style, so the CSP allows them).
function svg(tag, attrs, ...kids) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  el.append(...kids);
  return el;
}

// 1234567 -> "1 234 567" (no-break spaces: a figure never wraps).
const num = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, '\u00a0');
// "1 open gateway session", "0 open gateway sessions".
const plural = (n, one, many) => num(n) + ' ' + (n === 1 ? one : many);

// A sparkline of a per-minute series as the API returned it (oldest
// first, 60 minutes): a polyline scaled to the busiest minute, the series'
// total beside it, and the figures in its accessible name.
function sparkline(name, series, values) {
  const w = 2 * (values.length - 1), ht = 20;
  const peak = Math.max(1, ...values);
  const points = values.map((v, i) => (2 * i) + ',' + (ht - 1 - (v / peak) * (ht - 2)).toFixed(1)).join(' ');
  const total = values.reduce((a, b) => a + b, 0);
  const busiest = Math.max(0, ...values);
  const label = name + ' per minute, last hour: ' + num(total) + ' in all, at most ' + num(busiest) + ' in a minute';
  return h('span', { class: 'spark', 'data-series': series },
    svg('svg', { viewBox: '-1 0 ' + (w + 2) + ' ' + ht, width: w + 2, height: ht, role: 'img', 'aria-label': label, preserveAspectRatio: 'none' },
      svg('title', {}, label),
      svg('line', { x1: 0, y1: ht - 1, x2: w, y2: ht - 1, class: 'base' }),
      svg('polyline', { points, class: 'line' })),
    h('span', { class: 'total' }, num(total)));
}

// Gateway sessions against the limit: a bar and "12 of 1 000 sessions".
function sessionsBar(open, limit) {
  const text = num(open) + ' of ' + plural(limit, 'session', 'sessions');
  const filled = limit > 0 ? Math.min(1, open / limit) : 0;
  return h('span', { class: 'bar' },
    svg('svg', { viewBox: '0 0 100 8', width: 80, height: 8, 'aria-hidden': 'true', preserveAspectRatio: 'none' },
      svg('rect', { x: 0, y: 0, width: 100, height: 8, rx: 2, class: 'track' }),
      svg('rect', { x: 0, y: 0, width: (100 * filled).toFixed(1), height: 8, rx: 2, class: open >= limit ? 'fill full' : 'fill' })),
    h('span', { class: 'bar-text' }, text));
}

// A table whose cells carry their column's name (data-label): on a narrow
// screen each row is drawn as a card of labelled lines (app.css), so
// nothing scrolls sideways and no column is out of sight. Rows put in the
// body later are labelled as they arrive.
function table(label, heads, body) {
  const labelRows = () => {
    for (const tr of body.rows) {
      [...tr.cells].forEach((td, i) => { if (heads[i] && td.colSpan === 1) td.dataset.label = heads[i]; });
    }
  };
  labelRows();
  new MutationObserver(labelRows).observe(body, { childList: true });
  return h('div', { class: 'table-box', role: 'region', 'aria-label': label + ' (table)' },
    h('table', { 'aria-label': label }, h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col' }, t)))), body));
}

// An audit entry's detail as labelled fields: "Bot id: bot_…", lists
// joined, flags as yes or no.
function detailFields(detail) {
  const entries = Object.entries(detail || {});
  if (!entries.length) return '';
  const label = (k) => (k.charAt(0).toUpperCase() + k.slice(1)).replace(/_/g, ' ');
  const value = (k, v) => {
    if (v === null) return 'none';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (Array.isArray(v)) return v.flatMap((x, i) => (i ? [', ', value(k, x)] : [value(k, x)]));
    if (typeof v === 'object') return JSON.stringify(v);
    return /_id$|_ids$/.test(k) ? h('code', {}, String(v)) : String(v);
  };
  return h('dl', { class: 'kv' }, entries.map(([k, v]) => [h('dt', {}, label(k)), h('dd', {}, value(k, v))]));
}

// Every row of a list (newest first, at most 1 000) for a picker.
async function listAll(method, key) {
  const rows = [];
  let cursor;
  do {
    const r = await api(method, { cursor, limit: 100 });
    rows.push(...r[key]);
    cursor = r.next_cursor || undefined;
  } while (cursor && rows.length < 1000);
  return rows;
}
const userOption = (u) => [u.id, u.display_name + (u.handle ? ' (@' + u.handle + ')' : '')];
const botOption = (b) => [b.id, '@' + b.handle + ' (' + b.display_name + ')'];

// Shows a just-made panel where the operator is looking: scrolled into
// view, focus on its first button (the copy button of a token).
function reveal(panel) {
  panel.scrollIntoView({ block: 'nearest' });
  const b = panel.querySelector('button');
  if (b) b.focus({ preventScroll: true });
}

// A private chat named by its members: "Ann and @echo_bot".
function privateName(members) {
  const user = members.find((m) => !m.is_bot);
  const bot = members.find((m) => m.is_bot);
  const u = user ? (user.display_name || user.id) : 'a user';
  const b = bot ? (bot.handle ? '@' + bot.handle : bot.display_name || bot.id) : 'a bot';
  return u + ' and ' + b;
}

// A select's options: values, or [value, label] pairs; `chosen` is the
// selected value (or values, for a multiple select).
function options(list, chosen) {
  return list.map((o) => {
    const [value, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value, selected: Array.isArray(chosen) ? chosen.includes(value) : value === chosen }, label);
  });
}

let uid = 0;
// A labelled field; returns [label, input].
function field(labelText, attrs) {
  const id = 'f' + (++uid);
  const input = attrs && attrs.type === 'select'
    // Options are values, or [value, label] pairs.
    ? h('select', { id, name: attrs.name, multiple: attrs.multiple, size: attrs.size, required: attrs.required }, options(attrs.options, attrs.value))
    : h('input', Object.assign({ id }, attrs || {}));
  const isCheck = attrs && attrs.type === 'checkbox';
  // The label holds only its text: a select inside a label would add its
  // options to the control's accessible name.
  const label = h('label', { for: id }, labelText);
  return [h('span', { class: isCheck ? 'fld check' : 'fld' }, isCheck ? [input, label] : [label, input]), input];
}

function say(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

function fail(e) {
  if (e instanceof ApiFailure && e.status === 401) {
    signOut('The admin secret was refused (' + e.code + '). Sign in again.');
    return;
  }
  say(e instanceof ApiFailure ? e.code + ': ' + e.message : String(e), true);
}

const when = (s) => (s ? new Date(s * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC') : 'never');

// ------------------------------------------------------------ sign in

async function signIn(ev) {
  ev.preventDefault();
  const err = $('signin-error');
  err.textContent = '';
  secret = $('secret').value;
  try {
    await api('getStats');
  } catch (e) {
    secret = '';
    if (e instanceof ApiFailure && e.status === 429) {
      err.textContent = 'Too many failed attempts from this address. Try again in ' + (e.parameters.retry_after || 'a few') + ' s.';
    } else if (e instanceof ApiFailure && e.status === 401) {
      err.textContent = 'Wrong admin secret. Check it and try again.';
    } else {
      err.textContent = 'Cannot reach the host API: ' + e.message;
    }
    $('secret').focus();
    return;
  }
  sessionStorage.setItem(KEY, secret);
  $('secret').value = '';
  enter();
}

function signOut(message) {
  secret = '';
  sessionStorage.removeItem(KEY);
  $('view').hidden = true;
  $('view').replaceChildren();
  $('nav').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  say('');
  $('secret').focus();
}

function enter() {
  $('signin').hidden = true;
  $('nav').hidden = false;
  $('view').hidden = false;
  show('bots');
}

const views = {};
function show(name, arg) {
  for (const b of document.querySelectorAll('#nav [data-view]')) {
    if (b.dataset.view === name) b.setAttribute('aria-current', 'page'); else b.removeAttribute('aria-current');
  }
  say('');
  const root = $('view');
  root.replaceChildren();
  views[name](root, arg).catch(fail);
}

// A newest-first list with a filter and cursor paging.
function pager(onPage) {
  const stack = [];
  let next = null;
  const prev = h('button', { type: 'button', onclick: () => { stack.pop(); onPage(stack[stack.length - 1] || null); } }, 'Previous page');
  const more = h('button', { type: 'button', onclick: () => { stack.push(next); onPage(next); } }, 'Next page');
  return {
    el: h('div', { class: 'pager' }, prev, more),
    set(n) { next = n; more.disabled = !n; prev.disabled = stack.length === 0; },
    reset() { stack.length = 0; },
  };
}

// A token shown once, with a copy button.
function oneTimeToken(title, token, note) {
  const [label, input] = field(title, { type: 'text', readonly: true, value: token, class: 'mono', 'data-token': '1' });
  const copied = h('span', { role: 'status' });
  const copy = h('button', {
    type: 'button', class: 'primary',
    onclick: async () => {
      try { await navigator.clipboard.writeText(token); } catch (_) { input.select(); document.execCommand('copy'); }
      copied.textContent = 'Copied.';
    },
  }, 'Copy token');
  return h('section', { class: 'panel secret-once', 'aria-label': title + ', shown once' },
    h('p', {}, h('strong', {}, 'Shown once: '), 'store it now. Only its hash is kept; rotate to get another.'),
    label, h('p', {}, copy, ' ', copied), note ? h('p', { class: 'note' }, note) : null);
}

// ------------------------------------------------------------ bots

views.bots = async (root) => {
  const list = h('tbody');
  const [qLabel, q] = field('Search bots by handle or name', { type: 'search', name: 'query' });
  const pg = pager((c) => load(c));
  async function load(cursor) {
    const r = await api('listBots', { query: q.value, cursor, limit: 20 });
    // The row's button comes first: on a phone it is in view without
    // scrolling the table.
    list.replaceChildren(...r.bots.map((b) => h('tr', {},
      h('td', {}, h('button', { type: 'button', 'aria-label': 'Open bot @' + b.handle, onclick: () => show('bot', b.id) }, 'Open')),
      h('td', {}, '@' + b.handle), h('td', {}, b.display_name),
      h('td', {}, b.quota_tier), h('td', {}, h('span', { class: 'tag ' + b.status }, b.status)),
      h('td', {}, [b.verified ? 'verified' : '', b.official ? 'official' : ''].filter(Boolean).join(', ') || 'none'),
      h('td', {}, sessionsBar(b.live.gateway_sessions, b.live.gateway_connection_limit)),
      h('td', {}, num(b.live.unacked_events)), h('td', {}, when(b.live.last_request_at)))));
    if (!r.bots.length) list.append(h('tr', {}, h('td', { colspan: 9 }, 'No bots.')));
    pg.set(r.next_cursor);
  }
  const search = h('form', { class: 'inline', role: 'search', onsubmit: (e) => { e.preventDefault(); pg.reset(); load(null).catch(fail); } },
    qLabel, h('button', { type: 'submit' }, 'Search'));

  const [nLabel, name] = field('Display name', { name: 'display_name', required: true });
  const [hLabel, handle] = field('Handle', { name: 'handle', required: true });
  const [tLabel, tier] = field('Tier', { type: 'select', name: 'quota_tier', options: ['free', 'standard', 'official'], value: 'free' });
  const [vLabel, verified] = field('Verified', { type: 'checkbox', name: 'verified' });
  const [oLabel, official] = field('Official', { type: 'checkbox', name: 'official' });
  // The token panel goes right under the form that made it.
  const created = h('div', { id: 'created-bot' });
  const create = h('form', {
    class: 'inline', 'aria-label': 'Create a bot',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const r = await api('createBot', { display_name: name.value, handle: handle.value, quota_tier: tier.value, verified: verified.checked, official: official.checked });
        created.replaceChildren(oneTimeToken('Token of @' + r.bot.handle, r.token),
          h('p', {}, h('button', { type: 'button', onclick: () => show('bot', r.bot.id) }, 'Open @' + r.bot.handle)));
        say('Created bot @' + r.bot.handle + ' (' + r.bot.display_name + ').');
        create.reset();
        reveal(created);
        await load(null);
        // The list above may have grown: keep the token in view.
        created.scrollIntoView({ block: 'nearest' });
      } catch (err) { fail(err); }
    },
  }, nLabel, hLabel, tLabel, vLabel, oLabel, h('button', { type: 'submit', class: 'primary' }, 'Create bot'));

  root.append(h('h2', {}, 'Bots'), search,
    table('Bots', ['', 'Handle', 'Name', 'Tier', 'Status', 'Flags', 'Gateway sessions', 'Unacked events', 'Last request'], list),
    pg.el, h('h3', {}, 'Create a bot'), create, created);
  await load(null);
};

views.bot = async (root, id) => {
  const b = await api('getBot', { bot_id: id });
  const act = await api('getBotActivity', { bot_id: id });
  const hook = await api('getWebhookInfo', { bot_id: id });
  const lists = await api('getBotCommands', { bot_id: id });
  const out = h('div', { id: 'bot-result' });
  const refusals = Object.entries(act.refusals);
  root.append(h('h2', {}, 'Bot @' + b.handle), h('p', { class: 'sub' }, b.display_name, ' · ', h('code', {}, b.id)),
    h('dl', { class: 'figures', 'aria-label': 'Live figures' },
      h('dt', {}, 'Status'), h('dd', { id: 'bot-status' }, b.status),
      h('dt', {}, 'Gateway sessions'), h('dd', { id: 'bot-sessions' }, sessionsBar(b.live.gateway_sessions, b.live.gateway_connection_limit)),
      h('dt', {}, 'Unacknowledged events'), h('dd', {}, num(b.live.unacked_events)),
      h('dt', {}, 'Last request'), h('dd', {}, when(b.live.last_request_at)),
      h('dt', {}, 'Refusals by code, last hour'), h('dd', {}, refusals.length ? refusals.map(([k, v]) => k + ': ' + num(v)).join(', ') : 'none')),
    h('h3', {}, 'Last hour, per minute'),
    h('dl', { class: 'figures', 'aria-label': 'Last hour, per minute', id: 'bot-minutes' },
      h('dt', {}, 'Requests'), h('dd', {}, sparkline('Requests', 'requests', act.per_minute.requests)),
      h('dt', {}, 'Messages sent'), h('dd', {}, sparkline('Messages sent', 'messages_sent', act.per_minute.messages_sent)),
      h('dt', {}, 'Refused'), h('dd', {}, sparkline('Refused', 'refused', act.per_minute.refused))));

  // Edit identity, tier and flags.
  const [nL, name] = field('Display name', { name: 'display_name', value: b.display_name, required: true });
  const [hL, handle] = field('Handle', { name: 'handle', value: b.handle, required: true });
  const [tL, tier] = field('Tier', { type: 'select', name: 'quota_tier', options: ['free', 'standard', 'official'], value: b.quota_tier });
  const [vL, verified] = field('Verified', { type: 'checkbox', name: 'verified', checked: b.verified });
  const [oL, official] = field('Official', { type: 'checkbox', name: 'official', checked: b.official });
  const [aL, avatar] = field('Avatar key', { name: 'avatar_key', value: b.avatar_key || '' });
  const [gL, limit] = field('Gateway connection limit', { name: 'gateway_connection_limit', type: 'number', min: 1, max: 1024, value: b.gateway_connection_limit });
  const edit = h('form', {
    class: 'inline', 'aria-label': 'Edit bot',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('updateBot', { bot_id: id, display_name: name.value, handle: handle.value, quota_tier: tier.value, verified: verified.checked, official: official.checked, avatar_key: avatar.value || null, gateway_connection_limit: Number(limit.value) });
        show('bot', id);
        say('Saved @' + handle.value + '.');
      } catch (err) { fail(err); }
    },
  }, nL, hL, tL, vL, oL, aL, gL, h('button', { type: 'submit', class: 'primary' }, 'Save changes'));

  const suspended = b.status === 'suspended';
  const toggle = h('button', {
    type: 'button', class: suspended ? 'primary' : 'danger',
    onclick: async () => {
      try {
        await api('updateBot', { bot_id: id, status: suspended ? 'active' : 'suspended' });
        show('bot', id);
        say(suspended ? 'Restored @' + b.handle + '.' : 'Suspended @' + b.handle + ': its gateway sessions are closed with 4004.');
      } catch (err) { fail(err); }
    },
  }, suspended ? 'Restore bot' : 'Suspend bot');

  // Rotation: a confirmation step, then the new token once.
  const rotate = h('button', {
    type: 'button', class: 'danger',
    onclick: async () => {
      const now = await api('getBot', { bot_id: id }).catch(fail);
      if (!now) return;
      const open = now.live.gateway_sessions;
      const cancel = h('button', { type: 'button', onclick: () => { out.replaceChildren(); rotate.focus(); } }, 'Cancel');
      const confirm = h('button', {
        type: 'button', class: 'danger',
        onclick: async () => {
          try {
            const r = await api('rotateBotToken', { bot_id: id });
            const closedText = plural(open, 'gateway session', 'gateway sessions') + ' closed with 4004';
            out.replaceChildren(oneTimeToken('New token of @' + b.handle, r.token,
              'The old token now fails with 401. ' + closedText + '.'));
            say('Rotated the token of @' + b.handle + '; ' + closedText + '.');
            reveal(out);
          } catch (err) { fail(err); }
        },
      }, 'Yes, rotate the token');
      out.replaceChildren(h('section', { class: 'panel confirm', role: 'alertdialog', 'aria-labelledby': 'rot-q', 'aria-describedby': 'rot-d' },
        h('h3', { id: 'rot-q' }, 'Rotate the token of @' + b.handle + '?'),
        h('p', { id: 'rot-d' }, 'The current token stops working at once. ' + plural(open, 'open gateway session', 'open gateway sessions') + ' will be closed with 4004.'),
        h('p', {}, confirm, ' ', cancel)));
      reveal(out);
    },
  }, 'Rotate token');

  const opToken = b.official ? h('button', {
    type: 'button',
    onclick: async () => {
      try {
        const r = await api('getOperationalToken', { bot_id: id });
        out.replaceChildren(oneTimeToken('Operational token of @' + b.handle, r.token));
        reveal(out);
      } catch (err) { fail(err); }
    },
  }, 'Show operational token') : null;

  // How the bot hears its events: a webhook, or the gateway and long
  // polling (which read the same log when no webhook is set).
  const mode = hook.url ? 'Webhook' : 'Gateway or getUpdates';
  const clear = hook.url ? h('button', {
    type: 'button', class: 'danger',
    onclick: async () => {
      try {
        await api('deleteWebhook', { bot_id: id });
        show('bot', id);
        say('Cleared the webhook of @' + b.handle + ': its events wait for the gateway or getUpdates.');
      } catch (err) { fail(err); }
    },
  }, 'Clear webhook') : null;
  const delivery = h('dl', { class: 'figures', 'aria-label': 'Delivery', id: 'bot-delivery' },
    h('dt', {}, 'Mode'), h('dd', { id: 'bot-mode' }, mode),
    h('dt', {}, 'Webhook URL'), h('dd', { id: 'bot-webhook-url' }, hook.url ? h('code', {}, hook.url) : 'none'),
    h('dt', {}, 'Pending events'), h('dd', { id: 'bot-pending' }, String(hook.pending_update_count)),
    h('dt', {}, 'Last delivery error'), h('dd', { id: 'bot-webhook-error' },
      hook.last_error_message ? when(hook.last_error_date) + ': ' + hook.last_error_message : 'none'),
    h('dt', {}, 'Next attempt'), h('dd', {}, hook.next_attempt_date ? when(hook.next_attempt_date) : 'none waiting'));

  // The commands the bot set, per scope, as users' clients offer them.
  const scopeName = (s) => ({ default: 'Every chat (default)', all_private_chats: 'Private chats', all_group_chats: 'Groups' }[s.type] || 'Chat ' + s.chat_id);
  const commandRows = h('tbody', {}, lists.map((l) => h('tr', {},
    h('td', {}, scopeName(l.scope)),
    h('td', {}, l.commands.map((c) => h('div', {}, h('code', {}, '/' + c.command), ' ', c.description))))));
  const commands = lists.length ? table('Commands of @' + b.handle, ['Scope', 'Commands'], commandRows)
    : h('p', { class: 'sub' }, 'No commands set (setMyCommands).');

  root.append(h('h3', {}, 'Delivery'), delivery, clear ? h('p', {}, clear) : '',
    h('h3', {}, 'Identity and permissions'), edit,
    h('h3', {}, 'Access'), h('p', {}, rotate, ' ', toggle, ' ', opToken), out,
    h('h3', {}, 'Commands'), h('div', { id: 'bot-commands' }, commands),
    h('p', {}, h('button', { type: 'button', onclick: () => show('chats', { member: id, name: '@' + b.handle }) }, 'Chats of @' + b.handle), ' ',
      h('button', { type: 'button', onclick: () => show('audit', { target: id, name: '@' + b.handle }) }, 'Audit entries of @' + b.handle), ' ',
      h('button', { type: 'button', onclick: () => show('bots') }, 'Back to bots')));
};

// ------------------------------------------------------------ users

views.users = async (root) => {
  const list = h('tbody');
  const [qL, q] = field('Search users by handle or name', { type: 'search', name: 'query' });
  const pg = pager((c) => load(c));
  async function load(cursor) {
    const r = await api('listUsers', { query: q.value, cursor, limit: 20 });
    list.replaceChildren(...r.users.map((u) => h('tr', {},
      h('td', {}, h('button', { type: 'button', 'aria-label': 'Chats of ' + u.display_name, onclick: () => show('chats', { member: u.id, name: u.display_name }) }, 'Chats')),
      h('td', {}, u.display_name), h('td', {}, u.handle ? '@' + u.handle : ''), h('td', {}, h('code', {}, u.id)))));
    if (!r.users.length) list.append(h('tr', {}, h('td', { colspan: 4 }, 'No users.')));
    pg.set(r.next_cursor);
  }
  const [nL, name] = field('Display name', { name: 'display_name', required: true });
  const [hL, handle] = field('Handle (optional)', { name: 'handle' });
  const create = h('form', {
    class: 'inline', 'aria-label': 'Create a user',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const u = await api('createUser', { display_name: name.value, handle: handle.value || undefined });
        say('Created user ' + u.display_name + '.');
        create.reset();
        await Promise.all([load(null), fillPickers()]);
      } catch (err) { fail(err); }
    },
  }, nL, hL, h('button', { type: 'submit', class: 'primary' }, 'Create user'));
  // Pickers filled from the lists (again when a user is created): the
  // operator chooses names, not ids.
  const [suL, su] = field('User', { type: 'select', name: 'user_id', required: true, options: [] });
  const [sbL, sb] = field('Bot', { type: 'select', name: 'bot_id', required: true, options: [] });
  async function fillPickers() {
    const [users, bots] = await Promise.all([listAll('listUsers', 'users'), listAll('listBots', 'bots')]);
    su.replaceChildren(...options([['', 'Choose a user…'], ...users.map(userOption)], ''));
    sb.replaceChildren(...options([['', 'Choose a bot…'], ...bots.map(botOption)], ''));
  }
  const start = h('form', {
    class: 'inline', 'aria-label': 'Start a bot for a user',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const c = await api('startBot', { user_id: su.value, bot_id: sb.value });
        show('chat', c.id);
        say('Started the bot for the user: their private chat is open.');
      } catch (err) { fail(err); }
    },
  }, suL, sbL, h('button', { type: 'submit' }, 'Start bot'));
  root.append(h('h2', {}, 'Users'), h('form', { class: 'inline', role: 'search', onsubmit: (e) => { e.preventDefault(); pg.reset(); load(null).catch(fail); } }, qL, h('button', { type: 'submit' }, 'Search')),
    table('Users', ['', 'Name', 'Handle', 'Id'], list), pg.el,
    h('h3', {}, 'Create a user'), create, h('h3', {}, 'Start a bot for a user'), start);
  await Promise.all([load(null), fillPickers()]);
};

// ------------------------------------------------------------ chats

views.chats = async (root, opts) => {
  const member = (opts && opts.member) || '';
  const memberName = (opts && opts.name) || member;
  const list = h('tbody');
  const [qL, q] = field('Search groups by title', { type: 'search', name: 'query' });
  const pg = pager((c) => load(c));
  async function load(cursor) {
    const r = await api('listChats', { query: q.value, member_id: member || undefined, cursor, limit: 20 });
    // A private chat has no title: it is named by its user and its bot.
    const names = await Promise.all(r.chats.map((c) => (c.type === 'group' ? c.title
      : api('getChatMembers', { chat_id: c.id }).then(privateName))));
    list.replaceChildren(...r.chats.map((c, i) => h('tr', {},
      h('td', {}, h('button', { type: 'button', 'aria-label': 'Open chat ' + names[i], onclick: () => show('chat', c.id) }, 'Open')),
      h('td', {}, c.type), h('td', {}, names[i]),
      h('td', {}, String(c.member_count)),
      h('td', {}, c.type === 'group' ? (c.dissolved ? 'dissolved' : c.bots_can_send ? 'bots can send' : 'bots cannot send')
        : [c.started ? 'started' : 'not started', c.blocked_by_user ? 'blocked by user' : '', c.blocked_by_bot ? 'blocked by bot' : ''].filter(Boolean).join(', ')))));
    if (!r.chats.length) list.append(h('tr', {}, h('td', { colspan: 5 }, 'No chats.')));
    pg.set(r.next_cursor);
  }
  const [tL, title] = field('Group title', { name: 'title', required: true });
  const [everyUser, everyBot] = await Promise.all([listAll('listUsers', 'users'), listAll('listBots', 'bots')]);
  const [mL, members] = field('Members', { type: 'select', name: 'member_ids', multiple: true, size: 6,
    options: [...everyUser.map(userOption), ...everyBot.map(botOption)], value: member ? [member] : [] });
  const [bL, bots] = field('Bots can send', { type: 'checkbox', name: 'bots_can_send', checked: true });
  const create = h('form', {
    class: 'inline', 'aria-label': 'Create a group',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const ids = [...members.selectedOptions].map((o) => o.value);
        const c = await api('createGroup', { title: title.value, member_ids: ids, bots_can_send: bots.checked });
        show('chat', c.id);
        say('Created group ' + c.title + '.');
      } catch (err) { fail(err); }
    },
  }, tL, mL, bL, h('button', { type: 'submit', class: 'primary' }, 'Create group'));
  root.append(h('h2', {}, member ? 'Chats of ' + memberName : 'Chats'),
    h('form', { class: 'inline', role: 'search', onsubmit: (e) => { e.preventDefault(); pg.reset(); load(null).catch(fail); } }, qL, h('button', { type: 'submit' }, 'Search')),
    table('Chats', ['', 'Type', 'Chat', 'Members', 'State'], list), pg.el,
    h('h3', {}, 'Create a group'), create);
  await load(null);
};

views.chat = async (root, id) => {
  const c = await api('getChat', { chat_id: id });
  const people = await api('getChatMembers', { chat_id: id });
  const act = async (method, body, done) => {
    try { await api(method, Object.assign({ chat_id: id }, body)); show('chat', id); say(done); } catch (err) { fail(err); }
  };
  const heading = c.type === 'group' ? 'Group ' + c.title : 'Private chat of ' + privateName(people);
  const nameOf = new Map(people.map((m) => [m.id, m.handle && m.is_bot ? '@' + m.handle : m.display_name || m.id]));
  const memberRows = people.map((m) => h('tr', {}, h('td', {}, m.display_name || ''), h('td', {}, m.handle ? '@' + m.handle : ''),
    h('td', {}, m.is_bot ? 'bot' : 'user'), h('td', {}, h('code', {}, m.id)),
    h('td', {}, c.type === 'group' && !c.dissolved ? h('button', { type: 'button', 'aria-label': 'Remove ' + (m.display_name || m.id), onclick: () => act('removeMember', { member_id: m.id }, 'Removed ' + nameOf.get(m.id) + '.') }, 'Remove') : '')));
  root.append(h('h2', {}, heading), h('p', { class: 'sub' }, h('code', {}, c.id)),
    table('Members', ['Name', 'Handle', 'Kind', 'Id', ''], h('tbody', {}, memberRows)));

  if (c.type === 'group') {
    if (c.dissolved) {
      root.append(h('p', { class: 'error' }, 'This group is dissolved.'));
    } else {
      const [everyUser, everyBot] = await Promise.all([listAll('listUsers', 'users'), listAll('listBots', 'bots')]);
      const inside = new Set(people.map((m) => m.id));
      const [aL, add] = field('Member to add', { type: 'select', name: 'member_id', required: true, value: '',
        options: [['', 'Choose a user or bot…'], ...everyUser.filter((u) => !inside.has(u.id)).map(userOption),
          ...everyBot.filter((b) => !inside.has(b.id)).map(botOption)] });
      root.append(h('form', { class: 'inline', 'aria-label': 'Add a member', onsubmit: (e) => { e.preventDefault(); act('addMember', { member_id: add.value }, 'Added ' + add.selectedOptions[0].textContent + '.'); } },
        aL, h('button', { type: 'submit' }, 'Add member')),
      h('p', {}, h('button', { type: 'button', onclick: () => act('setGroupPermissions', { bots_can_send: !c.bots_can_send }, 'Permissions changed.') }, c.bots_can_send ? 'Forbid bots to send' : 'Allow bots to send'), ' ',
        h('button', { type: 'button', class: 'danger', onclick: () => act('dissolveGroup', {}, 'Dissolved.') }, 'Dissolve group')));
    }
  } else {
    root.append(h('p', {},
      h('button', { type: 'button', onclick: () => act('setBlocked', { by: 'user', blocked: !c.blocked_by_user }, 'Saved.') }, c.blocked_by_user ? 'Unblock (user side)' : 'Block bot (as the user)'), ' ',
      h('button', { type: 'button', onclick: () => act('setBlocked', { by: 'bot', blocked: !c.blocked_by_bot }, 'Saved.') }, c.blocked_by_bot ? 'Unblock (bot side)' : 'Block user (as the bot)')));
  }

  // Send as one of the chat's users.
  const users = people.filter((m) => !m.is_bot);
  if (users.length && !c.dissolved) {
    const [uL, user] = field('Send as', { type: 'select', name: 'user_id', options: users.map((u) => [u.id, (u.display_name || u.id) + (u.handle ? ' (@' + u.handle + ')' : '')]), value: users[0].id });
    const [mL, text] = field('Message text', { name: 'text', required: true, maxlength: 5000 });
    root.append(h('h3', {}, 'Send as a user'), h('form', {
      class: 'inline', 'aria-label': 'Send as a user',
      onsubmit: async (e) => {
        e.preventDefault();
        try { const m = await api('sendUserMessage', { user_id: user.value, chat_id: id, text: text.value }); show('chat', id); say('Sent message ' + m.message_id + '.'); } catch (err) { fail(err); }
      },
    }, uL, mL, h('button', { type: 'submit', class: 'primary' }, 'Send')));
  }

  // History, oldest first, 50 at a time; deleted messages stay as deleted.
  // Senders are named from the current members; a former one by its id.
  const names = new Map(people.map((m) => [m.id, m.display_name || m.id]));
  const who = (f) => (names.get(f.id) || f.id) + (f.is_bot ? ' (bot)' : '');
  const hist = h('tbody');
  let after = 0;
  const more = h('button', { type: 'button', onclick: () => page().catch(fail) }, 'Load more history');
  async function page() {
    const msgs = await api('getChatHistory', { chat_id: id, after_message_id: String(after), limit: 50 });
    for (const m of msgs) {
      after = Number(m.message_id);
      hist.append(m.deleted
        ? h('tr', { class: 'deleted' }, h('td', {}, m.message_id), h('td', {}, ''), h('td', {}, '(deleted)'), h('td', {}, ''))
        : h('tr', {}, h('td', {}, m.message_id), h('td', {}, m.from ? who(m.from) : ''), h('td', {}, m.text), h('td', {}, when(m.date))));
    }
    more.disabled = msgs.length < 50;
  }
  root.append(h('h3', {}, 'History'),
    table('History', ['#', 'From', 'Text', 'Date'], hist), more,
    h('p', {}, h('button', { type: 'button', onclick: () => show('audit', { target: id, name: heading }) }, 'Audit entries of this chat'), ' ',
      h('button', { type: 'button', onclick: () => show('chats') }, 'Back to chats')));
  await page();
};

// ------------------------------------------------------------ activity

views.activity = async (root) => {
  const s = await api('getStats');
  const bots = await api('listBots', { limit: 50 });
  const rows = [];
  for (const b of bots.bots) {
    const a = await api('getBotActivity', { bot_id: b.id });
    const refusals = Object.entries(a.refusals).map(([k, v]) => k + ': ' + num(v)).join(', ');
    const m = a.per_minute;
    rows.push(h('tr', { 'data-bot': b.id }, h('td', {}, '@' + b.handle),
      h('td', {}, sparkline('Requests of @' + b.handle, 'requests', m.requests)),
      h('td', {}, sparkline('Messages sent by @' + b.handle, 'messages_sent', m.messages_sent)),
      h('td', {}, sparkline('Refused requests of @' + b.handle, 'refused', m.refused)),
      h('td', {}, refusals || 'none'), h('td', {}, sessionsBar(b.live.gateway_sessions, b.live.gateway_connection_limit))));
  }
  root.append(h('h2', {}, 'Activity'),
    h('dl', { class: 'figures', 'aria-label': 'Service counts' },
      [['users', 'Users'], ['bots', 'Bots'], ['chats', 'Chats'], ['messages', 'Messages'], ['schema_version', 'Schema version']]
        .map(([k, label]) => [h('dt', {}, label), h('dd', { 'data-count': k }, String(s[k]))])),
    h('h3', {}, 'Per bot, last hour per minute (this node)'),
    table('Bot activity', ['Bot', 'Requests', 'Messages sent', 'Refused', 'Refusals by code', 'Gateway sessions'], h('tbody', {}, rows)));
};

// ------------------------------------------------------------ audit log

views.audit = async (root, about) => {
  const target = (about && about.target) || '';
  const list = h('tbody');
  const [tL, t] = field('Target id (bot, chat or user; empty for all)', { type: 'search', name: 'target', value: target, class: 'mono' });
  const stack = [];
  let nextBefore = null;
  const prev = h('button', { type: 'button', onclick: () => { stack.pop(); load(stack[stack.length - 1] || null).catch(fail); } }, 'Newer entries');
  const older = h('button', { type: 'button', onclick: () => { stack.push(nextBefore); load(nextBefore).catch(fail); } }, 'Older entries');
  // Targets are named where the console can tell: from a create entry's
  // own detail, else by asking for the bot or chat (a user has no lookup
  // by id; it keeps its id alone when its createUser is not on the page).
  const known = new Map();
  async function nameTargets(entries) {
    for (const e of entries) {
      const d = e.detail || {};
      if (!e.target || known.has(e.target)) continue;
      if (e.method === 'createBot' && d.handle) known.set(e.target, '@' + d.handle);
      else if (e.method === 'createUser' && d.display_name) known.set(e.target, d.display_name);
      else if (e.method === 'createGroup' && d.title) known.set(e.target, d.title);
    }
    const ask = [...new Set(entries.map((e) => e.target).filter((x) => x && !known.has(x)))];
    await Promise.all(ask.map(async (x) => {
      try {
        if (x.startsWith('bot_')) known.set(x, '@' + (await api('getBot', { bot_id: x })).handle);
        else if (x.startsWith('spc_')) {
          const c = await api('getChat', { chat_id: x });
          known.set(x, c.type === 'group' ? c.title : privateName(await api('getChatMembers', { chat_id: x })));
        }
      } catch (e) {
        if (e instanceof ApiFailure && e.status === 401) throw e;
        known.set(x, null); // gone, or not a bot or chat: the id alone
      }
    }));
  }
  async function load(before) {
    const r = await api('getAuditLog', { before: before || undefined, target: t.value.trim() || undefined, limit: 50 });
    await nameTargets(r.entries);
    sub.textContent = about && about.name && t.value.trim() === target ? 'Entries about ' + about.name + '.' : '';
    sub.hidden = !sub.textContent;
    list.replaceChildren(...r.entries.map((e) => h('tr', {}, h('td', {}, new Date(e.at_ms).toISOString().replace('T', ' ').replace('Z', '')), h('td', {}, e.method),
      h('td', {}, known.get(e.target) ? [h('span', { class: 'name' }, known.get(e.target)), h('br'), h('code', {}, e.target)] : h('code', {}, e.target || '')),
      h('td', {}, e.actor + (e.peer ? ' from ' + e.peer : '')),
      h('td', {}, detailFields(e.detail)))));
    if (!r.entries.length) list.append(h('tr', {}, h('td', { colspan: 5 }, 'No entries.')));
    nextBefore = r.next_before;
    older.disabled = !nextBefore;
    prev.disabled = stack.length === 0;
  }
  // Opened from a bot's or chat's page: say whose entries these are.
  const sub = h('p', { class: 'sub', id: 'audit-about' });
  root.append(h('h2', {}, 'Audit log'), sub,
    h('p', {}, 'Every change made through the host API, newest first. Tokens and secrets are never recorded.'),
    h('form', { class: 'inline', role: 'search', onsubmit: (e) => { e.preventDefault(); stack.length = 0; load(null).catch(fail); } }, tL, h('button', { type: 'submit' }, 'Filter')),
    table('Audit log', ['Time (UTC)', 'Method', 'Target', 'Actor', 'Detail'], list),
    h('div', { class: 'pager' }, prev, older));
  await load(null);
};

// ------------------------------------------------------------ start

document.addEventListener('DOMContentLoaded', () => {
  $('signin').addEventListener('submit', signIn);
  $('signout').addEventListener('click', () => signOut('Signed out.'));
  for (const b of document.querySelectorAll('#nav [data-view]')) b.addEventListener('click', () => show(b.dataset.view));
  if (secret) {
    api('getStats').then(enter, () => signOut(''));
  } else {
    $('secret').focus();
  }
});
