// matvec_rows (model/cpu/matmul.hpp): a decoding pass's matrix-vector
// products on every thread, in fixed slices of rows. Against the products
// in double, bit for bit the same at any thread count, and bit for bit
// Eigen's own whole product (the slices start on its 8-row blocks), for
// row counts below one slice, at one, 1, 7 and 8 past it (a remainder under
// 8 rows joins the last slice), and several slices with a remainder.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/cpu/eigen_maps.hpp"
#include "model/cpu/matmul.hpp"

namespace gpt {
namespace {

TEST(MatvecRows, EqualsTheProductAtAnyThreadCountBitForBit) {
  const int threads = omp_get_max_threads();
  for (int64_t rows : {int64_t(1), int64_t(7), cpu::kMatvecSlice, cpu::kMatvecSlice + 1, cpu::kMatvecSlice + 7,
                       cpu::kMatvecSlice + 8, int64_t(1029)}) {
    for (int64_t cols : {33, 768}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
      std::mt19937 rng(uint32_t(rows * 1000 + cols));
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> W(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
      for (float& v : W) v = nd(rng);
      for (float& v : x) v = nd(rng);
      // Eigen's one product over all rows, and the sums in double.
      std::vector<float> whole(static_cast<size_t>(rows));
      cpu::Vec<float>(whole.data(), rows).noalias() =
          cpu::CVec<float>(x.data(), cols) * cpu::CMapR<float>(W.data(), rows, cols).transpose();
      double err = 0, norm = 0;
      std::vector<float> one;
      for (int n : {1, 2, 3, 16}) {
        omp_set_num_threads(n);
        std::vector<float> y(static_cast<size_t>(rows), -7.f);
        cpu::matvec_rows(y.data(), W.data(), x.data(), rows, cols);
        if (n == 1) {
          one = y;
          for (int64_t r = 0; r < rows; ++r) {
            double want = 0;
            for (int64_t c = 0; c < cols; ++c) want += double(W[size_t(r * cols + c)]) * x[size_t(c)];
            err = std::max(err, std::abs(y[size_t(r)] - want));
            norm = std::max(norm, std::abs(want));
          }
        }
        EXPECT_EQ(y, one) << n << " threads";
      }
      omp_set_num_threads(threads);
      // float dot products of up to 768 terms of size ~1: a few 1e-7 of sqrt(cols) each
      EXPECT_LE(err, 1e-5 * std::max(1.0, norm));
      EXPECT_EQ(one, whole);
    }
  }
}

}  // namespace
}  // namespace gpt
