#!/usr/bin/env node
// Browser tests of the luaflame pages against the real luaflame-server.
//   node run.mjs --server PATH/luaflame-server [--web DIR] [--screenshots DIR]
//                [--chromium /usr/bin/chromium] [--big 200000] [--runs 2000] [--timeout 600]
//                [--only REGEX]  (only the checks whose names match; setup uploads still run)
// (LUAFLAME_SERVER, LUAFLAME_WEB, LUAFLAME_SCREENSHOTS work too.) Prints each
// check, the measured timings, and a last line "N passed, M failed"; exits
// non-zero on any failure. The server is always stopped.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, startServer, launchBrowser, Runner, assert, assertEq, median, goalMs, timeFactor } from './harness.mjs';
import { gameProfile, bigProfile, shareOf, wireChunk } from './profiles.mjs';
import { viewChecks } from './views.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const opt = {
  server: args.server || process.env.LUAFLAME_SERVER,
  web: path.resolve(args.web || process.env.LUAFLAME_WEB || path.join(here, '../../web')),
  shots: path.resolve(args.screenshots || process.env.LUAFLAME_SCREENSHOTS || path.join(here, '../../build/screenshots')),
  chromium: args.chromium || '/usr/bin/chromium',
  big: +(args.big || 200000),
  runs: Math.max(120, +(args.runs || 2000)),  // at least three pages
  timeout: +(args.timeout || 600),
  luaflame: args.luaflame || process.env.LUAFLAME_CLI,  // default: build/cli/luaflame beside the server
};

const T = new Runner();
if (args.only) T.only = new RegExp(args.only, 'i');
let server = null;
let browser = null;
let finished = false;

async function cleanup() {
  try { if (browser) await browser.close(); } catch (_) { /* closing anyway */ }
  try { if (server) await server.stop(); } catch (_) { /* killed anyway */ }
  browser = server = null;
}

const watchdog = setTimeout(async () => {
  if (finished) return;
  console.log(`FAIL the whole run took longer than ${opt.timeout} s`);
  await cleanup();
  console.log(`${T.passed} passed, ${T.failed + 1} failed`);
  process.exit(2);
}, opt.timeout * 1000);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, async () => { await cleanup(); process.exit(130); });

// ---- helpers ---------------------------------------------------------------

/** POST without keep-alive: an idle kept-alive connection holds one of the
 *  server's worker threads, which would slow the browser's requests. */
