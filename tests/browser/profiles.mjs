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
