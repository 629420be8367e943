#include "model/cpu/gemm_peak.hpp"

#include <algorithm>

#include "core/timer.hpp"
#include "model/cpu/eigen_maps.hpp"

namespace gpt::cpu {

double measure_gemm_peak(int n, int reps) {
  MatR<float> a = MatR<float>::Random(n, n), b = MatR<float>::Random(n, n), c(n, n);
  c.noalias() = a * b;  // warm-up: page in, spin up threads
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    c.noalias() = a * b;
    best = std::min(best, t.seconds());
  }
  return 2.0 * double(n) * n * n / best;
}

}  // namespace gpt::cpu
