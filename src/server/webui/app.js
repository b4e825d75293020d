// The mxserve web page: polls GET /get_server_info once a second for the status panel (with
// sparklines of the last minutes) and streams POST /v1/chat/completions (SSE over fetch) for
// the playground. With --api-key the key is asked for and kept in `apiKey` only: never in
// storage, cookies or the URL. Every string from the server is set as text, never as HTML.
'use strict';

const POLL_MS = 1000;
const WINDOW_MS = 5 * 60 * 1000; // sparklines show the last five minutes
const SVG_NS = 'http://www.w3.org/2000/svg';

let apiKey = '';
const models = new Map(); // name -> {el, tiles, totals, series, prev}
const history = []; // chat messages sent so far ({role, content})
let controller = null; // AbortController of the reply being streamed

const $ = (id) => document.getElementById(id);

function headers(extra = {}) {
  const h = { ...extra };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- formatting ----
function fmtCount(n) {
  if (n === null || n === undefined) return '—';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)} k`;
  return String(Math.round(n));
}
function fmtSeconds(s) {
  if (s === null || s === undefined) return '—';
  return s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms` : `${s.toFixed(2)} s`;
}
function fmtRate(r) {
  return r === null || r === undefined ? '—' : r >= 100 ? r.toFixed(0) : r.toFixed(1);
}
function fmtUptime(s) {
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : m ? `${m}m ${Math.floor(s % 60)}s` : `${Math.floor(s)}s`;
}
// "7.5 / 9.5 / 10 ms": one unit for the three.
function fmtPercentiles(p) {
  if (!p || !p.count) return '—';
  const v = [p.p50, p.p90, p.p99];
  const ms = v[2] < 1;
  const show = (x) => {
    const y = ms ? x * 1000 : x;
    return y >= 100 ? y.toFixed(0) : String(Number(y.toPrecision(2)));
  };
  return `${v.map(show).join(' / ')} ${ms ? 'ms' : 's'}`;
}

// ---- status panel ----
// Each tile: a label, the value shown, and the number its sparkline plots (null: no point).
const TILES = [
  ['running', 'running requests', (m) => String(m.requests.running), (m) => m.requests.running],
  ['queued', 'queued requests', (m) => String(m.requests.queued), (m) => m.requests.queued],
  ['kv', 'KV pages used / total',
    (m) => `${m.kv_cache.pages_used} / ${m.kv_cache.pages_total}`, (m) => m.kv_cache.usage * 100],
  ['hit_rate', 'radix cache hit rate',
    (m) => `${(m.radix_cache.hit_rate * 100).toFixed(1)} %`, (m) => m.radix_cache.hit_rate * 100],
  ['spec', 'spec. accept length',
    (m) => (m.speculative.accept_length > 0 ? m.speculative.accept_length.toFixed(2) : 'off'),
    (m) => m.speculative.accept_length],
  ['spec_steps', 'spec. drafts per step (auto: est. tok/s vs off)',
    (m) => (!m.speculative.auto ? (m.speculative.num_steps > 0 ? String(m.speculative.num_steps) : 'off')
      : `${m.speculative.num_steps}${m.speculative.probe ? ' (probe)' : ''}: ` +
        `${fmtRate(m.speculative.estimate_tokens_per_second)} vs ` +
        `${fmtRate(m.speculative.estimate_off_tokens_per_second)}`),
    (m) => m.speculative.num_steps],
  ['prompt_tps', 'prompt tok/s', (m, r) => fmtRate(r.prompt), (m, r) => r.prompt],
  ['gen_tps', 'generation tok/s', (m, r) => fmtRate(r.generation), (m, r) => r.generation],
  ['ttft', 'TTFT p50 / p90 / p99', (m) => fmtPercentiles(m.latency_seconds.ttft),
    (m) => m.latency_seconds.ttft.p50],
  ['itl', 'ITL p50 / p90 / p99', (m) => fmtPercentiles(m.latency_seconds.itl),
    (m) => m.latency_seconds.itl.p50],
];
// The totals line: key, label and value of each row /get_server_info lists in `totals` (the
// server's one table of metrics, server/metrics.cpp), set at each poll.
let TOTALS = [];
function setTotals(list) {
  TOTALS = (list || []).map((t) => [t.key, t.label,
    (m) => t.path.split('/').reduce((o, k) => (o == null ? o : o[k]), m)]);
}

