#!/usr/bin/env bash
# Integration tests of `luaflame svg` and `luaflame diff`, one case per call:
#   cli_test.sh CASE /path/to/luaflame /path/to/tests/data
# Each case fails (non-zero) with a message saying what went wrong.
set -uo pipefail
case_name=$1 lf=$2 data=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL [$case_name]: $*" >&2; exit 1; }
# Well-formed XML: xmllint when installed (libxml2-utils), else python3's parser.
wellformed() {
  if command -v xmllint >/dev/null 2>&1; then xmllint --noout "$1" || fail "xmllint rejects $1"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$1" || fail "not well-formed: $1"
  else fail "no XML parser (install libxml2-utils)"; fi
}

# The CLI's SVG without the embedded script, as golden files store it
# (tests/engine/golden.hpp's strip_script; the script is tests/data/svg/script.js).
strip_script() {
  awk 'state == 0 && /^<script type="text\/ecmascript"><!\[CDATA\[$/ { state = 1 }
       state == 1 && /^var FS=/ { print; print "/* the script: tests/data/svg/script.js */"; state = 2; next }
       state == 2 && /^\]\]><\/script>/ { state = 3 }
       state != 2 { print }' "$1"
}
# same_svg OUT GOLDEN: the CLI's SVG is the golden one (script stripped)
same_svg() { strip_script "$1" | cmp -s - "$2"; }

case $case_name in
empty_input)
  "$lf" svg </dev/null >"$tmp/out.svg" 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "empty input: exit $rc, want 2"
  grep -q "No valid input" "$tmp/out.svg" || fail "the SVG does not say there was no input"
  grep -q "No stack counts" "$tmp/err" || fail "no message on stderr"
  wellformed "$tmp/out.svg"
  printf 'only garbage\n\n' | "$lf" svg >"$tmp/out2.svg" 2>/dev/null; rc=$?
  [ $rc -eq 2 ] || fail "input without counts: exit $rc, want 2"
  ;;
stdin_equals_file)
  "$lf" svg "$data/svg/lua.folded" >"$tmp/a.svg" || fail "file input failed"
  "$lf" svg <"$data/svg/lua.folded" >"$tmp/b.svg" || fail "stdin input failed"
  "$lf" svg - <"$data/svg/lua.folded" >"$tmp/c.svg" || fail "'-' input failed"
  cmp -s "$tmp/a.svg" "$tmp/b.svg" || fail "stdin and file give different SVGs"
  cmp -s "$tmp/a.svg" "$tmp/c.svg" || fail "'-' and file give different SVGs"
  same_svg "$tmp/a.svg" "$data/svg/lua.svg" || fail "CLI output differs from the engine's golden file"
  # two files are read as one input, as flamegraph.pl reads them
  head -3 "$data/svg/lua.folded" >"$tmp/p1"; tail -n +4 "$data/svg/lua.folded" >"$tmp/p2"
  "$lf" svg "$tmp/p1" "$tmp/p2" >"$tmp/d.svg" || fail "two files failed"
  cmp -s "$tmp/a.svg" "$tmp/d.svg" || fail "two files differ from one"
  "$lf" svg -o "$tmp/e.svg" "$data/svg/lua.folded" || fail "-o failed"
  cmp -s "$tmp/a.svg" "$tmp/e.svg" || fail "-o output differs"
  ;;
ignored_lines)
  # "a;;c" and perf's unresolved symbol "write0;  3" are drawn, as flamegraph.pl draws them.
  printf 'a;b 3\nbroken\na;;c 1\nd 2\nwrite0;  3\n' | "$lf" svg >"$tmp/out.svg" 2>"$tmp/err"; rc=$?
  [ $rc -eq 0 ] || fail "lenient mode: exit $rc"
  grep -q "Ignored 1 line with invalid format" "$tmp/err" || fail "no ignored count: $(cat "$tmp/err")"
  grep -q "stdin:2: no count" "$tmp/err" || fail "no reason for line 2"
  grep -q '<title>all (9 samples, 100%)</title>' "$tmp/out.svg" || fail "wrong total"
  grep -q '<title> (1 samples, 11.11%)</title>' "$tmp/out.svg" || fail "empty frame not drawn"
  grep -q '<title>  (3 samples, 33.33%)</title>' "$tmp/out.svg" || fail "blank frame not drawn"
  ;;
