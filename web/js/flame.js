// The interactive flame graph: the server's SVG (flamegraph.pl structure,
// one <g> per frame with <title>, <rect>, <text>) parsed and inlined, minus
// its own script, style and chrome. The page does hover, search and the
// frame path for zooming itself, reading geometry from the rects, so it needs
// nothing from the SVG beyond that structure. DOM work is kept to one pass at
// load; names are read from the titles only when first needed.

const SVGNS = 'http://www.w3.org/2000/svg';

/** "NAME (COUNT UNIT, PCT%...)..." -> {name, rest}; the name may hold parentheses. */
export function splitTitle(text) {
  const nl = text.indexOf('\n');
  const first = nl < 0 ? text : text.slice(0, nl);
  const m = /^(.*?) \(([^()]*?), ([-+]?[\d.]+)%([^()]*)\)(.*)$/s.exec(first);
  const more = nl < 0 ? '' : text.slice(nl + 1).trim();
  if (!m) return { name: first, value: '', pct: NaN, more };
  const extra = `${m[4]}${m[5]}`.replace(/^[\s;,]+/, '').trim();
  return { name: m[1], value: m[2], pct: parseFloat(m[3]), extra, more };
}

function makeRegex(query) {
  try {
    return new RegExp(query, 'i');
  } catch (_) {
    return new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
  }
}

// The SVG is read by a worker (svg-worker.js) and the frames are built here in
// chunks of CHUNK, each its own task: no main-thread task grows with the graph.
const CHUNK = 400;
let worker = null;
let workerId = 0;
const waiting = new Map();

/** {width, frames} from the worker, or null when there is no worker (then DOMParser is used). */
function readOffThread(text) {
  if (!window.Worker) return Promise.resolve(null);
  if (!worker) {
    try {
      worker = new Worker(new URL('./svg-worker.js', import.meta.url), { type: 'module' });
    } catch (_) {
      return Promise.resolve(null);
    }
    worker.onmessage = (e) => { const cb = waiting.get(e.data.id); waiting.delete(e.data.id); if (cb) cb(e.data.error ? null : e.data); };
    worker.onerror = () => { for (const cb of waiting.values()) cb(null); waiting.clear(); worker = null; };
  }
  return new Promise((resolve) => { const id = ++workerId; waiting.set(id, resolve); worker.postMessage({ id, text }); });
}

const nextTask = () => new Promise((r) => setTimeout(r, 0));
const escXml = (t) => String(t).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

