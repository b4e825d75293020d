// Agent sessions on the bundled model served with GLM-4.7's template (which takes
// clear_thinking): a 10-turn, tool-using session with thinking on, each turn sending back what
// the server returned, reuses the whole previous prompt from the prefix cache on every turn
// (cached >= previous prompt - one KV page), through chat completions, /v1/messages and
// /v1/responses alike; and a thinking budget on chat completions: reasoning within the budget,
// one answer after it, the same streaming or not.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { SOURCE_DIR, startServer } from './harness.mjs';

const GLM47 = join(SOURCE_DIR, '..', 'shared', 'chat-templates', 'glm-4.7.jinja');
const PAGE = 16;
const BUDGET = 6;  // reasoning tokens per turn (the bundled model never learned to stop thinking)
let srv;

before(async () => {
  srv = await startServer(['--chat-template', GLM47, '--page-size', String(PAGE),
                           '--reasoning-budget-low', String(BUDGET)]);
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0);
});

async function post(path, body) {
  const r = await fetch(`${srv.base}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  return JSON.parse(text);
}

// Two tools whose calls stay short under the forced-call grammar.
const params = {
  now: { type: 'object', properties: {} },
  weather: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } },
             required: ['city'] },
};

// Runs 10 turns: `step(history, turn)` sends one request (a forced tool call on even turns, the
// model's free answer on odd ones) and returns { prompt, cached, reasoning, history }, the
// history extended by what the server returned and the tool results or the next user message.
async function session(step, history) {
  let prev = null;
  let reasoned = 0;
  for (let turn = 0; turn < 10; ++turn) {
    const r = await step(history, turn);
    if (prev !== null) {
      assert.ok(r.cached >= prev - PAGE,
                `turn ${turn}: ${r.cached} cached tokens of a prompt of ${r.prompt}, the previous `
                + `prompt had ${prev}`);
    }
    assert.ok(r.prompt > (prev ?? 0), `turn ${turn}: the prompt grows`);
    prev = r.prompt;
    reasoned += r.reasoning.length > 0 ? 1 : 0;
    history = r.history;
  }
  // The session had reasoning to lose: every turn's template render could have dropped it.
  assert.ok(reasoned >= 5, `${reasoned} turns with reasoning`);
}

test('chat completions: every turn reuses the whole previous prompt', async () => {
  const tools = Object.entries(params).map(([name, parameters]) =>
    ({ type: 'function', function: { name, parameters } }));
  await session(async (messages, turn) => {
    const j = await post('/v1/chat/completions', {
      messages, tools, max_tokens: 120, temperature: 0, thinking_budget: BUDGET,
      tool_choice: turn % 2 === 0 ? 'required' : 'auto', parallel_tool_calls: false,
    });
    const msg = j.choices[0].message;
    const next = [...messages, msg];  // exactly what the server returned
    if (turn % 2 === 0) assert.equal(msg.tool_calls?.length, 1, JSON.stringify(j));
    for (const c of msg.tool_calls ?? []) {
      next.push({ role: 'tool', tool_call_id: c.id, content: `{"ok": ${turn}}` });
    }
    if (!msg.tool_calls) next.push({ role: 'user', content: `${turn}+1=` });
    assert.ok(j.usage.completion_tokens_details.reasoning_tokens <= BUDGET);
    return { prompt: j.usage.prompt_tokens, cached: j.usage.prompt_tokens_details.cached_tokens,
             reasoning: msg.reasoning_content ?? '', history: next };
  }, [{ role: 'user', content: 'What is the weather? Then 12+34=' }]);
});

test('/v1/messages: every turn reuses the whole previous prompt', async () => {
  const tools = Object.entries(params).map(([name, input_schema]) => ({ name, input_schema }));
  await session(async (messages, turn) => {
    const j = await post('/v1/messages', {
      messages, tools, max_tokens: 120, temperature: 0,
      thinking: { type: 'enabled', budget_tokens: BUDGET },
      tool_choice: turn % 2 === 0 ? { type: 'any', disable_parallel_tool_use: true }
                                  : { type: 'auto' },
    });
    const next = [...messages, { role: 'assistant', content: j.content }];
    const uses = j.content.filter((b) => b.type === 'tool_use');
    if (turn % 2 === 0) assert.equal(uses.length, 1, JSON.stringify(j));
    if (uses.length > 0) {
      next.push({ role: 'user', content: uses.map((u) =>
        ({ type: 'tool_result', tool_use_id: u.id, content: `{"ok": ${turn}}` })) });
    } else {
      next.push({ role: 'user', content: `${turn}+1=` });
    }
    const thinking = j.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');
    return { prompt: j.usage.input_tokens + j.usage.cache_read_input_tokens,
             cached: j.usage.cache_read_input_tokens, reasoning: thinking, history: next };
  }, [{ role: 'user', content: 'What is the weather? Then 12+34=' }]);
});

test('/v1/responses: every turn reuses the whole previous prompt', async () => {
  const tools = Object.entries(params).map(([name, parameters]) =>
    ({ type: 'function', name, parameters }));
  await session(async (input, turn) => {
    const j = await post('/v1/responses', {
      input, tools, max_output_tokens: 120, temperature: 0, reasoning: { effort: 'low' },
      tool_choice: turn % 2 === 0 ? 'required' : 'auto', parallel_tool_calls: false, store: false,
    });
    const next = [...input, ...j.output];  // the output items as they came
    const calls = j.output.filter((o) => o.type === 'function_call');
    if (turn % 2 === 0) assert.equal(calls.length, 1, JSON.stringify(j));
    for (const c of calls) {
      next.push({ type: 'function_call_output', call_id: c.call_id, output: `{"ok": ${turn}}` });
    }
    if (calls.length === 0) next.push({ role: 'user', content: `${turn}+1=` });
    assert.ok(j.usage.output_tokens_details.reasoning_tokens <= BUDGET);
    const reasoning = j.output.filter((o) => o.type === 'reasoning')
      .flatMap((o) => o.content.map((c) => c.text)).join('');
    return { prompt: j.usage.input_tokens, cached: j.usage.input_tokens_details.cached_tokens,
             reasoning, history: next };
  }, [{ role: 'user', content: 'What is the weather? Then 12+34=' }]);
});

test('chat thinking_budget: reasoning within it, one answer, stream == non-stream', async () => {
  const req = { messages: [{ role: 'user', content: '12+34=' }], max_tokens: 48,
                temperature: 0 };
  for (const budget of [0, 3, 10]) {
    const j = await post('/v1/chat/completions', { ...req, thinking_budget: budget });
    const msg = j.choices[0].message;
    const u = j.usage.completion_tokens_details.reasoning_tokens;
    assert.ok(u <= budget, `${u} reasoning tokens, budget ${budget}`);
    assert.ok(!(msg.content ?? '').includes('</think>') && !(msg.content ?? '').includes('<think>'));
    assert.ok(j.usage.completion_tokens > u, 'an answer follows the reasoning');
    const r = await fetch(`${srv.base}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...req, thinking_budget: budget, stream: true,
                             stream_options: { include_usage: true } }),
    });
    let reasoning = '';
    let content = '';
    let usage = null;
    for (const line of (await r.text()).split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const e = JSON.parse(line.slice(6));
      if (e.usage) usage = e.usage;
      for (const c of e.choices) {
        reasoning += c.delta.reasoning_content ?? '';
        content += c.delta.content ?? '';
      }
    }
    assert.equal(reasoning, msg.reasoning_content ?? '');
    assert.equal(content, msg.content ?? '');
    assert.deepEqual(usage.completion_tokens_details, j.usage.completion_tokens_details);
    assert.equal(usage.completion_tokens, j.usage.completion_tokens);
  }
});
