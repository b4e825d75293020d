// Data parallelism against the real binary and the bundled model: `--dp 2` gives the same greedy
// outputs as `--dp 1`, both replicas get requests (per-replica /metrics with dp_rank), a repeated
// prompt is served from the cache under cache_aware routing (and misses on its first repeat
// under round_robin, which sends it to the other replica), and bad --dp /
// --load-balance-method values are refused at start naming the flag.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { openaiClass, startServer, metric, MODEL_DIR, SOURCE_DIR } from './harness.mjs';

const OpenAI = await openaiClass();
const BIN = process.env.MXSERVE_BIN ?? join(SOURCE_DIR, 'build', 'release', 'src', 'cli', 'mxserve');
const common = ['--page-size', '16', '--max-total-tokens', '8192'];
let one, two, rr;

before(async () => {
  one = await startServer(common);
  two = await startServer([...common, '--dp', '2', '--load-balance-method', 'cache_aware']);
  rr = await startServer([...common, '--dp', '2', '--load-balance-method', 'round_robin']);
});
after(async () => {
  for (const s of [one, two, rr]) assert.equal((await s.stop()).code, 0);
});

const client = (srv) => new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'x', maxRetries: 0 });
// Different first tokens: no shared prefix, so cache_aware spreads them by load.
const prompts = ['1+2=', '23+45=', '367+1=', '48+9=', '5+66=', '91+8=', '7*7=', '80-3='];

test('--dp 2 gives the greedy outputs of --dp 1, and both replicas serve', async () => {
  const run = (srv) => Promise.all(prompts.map((p) => client(srv).completions.create({
    model: 'arith', prompt: p, temperature: 0, max_tokens: 12,
  })));
  const [a, b] = [await run(one), await run(two)];
  for (let i = 0; i < prompts.length; ++i) {
    assert.equal(b[i].choices[0].text, a[i].choices[0].text, prompts[i]);
    assert.equal(b[i].usage.completion_tokens, a[i].usage.completion_tokens, prompts[i]);
  }
  const routed = [];
  for (const r of [0, 1]) {
    routed.push(await metric(two.base,
      `mxserve:dp_requests_routed_total{model="arith",dp_rank="${r}"}`));
    const pages = await metric(two.base, `mxserve:dp_kv_pages_total{model="arith",dp_rank="${r}"}`);
    assert.ok(pages > 0, `replica ${r} KV pages ${pages}`);
  }
  assert.ok(routed[0] > 0 && routed[1] > 0, `routed ${routed}`);
  assert.equal(routed[0] + routed[1], prompts.length);
  // The aggregate counts every replica's requests; a single server has no dp_ families.
  assert.equal(await metric(two.base, 'mxserve:requests_total{model="arith"}'), prompts.length);
  assert.equal(await metric(one.base, 'mxserve:dp_requests_routed_total'), undefined);
});

test('a repeated prompt is cached under cache_aware; round_robin misses its first repeat', async () => {
  const long = Array.from({ length: 40 }, (_, i) => `${i}+${i}=${2 * i}`).join('\n');
  const req = { model: 'arith', prompt: long, temperature: 0, max_tokens: 2 };
  await client(two).completions.create(req);
  const again = await client(two).completions.create(req);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));

  await client(rr).completions.create(req);
  const other = await client(rr).completions.create(req);  // the other replica: cold
  assert.equal(other.usage.prompt_tokens_details?.cached_tokens ?? 0, 0, JSON.stringify(other.usage));
  const third = await client(rr).completions.create(req);  // back to the first: warm
  assert.ok(third.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(third.usage));
});

test('bad --dp and --load-balance-method are refused at start naming the flag', () => {
  const run = (...extra) => spawnSync(BIN, ['serve', MODEL_DIR, '--port', '0', ...extra],
    { encoding: 'utf8', timeout: 60_000 });
  const zero = run('--dp', '0');
  assert.equal(zero.status, 2);
  assert.match(zero.stderr, /--dp must be >= 1, got 0/);
  const bad = run('--dp', '2', '--load-balance-method', 'fastest');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--load-balance-method 'fastest'/);
  const huge = run('--dp', '100000');
  assert.equal(huge.status, 1);
  // The memory plan refuses it before anything loads, naming --dp among the flags to change.
  assert.match(huge.stderr, /the memory plan does not fit: the model needs .* GiB/);
  assert.match(huge.stderr, /fewer --dp replicas \(each holds its own weights and KV; now 100000\)/);
});
