// Calls to the luaflame-server HTTP API (docs/api.md). Every failure becomes
// an ApiError carrying the server's message, so pages can show it as is.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body || {};
  }
}

/** Builds "/path?k=v&..." skipping empty values; arrays repeat the key. */
export function url(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else q.append(k, v === true ? '1' : String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

async function errorFrom(res) {
  let body = null;
  let text = '';
  try {
    text = await res.text();
    body = JSON.parse(text);
  } catch (_) { /* not JSON: keep the text */ }
  const msg = (body && body.error) || text.trim().slice(0, 300) || `${res.status} ${res.statusText}`;
  return new ApiError(res.status, msg, body);
}

async function request(path, opts = {}, okStatuses = []) {
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'Cannot reach the luaflame server. Is it still running?');
  }
  if (!res.ok && !okStatuses.includes(res.status)) throw await errorFrom(res);
  return res;
}

export async function getJSON(path, opts = {}, okStatuses = []) {
  const res = await request(path, opts, okStatuses);
  return res.json();
}

export async function getText(path, opts = {}) {
  const res = await request(path, opts);
  return res.text();
}

export async function postBody(path, body, headers = {}) {
  const res = await request(path, { method: 'POST', body, headers });
  return res.json();
}

export const api = {
  runs: (p) => getJSON(url('/api/runs', p)),
  run: (id, p) => getJSON(url(`/api/runs/${id}`, p)),
  functions: (id, p, opts) => getJSON(url(`/api/runs/${id}/functions`, p), opts),
  timeline: (id, p, opts) => getJSON(url(`/api/runs/${id}/timeline`, p), opts),
  svgURL: (id, p) => url(`/api/runs/${id}/flamegraph.svg`, p),
  /** The same graph's frames as data (engine/include/luaflame/frames.hpp), which the pages draw. */
  framesURL: (id, p) => url(`/api/runs/${id}/flamegraph.json`, p),
  foldedURL: (id, p) => url(`/api/runs/${id}/profile.folded`, p),
  speedscopeURL: (id, p) => url(`/api/runs/${id}/speedscope.json`, p),
  diffSvgURL: (p) => url('/api/diff.svg', p),
  diffFramesURL: (p) => url('/api/diff/flamegraph.json', p),
  sandwich: (id, p, opts) => getJSON(url(`/api/runs/${id}/sandwich`, p), opts),
  sandwichFramesURL: (id, p) => url(`/api/runs/${id}/sandwich.json`, p),
  source: (id, p, opts) => getJSON(url(`/api/runs/${id}/source`, p), opts),
  sources: (id) => getJSON(`/api/runs/${id}/sources`),
  // 412 means "a regression over the threshold": still a full answer.
  diff: (p, opts) => getJSON(url('/api/diff', p), opts, [412]),
  upload: (p, body, token) => postBody(url('/api/runs', p), body,
    token ? { 'Content-Type': 'text/plain', Authorization: `Bearer ${token}` } : { 'Content-Type': 'text/plain' }),
};

/**
 * Splits "k=v, k2=v2" (commas or spaces) into ["k=v", "k2=v2"]. A value may
 * hold spaces ("lua=Lua 5.3.6"): only a comma, or spaces before the next
 * key= (a tag key's characters, wire.hpp), separate two tags.
 */
export function splitTags(text) {
  return (text || '').trim().split(/\s*,\s*|\s+(?=[A-Za-z0-9_\-./]+=)/).map((t) => t.trim()).filter(Boolean);
}

/** Parses "k=v, k2=v2" (commas or spaces) into ["k=v", "k2=v2"]; throws on a bad one. */
export function parseTags(text) {
  const out = [];
  for (const part of splitTags(text)) {
    if (!part) continue;
    const i = part.indexOf('=');
    if (i <= 0) throw new Error(`Tag "${part}" should look like key=value`);
    out.push(part);
  }
  return out;
}
