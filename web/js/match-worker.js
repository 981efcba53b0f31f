// Exact search share, off the main thread: loads the view's folded stacks
// once, then answers "which share of the total has a frame matching RE",
// counting each stack once. The graph alone can only give a lower bound:
// frames too narrow to draw are not in it.
let stacks = [];   // frames of each stack
let values = null; // Float64Array, one value per stack
let total = 0;
let ready = null;

async function load(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${res.status}`);
  const text = await res.text();
  const lines = text.split('\n');
  const vals = new Float64Array(lines.length);
  const out = [];
  let n = 0;
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const i = line.lastIndexOf(' ');
    if (i <= 0) continue;
    const v = Number(line.slice(i + 1));
    if (!isFinite(v)) continue;
    out.push(line.slice(0, i).split(';'));
    vals[n++] = v;
    total += v;
  }
  stacks = out;
  values = vals.subarray(0, n);
}

function share(source) {
  let re;
  try { re = new RegExp(source, 'i'); } catch (_) { re = new RegExp(source.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i'); }
  const seen = new Map();  // frame name -> matches?
  let hit = 0;
  for (let s = 0; s < stacks.length; s++) {
    for (const f of stacks[s]) {
      let m = seen.get(f);
      if (m === undefined) { m = re.test(f); seen.set(f, m); }
      if (m) { hit += values[s]; break; }
    }
  }
  return total > 0 ? (100 * hit) / total : 0;
}

self.onmessage = async (e) => {
  const { id, url, query } = e.data;
  try {
    if (url) { ready = load(url); await ready; self.postMessage({ id, loaded: stacks.length }); return; }
    await ready;
    self.postMessage({ id, query, pct: share(query) });
  } catch (err) {
    self.postMessage({ id, error: String(err && err.message || err) });
  }
};
