#!/usr/bin/env bash
# The build a GPU lease starts with (scripts/gpu_verify.sh ops:
# -DGPT_GPU_OPS_ONLY=ON, no MPI, no HDF5) configures and builds here, at one
# architecture: the CUDA backend, the GPU tests and the GPU benchmarks. A
# change that made the backend or those programs need MPI or HDF5 (whose
# headers are off the default include path here, as they are absent there)
# would otherwise be found on the GPU machine, where it costs the lease.
# Its GPU tests must be listed and report skipped here, and the benchmarks
# the lease runs must exist.
#   ops_only_build.sh SOURCE_DIR WORK_DIR GENERATOR
set -euo pipefail
src="$1"; work="$2"; generator="$3"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
cmake -S "$src" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DGPT_GPU_OPS_ONLY=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
# One job: this runs beside the other tests.
cmake --build "$work/build" -j 1 > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; fail "build"; }
for b in bench/bench_gpu_train bench/bench_gpu_attention bench/bench_gpu_gemm bench/bench_gpu_sample \
         tests/test_cuda_ops tests/test_cuda_model; do
  [ -x "$work/build/$b" ] || fail "no $b in the GPU-only build"
done
[ ! -e "$work/build/apps/gpt_train" ] || fail "the GPU-only build built gpt_train (it needs MPI)"
(cd "$work/build" && ctest -L gpu --timeout 120) > "$work/ctest.log" 2>&1 || { cat "$work/ctest.log"; fail "ctest -L gpu"; }
listed="$(grep -cE 'Test +#[0-9]+: .*Skipped' "$work/ctest.log" || true)"
grep -q "100% tests passed" "$work/ctest.log" && [ "$listed" -ge 30 ] ||
  { cat "$work/ctest.log"; fail "the GPU tests: $listed reported skipped"; }
echo "ok: the GPU-only build configures and builds; $listed GPU tests listed, skipped without a GPU"
