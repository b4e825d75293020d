// Headless Chromium (Debian's /usr/bin/chromium, or MX_CHROMIUM) through playwright-core, for
// the web page's test and for docs/webui.png. Exits with 77 (ctest: skipped) when either is
// missing.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { skip } from '../server/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const CHROMIUM = process.env.MX_CHROMIUM ?? '/usr/bin/chromium';

export async function launchChromium() {
  if (!existsSync(join(here, 'node_modules', 'playwright-core'))) skip('run `npm --prefix tests/webui ci`');
  if (!existsSync(CHROMIUM)) skip(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs it)`);
  const { chromium } = await import('playwright-core');
  // note: playwright gives the browser a fresh --user-data-dir of its own; the flags keep a
  // machine without internet from stalling on refused connections.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 60_000,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
  });
}
