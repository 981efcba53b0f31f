# Sourced by runner_test.sh (lua5.4), puc_test.sh (lua5.1-5.3) and jit_test.sh (luajit): the set-up and
# the parity check the two suites share. Not run on its own.

# vm_test_setup LUAFLAME VM MODULE_DIR DATA_DIR
# Sets LF, MODDIR, DATA (absolute), LUA (the VM by its own name: it prints its
# argv[0] before an uncaught error, so it must be called by that name, found
# on PATH), work (a scratch folder removed at exit) and fails (0).
# With LUAFLAME_TEST_PRELOAD set (.ci/sanitizers.sh: the ASan runtime), the
# VM alone runs with it as LD_PRELOAD, through a wrapper of the same name
# first on PATH: the VM loads our instrumented module, the shell and its
# tools are not ours to check.
vm_test_setup() {
  LF=$(realpath "$1") MODDIR=$(realpath "$3") DATA=$(realpath "$4")
  LUA=$(basename "$2")
  PATH="$(dirname "$(realpath "$2")"):$PATH"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  fails=0
  if [ -n "${LUAFLAME_TEST_PRELOAD:-}" ]; then
    mkdir "$work/bin"
    printf '#!/bin/bash\nLD_PRELOAD="%s" exec -a "%s" "%s" "$@"\n' \
      "$LUAFLAME_TEST_PRELOAD" "$LUA" "$(realpath "$2")" > "$work/bin/$LUA"
    chmod +x "$work/bin/$LUA"
    PATH="$work/bin:$PATH"
  fi
}
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# vm_parity NAME COMMAND...: every script of DATA/runner, run as
# `COMMAND -q --mode M -o prof.folded SCRIPT ARGS` in each mode, has the same
# stdout, stderr and exit status as `$LUA SCRIPT ARGS`. With
# PARITY_MASK_ADDRESSES=1 a traceback's "at 0x..." (the host's C entry: an
# address of each binary) is masked on both sides first.
vm_parity() {
  local name=$1 script base mode f
  shift
  for script in "$DATA"/runner/*.lua; do
    base=$(basename "$script")
    (cd "$work" && "$LUA" "$script" one "two words" > lua.out 2> lua.err; echo $? > lua.rc)
    for mode in ${PARITY_MODES:-sample trace both}; do
      (cd "$work" && "$@" -q --mode "$mode" -o prof.folded "$script" one "two words" \
         > lf.out 2> lf.err; echo $? > lf.rc)
      [ "${PARITY_MASK_ADDRESSES:-0}" = 1 ] && sed -i 's/at 0x[0-9a-f][0-9a-f]*/at 0xADDR/' "$work/lua.err" "$work/lf.err"
      for f in out err rc; do
        cmp -s "$work/lua.$f" "$work/lf.$f" ||
          fail "$base ($mode): $f differs: $LUA <$(head -c 300 "$work/lua.$f")> $name <$(head -c 300 "$work/lf.$f")>"
      done
    done
  done
}

# vm_test_end WHAT: the verdict line and the exit status.
vm_test_end() {
  if [ "$fails" -gt 0 ]; then echo "$fails failure(s)"; exit 1; fi
  echo "$1: all checks passed"
  exit 0
}