function post(p, body, type) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.base}${p}`, {
      method: 'POST', agent: false, headers: { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), Connection: 'close' },
    }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function apiUpload(name, tags, body) {
  const q = new URLSearchParams({ name });
  for (const t of tags) q.append('tag', t);
  // One retry when the connection drops: seen once with the 159 MB upload on a
  // loaded machine (EPIPE: the server's 5 s read timeout while the client stalled).
  const r = await post(`/api/runs?${q}`, body, 'text/plain').catch((e) => {
    if (!/EPIPE|ECONNRESET/.test(String(e))) throw e;
    console.log(`     (upload ${name}: ${e.code || e}; retrying once)`);
    return post(`/api/runs?${q}`, body, 'text/plain');
  });
  if (r.status !== 201) throw new Error(`upload ${name}: ${r.status} ${r.text}`);
  return JSON.parse(r.text).id;
}

async function apiPost(p, body, type = 'application/json') {
  const r = await post(p, body, type);
  if (r.status >= 300) throw new Error(`POST ${p}: ${r.status} ${r.text}`);
  return r.text ? JSON.parse(r.text) : {};
}

async function shot(page, name) {
  fs.mkdirSync(opt.shots, { recursive: true });
  await page.screenshot({ path: path.join(opt.shots, `${name}.png`), fullPage: true });
}

/** Opens a page; resolves to ms until `sel` shows (default: the page says it loaded). */
async function open(page, p, sel = '#app[data-loaded]') {
  const t0 = Date.now();
  await page.goto(server.base + p);
  await page.waitForSelector(sel, { timeout: 90000 });
  return Date.now() - t0;
}

/** Waits until the run page finished one more graph load than `before`. */
async function nextLoad(page, before) {
  await page.waitForFunction((n) => window.__lfPerf && window.__lfPerf.loads.length > n, before, { timeout: 60000 });
  return page.evaluate(() => window.__lfPerf.loads[window.__lfPerf.loads.length - 1]);
}
const loads = (page) => page.evaluate(() => (window.__lfPerf ? window.__lfPerf.loads.length : 0));

/** Names of the frames drawn now (the page's own reading of the titles). */
const frameNames = (page) => page.evaluate(() => {
  const g = window.__lfGraph;
  return g.frames.map((f, i) => g.name(i));
});

/** Clicks the frame named `name` (the first, in drawing order). */
async function clickFrame(page, name) {
  const i = await page.evaluate((n) => {
    const g = window.__lfGraph;
    return g.frames.findIndex((f, k) => g.name(k) === n);
  }, name);
  assert(i >= 0, `frame ${name} is drawn`);
  await page.locator('#flame g:has(> rect)').nth(i).click();
}

const pct = (text) => parseFloat((/([\d.]+)%/.exec(text) || [])[1]);

/** Longest main-thread task seen since the last call (PerformanceObserver longtask). */
async function longest(page) {
  return page.evaluate(() => { const m = window.__lfLong || 0; window.__lfLong = 0; return m; });
}

/**
 * Three zoom rounds on a big graph (the big run and the big compare page), for the long-task
 * figures: each clicks the widest frame three levels up where it is drawn (canvas or SVG),
 * waits for the zoomed graph and records the longest main-thread task in `long.zooming`;
 * between rounds Esc goes back to the whole graph (then waits for `wholeSel` when given).
 * `first(z, ms)` runs after the first round: z its load record, ms click to drawn.
 */
async function zoomRounds(page, long, wholeSel, first) {
  for (let k = 0; k < 3; k++) {
    if (k > 0) {
      const m = await loads(page);
      await page.keyboard.press('Escape');
      await nextLoad(page, m);
      assert(!page.url().includes('focus='), 'Esc zoomed out');
      if (wholeSel) await page.waitForSelector(wholeSel);
    }
    await page.waitForTimeout(300);
    await longest(page);
    const n = await loads(page);
    const t0 = Date.now();
    const at = await page.evaluate(() => {
      const g = window.__lfGraph;
      const ys = [...new Set(g.frames.map((f) => f.y))].sort((a, b) => b - a);
      const f = g.frames.filter((o) => o.y === ys[3]).sort((a, b) => b.w - a.w)[0];
      const [vx, vy, vw, vh] = g.viewBox.split(' ').map(Number);
      const drawn = g.canvas || document.querySelector('#flame svg:not(.overlay)');
      const place = () => {
        const box = drawn.getBoundingClientRect();
        return { x: box.left + ((f.x + f.w / 2 - vx) * box.width) / vw, y: box.top + ((f.y + g.rowH / 2 - vy) * box.height) / vh };
      };
      window.scrollBy(0, place().y - window.innerHeight / 2);  // the frame on screen
      return place();
    });
    await page.mouse.click(at.x, at.y);
    const z = await nextLoad(page, n);
    const ms = Date.now() - t0;
    await page.waitForTimeout(300);
    long.zooming.push(await longest(page));
    assert(page.url().includes('focus='), 'zoomed');
    if (k === 0) await first(z, ms);
  }
}

/** The long-task figures of `what` (median of the rounds of each kind) and their goal. */
function reportLongTasks(T, long, what, where) {
  for (const [k, xs] of Object.entries(long)) {
    T.figure(`${what}: longest main-thread task while ${k}, median of 3 [${xs.map(Math.round).join(', ')}]`, median(xs));
  }
  for (const [k, xs] of Object.entries(long)) {
    assert(median(xs) < goalMs(100), `no main-thread task over ${goalMs(100)} ms while ${k} ${where}: median round ${median(xs)} ms (${xs})`);
  }
}

// ---- the checks ------------------------------------------------------------

async function main() {
  if (!opt.server || !fs.existsSync(opt.server)) throw new Error(`no luaflame-server at '${opt.server}' (pass --server PATH)`);
  console.log(`server ${opt.server}\nweb    ${opt.web}\nshots  ${opt.shots}\ntime goals x${timeFactor} (LUAFLAME_TEST_TIME_FACTOR)`);
  server = await startServer(opt.server, opt.web, ['--max-body', '512M', ...(args.threads ? ['--threads', String(args.threads)] : [])]);
  browser = await launchBrowser(opt.chromium);
  const ctx = browser.context;
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.base });
  await ctx.addInitScript(() => {
    window.__lfLong = 0;
    try {
      new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__lfLong = Math.max(window.__lfLong, e.duration); })
        .observe({ type: 'longtask', buffered: true });
    } catch (_) { /* no longtask support */ }
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`[${T.current}] ${e}`));
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) errors.push(`[${T.current}] ${m.text()} (${m.location().url})`); });
  const game1 = gameProfile(1);
  const ids = {};

  await T.check('empty state tells a new user what to do', async () => {
    await open(page, '/');
    const text = await page.textContent('#app');
    assert(text.includes(`luaflame run --server ${server.base} script.lua`), 'collector command shown');
    assert(/curl --fail-with-body --data-binary @out\.folded/.test(text), 'curl command shown');
    await shot(page, '01-runs-empty');
  });

  await T.check('upload a profile by pasting folded text', async () => {
    await open(page, '/upload');
    await page.fill('#folded', game1);
    await page.fill('#name', 'game');
    await page.fill('#tags', 'branch=main, os=linux');
    await shot(page, '02-upload');
    await page.click('#submit');
    await page.waitForURL(/\/runs\/\d+$/, { timeout: 15000 });
    ids.game1 = +page.url().match(/\/runs\/(\d+)/)[1];
    await page.waitForSelector('#flame[data-state=ready]');
    const names = await frameNames(page);
    assert(names.includes('collide') && names.includes('main'), 'graph holds the uploaded frames');
  });

  await T.check('dropping a .folded file names the run after it and uploads it', async () => {
    await open(page, '/upload');
    const dt = await page.evaluateHandle(() => {
      const d = new DataTransfer();
      d.items.add(new File(['main;a;b 3\nmain;c 2\n'], 'nightly.folded', { type: 'text/plain' }));
      return d;
    });
    await page.dispatchEvent('#drop', 'dragenter', { dataTransfer: dt });
    assert(await page.evaluate(() => document.querySelector('#drop').classList.contains('over')), 'drop zone lights up');
    await page.dispatchEvent('#drop', 'drop', { dataTransfer: dt });
    assertEq(await page.inputValue('#name'), 'nightly', 'name from the file name');
    assert((await page.textContent('#file-name')).includes('nightly.folded'), 'file shown');
    await page.click('#submit');
    await page.waitForURL(/\/runs\/\d+$/, { timeout: 15000 });
    await page.waitForSelector('#flame[data-state=ready]');
    assert((await frameNames(page)).includes('b'), 'graph of the file');
    ids.file = +page.url().match(/\/runs\/(\d+)/)[1];
  });

  await T.check('bad upload shows the server message with the line number', async () => {
    await open(page, '/upload');
    await page.fill('#folded', 'main;ok 5\nmain;no_count_here\nmain;ok 3\n');
    await page.fill('#name', 'broken');
    await page.click('#submit');
    const box = await page.waitForSelector('#result .errorbox');
    const text = await box.textContent();
    assert(/line 2/i.test(text), `message names line 2: ${text}`);
    assert(/no count/i.test(text), `message gives the reason: ${text}`);
    const sel = await page.evaluate(() => { const t = document.querySelector('#folded'); return t.value.slice(t.selectionStart, t.selectionEnd); });
    assertEq(sel, 'main;no_count_here', 'the bad line is selected');
    const r = await (await fetch(`${server.base}/api/runs?name=broken`)).json();
    assertEq(r.total, 0, 'nothing stored');
    await shot(page, '03-upload-error');
  });

  await T.check('a server with --token: upload asks for the token, then works', async () => {
    const locked = await startServer(opt.server, opt.web, ['--token', 'sesame']);
    try {
      await page.goto(`${locked.base}/upload`);
      await page.waitForSelector('#app[data-loaded]');
      await page.fill('#folded', 'main;x 1\n');
      await page.fill('#name', 'locked');
      await page.click('#submit');
      await page.waitForFunction(() => /Token field/.test(document.querySelector('#result').textContent));
      await page.fill('#token', 'sesame');
      await page.click('#submit');
      await page.waitForURL(/\/runs\/\d+$/, { timeout: 15000 });
      await page.waitForSelector('#app[data-loaded]');
      await page.evaluate(() => sessionStorage.clear());
      await page.goto('about:blank');  // nothing in flight when this server stops
    } finally {
      await locked.stop();
    }
  });

  // More runs through the API: a second game run (physics 3x slower) and a
  // streamed run with two metrics and a time axis, still live.
  ids.game2 = await apiUpload('game', ['branch=feature', 'os=linux'], gameProfile(3));
  const started = Date.now() * 1e6 - 60e9;
  const stream = await apiPost('/api/streams', JSON.stringify({
    stream: `web-test-${process.pid}`, name: 'service', tags: { env: 'test' }, metrics: ['samples', 'time'],
    started_ns: started, started, hz: 100,
  }));
  ids.stream = stream.id;
  const chunkStacks = (k) => [
    [['main', 'serve', 'handle', 'db.query'], [10 + 5 * k, (10 + 5 * k) * 1e6]],
    [['main', 'serve', 'handle', 'render'], [30 - 3 * k, (30 - 3 * k) * 2e6]],
    [['main', 'gc'], [4, 4e5]],
  ];
  for (let k = 0; k < 6; k++) {
    await apiPost(`/api/runs/${ids.stream}/chunks`, wireChunk(k, ['samples', 'time'], chunkStacks(k), started + k * 10e9, started + (k + 1) * 10e9), 'text/plain');
  }

  await T.check('runs list shows runs newest first with tags, metrics and live mark', async () => {
    await open(page, '/');
    const rows = await page.$$eval('#runs tbody tr', (trs) => trs.map((t) => ({ id: +t.dataset.id, text: t.textContent })));
    assertEq(rows.length, 4, 'four runs listed');
    assertEq(rows[0].id, ids.stream, 'newest first');
    assert(rows.some((r) => r.id === ids.game1 && r.text.includes('branch') && r.text.includes('main')), 'tags shown');
    assert(await page.isVisible(`#runs tr[data-id="${ids.stream}"] .badge.live`), 'live run marked');
    assert(rows[0].text.includes('time'), 'metrics listed');
    await shot(page, '04-runs');
  });

  await T.check('filter by name and tag', async () => {
    await page.fill('#f-tag', 'branch=feature');
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 1);
    assertEq(+(await page.getAttribute('#runs tbody tr', 'data-id')), ids.game2, 'tag filter');
    assert(page.url().includes('tag=branch%3Dfeature'), 'filter kept in the URL');
    await page.fill('#f-tag', '');
    await page.fill('#f-name', 'game');
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 2);
    await page.fill('#f-name', 'nosuchname');
    await page.waitForSelector('text=No runs match');
  });

  await T.check('run page: graph fills the width, "/" focuses search, search shows the exact share', async () => {
    const ms = await open(page, `/runs/${ids.game1}`);
    T.figure('small run page open', ms);
    await page.waitForSelector('#flame[data-state=ready]');
    const geo = await page.evaluate(() => {
      const s = document.querySelector('#flame svg');
      return { svg: s.getBoundingClientRect().width, host: document.querySelector('#flame').clientWidth, vb: +s.getAttribute('viewBox').split(' ')[2] };
    });
    assert(Math.abs(geo.svg - geo.host) < 2, `svg fills its panel (${geo.svg} vs ${geo.host})`);
    assert(Math.abs(geo.vb - geo.host) < 2, `server rendered at the page width (${geo.vb})`);
    await page.keyboard.press('/');
    assertEq(await page.evaluate(() => document.activeElement.id), 'search', '"/" focuses the search box');
    await page.keyboard.type('pathfind');
    await page.waitForSelector('#matched[data-exact="1"]');
    const shown = pct(await page.textContent('#matched'));
    const want = shareOf(game1, /pathfind/i);
    assert(Math.abs(shown - want) < 0.006, `matched share ${shown}% = ${want.toFixed(2)}%`);
    assert(await page.locator('#flame .overlay rect.hit').count() >= 1, 'matches highlighted');
    assert(page.url().includes('q=pathfind'), 'search kept in the URL');
    await shot(page, '05-run-search');
    await page.fill('#search', '');
    await page.waitForFunction(() => document.querySelector('#flame .overlay').childElementCount === 0);
  });

  await T.check('click zooms via the server (narrow frames appear), breadcrumb, back/forward, Esc', async () => {
    assert(!(await frameNames(page)).includes('tiny_helper_function'), 'the narrow frame is pruned in the whole graph');
    const n = await loads(page);
    const t0 = Date.now();
    await clickFrame(page, 'heap.push');
    await nextLoad(page, n);
    T.figure('small run zoom (click to drawn)', Date.now() - t0);
    assert(decodeURIComponent(page.url()).includes('focus=main;love.run;love.update;world:update;ai.think;pathfind;heap.push'), 'focus path in the URL');
    assert((await frameNames(page)).includes('tiny_helper_function'), 'the narrow frame is drawn when zoomed');
    assertEq(await page.textContent('#crumbs .cur'), 'heap.push', 'breadcrumb ends at the zoomed frame');
    assertEq(await page.locator('#crumbs a').count(), 7, 'breadcrumb links: all + 6 ancestors');
    await shot(page, '06-run-zoom');
    let m = await loads(page);
    await page.goBack();
    await nextLoad(page, m);
    assert(!page.url().includes('focus='), 'back leaves the zoom');
    assert(!(await frameNames(page)).includes('tiny_helper_function'), 'whole graph again');
    m = await loads(page);
    await page.goForward();
    await nextLoad(page, m);
    assert(page.url().includes('focus='), 'forward zooms again');
    m = await loads(page);
    await page.click('#crumbs a[data-depth="5"]');
    await nextLoad(page, m);
    assertEq(await page.textContent('#crumbs .cur'), 'ai.think', 'breadcrumb link zooms out one level');
    m = await loads(page);
    await page.keyboard.press('Escape');
    await nextLoad(page, m);
    assert(!page.url().includes('focus='), 'Esc resets the zoom');
    await open(page, `/runs/${ids.game1}?focus=main;no_such_frame`);
    await page.waitForSelector('#flame[data-state=empty] .empty');
    m = await loads(page);
    await page.click('#flame .empty button');
    await nextLoad(page, m);
    assertEq(await page.getAttribute('#flame', 'data-state'), 'ready', 'a zoom into nothing says so and offers the whole run');
  });

  await T.check('function table: sort, filter, click highlights in the graph', async () => {
    await page.click('#functions th[data-key="total"]');
    assertEq(await page.textContent('#functions tbody tr:first-child td.fn'), 'main', 'sorted by total');
    await page.fill('#fn-filter', 'path');
    const names = await page.$$eval('#functions tbody td.fn', (tds) => tds.map((t) => t.textContent));
    assert(names.length >= 1 && names.every((x) => x.includes('path')), `filtered: ${names}`);
    await page.click('#functions tbody tr:first-child');
    assertEq(await page.inputValue('#search'), '^pathfind$', 'search set to the function');
    await page.waitForFunction(() => document.querySelectorAll('#flame .overlay rect.hit').length > 0);
    assert(await page.isVisible('#functions tr.active'), 'row marked');
    await page.fill('#search', '');
    await page.fill('#fn-filter', '');
  });

  await T.check('inverted (icicle) toggle', async () => {
    const m = await loads(page);
    await page.click('#inverted');
    await nextLoad(page, m);
    assert(page.url().includes('inverted=1'), 'inverted in the URL');
    const top = await page.evaluate(() => {
      const g = window.__lfGraph;
      const ys = g.frames.map((f) => f.y);
      return { root: g.frames.find((f, i) => g.name(i) === 'all').y, min: Math.min(...ys), max: Math.max(...ys) };
    });
    assert(top.root === top.min && top.max > top.min, `root on top: ${JSON.stringify(top)}`);
    const n = await loads(page);
    await page.click('#inverted');
    await nextLoad(page, n);
  });

  await T.check('downloads (SVG, folded, speedscope) and copy link', async () => {
    await page.click('#download');
    const hrefs = await page.$$eval('#downloads a', (as) => as.map((a) => a.getAttribute('href')));
    assertEq(hrefs.length, 3, 'three downloads');
    const bodies = await page.evaluate(async (hs) => Promise.all(hs.map(async (h) => { const r = await fetch(h); return [r.status, (await r.text()).slice(0, 400)]; })), hrefs);
    assert(bodies.every(([s]) => s === 200), `all answer 200: ${bodies.map((b) => b[0])}`);
    assert(/<svg/.test(bodies[0][1]), 'svg');
    assert(/^main;/.test(bodies[1][1]), 'folded');
    assert(/speedscope|"shared"/.test(bodies[2][1]), 'speedscope json');
    await page.keyboard.press('Escape');
    await page.click('#copy-link');
    await page.waitForSelector('.toast');
    const clip = await page.evaluate(() => navigator.clipboard.readText());
    assertEq(clip, page.url(), 'the link of the current view is copied');
  });

  await T.check('streamed run: metric switch (ms units), timeline drag selects a time range', async () => {
    await open(page, `/runs/${ids.stream}`);
    await page.waitForSelector('#flame[data-state=ready]');
    assertEq(await page.locator('#metrics button').count(), 2, 'two metrics offered');
    await page.waitForSelector('#timeline:not([hidden]) svg');
    let m = await loads(page);
    await page.click('#metrics button[data-metric="time"]');
    await nextLoad(page, m);
    assert(page.url().includes('metric=time'), 'metric in the URL');
    await page.waitForFunction(() => /\d (ms|µs|s)$/.test(document.querySelector('#functions tbody td.num')?.textContent || ''));
    const rootTitle = () => page.evaluate(() => window.__lfGraph.info(window.__lfGraph.frames.findIndex((f, i) => window.__lfGraph.name(i) === 'all')).value);
    const before = await rootTitle();
    const box = await page.locator('#tl-plot svg').boundingBox();
    m = await loads(page);
    await page.mouse.move(box.x + box.width * 0.05, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await nextLoad(page, m);
    assert(/from=\d+/.test(page.url()) && /until=\d+/.test(page.url()), 'range in the URL');
    await page.waitForFunction(() => document.querySelector('#tl-range').textContent.startsWith('Showing'));
    const after = await rootTitle();
    assert(before !== after, `the graph shows the range only (${before} -> ${after})`);
    await shot(page, '07-run-stream');
  });

  await T.check('live run refreshes by itself', async () => {
    await open(page, `/runs/${ids.stream}`);
    assert(await page.isVisible('#live-badge'), 'live badge');
    const before = await page.textContent('.run-meta');
    await apiPost(`/api/runs/${ids.stream}/chunks`, wireChunk(6, ['samples', 'time'], chunkStacks(6), started + 60e9, started + 61e9), 'text/plain');
    await page.waitForFunction((b) => document.querySelector('.run-meta').textContent !== b, before, { timeout: 15000 });
    await apiPost(`/api/runs/${ids.stream}/finish`, '{}');
    await page.waitForFunction(() => !document.querySelector('#live-badge'), null, { timeout: 15000 });
  });

  await T.check('compare two runs: differential graph and biggest changes', async () => {
    await open(page, '/');
    await page.check(`#runs tr[data-id="${ids.game2}"] input[type=checkbox]`);
    await page.check(`#runs tr[data-id="${ids.game1}"] input[type=checkbox]`);
    await page.click('#compare-picked');
    await page.waitForURL(/\/compare\?/);
    assert(page.url().endsWith(`/compare?base=${ids.game1}&head=${ids.game2}`), `ticked runs compared, older as base: ${page.url()}`);
    await page.waitForSelector('#flame[data-state=ready]');
    const reg = await page.$$eval('#regressions tbody tr', (trs) => trs.map((t) => t.textContent));
    const imp = await page.$$eval('#improvements tbody tr', (trs) => trs.map((t) => t.textContent));
    assert(reg.some((t) => t.includes('collide') && t.includes('+')), `collide regressed: ${reg}`);
    assert(imp.some((t) => t.includes('love.graphics.draw')), `drawing share shrank: ${imp}`);
    await shot(page, '08-compare');
    await open(page, `/compare?base_name=game&base_tag=branch%3Dmain&head=${ids.game2}`);
    await page.waitForSelector('#flame[data-state=ready]');
    assert((await page.textContent('#result')).includes(`#${ids.game1}`), 'latest of name+tag resolved to the first run');
    await open(page, `/compare?base=999999&head=${ids.game2}`);
    const err = await page.textContent('#result .errorbox');
    assert(/999999/.test(err), `readable error for a missing run: ${err}`);
  });

  await T.check(`list stays quick with ${opt.runs} runs, paging`, async () => {
    const t0 = Date.now();
    let next = 0;
    const body = 'main;work 1\n';
    const worker = async () => { while (next < opt.runs) { const i = next++; await apiUpload(`batch-${i % 50}`, [`n=${i}`], body); } };
    await Promise.all(Array.from({ length: 4 }, worker));
    T.figure(`API: ${opt.runs} uploads`, Date.now() - t0);
    T.figure(`runs list open with ${opt.runs + 4} runs (first)`, await open(page, '/'));
    T.figure(`runs list open with ${opt.runs + 4} runs (again)`, await open(page, '/'));
    assertEq(await page.locator('#runs tbody tr').count(), 50, 'one page of 50');
    const t1 = Date.now();
    await page.click('#page-next');
    await page.waitForFunction(() => /^51–100 of/.test(document.querySelector('.pager .info').textContent));
    T.figure('runs list next page', Date.now() - t1);
    assert(page.url().includes('page=2'), 'page in the URL');
    const t2 = Date.now();
    await page.click('#page-last');
    await page.waitForFunction(() => /page (\d+) of \1$/.test(document.querySelector('.pager').textContent.replace(/Older.*$/, '').trim()) || document.querySelector('#page-next').disabled);
    T.figure('runs list last page', Date.now() - t2);
    const last = await page.$$eval('#runs tbody tr', (trs) => trs.map((t) => +t.dataset.id));
    assert(last.includes(ids.game1), 'the oldest run is on the last page');
    await shot(page, '09-runs-many');
  });

  await T.check(`${opt.big.toLocaleString('en')}-stack run opens, searches and zooms without stalling`, async () => {
    let t0 = Date.now();
    let first = null;
    let zoomed = null;
    const folded = bigProfile(opt.big);
    T.figure('generate big profile', Date.now() - t0);
    T.figure('big profile size', folded.length / 1e6, 'MB');
    t0 = Date.now();
    ids.big = await apiUpload('big', ['stacks=' + opt.big], folded);
    T.figure('API: upload big profile', Date.now() - t0);
    // Issue 17's "no main-thread task over 100 ms", per interaction: three rounds
    // each, the longest task of each round, the goal asserted on the median round
    // (one task of a round can land on a loaded machine's bad moment), scaled by
    // LUAFLAME_TEST_TIME_FACTOR in the sanitizer job (goalMs).
    const long = { opening: [], searching: [], zooming: [] };
    // Opening: the first view (the server renders), then twice from its cache; each
    // round until the table and timeline loaded and 500 ms after (what follows the drawing).
    for (let k = 0; k < 3; k++) {
      await longest(page);
      t0 = Date.now();
      await page.goto(`${server.base}/runs/${ids.big}`);
      await page.waitForSelector('#flame[data-state=ready]', { timeout: 90000 });
      const drawn = Date.now() - t0;
      await page.waitForSelector('#app[data-loaded]', { timeout: 90000 });
      const loaded = Date.now() - t0;
      const rec = await page.evaluate(() => window.__lfPerf.loads[0]);
      if (k === 0) {
        T.figure('big run: page open to graph drawn (first view, server renders)', drawn);
        T.figure('big run: page open to function table and timeline loaded', loaded);
        T.figure('big run: frames fetch (first, uncached)', rec.fetchMs);
        T.figure('big run: frames read + drawn (canvas)', rec.buildMs);
        T.figure('big run: frames drawn', rec.frames, 'frames');
        T.figure('big run: frames size (JSON)', rec.bytes / 1e6, 'MB');
        first = rec;
      } else if (k === 1) {
        T.figure('big run: page open to graph drawn (cached frames)', drawn);
        T.figure('big run: frames fetch (cached)', rec.fetchMs);
      }
      await page.waitForTimeout(500);
      long.opening.push(await longest(page));
    }
    // Searching: the same term three times, cleared in between.
    for (let k = 0; k < 3; k++) {
      await page.fill('#search', '');
      await page.waitForFunction(() => !/%/.test(document.querySelector('#matched').textContent));
      await page.waitForTimeout(200);
      await longest(page);
      t0 = Date.now();
      await page.fill('#search', 'db\\.');
      await page.waitForFunction(() => /%/.test(document.querySelector('#matched').textContent));
      const ms = Date.now() - t0;
      await page.waitForTimeout(300);  // the exact share arrives from the worker
      long.searching.push(await longest(page));
      if (k === 0) {
        T.figure('big run: search typed to highlighted (incl. 120 ms debounce)', ms);
        T.figure('big run: search work', await page.evaluate(() => window.__lfPerf.lastSearchMs));
        assert(pct(await page.textContent('#matched')) > 0, 'matches found');
        await shot(page, '10-big-search');
      }
    }
    await page.fill('#search', '');
    await page.waitForFunction(() => !/%/.test(document.querySelector('#matched').textContent));
    // Zooming: into the widest frame three levels up, Esc back to the whole graph in between.
    // The big graph is a canvas (run.js CANVAS_FRAMES): click at the frame's place on it.
    assertEq(await page.locator('#flame canvas').count(), 1, 'a graph this big is drawn on a canvas');
    await zoomRounds(page, long, '#flame canvas', async (z, ms) => {
      T.figure('big run: zoom click to drawn (server renders focus)', ms);
      T.figure('big run: zoomed frames drawn', z.frames, 'frames');
      const names = await page.$$eval('#crumbs a, #crumbs .cur', (x) => x.length);
      assertEq(names, 4, 'breadcrumb: all + 3 levels');
      await page.evaluate(() => window.scrollTo(0, 0));  // the sticky header at the top of the shot
      await shot(page, '11-big-zoom');
      zoomed = z;
    });
    reportLongTasks(T, long, 'big run', 'the big run');
    assert(first.buildMs < 1500 && zoomed.buildMs < 1500, `read + drawn under 1.5 s (${first.buildMs}, ${zoomed.buildMs})`);
  });

  // The compare page with the big run as head: its graph has the big run's frames.
  await T.check(`${opt.big.toLocaleString('en')}-stack run on the compare page: open, search and zoom without stalling`, async () => {
    assert(ids.big, 'the big run was uploaded');
    const long = { opening: [], searching: [], zooming: [] };
    for (let k = 0; k < 3; k++) {
      await longest(page);
      const t0 = Date.now();
      await page.goto(`${server.base}/compare?base=${ids.game1}&head=${ids.big}`);
      await page.waitForSelector('#flame[data-state=ready]', { timeout: 90000 });
      const ms = Date.now() - t0;
      const rec = await page.evaluate(() => window.__lfPerf.loads.at(-1));
      if (k === 0) {
        T.figure('big compare: page open to graph drawn (first, server renders)', ms);
        T.figure('big compare: frames drawn', rec.frames, 'frames');
        T.figure('big compare: frames read + drawn (canvas)', rec.buildMs);
        assertEq(await page.locator('#flame canvas').count(), 1, 'a diff this big is drawn on a canvas (CANVAS_FRAMES)');
      }
      await page.waitForTimeout(500);
      long.opening.push(await longest(page));
    }
    for (let k = 0; k < 3; k++) {
      await page.fill('#diff-search', '');
      await page.waitForFunction(() => document.querySelector('#matched').textContent === '');
      await page.waitForTimeout(200);
      await longest(page);
      await page.fill('#diff-search', 'db\\.');
      await page.waitForFunction(() => /Matched/.test(document.querySelector('#matched').textContent));
      await page.waitForTimeout(300);
      long.searching.push(await longest(page));
    }
    await shot(page, '20-big-compare-search');
    await page.fill('#diff-search', '');
    await page.waitForFunction(() => document.querySelector('#matched').textContent === '');
    await page.locator('#diff-search').blur();
    await zoomRounds(page, long, null, async (z) => {
      T.figure('big compare: zoomed frames drawn', z.frames, 'frames');
      await page.evaluate(() => window.scrollTo(0, 0));  // the sticky header at the top of the shot
      await shot(page, '21-big-compare-zoom');
    });
    reportLongTasks(T, long, 'big compare', 'the big compare page');
  });

  await viewChecks({ T, page, server, opt, ids, open, shot, apiUpload, post, longest });

  // Regression: a 154 ms run crossing a second drew one bar over half a 2 s axis (the
  // axis was the store's whole-second buckets, not the run), and a step that is not a
  // multiple of the buckets made a saw-tooth (two buckets in one step, three in the next).
  await T.check('timeline: a 154 ms run is not one bar across half the axis; bars on the run\'s time; steps of whole buckets', async () => {
    // 30 min ago. Two hours ago once raced the server's stale pass, which judged a live run
    // by its data's times (a chunk got 409 in a cold CI run: "run 2012 is finished"); it now
    // judges by when data arrived (test_http.cpp, "old data times do not").
    const sec = Math.floor(Date.now() / 1000) - 1800;
    // Left live: a finished stream ends when /finish came (now), and these runs are in the past.
    const stream = async (key, startedNs, chunks) => {
      const s = await apiPost('/api/streams', JSON.stringify({ stream: `tl-${key}-${process.pid}`, name: `tl-${key}`, metrics: ['samples'], started_ns: startedNs, hz: 100 }));
      for (let k = 0; k < chunks.length; k++) {
        const [from, until, v] = chunks[k];
        await apiPost(`/api/runs/${s.id}/chunks`, wireChunk(k, ['samples'], [[['main', 'work'], [v]]], from, until), 'text/plain');
      }
      return s.id;
    };
    const tlText = (page) => page.evaluate(() => document.querySelector('#tl-range').textContent);
    // 154 ms from x.9 s: one chunk, so one 1 s bucket of the two the run touches.
    const t0 = (sec + 0.9) * 1e9;
    const short = await stream('short', t0, [[t0, t0 + 154e6, 15]]);
    const api = await (await fetch(`${server.base}/api/runs/${short}/timeline?metric=samples&step=1`)).json();
    assertEq(api.values.length, 2, `the run touches two 1 s buckets (why the old axis was 2 s): ${JSON.stringify(api)}`);
    await open(page, `/runs/${short}`);
    await page.waitForSelector('#timeline:not([hidden])');
    await page.waitForFunction(() => /No timeline/.test(document.querySelector('#tl-range').textContent));
    const text = await tlText(page);
    assert(/154 ms/.test(text) && /1\.0 s|1 s/.test(text), `says why: ${text}`);
    assertEq(await page.locator('#tl-plot rect.bar').count(), 0, 'no bar drawn');
    await shot(page, '18-timeline-short');

    // 5.5 s from x.5 s in 0.5 s chunks: 1 sample in the first bucket, 2 in each other.
    const t1 = (sec + 100.5) * 1e9;
    const chunks = [];
    for (let k = 0; k < 11; k++) chunks.push([t1 + k * 5e8, t1 + (k + 1) * 5e8, 1]);
    const mid = await stream('mid', t1, chunks);
    await open(page, `/runs/${mid}`);
    await page.waitForSelector('#tl-plot rect.bar');
    const bars = await page.evaluate(() => [...document.querySelectorAll('#tl-plot rect.bar')].map((r) => ({
      from: +r.dataset.from, until: +r.dataset.until, x: +r.getAttribute('x'), w: +r.getAttribute('width'),
    })));
    assertEq(bars.length, 6, `one bar per second the run touched: ${JSON.stringify(bars)}`);
    assertEq(bars[0].from, t1, 'the axis starts where the run started');
    assertEq(bars[bars.length - 1].until, t1 + 5.5e9, 'and ends where it ended');
    const full = bars[1].w;
    assert(Math.abs((bars[0].w + 1) * 2 - (full + 1)) < 2, `the first bar (0.5 s of the run) is half as wide as a whole second's: ${bars[0].w} vs ${full}`);
    const plotW = await page.evaluate(() => +document.querySelector('#tl-plot svg').getAttribute('viewBox').split(' ')[2]);
    assert(Math.abs(bars[bars.length - 1].x + bars[bars.length - 1].w + 0.5 - plotW) < 1.5, 'the last bar reaches the axis end');
    await shot(page, '19-timeline-mid');

    // A store whose finest buckets are 10 s, 10 min of the collector's default 5 s
    // chunks, asked in 25 s steps (what the page asks for a 100 min run): 10 s buckets
    // gave steps of 3, 2, 3, 2 buckets (30, 20, 30 ...) for even work.
    const coarse = await startServer(opt.server, opt.web, ['--resolutions', '10s:1d,1m:7d']);
    try {
      const send = async (p, body, type) => {
        const r = await fetch(`${coarse.base}${p}`, { method: 'POST', body, headers: { 'Content-Type': type, Connection: 'close' } });
        const text = await r.text();
        assert(r.ok, `POST ${p}: ${r.status} ${text}`);
        return text ? JSON.parse(text) : {};
      };
      const t2 = (sec + 1000) * 1e9;
      const s = await send('/api/streams', JSON.stringify({ stream: `tl-long-${process.pid}`, name: 'tl-long', metrics: ['samples'], started_ns: t2, hz: 100 }), 'application/json');
      for (let k = 0; k < 120; k++) {
        await send(`/api/runs/${s.id}/chunks`, wireChunk(k, ['samples'], [[['main', 'work'], [5]]], t2 + k * 5e9, t2 + (k + 1) * 5e9), 'text/plain');
      }
      const tl = await (await fetch(`${coarse.base}/api/runs/${s.id}/timeline?metric=samples&step=25`)).json();
      assertEq(tl.step_ns % 10e9, 0, `the step (${tl.step_ns} ns) is a multiple of the 10 s buckets: ${JSON.stringify(tl)}`);
      const inner = tl.values.slice(1, -1);
      assert(inner.length >= 10 && inner.every((v) => v === inner[0]), `equal work gives equal bars: ${tl.values.join(',')}`);
      assertEq(tl.values.reduce((x, y) => x + y, 0), 600, 'nothing lost');
    } finally {
      await coarse.stop();
    }
  });

  await T.check('no script errors on any page', async () => {
    assert(errors.length === 0, errors.join('\n'));
  });
}

let code = 0;
try {
  await main();
} catch (e) {
  T.results.push({ name: 'setup', ok: false, error: e });
  console.log(`FAIL setup: ${(e && e.stack) || e}`);
  if (server) console.log(server.log());
} finally {
  finished = true;
  clearTimeout(watchdog);
  await cleanup();
}
console.log('\ntimings:');
for (const [k, v] of Object.entries(T.figures)) console.log(`  ${k.padEnd(62)} ${String(v.value).padStart(9)} ${v.unit}`);
try {
  fs.mkdirSync(opt.shots, { recursive: true });
  fs.writeFileSync(path.join(opt.shots, 'timings.json'), JSON.stringify(T.figures, null, 1));
} catch (_) { /* figures are printed anyway */ }
console.log(`\n${T.passed} passed, ${T.failed} failed`);
code = T.failed ? 1 : 0;
process.exit(code);
