// The web page of a real `mxserve serve --api-key` in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core): the page asks for the key, shows the served
// model's status, streams a chat reply with its stats, updates the counters, and Stop aborts a
// running request in the server at once; a screenshot of the page is checked for being
// non-blank. Also: --no-webui serves no page. Skips (exit 77) without playwright-core or
// Chromium. Every wait is for a condition, with generous deadlines.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metric, startServer } from '../server/harness.mjs';
import { launchChromium } from './browser.mjs';

const SCREENSHOT = process.env.MX_WEBUI_SCREENSHOT ?? join(tmpdir(), `mxserve-webui-${process.pid}.png`);
const KEY = 'webui-test-key';
const AUTH = { Authorization: `Bearer ${KEY}` };
// A small KV pool: the default (a fraction of free memory) takes long to allocate.
const SERVER_FLAGS = ['--max-total-tokens', '65536'];

let srv;
let browser;
let page;
const pageErrors = [];

before(async () => {
  browser = await launchChromium(); // first: it skips when there is no browser
  srv = await startServer(['--api-key', KEY, ...SERVER_FLAGS]);
  page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(30_000);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
  });
});

after(async () => {
  await browser?.close();
  if (srv) assert.equal((await srv.stop()).code, 0, srv.log());
});

const tile = (key) => page.locator(`.model[data-model="arith"] .tile[data-key="${key}"] .value`);
const total = async (key) =>
  Number(await page.locator(`.model[data-model="arith"] .totals [data-key="${key}"]`).textContent());
const lastReply = () => page.locator('.msg.assistant').last();

test('the page asks for the API key, then shows the model status', async () => {
  const res = await page.goto(srv.base + '/');
  assert.equal(res.status(), 200);
  await page.locator('#auth').waitFor({ state: 'visible' });
  assert.match(await page.locator('#status-error').textContent(), /API key/);
  await page.fill('#api-key', KEY);
  await page.click('#auth button[type=submit]');
  await page.locator('.model[data-model="arith"]').waitFor();
  assert.equal(await page.locator('#auth').isHidden(), true);
  const facts = await page.locator('.model[data-model="arith"] dl.facts').textContent();
  for (const want of ['GlmMoeDsaForCausalLM', '6.03 M total', 'bf16 ×', 'KV cache dtype', 'tuned configs']) {
    assert.ok(facts.includes(want), `${want} not in: ${facts}`);
  }
  assert.equal(await tile('kv').textContent(), '0 / 1024'); // 65536 tokens / 64 per page
  assert.equal(await tile('running').textContent(), '0');
  assert.equal(await page.locator('#model').inputValue(), 'arith');
  // The thinking box starts at the model's default (its chat template's): off for the bundled
  // model, trained on non-thinking turns; on while the server says a template opens <think>;
  // back to off when it says so again, since the user has not touched the box.
  const info = await (await fetch(srv.base + '/get_server_info', { headers: AUTH })).json();
  assert.equal(info.models[0].thinking_default, false);
  assert.equal(await page.locator('#thinking').isChecked(), false);
  await page.route('**/get_server_info', async (route) => {
    const real = await route.fetch();
    const j = await real.json();
    for (const m of j.models) m.thinking_default = true;
    await route.fulfill({ response: real, json: j });
  });
  await page.waitForFunction(() => document.querySelector('#thinking').checked);
  await page.unroute('**/get_server_info');
  await page.waitForFunction(() => !document.querySelector('#thinking').checked);
  // The key lives only in the page's memory: not in storage, cookies or the URL.
  const stored = await page.evaluate(() => JSON.stringify([localStorage, sessionStorage, document.cookie, location.href]));
  assert.ok(!stored.includes(KEY), stored);
});

test('a chat reply streams, with per-reply stats, and the counters update', async () => {
  const generatedBefore = await total('generation_total');
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '64');
  await page.fill('#prompt', 'Tom has 12 apples and buys 34 more. How many apples does he have?');
  await page.press('#prompt', 'Enter');
  const reply = lastReply();
  await page.locator('.msg.assistant[data-state="done"]').first().waitFor();
  const text = (await reply.locator('.content').textContent()) +
    (await reply.locator('.reasoning div').textContent());
  assert.ok(text.trim().length > 0, 'empty reply');
  const stats = await reply.locator('.stats').textContent();
  assert.match(stats, /TTFT \d/);
  assert.match(stats, /[\d.]+ tok\/s/);
  assert.match(stats, /\d+ tokens/);
  assert.match(stats, /cached \d+ \/ \d+ prompt tokens/);
  assert.match(stats, /finish: (stop|length)/);
  const n = Number(stats.match(/(\d+) tokens/)[1]);
  // The status panel catches up on its next poll.
  await page.waitForFunction(([want]) => Number(document.querySelector(
    '.model[data-model="arith"] .totals [data-key="generation_total"]').textContent) >= want,
  [generatedBefore + n]);
  assert.ok((await total('accepted')) >= 1);
  assert.notEqual(await tile('ttft').textContent(), '—');
});

