// Drives a luaflame SVG in headless Chromium (playwright-core from
// tests/browser/node_modules): hover, click to zoom, Ctrl-F search, the
// ignore-case toggle, Reset Zoom, Esc, and the URL that keeps the state.
//   node svg_browser.mjs GRAPH.svg PLAYWRIGHT_DIR [CHROMIUM]
// GRAPH.svg is tests/data/svg/lua.folded rendered with default options.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [svgPath, pwDir, chromium = '/usr/bin/chromium'] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(pwDir), 'index.js'));
const pw = require('playwright-core');

function check(cond, what) {
  if (!cond) throw new Error('FAIL: ' + what);
  console.log('ok: ' + what);
}

const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-svg-browser-'));
const context = await pw.chromium.launchPersistentContext(userDir, {
  executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-gpu'],
  viewport: { width: 1300, height: 400 },
});
try {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  let answer = null;
  page.on('dialog', (d) => d.accept(answer === null ? undefined : answer));
  await page.goto('file://' + path.resolve(svgPath));

  const titled = (start) => page.locator('#frames > g').filter({ has: page.locator('title', { hasText: start }) }).first();
  const text = (sel) => page.locator(sel).evaluate((e) => e.textContent);
  const cls = (loc) => loc.evaluate((e) => e.getAttribute('class') || '');
  const width = (loc) => loc.locator('rect').evaluate((e) => e.getAttribute('width'));

  const parse = titled('parse json.lua:40 (');
  await parse.locator('rect').hover();
  check((await text('#details')) === 'Function: parse json.lua:40 (420 samples, 53.57%), self 300',
    'hover shows the title in the details bar');

  await parse.locator('rect').click();
  check(!(await cls(page.locator('#unzoom'))).includes('hide'), 'click zooms: Reset Zoom shows');
  check(Number(await width(parse)) === 1180, 'the clicked frame fills the width');
  check((await cls(titled('[GC] ('))).includes('hide'), 'a sibling is hidden');
  check((await cls(titled('handle srv.lua:12 ('))).includes('parent'), 'an ancestor stays, greyed');
  check(Number(await width(titled('[C] string.sub ('))) > 300, 'a child is widened');
  check(/[?&]x=[\d.]+&y=\d+/.test(page.url()), 'the zoom is in the URL: ' + page.url());

  answer = 'STRING';
  await page.keyboard.press('Control+f');
  check((await text('#matched')) === 'Matched: 0.00%', 'Ctrl-F searches, case-sensitive by default');
  await page.locator('#ignorecase').click();
  check((await text('#matched')) === 'Matched: 15.31%', 'ignore-case toggle re-runs the search: exact share');
  check(/[?&]s=STRING/.test(page.url()) && /[?&]i=1/.test(page.url()), 'search and ignore-case in the URL');
  const sub = titled('[C] string.sub (');
  check((await sub.locator('rect').evaluate((e) => e.getAttribute('fill'))) === 'rgb(230,0,230)', 'the match is highlighted');

  await page.locator('#unzoom').click();
  check((await cls(page.locator('#unzoom'))).includes('hide'), 'Reset Zoom hides itself');
  check(Number(await width(parse)) < 1180, 'the frame is back to its width');
  check(!/[?&]x=/.test(page.url()), 'the zoom left the URL');

  answer = 'parse|render';
  await page.locator('#search').click();  // "Reset Search" first
  await page.locator('#search').click();
  check((await text('#matched')) === 'Matched: 84.82%', 'regex alternation: 420 + 245 of 784 = 84.82%');
  await page.keyboard.press('Escape');
  check((await cls(page.locator('#matched'))).includes('hide'), 'Esc resets the search');

  // A link with an invalid regular expression: an alert, no script error.
  await page.goto('file://' + path.resolve(svgPath) + '?s=%5B');
  check((await cls(page.locator('#matched'))).includes('hide'), 'invalid regex from the URL: no search');
  check(errors.length === 0, 'no script errors: ' + errors.join('; '));
} catch (e) {
  console.error(e.message);
  process.exitCode = 1;
} finally {
  await context.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
