#!/usr/bin/env node
// The run page's load, two versions of web/ side by side: a run of 10,000 stored chunks
// (store_bench long) and a 175,000-stack run (tests/browser's bigProfile), each opened in
// headless chromium in interleaved rounds, one server per web/ on copies of the same data.
//   node bench/web/page_load.mjs --build BUILD --before WEB_DIR [--after WEB_DIR]
//        [--rounds 7] [--chunks 10000] [--stacks 175000] [--chromium /usr/bin/chromium]
// BUILD holds server/luaflame-server and bench/server/store_bench; --after defaults to web/.
// Prints, per page and version, the medians over the rounds after the first (the server's
// caches warm) of: open to graph drawn, the graph's fetch, its read + draw (the page's own
// __lfPerf record), the bytes fetched; and the first round (the server renders) apart.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, launchBrowser, median } from '../../tests/browser/harness.mjs';
import { bigProfile } from '../../tests/browser/profiles.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const build = path.resolve(args.build || 'build');
const webs = { before: path.resolve(args.before), after: path.resolve(args.after || path.join(here, '../../web')) };
const rounds = +(args.rounds || 7);
const chunks = +(args.chunks || 10000);
const stacks = +(args.stacks || 175000);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A server on `data` (kept), retention and the stale pass off (the chunks are 31 days old). */
async function serve(data, web) {
  const portFile = path.join(data, 'port');
  fs.rmSync(portFile, { force: true });
  const proc = spawn(path.join(build, 'server/luaflame-server'), ['--listen', '127.0.0.1:0', '--port-file', portFile,
    '--data', data, '--web', web, '--log-level', 'warn', '--max-body', '512M', '--stale-minutes', '0', '--retention-interval', '86400',
    '--resolutions', '1s:0,10s:0,1m:0,10m:0,1h:0,1d:0'], { stdio: 'inherit' });
  for (let i = 0; i < 300; i++) {
    const port = fs.existsSync(portFile) ? +fs.readFileSync(portFile, 'utf8') : 0;
    if (port) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return { base: `http://127.0.0.1:${port}`, proc };
      } catch (_) { /* not up yet */ }
    }
    await sleep(50);
  }
  proc.kill('SIGKILL');
  throw new Error('luaflame-server did not start');
}

async function stop(s) {
  s.proc.kill('SIGTERM');
  await new Promise((r) => s.proc.once('exit', r));
}

/** One store with both runs: ids {long, big}. */
async function seed(dir) {
  const out = execFileSync(path.join(build, 'bench/server/store_bench'),
    ['--store', dir, 'long', '--chunks', String(chunks), '--stacks', '500'], { encoding: 'utf8' });
  process.stdout.write(out);
  const s = await serve(dir, webs.after);
  try {
    const runs = await (await fetch(`${s.base}/api/runs?name=long`)).json();
    const long = (runs.runs || runs)[0].id;
    const file = path.join(root, 'big.folded');
    fs.writeFileSync(file, bigProfile(stacks));
    const res = execFileSync('curl', ['-sS', '--fail-with-body', '-H', 'Content-Type: text/plain', '--data-binary', `@${file}`,
      `${s.base}/api/runs?name=big&tag=stacks%3D${stacks}`], { encoding: 'utf8' });
    fs.rmSync(file);
    return { long, big: JSON.parse(res).id };
  } finally {
    await stop(s);
  }
}

/** Opens run `id` on `base` in a fresh page: ms to the graph drawn, and the page's load record. */
async function open(context, base, id) {
  const page = await context.newPage();
  try {
    const t0 = Date.now();
    await page.goto(`${base}/runs/${id}`);
    await page.waitForSelector('#flame[data-state=ready]', { timeout: 120000 });
    const ms = Date.now() - t0;
    const rec = await page.evaluate(() => window.__lfPerf.loads[0]);
    return { ms, ...rec };
  } finally {
    await page.close();
  }
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-page-load-'));
const servers = {};
let browser = null;
try {
  const ids = await seed(path.join(root, 'before'));
  fs.cpSync(path.join(root, 'before'), path.join(root, 'after'), { recursive: true });
  for (const v of Object.keys(webs)) servers[v] = await serve(path.join(root, v), webs[v]);
  browser = await launchBrowser(args.chromium || '/usr/bin/chromium');
  const seen = {};
  for (let r = 0; r < rounds; r++) {
    for (const [what, id] of Object.entries(ids)) {
      const order = r % 2 ? ['after', 'before'] : ['before', 'after'];
      for (const v of order) {
        const rec = await open(browser.context, servers[v].base, id);
        (seen[`${what} ${v}`] ||= []).push(rec);
        console.log(`round ${r} ${what} ${v}: drawn ${rec.ms} ms, fetch ${rec.fetchMs.toFixed(0)} ms, read+draw ${rec.buildMs.toFixed(0)} ms, ${rec.frames} frames, ${rec.bytes} B`);
      }
    }
  }
  console.log(`\nmedians of rounds 2-${rounds} (server caches warm); round 1 (server renders) in brackets`);
  console.log('page | version | open to drawn ms | fetch ms | read + draw ms | frames | bytes');
  for (const [key, recs] of Object.entries(seen)) {
    const warm = recs.slice(1);
    const m = (f) => median(warm.map(f)).toFixed(0);
    console.log(`${key.replace(' ', ' | ')} | ${m((x) => x.ms)} (${recs[0].ms}) | ${m((x) => x.fetchMs)} (${recs[0].fetchMs.toFixed(0)}) | ` +
      `${m((x) => x.buildMs)} (${recs[0].buildMs.toFixed(0)}) | ${recs[0].frames} | ${recs[0].bytes}`);
  }
} finally {
  if (browser) await browser.close();
  for (const s of Object.values(servers)) await stop(s);
  fs.rmSync(root, { recursive: true, force: true });
}
