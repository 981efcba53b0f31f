// Compare two runs: a differential flame graph (red grew, blue shrank) and
// the functions whose share of the total changed most. The base is a run id
// or "the latest run of NAME with TAGS" (docs/api.md, /api/diff).
import { api, parseTags, splitTags, url } from './api.js';
import { el, $, initHeader, errorBox, toast, copyText, gettingStarted, debounce } from './ui.js';
import { fmtDate, fmtPct, metricLabel } from './format.js';
import { FlameGraph, exactRegexSource, CANVAS_FRAMES } from './flame.js';

const app = $('#app');
const LIST = 200;
const ALL_METRICS = ['samples', 'time', 'calls', 'alloc_bytes', 'alloc_count', 'live_bytes', 'live_count'];
let graph = null;
let runs = [];
let state = null;      // the compare's state, as in the URL
let diffKey = '';      // what the tables show now
let graphKey = '';     // what the graph shows now
const perf = (window.__lfPerf = { loads: [] });

function readState() {
  const q = new URLSearchParams(location.search);
  return {
    base: q.get('base') || '', head: q.get('head') || '',
    base_name: q.get('base_name') || '', base_tag: q.getAll('base_tag').join(' '),
    metric: q.get('metric') || '', normalize: q.get('normalize') !== '0',
    focus: q.get('focus') ? q.get('focus').split(';') : [], q: q.get('q') || '', invert: q.get('invert') === '1',
  };
}

function stateURL(st) {
  return url('/compare', { ...params(st), normalize: st.normalize ? '' : '0', focus: st.focus.join(';'), q: st.q, invert: st.invert });
}

/** Changes the graph's state (zoom, search, invert); `push` adds a history entry. */
function setState(changes, push = true) {
  state = { ...state, ...changes };
  const u = stateURL(state);
  if (u !== location.pathname + location.search) history[push ? 'pushState' : 'replaceState'](null, '', u);
  show(state);
}

function runLabel(r) {
  const tags = Object.entries(r.tags || {}).map(([k, v]) => `${k}=${v}`).join(' ');
  return `#${r.id} ${r.name}${tags ? ' · ' + tags : ''} · ${fmtDate(r.started_ns)}`;
}

function runSelect(idAttr, value) {
  const s = el(`select#${idAttr}`, { 'aria-label': idAttr });
  s.append(el('option', { value: '' }, '— pick a run —'));
  for (const r of runs) s.append(el('option', { value: r.id }, runLabel(r)));
  if (value && !runs.some((r) => String(r.id) === value)) s.append(el('option', { value }, `#${value}`));
  s.value = value;
  return s;
}

