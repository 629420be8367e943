#!/usr/bin/env bash
# Configures and builds the project (Release) into BUILD_DIR (default: build).
# Extra arguments go to CMake, e.g. scripts/build.sh -DGPT_CUDA=OFF
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
cmake --build "$build" -j "$(nproc)"
