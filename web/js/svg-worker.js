// Reads a flamegraph.pl-shaped SVG off the main thread: one record per frame
// (<g> holding <title>, <rect>, <text>) with its geometry, fill, label and the
// parsed title. The page then builds clean frames from these records in
// chunks, so a graph of thousands of frames never blocks it for long. A file
// this reader does not understand comes back with no frames and the page
// parses it with DOMParser instead.
import { splitTitle } from './flame.js';

const FRAME = /<g\b[^>]*>\s*<title>([^<]*)<\/title>\s*<rect\b([^>]*?)\/?>(?:\s*<\/rect>)?\s*(?:<text\b([^>]*?)(?:\/>|>([^<]*)<\/text>)\s*)?<\/g>/g;
const ATTR = /([\w:-]+)\s*=\s*"([^"]*)"/g;

function attrs(s) {
  const out = {};
  if (!s) return out;
  for (const m of s.matchAll(ATTR)) out[m[1]] = m[2];
  return out;
}

function unescape(s) {
  if (s.indexOf('&') < 0) return s;
  return s.replace(/&(#x[0-9a-f]+|#\d+|lt|gt|amp|quot|apos);/gi, (all, e) => {
    if (e[0] === '#') {
      const cp = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      try { return String.fromCodePoint(cp); } catch (_) { return all; }
    }
    return { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" }[e.toLowerCase()];
  });
}

export function readFrames(text) {
  const head = /<svg\b[^>]*>/.exec(text);
  const svg = attrs(head ? head[0] : '');
  const vb = (svg.viewBox || '').split(/[\s,]+/).map(Number);
  const width = vb.length === 4 && vb[2] > 0 ? vb[2] : parseFloat(svg.width) || 1200;
  const frames = [];
  for (const m of text.matchAll(FRAME)) {
    const r = attrs(m[2]);
    const t = attrs(m[3]);
    const title = unescape(m[1]);
    // The name only; the rest of the title is parsed by the page when shown
    // (half the objects to copy to the page for each graph).
    frames.push({
      x: parseFloat(r.x) || 0, y: parseFloat(r.y) || 0, w: parseFloat(r.width) || 0, h: parseFloat(r.height) || 0,
      fill: r.fill || '', tx: t.x || '', ty: t.y || '', label: m[4] === undefined ? '' : unescape(m[4]),
      name: splitTitle(title).name, text: title,
    });
  }
  // Every <title> must belong to a frame read here; else this reader missed
  // something and the page falls back to DOMParser (no frames returned).
  const titles = (text.match(/<title>/g) || []).length;
  return { width, frames: titles === frames.length ? frames : [] };
}

if (typeof WorkerGlobalScope !== 'undefined') self.onmessage = (e) => {
  const { id, text } = e.data;
  try {
    self.postMessage({ id, ...readFrames(text) });
  } catch (err) {
    self.postMessage({ id, error: String(err) });
  }
};
