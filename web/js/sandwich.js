// The sandwich view of a function: its callers merged into one graph above it
// (nearest caller just above the function) and its callees merged into one
// graph below it, with its total and self. The server cuts both halves from
// the view's stacks (GET /api/runs/ID/sandwich.svg?side=callers|callees);
// recursion is merged there, each stack counts once.
import { api, url } from './api.js';
import { el, errorBox } from './ui.js';
import { fmtValue, fmtPct } from './format.js';
import { FlameGraph } from './flame.js';

export class SandwichView {
  /**
   * @param host element to draw into
   * @param opts {onPick(name), onSource(name), describe(info, share)}
   */
  constructor(host, opts) {
    this.host = host;
    this.opts = opts;
    this.key = '';
    this.head = el('div.sw-head#sw-head');
    this.callersBox = el('div.flame.sw-callers#sw-callers');
    this.calleesBox = el('div.flame.sw-callees#sw-callees');
    this.details = el('div.details#sw-details', ' ');
    const hover = (info, d) => { this.details.textContent = info ? `${info.name} · ${d}` : ' '; };
    const pick = (g) => (chain, i) => this.opts.onPick(g.name(i));
    this.callers = new FlameGraph(this.callersBox, { onZoom: (c, i) => pick(this.callers)(c, i), onHover: hover, describe: opts.describe, hint: 'click: sandwich of this function', canvas: true });
    this.callees = new FlameGraph(this.calleesBox, { onZoom: (c, i) => pick(this.callees)(c, i), onHover: hover, describe: opts.describe, hint: 'click: sandwich of this function', canvas: true });
    this.callersNote = el('span.sw-note#sw-callers-note');
    this.calleesNote = el('span.sw-note#sw-callees-note');
    host.replaceChildren(this.head,
      el('div.sw-label', 'Callers ▲ (merged, nearest caller just above)', this.callersNote), this.callersBox,
      el('div.sw-label', 'Callees ▼ (merged)', this.calleesNote), this.calleesBox, this.details);
  }

  /** Shows the sandwich of `fn` for the view {metric, from, until}; resolves to timings. */
  async show(id, fn, view, width, units) {
    const common = { metric: view.metric, from: view.from, until: view.until };
    const key = JSON.stringify([id, fn, common, width]);
    if (key === this.key) return null;
    this.key = key;
    const t0 = performance.now();
    this.host.dataset.state = 'loading';
    if (!fn) {
      this.head.replaceChildren(el('p.hint', 'Pick a function: click a row of the function table, a frame of the graph (then "Sandwich"), or type its name in the search box and press Enter. Keyboard: 2 opens this view, 1 the flame graph.'));
      this.callersBox.replaceChildren();
      this.calleesBox.replaceChildren();
      this.host.dataset.state = 'empty';
      return null;
    }
    const svg = (side) => api.sandwichFramesURL(id, { ...common, fn, side, width, minwidth: 1 });
    try {
      const [info, a, b] = await Promise.all([
        api.sandwich(id, { ...common, fn }),
        this.callers.load(svg('callers'), { inverted: false, hideRoot: true }),
        this.callees.load(svg('callees'), { inverted: true, hideRoot: true }),
      ]);
      if (this.key !== key) return null;
      this.header(info, units);
      this.notes(info);
      this.host.dataset.state = info.found ? 'ready' : 'empty';
      this.host.dataset.fn = fn;
      return { ms: performance.now() - t0, callers: a, callees: b };
    } catch (e) {
      if (e.name === 'AbortError') return null;
      this.head.replaceChildren(errorBox('Could not make the sandwich', e));
      this.host.dataset.state = 'error';
      return null;
    }
  }

  /** Says what the blank part of each half is: frames narrower than a pixel are
   *  not drawn, so a function called from hundreds of places shows a wide gap. */
  notes(info) {
    const blank = (g, below) => {
      const fs = g.frames;
      if (!fs.length) return 0;
      let top = fs[0];
      for (const f of fs) if (f.w > top.w) top = f;
      let next = null;
      for (const f of fs) {
        if (below ? f.y > top.y && (next === null || f.y < next) : f.y < top.y && (next === null || f.y > next)) next = f.y;
      }
      let covered = 0;
      for (const f of fs) if (f.y === next) covered += f.w;
      return top.w > 0 ? Math.max(0, 1 - covered / top.w) : 0;
    };
    const pct = (x) => fmtPct(100 * x);
    const up = info.found ? blank(this.callers, false) : 0;
    this.callersNote.textContent = !info.found ? ''
      : !info.callers.length ? ' · no callers: it is a root'
        : up > 0.01 ? ` · blank: ${pct(up)} of its total, in callers too narrow to draw` : '';
    const self = info.found && info.total ? info.self / info.total : 0;
    const down = info.found ? Math.max(0, blank(this.callees, true) - self) : 0;
    const parts = [self > 0.005 ? `${pct(self)} self` : '', down > 0.01 ? `${pct(down)} in callees too narrow to draw` : ''].filter(Boolean);
    this.calleesNote.textContent = info.found && parts.length ? ` · blank: ${parts.join(', ')}` : '';
  }

  header(info, units) {
    const v = (x) => fmtValue(x, info.metric, units || info.units);
    const share = (x) => fmtPct(info.view_total ? (100 * x) / info.view_total : 0);
    const src = el('button#sw-source', { type: 'button', title: 'Source of this function with line heat (3)' }, 'Source');
    src.addEventListener('click', () => this.opts.onSource(info.fn));
    src.disabled = !/\S+:\d+\)?$/.test(info.fn) || /^\[C\]/.test(info.fn);
    this.head.replaceChildren(
      el('h2.sw-fn', { title: info.fn }, info.fn),
      info.found
        ? el('div.sw-stats',
          el('span', 'Total ', el('b#sw-total', v(info.total)), ` (${share(info.total)})`),
          el('span', 'Self ', el('b#sw-self', v(info.self)), ` (${share(info.self)})`),
          el('span', `${info.callers.length} caller${info.callers.length === 1 ? '' : 's'}`),
          el('span', `${info.callees.length} callee${info.callees.length === 1 ? '' : 's'}`),
          src)
        : el('p.hint', 'No stack of this view holds this function (another metric or time range may).'));
  }
}

export { url };
