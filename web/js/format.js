// Formatting of values for people: byte units for memory metrics, ms for
// time, grouped digits for counts. Pure functions, no DOM.

const nf0 = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const nf1 = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });
const nf2 = new Intl.NumberFormat('en', { maximumFractionDigits: 2 });

/** The unit family of a metric: 'time' (ns), 'bytes', or 'count'. */
export function unitKind(metric, units) {
  if (units === 'ns' || units === 'nanoseconds' || metric === 'time') return 'time';
  if (units === 'bytes' || /_bytes$/.test(metric || '')) return 'bytes';
  return 'count';
}

/** Nanoseconds as ms (µs/ns below a millisecond, s from ten seconds up). */
export function fmtTime(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return `${nf0.format(ns)} ns`;
  if (a < 1e6) return `${nf1.format(ns / 1e3)} µs`;
  if (a < 1e10) return `${nf2.format(ns / 1e6)} ms`;
  return `${nf2.format(ns / 1e9)} s`;
}

/** Bytes in binary units: B, KiB, MiB, GiB. */
export function fmtBytes(b) {
  const a = Math.abs(b);
  if (a < 1024) return `${nf0.format(b)} B`;
  if (a < 1024 ** 2) return `${nf1.format(b / 1024)} KiB`;
  if (a < 1024 ** 3) return `${nf1.format(b / 1024 ** 2)} MiB`;
  return `${nf2.format(b / 1024 ** 3)} GiB`;
}

/** A plain count with grouped digits. */
export function fmtCount(n) {
  return Math.abs(n) >= 100 || Number.isInteger(n) ? nf0.format(n) : nf2.format(n);
}

/** A metric value in its unit, with the metric's count name for counts. */
export function fmtValue(v, metric, units, withName = false) {
  const k = unitKind(metric, units);
  if (k === 'time') return fmtTime(v);
  if (k === 'bytes') return fmtBytes(v);
  if (!withName) return fmtCount(v);
  let name = metric === 'alloc_count' ? 'allocs' : (metric || units || '');
  if (v === 1 && name.endsWith('s')) name = name.slice(0, -1);  // "1 sample"
  return `${fmtCount(v)} ${name}`;
}

export function fmtPct(p, digits = 2) {
  if (!isFinite(p)) return '–';
  return `${p.toFixed(digits)}%`;
}

/** A run's duration, e.g. "850 ms", "4.2 s", "3 min 12 s", "1 h 02 min". */
export function fmtDuration(ns) {
  if (ns == null || !isFinite(ns) || ns <= 0) return '–';
  const s = ns / 1e9;
  if (s < 1) return `${nf0.format(ns / 1e6)} ms`;
  if (s < 60) return `${nf1.format(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

const pad = (n) => String(n).padStart(2, '0');

/** Local date and time, "2026-11-30 21:09:54". */
export function fmtDate(ns) {
  if (!ns) return '–';
  const d = new Date(ns / 1e6);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** Clock time only, for timeline axes. */
export function fmtClock(ns) {
  const d = new Date(ns / 1e6);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "just now", "5 min ago", "3 h ago", "2 days ago". */
export function fmtAgo(ns, nowMs = Date.now()) {
  if (!ns) return '';
  const s = Math.round((nowMs - ns / 1e6) / 1000);
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.max(1, Math.round(s / 60))} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  const d = Math.round(s / 86400);
  return d === 1 ? 'yesterday' : `${d} days ago`;
}

/** Human name of a metric. */
export function metricLabel(m) {
  return ({ samples: 'Samples', time: 'Time', calls: 'Calls', alloc_bytes: 'Allocated bytes',
    alloc_count: 'Allocations', live_bytes: 'Live bytes', live_count: 'Live objects' })[m] || m;
}
