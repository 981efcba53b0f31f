#!/usr/bin/env bash
# Replays the Dockerfile's runtime stage in a chroot, for machines without a
# Docker engine (root, network to a Debian mirror, debootstrap installed):
#
#   docker/runtime-chroot.sh ROOTFS PREFIX
#
# ROOTFS: an empty folder, or one made before by this script (kept, so a second
#         run skips the download); filled with `debootstrap --variant=minbase
#         bookworm`, the base debian:12-slim is built from.
# PREFIX: what docker/build.sh installed (the build stage's /opt/luaflame).
#
# Then, as the Dockerfile does: apt-get install docker/runtime-packages.txt,
# user luaflame (10001), /data, PREFIX copied to /usr/local; and it checks the
# result as the image will run: luaflame-server as uid 10001 on a free port,
# luaflame-healthcheck, a push, require "luaflame" from lua5.4, and one short
# round of luaflame-demo. Exit 0 when all of that works.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$1"; prefix="$2"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ ! -x "$root/bin/bash" ]; then
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root "$@"; }

# RUN apt-get ... $(sed 's/#.*//' /tmp/runtime-packages.txt), groupadd, useradd, /data
cp "$here/runtime-packages.txt" "$root/tmp/runtime-packages.txt"
before="$(in_root dpkg-query -W -f '${Package}\n' | sort)"
in_root bash -c 'apt-get update -q >/dev/null \
  && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       $(sed "s/#.*//" /tmp/runtime-packages.txt) >/dev/null \
  && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
  && (getent group luaflame >/dev/null || groupadd --gid 10001 luaflame) \
  && (getent passwd luaflame >/dev/null || useradd --uid 10001 --gid luaflame \
        --home-dir /data --no-create-home --shell /usr/sbin/nologin luaflame) \
  && mkdir -p /data && chown luaflame:luaflame /data'
# COPY --from=build /opt/luaflame/ /usr/local/
cp -R "$prefix/." "$root/usr/local/"

port=$(( 20000 + RANDOM % 40000 ))
as_user=(setpriv --reuid=10001 --regid=10001 --clear-groups)
# A plain command (not in_root) so that $! is the server itself: chroot, env
# and setpriv each exec the next.
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin "${as_user[@]}" luaflame-server \
  --listen "127.0.0.1:$port" --data /data --web /usr/local/share/luaflame/web >"$root/tmp/server.log" 2>&1 &
server=$!
trap 'rc=$?; kill $server 2>/dev/null; wait $server 2>/dev/null; exit $rc' EXIT
for _ in $(seq 50); do in_root luaflame-healthcheck "127.0.0.1:$port" 2>/dev/null && break; sleep 0.2; done

in_root "${as_user[@]}" luaflame-healthcheck "127.0.0.1:$port"
echo "ok: luaflame-server runs as uid 10001 in the runtime root; luaflame-healthcheck passes"
in_root bash -c "printf 'main;work 10\n' > /tmp/p.folded"
url=$(in_root "${as_user[@]}" luaflame push /tmp/p.folded --server "http://127.0.0.1:$port" --name chroot)
echo "ok: luaflame push -> $url"
in_root "${as_user[@]}" lua5.4 -e 'local lf = require "luaflame"; assert(type(lf.start) == "function"); print("ok: require \"luaflame\" from lua5.4")'
in_root "${as_user[@]}" env LUAFLAME_SERVER="http://127.0.0.1:$port" DEMO_ROUNDS=1 DEMO_SECONDS=2 luaflame-demo
echo "ok: luaflame-demo streamed a round"
added="$(comm -13 <(printf '%s\n' "$before") <(in_root dpkg-query -W -f '${Package}\n' | sort))"
if [ -n "$added" ]; then
  echo "packages this run added to the root: $(echo $added)"
  echo "their installed size: $(in_root dpkg-query -W -f '${Installed-Size}\n' $added | awk '{s += $1} END {print s}') KiB"
fi
echo "programs and pages: $(du -sk "$prefix" | cut -f1) KiB"
