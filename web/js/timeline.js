// The metric over a run's life, as bars; dragging selects a time range.
import { fmtClock, fmtDuration, fmtValue } from './format.js';

const NS = 'http://www.w3.org/2000/svg';
const H = 72;
const AXIS = 14;

function svgEl(name, attrs) {
  const n = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  return n;
}

/**
 * Draws `data` ({from_ns, step_ns, values}) into `host`. `range` is the
 * current {from, until} in ns or null. `onSelect(fromNs, untilNs)` is called
 * when a drag ends.
 */
export function drawTimeline(host, data, { range, metric, units, onSelect }) {
  const vals = data.values || [];
  const n = vals.length;
  const W = Math.max(200, host.clientWidth || 800);
  const max = Math.max(1e-9, ...vals);
  const start = data.from_ns;
  const step = data.step_ns;
  const end = start + n * step;
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'Timeline; drag to select a time range' });
  const bw = W / Math.max(1, n);
  const x2t = (x) => start + (Math.min(Math.max(x, 0), W) / W) * (end - start);
  const t2x = (t) => ((t - start) / (end - start)) * W;
  for (let i = 0; i < n; i++) {
    const h = (vals[i] / max) * (H - AXIS - 4);
    const t0 = start + i * step;
    const inRange = range && t0 + step > range.from && t0 < range.until;
    const r = svgEl('rect', { x: i * bw + 0.5, y: H - AXIS - h, width: Math.max(0.5, bw - 1), height: Math.max(0, h), class: inRange ? 'bar in' : 'bar' });
    const tt = svgEl('title', {});
    tt.textContent = `${fmtClock(t0)}  ${fmtValue(vals[i], metric, units, true)}`;
    r.append(tt);
    svg.append(r);
  }
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const t = start + f * (end - start);
    const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
    const lab = svgEl('text', { x: f * W, y: H - 2, 'text-anchor': anchor, class: 'axis' });
    lab.textContent = fmtClock(t);
    svg.append(lab);
  }
  const sel = svgEl('rect', { class: 'sel', y: 0, height: H - AXIS, x: 0, width: 0, visibility: 'hidden' });
  if (range) {
    sel.setAttribute('x', Math.max(0, t2x(range.from)));
    sel.setAttribute('width', Math.max(1, t2x(range.until) - Math.max(0, t2x(range.from))));
    sel.setAttribute('visibility', 'visible');
  }
  svg.append(sel);

  let x0 = null;
  const localX = (e) => {
    const b = svg.getBoundingClientRect();
    return ((e.clientX - b.left) / b.width) * W;
  };
  svg.addEventListener('pointerdown', (e) => {
    x0 = localX(e);
    svg.setPointerCapture(e.pointerId);
    sel.setAttribute('x', x0);
    sel.setAttribute('width', 0);
    sel.setAttribute('visibility', 'visible');
  });
  svg.addEventListener('pointermove', (e) => {
    if (x0 === null) return;
    const x = localX(e);
    sel.setAttribute('x', Math.max(0, Math.min(x, x0)));
    sel.setAttribute('width', Math.abs(x - x0));
  });
  svg.addEventListener('pointerup', (e) => {
    if (x0 === null) return;
    const x = localX(e);
    const a = Math.min(x, x0);
    const b = Math.max(x, x0);
    x0 = null;
    if (b - a < 3) {  // a click, not a drag: select the bar under it
      const i = Math.floor(Math.max(0, Math.min(W - 1, a)) / bw);
      onSelect(start + i * step, start + (i + 1) * step);
      return;
    }
    onSelect(Math.floor(x2t(a)), Math.ceil(x2t(b)));
  });
  host.replaceChildren(svg);
  return { start, end, label: (r) => `${fmtClock(r.from)} – ${fmtClock(r.until)} (${fmtDuration(r.until - r.from)})` };
}
