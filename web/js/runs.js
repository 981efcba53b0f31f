// The runs list: newest first, filter by name and tag, paged, live runs
// marked and refreshed. State lives in the URL (?name=&tag=&page=).
import { api, parseTags, splitTags } from './api.js';
import { el, $, initHeader, gettingStarted, errorBox, debounce, tagChip, toast } from './ui.js';
import { fmtDate, fmtAgo, fmtDuration, fmtValue, metricLabel } from './format.js';

const PAGE = 50;
const REFRESH_MS = 4000;
const app = $('#app');
const state = readURL();
const picked = new Set();  // run ids ticked for comparison
let refreshTimer = 0;
let seq = 0;               // drops answers of superseded requests

function readURL() {
  const q = new URLSearchParams(location.search);
  return { name: q.get('name') || '', tag: q.getAll('tag').join(' '), page: Math.max(1, +q.get('page') || 1) };
}

function writeURL(replace) {
  const q = new URLSearchParams();
  if (state.name) q.set('name', state.name);
  for (const t of splitTags(state.tag)) q.append('tag', t);
  if (state.page > 1) q.set('page', state.page);
  const u = `${location.pathname}${q.toString() ? '?' + q : ''}`;
  if (u !== location.pathname + location.search) history[replace ? 'replaceState' : 'pushState'](null, '', u);
}

function filterBar() {
  const name = el('input#f-name', { type: 'search', placeholder: 'e.g. myapp', value: state.name, 'aria-label': 'Filter by name' });
  const tag = el('input#f-tag', { type: 'search', placeholder: 'e.g. branch=main', value: state.tag, 'aria-label': 'Filter by tag' });
  const apply = debounce(() => {
    state.name = name.value.trim();
    state.tag = tag.value.trim();
    state.page = 1;
    writeURL(true);
    load();
  }, 250);
  name.addEventListener('input', apply);
  tag.addEventListener('input', apply);
  const cmp = el('a.btn#compare-picked', { href: '/compare', hidden: true }, 'Compare selected');
  return el('div.filters',
    el('label.field', 'Name', name),
    el('label.field', 'Tags (key=value …)', tag),
    el('span.spacer'),
    cmp,
    el('a.btn.primary', { href: '/upload' }, 'Upload profile'));
}

function updateComparePick() {
  const a = $('#compare-picked');
  if (!a) return;
  const ids = [...picked];
  a.hidden = ids.length !== 2;
  if (ids.length === 2) {
    const [x, y] = ids.sort((p, q) => p - q);  // older run is the base
    a.href = `/compare?base=${x}&head=${y}`;
  }
}

function metricsCell(run) {
  const out = [];
  for (const [m, info] of Object.entries(run.metrics || {})) {
    out.push(el('span.metric-chip', { title: metricLabel(m) }, `${m} ${fmtValue(info.total, m, info.units)}`));
  }
  return out;
}

function primaryTotal(run) {
  const ms = run.metrics || {};
  const m = ['samples', 'time', 'calls', 'alloc_bytes'].find((k) => ms[k]) || Object.keys(ms)[0];
  if (!m) return '–';
  return fmtValue(ms[m].total, m, ms[m].units, true);
}

function row(run) {
  const box = el('input', { type: 'checkbox', 'aria-label': `Select run ${run.id} for comparison`, checked: picked.has(run.id) });
  box.addEventListener('change', () => {
    if (box.checked) picked.add(run.id); else picked.delete(run.id);
    while (picked.size > 2) picked.delete(picked.values().next().value);
    updateComparePick();
    for (const b of app.querySelectorAll('tbody input[type=checkbox]')) b.checked = picked.has(+b.closest('tr').dataset.id);
  });
  const tags = Object.entries(run.tags || {}).map(([k, v]) => tagChip(k, v));
  return el('tr', { dataset: { id: run.id } },
    el('td', box),
    el('td.name', el('a', { href: `/runs/${run.id}` }, run.name || '(unnamed)'), el('span.id', `#${run.id}`),
      run.status === 'live' ? el('span.badge.live', { style: 'margin-left:8px' }, 'live') : null),
    el('td', tags.length ? tags : el('span', { style: 'color:var(--muted)' }, '–')),
    el('td.when', { title: fmtDate(run.started_ns) }, fmtDate(run.started_ns), el('small', fmtAgo(run.started_ns))),
    el('td.num', run.status === 'live' ? 'running' : fmtDuration(run.duration_ns)),
    el('td.num', primaryTotal(run)),
    el('td', metricsCell(run)));
}

