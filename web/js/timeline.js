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
 * The time axis of a run's timeline: the run's own time (`span`, {from, until}
 * in ns), not the buckets' (the store's buckets are whole seconds or coarser, so
 * the data's first and last step reach past a run's start and end: on a 154 ms
 * run crossing a second the axis was 2 s, its one bar filling half of it).
 * Widened only where a bucket with a value would otherwise fall outside.
 */
export function timelineAxis(data, span) {
  const vals = data.values || [];
  const step = data.step_ns;
  let start = data.from_ns;
  let end = data.from_ns + vals.length * step;
  if (span && span.until > span.from) {
    start = Math.max(start, span.from);
    end = Math.min(end, span.until);
  }
  for (let i = 0; i < vals.length; i++) {
    if (!vals[i]) continue;
    const t0 = data.from_ns + i * step;
    if (t0 + step <= start) start = t0;  // a bucket wholly before the run: show it whole
    if (t0 >= end) end = t0 + step;
  }
  return { start, end: Math.max(end, start + 1) };
}

/**
 * Whether `data` has more than one step within the run (`span`): a run shorter
 * than two steps has one or two buckets, which say nothing about its course.
 */
export function timelineResolves(data, span) {
  const { start, end } = timelineAxis(data, span);
  return (data.values || []).length >= 2 && end - start >= 2 * data.step_ns;
}

/**
 * Draws `data` ({from_ns, step_ns, values}) into `host` on the axis of
 * timelineAxis(data, span): each bar at its bucket's true place and width, cut
 * to the axis. `range` is the current {from, until} in ns or null.
 * `onSelect(fromNs, untilNs)` is called when a drag ends.
 */
export function drawTimeline(host, data, { range, span, metric, units, onSelect }) {
  const vals = data.values || [];
  const n = vals.length;
  const W = Math.max(200, host.clientWidth || 800);
  const max = Math.max(1e-9, ...vals);
  const step = data.step_ns;
  const { start, end } = timelineAxis(data, span);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'Timeline; drag to select a time range' });
  const x2t = (x) => start + (Math.min(Math.max(x, 0), W) / W) * (end - start);
  const t2x = (t) => ((t - start) / (end - start)) * W;
  // The bucket i as drawn: its time cut to the axis.
  const bucket = (i) => {
    const t0 = data.from_ns + i * step;
    return { from: Math.max(t0, start), until: Math.min(t0 + step, end) };
  };
  for (let i = 0; i < n; i++) {
    const b = bucket(i);
    if (b.until <= b.from) continue;
    const x0 = t2x(b.from);
    const bw = t2x(b.until) - x0;
    const h = (vals[i] / max) * (H - AXIS - 4);
    const inRange = range && b.until > range.from && b.from < range.until;
    const r = svgEl('rect', { x: x0 + Math.min(0.5, bw / 4), y: H - AXIS - h, width: Math.max(0.5, bw > 2 ? bw - 1 : bw / 2), height: Math.max(0, h), class: inRange ? 'bar in' : 'bar' });
    r.dataset.from = b.from;
    r.dataset.until = b.until;
    const tt = svgEl('title', {});
    tt.textContent = `${fmtClock(data.from_ns + i * step)}  ${fmtValue(vals[i], metric, units, true)}`;
    r.append(tt);
    svg.append(r);
  }
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const t = start + f * (end - start);
    const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
    const lab = svgEl('text', { x: f * W, y: H - 2, 'text-anchor': anchor, class: 'axis' });
    // Tenths where whole seconds would not tell the labels of a short axis apart.
    lab.textContent = end - start < 20e9 ? `${fmtClock(t)}.${Math.floor((t % 1e9) / 1e8)}` : fmtClock(t);
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
      const i = Math.floor((x2t(a) - data.from_ns) / step);
      const bar = bucket(Math.max(0, Math.min(n - 1, i)));
      onSelect(bar.from, bar.until);
      return;
    }
    onSelect(Math.floor(x2t(a)), Math.ceil(x2t(b)));
  });
  host.replaceChildren(svg);
  return { start, end, label: (r) => `${fmtClock(r.from)} – ${fmtClock(r.until)} (${fmtDuration(r.until - r.from)})` };
}
