// Folded stacks from `go tool pprof -raw` output (stdin): one line per
// distinct stack, function names root first, then one value per sample type:
// "a;b;c V1 V2 ...", sorted. With --folded, reads luaflame folded text
// instead ("FRAME;FRAME COUNT"), keeps each frame's name (up to its first
// space) and prints the same form, so the two can be compared with diff.
import fs from 'node:fs';

const text = fs.readFileSync(0, 'utf8');
const out = new Map();
const add = (stack, values) => {
  const cur = out.get(stack);
  out.set(stack, cur ? cur.map((v, i) => v + values[i]) : values);
};
if (process.argv[2] === '--folded') {
  for (const line of text.split('\n')) {
    const m = line.match(/^(.*) (\d+)$/);
    if (m) add(m[1].split(';').map((f) => f.split(' ')[0]).join(';'), [Number(m[2])]);
  }
} else {
  let section = '';
  const samples = [];
  const locs = new Map();
  let cur = null;
  for (const line of text.split('\n')) {
    if (/^(Samples|Locations|Mappings):?/.test(line)) { section = line.replace(/:.*/, ''); continue; }
    if (section === 'Samples') {
      const m = line.match(/^\s*([\d\s]+):\s*([\d\s]*)$/);
      if (m) samples.push({ values: m[1].trim().split(/\s+/).map(Number), locs: m[2].trim().split(/\s+/).filter(Boolean) });
    } else if (section === 'Locations') {
      // "ID: ADDRESS M=MAPPING NAME FILE:LINE s=START"; NAME may hold spaces or be blank.
      const m = line.match(/^\s*(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(.*) \S*:\d+ s=\d+$/);
      if (m) { cur = [m[2].split(' ')[0]]; locs.set(m[1], cur); continue; }
      const c = line.match(/^\s+(.*) \S*:\d+ s=\d+$/);  // an inlined line of the same location
      if (c && cur) cur.push(c[1].trim().split(' ')[0]);
    }
  }
  for (const s of samples) {
    const frames = [];
    for (const id of [...s.locs].reverse()) frames.push(...[...locs.get(id)].reverse());
    add(frames.join(';'), s.values);
  }
}
const lines = [...out].map(([k, v]) => `${k} ${v.join(' ')}`).sort();
process.stdout.write(lines.join('\n') + (lines.length ? '\n' : ''));
