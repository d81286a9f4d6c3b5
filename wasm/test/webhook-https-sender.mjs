// The sending side of the HTTPS webhook test (webhooks.test.mjs), in a
// process of its own: Node reads NODE_EXTRA_CA_CERTS, the operator's way to
// trust another CA, only when it starts, so the test starts this with it
// set to a throwaway CA. Not a test itself (not *.test.mjs).
//
// A service on the system clock that delivers its webhooks itself, with
// loopback allowed (the receivers are on it) and http not: one JSON command
// a line on stdin, one JSON answer a line on stdout.
//   {"set": URL}          setWebhook; answers its result and the world's ids
//   {"say": TEXT}         the user says TEXT; answers the message
//   {"info": true}        answers getWebhookInfo
import { createInterface } from 'node:readline';
import { bs, SECRET, ADMIN } from './helpers.mjs';

const svc = new bs.Service({ admin_secret: SECRET, clock: 'system', webhook_allow_private_addresses: true });
const ok = (path, body, headers = ADMIN) => {
  const r = bs.decodeResponse(svc.handleRequest(bs.encodeRequest('POST', path, headers, body)));
  if (r.status !== 200) throw new Error(`${path} -> ${r.status} ${r.text()}`);
  return r.json().result;
};
const user = ok('/admin/createUser', { display_name: 'Ann' });
const { bot, token } = ok('/admin/createBot', { display_name: 'Hook', handle: 'hook_bot' });
const chat = ok('/admin/startBot', { user_id: user.id, bot_id: bot.id });
const asBot = { Authorization: `Bot ${token}` };

for await (const line of createInterface({ input: process.stdin })) {
  const c = JSON.parse(line);
  let answer;
  if (c.set) answer = { result: ok('/bot/setWebhook', { url: c.set }, asBot), user, bot, chat };
  else if (c.say) answer = ok('/admin/sendUserMessage', { user_id: user.id, chat_id: chat.id, text: c.say });
  else answer = ok('/bot/getWebhookInfo', {}, asBot);
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
svc.free();
