// Small DOM helpers shared by the pages. Untrusted text (frame names, run
// names, tags, server messages) only ever goes in through textContent.

/** el('div.cls#id', {attr: v, onclick: fn}, child, 'text', ...) */
export function el(spec, attrs, ...children) {
  const m = /^([a-z0-9]+)?((?:[.#][\w-]+)*)$/i.exec(spec);
  const node = document.createElement((m && m[1]) || 'div');
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === '.') node.classList.add(part.slice(1));
      else node.id = part.slice(1);
    }
  }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export const $ = (sel, root = document) => root.querySelector(sel);

/** A short message at the bottom of the window. */
export function toast(text, kind = '') {
  let box = $('#lf-toasts');
  if (!box) {
    box = el('div#lf-toasts', { role: 'status', 'aria-live': 'polite' });
    document.body.append(box);
  }
  const t = el(`div.toast${kind ? '.' + kind : ''}`, text);
  box.append(t);
  setTimeout(() => t.classList.add('out'), 2200);
  setTimeout(() => t.remove(), 2700);
}

/** Copies text; falls back to a hidden textarea where the clipboard API is refused. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    const ta = el('textarea', { style: 'position:fixed;left:-9999px;top:0' });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    ta.remove();
    return ok;
  }
}

/** A readable error panel: what failed, the server's words, what to try. */
export function errorBox(title, err, hint) {
  return el('div.errorbox', { role: 'alert' },
    el('strong', title),
    el('p.msg', (err && err.message) || String(err || '')),
    hint ? el('p.hint', hint) : null);
}

/** A block of shell text with a copy button. */
export function codeBlock(text) {
  const btn = el('button.copy', { type: 'button', title: 'Copy to clipboard' }, 'Copy');
  btn.addEventListener('click', async () => {
    toast((await copyText(text)) ? 'Copied to clipboard' : 'Copy failed: select the text instead');
  });
  return el('div.code', el('pre', el('code', text)), btn);
}

/** How to get runs in here: used by the empty states. */
export function gettingStarted(origin = location.origin) {
  return el('div.empty',
    el('div.empty-icon', { 'aria-hidden': 'true' }, flameIcon(40)),
    el('h2', 'No profiles yet'),
    el('p', 'Profile a Lua script and stream it here while it runs:'),
    codeBlock(`luaflame run --server ${origin} script.lua`),
    el('p', 'or upload folded stacks (from flamegraph.pl tools, CI, other profilers) with curl:'),
    codeBlock(`curl --fail-with-body --data-binary @out.folded \\\n  '${origin}/api/runs?name=myapp&tag=branch=main'`),
    el('p', 'or ', el('a', { href: '/upload' }, 'drop a .folded file on the upload page'), '.'));
}

export function flameIcon(size = 22) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', size);
  svg.setAttribute('height', size);
  const bars = [[2, 18, 20, '#c2410c'], [4, 13, 10, '#ea580c'], [15, 13, 6, '#f59e0b'], [5, 8, 6, '#f59e0b'], [16, 8, 3, '#fbbf24'], [6, 3, 3, '#fcd34d']];
  for (const [x, y, w, c] of bars) {
    const r = document.createElementNS(ns, 'rect');
    r.setAttribute('x', x); r.setAttribute('y', y); r.setAttribute('width', w);
    r.setAttribute('height', 4); r.setAttribute('rx', 1); r.setAttribute('fill', c);
    svg.append(r);
  }
  return svg;
}

/** Fills the shared header (brand + navigation) and marks the current page. */
export function initHeader(active) {
  const h = $('header.top');
  if (!h) return;
  const brand = el('a.brand', { href: '/' }, flameIcon(), el('span', 'luaflame'));
  const nav = el('nav',
    el('a', { href: '/', 'aria-current': active === 'runs' ? 'page' : null }, 'Runs'),
    el('a', { href: '/compare', 'aria-current': active === 'compare' ? 'page' : null }, 'Compare'),
    el('a', { href: '/upload', 'aria-current': active === 'upload' ? 'page' : null }, 'Upload'));
  h.replaceChildren(brand, nav, el('span.spacer'), el('span.kbd-hint', el('kbd', '/'), ' search'));
}

/** Debounce for inputs that hit the server. */
export function debounce(fn, ms) {
  let t = 0;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

/** A tag chip "k=v". */
export function tagChip(k, v) {
  return el('span.tag', el('span.k', k), el('span.v', v));
}
