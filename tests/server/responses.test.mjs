// The real server with the bundled model, driven by the official openai client on
// /v1/responses: responses.create and responses.stream (the same output at temperature 0, typed
// events with increasing sequence numbers), previous_response_id (the prompt hits the prefix
// cache), function calls and their outputs, the store's GET / input_items / DELETE routes and
// its limits, structured output, and errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openaiClass, startServer, metric } from './harness.mjs';

const OpenAI = await openaiClass();
let srv;
let client;

before(async () => {
  srv = await startServer(['--page-size', '16', '--responses-store-max-count', '8']);
  client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0);
});

// output_text as the server's items spell it (the SDK adds output_text only to create's answer).
const textOf = (r) => r.output.filter((o) => o.type === 'message')
  .flatMap((o) => o.content.map((c) => c.text)).join('');

const tools = [{
  type: 'function', name: 'add', description: 'Adds two integers',
  parameters: {
    type: 'object',
    properties: { a: { type: 'integer', minimum: 0, maximum: 99 },
                  b: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['a', 'b'],
  },
}];

test('create and stream give the same output at temperature 0', async () => {
  const req = { model: 'arith', input: '12+34=', max_output_tokens: 24, temperature: 0,
                instructions: 'Add.' };
  const full = await client.responses.create(req);
  assert.match(full.id, /^resp_/);
  assert.equal(full.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(full.status));
  if (full.status === 'incomplete') {
    assert.equal(full.incomplete_details.reason, 'max_output_tokens');
    assert.equal(full.usage.output_tokens, 24);
  }
  assert.equal(full.instructions, 'Add.');
  assert.ok(full.output_text.length > 0);
  assert.equal(full.usage.total_tokens, full.usage.input_tokens + full.usage.output_tokens);

  const types = [];
  const seqs = [];
  let last = null;
  const stream = client.responses.stream(req);
  stream.on('event', (e) => { types.push(e.type); seqs.push(e.sequence_number); last = e; });
  const streamed = await stream.finalResponse();
  assert.equal(textOf(full), full.output_text);
  assert.equal(textOf(streamed), full.output_text);
  // The last event carries the whole response (response.completed or response.incomplete).
  assert.equal(last.response.status, full.status);
  assert.deepEqual(last.response.usage, full.usage);
  assert.deepEqual(last.response.output.map((o) => o.content), full.output.map((o) => o.content));
  assert.deepEqual(streamed.output.map((o) => o.type), full.output.map((o) => o.type));
  assert.deepEqual(seqs, seqs.map((_, i) => i));
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress',
                                       'response.output_item.added',
                                       'response.content_part.added']);
  assert.ok(types.includes('response.output_text.delta'));
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
                                     'response.output_item.done', `response.${full.status}`]);
});

test('previous_response_id continues the conversation from the prefix cache', async () => {
  const long = Array.from({ length: 30 }, (_, i) => `${i}+${i}=${2 * i}`).join('\n');
  const first = await client.responses.create({
    model: 'arith', input: long, max_output_tokens: 4, temperature: 0,
  });
  const next = await client.responses.create({
    model: 'arith', previous_response_id: first.id, input: '1+1=', max_output_tokens: 4,
    temperature: 0,
  });
  assert.equal(next.previous_response_id, first.id);
  assert.ok(next.usage.input_tokens > first.usage.input_tokens);
  assert.ok(next.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(next.usage));
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.id, first.id);
  assert.equal(got.output_text ?? got.output[0].content[0].text, first.output_text);
  const items = await client.responses.inputItems.list(first.id);
  assert.equal(items.data.length, 1);
  assert.equal(items.data[0].type, 'message');
  assert.equal(items.data[0].content[0].text, long);
});

test('function calls and their outputs, streamed and not', async () => {
  const req = { model: 'arith', input: 'What is 12+34?', tools, max_output_tokens: 300,
                temperature: 0, tool_choice: { type: 'function', name: 'add' },
                parallel_tool_calls: false };
  const full = await client.responses.create(req);
  const calls = full.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'add');
  const args = JSON.parse(calls[0].arguments);
  assert.equal(typeof args.a, 'number');
  const streamed = await client.responses.stream(req).finalResponse();
  const scalls = streamed.output.filter((o) => o.type === 'function_call');
  assert.deepEqual(scalls.map((c) => c.arguments), calls.map((c) => c.arguments));

  // The output goes back with previous_response_id, or spelled out in the input.
  const out = { type: 'function_call_output', call_id: calls[0].call_id, output: '46' };
  const cont = await client.responses.create({
    model: 'arith', previous_response_id: full.id, input: [out], tools,
    max_output_tokens: 8, temperature: 0,
  });
  const spelled = await client.responses.create({
    model: 'arith', tools, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'What is 12+34?' }, ...full.output, out],
  });
  assert.equal(spelled.output_text, cont.output_text);
  assert.equal(spelled.usage.input_tokens, cont.usage.input_tokens);
});

test('text.format json_schema constrains the output', async () => {
  const r = await client.responses.create({
    model: 'arith', input: '12+34=', max_output_tokens: 64, temperature: 0,
    text: { format: { type: 'json_schema', name: 'sum', schema: {
      type: 'object', properties: { sum: { type: 'integer', minimum: 0, maximum: 999 } },
      required: ['sum'], additionalProperties: false } } },
  });
  assert.equal(r.status, 'completed');
  assert.equal(typeof JSON.parse(r.output_text).sum, 'number');
});

test('store: false, DELETE and unknown ids are 404s naming the id', async () => {
  const r = await client.responses.create({
    model: 'arith', input: '1+1=', max_output_tokens: 2, store: false,
  });
  await assert.rejects(client.responses.retrieve(r.id),
                       (e) => e instanceof OpenAI.NotFoundError && e.message.includes(r.id));
  const kept = await client.responses.create({ model: 'arith', input: '1+1=', max_output_tokens: 2 });
  await client.responses.delete(kept.id);
  await assert.rejects(client.responses.retrieve(kept.id),
                       (e) => e instanceof OpenAI.NotFoundError && e.message.includes(kept.id));
  await assert.rejects(
    client.responses.create({ model: 'arith', input: 'x', previous_response_id: 'resp_gone' }),
    (e) => e instanceof OpenAI.NotFoundError && e.message.includes('resp_gone'));
});

test('the store keeps at most --responses-store-max-count, least recently used out', async () => {
  const first = await client.responses.create({ model: 'arith', input: '1+', max_output_tokens: 1 });
  for (let i = 0; i < 8; ++i) {
    await client.responses.create({ model: 'arith', input: `${i}+`, max_output_tokens: 1 });
  }
  await assert.rejects(client.responses.retrieve(first.id), (e) => e.status === 404);
});

test('errors are OpenAI errors naming the parameter', async () => {
  await assert.rejects(client.responses.create({ model: 'arith' }),
                       (e) => e.status === 400 && /input/.test(e.message));
  await assert.rejects(
    client.responses.create({ model: 'arith', input: '1', tools: [{ type: 'web_search' }] }),
    (e) => e.status === 400 && /web_search/.test(e.message));
  await assert.rejects(
    client.responses.create({ model: 'arith', input: [{ role: 'user', content: [
      { type: 'input_image', image_url: 'http://x/y.png' }] }] }),
    (e) => e.status === 400 && /input_image/.test(e.message));
  await assert.rejects(
    client.responses.create({ model: 'arith', input: '1', max_output_tokens: 0 }),
    (e) => e.status === 400 && /max_output_tokens/.test(e.message));
  const n = await metric(srv.base, 'mxserve:route_requests_total{route="/v1/responses"}');
  assert.ok(n > 0);
});
