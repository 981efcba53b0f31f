// Harness of the browser tests: starts the real luaflame-server on a loopback
// port of its choosing with a temporary store, launches Debian's chromium through
// playwright-core, runs named checks, and always cleans up.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** --key value / --flag arguments, with environment fallbacks. */
export function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([\w-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) continue;
    if (m[2] !== undefined) a[m[1]] = m[2];
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) a[m[1]] = argv[++i];
    else a[m[1]] = true;
  }
  return a;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts luaflame-server on 127.0.0.1 port 0 (the system chooses a free one)
 * and reads the port from its --port-file: a /healthz answer can only come
 * from this server, never from another test's on a port picked in advance.
 * Resolves once /healthz answers (15 s at most).
 */
export async function startServer(bin, webDir, extraArgs = []) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-web-data-'));
  const portFile = path.join(dataDir, 'port');
  const args = ['--listen', '127.0.0.1:0', '--port-file', portFile, '--data', dataDir, '--web', webDir,
    '--log-level', 'warn', ...extraArgs];
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  let exited = false;
  proc.on('exit', () => { exited = true; });
  const t0 = Date.now();
  let port = 0;
  while (!exited && Date.now() - t0 < 15000) {
    if (!port && fs.existsSync(portFile)) port = Number(fs.readFileSync(portFile, 'utf8').trim()) || 0;
    if (port) {
      const base = `http://127.0.0.1:${port}`;
      try {
        const r = await fetch(`${base}/healthz`);
        if (r.ok) return { base, port, proc, dataDir, log: () => log, stop: () => stopServer(proc, dataDir) };
      } catch (_) { /* not up yet */ }
    }
    await sleep(50);
  }
  proc.kill('SIGKILL');
  fs.rmSync(dataDir, { recursive: true, force: true });
  throw new Error(`luaflame-server did not start (${bin}):\n${log}`);
}

async function stopServer(proc, dataDir) {
  if (proc.exitCode === null && proc.signalCode === null) {
    proc.kill('SIGTERM');
    const t0 = Date.now();
    while (proc.exitCode === null && proc.signalCode === null && Date.now() - t0 < 3000) await sleep(50);
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
}

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Debian's chromium with a fresh profile folder. */
export async function launchBrowser(executablePath) {
  let pw;
  try {
    pw = await import('playwright-core');
  } catch (e) {
    throw new Error('playwright-core is not installed: run `npm install` in tests/browser (scripts/install-deps.sh --test does)');
  }
  if (!fs.existsSync(executablePath)) throw new Error(`${executablePath} not found: apt-get install chromium (scripts/install-deps.sh --test)`);
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lf-chromium-'));
  const context = await pw.chromium.launchPersistentContext(userDir, {
    executablePath, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1440, height: 900 },
    deviceScaleFactor: 1, locale: 'en-US', timezoneId: 'UTC',
  });
  return {
    context,
    close: async () => {
      try { await context.close(); } finally { fs.rmSync(userDir, { recursive: true, force: true }); }
    },
  };
}

/** Runs checks in order; a failing check is reported and the next one runs. */
export class Runner {
  constructor() {
    this.results = [];
    this.figures = {};
  }

  async check(name, fn) {
    if (this.only && !this.only.test(name)) return;  // --only REGEX: a subset, while working on it
    this.current = name;
    const t0 = Date.now();
    try {
      await fn();
      this.results.push({ name, ok: true });
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      this.results.push({ name, ok: false, error: e });
      console.log(`FAIL ${name} (${Date.now() - t0} ms)\n     ${String((e && e.stack) || e).split('\n').slice(0, 6).join('\n     ')}`);
    }
  }

  figure(key, value, unit = 'ms') {
    this.figures[key] = { value: typeof value === 'number' ? Math.round(value * 10) / 10 : value, unit };
  }

  get passed() { return this.results.filter((r) => r.ok).length; }
  get failed() { return this.results.filter((r) => !r.ok).length; }
}

/** Latency goals are for the normal build; the sanitizer job (.ci/sanitizers.sh) sets
 *  LUAFLAME_TEST_TIME_FACTOR=5 (the server is instrumented, two ctest jobs share the
 *  machine), and a goal is multiplied by it when above 1, as tests/hostile/common.cpp does. */
export const timeFactor = (() => {
  const f = parseInt(process.env.LUAFLAME_TEST_TIME_FACTOR || '', 10);
  return f > 1 ? f : 1;
})();
export const goalMs = (ms) => ms * timeFactor;

/** The middle of `xs` (the mean of the two middle ones for an even count). */
export function median(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

export function assertEq(got, want, msg) {
  if (got !== want) throw new Error(`assertion failed: ${msg}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