strict_rejects)
  printf 'a;b 3\nbroken\na;\001 1\nd -2\n' >"$tmp/in.folded"
  "$lf" svg --strict "$tmp/in.folded" >"$tmp/out.svg" 2>"$tmp/err"; rc=$?
  [ $rc -eq 3 ] || fail "strict: exit $rc, want 3"
  grep -q "in.folded:2: no count" "$tmp/err" || fail "line 2 not reported"
  grep -q "in.folded:3: control character" "$tmp/err" || fail "line 3 not reported"
  grep -q "in.folded:4: negative count" "$tmp/err" || fail "line 4 not reported"
  [ ! -s "$tmp/out.svg" ] || fail "strict mode wrote an SVG from bad input"
  # Strict mode refuses empty and blank frames, by name.
  printf 'a;;c 1\nwrite0;  3\na;b; 1\n 2\n' >"$tmp/blank.folded"
  "$lf" svg --strict "$tmp/blank.folded" >"$tmp/out.svg" 2>"$tmp/err"; rc=$?
  [ $rc -eq 3 ] || fail "strict blank: exit $rc, want 3"
  grep -q "blank.folded:1: empty frame (frame 2)" "$tmp/err" || fail "empty frame not named: $(cat "$tmp/err")"
  grep -q "blank.folded:2: blank frame (frame 2)" "$tmp/err" || fail "blank frame not named"
  grep -q "blank.folded:3: empty frame (frame 3)" "$tmp/err" || fail "trailing empty frame not named"
  grep -q "blank.folded:4: empty stack" "$tmp/err" || fail "empty stack not named"
  ;;
options)
  f=$data/svg/simple.folded
  "$lf" svg --title "My <T>" --subtitle Sub --width 800 --height 20 --fontsize 10 --countname calls \
     --nametype Fn: --colors blue --hash --inverted --minwidth 2% --notes hi --total 20 --factor 2 \
     "$f" >"$tmp/o.svg" || fail "all options: exit $?"
  grep -q 'width="800"' "$tmp/o.svg" || fail "--width"
  grep -q '>My &lt;T&gt;</text>' "$tmp/o.svg" || fail "--title"
  grep -q '>Sub</text>' "$tmp/o.svg" || fail "--subtitle"
  grep -q 'data-nametype="Fn:"' "$tmp/o.svg" || fail "--nametype"
  grep -q '<title>f (8 calls, 20.00%)</title>' "$tmp/o.svg" || fail "--countname/--factor/--total: $(grep -o '<title>f [^<]*' "$tmp/o.svg")"
  grep -q '<!-- NOTES: hi -->' "$tmp/o.svg" || fail "--notes"
  "$lf" svg --title=Eq -width=900 "$f" >"$tmp/eq.svg"
  grep -q '>Eq</text>' "$tmp/eq.svg" && grep -q 'width="900"' "$tmp/eq.svg" || fail "--opt=value / -opt forms"
  "$lf" svg --reverse "$f" >"$tmp/rev.svg" || fail "--reverse: exit $?"
  grep -q '<title>c (1 samples' "$tmp/rev.svg" || fail "--reverse"
  [ "$(grep -c '<title>a (' "$tmp/rev.svg")" -eq 3 ] || fail "--reverse: a should be a leaf under c;b, d;b and e"
  "$lf" svg --flamechart "$f" >"$tmp/fc.svg" || fail "--flamechart"
  "$lf" svg --negate --colors mem "$f" >/dev/null || fail "--negate"
  for p in hot mem io red green blue aqua yellow purple orange lua; do
    "$lf" svg --colors $p "$f" >/dev/null || fail "--colors $p"
  done
  "$lf" svg --unit ns "$f" >/dev/null || fail "--unit ns"
  ;;
bad_usage)
  # bad usage exits 2 in every subcommand (was 1 in svg and diff)
  f=$data/svg/simple.folded
  while IFS='|' read -r what args; do
    eval "set -- $args"
    "$lf" "$@" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, want 2"
    grep -q -- "--help describes" "$tmp/err" || fail "$what: no pointer to --help: $(cat "$tmp/err")"
  done <<EOF2
unknown palette|svg --colors nope "$f"
bad number|svg --width abc "$f"
zero width|svg --width 0 "$f"
unknown option|svg --frobnicate "$f"
missing value|svg "$f" --title
bad unit|svg --unit parsecs "$f"
bad minwidth|svg --minwidth 5x "$f"
diff with one file|diff "$f"
diff bad threshold|diff --threshold 101 "$f" "$f"
diff report without threshold|diff --report r.md "$f" "$f"
run unknown option|run --frobnicate "$f"
run no script|run --hz 5
push no file|push --name x
compare no base|compare --head 1
compare bad threshold|compare --base 1 --head 2 --threshold lots
unknown command|frobnicate
EOF2
  "$lf" svg "$tmp/missing.folded" >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "missing file: exit $rc, want 2"
  grep -q "cannot read" "$tmp/err" || fail "no message for a missing file"
  ;;
