// The interactive flame graph, drawn from the server's frames as data
// (format "luaflame-frames", engine/include/luaflame/frames.hpp: the layout
// the standalone SVG is drawn from, as rows of numbers). The page draws them
// as SVG elements or, past a size, on a canvas, and does hover, search and
// the frame path for zooming itself from the same records: nothing is parsed
// back out of markup or titles.

import { fmtBytes, fmtCount, fmtTime } from './format.js';

const SVGNS = 'http://www.w3.org/2000/svg';

function makeRegex(query) {
  try {
    return new RegExp(query, 'i');
  } catch (_) {
    return new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
  }
}

// Graphs drawn as SVG are built in chunks of CHUNK frames, each its own task:
// no main-thread task grows with the graph.
const CHUNK = 400;

const nextTask = () => new Promise((r) => setTimeout(r, 0));
const escXml = (t) => String(t).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

export function exactRegexSource(name) {
  return `^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
}

/** A frame's label: the name, or its first chars-2 characters and ".." (flamegraph.pl's). */
function fitLabel(name, chars) {
  if (name.length <= chars) return name;  // UTF-16 units >= characters: the common case
  const cps = [...name];
  return cps.length <= chars ? name : `${cps.slice(0, chars - 2).join('')}..`;
}

/**
 * The frames of a "luaflame-frames" document as the page draws them, with what
 * both drawings (SVG and canvas) need: the frames (without the root when
 * `hideRoot`), each {x, y, w, depth, name, fill, label, tx, ty, total, self,
 * delta}; the graph's width, its root's width, the row height and a view box
 * cropped to the frames.
 */
export function readFrames(doc, hideRoot = false) {
  if (!doc || doc.format !== 'luaflame-frames' || doc.version !== 1) {
    throw new Error(`The server sent a flame graph this page cannot read (${doc && doc.format} version ${doc && doc.version}).`);
  }
  const S = doc.stride;
  const rows = doc.frames;
  const fh = doc.frame_height;
  const rowH = fh - 1;
  const charW = doc.font_size * doc.font_width;
  const frames = [];
  let minY = Infinity;
  let maxY = -Infinity;
  let rootW = 0;
  for (let o = hideRoot ? S : 0; o < rows.length; o += S) {
    const depth = rows[o];
    const x = rows[o + 1];
    const w = rows[o + 2];
    const y = (doc.inverted ? depth : doc.depth - depth) * fh;
    const name = doc.names[rows[o + 3]];
    const chars = Math.floor(w / charW);
    frames.push({
      x, y, w, depth, name, fill: doc.colors[rows[o + 4]], total: rows[o + 5], self: rows[o + 6], delta: S > 7 ? rows[o + 7] : 0,
      label: chars >= 3 ? fitLabel(name, chars) : '', tx: x + 3, ty: y + 3 + rowH / 2,
    });
    if (y < minY) minY = y;
    if (y > maxY) maxY = y;
    if (w > rootW) rootW = w;
  }
  const width = doc.width;
  const vy = frames.length ? minY - 2 : 0;
  const vh = frames.length ? maxY + rowH - minY + 4 : 1;
  const meta = { unit: doc.unit, count: doc.count_name, factor: doc.factor, total: doc.total,
    differential: doc.differential, negate: doc.negate, showSelf: doc.show_self !== false };
  return { frames, width, rootW: rootW || width, rowH, vy, vh, viewBox: `0 ${vy} ${width} ${vh}`, meta };
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
    this.frames = [];   // readFrames()'s, plus g (the frame's element) when drawn as SVG
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

  /** Fetches and shows the frames at `src`. Resolves to {frames, bytes, fetchMs, buildMs}. */
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
    // Parsing, reading and drawing each in a task of their own: together they
    // were one task of 103-116 ms on the compare page of a 200,000-stack run
    // (13,909 frames on a canvas), over the pages' 100 ms goal.
    const doc = JSON.parse(text);
    await nextTask();
    if (ctl.signal.aborted) throw new DOMException('aborted', 'AbortError');
    await this.build(doc, inverted, hideRoot);
    return { frames: this.frames.length, bytes: text.length, fetchMs: t1 - t0, buildMs: performance.now() - t1 };
  }

  /** Draws a "luaflame-frames" document; `hideRoot` leaves out the "all" frame (the sandwich's halves). */
  async build(doc, inverted, hideRoot = false) {
    const token = {};
    this.building = token;
    const g = readFrames(doc, hideRoot);
    // opts.canvas: true, or a frame count above which the canvas is used.
    const canvasFrom = this.opts.canvas === true ? 0 : this.opts.canvas || Infinity;
    if (g.frames.length > canvasFrom) {
      await nextTask();
      if (this.building !== token) throw new DOMException('replaced by a newer graph', 'AbortError');
    }
    this.meta = g.meta;
    this.canvas = null;
    if (g.frames.length > canvasFrom) return this.drawCanvas(g, inverted, token);
    return this.buildSvg(g, inverted, token);
  }

  /** Builds the graph as SVG elements, CHUNK frames per task. */
  async buildSvg(g, inverted, token) {
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
        html += `<g><rect x="${f.x}" y="${f.y}" width="${f.w}" height="${g.rowH}" fill="${escXml(f.fill)}"></rect>`;
        html += f.label ? `<text x="${f.tx}" y="${f.ty}">${escXml(f.label)}</text></g>` : '</g>';
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
   * Draws the frames on one canvas (opts.canvas): one element whatever
   * the frame count. As SVG, every frame is two or three elements to style, lay
   * out and paint: 3,000 frames took 100-200 ms of rendering in one task on this
   * loaded machine, the canvas a few ms. Hover and click find the frame from the
   * pointer's position; search marks and the hover outline go on the overlay SVG.
   */
  async drawCanvas(g, inverted, token) {
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
    // The labels in a task of their own (the canvas is not on the page yet).
    await nextTask();
    if (this.building !== token) throw new DOMException('replaced by a newer graph', 'AbortError');
    ctx.fillStyle = '#000';
    ctx.font = '12px Verdana, "DejaVu Sans", sans-serif';
    for (const f of frames) if (f.label) ctx.fillText(f.label, f.tx, f.ty);
    this.canvas = canvas;
    this.adopt(canvas, g, inverted);
  }

  /** Makes `el` (the SVG or the canvas) the graph of `g` (readFrames()), with an empty overlay above it. */
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

  /** The name of frame i. */
  name(i) {
    return this.frames[i].name;
  }

  /** What the tooltip says of frame i: {name, value, pct, extra}, values in the graph's unit. */
  info(i) {
    const f = this.frames[i];
    const m = this.meta;
    const fmt = (v) => (m.unit === 'ns' ? fmtTime(v) : m.unit === 'bytes' ? fmtBytes(v) : `${fmtCount(v)} ${m.count}`);
    const extra = [];
    if (m.differential && f.depth) {
      // The change of the frame's own value, as a share of the whole (the SVG title's).
      const d = m.negate ? -f.delta : f.delta;
      const pct = m.total > 0 ? (100 * d) / (m.total * m.factor) : 0;
      extra.push(`${d > 0 ? '+' : ''}${pct.toFixed(2)}%`);
    }
    if (m.showSelf && f.depth && f.self > 0 && f.self < f.total) extra.push(`self ${fmt(f.self * m.factor)}`);
    const pct = f.depth ? (m.total > 0 ? (100 * f.total) / m.total : 0) : 100;
    return { name: f.name, value: fmt(f.total * m.factor), pct, extra: extra.join(', ') };
  }

  /** Names from the graph's root down to frame i: its ancestors are, in the
   *  depth-first order the frames come in, the nearest earlier frame one row down, and so on. */
  chain(i) {
    const out = [this.frames[i].name];
    let want = this.frames[i].depth - 1;
    for (let j = i - 1; j >= 0 && want >= 0; j--) {
      if (this.frames[j].depth === want) {
        out.push(this.frames[j].name);
        want--;
      }
    }
    return out.reverse();
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
    const share = (100 * this.frames[i].w) / this.rootW;
    const detail = this.opts.describe ? this.opts.describe(p, share) : `${p.value} (${p.pct}%)`;
    this.tip.replaceChildren();
    const nm = document.createElement('div');
    nm.className = 't-name';
    nm.textContent = p.name;
    const more = document.createElement('div');
    more.className = 't-more';
    more.textContent = detail;
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