export function exactRegexSource(name) {
  return `^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
}

/**
 * What both drawings of the worker's frames (SVG and canvas) need: the frames
 * (without the root when `hideRoot`), a view box cropped to them and the row
 * height (the rects' height, else the smallest step between rows less a pixel).
 */
function layout(read, hideRoot) {
  const frames = read.frames;
  if (hideRoot && frames.length && frames[0].name === 'all') frames.shift();
  const width = read.width;
  let minY = Infinity;
  let maxY = -Infinity;
  let rootW = 0;
  const ys = new Set();
  for (const f of frames) {
    if (f.y < minY) minY = f.y;
    if (f.y > maxY) maxY = f.y;
    if (f.w > rootW) rootW = f.w;
    ys.add(f.y);
  }
  let step = 0;
  const sorted = [...ys].sort((a, b) => a - b);
  for (let k = 1; k < sorted.length; k++) if (!step || sorted[k] - sorted[k - 1] < step) step = sorted[k] - sorted[k - 1];
  const rowH = frames.length && frames[0].h > 0 ? frames[0].h : step > 1 ? step - 1 : 15;
  const vy = frames.length ? minY - 2 : 0;
  const vh = frames.length ? maxY + rowH - minY + 4 : 1;
  return { frames, width, rootW: rootW || width, rowH, vy, vh, viewBox: `0 ${vy} ${width} ${vh}` };
}

/** Frames above which the run and compare pages draw their graph on a canvas (opts.canvas):
 *  as SVG elements the 4,673 frames of a 200,000-stack run cost 50-130 ms tasks of style,
 *  paint and hit testing, the compare page's 13,909 frames of it 100-300 ms. */
export const CANVAS_FRAMES = 2500;

export class FlameGraph {
  /**
   * @param host element the SVG goes into
   * @param opts {onZoom(chain, frameIndex), onHover(info|null), canvas: draw on a
   *   canvas (see drawCanvas) instead of one SVG element per frame: true, or a
   *   number of frames above which to}
   */
  constructor(host, opts = {}) {
    this.host = host;
    this.opts = opts;
    this.frames = [];   // {g, x, y, w, name?, title?}
    this.svg = null;
    this.inverted = false;
    this.matched = [];
    this.abort = null;
    this.canvas = null;  // the canvas the frames are drawn on (opts.canvas), else null
    this.hovered = -1;
    this.tip = document.createElement('div');
    this.tip.className = 'tip';
    this.tip.hidden = true;
    document.body.append(this.tip);
    host.addEventListener('mouseover', (e) => { if (!this.canvas) this.hover(e); });
    host.addEventListener('mousemove', (e) => {
      if (this.canvas && this.frameAt(e) !== this.hovered) this.hover(e);
      this.moveTip(e);
    });
    host.addEventListener('mouseleave', () => this.hideTip());
    host.addEventListener('click', (e) => this.click(e));
  }

  /** Fetches and shows the SVG at `src`. Resolves to {frames, fetchMs, buildMs}. */
  async load(src, { inverted = false, hideRoot = false } = {}) {
    if (this.abort) this.abort.abort();
    const ctl = new AbortController();
    this.abort = ctl;
    const t0 = performance.now();
    const res = await fetch(src, { signal: ctl.signal });
    if (!res.ok) {
      let msg = `${res.status} ${res.statusText}`;
      try { const j = JSON.parse(await res.text()); if (j.error) msg = j.error; } catch (_) { /* keep status */ }
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    const text = await res.text();
    if (ctl.signal.aborted) throw new DOMException('aborted', 'AbortError');
    const t1 = performance.now();
    await this.build(text, inverted, hideRoot);
    return { frames: this.frames.length, bytes: text.length, fetchMs: t1 - t0, buildMs: performance.now() - t1 };
  }

  /** Parses and inlines the SVG; `hideRoot` leaves out the "all" frame (the sandwich's halves). */
  async build(text, inverted, hideRoot = false) {
    const token = {};
    this.building = token;
    const read = await readOffThread(text);
    // A task of its own for the drawing: the worker's message (thousands of records
    // to deserialize) and the drawing in one task made 70 ms on a loaded machine.
    if (read && read.frames.length > 1000) await nextTask();
    if (this.building !== token) throw new DOMException('replaced by a newer graph', 'AbortError');
    this.canvas = null;
    // opts.canvas: true, or a frame count above which the canvas is used.
    const canvasFrom = this.opts.canvas === true ? 0 : this.opts.canvas || Infinity;
    if (read && read.frames.length > canvasFrom) return this.drawCanvas(read, inverted, hideRoot);
    if (read && read.frames.length) return this.buildFrom(read, inverted, hideRoot, token);
    return this.buildDom(text, inverted, hideRoot);
  }

  /** Builds the graph from the worker's records, CHUNK frames per task. */
  async buildFrom(read, inverted, hideRoot, token) {
    const g = layout(read, hideRoot);
    const frames = g.frames;
    const root = document.createElementNS(SVGNS, 'svg');
    root.setAttribute('viewBox', g.viewBox);
    root.setAttribute('width', '100%');
    root.setAttribute('role', 'img');
    root.setAttribute('aria-label', 'Flame graph');
    root.style.setProperty('--fh', `${g.rowH}px`);
    const box = document.createElementNS(SVGNS, 'g');
    root.append(box);
    this.adopt(root, g, inverted);
    for (let at = 0; at < frames.length; at += CHUNK) {
      if (at) {
        await nextTask();
        if (this.building !== token) throw new DOMException('replaced by a newer graph', 'AbortError');
      }
      const end = Math.min(frames.length, at + CHUNK);
      let html = '';
      for (let i = at; i < end; i++) {
        const f = frames[i];
        html += `<g><rect x="${f.x}" y="${f.y}" width="${f.w}"${f.h ? ` height="${f.h}"` : ''} fill="${escXml(f.fill)}"></rect>`;
        html += f.tx ? `<text x="${escXml(f.tx)}" y="${escXml(f.ty)}">${escXml(f.label)}</text></g>` : '</g>';
      }
      box.insertAdjacentHTML('beforeend', html);
      const gs = box.children;
      for (let i = at; i < end; i++) {
        frames[i].g = gs[i];
        gs[i]._lfi = i;
      }
    }
  }

  /**
   * Draws the worker's frames on one canvas (opts.canvas): one element whatever
   * the frame count. As SVG, every frame is two or three elements to style, lay
   * out and paint: 3,000 frames took 100-200 ms of rendering in one task on this
   * loaded machine, the canvas a few ms. Hover and click find the frame from the
   * pointer's position; search marks and the hover outline go on the overlay SVG.
   */
  drawCanvas(read, inverted, hideRoot) {
    const g = layout(read, hideRoot);
    const { frames, width, rowH } = g;
    const cssW = Math.max(1, this.host.clientWidth || width);
    const scale = cssW / width;
    const dpr = window.devicePixelRatio || 1;
    const canvas = document.createElement('canvas');
    canvas.width = Math.max(1, Math.round(cssW * dpr));
    canvas.height = Math.max(1, Math.round(g.vh * scale * dpr));
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', 'Flame graph');
    const ctx = canvas.getContext('2d');
    ctx.setTransform(scale * dpr, 0, 0, scale * dpr, 0, -g.vy * scale * dpr);
    // Plain rectangles (fillRect is Skia's fast path; a rounded path per frame took
    // twice as long), the fill set only when it changes.
    let fill = '';
    for (const f of frames) {
      const c = f.fill || '#e0a040';
      if (c !== fill) ctx.fillStyle = fill = c;
      ctx.fillRect(f.x, f.y, f.w > 2 ? f.w - 0.6 : Math.max(f.w, 0.5), rowH);  // a seam between neighbours
    }
    ctx.fillStyle = '#000';
    ctx.font = '12px Verdana, "DejaVu Sans", sans-serif';
    for (const f of frames) if (f.label && f.tx) ctx.fillText(f.label, +f.tx, +f.ty);
    this.canvas = canvas;
    this.adopt(canvas, g, inverted);
  }

  /** Makes `el` (the SVG or the canvas) the graph of `g` (layout()), with an empty overlay above it. */
  adopt(el, g, inverted) {
    this.frames = g.frames;
    this.rowH = g.rowH;
    this.viewBox = g.viewBox;
    this.rootW = g.rootW;
    this.width = g.width;
    this.inverted = inverted;
    this.matched = [];
    this.svg = el;
    this.hideTip();
    // Search marks go on an overlay of their own (its own compositing layer),
    // so a search repaints only the marks, never the thousands of frames.
    this.overlay = document.createElementNS(SVGNS, 'svg');
    this.overlay.setAttribute('class', 'overlay');
    this.overlay.setAttribute('viewBox', g.viewBox);
    this.overlay.setAttribute('aria-hidden', 'true');
    this.overlay.style.setProperty('--fh', `${g.rowH}px`);
    this.host.replaceChildren(el, this.overlay);
  }

  /** The hover outline of frame i on the overlay (canvas mode); -1 removes it. */
  outline(i) {
    if (!this.hov) {
      this.hov = document.createElementNS(SVGNS, 'rect');
      this.hov.setAttribute('class', 'hov');
    }
    const f = this.frames[i];
    if (!f || !this.overlay) { this.hov.remove(); return; }
    this.hov.setAttribute('x', f.x);
    this.hov.setAttribute('y', f.y);
    this.hov.setAttribute('width', f.w);
    if (this.hov.parentNode !== this.overlay) this.overlay.append(this.hov);
  }

  /** The DOMParser path: any well-formed flamegraph.pl-shaped SVG. */
  buildDom(text, inverted, hideRoot) {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const root = doc.documentElement;
    if (root.nodeName !== 'svg' || doc.getElementsByTagName('parsererror').length) {
      throw new Error('The server sent a flame graph this page cannot read (not well-formed SVG).');
    }
    for (const s of [...root.querySelectorAll('script, style, foreignObject')]) s.remove();
    for (const a of [...root.getAttributeNames()]) if (/^on/i.test(a)) root.removeAttribute(a);

    const vb = (root.getAttribute('viewBox') || '').split(/[\s,]+/).map(Number);
    const width = vb.length === 4 && vb[2] > 0 ? vb[2] : parseFloat(root.getAttribute('width')) || 1200;
    const frames = [];
    const keep = new Set();
    let minY = Infinity;
    let maxY = -Infinity;
    let rootW = 0;
    let rootG = null;
    for (const g of root.getElementsByTagName('g')) {
      let rect = null;
      let title = null;
      for (let c = g.firstElementChild; c; c = c.nextElementSibling) {
        if (c.localName === 'rect') rect = c;
        else if (c.localName === 'title') title = c;
      }
      if (!rect || !title) continue;
      if (hideRoot && !frames.length && !rootG && /^all \(/.test(title.textContent)) {
        rootG = g;  // removed after the walk (the collection is live)
        continue;
      }
      if (g.hasAttribute('onmouseover') || g.hasAttribute('onclick')) {
        for (const a of g.getAttributeNames()) if (/^on/i.test(a)) g.removeAttribute(a);
      }
      const x = parseFloat(rect.getAttribute('x')) || 0;
      const y = parseFloat(rect.getAttribute('y')) || 0;
      const w = parseFloat(rect.getAttribute('width')) || 0;
      g._lfi = frames.length;
      frames.push({ g, x, y, w, title });
      if (y < minY) minY = y;
      if (y > maxY) maxY = y;
      if (w > rootW) rootW = w;
      // Remember which child of the root holds frames; the rest is chrome.
      let n = g;
      while (n.parentNode && n.parentNode !== root) n = n.parentNode;
      keep.add(n);
    }
    if (rootG) rootG.remove();
    // Rect height comes from the SVG's stylesheet (dropped here) or an
    // attribute; the level step (smallest gap between frame rows) gives it.
    let step = 0;
    const rect0 = frames.length ? frames[0].g.querySelector('rect') : null;
    const attrH = rect0 ? parseFloat(rect0.getAttribute('height')) : NaN;
    if (frames.length > 1) {
      const ys = [...new Set(frames.map((f) => f.y))].sort((a, b) => a - b);
      for (let k = 1; k < ys.length; k++) if (!step || ys[k] - ys[k - 1] < step) step = ys[k] - ys[k - 1];
    }
    const rowH = attrH > 0 ? attrH : step > 1 ? step - 1 : 15;
    if (frames.length) {
      for (const c of [...root.children]) {
        if (c.localName !== 'defs' && !keep.has(c)) c.remove();
      }
      root.setAttribute('viewBox', `0 ${minY - 2} ${width} ${maxY + rowH - minY + 4}`);
      root.style.setProperty('--fh', `${rowH}px`);
    }
    root.setAttribute('width', '100%');
    root.removeAttribute('height');
    root.removeAttribute('id');
    root.setAttribute('role', 'img');
    root.setAttribute('aria-label', 'Flame graph');
    const viewBox = root.getAttribute('viewBox') || `0 0 ${width} 1`;
    this.adopt(document.adoptNode(root), { frames, rowH, viewBox, rootW: rootW || width, width }, inverted);
    this.warmNames();
  }

  /** The name of frame i (parsed from its title once). */
  name(i) {
    const f = this.frames[i];
    if (f.name === undefined) this.readTitle(f);
    return f.name;
  }

  readTitle(f) {
    const p = splitTitle(f.text !== undefined ? f.text : f.title ? f.title.textContent : '');
    f.name = p.name;
    f.info = p;
    return p;
  }

  info(i) {
    const f = this.frames[i];
    if (!f.info) this.readTitle(f);
    return f.info;
  }

  /** Reads every name in idle time after a load, so the first search is quick. */
  warmNames() {
    const frames = this.frames;
    let i = 0;
    const step = (deadline) => {
      if (this.frames !== frames) return;  // a newer graph replaced this one
      while (i < frames.length && (deadline.timeRemaining() > 2 || deadline.didTimeout)) {
        for (const end = Math.min(frames.length, i + 500); i < end; i++) {
          if (frames[i].name === undefined) this.readTitle(frames[i]);
        }
      }
      if (i < frames.length) requestIdleCallback(step, { timeout: 1000 });
    };
    if (window.requestIdleCallback) requestIdleCallback(step, { timeout: 1000 });
  }

  /** Names from the graph's root down to frame i, found by geometry. */
  chain(i) {
    const f = this.frames[i];
    const cx = f.x + f.w / 2;
    const below = [];
    for (const o of this.frames) {
      if ((this.inverted ? o.y < f.y : o.y > f.y) && o.x <= cx + 1e-6 && o.x + o.w >= cx - 1e-6) below.push(o);
    }
    below.sort((a, b) => (this.inverted ? a.y - b.y : b.y - a.y));
    const out = [];
    let lastY = NaN;
    for (const o of below) {
      if (o.y === lastY) continue;  // two rects meeting at cx: keep the first
      lastY = o.y;
      out.push(o.name !== undefined ? o.name : this.name(o.g._lfi));
    }
    out.push(this.name(i));
    return out;
  }

  /** Index of the frame under a mouse event, or -1. */
  frameAt(e) {
    if (!this.canvas) return this.frameOf(e.target);
    const box = this.canvas.getBoundingClientRect();
    if (!box.width || !box.height) return -1;
    const [vx, vy, vw, vh] = this.viewBox.split(' ').map(Number);
    const x = vx + ((e.clientX - box.left) * vw) / box.width;
    const y = vy + ((e.clientY - box.top) * vh) / box.height;
    const fs = this.frames;
    for (let i = 0; i < fs.length; i++) {
      const f = fs[i];
      if (y >= f.y && y < f.y + this.rowH && x >= f.x && x < f.x + Math.max(f.w, 0.5)) return i;
    }
    return -1;
  }

  frameOf(target) {
    const g = target && target.closest ? target.closest('g') : null;
    return g && g._lfi !== undefined && this.frames[g._lfi] && this.frames[g._lfi].g === g ? g._lfi : -1;
  }

  hover(e) {
    const i = this.frameAt(e);
    this.hovered = i;
    if (this.canvas) this.outline(i);
    if (i < 0) { this.hideTip(); return; }
    const p = this.info(i);
    // The page shows its own tooltip: drop the title so the browser's does not double it.
    const f = this.frames[i];
    if (f.title && f.title.remove) { f.title.remove(); f.title = null; }
    const share = (100 * this.frames[i].w) / this.rootW;
    const detail = this.opts.describe ? this.opts.describe(p, share) : `${p.value} (${p.pct}%)`;
    this.tip.replaceChildren();
    const nm = document.createElement('div');
    nm.className = 't-name';
    nm.textContent = p.name;
    const more = document.createElement('div');
    more.className = 't-more';
    more.textContent = [detail, p.more].filter(Boolean).join('\n');
    const hint = document.createElement('div');
    hint.className = 't-hint';
    hint.textContent = this.opts.hint || (this.opts.onZoom ? 'click to zoom' : '');
    hint.hidden = !this.opts.onZoom;
    this.tip.append(nm, more, hint);
    this.tip.hidden = false;
    this.moveTip(e);
    if (this.opts.onHover) this.opts.onHover(p, detail);
  }

  moveTip(e) {
    if (this.tip.hidden) return;
    const pad = 14;
    const r = this.tip.getBoundingClientRect();
    let x = e.clientX + pad;
    let y = e.clientY + pad;
    if (x + r.width > window.innerWidth - 4) x = e.clientX - r.width - pad;
    if (y + r.height > window.innerHeight - 4) y = e.clientY - r.height - pad;
    this.tip.style.left = `${Math.max(4, x)}px`;
    this.tip.style.top = `${Math.max(4, y)}px`;
  }

  hideTip() {
    this.tip.hidden = true;
    if (this.canvas && this.hovered >= 0) this.outline(-1);
    this.hovered = -1;
    if (this.opts.onHover) this.opts.onHover(null);
  }

  click(e) {
    const i = this.frameAt(e);
    if (i < 0 || !this.opts.onZoom) return;
    this.opts.onZoom(this.chain(i), i);
  }

  /**
   * Highlights frames whose name matches `query` (a case-insensitive regular
   * expression, or literal text when it is not a valid one). Returns
   * {count, pct} with pct the matched share of the graph, counting nested
   * matches once, or null when the query is empty.
   */
  search(query) {
    if (!this.svg) return null;
    this.matched = [];
    if (!query) {
      this.overlay.replaceChildren();
      return null;
    }
    const re = makeRegex(query);
    const hits = [];
    for (let i = 0; i < this.frames.length; i++) {
      if (re.test(this.name(i))) hits.push(i);
    }
    this.matched = hits;
    this.drawMarks(hits);
    // Share: widths of the outermost matches (a match inside a match counts once).
    const spans = hits.map((i) => this.frames[i]).sort((a, b) => a.x - b.x || b.w - a.w);
    let end = -Infinity;
    let sum = 0;
    for (const f of spans) {
      const fe = f.x + f.w;
      if (fe <= end + 0.5) continue;  // inside an earlier match (rects are rounded)
      sum += fe - Math.max(f.x, end);
      end = fe;
    }
    return { count: hits.length, pct: this.rootW ? Math.min(100, (100 * sum) / this.rootW) : 0 };
  }
}

FlameGraph.prototype.drawMarks = function drawMarks(hits) {
  const frag = document.createDocumentFragment();
  const [vx, vy, vw, vh] = (this.viewBox || '0 0 0 0').split(' ').map(Number);
  const dim = document.createElementNS(SVGNS, 'rect');
  dim.setAttribute('class', 'dim');
  dim.setAttribute('x', vx);
  dim.setAttribute('y', vy);
  dim.setAttribute('width', vw);
  dim.setAttribute('height', vh);
  frag.append(dim);
  for (const i of hits) {
    const f = this.frames[i];
    const r = document.createElementNS(SVGNS, 'rect');
    r.setAttribute('class', 'hit');
    r.setAttribute('x', f.x);
    r.setAttribute('y', f.y);
    r.setAttribute('width', f.w);
    frag.append(r);
    const t = f.g ? f.g.querySelector('text') : null;
    if (t) {
      frag.append(t.cloneNode(true));
    } else if (!f.g && f.label) {
      const tx = document.createElementNS(SVGNS, 'text');
      tx.setAttribute('x', f.tx);
      tx.setAttribute('y', f.ty);
      tx.textContent = f.label;
      frag.append(tx);
    }
  }
  this.overlay.replaceChildren(frag);
};

export { SVGNS };
