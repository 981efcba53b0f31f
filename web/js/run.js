// A run: header, timeline (streamed runs), toolbar, breadcrumb, the flame
// graph and the function table. The view (metric, focus, time range,
// inverted, search) lives in the URL; back/forward replay it.
import { api, url } from './api.js';
import { el, $, initHeader, errorBox, toast, copyText, tagChip, debounce } from './ui.js';
import { fmtDate, fmtDuration, fmtValue, fmtPct, metricLabel } from './format.js';
import { FlameGraph, exactRegexSource, CANVAS_FRAMES } from './flame.js';
import { FuncTable } from './functable.js';
import { drawTimeline, timelineResolves } from './timeline.js';
import { SandwichView } from './sandwich.js';
import { SourceView, frameSource } from './source.js';

const LIVE_MS = 5000;
// Frames narrower than this many pixels are left out by the server: they
// cannot be seen, and on big runs they are most of the DOM (a 200,000-stack
// run at 1000 px: 11,183 frames at 0.1 px, 4,682 at 0.5 px). Zooming brings
// them back.
const MIN_WIDTH = 0.5;
const id = +(location.pathname.match(/\/runs\/(\d+)/) || [])[1];
const app = $('#app');
let run = null;
let view = readView();
let graph = null;
let table = null;
let sandwich = null;
let source = null;
let picked = '';          // the frame last hovered or the row last focused: what s / o act on
let loadedKey = '';       // what the graph shows now
let fnKey = '';           // what the table shows now
let lastWidth = 0;
const perf = (window.__lfPerf = { loads: [], sandwiches: [], sources: [] });

function readView() {
  const q = new URLSearchParams(location.search);
  const focus = q.get('focus');
  return {
    metric: q.get('metric') || '',
    focus: focus ? focus.split(';') : [],
    from: q.get('from') || '',
    until: q.get('until') || '',
    inverted: q.get('inverted') === '1',
    profiler: q.get('profiler') === '1',
    q: q.get('q') || '',
    view: ['sandwich', 'source'].includes(q.get('view')) ? q.get('view') : '',
    fn: q.get('fn') || '',
    file: q.get('file') || '',
    line: +(q.get('line') || 0),
  };
}

function viewURL(v) {
  return url(location.pathname, {
    metric: v.metric !== defaultMetric() ? v.metric : '',
    focus: v.focus.join(';'),
    from: v.from,
    until: v.until,
    inverted: v.inverted,
    profiler: v.profiler,
    q: v.q,
    view: v.view,
    fn: v.view === 'sandwich' || v.view === 'source' ? v.fn : '',
    file: v.view === 'source' ? v.file : '',
    line: v.view === 'source' && v.line ? v.line : '',
  });
}

/** The sandwich of `name` (a frame name). */
function openSandwich(name) {
  if (name) setView({ view: 'sandwich', fn: name });
}

/** The source of `name`'s file at its line, when it is a Lua frame. */
function openSource(name) {
  const s = frameSource(name);
  if (!s) { toast(`${name || 'This frame'} has no Lua source (a C function or a marker frame)`); return; }
  setView({ view: 'source', fn: name, file: s.file, line: s.line });
}

/** The search box shows view.q where view.q is set for it (a pick, back and
 *  forward), never at the end of a render: one that ended while the user
 *  typed put the old query back under the cursor, and Enter then searched it. */
function showQuery() {
  const s = $('#search');
  if (s && s.value !== view.q) s.value = view.q;
}

/** Changes the view; `push` adds a history entry (zoom, metric, range), else replaces it. */
function setView(changes, push = true) {
  view = { ...view, ...changes };
  if ('q' in changes) showQuery();
  const u = viewURL(view);
  if (u !== location.pathname + location.search) history[push ? 'pushState' : 'replaceState'](null, '', u);
  render();
}

// The server's order of metrics; its default is the first one a run has.
const METRICS = ['samples', 'time', 'calls', 'alloc_bytes', 'alloc_count', 'live_bytes', 'live_count'];

function defaultMetric() {
  const ms = (run && run.metrics) || {};
  return METRICS.find((m) => ms[m]) || Object.keys(ms)[0] || 'samples';
}

