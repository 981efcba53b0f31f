// Test profiles made on the fly, deterministic (seeded), Lua-like frames.

/** Small PRNG (mulberry32) so every run uses the same data. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A small game-loop profile; `slowPhysics` multiplies physics' weight (for compare). */
export function gameProfile(slowPhysics = 1) {
  const lines = [
    ['main;love.run;love.update;world:update;physics.step;collide', 12000 * slowPhysics],
    ['main;love.run;love.update;world:update;physics.step;integrate', 6000 * slowPhysics],
    ['main;love.run;love.update;world:update;ai.think;pathfind;heap.push', 4500],
    ['main;love.run;love.update;world:update;ai.think;pathfind', 3000],
    ['main;love.run;love.update;input.poll', 1200],
    ['main;love.run;love.draw;render.sprites;[C] love.graphics.draw', 9000],
    ['main;love.run;love.draw;render.text;string.format', 2500],
    ['main;love.run;love.draw;render.text;[C] utf8.len', 400],
    ['main;love.run;[GC] collectgarbage', 1800],
    ['main;load;config.parse;json.decode', 900],
    // narrower than 0.1 px in the whole graph: drawn only when zoomed in
    ['main;love.run;love.update;world:update;ai.think;pathfind;heap.push;tiny_helper_function', 4],
  ];
  return lines.map(([s, v]) => `${s} ${v}`).join('\n') + '\n';
}

/** Exact share (0..100) of stacks that contain a frame matching `re`, from folded text. */
export function shareOf(folded, re) {
  let hit = 0;
  let total = 0;
  for (const l of folded.split('\n')) {
    const i = l.lastIndexOf(' ');
    if (i < 0) continue;
    const v = +l.slice(i + 1);
    total += v;
    if (l.slice(0, i).split(';').some((f) => re.test(f))) hit += v;
  }
  return (100 * hit) / total;
}

/**
 * Realistic large profile: `n` distinct stacks, depth 5..60, shared prefixes,
 * Zipf-distributed counts (the shape issue 2's benchmark describes).
 */
export function bigProfile(n, seed = 42) {
  const r = rng(seed);
  const mods = ['game', 'ui', 'net', 'db', 'ai', 'gfx', 'audio', 'io', 'util', 'core'];
  const fn = [];
  for (let i = 0; i < 3000; i++) {
    const m = mods[i % mods.length];
    fn.push(i % 9 === 0 ? `[C] ${m}.native_${i}` : `${m}.fn_${i} (${m}/${m}_${i % 37}.lua:${(i * 7) % 900 + 1})`);
  }
  const out = [];
  const seen = new Set();
  const prefixes = [];
  for (let p = 0; p < 400; p++) {
    const d = 3 + Math.floor(r() * 10);
    const s = ['main'];
    for (let k = 0; k < d; k++) s.push(fn[Math.floor(r() ** 2 * 600)]);
    prefixes.push(s);
  }
  while (out.length < n) {
    const pre = prefixes[Math.floor(r() ** 1.5 * prefixes.length)];
    const depth = 5 + Math.floor(r() * 41);
    const s = pre.slice(0, Math.min(pre.length, depth));
    while (s.length < depth) s.push(fn[Math.floor(r() ** 1.3 * fn.length)]);
    const key = s.join(';');
    if (seen.has(key)) continue;
    seen.add(key);
    const count = Math.max(1, Math.round(1e5 / (out.length + 1) ** 1.1 + r() * 3));
    out.push(`${key} ${count}`);
  }
  return out.join('\n') + '\n';
}

