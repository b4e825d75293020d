// The real server with the bundled model, driven by the official openai client: chat and
// completions, stream vs non-stream identical at temperature 0, usage, cached tokens, error
// classes, auth, disconnect aborts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openaiClass, startServer, metric } from './harness.mjs';

const OpenAI = await openaiClass();
let srv;
let client;

before(async () => {
  srv = await startServer(['--page-size', '16']);
  client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0);
});

const messages = [{ role: 'user', content: '12+34=' }];

test('chat: stream and non-stream give the same text and usage', async () => {
  const full = await client.chat.completions.create({
    model: 'arith', messages, temperature: 0, max_tokens: 24,
  });
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.model, 'arith');
  assert.match(full.id, /^chatcmpl-/);
  const choice = full.choices[0];
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  const stream = await client.chat.completions.create({
    model: 'arith', messages, temperature: 0, max_tokens: 24, stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let reasoning = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      reasoning += c.delta.reasoning_content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(content, choice.message.content ?? '');
  assert.equal(reasoning, choice.message.reasoning_content ?? '');
  assert.equal(finish, choice.finish_reason);
  assert.deepEqual(usage.completion_tokens, full.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens);
  if (choice.finish_reason === 'length') assert.equal(full.usage.completion_tokens, 24);
});

test('completions: stream and non-stream agree; token-id prompts and batches', async () => {
  const prompt = 'Q: 12+34=\nA:';
  const full = await client.completions.create({ model: 'arith', prompt, temperature: 0, max_tokens: 16 });
  const stream = await client.completions.create({
    model: 'arith', prompt, temperature: 0, max_tokens: 16, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, full.choices[0].text);
  const tok = await (await fetch(`${srv.base}/tokenize`, {
    method: 'POST', body: JSON.stringify({ prompt }),
  })).json();
  const byIds = await client.completions.create({
    model: 'arith', prompt: tok.tokens, temperature: 0, max_tokens: 16,
  });
  assert.equal(byIds.choices[0].text, full.choices[0].text);
  const batch = await client.completions.create({
    model: 'arith', prompt: [prompt, 'Q: 1+1=\nA:'], temperature: 0, max_tokens: 4, n: 2,
  });
  assert.equal(batch.choices.length, 4);
});

test('a repeated prompt reports cached tokens', async () => {
  const long = Array.from({ length: 40 }, (_, i) => `${i}+${i}=${2 * i}`).join('\n');
  const req = { model: 'arith', prompt: long, temperature: 0, max_tokens: 2 };
  await client.completions.create(req);
  const again = await client.completions.create(req);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
});

test('error classes answer with OpenAI error JSON', async () => {
  const post = (path, body, headers = {}) => fetch(`${srv.base}${path}`, {
    method: 'POST', body, headers: { 'Content-Type': 'application/json', ...headers },
  });
  const bad = await post('/v1/chat/completions', '{"messages": [');
  assert.equal(bad.status, 400);
  assert.ok((await bad.json()).error.message);
  await assert.rejects(
    client.chat.completions.create({ model: 'arith', messages, temperature: 'hot' }),
    (e) => e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: 'arith', messages, max_tokens: 10_000_000 }),
    (e) => e.status === 400);
  await assert.rejects(
    client.chat.completions.create({ model: 'nope', messages }),
    (e) => e.status === 404 && /arith/.test(e.message));
  await assert.rejects(
    client.completions.create({ model: 'arith', prompt: [1, 2, 1e9] }),
    (e) => e.status === 400);
  const unknown = await post('/v1/completions', JSON.stringify({
    model: 'arith', prompt: '1+1=', max_tokens: 1, some_new_field: { x: 1 },
  }));
  assert.equal(unknown.status, 200);
});

test('/health, /v1/models, /metrics, /generate', async () => {
  assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  assert.equal((await fetch(`${srv.base}/health_generate`)).status, 200);
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'arith');
  const g = await (await fetch(`${srv.base}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: '12+34=', sampling_params: { max_new_tokens: 4, temperature: 0 } }),
  })).json();
  assert.ok(g.meta_info.finish_reason.type);
  assert.equal(typeof g.meta_info.cached_tokens, 'number');
  const m = await (await fetch(`${srv.base}/metrics`)).text();
  for (const name of ['mxserve:num_requests_running', 'mxserve:generation_tokens_total',
                      'mxserve:time_to_first_token_seconds_bucket', 'mxserve:kv_pages_total']) {
    assert.ok(m.includes(name), name);
  }
});

test('a client that disconnects aborts its request', async () => {
  const ac = new AbortController();
  const stream = await client.completions.create({
    model: 'arith', prompt: '1+', max_tokens: 4000, ignore_eos: true, stream: true,
  }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const _ of stream) {
      if (++n === 3) ac.abort();  // the client ends the iteration quietly or throws
    }
  } catch (e) {
    assert.equal(e.name, 'APIUserAbortError');
  }
  assert.ok(n >= 3, `only ${n} chunks before the stream ended`);
  const t0 = Date.now();
  let running = 1;
  while (Date.now() - t0 < 3000) {
    running = await metric(srv.base, 'mxserve:num_requests_running');
    if (running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(running, 0, 'the aborted request still runs');
  const gen1 = await metric(srv.base, 'mxserve:generation_tokens_total');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await metric(srv.base, 'mxserve:generation_tokens_total'), gen1, 'ghost decoding');
});