function sparkline() {
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', '0 0 100 28');
  svg.setAttribute('preserveAspectRatio', 'none');
  const base = document.createElementNS(SVG_NS, 'line');
  for (const [k, v] of [['x1', 0], ['x2', 100], ['y1', 27.5], ['y2', 27.5]]) base.setAttribute(k, v);
  const line = document.createElementNS(SVG_NS, 'polyline');
  svg.append(base, line);
  return svg;
}

// The x axis spans the samples kept: from the first (at most WINDOW_MS ago) to now.
function drawSparkline(svg, points, now) {
  const pts = points.filter(([, v]) => v !== null && v !== undefined && Number.isFinite(v));
  const max = Math.max(1e-9, ...pts.map(([, v]) => v));
  const start = Math.min(now - 10 * POLL_MS, points.length ? points[0][0] : now);
  const coords = pts.map(([t, v]) => {
    const x = (100 * (t - start)) / (now - start);
    const y = 27 - (25 * v) / max;
    return `${x.toFixed(2)},${y.toFixed(2)}`;
  });
  svg.querySelector('polyline').setAttribute('points', coords.join(' '));
}

function facts(m) {
  const formats = Object.entries(m.weight_formats).map(([f, n]) => `${f} ×${n}`).join(', ');
  return [
    ['architecture', m.architecture || 'unknown'],
    ['parameters', m.parameters.total
      ? `${fmtCount(m.parameters.total)} total, ${fmtCount(m.parameters.active_per_token)} active per token`
      : 'unknown'],
    ['weight formats', formats || 'unknown'],
    ['KV cache dtype', m.kv_cache_dtype || 'unknown'],
    ['tuned configs', m.tuned_configs || 'unknown'],
    ['context window', `${m.context_window} tokens`],
    ['directory', m.dir],
  ];
}

function modelCard(m) {
  const card = { el: el('div', 'model'), tiles: {}, totals: {}, series: {}, prev: null };
  card.el.dataset.model = m.name;
  card.el.append(el('h3', '', m.name));
  const dl = el('dl', 'facts');
  card.facts = {};
  for (const [k] of facts(m)) {
    const dd = el('dd');
    dl.append(el('dt', '', k), dd);
    card.facts[k] = dd;
  }
  card.el.append(dl);
  const tiles = el('div', 'tiles');
  for (const [key, label] of TILES) {
    const t = el('div', 'tile');
    t.dataset.key = key;
    const value = el('div', 'value', '—');
    const svg = sparkline();
    t.append(el('div', 'label', label), value, svg);
    tiles.append(t);
    card.tiles[key] = { value, svg };
    card.series[key] = [];
  }
  card.el.append(tiles);
  const totals = el('div', 'totals');
  for (const [key, label] of TOTALS) {
    const v = el('span', '', '0');
    v.dataset.key = key;
    const item = el('span');
    item.append(`${label} `, v);
    if (totals.childElementCount) totals.append(' · ');
    totals.append(item);
    card.totals[key] = v;
  }
  card.el.append(totals);
  return card;
}

function renderModel(m, now) {
  let card = models.get(m.name);
  if (!card) {
    card = modelCard(m);
    models.set(m.name, card);
    $('models').append(card.el);
  }
  for (const [k, v] of facts(m)) card.facts[k].textContent = v;
  // Rates from two samples of the counters.
  const rates = { prompt: null, generation: null };
  const cur = { t: now, prompt: m.tokens.prompt_total, generation: m.tokens.generation_total };
  if (card.prev && now > card.prev.t) {
    const dt = (now - card.prev.t) / 1000;
    rates.prompt = Math.max(0, cur.prompt - card.prev.prompt) / dt;
    rates.generation = Math.max(0, cur.generation - card.prev.generation) / dt;
  }
  card.prev = cur;
  for (const [key, , show, plot] of TILES) {
    const series = card.series[key];
    series.push([now, plot(m, rates)]);
    while (series.length && series[0][0] < now - WINDOW_MS) series.shift();
    card.tiles[key].value.textContent = show(m, rates);
    drawSparkline(card.tiles[key].svg, series, now);
  }
  for (const [key, , value] of TOTALS) card.totals[key].textContent = String(value(m));
}

function setState(text, cls) {
  const s = $('server-state');
  s.textContent = text;
  s.className = `pill ${cls}`;
}