/** A wire-format chunk (wire/include/luaflame/wire.hpp) of `stacks` [[stackArray, [values...]]]. */
export function wireChunk(seq, metrics, stacks, fromNs, untilNs) {
  const frames = new Map();
  const nodes = new Map();
  const nodeLines = [];
  const frameId = (f) => {
    if (!frames.has(f)) frames.set(f, frames.size);
    return frames.get(f);
  };
  const zero = metrics.map(() => 0);
  const vals = [];
  for (const [stack, values] of stacks) {
    let parent = '-';
    let key = '';
    for (let i = 0; i < stack.length; i++) {
      key += `;${stack[i]}`;
      if (!nodes.has(key)) {
        nodes.set(key, nodeLines.length);
        nodeLines.push([parent, frameId(stack[i])]);
        vals.push(zero.slice());
      }
      parent = nodes.get(key);
    }
    const n = nodes.get(key);
    values.forEach((v, j) => { vals[n][j] += v; });
  }
  let out = `luaflame-wire 1\nseq ${seq}\n`;
  if (fromNs) out += `from ${fromNs}\nuntil ${untilNs}\n`;
  out += `metrics ${metrics.join(' ')}\n`;
  for (const f of frames.keys()) out += `f ${f}\n`;
  nodeLines.forEach(([p, f], i) => { out += `n ${p} ${f} ${vals[i].join(' ')}\n`; });
  out += `end ${nodeLines.length}\n`;
  return out;
}

/** A small profile with recursion (rec calls itself) for the sandwich checks. */
export function recursiveProfile() {
  return [
    'main;a;rec;rec;rec;leaf 50',
    'main;a;rec;rec 7',
    'main;b;rec;leaf 30',
    'main;b;rec;other 20',
    'main;b;rec;x;rec;other 5',
    'main;c 40',
  ].join('\n') + '\n';
}

/**
 * The sandwich of `fn` computed from folded text, independently of the server:
 * total (stacks holding fn, each once), self (stacks ending in it), and the
 * direct callers (frame before its outermost call) and callees (frame after its
 * innermost call) with their values.
 */
export function sandwichOf(folded, fn) {
  const out = { total: 0, self: 0, callers: {}, callees: {} };
  for (const l of folded.split('\n')) {
    const i = l.lastIndexOf(' ');
    if (i < 0) continue;
    const v = +l.slice(i + 1);
    const fr = l.slice(0, i).split(';');
    const a = fr.indexOf(fn);
    if (a < 0) continue;
    const b = fr.lastIndexOf(fn);
    out.total += v;
    if (b === fr.length - 1) out.self += v;
    if (a > 0) out.callers[fr[a - 1]] = (out.callers[fr[a - 1]] || 0) + v;
    if (b < fr.length - 1) out.callees[fr[b + 1]] = (out.callees[fr[b + 1]] || 0) + v;
  }
  return out;
}

/** A Lua file of `n` lines: functions of 50 lines each. */
export function luaSource(n) {
  const out = [];
  for (let i = 1; i <= n; i++) {
    if (i % 50 === 1) out.push(`local function f${i}(x)`);
    else if (i % 50 === 0) out.push('end');
    else out.push(`  x = x + ${i} -- <line ${i}> & "quoted"`);
  }
  return out.join('\n') + '\n';
}

/**
 * Stacks as the collector writes them with lines = true: frames `NAME SOURCE:LINE`,
 * the leaf at its current line, callers at their line defined. Functions of app.lua
 * (`n` lines, luaSource's layout) and a few of other.lua, whose text is not shipped.
 */
export function linesProfile(n, seed = 7) {
  const r = rng(seed);
  const stacks = new Map();
  for (let k = 0; k < 6000; k++) {
    const def = Math.floor(r() * (n / 50)) * 50 + 1;
    const cur = def + 1 + Math.floor(r() ** 2 * 47);
    const s = r() < 0.05
      ? `main app.lua:0;g other.lua:10;g other.lua:${11 + Math.floor(r() * 5)}`
      : `main app.lua:0;f${def} app.lua:${def};f${def} app.lua:${cur}`;
    stacks.set(s, (stacks.get(s) || 0) + 1 + Math.floor(r() * 9));
  }
  return [...stacks].map(([s, v]) => `${s} ${v}`).join('\n') + '\n';
}

/** line -> self value of the leaf frames of `file` (frames `NAME SOURCE:LINE`), from folded text. */
export function lineHeatOf(folded, file) {
  const out = {};
  for (const l of folded.split('\n')) {
    const i = l.lastIndexOf(' ');
    if (i < 0) continue;
    const leaf = l.slice(0, i).split(';').pop();
    const m = / (\S+):(\d+)$/.exec(leaf);
    if (m && m[1] === file) out[+m[2]] = (out[+m[2]] || 0) + +l.slice(i + 1);
  }
  return out;
}