test('Stop mid-stream aborts the request in the server at once', async () => {
  const disconnectsBefore = await metric(srv.base, 'mxserve:client_disconnects_total', AUTH);
  await page.fill('#max-tokens', '20000');
  await page.check('#ignore-eos');
  await page.fill('#prompt', '1+');
  await page.click('#send');
  // Streaming: chunks keep arriving while the reply is open.
  await page.waitForFunction(() => {
    const r = [...document.querySelectorAll('.msg.assistant')].pop();
    const m = r.querySelector('.stats').textContent.match(/streaming · (\d+) chunks/);
    return r.dataset.state === 'streaming' && m && Number(m[1]) >= 20;
  });
  assert.equal(await metric(srv.base, 'mxserve:num_requests_running', AUTH), 1);
  await page.click('#stop');
  await page.locator('.msg.assistant[data-state="stopped"]').waitFor();
  let running = 1;
  for (const deadline = Date.now() + 10_000; running !== 0 && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 20));
    running = await metric(srv.base, 'mxserve:num_requests_running', AUTH);
  }
  assert.equal(running, 0, 'the stopped request still runs in the server');
  assert.equal(await metric(srv.base, 'mxserve:client_disconnects_total', AUTH), disconnectsBefore + 1);
  const generated = await metric(srv.base, 'mxserve:generation_tokens_total', AUTH);
  assert.ok(generated < 20000, `${generated} tokens: the request ran to max_tokens`);
  assert.match(await lastReply().locator('.stats').textContent(), /stopped after \d+ chunks/);
  assert.equal(await page.locator('#send').isEnabled(), true);
  assert.equal(await page.locator('#stop').isDisabled(), true);
  // The panel shows the abort.
  await page.waitForFunction(() => Number(document.querySelector(
    '.model[data-model="arith"] .totals [data-key="client_disconnects"]').textContent) >= 1);
});

test('reasoning, answer and tool calls render apart (a canned SSE stream)', async () => {
  // The server's own parsers are tested in server_tests; this checks the page's SSE reading
  // on a stream split at awkward places (CRLF, an event across two writes, a heartbeat).
  const chunk = (delta, extra = {}) => `data: ${JSON.stringify({
    object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}`;
  const events = [
    ': heartbeat',
    chunk({ role: 'assistant', reasoning_content: 'add 12 ' }),
    chunk({ reasoning_content: 'and 34' }),
    chunk({ content: 'It is ' }),
    chunk({ content: '46.' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris","days":2}' } }] }),
    `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] })}`,
    `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 30, completion_tokens: 9,
      prompt_tokens_details: { cached_tokens: 16 } } })}`,
    'data: [DONE]',
  ];
  const body = events.map((e, i) => e + (i % 2 ? '\r\n\r\n' : '\n\n')).join('');
  let sent;
  await page.route('**/v1/chat/completions', (route) => {
    sent = route.request().postDataJSON();
    route.fulfill({ status: 200, contentType: 'text/event-stream', body });
  });
  try {
    await page.click('#tools-box summary');
    await page.fill('#tools', JSON.stringify([{ type: 'function', function: { name: 'get_weather' } }]));
    await page.uncheck('#thinking');
    await page.fill('#prompt', 'weather?');
    await page.click('#send');
    const reply = lastReply();
    await reply.and(page.locator('[data-state="done"]')).waitFor();
    assert.equal(await reply.locator('.reasoning div').textContent(), 'add 12 and 34');
    assert.equal(await reply.locator('.content').textContent(), 'It is 46.');
    assert.equal(await reply.locator('.tool-call .name').textContent(), 'tool call: get_weather');
    assert.deepEqual(JSON.parse(await reply.locator('.tool-call pre').textContent()),
      { city: 'Paris', days: 2 });
    const stats = await reply.locator('.stats').textContent();
    assert.match(stats, /9 tokens/);
    assert.match(stats, /cached 16 \/ 30 prompt tokens/);
    assert.match(stats, /finish: tool_calls/);
    // What the page asked for.
    assert.equal(sent.stream, true);
    assert.deepEqual(sent.stream_options, { include_usage: true });
    assert.deepEqual(sent.chat_template_kwargs, { enable_thinking: false });
    assert.equal(sent.tools[0].function.name, 'get_weather');
    assert.equal(sent.model, 'arith');
    assert.equal(sent.messages.at(-1).content, 'weather?');
  } finally {
    await page.unroute('**/v1/chat/completions');
    await page.fill('#tools', '');
    await page.click('#tools-box summary');
  }
});

test('a screenshot of the page is not blank', async () => {
  await page.uncheck('#ignore-eos');
  await page.fill('#max-tokens', '64');
  await page.fill('#prompt', 'A baker makes 7 trays of 6 rolls. How many rolls?');
  await page.click('#send');
  await page.locator('.msg.assistant[data-state="done"]').nth(1).waitFor();
  await page.waitForTimeout(2_500); // two more polls: the sparklines get a few points
  const png = await page.screenshot({ path: SCREENSHOT });
  assert.deepEqual([...png.subarray(1, 4)].map((c) => String.fromCharCode(c)).join(''), 'PNG');
  // Decode it in a blank page and look at the pixels: many colours, no colour on almost all.
  const probe = await browser.newPage();
  const stats = await probe.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width;
    c.height = img.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const counts = new Map();
    for (let i = 0; i < d.length; i += 4) {
      const k = (d[i] >> 3) << 10 | (d[i + 1] >> 3) << 5 | d[i + 2] >> 3;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    return { width: c.width, height: c.height, colours: counts.size,
      dominant: Math.max(...counts.values()) / (d.length / 4) };
  }, png.toString('base64'));
  await probe.close();
  assert.equal(stats.width, 1280);
  assert.ok(stats.colours >= 50, `only ${stats.colours} colours`);
  assert.ok(stats.dominant < 0.9, `one colour covers ${(stats.dominant * 100).toFixed(1)} %`);
  assert.ok(readFileSync(SCREENSHOT).length > 10_000);
  assert.deepEqual(pageErrors, []);
});

test('--no-webui serves no page', async () => {
  const plain = await startServer(['--no-webui', ...SERVER_FLAGS]);
  try {
    const r = await fetch(`${plain.base}/`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, 'not_found');
    assert.equal((await fetch(`${plain.base}/webui/app.js`)).status, 404);
    assert.equal((await fetch(`${plain.base}/get_server_info`)).status, 200);
  } finally {
    assert.equal((await plain.stop()).code, 0);
  }
});