diff_threshold)
  # the gate runs locally: shares compared by the engine, a Markdown report, exit 1 past it
  b=$data/diff/simple.before.folded a=$data/diff/simple.after.folded
  "$lf" diff --threshold 100 "$b" "$a" >"$tmp/d.svg" 2>"$tmp/md"; rc=$?
  [ $rc -eq 0 ] || fail "--threshold 100: exit $rc"
  same_svg "$tmp/d.svg" "$data/diff/simple.svg" || fail "--threshold changed the SVG"
  grep -q '^### Profile comparison: .*simple.after.folded vs .*simple.before.folded' "$tmp/md" || fail "no report: $(cat "$tmp/md")"
  grep -q '^Passed: no function grew by more than 100.00 points$' "$tmp/md" || fail "no verdict: $(cat "$tmp/md")"
  printf 'main;fast 90\nmain;slow 10\n' >"$tmp/base.folded"; printf 'main;fast 50\nmain;slow 50\n' >"$tmp/head.folded"
  "$lf" diff --threshold 5% --report "$tmp/r.md" -o "$tmp/x.svg" "$tmp/base.folded" "$tmp/head.folded"; rc=$?
  [ $rc -eq 1 ] || fail "a 40-point regression past 5%: exit $rc, want 1"
  grep -q '^| slow | 10.00 | 50.00 | +40.00 |$' "$tmp/r.md" || fail "report rows: $(cat "$tmp/r.md")"
  grep -q '^\*\*FAILED\*\*: slow grew by more than 5.00 points$' "$tmp/r.md" || fail "no FAILED line"
  grep -q '<svg' "$tmp/x.svg" || fail "-o SVG not written with the gate"
  "$lf" diff --threshold 40 --folded "$tmp/base.folded" "$tmp/head.folded" >/dev/null 2>&1; rc=$?
  [ $rc -eq 0 ] || fail "exactly 40 points is not past --threshold 40: exit $rc"
  ;;
