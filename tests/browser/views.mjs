// Browser checks of the views of issue 17: sandwich, source with line heat,
// the compare page's zoom/search/invert, keyboard and links, and the timing
// goals on a 200,000-stack run. Called by run.mjs with its helpers.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assert, assertEq, startServer, median, goalMs } from './harness.mjs';
import { bigProfile, recursiveProfile, linesProfile, luaSource, sandwichOf, lineHeatOf } from './profiles.mjs';


/**
 * Runs the luaflame CLI without blocking the event loop (spawnSync did: the
 * server closed an idle keep-alive connection meanwhile, unseen, and the
 * next fetch on it failed). Resolves to { status, stderr }.
 */
function runCli(cli, args, opts) {
  return new Promise((resolve) => {
    const p = spawn(cli, args, { cwd: opts.cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeout);
    p.on('close', (status) => { clearTimeout(timer); resolve({ status, stderr }); });
  });
}

/** Waits until the sandwich view shows `fn`. */
async function sandwichShown(page, fn) {
  await page.waitForFunction((f) => {
    const s = document.querySelector('#sandwich');
    return s && !s.hidden && s.dataset.fn === f && s.dataset.state === 'ready';
  }, fn, { timeout: 60000 });
}

/** Names drawn in one half of the sandwich, read the way the page reads them. */
const half = (page, which) => page.evaluate((w) => {
  const g = window.__lfSandwich[w];
  return g.frames.map((f, i) => ({ name: g.name(i), w: f.w }));
}, which);

/** Clicks (or hovers) frame i of one half of the sandwich: the halves are canvases,
 *  so the point is the frame's centre, scrolled into the viewport first. */
async function pointHalf(page, which, i, click = true) {
  const at = () => page.evaluate(([w, k]) => {
    const g = window.__lfSandwich[w];
    const f = g.frames[k];
    const b = g.canvas.getBoundingClientRect();
    const [vx, vy, vw, vh] = g.viewBox.split(' ').map(Number);
    return { x: b.left + ((f.x + f.w / 2 - vx) * b.width) / vw, y: b.top + ((f.y + g.rowH / 2 - vy) * b.height) / vh, h: innerHeight };
  }, [which, i]);
  let p = await at();
  if (p.y < 10 || p.y > p.h - 10) {
    await page.evaluate((dy) => window.scrollBy(0, dy), p.y - p.h / 2);
    p = await at();
  }
  if (click) await page.mouse.click(p.x, p.y);
  else await page.mouse.move(p.x, p.y);
}

/** Text value of a value cell, as a number ("1,234" -> 1234). */
const num = (t) => +String(t).replace(/[^\d.-]/g, '');

export async function viewChecks(h) {
  const { T, page, server, opt, ids, open, shot, apiUpload, post, longest } = h;

  // ---- sandwich ------------------------------------------------------------
  const recFolded = recursiveProfile();
  ids.rec = await apiUpload('recursive', ['kind=sandwich'], recFolded);

  await T.check('sandwich: picked by keyboard from the table; callers above, callees below, recursion merged', async () => {
    await open(page, `/runs/${ids.rec}`);
    await page.waitForSelector('#functions tbody tr');
    // Tab stops on the rows; arrows move; "s" opens the sandwich of the focused row.
    await page.focus('#functions tbody tr:first-child');
    const rows = await page.$$eval('#functions tbody tr', (trs) => trs.map((t) => t.querySelector('td.fn').textContent));
    const k = rows.indexOf('rec');
    assert(k >= 0, `rec listed: ${rows}`);
    for (let i = 0; i < k; i++) await page.keyboard.press('ArrowDown');
    assertEq(await page.evaluate(() => document.activeElement.querySelector('td.fn').textContent), 'rec', 'arrow keys reach the row');
    await page.keyboard.press('s');
    await sandwichShown(page, 'rec');
    const u = new URL(page.url());
    assertEq(u.searchParams.get('view'), 'sandwich', 'view in the URL');
    assertEq(u.searchParams.get('fn'), 'rec', 'function in the URL');
    const want = sandwichOf(recFolded, 'rec');
    assertEq(num(await page.textContent('#sw-total')), want.total, 'total = sum of stacks holding rec (each once)');
    assertEq(num(await page.textContent('#sw-self')), want.self, 'self = stacks ending in rec');
    const callees = await half(page, 'callees');
    const callers = await half(page, 'callers');
    const cn = callees.map((f) => f.name);
    assertEq(cn.filter((n) => n === 'rec').length, 1, `recursion merged: rec once among the callees (${cn})`);
    for (const [name, v] of Object.entries(want.callees)) assert(cn.includes(name), `callee ${name} (${v}) drawn: ${cn}`);
    const rn = callers.map((f) => f.name);
    assertEq(rn.filter((n) => n === 'rec').length, 1, `rec once among the callers (${rn})`);
    for (const name of Object.keys(want.callers)) assert(rn.includes(name), `caller ${name} drawn: ${rn}`);
    // Widths follow the values: the top callee's width over rec's width is its share.
    const top = callees.find((f) => f.name === 'rec');
    const leaf = callees.find((f) => f.name === 'leaf');
    assert(Math.abs(leaf.w / top.w - want.callees.leaf / want.total) < 0.02, `leaf width ${leaf.w}/${top.w} ~ ${want.callees.leaf}/${want.total}`);
    await shot(page, '12-sandwich');
    // Hover on the canvas: the frame's tooltip. A click on a callee: its sandwich;
    // Back: rec again; 1 the graph, 2 the sandwich again.
    const li = callees.findIndex((f) => f.name === 'leaf');
    await pointHalf(page, 'callees', li, false);
    await page.waitForFunction(() => [...document.querySelectorAll('.tip')].some((t) => !t.hidden && t.querySelector('.t-name').textContent === 'leaf'));
    assert(await page.locator('#sw-callees .overlay rect.hov').count() === 1, 'hovered frame outlined');
    await pointHalf(page, 'callees', li);
    await sandwichShown(page, 'leaf');
    await page.goBack();
    await sandwichShown(page, 'rec');
    await page.keyboard.press('1');
    await page.waitForSelector('#flame[data-state=ready]');
    assert(!page.url().includes('view='), 'key 1: flame graph');
    // From the graph: hover a frame, then "s" opens its sandwich; Back returns.
    const oi = await page.evaluate(() => { const g = window.__lfGraph; return g.frames.findIndex((f, k) => g.name(k) === 'other'); });
    assert(oi >= 0, 'frame "other" drawn in the graph');
    await page.locator('#flame svg g > rect').nth(oi).hover();
    await page.keyboard.press('s');
    await sandwichShown(page, 'other');
    await page.goBack();
    await page.waitForSelector('#flame[data-state=ready]');
    await page.keyboard.press('2');  // the sandwich of the frame picked last
    await sandwichShown(page, 'other');
    await page.fill('#search', 'rec');
    await page.press('#search', 'Enter');
    await sandwichShown(page, 'rec');
    // Search + Enter in the sandwich view picks the first matching function.
    await page.fill('#search', 'oth');
    await page.press('#search', 'Enter');
    await sandwichShown(page, 'other');
    // A shared link opens the same view.
    const link = page.url();
    await open(page, new URL(link).pathname + new URL(link).search, '#sandwich[data-state=ready]');
    assertEq(await page.getAttribute('#sandwich', 'data-fn'), 'other', 'the link reopens the sandwich');
  });

  await T.check('sandwich follows the metric and the time range (matches /functions for that view)', async () => {
    const range = await page.evaluate(async (id) => (await (await fetch(`/api/runs/${id}/timeline?metric=time&step=1`)).json()), ids.stream);
    const from = range.from_ns + 10e9;
    const until = range.from_ns + 40e9;
    await open(page, `/runs/${ids.stream}?view=sandwich&fn=db.query&metric=time&from=${from}&until=${until}`, '#sandwich[data-state=ready]');
    const fns = await page.evaluate(async ([id, f, u]) => (await (await fetch(`/api/runs/${id}/functions?metric=time&from=${f}&until=${u}`)).json()), [ids.stream, from, until]);
    const db = fns.functions.find((x) => x.name === 'db.query');
    const info = await page.evaluate(async ([id, f, u]) => (await (await fetch(`/api/runs/${id}/sandwich?fn=db.query&metric=time&from=${f}&until=${u}`)).json()), [ids.stream, from, until]);
    assertEq(info.total, db.total, 'sandwich total = function table total for the same metric and range');
    assert(/ms|µs|s$/.test(await page.textContent('#sw-total')), 'time shown in time units');
    const whole = await page.evaluate(async (id) => (await (await fetch(`/api/runs/${id}/sandwich?fn=db.query&metric=time`)).json()), ids.stream);
    assert(whole.total > info.total, `the range narrows it (${whole.total} > ${info.total})`);
  });

  // ---- source with line heat ----------------------------------------------
  const src = luaSource(2000);
  const linesFolded = linesProfile(2000);
  ids.lines = await apiUpload('lines', ['kind=source'], linesFolded);

  await T.check('sources upload: JSON, limits, token', async () => {
    let r = await post(`/api/runs/${ids.lines}/sources`, JSON.stringify({ files: { 'app.lua': src } }), 'application/json');
    assertEq(r.status, 200, `stored: ${r.text}`);
    r = await post(`/api/runs/${ids.lines}/sources`, '{"files": {"x.lua": 5}}', 'application/json');
    assertEq(r.status, 400, 'a text that is not a string');
    r = await post(`/api/runs/${ids.lines}/sources`, 'not json', 'application/json');
    assertEq(r.status, 400, 'not JSON');
    r = await post(`/api/runs/${ids.lines}/sources`, JSON.stringify({ files: { 'big.lua': 'x'.repeat((1 << 20) + 1) } }), 'application/json');
    assertEq(r.status, 413, 'a file over 1 MiB');
    r = await post('/api/runs/999999/sources', '{"files": {}}', 'application/json');
    assertEq(r.status, 404, 'unknown run');
    const list = await (await fetch(`${server.base}/api/runs/${ids.lines}/sources`)).json();
    assertEq(JSON.stringify(list.files), JSON.stringify([{ bytes: Buffer.byteLength(src), path: 'app.lua' }]), 'listed; the refused uploads stored nothing');
    const locked = await startServer(opt.server, opt.web, ['--token', 'sesame']);
    try {
      const up = await fetch(`${locked.base}/api/runs?name=t`, { method: 'POST', body: 'main;x 1\n', headers: { Authorization: 'Bearer sesame' } });
      const id = (await up.json()).id;
      let s = await fetch(`${locked.base}/api/runs/${id}/sources`, { method: 'POST', body: '{"files": {"a.lua": "x"}}' });
      assertEq(s.status, 401, 'no token: 401');
      s = await fetch(`${locked.base}/api/runs/${id}/sources`, { method: 'POST', body: '{"files": {"a.lua": "x"}}', headers: { Authorization: 'Bearer sesame' } });
      assertEq(s.status, 200, 'with the token');
    } finally {
      await locked.stop();
    }
  });

  await T.check('source view: reached by clicking a frame, 2,000 lines with line heat, executed lines, n/N', async () => {
    // Three rounds (the page opened anew each time): hover a frame of app.lua, then
    // its Source button; timed from the click event to the frame after the last row.
    const rounds = [];
    let fname = '';
    for (let round = 0; round < 3; round++) {
      await open(page, `/runs/${ids.lines}`);
      await page.waitForSelector('#flame[data-state=ready]');
      const i = await page.evaluate(() => { const g = window.__lfGraph; return g.frames.findIndex((f, k) => /^f1\d* app\.lua:\d+$/.test(g.name(k))); });
      assert(i >= 0, 'an app.lua frame is drawn');
      fname = await page.evaluate((k) => window.__lfGraph.name(k), i);
      await page.locator('#flame svg g > rect').nth(i).hover();
      await page.waitForSelector('#pick-source:not([disabled])');
      await page.waitForTimeout(300);  // the page's idle work (the sandwich warm-up) settles
      await longest(page);
      const t0 = Date.now();
      await page.evaluate(() => { window.__t0 = performance.now(); document.querySelector('#pick-source').click(); });
      await page.waitForSelector('#source[data-state=ready][data-rows] #src-lines');
      const driver = Date.now() - t0;
      await page.waitForFunction(() => window.__lfPerf.sources.at(-1) && window.__lfPerf.sources.at(-1).paintedAt > window.__t0);
      const sp = await page.evaluate(() => ({ ...window.__lfPerf.sources.at(-1), ms: window.__lfPerf.sources.at(-1).paintedAt - window.__t0 }));
      rounds.push({ ...sp, driver, long: await longest(page) });
    }
    const med = (k) => median(rounds.map((r) => r[k]));
    const list = (k) => `[${rounds.map((r) => Math.round(r[k])).join(', ')}]`;
    T.figure(`source view: click to 2,000-line file painted (in the page), median of 3 ${list('ms')}`, med('ms'));
    T.figure('source view: click to 2,000-line file shown (driver), median of 3', med('driver'));
    T.figure(`source view: fetch (text + line heat of every metric) ${list('fetchMs')}`, med('fetchMs'));
    T.figure(`source view: draw (2,000 rows) ${list('drawMs')}`, med('drawMs'));
    const srcLong = Math.max(...rounds.map((r) => r.long));
    T.figure(`source view: longest main-thread task ${list('long')}`, srcLong);
    assert(med('ms') < goalMs(300), `source view within 300 ms of the click: median ${med('ms')} ms ${list('ms')}`);
    // Per round, the longest task; the goal is asserted on the median round: on this
    // shared 2-core machine a task is now and then preempted mid-way (the max is reported).
    assert(med('long') < goalMs(100), `no main-thread task over 100 ms while opening the source view: median round ${med('long')} ms ${list('long')}`);
    const u = new URL(page.url());
    assertEq(u.searchParams.get('view'), 'source', 'view in the URL');
    assertEq(u.searchParams.get('file'), 'app.lua', 'file in the URL');
    assertEq(+u.searchParams.get('line'), +fname.split(':')[1], 'line of the clicked frame in the URL');
    assertEq(await page.locator('#src-lines .src-row:not(.src-th)').count(), 2000, 'every line of the file');
    const want = lineHeatOf(linesFolded, 'app.lua');
    const got = await page.evaluate(() => [...document.querySelectorAll('#src-lines .src-row:not(.src-th)')].map((r) => [+r.querySelector('.ln').textContent, r.querySelector('.num.cur').textContent, r.querySelector('.ln').classList.contains('exec'), r.querySelector('.heat').style.getPropertyValue('--w')]));
    let checked = 0;
    let max = Math.max(...Object.values(want));
    for (const [ln, text, exec, w] of got) {
      const v = want[ln] || 0;
      if (num(text || '0') !== v) throw new Error(`line ${ln}: shown ${text}, want ${v}`);
      if (exec !== v > 0) throw new Error(`line ${ln}: executed mark ${exec}, value ${v}`);
      if (v && Math.abs(parseFloat(w) - Math.max(1, (100 * v) / max)) > 0.11) throw new Error(`line ${ln}: bar ${w} for ${v} of ${max}`);
      checked += v > 0;
    }
    assert(checked > 100, `many hot lines checked (${checked})`);
    assertEq(await page.textContent('#L1 .src-code'), src.split('\n')[0], 'source text shown');
    await shot(page, '13-source');
    await page.keyboard.press('n');
    const first = Math.min(...Object.keys(want).map(Number));
    assertEq(await page.getAttribute('#src-lines .src-row.target', 'id'), `L${first}`, 'n: first hot line');
    await page.keyboard.press('N');
    const last = Math.max(...Object.keys(want).map(Number));
    assertEq(await page.getAttribute('#src-lines .src-row.target', 'id'), `L${last}`, 'N: back to the last hot line');
    // A file whose text was not shipped: the lines with values, and a note.
    await open(page, `/runs/${ids.lines}?view=source&file=other.lua`, '#source[data-state=ready][data-rows]');
    assert(await page.isVisible('#src-missing'), 'says the text was not shipped');
  });

  // The real collector: `luaflame run --lines --sources` streams a run whose leaf
  // frames carry current lines and ships the script's text.
  const cli = path.resolve(opt.luaflame || path.join(path.dirname(opt.server), '../cli/luaflame'));
  await T.check('real collector (--lines --sources): source view of the profiled script', async () => {
    assert(fs.existsSync(cli), `no luaflame cli at ${cli} (--luaflame PATH)`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-src-'));
    try {
      const script = ['local function fib(n)', '  if n < 2 then return n end', '  return fib(n - 1) + fib(n - 2)', 'end', '',
        'local function build(n)', '  local t = {}', '  for i = 1, n do', '    t[#t + 1] = string.rep("x", i % 50)', '  end', '  return t', 'end', '',
        'local s = 0', 'for k = 1, 8 do', '  s = s + fib(25)', '  build(40000)', 'end', 'print(s)', ''].join('\n');
      fs.writeFileSync(path.join(dir, 'work.lua'), script);
      const r = await runCli(cli, ['run', '--server', server.base, '--name', 'real-lines', '--lines', '--sources', '--quiet', 'work.lua'],
        { cwd: dir, timeout: 60000, encoding: 'utf8' });
      assertEq(r.status, 0, `luaflame run: ${r.stderr}`);
      const runs = await (await fetch(`${server.base}/api/runs?name=real-lines`)).json();
      const id = runs.runs[0].id;
      const src = await (await fetch(`${server.base}/api/runs/${id}/source?file=work.lua`)).json();
      assertEq(src.text, script, 'the script text was shipped as is');
      const hot = src.metrics.samples.lines.map(([l]) => l);
      assert(hot.length >= 2, `samples at several lines: ${hot}`);
      // Lines that run code: the functions' bodies, the loop, and the main chunk's
      // own two statements (14, 19): under ASan a sample once fell on print(s)
      // (CI, 2026-12-06: 2,3,9,19). Never a header, a blank line or a lone `end`.
      const runsCode = (l) => (l >= 2 && l <= 3) || (l >= 7 && l <= 11) || (l >= 14 && l <= 17) || l === 19;
      assert(hot.every(runsCode), `samples only on lines that run code: ${hot}`);
      await open(page, `/runs/${id}?view=source&file=work.lua`, '#source[data-state=ready][data-rows]');
      assertEq(await page.locator('#src-lines .src-row:not(.src-th)').count(), script.split('\n').length - 1, 'every line');
      assert(await page.locator('#src-lines .ln.exec').count() === hot.length, 'executed lines marked');
      await shot(page, '17-source-real-collector');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // Issue 27: luaflame's own hook time is the profiler's cost: the run page
  // says it, leaves it out of the views, and shows it with the toolbar's
  // Profiler toggle when the run holds it (--show-profiler).
  await T.check("real collector (--show-profiler): the profiler's cost on the run page, its frames behind a toggle", async () => {
    assert(fs.existsSync(cli), `no luaflame cli at ${cli} (--luaflame PATH)`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-prof-'));
    const fnNames = () => page.$$eval('#functions tbody td.fn', (tds) => tds.map((t) => t.textContent));
    try {
      fs.writeFileSync(path.join(dir, 'calls.lua'), ['local function leaf(i) return i % 7 end',
        'local function mid(n) local s = 0 for i = 1, n do s = s + leaf(i) end return s end',
        'local t = os.clock() while os.clock() - t < 0.6 do mid(100) end', ''].join('\n'));
      const ids = {};
      for (const [name, extra] of [['prof-shown', ['--show-profiler']], ['prof-hidden', []]]) {
        const r = await runCli(cli, ['run', '--server', server.base, '--name', name, '--mode', 'both', '--hz', '999', ...extra, '--quiet', 'calls.lua'],
          { cwd: dir, timeout: 60000, encoding: 'utf8' });
        assertEq(r.status, 0, `luaflame run: ${r.stderr}`);
        ids[name] = (await (await fetch(`${server.base}/api/runs?name=${name}`)).json()).runs[0].id;
      }
      await open(page, `/runs/${ids['prof-shown']}`, '#functions tbody tr');
      const cost = await page.textContent('#profiler-cost');
      assert(/^Profiler \d+\.\d%; [\d,]+ samples in its own hook \(toolbar/.test(cost), `cost line: ${cost}`);
      assert(!(await fnNames()).includes('[luaflame] hook'), 'left out by default');
      await page.click('#profiler');
      await page.waitForFunction(() => [...document.querySelectorAll('#functions tbody td.fn')].some((t) => t.textContent === '[luaflame] hook'));
      assert(page.url().includes('profiler=1'), `in the URL: ${page.url()}`);
      await shot(page, '27-profiler-shown');
      await open(page, `/runs/${ids['prof-hidden']}`, '#functions tbody tr');
      assert(/left out by the collector/.test(await page.textContent('#profiler-cost')), 'the hidden run says where they went');
      assertEq(await page.$('#profiler'), null, 'no toggle where the run holds no profiler frames');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // ---- compare -------------------------------------------------------------
  await T.check('compare: zoom, search, invert, keyboard, all in the URL', async () => {
    await open(page, `/compare?base=${ids.game1}&head=${ids.game2}`);
    await page.waitForSelector('#flame[data-state=ready]');
    const widthOf = (name) => page.evaluate((n) => {
      const g = window.__lfGraph;
      const i = g.frames.findIndex((f, k) => g.name(k) === n);
      return i < 0 ? 0 : g.frames[i].w;
    }, name);
    const drawHead = await widthOf('[C] love.graphics.draw');
    let n = await page.evaluate(() => window.__lfPerf.loads.length);
    await page.locator('#flame svg g > rect').nth(await page.evaluate(() => { const g = window.__lfGraph; return g.frames.findIndex((f, k) => g.name(k) === 'physics.step'); })).click();
    await page.waitForFunction((k) => window.__lfPerf.loads.length > k, n);
    assert(decodeURIComponent(page.url()).includes('focus=main;love.run;love.update;world:update;physics.step'), `focus in the URL: ${page.url()}`);
    assertEq(await page.textContent('#crumbs .cur'), 'physics.step', 'breadcrumb');
    assert(!(await page.evaluate(() => window.__lfGraph.frames.some((f, k) => window.__lfGraph.name(k) === 'render.sprites'))), 'only the zoomed subtree');
    await page.keyboard.press('/');
    assertEq(await page.evaluate(() => document.activeElement.id), 'diff-search', '/ focuses the search');
    await page.keyboard.type('collide');
    await page.waitForFunction(() => /Matched/.test(document.querySelector('#matched').textContent));
    assert(await page.locator('#flame .overlay rect.hit').count() === 1, 'the match is highlighted');
    assert(page.url().includes('q=collide'), 'search in the URL');
    await shot(page, '14-compare-zoom-search');
    await page.keyboard.press('Escape');  // leaves the box
    n = await page.evaluate(() => window.__lfPerf.loads.length);
    await page.keyboard.press('Escape');  // resets the zoom
    await page.waitForFunction((k) => window.__lfPerf.loads.length > k, n);
    assert(!page.url().includes('focus='), 'Esc resets the zoom');
    n = await page.evaluate(() => window.__lfPerf.loads.length);
    await page.keyboard.press('i');
    await page.waitForFunction((k) => window.__lfPerf.loads.length > k, n);
    assert(page.url().includes('invert=1'), 'invert in the URL');
    const drawBase = await widthOf('[C] love.graphics.draw');
    // The draw call's share shrank in head: inverted (base widths) it is wider.
    assert(drawBase > drawHead * 1.3, `inverted: what got faster is wider (${drawBase} vs ${drawHead})`);
    await shot(page, '15-compare-inverted');
    const link = page.url();
    await open(page, new URL(link).pathname + new URL(link).search, '#flame[data-state=ready]');
    assert(page.url().includes('invert=1') && page.url().includes('q=collide'), 'the link reopens the same view');
    assert(await page.locator('#flame .overlay rect.hit').count() >= 1, 'with the search');
  });

  // ---- the 200,000-stack run -------------------------------------------------
  await T.check(`${opt.big.toLocaleString('en')}-stack run: sandwich within 300 ms of the click, no long task`, async () => {
    if (!ids.big) ids.big = await apiUpload('big', ['stacks=' + opt.big], bigProfile(opt.big));
    const warm = page.waitForResponse((r) => /\/sandwich(\?|$)/.test(r.url()) && !/fn=/.test(r.url()), { timeout: 120000 });
    await open(page, `/runs/${ids.big}`);
    const t0 = Date.now();
    await warm;
    T.figure('big run: sandwich paths loaded (idle, after the page)', Date.now() - t0);
    const fns = await page.evaluate(async (id) => (await (await fetch(`/api/runs/${id}/functions?limit=5000`)).json()).functions, ids.big);
    const byTotal = fns.slice().sort((a, b) => b.total - a.total);
    // The root (its callees are the whole graph), the next widest by total, the widest
    // by self, one in the middle, the rarest (each of its stacks wide: the most frames).
    const picks = [byTotal[0].name, byTotal[1].name, fns[0].name, byTotal[Math.floor(byTotal.length / 2)].name, byTotal[byTotal.length - 1].name];
    await page.keyboard.press('2');
    await page.waitForSelector('#sandwich:not([hidden])');
    // Three rounds at three window widths: the halves are drawn for the panel's
    // width, so each round asks the server anew (its graph cache is keyed by width).
    // Timed from the click event to the frame after the last half is drawn.
    const kinds = ['root', 'second by total', 'top self', 'middle', 'rare'];
    const rounds = [];
    const longs = [];
    for (const width of [1440, 1400, 1360]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(400);  // the resize settles
      const times = [];
      const parts = [];
      await longest(page);
      for (const name of picks) {
        await page.fill('#fn-filter', name);
        const row = page.locator('#functions tbody tr').filter({ has: page.locator('td.fn', { hasText: name }) }).first();
        await row.waitFor();
        await page.waitForTimeout(150);  // the filter's table redraw is not part of the sandwich
        const n = await page.evaluate(() => window.__lfPerf.sandwiches.length);
        await row.evaluate((tr) => { window.__t0 = performance.now(); tr.click(); });
        await sandwichShown(page, name);
        await page.waitForFunction((k) => window.__lfPerf.sandwiches.length > k, n);
        const r = await page.evaluate(() => { const x = window.__lfPerf.sandwiches.at(-1); return { ms: x.paintedAt - window.__t0, x }; });
        times.push(r.ms);
        parts.push(r.x);
      }
      longs.push(await longest(page));
      rounds.push({ width, times, parts });
    }
    await page.setViewportSize({ width: 1440, height: 900 });
    kinds.forEach((k, i) => {
      const ts = rounds.map((r) => r.times[i]);
      T.figure(`big run: sandwich click to painted (${k}), median of 3 [${ts.map(Math.round).join(', ')}]`, median(ts));
      const half = (h) => median(rounds.map((r) => r.parts[i][h].fetchMs));
      const draw = (h) => median(rounds.map((r) => r.parts[i][h].buildMs));
      T.figure(`big run: sandwich (${k}): fetch callers / callees (server + transfer)`, `${Math.round(half('callers'))} / ${Math.round(half('callees'))}`, 'ms');
      T.figure(`big run: sandwich (${k}): draw callers / callees (frames read + canvas)`, `${Math.round(draw('callers'))} / ${Math.round(draw('callees'))}`, 'ms');
      T.figure(`big run: sandwich (${k}): frames callers / callees`, `${rounds[0].parts[i].callers.frames} / ${rounds[0].parts[i].callees.frames}`, '');
    });
    const all = rounds.flatMap((r) => r.times);
    T.figure(`big run: sandwich click to painted, median of all ${all.length}`, median(all));
    T.figure(`big run: longest main-thread task, sandwiches [${longs.map(Math.round).join(', ')}]`, Math.max(...longs));
    await shot(page, '16-big-sandwich');
    const last = fns.find((f) => f.name === picks[picks.length - 1]);
    assertEq(num(await page.textContent('#sw-total')), last.total, 'the sandwich total is the function table\'s total');
    // The goals of issue 17, per function: the median of its three rounds.
    kinds.forEach((k, i) => {
      const m = median(rounds.map((r) => r.times[i]));
      assert(m < goalMs(300), `sandwich of the ${k} function within 300 ms of the click: ${m} ms (rounds ${rounds.map((r) => r.times[i])})`);
    });
    assert(median(longs) < goalMs(100), `no main-thread task over 100 ms while making sandwiches: median round ${median(longs)} ms (${longs})`);
    await page.fill('#fn-filter', '');
  });
}
