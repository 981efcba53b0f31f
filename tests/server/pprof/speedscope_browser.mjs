// speedscope's own app (npm `speedscope`, its dist/release), served here from
// another origin, opens a luaflame run through #profileURL= in headless
// Chromium: only CORS lets its fetch read the run. Exits 0 when the profile
// was fetched and speedscope shows it (its document title names the profile).
//
//   node speedscope_browser.mjs SPEEDSCOPE_RELEASE_DIR PROFILE_URL
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { launchBrowser } from '../../browser/harness.mjs';

const [dir, profileUrl] = process.argv.slice(2);
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.png': 'image/png', '.woff2': 'font/woff2', '.ico': 'image/x-icon' };
const server = http.createServer((req, res) => {
  const file = path.join(dir, decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html');
  if (!file.startsWith(dir) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
// 127.0.0.1 and localhost are different origins: the app's page is on "localhost".
const appUrl = `http://localhost:${server.address().port}/index.html#profileURL=${encodeURIComponent(profileUrl)}`;

const browser = await launchBrowser(process.env.CHROMIUM || '/usr/bin/chromium');
let status = 1;
try {
  const page = await browser.context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  let fetched = null;
  page.on('response', (r) => { if (r.url() === profileUrl) fetched = { status: r.status(), acao: r.headers()['access-control-allow-origin'] }; });
  await page.goto(appUrl);
  await page.waitForFunction(() => /speedy|run/i.test(document.title) && !/^speedscope$/.test(document.title), null, { timeout: 30000 })
    .catch(() => {});
  const title = await page.title();
  console.log(JSON.stringify({ appUrl, title, fetched, errors: errors.slice(0, 5) }));
  if (fetched && fetched.status === 200 && fetched.acao && title !== 'speedscope' && errors.length === 0) status = 0;
} finally {
  await browser.close();
  server.close();
}
process.exit(status);