// total is exact unless exact === false (the server stops counting a filter's matches at
// 10,000): then it is a lower bound, and "Older" stays enabled.
function pager(total, exact) {
  const pages = Math.max(1, Math.ceil(total / PAGE));
  const more = state.page < pages || exact === false;
  const first = total ? (state.page - 1) * PAGE + 1 : 0;
  const last = Math.min(total, state.page * PAGE);
  const go = (p) => () => { state.page = p; writeURL(false); load(); window.scrollTo(0, 0); };
  return el('div.pager',
    el('span.info', `${first.toLocaleString('en')}–${last.toLocaleString('en')} of ${total.toLocaleString('en')}${exact === false ? '+' : ''} runs`),
    el('button#page-first', { disabled: state.page <= 1, onclick: go(1) }, '« First'),
    el('button#page-prev', { disabled: state.page <= 1, onclick: go(state.page - 1) }, '‹ Newer'),
    el('span', `page ${state.page} of ${pages}`),
    el('button#page-next', { disabled: !more, onclick: go(state.page + 1) }, 'Older ›'),
    el('button#page-last', { disabled: state.page >= pages, onclick: go(pages) }, 'Last »'));
}

function table(data) {
  return el('div.panel',
    el('table.grid.runs#runs',
      el('thead', el('tr', el('th', { style: 'width:32px' }), el('th', 'Name'), el('th', 'Tags'), el('th', 'Started'),
        el('th.num', 'Duration'), el('th.num', 'Total'), el('th', 'Metrics'))),
      el('tbody', data.runs.map(row))),
    pager(data.total, data.total_exact));
}

async function load() {
  const my = ++seq;
  clearTimeout(refreshTimer);
  const body = $('#runs-body');
  let data;
  try {
    data = await api.runs({ name: state.name, tag: parseTags(state.tag), limit: PAGE, offset: (state.page - 1) * PAGE });
  } catch (e) {
    if (my !== seq) return;
    body.replaceChildren(errorBox('Could not load runs', e, e.status === 0 ? 'Start it with: luaflame-server --listen 127.0.0.1:8080' : null));
    return;
  }
  if (my !== seq) return;
  const filtered = state.name || state.tag;
  if (!data.total && !filtered) {
    body.replaceChildren(gettingStarted());
  } else if (!data.runs.length) {
    body.replaceChildren(el('div.panel.empty',
      el('h2', 'No runs match'),
      el('p', 'Nothing has this name and these tags. Names match exactly; tags are key=value.'),
      el('button', { onclick: () => { state.name = ''; state.tag = ''; state.page = 1; $('#f-name').value = ''; $('#f-tag').value = ''; writeURL(false); load(); } }, 'Clear filters')));
  } else {
    body.replaceChildren(table(data));
  }
  $('#runs-count').textContent = data.total ? `${data.total.toLocaleString('en')} run${data.total === 1 ? '' : 's'}` : '';
  app.dataset.loaded = '1';
  if (data.runs.some((r) => r.status === 'live')) refreshTimer = setTimeout(load, REFRESH_MS);
}

function main() {
  initHeader('runs');
  app.replaceChildren(
    el('div.page-head', el('h1', 'Runs'), el('span.sub#runs-count')),
    filterBar(),
    el('div#runs-body', el('div.loading', el('span.spinner'), 'Loading runs…')));
  window.addEventListener('popstate', () => {
    Object.assign(state, readURL());
    $('#f-name').value = state.name;
    $('#f-tag').value = state.tag;
    load();
  });
  document.addEventListener('keydown', (e) => {
    if ((e.key === '/' && !/INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName)) || ((e.ctrlKey || e.metaKey) && e.key === 'f')) {
      e.preventDefault();
      $('#f-name').focus();
    }
  });
  load().catch((e) => toast(e.message, 'bad'));
}

main();
