#!/usr/bin/env bash
# Assembles .carry/ (git-ignored) for building on a GPU machine that has CUDA
# and CMake but none of our Debian packages (see the `run` device tool):
#   .carry/include/     header-only copies: Eigen, fmt (FMT_HEADER_ONLY),
#                       spdlog, nlohmann-json, toml++, CLI11
#   .carry/googletest/  GoogleTest's sources (built by the project)
#   .carry/prefix/      Open MPI, parallel HDF5 and PCRE2 unpacked from their
#                       .deb files (apt-get download + dpkg -x; never into /),
#                       with the shared libraries they need beyond glibc and
#                       GCC's runtime; the full build takes it through
#                       -DGPT_CARRY_PREFIX=.carry/prefix/usr
# With only include/ and googletest/, the GPU op tests build
# (-DGPT_GPU_OPS_ONLY=ON -DGPT_CARRY_DIR=.carry); prefix/ is for the full build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="${1:-$root/.carry}"
mkdir -p "$carry/include"
for d in eigen3 fmt spdlog nlohmann toml++ CLI; do
  [ -e "/usr/include/$d" ] && cp -rL "/usr/include/$d" "$carry/include/"
done
rm -rf "$carry/include/eigen3/unsupported"  # not used; 3 MiB of the carry limit
rm -rf "$carry/googletest"
cp -rL /usr/src/googletest/googletest "$carry/googletest"
if [ "${GPT_CARRY_MPI:-1}" = 1 ]; then
  rm -rf "$carry/debs" "$carry/prefix"
  mkdir -p "$carry/debs" "$carry/prefix"
  (cd "$carry/debs" && apt-get download libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common \
     libhdf5-openmpi-103-1 libhdf5-openmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
     libsz2 libaec0 libcurl3-gnutls libpcre2-dev libpcre2-8-0 2>/dev/null) ||
    { echo "device_carry: apt-get download failed (run apt-get update?)" >&2; exit 1; }
  for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$carry/prefix"; done
  rm -rf "$carry/debs"
  usr="$carry/prefix/usr"
  lib="$usr/lib/x86_64-linux-gnu"
  # Only what building and running C/C++ MPI programs on one node needs (the
  # carry limit is 64 MiB): no static libraries, Fortran, Java, manuals or
  # docs, and no InfiniBand/UCX/libfabric transport plugins (Open MPI skips
  # transports it has no plugin for; shared memory and TCP remain).
  find "$carry/prefix" -name '*.a' -delete
  rm -rf "$lib/fortran" "$usr/share/doc" "$usr/share/man" "$usr/share/lintian" "$usr/include/x86_64-linux-gnu/openmpi"
  find "$lib" \( -name 'libmpi_java*' -o -name 'libmpi_mpifh*' -o -name 'libmpi_usempi*' -o -name '*.jar' \
    -o -name 'libmca_common_ucx*' -o -name 'libmca_common_ofi*' -o -name 'libmca_common_verbs*' \
    -o -name 'mca_*_ucx.so' -o -name 'mca_*_ofi.so' -o -name 'mca_*_psm*.so' -o -name 'mca_btl_openib.so' \
    -o -name 'mca_btl_uct.so' \) -delete
  # The GPU machine's image is not Debian: bring every shared library these
  # need that is not glibc's or GCC's own, as this machine resolves them.
  export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib:$lib/hdf5/openmpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  needed="$(find "$carry/prefix" -type f \( -name '*.so*' -o -perm -u+x \) -exec ldd {} + 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' || true)"
  echo "$needed" | while read -r so; do
      [ -n "$so" ] || continue
      case "$so" in "$carry"/*) continue ;; esac
      [ -e "$lib/$(basename "$so")" ] || cp -L "$so" "$lib/"
    done
  # Debian's alternatives give the wrappers their plain names at install
  # time; dpkg -x does not run them.
  for tool in mpicc mpicxx mpic++ mpirun mpiexec; do
    [ -e "$usr/bin/$tool.openmpi" ] && ln -sf "$tool.openmpi" "$usr/bin/$tool"
  done
  if find "$carry/prefix" -type l -lname '/*' | grep -q .; then
    echo "device_carry: absolute symbolic links in the prefix would dangle on the GPU machine:" >&2
    find "$carry/prefix" -type l -lname '/*' >&2
    exit 1
  fi
fi
mib=$(du -sm --apparent-size "$carry" | cut -f1)
echo "carry: ${mib} MiB in $carry (the run tool takes at most 64 MiB with the working tree)"
[ "$mib" -lt 60 ] || { echo "device_carry: too large to carry" >&2; exit 1; }
