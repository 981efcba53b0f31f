#!/usr/bin/env bash
# Replays the Dockerfile's build stage in a chroot, for machines without a
# Docker engine (root, network to a Debian mirror, debootstrap installed):
#
#   docker/build-chroot.sh ROOTFS [SRC]
#
# ROOTFS: an empty folder (or one this script filled before), bootstrapped as
#         bookworm minbase, what the debian:12 image is made from.
# SRC:    the repository (default: this one); its committed HEAD is copied to
#         ROOTFS/src, as `COPY . .` copies the build context.
# Then the stage's RUN lines, unchanged: scripts/install-deps.sh, docker/build.sh
# into /opt/luaflame, and the runtime package check. What it builds lands in
# ROOTFS/opt/luaflame, ready for docker/runtime-chroot.sh ROOTFS2 ROOTFS/opt/luaflame.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$1"; src="${2:-$here/..}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ ! -x "$root/bin/bash" ]; then
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
rm -rf "$root/src" "$root/tmp/build" "$root/opt/luaflame"
mkdir -p "$root/src"
git -C "$src" archive HEAD | tar -xf - -C "$root/src"

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root "$@"; }
# WORKDIR /src; RUN bash scripts/install-deps.sh
in_root bash -c 'cd /src && bash scripts/install-deps.sh'
# RUN JOBS="$(nproc)" bash docker/build.sh ... && bash docker/runtime-deps.sh --check ...
in_root bash -c 'cd /src && JOBS="${JOBS:-$(nproc)}" bash docker/build.sh /src /tmp/build /opt/luaflame \
 && bash docker/runtime-deps.sh --check docker/runtime-packages.txt \
      /opt/luaflame/bin/luaflame-server /opt/luaflame/bin/luaflame /opt/luaflame/lib/lua/5.4/luaflame.so'
echo "build stage replayed: $root/opt/luaflame"
