#!/usr/bin/env bash
# Which Debian packages the built programs need at run time, from ldd:
#
#   docker/runtime-deps.sh FILE...            print the packages, one a line, sorted
#   docker/runtime-deps.sh --check LIST FILE...
#
# --check compares them with LIST (docker/runtime-packages.txt, what the
# image's runtime stage installs): it fails when a needed package is missing
# from LIST, and when LIST names a package nothing needs unless its line is
# marked "# extra: WHY". The Dockerfile runs the check after building, and so
# does the test suite on the host, so the list cannot drift from the binaries.
set -euo pipefail

check=""
if [ "${1:-}" = "--check" ]; then check="$2"; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--check LIST] FILE..." >&2; exit 2; }

# The package that owns a library path. Debian 12 merges /lib into /usr/lib,
# and dpkg knows each file under one of the two spellings only.
owner() {
  local p cand
  for p in "$1" "$(readlink -f "$1")"; do
    for cand in "$p" "${p#/usr}" "/usr$p"; do
      dpkg-query -S "$cand" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
    done
  done
  echo "runtime-deps: no Debian package owns $1" >&2
  return 1
}

needed() {
  local f lib
  for f in "$@"; do
    [ -e "$f" ] || { echo "runtime-deps: no such file $f" >&2; return 1; }
    # Scripts (the health check, the demo) load no libraries of their own.
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    if ldd "$f" | grep -q "not found"; then
      echo "runtime-deps: $f has unresolved libraries:" >&2; ldd "$f" | grep "not found" >&2; return 1
    fi
    # "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" and the loader's own line.
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
  done | sort -u | while read -r lib; do owner "$lib"; done | sort -u
}

pkgs="$(needed "$@")"
if [ -z "$check" ]; then printf '%s\n' "$pkgs"; exit 0; fi

# Plain files, not <(...): a build root may have no /dev/fd.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$pkgs" >"$tmp/needed"
sed 's/#.*//' "$check" | tr -s ' \t' '\n\n' | sed '/^$/d' | sort -u >"$tmp/listed"
grep -E '#[[:space:]]*extra:' "$check" | sed 's/#.*//' | tr -s ' \t' '\n\n' | sed '/^$/d' | sort -u >"$tmp/extra"
missing="$(comm -23 "$tmp/needed" "$tmp/listed")"
unneeded="$(comm -13 "$tmp/needed" "$tmp/listed" | comm -23 - "$tmp/extra")"
status=0
if [ -n "$missing" ]; then
  echo "runtime-deps: $check lacks packages the programs need:" $missing >&2; status=1
fi
if [ -n "$unneeded" ]; then
  echo "runtime-deps: $check names packages nothing needs (mark them '# extra: why'):" $unneeded >&2; status=1
fi
[ $status -eq 0 ] && echo "runtime-deps: $check matches the $(printf '%s\n' "$pkgs" | wc -l) packages the programs need"
exit $status
