// A source file with line heat (pprof's `list`): every line of the file with
// the self value of the leaf frames at that line (`lines = true` runs record
// the current line of the leaf), as a bar for the chosen metric and a number
// for each metric. Lines seen in any metric are marked as executed; lines
// where a function of the profile is defined are marked too. One request:
// GET /api/runs/ID/source?file= (text, per-metric lines, functions).
import { api } from './api.js';
import { el, errorBox } from './ui.js';
import { fmtValue, metricLabel } from './format.js';

/** "NAME SOURCE:LINE" or "NAME (SOURCE:LINE)" -> {file, line}, or null ([C] and other frames). */
export function frameSource(name) {
  if (!name || /^\[/.test(name)) return null;
  const m = /\s\(?([^\s()]+):(\d+)\)?$/.exec(name);
  return m ? { file: m[1], line: +m[2] } : null;
}

export class SourceView {
  constructor(host, opts = {}) {
    this.host = host;
    this.opts = opts;
    this.key = '';
    this.hot = [];
  }

  /** Shows `file` for the view {metric, from, until}; `line` is scrolled to and marked. */
  async show(id, file, line, view, runMetrics) {
    const key = JSON.stringify([id, file, view.from, view.until, view.profiler]);
    if (key === this.key && this.data) { await this.draw(line, view.metric, runMetrics); return null; }
    this.key = key;
    const t0 = performance.now();
    this.host.dataset.state = 'loading';
    if (!file) {
      this.host.replaceChildren(el('p.hint', 'Pick a Lua frame (in the graph, the sandwich or the function table) and choose "Source", or press 3 on a table row.'));
      this.host.dataset.state = 'empty';
      return null;
    }
    try {
      const [data, list] = await Promise.all([
        api.source(id, { file, from: view.from, until: view.until, profiler: view.profiler }),
        api.sources(id).catch(() => ({ files: [] })),
      ]);
      if (this.key !== key) return null;
      this.data = data;
      this.files = list.files || [];
      const t1 = performance.now();
      await this.draw(line, view.metric, runMetrics);
      return { fetchMs: t1 - t0, drawMs: performance.now() - t1, ms: performance.now() - t0, lines: this.lineCount };
    } catch (e) {
      this.host.replaceChildren(errorBox('Could not load the source view', e));
      this.host.dataset.state = 'error';
      return null;
    }
  }

  draw(line, metric, runMetrics) {
    const d = this.data;
    const metrics = Object.keys(d.metrics || {});
    const m = d.metrics[metric] ? metric : metrics[0];
    const units = (runMetrics[m] || {}).units || (d.metrics[m] || {}).units;
    // line -> value, per metric
    const per = {};
    for (const k of metrics) per[k] = new Map(d.metrics[k].lines.map(([l, v]) => [l, v]));
    const cur = per[m] || new Map();
    let max = 0;
    let inFile = 0;
    for (const v of cur.values()) { max = Math.max(max, v); inFile += v; }
    const executed = new Set(d.executed || []);
    const defs = new Map();
    // A frame that calls something is at its function's line defined (leaves carry the current line).
    for (const f of d.functions || []) if (f.total > f.self && !defs.has(f.line)) defs.set(f.line, f.name);
    const text = d.text == null ? null : d.text.replace(/\r\n?/g, '\n').split('\n');
    if (text && text.length && text[text.length - 1] === '') text.pop();
    const fileSel = el('select#src-file', { 'aria-label': 'Source file' },
      (this.files.some((f) => f.path === d.file) ? [] : [el('option', { value: d.file }, d.file)]),
      this.files.map((f) => el('option', { value: f.path }, f.path)));
    fileSel.value = d.file;
    fileSel.addEventListener('change', () => this.opts.onFile && this.opts.onFile(fileSel.value));
    const total = (d.metrics[m] || {}).total || 0;
    const head = el('div.src-head',
      fileSel,
      el('span', `${metricLabel(m)} at lines of this file: `, el('b#src-in-file', fmtValue(inFile, m, units)),
        total ? ` (${(100 * inFile / total).toFixed(2)}% of the view)` : ''),
      el('span.hint', 'Bars: self value of the leaf at each line (runs with lines = true). ● executed (seen in a sample or trace) · ƒ function defined here · n / N: next / previous hot line'));
    // Lines to show: the whole text, or only the lines with values when the text was not shipped.
    const rows = [];
    const lineNos = text ? text.map((_, i) => i + 1)
      : [...new Set([...executed, ...defs.keys()])].sort((a, b) => a - b);
    const fmt = (k, v) => (v ? fmtValue(v, k, (runMetrics[k] || {}).units || d.metrics[k].units) : '');
    // Rows are divs (not a table: a 2,000-row auto table is laid out whole) with
    // content-visibility by blocks (below), so only the rows on screen are laid out and painted;
    // they are made as one HTML string (every text escaped), far quicker than
    // 14,000 createElement calls.
    const esc = (t) => String(t).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
    for (const n of lineNos) {
      const v = cur.get(n) || 0;
      const cls = `ln${executed.has(n) ? ' exec' : ''}${defs.has(n) ? ' def' : ''}`;
      let h = `<div class="src-row${n === line ? ' target' : ''}" id="L${n}"><span class="${cls}"${defs.has(n) ? ` title="${esc(defs.get(n))}"` : ''}>${n}</span>`;
      h += `<span class="heat"${v ? ` style="--w:${Math.max(1, (100 * v) / max).toFixed(1)}%"` : ''}></span>`;
      for (const k of metrics) h += `<span class="num${k === m ? ' cur' : ''}">${esc(fmt(k, per[k].get(n) || 0))}</span>`;
      h += `<span class="src-code">${esc(text ? text[n - 1] : (defs.get(n) || ''))}</span></div>`;
      rows.push(h);
    }
    this.hot = lineNos.filter((n) => cur.get(n));
    this.lineCount = lineNos.length;
    const table = el('div.srcv#src-lines',
      el('div.src-row.src-th', el('span.ln', 'Line'), el('span.heat', `Heat (${metricLabel(m)})`), metrics.map((k) => el(`span.num${k === m ? '.cur' : ''}`, metricLabel(k))), el('span.src-code', text ? 'Source' : 'Function defined here')));
    // Rows go into the detached table by chunks, each its own task, so no task is
    // long, and the table into the page once: inserted into the live page, every
    // chunk paid a style and layout pass of its own (285 ms for 2,000 rows on a
    // loaded machine, against ~80 ms this way).
    const note = text ? null : el('p.hint#src-missing', 'The source text of this file was not shipped with the run (collector option sources = true / --sources, or POST /api/runs/ID/sources). Lines with values are listed.');
    // Rows go in blocks of BLOCK, each with content-visibility: a block off screen
    // is skipped whole (style, layout, paint of its rows), so putting 2,000 rows in
    // costs about the 20 blocks and the rows on screen (per-row content-visibility
    // still styled and laid out every row: a 182 ms task on a loaded machine).
    const BLOCK = 100;
    const blocks = [];
    for (let i = 0; i < rows.length; i += BLOCK) {
      const part = rows.slice(i, i + BLOCK);
      blocks.push(`<div class="src-block" style="contain-intrinsic-size: auto ${18 * part.length}px">${part.join('')}</div>`);
    }
    const p = (this.pending = { rows: blocks, at: 0, table });
    return this.fill(p).then((done) => {
      if (!done) return;
      this.host.replaceChildren(...[head, note, el('div.src-scroll#src-scroll', table)].filter(Boolean));
      this.host.dataset.state = 'ready';
      this.host.dataset.file = d.file;
      this.host.dataset.rows = String(this.lineCount);
      if (line) this.scrollTo(this.host.querySelector(`#L${line}`));
    });
  }

  /** Inserts the rows into the detached table, CHUNK per task; false when a newer draw replaced it. */
  async fill(p) {
    const CHUNK = 3;  // blocks
    delete this.host.dataset.rows;
    while (p.at < p.rows.length) {
      if (p.at) await new Promise((r) => setTimeout(r, 0));
      if (p !== this.pending) return false;
      p.table.insertAdjacentHTML('beforeend', p.rows.slice(p.at, p.at + CHUNK).join(''));
      p.at += CHUNK;
    }
    this.pending = null;
    return true;
  }

  /** Centres `row` in the scroll box (not the page). */
  scrollTo(row) {
    const box = this.host.querySelector('#src-scroll');
    if (row && box) box.scrollTop = Math.max(0, row.offsetTop - box.clientHeight / 2);
  }

  /** Marks and scrolls to the next (dir 1) or previous (-1) line with a value. */
  jump(dir) {
    if (!this.hot.length) return;
    this.hi = ((this.hi === undefined ? -1 : this.hi) + dir + this.hot.length) % this.hot.length;
    for (const r of this.host.querySelectorAll('.src-row.target')) r.classList.remove('target');
    const row = this.host.querySelector(`#L${this.hot[this.hi]}`);
    if (row) { row.classList.add('target'); this.scrollTo(row); }
  }
}
