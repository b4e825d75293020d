// Starts a real `mxserve serve` on a free loopback port (--port 0; the port is read from the
// "listening on" line) and waits for /health. Exits the test process with 77 (ctest: skipped)
// when this build has no engine yet or the SDK package (openai, @anthropic-ai/sdk) is not
// installed.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const SOURCE_DIR = process.env.MX_SOURCE_DIR ?? join(here, '..', '..');
export const MODEL_DIR = join(SOURCE_DIR, 'models', 'glm-moe-dsa-arith-6m');
const BIN = process.env.MXSERVE_BIN ?? join(SOURCE_DIR, 'build', 'release', 'src', 'cli', 'mxserve');

export function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

export async function openaiClass() {
  if (!existsSync(join(here, 'node_modules', 'openai'))) skip('run `npm --prefix tests/server ci`');
  return (await import('openai')).default;
}

export async function anthropicClass() {
  if (!existsSync(join(here, 'node_modules', '@anthropic-ai', 'sdk'))) {
    skip('run `npm --prefix tests/server ci`');
  }
  return (await import('@anthropic-ai/sdk')).default;
}

export async function startServer(extra = [], { model = MODEL_DIR, name = 'arith' } = {}) {
  const args = ['serve', model, '--served-model-name', name, '--host', '127.0.0.1', '--port', '0',
                ...extra];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) resolve(Number(m[1]));
    };
    proc.stderr.on('data', onData);
    proc.stdout.on('data', onData);
    proc.on('exit', (code) => {
      if (/no engine yet/.test(log)) skip('this build has no engine (CreateEngine) yet');
      reject(new Error(`mxserve exited with ${code} before listening:\n${log}`));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve({ code, sig })));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const r = await fetch(`${base}/health`).catch(() => null);
    if (r && r.status === 200) break;
    if (proc.exitCode !== null) {
      if (/no engine yet/.test(log)) skip('this build has no engine (CreateEngine) yet');
      throw new Error(`mxserve exited with ${proc.exitCode}:\n${log}`);
    }
    if (Date.now() > deadline) throw new Error(`mxserve not healthy after 120 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    proc, port, base, exited,
    log: () => log,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}

// A gauge from /metrics (first matching line); `headers` e.g. for --api-key.
export async function metric(base, name, headers = {}) {
  const text = await (await fetch(`${base}/metrics`, { headers })).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}