xml_wellformed)
  for f in "$data"/svg/*.folded; do
    "$lf" svg "$f" >"$tmp/x.svg" 2>/dev/null || fail "$f: exit $?"
    wellformed "$tmp/x.svg"
  done
  ;;
nasty_xmllint)
  # every byte value in frame names, plus markup and a 60 kB name
  python3 - "$tmp/nasty.folded" <<'PY' || fail "python3 needed"
import sys
lines = []
for b in range(256):
    if b in (10, 59): continue  # newline and ';' separate lines and frames
    lines.append(b"root;x" + bytes([b]) + b"y<z>&]]>" + b" 1")
lines.append(b"root;" + b"</script><script>alert(1)</script>" * 2000 + b" 5")
lines.append(b"root;\xf0\x9f\x94\xa5 fire;\xc3\xa9t\xc3\xa9 2")
open(sys.argv[1], "wb").write(b"\n".join(lines) + b"\n")
PY
  "$lf" svg --minwidth 0 "$tmp/nasty.folded" >"$tmp/n.svg" 2>/dev/null || fail "exit $?"
  wellformed "$tmp/n.svg"
  [ "$(grep -o '<script' "$tmp/n.svg" | wc -l)" -eq 1 ] || fail "a frame name became a <script>"
  ;;
diff_folded)
  "$lf" diff --folded "$data/diff/simple.before.folded" "$data/diff/simple.after.folded" >"$tmp/d.txt" || fail "exit $?"
  cmp -s "$tmp/d.txt" "$data/diff/simple.txt" || fail "diff --folded differs from the golden file: $(cat "$tmp/d.txt")"
  "$lf" diff -n --folded "$data/diff/simple.before.folded" "$data/diff/simple.after.folded" >"$tmp/n.txt" || fail "exit $?"
  cmp -s "$tmp/n.txt" "$data/diff/simple.normalized.txt" || fail "diff -n --folded differs"
  # its output is a differential profile `luaflame svg` reads
  "$lf" svg "$tmp/d.txt" >"$tmp/d.svg" || fail "svg of diff output: exit $?"
  same_svg "$tmp/d.svg" "$data/diff/simple.svg" || fail "svg of the two-column folded differs from diff's SVG"
  ;;
diff_svg)
  "$lf" diff "$data/diff/simple.before.folded" "$data/diff/simple.after.folded" >"$tmp/d.svg" || fail "exit $?"
  same_svg "$tmp/d.svg" "$data/diff/simple.svg" || fail "diff SVG differs from the golden file"
  wellformed "$tmp/d.svg"
  ;;
deterministic)
  sort -r "$data/svg/lua.folded" >"$tmp/rev.folded"
  "$lf" svg "$data/svg/lua.folded" >"$tmp/a.svg"; "$lf" svg "$data/svg/lua.folded" >"$tmp/b.svg"
  "$lf" svg "$tmp/rev.folded" >"$tmp/c.svg"
  cmp -s "$tmp/a.svg" "$tmp/b.svg" || fail "two runs differ"
  cmp -s "$tmp/a.svg" "$tmp/c.svg" || fail "line order changes the SVG"
  ;;
browser_state)
  # The script in a real browser: zoom and search restored from the URL,
  # the matched share computed exactly. Skipped (77) without chromium.
  command -v chromium >/dev/null 2>&1 || { echo "skipped: no chromium"; exit 77; }
  "$lf" svg "$data/svg/lua.folded" >"$tmp/lua.svg" || fail "render"
  x=$(grep -o '<title>parse json.lua:40 ([^<]*</title><rect x="[0-9.]*" y="[0-9.]*"' "$tmp/lua.svg" | sed 's/.*x="\([0-9.]*\)" y="\([0-9.]*\)"/\1 \2/')
  set -- $x
  timeout 60 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" --dump-dom \
    "file://$tmp/lua.svg?x=$1&y=$2&s=STRING&i=1" >"$tmp/dom.html" 2>/dev/null || fail "chromium failed"
  grep -q 'id="matched"[^>]*>Matched: 15.31%<' "$tmp/dom.html" || fail "search: $(grep -o 'id="matched"[^<]*' "$tmp/dom.html")"
  grep -q 'id="unzoom"[^>]*class="">Reset Zoom' "$tmp/dom.html" || fail "zoom not restored (Reset Zoom hidden)"
  grep -q '<title>parse json.lua:40 ([^<]*</title><rect x="10.0" y="[0-9.]*" width="1180.0"' "$tmp/dom.html" || fail "zoomed frame not full width"
  grep -q '<g class="hide"><title>\[GC\]' "$tmp/dom.html" || fail "a frame beside the zoomed one is not hidden"
  grep -q '<g class="parent"><title>handle srv.lua:12' "$tmp/dom.html" || fail "ancestor not kept"
  grep -q '<title>\[C\] string.sub[^<]*</title><rect [^>]*fill="rgb(230,0,230)"' "$tmp/dom.html" || fail "match not highlighted"
  ;;
browser_interactive)
  # Hover, click, Ctrl-F, ignore-case, Reset Zoom, Esc in headless Chromium via
  # playwright-core (installed by scripts/install-deps.sh --test in tests/browser).
  pw=$(dirname "$0")/../browser/node_modules/playwright-core
  command -v chromium >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && [ -d "$pw" ] ||
    { echo "skipped: needs chromium, node and tests/browser/node_modules/playwright-core"; exit 77; }
  "$lf" svg "$data/svg/lua.folded" >"$tmp/lua.svg" || fail "render"
  timeout 80 node "$(dirname "$0")/svg_browser.mjs" "$tmp/lua.svg" "$pw" "$(command -v chromium)" || fail "browser checks"
  ;;
help)
  "$lf" svg --help >"$tmp/h1" && grep -q -- "--minwidth" "$tmp/h1" || fail "svg --help"
  "$lf" diff --help >"$tmp/h2" && grep -q -- "--normalize" "$tmp/h2" || fail "diff --help"
  grep -q -- "--threshold" "$tmp/h2" || fail "diff --help has no --threshold"
  for sub in run push compare; do
    "$lf" $sub --help >"$tmp/h3" 2>&1 || fail "$sub --help: exit $?"
    grep -q "Exit status" "$tmp/h3" || fail "$sub --help says nothing of exit status"
  done
  "$lf" --help >"$tmp/h4" && grep -q compare "$tmp/h4" || fail "luaflame --help lists no commands"
  ;;
*) fail "unknown case" ;;
esac
echo "ok [$case_name]"
