// Server lifecycle against the real binary: --api-key, 512 concurrent streams, a full queue
// answering 429, SIGTERM draining running streams and exiting 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openaiClass, startServer } from './harness.mjs';

const OpenAI = await openaiClass();

test('--api-key guards everything but /health', async () => {
  const srv = await startServer(['--api-key', 'sekret']);
  try {
    assert.equal((await fetch(`${srv.base}/health`)).status, 200);
    assert.equal((await fetch(`${srv.base}/v1/models`)).status, 401);
    const ok = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'sekret', maxRetries: 0 });
    assert.equal((await ok.models.list()).data.length, 1);
    const bad = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('512 concurrent streams complete', async () => {
  const srv = await startServer(['--max-running-requests', '128', '--max-queued-requests', '1024']);
  try {
    const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'x', maxRetries: 0, timeout: 240_000 });
    const one = async (i) => {
      const s = await client.chat.completions.create({
        model: 'arith', messages: [{ role: 'user', content: `${i}+1=` }], max_tokens: 8,
        temperature: 0, stream: true,
      });
      let finish = null;
      for await (const c of s) finish = c.choices[0]?.finish_reason ?? finish;
      return finish;
    };
    const results = await Promise.all(Array.from({ length: 512 }, (_, i) => one(i)));
    assert.equal(results.filter((f) => f === 'stop' || f === 'length').length, 512);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

test('a full queue answers 429 with Retry-After', async () => {
  const srv = await startServer(['--max-running-requests', '1', '--max-queued-requests', '1']);
  try {
    const post = () => fetch(`${srv.base}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: '1+', max_tokens: 64, ignore_eos: true }),
    });
    const rs = await Promise.all(Array.from({ length: 8 }, post));
    const limited = rs.filter((r) => r.status === 429);
    assert.ok(limited.length > 0, rs.map((r) => r.status).join(','));
    assert.ok(limited[0].headers.get('retry-after'));
    assert.equal((await limited[0].json()).error.type, 'rate_limit_error');
  } finally {
    await srv.stop();
  }
});

test('SIGTERM lets running streams finish and exits 0', async () => {
  const srv = await startServer(['--shutdown-timeout', '60']);
  const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'x', maxRetries: 0 });
  const s = await client.completions.create({
    model: 'arith', prompt: '1+', max_tokens: 48, ignore_eos: true, stream: true,
  });
  let finish = null;
  let n = 0;
  for await (const c of s) {
    if (++n === 2) srv.proc.kill('SIGTERM');
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'length');
  const { code } = await srv.exited;
  assert.equal(code, 0);
});
