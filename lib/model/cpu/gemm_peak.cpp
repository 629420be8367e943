#include "model/cpu/gemm_peak.hpp"

#include <algorithm>

#include "core/timer.hpp"
#include "model/cpu/eigen_maps.hpp"
#include "model/cpu/gemm.hpp"

namespace gpt::cpu {

double measure_gemm_peak(int n, int reps) {
  MatR<float> a = MatR<float>::Random(n, n), b = MatR<float>::Random(n, n), c(n, n);
  // With the library the products use (model/cpu/gemm.hpp).
  auto product = [&] {
    if (use_openblas())
      openblas_sgemm(false, false, n, n, n, a.data(), n, b.data(), n, 0.f, c.data(), n);
    else
      c.noalias() = a * b;
  };
  product();  // warm-up: page in, spin up threads
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    product();
    best = std::min(best, t.seconds());
  }
  return 2.0 * double(n) * n * n / best;
}

}  // namespace gpt::cpu