function syncModelSelect(names, defaultName) {
  const select = $('model');
  const have = [...select.options].map((o) => o.value);
  if (have.join('\n') === names.join('\n')) return;
  const keep = select.value;
  select.replaceChildren(...names.map((n) => new Option(n, n)));
  select.value = names.includes(keep) ? keep : defaultName || names[0] || '';
}

// The thinking box follows the selected model's default (its chat template's, from
// /get_server_info) until the user sets it.
let thinkingSetByUser = false;
let modelsByName = new Map();

function syncThinking() {
  const m = modelsByName.get($('model').value);
  if (!thinkingSetByUser && m) $('thinking').checked = Boolean(m.thinking_default);
}

function needKey(message) {
  $('auth').hidden = false;
  $('status-error').hidden = false;
  $('status-error').textContent = message;
  setState('API key needed', 'bad');
}

async function poll() {
  try {
    const res = await fetch('/get_server_info', { headers: headers(), cache: 'no-store' });
    if (res.status === 401) {
      needKey(apiKey ? 'the API key was not accepted' : 'this server needs an API key (--api-key)');
      return;
    }
    if (!res.ok) throw new Error(`GET /get_server_info: HTTP ${res.status}`);
    const info = await res.json();
    $('auth').hidden = true;
    $('status-error').hidden = true;
    setState(info.draining ? 'draining' : info.ready ? 'ready' : 'loading',
      info.ready && !info.draining ? 'ok' : 'bad');
    $('server-meta').textContent = `${info.server} ${info.version} · up ${fmtUptime(info.uptime_seconds)}` +
      ` · ${info.models.length} model(s)${info.auth ? ' · API key on' : ''}`;
    const now = Date.now();
    setTotals(info.totals);
    for (const m of info.models) renderModel(m, now);
    syncModelSelect(info.models.map((m) => m.name), info.default_model);
    modelsByName = new Map(info.models.map((m) => [m.name, m]));
    syncThinking();
    $('status-age').textContent = `updated ${new Date(now).toLocaleTimeString()}`;
  } catch (e) {
    setState('unreachable', 'bad');
    $('status-error').hidden = false;
    $('status-error').textContent = String(e.message || e);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

// ---- playground ----
function addMessage(role, label) {
  const m = el('div', `msg ${role}`);
  m.append(el('div', 'who', label));
  $('chat').append(m);
  return m;
}

// Work that needs layout (scrolling, the stats line) runs once per frame, not per chunk.
let frameTasks = null;
function onNextFrame(key, fn) {
  if (!frameTasks) {
    frameTasks = new Map();
    requestAnimationFrame(() => {
      const tasks = frameTasks;
      frameTasks = null;
      for (const f of tasks.values()) f();
    });
  }
  frameTasks.set(key, fn);
}

function scrollChat() {
  onNextFrame('scroll', () => {
    const c = $('chat');
    c.scrollTop = c.scrollHeight;
  });
}

// Reads an SSE body, calling onData(payload) for each `data:` event.
async function readSse(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
      const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data && onData(data) === false) return; // comments (heartbeats) carry no data
    }
  }
}

function toolsParam() {
  const text = $('tools').value.trim();
  if (!text) return undefined;
  const tools = JSON.parse(text); // a SyntaxError is shown on the reply
  if (!Array.isArray(tools)) throw new Error('tools must be a JSON array');
  return tools;
}

// A reply's view: reasoning (collapsible), content, tool-call blocks, and a stats line.
function replyView(msg) {
  const reasoning = el('details', 'reasoning');
  reasoning.open = true;
  reasoning.hidden = true;
  const reasoningText = el('div');
  reasoning.append(el('summary', '', 'reasoning'), reasoningText);
  const content = el('div', 'content');
  const tools = el('div', 'tool-calls');
  const stats = el('div', 'stats', 'waiting for the first token…');
  msg.append(reasoning, content, tools, stats);
  const calls = []; // by index: {name, args, nameEl, argsEl}
  let finished = false;
  return {
    // Text nodes are appended (not textContent +=): a long reply stays linear.
    reasoning(text) {
      reasoning.hidden = false;
      reasoningText.append(text);
    },
    content(text) { content.append(text); },
    toolCall(d) {
      const i = d.index ?? calls.length;
      if (!calls[i]) {
        const block = el('div', 'tool-call');
        const name = el('div', 'name');
        const args = el('pre');
        block.append(name, args);
        tools.append(block);
        calls[i] = { name: '', args: '', nameEl: name, argsEl: args };
      }
      const c = calls[i];
      if (d.function?.name) c.name += d.function.name;
      if (d.function?.arguments) c.args += d.function.arguments;
      c.nameEl.textContent = `tool call: ${c.name}`;
      try {
        c.argsEl.textContent = JSON.stringify(JSON.parse(c.args), null, 2);
      } catch {
        c.argsEl.textContent = c.args;
      }
    },
    text: () => content.textContent,
    // While streaming, at most once per frame; the final line wins over a pending one.
    progress(text) {
      onNextFrame(stats, () => {
        if (!finished) stats.textContent = text;
      });
    },
    stats(text, cls = '') {
      finished = true;
      stats.textContent = text;
      stats.className = `stats ${cls}`;
    },
  };
}

