// Upload folded stacks: drop a file or paste text, name it, tag it. A bad
// line comes back from the server as {"error", "line", "reason"}; the page
// shows it and, for pasted text, selects that line.
import { api, parseTags } from './api.js';
import { el, $, initHeader, errorBox } from './ui.js';

const app = $('#app');
let file = null;

function sizeText(n) {
  return n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;
}

function selectLine(ta, line) {
  const lines = ta.value.split('\n');
  if (!line || line > lines.length) return;
  let start = 0;
  for (let i = 0; i < line - 1; i++) start += lines[i].length + 1;
  ta.focus();
  ta.setSelectionRange(start, start + lines[line - 1].length);
  const lh = parseFloat(getComputedStyle(ta).lineHeight) || 16;
  ta.scrollTop = Math.max(0, (line - 3) * lh);
}

function main() {
  initHeader('upload');
  const picker = el('input#file', { type: 'file', accept: '.folded,.txt,.collapsed,text/plain', hidden: true });
  const fileLabel = el('div.file#file-name');
  const drop = el('div.drop#drop', { tabindex: 0, role: 'button', 'aria-label': 'Choose or drop a folded file' },
    el('strong', 'Drop a .folded file here'), el('div', 'or click to choose one'), fileLabel);
  const ta = el('textarea#folded', { placeholder: 'main;load_config;parse 12\nmain;run;update;physics 40\nmain;run;render 25', spellcheck: 'false', 'aria-label': 'Folded stacks' });
  const name = el('input#name', { type: 'text', placeholder: 'e.g. myapp', required: true });
  const tags = el('input#tags', { type: 'text', placeholder: 'e.g. branch=main commit=abc123' });
  const units = el('select#units',
    el('option', { value: 'samples' }, 'samples'), el('option', { value: 'ns' }, 'time (nanoseconds)'),
    el('option', { value: 'calls' }, 'calls'), el('option', { value: 'bytes' }, 'bytes (allocated)'));
  // Only for a server started with --token; kept for this browser tab.
  const token = el('input#token', { type: 'password', placeholder: 'only if the server has --token', autocomplete: 'off', value: sessionStorage.getItem('luaflame-token') || '' });
  const submit = el('button.primary#submit', { type: 'submit' }, 'Upload');
  const result = el('div#result', { 'aria-live': 'polite' });

  const setFile = (f) => {
    file = f;
    fileLabel.textContent = f ? `${f.name} · ${sizeText(f.size)}` : '';
    if (f && !name.value) name.value = f.name.replace(/\.(folded|txt|collapsed)$/i, '');
    if (f) ta.value = '';
  };
  picker.addEventListener('change', () => setFile(picker.files[0] || null));
  drop.addEventListener('click', () => picker.click());
  drop.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); picker.click(); } });
  for (const ev of ['dragenter', 'dragover']) drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
  for (const ev of ['dragleave', 'drop']) drop.addEventListener(ev, () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); if (e.dataTransfer.files[0]) setFile(e.dataTransfer.files[0]); });
  // Dropping anywhere on the page works too, and never navigates away.
  document.addEventListener('dragover', (e) => e.preventDefault());
  document.addEventListener('drop', (e) => { e.preventDefault(); if (e.dataTransfer.files[0]) setFile(e.dataTransfer.files[0]); });
  ta.addEventListener('input', () => { if (ta.value && file) setFile(null); });

  const form = el('form.panel.upload-form#upload-form',
    el('h2', 'Details'),
    el('label.field', 'Name', name),
    el('label.field', 'Tags (key=value, separated by spaces or commas)', tags),
    el('label.field', 'Counts are', units),
    el('label.field', 'Token', token),
    submit,
    result);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    result.replaceChildren();
    const body = file || ta.value;
    if (!name.value.trim()) { result.replaceChildren(errorBox('Give the run a name', 'A name groups runs of the same program, e.g. myapp.')); name.focus(); return; }
    if (!file && !ta.value.trim()) { result.replaceChildren(errorBox('Nothing to upload', 'Drop a .folded file or paste folded stacks first.')); return; }
    let tagList;
    try { tagList = parseTags(tags.value); } catch (err) { result.replaceChildren(errorBox('Check the tags', err)); tags.focus(); return; }
    submit.disabled = true;
    submit.textContent = 'Uploading…';
    try {
      const tok = token.value.trim();
      if (tok) sessionStorage.setItem('luaflame-token', tok); else sessionStorage.removeItem('luaflame-token');
      const r = await api.upload({ name: name.value.trim(), tag: tagList, units: units.value }, body, tok);
      result.replaceChildren(el('div.success#upload-ok', 'Uploaded. ', el('a', { href: `/runs/${r.id}` }, `Open run #${r.id} →`)));
      setTimeout(() => { location.href = `/runs/${r.id}`; }, 600);
    } catch (err) {
      const b = err.body || {};
      const where = b.line ? `Line ${b.line}${b.reason ? ': ' + b.reason : ''}` : null;
      const hint = where ? `${where}. Nothing was stored; fix the line and upload again.`
        : err.status === 401 ? 'This server asks for a token (--token): fill in the Token field.'
          : err.status === 413 ? 'The body is over the server\'s --max-body limit.' : 'Nothing was stored.';
      result.replaceChildren(errorBox('The server refused this profile', err, hint));
      if (b.line && !file) selectLine(ta, b.line);
    } finally {
      submit.disabled = false;
      submit.textContent = 'Upload';
    }
  });

  app.replaceChildren(
    el('div.page-head', el('h1', 'Upload a profile'), el('span.sub', 'Folded stacks: one "frame;frame;frame COUNT" per line, as flamegraph.pl reads them')),
    el('div.upload-grid',
      el('div', drop, picker, el('div.or', 'or paste'), ta),
      form));
  app.dataset.loaded = '1';
}

main();
