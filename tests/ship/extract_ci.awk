# Turns the CI jobs of docs/ci.md into shell scripts, so the test suite runs
# the very commands the documentation gives (ci_docs_test.sh).
#   awk -v job=github -f extract_ci.awk docs/ci.md   the `run:` of every step after "Install luaflame"
#   awk -v job=gitlab -f extract_ci.awk docs/ci.md   the `script:` items
# Only the YAML shapes those two blocks use are understood: `run: CMD`,
# `run: |` blocks, `- CMD` items (continued on deeper-indented lines) and `- |` items.
function indent(s) { match(s, /^ */); return RLENGTH }
/^##+ GitHub Actions/ { section = "github"; next }
/^##+ GitLab CI/ { section = "gitlab"; next }
/^```yaml/ { inyaml = (section == job); next }
/^```/ { inyaml = 0; next }
!inyaml { next }

job == "github" {
  if ($0 ~ /^      - name: /) { name = $0; sub(/^ *- name: /, "", name); skip = (name ~ /Install luaflame/); block = 0; next }
  if (skip) next
  if (block) {
    if ($0 ~ /^ *$/ || indent($0) >= block_indent) { print substr($0, block_indent + 1); next }
    block = 0
  }
  if ($0 ~ /^        run: \|/) { block = 1; block_indent = 10; print "# step: " name; next }
  if ($0 ~ /^        run: /) { line = $0; sub(/^ *run: /, "", line); print "# step: " name; print line; next }
  next
}

job == "gitlab" {
  if ($0 ~ /^  script:/) { inscript = 1; next }
  if (inscript && $0 ~ /^  [a-z_]+:/) { inscript = 0; if (item != "") print item; item = ""; next }
  if (!inscript) next
  if (block) {
    if (indent($0) >= 6 && $0 !~ /^    - /) { print substr($0, 7); next }
    block = 0
  }
  if ($0 ~ /^    - \|/) { if (item != "") print item; item = ""; block = 1; next }
  if ($0 ~ /^    - /) { if (item != "") print item; item = substr($0, 7); next }
  if (indent($0) > 4) { line = $0; sub(/^ */, "", line); item = item " " line; next }
  next
}
END { if (item != "") print item }