const metric = () => view.metric || defaultMetric();
const unitsOf = (m) => (((run && run.metrics) || {})[m] || {}).units || '';

// ---- header --------------------------------------------------------------

function header() {
  const tags = Object.entries(run.tags || {}).map(([k, v]) => tagChip(k, v));
  const totals = Object.entries(run.metrics || {}).map(([m, info]) =>
    el('span', `${metricLabel(m)} `, el('b', fmtValue(info.total, m, info.units))));
  return el('div#run-head',
    el('div.run-head',
      el('h1', run.name || '(unnamed)'),
      el('span.badge.src', `#${run.id}`),
      run.status === 'live' ? el('span.badge.live#live-badge', 'live') : null,
      run.source ? el('span.badge.src', run.source) : null,
      tags),
    el('div.run-meta',
      el('span', 'Started ', el('b', fmtDate(run.started_ns))),
      el('span', 'Duration ', el('b', run.status === 'live' ? 'still running' : fmtDuration(run.duration_ns))),
      run.stacks ? el('span', 'Stacks ', el('b', run.stacks.toLocaleString('en'))) : null,
      totals,
      profilerCost()));
}

/** The profiler's own cost, from the collector's stats (issue 27): its hooks'
 *  time as a share of the run's clock, and the samples that fell in its own
 *  hook, which the views leave out (shown with the toolbar's "Profiler"). */
function profilerCost() {
  const s = run.stats;
  if (!s || !(s.clock_ns > 0)) return null;
  const share = `${((100 * (s.hook_ns || 0)) / s.clock_ns).toFixed(1)}%`;
  const own = s.samples_in_hooks || 0;
  const note = !own ? '' : s.profiler_shown
    ? `; ${own.toLocaleString('en')} samples in its own hook (toolbar: Profiler)`
    : `; ${own.toLocaleString('en')} samples in its own hook, left out by the collector (--show-profiler keeps them)`;
  return el('span#profiler-cost', { title: "luaflame's own time: not the program's, left out of the views" },
    'Profiler ', el('b', share), note);
}

// ---- toolbar -------------------------------------------------------------

function toolbar() {
  const seg = el('div.seg#metrics', { role: 'group', 'aria-label': 'Metric' },
    Object.keys(run.metrics || {}).map((m) => el('button', {
      type: 'button', dataset: { metric: m }, 'aria-pressed': String(m === metric()),
      onclick: () => { if (m !== metric()) setView({ metric: m, focus: view.focus }); },
    }, metricLabel(m))));
  const search = el('input#search', { type: 'search', placeholder: 'Search frames (regex)', value: view.q, 'aria-label': 'Search frames', autocomplete: 'off' });
  const applySearch = debounce(() => { view.q = search.value; history.replaceState(null, '', viewURL(view)); doSearch(); }, 120);
  search.addEventListener('input', applySearch);
  // Enter in the sandwich view: the sandwich of the first function matching the search.
  search.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' || view.view !== 'sandwich') return;
    const hit = table.firstMatch(search.value);
    if (hit) openSandwich(hit);
    else toast('No function matches');
  });
  // Only where the run holds luaflame's own frames (--show-profiler).
  const prof = run.stats && run.stats.profiler_shown
    ? el('button.toggle#profiler', { type: 'button', 'aria-pressed': String(view.profiler), title: "Show luaflame's own hook time ([luaflame] hook): the profiler's cost" }, 'Profiler')
    : null;
  if (prof) prof.addEventListener('click', () => setView({ profiler: !view.profiler }));
  const inv = el('button.toggle#inverted', { type: 'button', 'aria-pressed': String(view.inverted), title: 'Icicle graph: roots at the top' }, 'Inverted');
  inv.addEventListener('click', () => setView({ inverted: !view.inverted }));
  const reset = el('button#reset-zoom', { type: 'button', title: 'Reset zoom (Esc)', onclick: () => resetZoom() }, 'Reset zoom');
  const side = el('button.toggle#toggle-table', { type: 'button', 'aria-pressed': 'true', title: 'Show or hide the function table' }, 'Functions');
  side.addEventListener('click', () => {
    const ws = $('#workspace');
    ws.classList.toggle('no-side');
    side.setAttribute('aria-pressed', String(!ws.classList.contains('no-side')));
    lastWidth = 0;
    render();
  });
  const dl = el('div.items#downloads', { hidden: true });
  const dlBtn = el('button#download', { type: 'button', 'aria-haspopup': 'true' }, 'Download ▾');
  dlBtn.addEventListener('click', (e) => { e.stopPropagation(); fillDownloads(dl); dl.hidden = !dl.hidden; });
  document.addEventListener('click', () => { dl.hidden = true; });
  const copy = el('button#copy-link', { type: 'button', title: 'Copy a link to this exact view' }, 'Copy link');
  copy.addEventListener('click', async () => toast((await copyText(location.href)) ? 'Link to this view copied' : 'Copy failed'));
  const tabs = el('div.seg.tabs#views', { role: 'tablist', 'aria-label': 'View' },
    [['', 'Flame graph', '1'], ['sandwich', 'Sandwich', '2'], ['source', 'Source', '3']].map(([v, label, key]) => el('button', {
      type: 'button', role: 'tab', dataset: { view: v }, 'aria-selected': String(view.view === v), title: `${label} (${key})`,
      onclick: () => switchView(v),
    }, label)));
  return el('div.panel.toolbar',
    tabs,
    seg,
    el('div.search', search),
    el('span.matched#matched', { 'aria-live': 'polite' }),
    el('span.spacer'),
    inv, prof, reset, side,
    el('div.menu', dlBtn, dl),
    copy);
}

