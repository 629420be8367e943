#!/usr/bin/env bash
# Assembles .carry/ (git-ignored) for building on a GPU machine that has CUDA
# and CMake but none of our Debian packages (see the `run` device tool):
#   .carry/include/     header-only copies: Eigen, fmt (FMT_HEADER_ONLY),
#                       spdlog, nlohmann-json, toml++, CLI11
#   .carry/googletest/  GoogleTest's sources (built by the project)
#   .carry/prefix/      Open MPI and parallel HDF5 unpacked from their .deb
#                       files (apt-get download + dpkg -x; never into /)
# With only include/ and googletest/, the GPU op tests build
# (-DGPT_GPU_OPS_ONLY=ON -DGPT_CARRY_DIR=.carry); prefix/ is for the full build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="${1:-$root/.carry}"
mkdir -p "$carry/include" "$carry/debs" "$carry/prefix"
for d in eigen3 fmt spdlog nlohmann toml++ CLI; do
  [ -e "/usr/include/$d" ] && cp -rL "/usr/include/$d" "$carry/include/"
done
rm -rf "$carry/googletest"
cp -rL /usr/src/googletest/googletest "$carry/googletest"
if [ "${GPT_CARRY_MPI:-1}" = 1 ]; then
  (cd "$carry/debs" && apt-get download libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common \
     libhdf5-openmpi-103-1 libhdf5-openmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
     libfabric1 libucx0 libpsm2-2 libpsm-infinipath1 librdmacm1 libibverbs1 libnl-3-200 libnl-route-3-200 \
     libsz2 libaec0 libcurl3-gnutls 2>/dev/null || true)
  for deb in "$carry"/debs/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" "$carry/prefix"; done
fi
du -sh "$carry" | awk '{print "carry: " $1 " in " $2}'