function form(st) {
  const byName = !!st.base_name;
  const modeRun = el('input', { type: 'radio', name: 'bmode', value: 'run', checked: !byName, id: 'bmode-run' });
  const modeName = el('input', { type: 'radio', name: 'bmode', value: 'name', checked: byName, id: 'bmode-name' });
  const baseSel = runSelect('base', st.base);
  const bname = el('input#base-name', { type: 'text', placeholder: 'name, e.g. myapp', value: st.base_name });
  const btag = el('input#base-tag', { type: 'text', placeholder: 'tags, e.g. branch=main', value: st.base_tag });
  const headSel = runSelect('head', st.head);
  // Offer the metrics the head run has (all of them when it is not in the list).
  const msel = el('select#metric');
  const fillMetrics = () => {
    const head = runs.find((r) => String(r.id) === headSel.value);
    const have = head ? Object.keys(head.metrics || {}) : [];
    const list = ALL_METRICS.filter((m) => !have.length || have.includes(m));
    const keep = msel.value || st.metric;
    msel.replaceChildren(...list.map((m) => el('option', { value: m }, metricLabel(m))));
    msel.value = list.includes(keep) ? keep : list[0];
  };
  fillMetrics();
  headSel.addEventListener('change', fillMetrics);
  const norm = el('input#normalize', { type: 'checkbox', checked: st.normalize });
  const sync = () => { baseSel.disabled = modeName.checked; bname.disabled = btag.disabled = !modeName.checked; };
  modeRun.addEventListener('change', sync);
  modeName.addEventListener('change', sync);
  sync();
  const go = el('button.primary#go', { type: 'submit' }, 'Compare');
  const f = el('form.panel.compare-form#compare-form',
    el('fieldset',
      el('legend', el('span.dot', { style: 'background:var(--blue)' }), 'Base (before)'),
      el('label.row', modeRun, 'A run'), baseSel,
      el('label.row', modeName, 'The latest run of a name with tags'),
      el('div.row', bname, btag)),
    el('fieldset',
      el('legend', el('span.dot', { style: 'background:var(--red)' }), 'Head (after)'),
      headSel,
      el('label.field', 'Metric', msel),
      el('label.row', norm, 'Normalise totals (compare shares, not absolute counts)')),
    el('div.actions', go, el('button#swap', { type: 'button', onclick: () => { const b = baseSel.value; baseSel.value = headSel.value; headSel.value = b; } }, '⇄ Swap')));
  f.addEventListener('submit', (e) => {
    e.preventDefault();
    const p = { head: headSel.value, metric: msel.value, normalize: norm.checked ? '' : '0' };
    if (modeName.checked) { p.base_name = bname.value.trim(); p.base_tag = splitTags(btag.value); }
    else p.base = baseSel.value;
    history.pushState(null, '', url('/compare', p));
    state = readState();
    show(state);
  });
  return f;
}

function params(st) {
  const p = { head: st.head, metric: st.metric, normalize: st.normalize ? '1' : '0' };
  if (st.base_name) { p.base_name = st.base_name; p.base_tag = parseTags(st.base_tag); }
  else p.base = st.base;
  return p;
}

function changeTable(title, cls, rows, hl) {
  const body = rows.filter((f) => Math.abs(f.delta_pct) >= 0.005).slice(0, 15).map((f) => {
    const tr = el('tr', { style: 'cursor:pointer', title: 'Highlight in the graph' },
      el('td.fn', f.name),
      el('td.num', fmtPct(f.base_pct)),
      el('td.num', fmtPct(f.head_pct)),
      el(`td.num.delta.${f.delta_pct >= 0 ? 'up' : 'down'}`, `${f.delta_pct >= 0 ? '+' : ''}${f.delta_pct.toFixed(2)} pts`));
    tr.addEventListener('click', () => hl(f.name));
    tr.tabIndex = 0;
    tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') hl(f.name); });
    return tr;
  });
  return el('div.panel',
    el(`h2.${cls}`, title),
    body.length
      ? el('table.grid', { id: cls === 'reg' ? 'regressions' : 'improvements' },
        el('thead', el('tr', el('th', 'Function'), el('th.num', 'Base'), el('th.num', 'Head'), el('th.num', 'Change'))),
        el('tbody', body))
      : el('p', { style: 'padding:0 12px 12px;color:var(--muted)' }, 'None.'));
}

async function show(st) {
  const out = $('#result');
  if (!st.head || (!st.base && !st.base_name)) {
    out.replaceChildren(el('p', { style: 'color:var(--muted)' }, 'Pick a base and a head run, then press Compare. Tip: tick two runs on the Runs page.'));
    diffKey = '';
    return;
  }
  const key = JSON.stringify(params(st));
  if (key !== diffKey) {
    diffKey = key;
    graphKey = '';
    if (!(await showTables(st))) { diffKey = ''; return; }
  }
  crumbs(st);
  $('#diff-invert').setAttribute('aria-pressed', String(st.invert));
  $('#diff-reset').disabled = !st.focus.length;
  if ($('#diff-search').value !== st.q) $('#diff-search').value = st.q;
  await drawDiffGraph(st);
  app.dataset.loaded = '1';
}

