// `serve --chat-template FILE` (for every model) and `--model NAME=DIR,chat-template=FILE` (one
// model): the GLM-4.7 template from ../shared renders and serves the bundled model, through chat
// completions and /v1/messages alike; a missing file stops the server with its name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { MODEL_DIR, SOURCE_DIR, startServer } from './harness.mjs';

const GLM47 = join(SOURCE_DIR, '..', 'shared', 'chat-templates', 'glm-4.7.jinja');
let srv;

before(async () => {
  // "arith" keeps the checkpoint's template; "glm47" is the same model with GLM-4.7's.
  srv = await startServer(['--page-size', '16', '--model', `glm47=${MODEL_DIR},chat-template=${GLM47}`]);
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0);
});

async function rendered(model, body) {
  const r = await fetch(`${srv.base}/tokenize`, {
    method: 'POST', body: JSON.stringify({ model, ...body }),
  });
  assert.equal(r.status, 200);
  const { tokens } = await r.json();
  const d = await fetch(`${srv.base}/detokenize`, {
    method: 'POST', body: JSON.stringify({ model, tokens }),
  });
  return (await d.json()).prompt;
}

const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object' } } }];
const messages = [{ role: 'user', content: '12+34=' }];

test('a model given --chat-template renders with that file', async () => {
  const own = await rendered('arith', { messages, tools });
  const glm = await rendered('glm47', { messages, tools });
  assert.notEqual(own, glm);
  // GLM-4.7 lists the tools in a system turn and opens <think> by default.
  assert.match(glm, /# Tools/);
  assert.match(glm, /"name": "add"/);
  assert.ok(glm.endsWith('<|assistant|><think>'), JSON.stringify(glm.slice(-40)));
  const off = await rendered('glm47', { messages, chat_template_kwargs: { enable_thinking: false } });
  assert.ok(off.endsWith('<|assistant|></think>'), JSON.stringify(off.slice(-40)));
});

test('the GLM-4.7 template serves chat and messages', async () => {
  const chat = await fetch(`${srv.base}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'glm47', messages, max_tokens: 8, temperature: 0,
                           chat_template_kwargs: { enable_thinking: false } }),
  });
  assert.equal(chat.status, 200);
  assert.equal((await chat.json()).object, 'chat.completion');
  const msg = await fetch(`${srv.base}/v1/messages`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'glm47', max_tokens: 8, temperature: 0, thinking: { type: 'disabled' },
      messages: [...messages,
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'add them' },
                                       { type: 'text', text: '46' }] },
        { role: 'user', content: 'again' }],
    }),
  });
  assert.equal(msg.status, 200, await msg.clone().text());
  assert.equal((await msg.json()).type, 'message');
});

test('a thinking budget ends the reasoning, the answer follows; stream == non-stream', async () => {
  const post = async (body) => {
    const r = await fetch(`${srv.base}/v1/messages`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, 200);
    return r;
  };
  const req = { model: 'glm47', max_tokens: 60, temperature: 0, messages };
  const free = await (await post({ ...req, thinking: { type: 'enabled', budget_tokens: 1000 } })).json();
  const bounded = await (await post({ ...req, thinking: { type: 'enabled', budget_tokens: 3 } })).json();
  const thought = (m) => m.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');
  assert.ok(thought(free).length > thought(bounded).length, JSON.stringify([free, bounded]));
  assert.ok(thought(free).startsWith(thought(bounded)));
  assert.equal(bounded.content.at(-1).type, 'text');
  // The same through the stream: the deltas add up to the same blocks.
  const sse = await (await post({ ...req, stream: true,
                                  thinking: { type: 'enabled', budget_tokens: 3 } })).text();
  const blocks = [];
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const e = JSON.parse(line.slice(6));
    if (e.type === 'content_block_start') blocks.push({ ...e.content_block });
    if (e.type === 'content_block_delta') {
      const b = blocks[e.index];
      if (e.delta.type === 'thinking_delta') b.thinking += e.delta.thinking;
      if (e.delta.type === 'text_delta') b.text += e.delta.text;
    }
  }
  assert.deepEqual(blocks, bounded.content);
});

test('a missing template file stops serve with its name', async () => {
  await assert.rejects(startServer(['--chat-template', '/nonexistent/t.jinja']),
                       /nonexistent\/t\.jinja/);
});