function fillDownloads(box) {
  const m = metric();
  const common = { metric: m, from: view.from, until: view.until, profiler: view.profiler };
  const base = `${(run.name || 'run').replace(/[^\w.-]+/g, '_')}-${run.id}`;
  box.replaceChildren(
    el('a', { href: api.svgURL(id, { ...graphParams(1200), minwidth: '' }), download: `${base}.svg` }, 'Flame graph', el('small', 'SVG')),
    el('a', { href: api.foldedURL(id, { ...common, focus: view.focus.join(';') }), download: `${base}.folded` }, 'Folded stacks', el('small', '.folded')),
    el('a', { href: api.speedscopeURL(id, { metric: m, profiler: view.profiler }), download: `${base}.speedscope.json` }, 'Speedscope', el('small', 'JSON')));
}

// ---- timeline ------------------------------------------------------------

async function timeline() {
  const box = $('#timeline');
  if (!box) return;
  if (run.source !== 'stream' && run.source !== 'ingest' && run.status !== 'live') return;
  const dur = Math.max(1, (run.duration_ns || (Date.now() * 1e6 - run.started_ns)) / 1e9);
  const step = Math.max(1, Math.ceil(dur / 240));
  let data;
  try {
    data = await api.timeline(id, { metric: metric(), step });
  } catch (e) {
    box.hidden = true;
    return;
  }
  if (!data.values || !data.values.length) { box.hidden = true; return; }
  box.hidden = false;
  const range = view.from && view.until ? { from: +view.from, until: +view.until } : null;
  const plot = $('#tl-plot');
  const lab = $('#tl-range');
  const span = { from: run.started_ns, until: run.ended_ns > run.started_ns ? run.ended_ns : Date.now() * 1e6 };
  if (!timelineResolves(data, span)) {  // say so rather than draw one bar over half the axis
    plot.replaceChildren();
    lab.textContent = `No timeline: the run lasted ${fmtDuration(span.until - span.from)}, under two of the timeline's ${fmtDuration(data.step_ns)} steps`;
    $('#tl-clear').hidden = !range;
    return;
  }
  const tl = drawTimeline(plot, data, {
    range, span, metric: metric(), units: unitsOf(metric()),
    onSelect: (from, until) => setView({ from: String(from), until: String(until) }),
  });
  lab.textContent = range ? `Showing ${tl.label(range)}` : 'Whole run · drag to select a time range';
  $('#tl-clear').hidden = !range;
}

// ---- breadcrumb ----------------------------------------------------------