// The toolbar, verdict, graph panel and the tables of biggest changes.
async function showTables(st) {
  const out = $('#result');
  out.replaceChildren(el('div.loading', el('span.spinner'), 'Comparing…'));
  let diff;
  try {
    diff = await api.diff({ ...params(st), limit: 50 });
  } catch (e) {
    out.replaceChildren(errorBox('Could not compare these runs', e, st.base_name ? 'The base is the latest finished run of that name with those tags, other than the head.' : null));
    return false;
  }
  const host = el('div.flame.diff#flame');
  const matched = el('span.matched#matched', { 'aria-live': 'polite' });
  const hl = (name) => setState({ q: exactRegexSource(name) }, false);
  const md = el('button#copy-md', { type: 'button', title: 'Markdown summary, e.g. for a pull request comment' }, 'Copy Markdown');
  md.addEventListener('click', async () => toast((await copyText(diff.markdown || '')) ? 'Markdown copied' : 'Copy failed'));
  const baseId = typeof diff.base === 'object' && diff.base ? diff.base.id : diff.base;
  const headId = typeof diff.head === 'object' && diff.head ? diff.head.id : diff.head;
  const search = el('input#diff-search', { type: 'search', placeholder: 'Search frames (regex)', 'aria-label': 'Search frames', autocomplete: 'off', value: st.q });
  search.addEventListener('input', debounce(() => setState({ q: search.value }, false), 120));
  const inv = el('button.toggle#diff-invert', { type: 'button', 'aria-pressed': String(st.invert), title: 'Widths of the base: what shrank or vanished (got faster) is wide enough to see (i)' }, 'Invert');
  inv.addEventListener('click', () => setState({ invert: !state.invert }));
  const reset = el('button#diff-reset', { type: 'button', title: 'Reset zoom (Esc)', onclick: () => setState({ focus: [] }) }, 'Reset zoom');
  const link = el('button#diff-link', { type: 'button', title: 'Copy a link to this exact view' }, 'Copy link');
  link.addEventListener('click', async () => toast((await copyText(location.href)) ? 'Link to this view copied' : 'Copy failed'));
  out.replaceChildren(
    el('div.toolbar.panel',
      el('span', 'Base ', el('a', { href: `/runs/${baseId}` }, `#${baseId}`), ' → head ', el('a', { href: `/runs/${headId}` }, `#${headId}`), ` · ${metricLabel(diff.metric || st.metric)}`),
      el('span.legend-diff', el('span', el('i', { style: 'background:#e0533f' }), 'grew'), el('span', el('i', { style: 'background:#4f7fe8' }), 'shrank')),
      el('div.search', search), matched, el('span.spacer'), inv, reset,
      el('a.btn#diff-download', { href: api.diffSvgURL(params(st)), download: `diff-${baseId}-${headId}.svg` }, 'Download SVG'), md, link),
    diff.failed ? el('div.verdict.bad', `A function's share grew by more than ${diff.threshold} points.`) : '',
    el('nav.crumbs#crumbs', { 'aria-label': 'Zoom path' }),
    el('div.panel.graph-panel', host, el('div.details#details', ' ')),
    el('div.changes', changeTable('Biggest regressions', 'reg', diff.regressions || [], hl), changeTable('Biggest improvements', 'imp', diff.improvements || [], hl)));
  graph = new FlameGraph(host, {
    onHover: (info, d) => { if (info) $('#details').textContent = `${info.name} · ${d}`; },
    onZoom: (chain) => {
      const path = chain.length && chain[0] === 'all' ? chain.slice(1) : chain.slice();
      if (path.join(';') !== state.focus.join(';')) setState({ focus: path });
    },
    describe: (info) => [info.value, isFinite(info.pct) ? fmtPct(info.pct) : '', info.extra].filter(Boolean).join(' · '),
    // A big diff goes on a canvas like the run page's graph (13,909 frames for a
    // 200,000-stack head: 100-300 ms tasks as SVG).
    canvas: CANVAS_FRAMES,
  });
  window.__lfGraph = graph;
  return true;
}

