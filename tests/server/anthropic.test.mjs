// The real server with the bundled model, driven by the official Anthropic client on
// /v1/messages: messages.create and messages.stream (the same result at temperature 0, the exact
// event sequence), tools with forced calls and a tool_result round trip, stop_sequences,
// prefix-cache usage, countTokens, x-api-key auth, and errors as the SDK's typed exceptions.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicClass, startServer, metric } from './harness.mjs';

const Anthropic = await anthropicClass();
const KEY = 'sk-test-anthropic';
let srv;
let client;

before(async () => {
  srv = await startServer(['--page-size', '16', '--api-key', KEY]);
  client = new Anthropic({ baseURL: srv.base, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0);
});

const messages = [{ role: 'user', content: '12+34=' }];
const tools = [{
  name: 'add',
  description: 'Adds two integers',
  input_schema: {
    type: 'object',
    properties: {
      a: { type: 'integer', minimum: 0, maximum: 99 },
      b: { type: 'integer', minimum: 0, maximum: 99 },
    },
    required: ['a', 'b'],
  },
}];

test('create and stream give the same message at temperature 0', async () => {
  const req = { model: 'arith', max_tokens: 24, temperature: 0, messages };
  const full = await client.messages.create(req);
  assert.match(full.id, /^msg_/);
  assert.equal(full.type, 'message');
  assert.equal(full.role, 'assistant');
  assert.equal(full.model, 'arith');
  assert.ok(['end_turn', 'max_tokens'].includes(full.stop_reason), full.stop_reason);
  assert.ok(full.content.length > 0);
  assert.equal(full.content[0].type, 'text');
  assert.equal(full.usage.output_tokens > 0, true);
  if (full.stop_reason === 'max_tokens') assert.equal(full.usage.output_tokens, 24);

  const events = [];
  const stream = client.messages.stream(req);
  stream.on('streamEvent', (e) => events.push(e.type));
  const streamed = await stream.finalMessage();
  assert.deepEqual(streamed.content, full.content);
  assert.equal(streamed.stop_reason, full.stop_reason);
  assert.equal(streamed.usage.output_tokens, full.usage.output_tokens);
  assert.equal(streamed.usage.input_tokens + streamed.usage.cache_read_input_tokens,
               full.usage.input_tokens + full.usage.cache_read_input_tokens);
  // message_start, ping, then one text block, message_delta, message_stop.
  assert.equal(events[0], 'message_start');
  const tail = events.filter((t) => t !== 'ping');
  assert.deepEqual(tail.slice(0, 2), ['message_start', 'content_block_start']);
  assert.deepEqual(tail.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(tail.slice(2, -3).every((t) => t === 'content_block_delta'), tail.join(','));
});

test('the raw stream opens with message_start then ping, as named SSE events', async () => {
  const r = await fetch(`${srv.base}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY,
               'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'arith', max_tokens: 4, temperature: 0, messages,
                           stream: true }),
  });
  assert.equal(r.status, 200);
  const names = [...(await r.text()).matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
  assert.deepEqual(names.slice(0, 2), ['message_start', 'ping']);
  assert.equal(names.at(-1), 'message_stop');
});

test('a forced tool call, then its tool_result, streamed and not', async () => {
  const req = {
    model: 'arith', max_tokens: 300, temperature: 0, tools,
    tool_choice: { type: 'tool', name: 'add', disable_parallel_tool_use: true },
    messages: [{ role: 'user', content: 'What is 12+34? Use the tool.' }],
  };
  const full = await client.messages.create(req);
  assert.equal(full.stop_reason, 'tool_use');
  const uses = full.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.match(uses[0].id, /^toolu_/);
  assert.equal(uses[0].name, 'add');
  assert.equal(typeof uses[0].input.a, 'number');
  assert.equal(typeof uses[0].input.b, 'number');

  const streamed = await client.messages.stream(req).finalMessage();
  const suses = streamed.content.filter((b) => b.type === 'tool_use');
  assert.equal(suses.length, 1);
  assert.deepEqual(suses[0].input, uses[0].input);
  assert.equal(streamed.stop_reason, 'tool_use');

  // The round trip: the assistant turn with its tool_use, then the tool_result.
  const next = await client.messages.create({
    model: 'arith', max_tokens: 16, temperature: 0, tools,
    messages: [
      ...req.messages,
      { role: 'assistant', content: full.content },
      { role: 'user', content: [
        { type: 'tool_result', tool_use_id: uses[0].id, content: '46' },
        { type: 'text', text: 'So?' },
      ] },
    ],
  });
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(next.stop_reason));
  assert.ok(next.usage.input_tokens + next.usage.cache_read_input_tokens
            > full.usage.input_tokens + full.usage.cache_read_input_tokens);
});

test('tool_choice any forces a call; none leaves the tools out', async () => {
  const any = await client.messages.create({
    model: 'arith', max_tokens: 300, temperature: 0, tools,
    tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages,
  });
  assert.equal(any.stop_reason, 'tool_use');
  assert.equal(any.content.filter((b) => b.type === 'tool_use').length, 1);
  const none = await client.messages.create({
    model: 'arith', max_tokens: 8, temperature: 0, tools, tool_choice: { type: 'none' },
    messages,
  });
  assert.ok(none.content.every((b) => b.type !== 'tool_use'));
});

test('stop_sequences end the message with stop_sequence', async () => {
  const full = await client.messages.create({
    model: 'arith', max_tokens: 24, temperature: 0, messages,
  });
  const text = full.content[0].text;
  assert.ok(text.length >= 2, `text too short to cut: ${JSON.stringify(text)}`);
  const stop = text.slice(1, 2);
  const cut = await client.messages.create({
    model: 'arith', max_tokens: 24, temperature: 0, messages, stop_sequences: [stop],
  });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(cut.content[0].text, text.slice(0, text.indexOf(stop)));
});

test('a repeated prompt reads the prefix cache; countTokens counts the prompt', async () => {
  const long = Array.from({ length: 40 }, (_, i) => `${i}+${i}=${2 * i}`).join('\n');
  const req = {
    model: 'arith', max_tokens: 2, temperature: 0, system: [{ type: 'text', text: 'Add.' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: long }] }],
  };
  await client.messages.create(req);
  const again = await client.messages.create(req);
  assert.ok(again.usage.cache_read_input_tokens > 0, JSON.stringify(again.usage));
  assert.equal(again.usage.cache_creation_input_tokens, 0);
  const counted = await client.messages.countTokens({
    model: 'arith', system: req.system, messages: req.messages,
  });
  assert.equal(counted.input_tokens,
               again.usage.input_tokens + again.usage.cache_read_input_tokens);
});

test('thinking blocks of earlier turns are accepted; thinking config is', async () => {
  const r = await client.messages.create({
    model: 'arith', max_tokens: 8, temperature: 0, thinking: { type: 'disabled' },
    messages: [
      { role: 'user', content: '1+1=' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'one and one', signature: '' },
                                     { type: 'text', text: '2' }] },
      { role: 'user', content: '2+2=' },
    ],
  });
  assert.ok(r.content.every((b) => b.type !== 'thinking'));
  await client.messages.create({
    model: 'arith', max_tokens: 8, temperature: 0,
    thinking: { type: 'enabled', budget_tokens: 1024 }, messages,
  });
});

test('errors surface as the SDK typed exceptions with Anthropic error bodies', async () => {
  await assert.rejects(
    client.messages.create({ model: 'arith', messages }),  // no max_tokens
    (e) => e instanceof Anthropic.BadRequestError && e.error.type === 'error'
           && e.error.error.type === 'invalid_request_error' && /max_tokens/.test(e.message));
  await assert.rejects(
    client.messages.create({ model: 'arith', max_tokens: 4, messages: [
      { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png',
                                                           data: 'AAAA' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && /image/.test(e.message));
  await assert.rejects(
    client.messages.create({ model: 'nope', max_tokens: 4, messages }),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error'
           && /arith/.test(e.message));
  const wrong = new Anthropic({ baseURL: srv.base, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    wrong.messages.create({ model: 'arith', max_tokens: 4, messages }),
    (e) => e instanceof Anthropic.AuthenticationError
           && e.error.error.type === 'authentication_error');
  // Bearer works as well as x-api-key.
  const bearer = await fetch(`${srv.base}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: 'arith', max_tokens: 2, messages }),
  });
  assert.equal(bearer.status, 200);
});

test('per-route metrics count /v1/messages', async () => {
  const n = await metric(srv.base, 'mxserve:route_requests_total{route="/v1/messages"}',
                         { 'x-api-key': KEY });
  assert.ok(n > 0, String(n));
});

test('a client that disconnects from a stream aborts its request', async () => {
  const ac = new AbortController();
  // The schema (structured output) keeps the model from ending before the abort.
  const stream = client.messages.stream({
    model: 'arith', max_tokens: 4000, messages: [{ role: 'user', content: '1+' }],
    output_format: { type: 'json_schema', schema: { type: 'string', minLength: 3000 } },
  }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const e of stream) {
      if (e.type === 'content_block_delta' && ++n === 3) ac.abort();
    }
  } catch (e) {
    assert.ok(/abort/i.test(e.name + e.message), String(e));
  }
  assert.ok(n >= 3, `only ${n} deltas before the stream ended`);
  const hdr = { 'x-api-key': KEY };
  const t0 = Date.now();
  let running = 1;
  while (Date.now() - t0 < 3000) {
    running = await metric(srv.base, 'mxserve:num_requests_running', hdr);
    if (running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(running, 0, 'the aborted request still runs');
});