function crumbs() {
  const box = $('#crumbs');
  const parts = [el('a', { href: viewURL({ ...view, focus: [] }), dataset: { depth: 0 } }, 'all')];
  view.focus.forEach((name, i) => {
    parts.push(el('span.sep', '›'));
    const last = i === view.focus.length - 1;
    parts.push(last ? el('span.cur', { title: name }, name)
      : el('a', { href: viewURL({ ...view, focus: view.focus.slice(0, i + 1) }), title: name, dataset: { depth: i + 1 } }, name));
  });
  if (!view.focus.length) parts[0] = el('span.cur', 'all');
  parts.push(el('span.hint', view.focus.length ? 'Esc resets zoom · Back returns' : 'Click a frame to zoom into it'));
  box.replaceChildren(...parts);
  for (const a of box.querySelectorAll('a')) {
    a.addEventListener('click', (e) => { e.preventDefault(); setView({ focus: view.focus.slice(0, +a.dataset.depth) }); });
  }
}

// ---- graph and table -----------------------------------------------------

// The metric goes in only when the view names one: the server picks the same
// default, and the graph can be fetched before the run's details arrive.
function graphParams(width) {
  return {
    metric: view.metric, focus: view.focus.join(';'), from: view.from, until: view.until,
    width, inverted: view.inverted, minwidth: MIN_WIDTH, profiler: view.profiler,
  };
}

/** Full path from the run's root to a clicked frame. The server draws a
 *  focused graph with the focus's ancestors, so the chain the graph shows is
 *  already the whole path; only the "all" root is dropped. */
function fullPath(chain) {
  return chain.length && chain[0] === 'all' ? chain.slice(1) : chain.slice();
}

// Tooltip line: the title's value (the server formats units), and shares.
function describe(info, share) {
  const parts = [];
  if (info.value) parts.push(info.value);
  parts.push(`${fmtPct(isFinite(info.pct) ? info.pct : share)} of ${view.focus.length ? 'run' : 'total'}`);
  if (view.focus.length) parts.push(`${fmtPct(share)} of view`);
  if (info.extra) parts.push(info.extra);
  return parts.join(' · ');
}

async function drawGraph() {
  const host = $('#flame');
  const width = Math.max(300, Math.round(host.clientWidth));
  const key = JSON.stringify(graphParams(width));
  if (key === loadedKey) { doSearch(); return; }
  const busy = el('div.busy', el('span', el('span.spinner'), 'Rendering…'));
  $('#graph-panel').append(busy);
  const t0 = performance.now();
  try {
    const r = await graph.load(api.framesURL(id, graphParams(width)), { inverted: view.inverted });
    loadedKey = key;
    lastWidth = width;
    $('#graph-error').replaceChildren();
    perf.loads.push({ ...r, totalMs: performance.now() - t0, focus: view.focus.length });
    host.dataset.frames = String(r.frames);
    host.dataset.state = r.frames ? 'ready' : 'empty';
    if (!r.frames) {
      const narrowed = view.focus.length || view.from;
      host.replaceChildren(el('div.empty', el('h2', 'Nothing to draw here'),
        el('p', narrowed
          ? 'No data under the zoomed frame or in the selected time range for this metric.'
          : 'This run holds no data for this metric yet.'),
        narrowed ? el('button', { type: 'button', onclick: () => setView({ focus: [], from: '', until: '' }) }, 'Show the whole run') : null));
    }
    doSearch();
  } catch (e) {
    if (e.name === 'AbortError') return;
    host.replaceChildren();
    host.dataset.state = 'error';
    const hint = view.focus.length ? 'The zoomed frame may not exist for this metric or time range: press Esc to reset the zoom.' : null;
    $('#graph-error').replaceChildren(errorBox('Could not render the flame graph', e, hint));
  } finally {
    busy.remove();
  }
}

async function loadFunctions() {
  const m = metric();
  const key = JSON.stringify([m, view.from, view.until, view.focus, view.profiler]);
  if (key === fnKey) return;
  fnKey = key;
  try {
    // The table follows the zoom: functions of the focused subtree only.
    const data = await api.functions(id, { metric: m, from: view.from, until: view.until, focus: view.focus.join(';'), profiler: view.profiler, limit: 5000 });
    table.setData(data, m, unitsOf(m), view.focus.length ? view.focus[view.focus.length - 1] : '');
  } catch (e) {
    $('#side').replaceChildren(errorBox('Could not load functions', e));
  }
}