function crumbs(st) {
  const box = $('#crumbs');
  const parts = [st.focus.length ? el('a', { href: stateURL({ ...st, focus: [] }), dataset: { depth: 0 } }, 'all') : el('span.cur', 'all')];
  st.focus.forEach((name, i) => {
    parts.push(el('span.sep', '›'));
    parts.push(i === st.focus.length - 1 ? el('span.cur', { title: name }, name)
      : el('a', { href: stateURL({ ...st, focus: st.focus.slice(0, i + 1) }), title: name, dataset: { depth: i + 1 } }, name));
  });
  parts.push(el('span.hint', st.focus.length ? 'Esc resets zoom · Back returns' : 'Click a frame to zoom into it · / searches · i inverts'));
  box.replaceChildren(...parts);
  for (const a of box.querySelectorAll('a')) {
    a.addEventListener('click', (e) => { e.preventDefault(); setState({ focus: state.focus.slice(0, +a.dataset.depth) }); });
  }
}

async function drawDiffGraph(st) {
  const host = $('#flame');
  const width = Math.max(300, Math.round(host.clientWidth || host.parentNode.clientWidth - 16));
  const p = { ...params(st), width, focus: st.focus.join(';'), invert: st.invert ? '1' : '' };
  const key = JSON.stringify(p);
  if (key !== graphKey) {
    try {
      const r = await graph.load(api.diffFramesURL(p));
      graphKey = key;
      perf.loads.push({ ...r, focus: st.focus.length, invert: st.invert });
      host.dataset.state = r.frames ? 'ready' : 'empty';
    } catch (e) {
      if (e.name === 'AbortError') return;
      host.dataset.state = 'error';
      host.replaceChildren(errorBox('Could not render the differential graph', e, st.focus.length ? 'The zoomed frame may not exist in these runs: press Esc.' : null));
      return;
    }
  }
  const r = graph.search(st.q);
  const m = $('#matched');
  m.textContent = !r ? '' : r.count ? `Matched ≥ ${fmtPct(r.pct)} of the graph (${r.count} frame${r.count === 1 ? '' : 's'})` : 'no match';
}

function keys(e) {
  const inField = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
  if (!$('#diff-search')) return;
  if ((e.key === '/' && !inField) || ((e.ctrlKey || e.metaKey) && e.key === 'f')) {
    e.preventDefault();
    $('#diff-search').focus();
    $('#diff-search').select();
  } else if (e.key === 'Escape') {
    if (inField) document.activeElement.blur();
    else if (state.focus.length) setState({ focus: [] });
  } else if (e.key === 'i' && !inField && !e.ctrlKey && !e.metaKey && !e.altKey) {
    setState({ invert: !state.invert });
  }
}

async function main() {
  initHeader('compare');
  try {
    runs = (await api.runs({ limit: LIST })).runs;
  } catch (e) {
    app.replaceChildren(errorBox('Could not load runs', e));
    return;
  }
  if (runs.length < 1) {
    app.replaceChildren(el('div.page-head', el('h1', 'Compare runs')), el('div.panel', gettingStarted()));
    return;
  }
  const st = readState();
  if (!st.head && !st.base && runs.length >= 2) { st.head = String(runs[0].id); st.base = String(runs[1].id); }
  state = st;
  app.replaceChildren(
    el('div.page-head', el('h1', 'Compare runs'), el('span.sub', 'What got slower, what got faster')),
    form(st),
    el('div#result'));
  window.addEventListener('popstate', () => { state = readState(); $('#compare-form').replaceWith(form(state)); show(state); });
  document.addEventListener('keydown', keys);
  await show(st);
  app.dataset.loaded = '1';
}

main();
