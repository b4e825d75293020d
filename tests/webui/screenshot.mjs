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
  await ask('Tom has 23 apples. He buys 45 more. How many apples does he have now?');
  await ask('1+', { maxTokens: 4000, stopAfterChunks: 60 });
  await page.uncheck('#thinking');
  await ask('A baker makes 7 trays of 6 rolls. How many rolls does she make?');
  await page.check('#thinking');
  await ask('Sara reads 12 pages a day for 5 days. How many pages does she read?');
  await page.waitForTimeout(2500);
  await page.screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await srv.stop();
}