// ---- exact search share ----------------------------------------------------
// The graph leaves out frames too narrow to draw, so its matched width is a
// lower bound. For runs of up to EXACT_STACKS stacks a worker loads the
// view's folded stacks and gives the exact share.
const EXACT_STACKS = 60000;
let matcher = null;   // {worker, key, next id, pending callbacks}

function exactShare(query) {
  if (!run || !query || !(run.stacks > 0 && run.stacks <= EXACT_STACKS) || !window.Worker) return null;
  const key = JSON.stringify([metric(), view.from, view.until, view.focus, view.profiler]);
  if (!matcher || matcher.key !== key) {
    if (matcher) matcher.worker.terminate();
    const worker = new Worker('/static/js/match-worker.js');
    matcher = { worker, key, id: 0, wait: new Map() };
    const m = matcher;
    worker.onmessage = (e) => { const cb = m.wait.get(e.data.id); m.wait.delete(e.data.id); if (cb) cb(e.data); };
    worker.postMessage({ id: ++m.id, url: api.foldedURL(id, { metric: metric(), from: view.from, until: view.until, focus: view.focus.join(';'), profiler: view.profiler }) });
  }
  const m = matcher;
  return new Promise((resolve) => { const k = ++m.id; m.wait.set(k, resolve); m.worker.postMessage({ id: k, query }); });
}

function showMatched(r, exact) {
  const out = $('#matched');
  if (!r) { out.textContent = ''; out.title = ''; return; }
  const frames = `${r.count.toLocaleString('en')} frame${r.count === 1 ? '' : 's'}`;
  if (exact !== undefined) {
    out.textContent = exact > 0 ? `Matched ${fmtPct(exact)} (${frames})` : 'no match';
    out.title = 'Share of the view\'s total in stacks with a matching frame (exact)';
  } else if (!r.count) {
    out.textContent = 'no match';
  } else {
    out.textContent = `Matched ≥ ${fmtPct(r.pct)} (${frames})`;
    out.title = 'Share of the drawn graph; frames too narrow to draw are not counted';
  }
}

function doSearch() {
  const out = $('#matched');
  if (!out) return null;  // the toolbar comes with the run's details
  const t0 = performance.now();
  const r = graph.search(view.q);
  const q = view.q;
  const exact = r ? exactShare(q) : null;
  showMatched(r, undefined);
  delete out.dataset.exact;
  if (exact) {
    out.dataset.exact = 'pending';
    exact.then((x) => {
      if (view.q !== q) return;
      if (x.error) { delete out.dataset.exact; return; }
      showMatched(r, x.pct);
      out.dataset.exact = '1';
    });
  } else if (r && r.count) {
    out.dataset.exact = '0';
  }
  perf.lastSearchMs = performance.now() - t0;
  const m = /^\^(.*)\$$/.exec(view.q || '');
  table.setActive(m ? m[1].replace(/\\(.)/g, '$1') : null);
  return r;
}

function resetZoom() {
  if (view.focus.length) setView({ focus: [] });
}

function switchView(v) {
  if (v === view.view) return;
  if (v === 'source' && !view.file) {
    const s = frameSource(view.fn || picked);
    if (s) { setView({ view: v, fn: view.fn || picked, file: s.file, line: s.line }); return; }
  }
  setView({ view: v, fn: view.fn || (v ? picked : view.fn) });
}

/** The time once the next frame is painted (a task after the next animation frame). */
const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0)));