async function send(text) {
  const model = $('model').value;
  const user = { role: 'user', content: text };
  addMessage('user', 'you').append(el('div', 'content', text));
  const msg = addMessage('assistant', `assistant · ${model || 'default model'}`);
  msg.dataset.state = 'streaming';
  const view = replyView(msg);
  scrollChat();

  controller = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  const t0 = performance.now();
  let tFirst = null;
  let deltas = 0;
  let finish = null;
  let usage = null;
  try {
    const body = {
      model: model || undefined,
      messages: [...history, user],
      stream: true,
      stream_options: { include_usage: true },
      temperature: Number($('temperature').value),
      max_tokens: Number($('max-tokens').value),
      chat_template_kwargs: { enable_thinking: $('thinking').checked },
    };
    if ($('ignore-eos').checked) body.ignore_eos = true;
    const tools = toolsParam();
    if (tools) body.tools = tools;
    const res = await fetch('/v1/chat/completions', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => null);
      if (res.status === 401) needKey('the server wants an API key');
      throw new Error(`HTTP ${res.status}: ${err?.error?.message ?? res.statusText}`);
    }
    await readSse(res.body, (data) => {
      if (data === '[DONE]') return false;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices ?? []) {
        const d = c.delta ?? {};
        let got = false;
        if (d.reasoning_content) { view.reasoning(d.reasoning_content); got = true; }
        if (d.content) { view.content(d.content); got = true; }
        for (const tc of d.tool_calls ?? []) { view.toolCall(tc); got = true; }
        if (got) {
          const now = performance.now();
          if (tFirst === null) tFirst = now;
          ++deltas;
          view.progress(`streaming · ${deltas} chunks · TTFT ${fmtSeconds((tFirst - t0) / 1000)}`);
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
      scrollChat();
      return true;
    });
    // note: tok/s is over the whole reply as this page saw it (first byte sent to the last
    // received): chunks that arrive together would make a first-to-last-token rate meaningless.
    const n = usage?.completion_tokens ?? deltas;
    const seconds = (performance.now() - t0) / 1000;
    const parts = [
      `TTFT ${tFirst === null ? '—' : fmtSeconds((tFirst - t0) / 1000)}`,
      `${n} tokens in ${fmtSeconds(seconds)}`,
      `${fmtRate(n / seconds)} tok/s`,
    ];
    if (usage) {
      const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
      parts.push(`cached ${cached} / ${usage.prompt_tokens} prompt tokens`);
    }
    parts.push(`finish: ${finish ?? 'none'}`);
    view.stats(parts.join(' · '));
    msg.dataset.state = 'done';
  } catch (e) {
    if (e.name === 'AbortError') {
      view.stats(`stopped after ${deltas} chunks (the server aborts the request)`, 'stopped');
      msg.dataset.state = 'stopped';
    } else {
      view.stats(String(e.message || e), 'failed');
      msg.dataset.state = 'failed';
    }
  } finally {
    controller = null;
    $('send').disabled = false;
    $('stop').disabled = true;
    history.push(user);
    if (view.text()) history.push({ role: 'assistant', content: view.text() });
  }
}

function init() {
  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    apiKey = $('api-key').value;
    $('api-key').value = '';
    $('status-error').textContent = 'checking the key…';
  });
  $('compose').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || controller) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      $('compose').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => controller?.abort());
  $('thinking').addEventListener('change', () => { thinkingSetByUser = true; });
  $('model').addEventListener('change', syncThinking);
  $('clear').addEventListener('click', () => {
    if (controller) controller.abort();
    history.length = 0;
    $('chat').replaceChildren();
  });
  poll();
}

init();
