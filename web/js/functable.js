// The function table beside the graph: self and total per function, sortable
// and filterable; clicking a row asks the graph to highlight that function.
// Only the first ROWS rows after sorting and filtering are in the DOM.
import { el } from './ui.js';
import { fmtValue } from './format.js';

const ROWS = 250;

export class FuncTable {
  constructor(host, { onPick, onFocus, onSandwich, onSource }) {
    this.host = host;
    this.onPick = onPick;
    this.onFocus = onFocus || (() => {});
    this.onSandwich = onSandwich;
    this.onSource = onSource;
    this.data = { functions: [], total: 0 };
    this.sortKey = 'self';
    this.desc = true;
    this.filter = '';
    this.active = null;
    this.filterInput = el('input#fn-filter', { type: 'search', placeholder: 'Filter functions', 'aria-label': 'Filter functions' });
    this.filterInput.addEventListener('input', () => { this.filter = this.filterInput.value.trim().toLowerCase(); this.render(); });
    this.head = {};
    const th = (key, label, cls) => {
      const h = el(`th.sortable${cls ? '.' + cls : ''}`, { dataset: { key } }, label);
      h.addEventListener('click', () => {
        if (this.sortKey === key) this.desc = !this.desc;
        else { this.sortKey = key; this.desc = key !== 'name'; }
        this.render();
      });
      this.head[key] = h;
      return h;
    };
    this.tbody = el('tbody');
    this.foot = el('div.foot');
    this.tbody.addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      if (tr && tr._name !== undefined) this.onPick(tr._name);
    });
    // Keyboard: rows are tab stops; arrows move, Enter picks, s sandwich, o source.
    this.tbody.addEventListener('focusin', (e) => {
      const tr = e.target.closest('tr');
      if (tr && tr._name !== undefined) this.onFocus(tr._name);
    });
    this.tbody.addEventListener('keydown', (e) => {
      const tr = e.target.closest('tr');
      if (!tr || tr._name === undefined || e.ctrlKey || e.metaKey || e.altKey) return;
      let handled = true;
      if (e.key === 'ArrowDown' && tr.nextElementSibling) tr.nextElementSibling.focus();
      else if (e.key === 'ArrowUp' && tr.previousElementSibling) tr.previousElementSibling.focus();
      else if (e.key === 'Enter') this.onPick(tr._name);
      else if (e.key === 's' && this.onSandwich) this.onSandwich(tr._name);
      else if (e.key === 'o' && this.onSource) this.onSource(tr._name);
      else handled = false;
      if (handled) { e.preventDefault(); e.stopPropagation(); }
    });
    host.replaceChildren(
      el('div.side-head', this.filterInput),
      el('div.scroll', el('table.grid#functions',
        el('thead', el('tr', th('name', 'Function'), th('self', 'Self', 'num'), th('total', 'Total', 'num'))),
        this.tbody)),
      this.foot);
  }

  setData(data, metric, units, scope = '') {
    this.scope = scope;
    this.data = data;
    this.metric = metric;
    this.units = units;
    this.render();
  }

  /** The first function (in the table's order) whose name matches `query` (regex, else text). */
  firstMatch(query) {
    if (!query) return null;
    let re;
    try { re = new RegExp(query, 'i'); } catch (_) { re = new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i'); }
    const f = (this.data.functions || []).find((x) => re.test(x.name));
    return f ? f.name : null;
  }

  setActive(name) {
    this.active = name;
    for (const tr of this.tbody.children) tr.classList.toggle('active', tr._name === name);
  }

  render() {
    const total = this.data.total || 0;
    let list = this.data.functions || [];
    if (this.filter) list = list.filter((f) => f.name.toLowerCase().includes(this.filter));
    const k = this.sortKey;
    const dir = this.desc ? -1 : 1;
    // Names compare by code unit (localeCompare is ICU: ~100 ms for 5,000 functions with many ties).
    const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    list = list.slice().sort((a, b) => (k === 'name' ? byName(a, b) : a[k] - b[k]) * dir || byName(a, b));
    for (const [key, h] of Object.entries(this.head)) {
      if (key === k) h.setAttribute('aria-sort', this.desc ? 'descending' : 'ascending');
      else h.removeAttribute('aria-sort');
    }
    const pct = (v) => (total ? (100 * v) / total : 0);
    const val = (v) => (v ? fmtValue(v, this.metric, this.units) : '–');
    const rows = list.slice(0, ROWS).map((f) => {
      const tr = el('tr', { class: f.name === this.active ? 'active' : null },
        el('td.fn', { title: f.name }, f.name),
        el('td.num.bar', { style: `--w:${pct(f.self).toFixed(1)}%`, title: `${pct(f.self).toFixed(2)}% self` }, val(f.self)),
        el('td.num.bar', { style: `--w:${pct(f.total).toFixed(1)}%`, title: `${pct(f.total).toFixed(2)}% total` }, val(f.total)));
      tr._name = f.name;
      tr.tabIndex = 0;
      return tr;
    });
    this.tbody.replaceChildren(...rows);
    const all = (this.data.functions || []).length;
    this.foot.textContent = list.length > ROWS
      ? `Showing ${ROWS} of ${list.length.toLocaleString('en')} functions; filter to narrow down.`
      : `${list.length.toLocaleString('en')} of ${all.toLocaleString('en')} functions${this.scope ? ' under ' + this.scope : ''} · click one to highlight it`;
  }
}