/** Shows the chosen view's panel and draws it. */
async function drawView() {
  const v = view.view;
  for (const b of document.querySelectorAll('#views button')) b.setAttribute('aria-selected', String(b.dataset.view === v));
  // Parked, not display:none: hiding the 4,673-frame SVG of a 200,000-stack run tore its
  // layout tree down (178 ms task on pressing 2, 60 ms of it a forced layout) and showing
  // it again built it anew; content-visibility: hidden keeps it and skips its rendering.
  const park = $('#graph-panel');
  park.classList.toggle('parked', v !== '');
  park.setAttribute('aria-hidden', String(v !== ''));
  $('#crumbs').hidden = v !== '';
  $('#sandwich').hidden = v !== 'sandwich';
  $('#source').hidden = v !== 'source';
  const w = { metric: metric(), from: view.from, until: view.until, profiler: view.profiler };
  if (v === 'sandwich') {
    const width = Math.max(300, Math.round($('#workspace').clientWidth - ($('#workspace').classList.contains('no-side') ? 0 : $('#side').offsetWidth + 16) - 24));
    const r = await sandwich.show(id, view.fn, w, width, unitsOf(metric()));
    if (r) perf.sandwiches.push({ ...r, doneAt: performance.now(), paintedAt: await painted() });
  } else if (v === 'source') {
    const r = await source.show(id, view.file, view.line, w, (run && run.metrics) || {});
    if (r) perf.sources.push({ ...r, doneAt: performance.now(), paintedAt: await painted() });
  }
}

async function render() {
  await drawView();
  for (const b of document.querySelectorAll('#metrics button')) b.setAttribute('aria-pressed', String(b.dataset.metric === metric()));
  $('#inverted').setAttribute('aria-pressed', String(view.inverted));
  if ($('#profiler')) $('#profiler').setAttribute('aria-pressed', String(view.profiler));
  $('#reset-zoom').disabled = !view.focus.length;
  crumbs();
  // The graph first: on a big run every request makes the server merge the
  // stacks, and the graph is what people wait for. In the other views the
  // graph is drawn when it is shown.
  if (!view.view) await drawGraph();
  await Promise.all([loadFunctions(), timeline()]);
  app.dataset.loaded = '1';
  warmSandwich();
}

// Loads the view's stacks for sandwiches on the server in idle time, so the
// first sandwich of this view is quick (one request per view, answered from then on).
let warmKey = '';
function warmSandwich() {
  const key = JSON.stringify([metric(), view.from, view.until, view.profiler]);
  if (key === warmKey || (run && run.status === 'live')) return;
  warmKey = key;
  api.sandwich(id, { metric: view.metric, from: view.from, until: view.until, profiler: view.profiler }).catch(() => { warmKey = ''; });
}

// ---- live runs -----------------------------------------------------------

async function pollLive() {
  try {
    run = await api.run(id, {});
  } catch (_) { /* keep the last view */ }
  $('#run-head').replaceWith(header());
  loadedKey = '';  // a live run changes: fetch again
  fnKey = '';
  await render();
  if (run.status === 'live') setTimeout(pollLive, LIVE_MS);
  else { loadedKey = ''; fnKey = ''; render(); }
}

// ---- page ----------------------------------------------------------------

function keys(e) {
  const inField = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
  const plain = !inField && !e.ctrlKey && !e.metaKey && !e.altKey;
  if ((e.key === '/' && !inField) || ((e.ctrlKey || e.metaKey) && e.key === 'f')) {
    e.preventDefault();
    $('#search').focus();
    $('#search').select();
  } else if (e.key === 'Escape') {
    if (inField) document.activeElement.blur();
    else if (view.view) setView({ view: '' });
    else resetZoom();
  } else if (plain && ['1', '2', '3'].includes(e.key)) {
    switchView(['', 'sandwich', 'source'][+e.key - 1]);
  } else if (plain && e.key === 's' && picked) {
    openSandwich(picked);
  } else if (plain && e.key === 'o' && picked) {
    openSource(picked);
  } else if (plain && view.view === 'source' && (e.key === 'n' || e.key === 'N')) {
    source.jump(e.key === 'n' ? 1 : -1);
  }
}

/** The details line under the graph: the hovered frame and what can be done with it. */
function showPicked(info, detail) {
  if (info) picked = info.name;
  const box = $('#details');
  if (!info) return;  // keep the last frame, so its buttons can be reached
  const sw = el('button.mini#pick-sandwich', { type: 'button', title: 'Sandwich of this function (s)', onclick: () => openSandwich(info.name) }, 'Sandwich');
  const src = el('button.mini#pick-source', { type: 'button', title: 'Source with line heat (o)', onclick: () => openSource(info.name), disabled: !frameSource(info.name) }, 'Source');
  box.replaceChildren(el('span.d-text', `${info.name} · ${detail}`), sw, src);
}

