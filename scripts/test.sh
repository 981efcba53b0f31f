#!/usr/bin/env bash
# Installs every dependency (build and test), builds, and runs the whole test
# suite with CTest. Screenshots of the browser tests land in build/screenshots.
# In CI (.ci/run) the lint job has already built build/ (with -Werror), so the
# build step here only checks that it is up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j2 --timeout 900
