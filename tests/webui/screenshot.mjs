// Makes docs/webui.png: the page of a real `mxserve serve` of the bundled model after a short
// chat (a few replies, one stopped), so that the status panel has some history.
//   node tests/webui/screenshot.mjs [OUT.png]     (MXSERVE_BIN: the binary; default build/release)
import { join } from 'node:path';
import { SOURCE_DIR, startServer } from '../server/harness.mjs';
import { launchChromium } from './browser.mjs';

const out = process.argv[2] ?? join(SOURCE_DIR, 'docs', 'webui.png');
const srv = await startServer(['--max-total-tokens', '65536']);
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(60_000);
  await page.goto(`${srv.base}/`);
  await page.locator('.model[data-model="arith"]').waitFor();
  const ask = async (text, { maxTokens = 96, stopAfterChunks = 0 } = {}) => {
    const n = await page.locator('.msg.assistant').count();
    await page.fill('#max-tokens', String(maxTokens));
    await page.setChecked('#ignore-eos', stopAfterChunks > 0);
    await page.fill('#prompt', text);
    await page.click('#send');
    const reply = page.locator('.msg.assistant').nth(n);
    if (stopAfterChunks > 0) {
      await page.waitForFunction(([i, k]) => {
        const s = document.querySelectorAll('.msg.assistant .stats')[i]?.textContent ?? '';
        const m = s.match(/streaming · (\d+) chunks/);
        return m && Number(m[1]) >= k;
      }, [n, stopAfterChunks]);
      await page.click('#stop');
    }
    await reply.and(page.locator('[data-state="done"], [data-state="stopped"]')).waitFor();
    await page.waitForTimeout(1500);
  };
  await page.fill('#temperature', '0');
  // The bundled model answers its own kind of problem (three numbers, non-thinking turns).
  await page.uncheck('#thinking');
  await ask('Anna has 37 stickers. She buys 48 more and gives away 29. How many stickers does she have now?',
            { maxTokens: 128 });
  await ask('1+', { maxTokens: 4000, stopAfterChunks: 60 });
  await ask('A shop had 84 eggs. It sold 37 in the morning and got 25 more in the afternoon. How many eggs does the shop have now?',
            { maxTokens: 128 });
  await page.waitForTimeout(2500);
  await page.screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await srv.stop();
}