function skeleton() {
  return [
    el('div#run-head', el('div.run-head', el('h1', `Run #${id}`))),
    el('div.panel.toolbar#toolbar', el('span.loading', el('span.spinner'), 'Loading run…')),
    el('div.panel.timeline#timeline', { hidden: true },
      el('div.tl-head', el('span.range#tl-range'), el('button.ghost#tl-clear', { type: 'button', hidden: true, onclick: () => setView({ from: '', until: '' }) }, '✕ whole run')),
      el('div#tl-plot')),
    el('nav.crumbs#crumbs', { 'aria-label': 'Zoom path' }),
    el('div#graph-error'),
    el('div.workspace#workspace',
      el('div.panel.graph-panel#graph-panel', el('div.flame#flame'), el('div.details#details', el('span.d-text', 'Hover a frame: click zooms, s opens its sandwich, o its source'))),
      el('div.panel.sandwich#sandwich', { hidden: true }),
      el('div.panel.source#source', { hidden: true }),
      el('aside.panel.side#side')),
  ];
}

async function main() {
  initHeader('runs');
  if (!id) { app.replaceChildren(errorBox('No run id in this address', 'Expected /runs/ID')); return; }
  app.replaceChildren(...skeleton());
  graph = new FlameGraph($('#flame'), {
    onZoom: (chain) => {
      const path = fullPath(chain);
      if (path.join(';') !== view.focus.join(';')) setView({ focus: path });
    },
    onHover: showPicked,
    describe,
    hint: 'click: zoom · s: sandwich · o: source',
    // A big graph goes on a canvas: as SVG the 4,673 frames of a 200,000-stack run cost
    // 50-100 ms tasks of style, paint and hit testing whenever the page changed.
    canvas: CANVAS_FRAMES,
  });
  sandwich = new SandwichView($('#sandwich'), {
    onPick: (name) => openSandwich(name),
    onSource: (name) => openSource(name),
    describe: (info, share) => [info.value, `${fmtPct(share)} of the function`, info.extra].filter(Boolean).join(' · '),
  });
  window.__lfSandwich = sandwich;  // for the browser tests
  source = new SourceView($('#source'), { onFile: (file) => setView({ file, line: 0 }) });
  window.__lfGraph = graph;  // for the browser tests and the curious
  table = new FuncTable($('#side'), {
    onPick: (name) => {
      if (view.view === 'sandwich') { openSandwich(name); return; }
      if (view.view === 'source') { openSource(name); return; }
      const q = exactRegexSource(name);
      setView({ q: view.q === q ? '' : q }, false);
    },
    onFocus: (name) => { picked = name; },
    onSandwich: openSandwich,
    onSource: openSource,
  });
  crumbs();
  // The run's details and the graph load side by side.
  const early = view.view ? Promise.resolve() : drawGraph();
  try {
    run = await api.run(id, {});
  } catch (e) {
    if (graph.abort) graph.abort.abort();
    app.replaceChildren(errorBox(e.status === 404 ? `Run #${id} does not exist` : 'Could not load the run', e,
      e.status === 404 ? 'It may have been deleted or expired. See all runs on the Runs page.' : null));
    return;
  }
  document.title = `${run.name || 'run'} #${run.id} · luaflame`;
  if (view.metric && !(run.metrics || {})[view.metric]) view.metric = '';
  $('#run-head').replaceWith(header());
  $('#toolbar').replaceWith(toolbar());
  document.addEventListener('keydown', keys);
  window.addEventListener('popstate', () => { view = readView(); showQuery(); render(); });
  new ResizeObserver(debounce(() => {
    const w = Math.round($('#flame').clientWidth);
    if (lastWidth && Math.abs(w - lastWidth) > 24) render();
  }, 250)).observe($('#graph-panel'));
  await early;
  await render();
  if (run.status === 'live') setTimeout(pollLive, LIVE_MS);
}

main().catch((e) => { app.append(errorBox('Something went wrong on this page', e)); console.error(e); });
