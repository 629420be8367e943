// The CUDA kernels of the embedding, the unfused GELU, the linear layers'
// bias gradient, AdamW and the small device ops (casts, accumulation, the deterministic sums), compiled as host
// C++ and run thread by thread by emulated_cuda.hpp against the CPU
// reference ops, in fp32 and bf16. Like the other *_emulated tests this runs
// without a GPU (in CI); test_cuda_ops runs the same kernels on one. The
// launch plans (grids, the embedding's token groups, AdamW's per-tensor
// launches) are the launchers' own, from the kernel headers.
#include "emulated_cuda.hpp"
// (must precede the kernel headers)
#include "model/cuda/adamw_kernels.cuh"
#include "model/cuda/bias_grad_kernels.cuh"
#include "model/cuda/elementwise_kernels.cuh"
#include "model/cuda/embedding_kernels.cuh"
#include "model/cuda/gelu_kernels.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "gpu/kernel_test_util.hpp"
#include "model/adamw.hpp"
#include "model/cpu/embedding.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/embedding.hpp"

namespace gpt::cuda::detail {
namespace {

using test::Guarded;
using test::randn;
using test::rel_error;
using test::rounded;
using test::tolerance;

template <typename T>
class EmulatedSimpleKernels : public ::testing::Test {};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(EmulatedSimpleKernels, Types);

std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = d(rng);
  return t;
}

// C = 200: two channel blocks of the dwte kernel, the second partial; rows
// not a multiple of a block.
constexpr int64_t kB = 3, kT = 37, kC = 200;

// wte[tok] + wpe[t] is one addition in fp32, rounded once: bitwise the
// CPU's sum, rounded as T stores it.
TYPED_TEST(EmulatedSimpleKernels, EmbeddingForwardExact) {
  using T = TypeParam;
  namespace impl = embedding_impl;
  const int32_t V = 29;
  const auto tokens = random_tokens(kB * kT, V, 1);
  const auto wte = rounded<T>(randn(V * kC, 1.f, 2)), wpe = rounded<T>(randn(kT * kC, 1.f, 3));
  std::vector<float> want(kB * kT * kC);
  cpu::embedding_forward(want.data(), tokens.data(), wte.data(), wpe.data(), kB, kT, kC);

  Guarded<T> gwte(wte), gwpe(wpe), out(want.size());
  const int64_t total = kB * kT * kC;
  emulated_cuda::launch(dim3(blocks_for(total, impl::kThreads)), impl::kThreads, 0, [&] {
    impl::embedding_forward_kernel<T>(out.data(), tokens.data(), gwte.data(), gwpe.data(), kT, kC, total);
  });
  EXPECT_EQ(out.values(), rounded<T>(want));
  EXPECT_TRUE(out.guards_intact());
}

// dwte and dwpe accumulate (+=) the CPU's sums: each token's rows summed
// through TokenGroups (the trainer's grouping), rows of tokens that do not
// occur (here 13..15, like wte's padded rows) bitwise untouched.
TYPED_TEST(EmulatedSimpleKernels, EmbeddingBackward) {
  using T = TypeParam;
  namespace impl = embedding_impl;
  const int32_t used = 13, Vp = 16;
  const auto tokens = random_tokens(kB * kT, used, 4);  // ~8.5 rows per token
  const auto dout = rounded<T>(randn(kB * kT * kC, 1.f, 5));
  const auto dwte0 = rounded<T>(randn(Vp * kC, 1.f, 6)), dwpe0 = rounded<T>(randn(kT * kC, 1.f, 7));
  auto dwte = dwte0, dwpe = dwpe0;
  cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), kB, kT, kC);

  TokenGroups groups;
  groups.build(tokens.data(), kB * kT);
  ASSERT_EQ(groups.num_groups, used);
  const int32_t* order = groups.packed.data();
  const int32_t* starts = order + kB * kT;
  const int32_t* token = starts + groups.num_groups + 1;
  Guarded<T> gdout(dout), gdwte(dwte0), gdwpe(dwpe0);
  const dim3 grid(unsigned(groups.num_groups), blocks_for(kC, impl::kWteThreads));
  ASSERT_EQ(grid.y, 2u);
  emulated_cuda::launch(grid, impl::kWteThreads, 0, [&] {
    impl::wte_backward_kernel<T>(gdwte.data(), gdout.data(), order, starts, token, kC);
  });
  emulated_cuda::launch(dim3(blocks_for(kT * kC, impl::kThreads)), impl::kThreads, 0, [&] {
    impl::wpe_backward_kernel<T>(gdwpe.data(), gdout.data(), kB, kT, kC);
  });
  EXPECT_LE(rel_error(gdwte.values(), dwte), tolerance<T>()) << "dwte";
  EXPECT_LE(rel_error(gdwpe.values(), dwpe), tolerance<T>()) << "dwpe";
  const auto got = gdwte.values();
  EXPECT_EQ(std::vector<float>(got.begin() + used * kC, got.end()),
            std::vector<float>(dwte0.begin() + used * kC, dwte0.end()))
      << "rows of tokens that do not occur";
  EXPECT_TRUE(gdwte.guards_intact() && gdwpe.guards_intact());
}

// Forward, backward, and backward in place (dinp aliasing dout, as the
// trainer calls it); n = 1000 ends inside a block.
TYPED_TEST(EmulatedSimpleKernels, GeluForwardBackward) {
  using T = TypeParam;
  namespace impl = gelu_impl;
  const int64_t n = 1000;
  const auto x = rounded<T>(randn(n, 2.f, 8)), dy = rounded<T>(randn(n, 1.f, 9));
  std::vector<float> y(n), dx(n);
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);

  Guarded<T> gx(x), gy(n), gdy(dy), gdx(n);
  const dim3 grid(blocks_for(n, impl::kThreads));
  emulated_cuda::launch(grid, impl::kThreads, 0, [&] { impl::gelu_forward_kernel<T>(gy.data(), gx.data(), n); });
  emulated_cuda::launch(grid, impl::kThreads, 0,
                        [&] { impl::gelu_backward_kernel<T>(gdx.data(), gx.data(), gdy.data(), n); });
  EXPECT_LE(rel_error(gy.values(), y), tolerance<T>()) << "forward";
  EXPECT_LE(rel_error(gdx.values(), dx), tolerance<T>()) << "backward";
  emulated_cuda::launch(grid, impl::kThreads, 0,
                        [&] { impl::gelu_backward_kernel<T>(gdy.data(), gx.data(), gdy.data(), n); });
  EXPECT_EQ(gdy.values(), gdx.values()) << "in place";
  EXPECT_TRUE(gy.guards_intact() && gdx.guards_intact() && gdy.guards_intact());
}

// dbias += column sums of dout[N, OC] through the partial sums of 2-D
// blocks (32 column lanes x 8 row lanes), a lane taking one column (W = 1)
// or one 16-byte vector of them (W = kVec): OC = 75 and 80 leave a partial
// column block; N = 700 gives 3 parts of 234 rows with one column per lane
// (not a multiple of the 8 row lanes) and 11 parts of 64 with vectors; N =
// 20000 the capped 64 and 256 parts. With the same parts, both widths give
// the same sums bit for bit.
template <typename T, int W>
std::vector<float> bias_grad_sums(const std::vector<float>& dout, const std::vector<float>& dbias0, int64_t N,
                                  int64_t OC, const bias_grad_impl::LaunchPlan& l) {
  namespace impl = bias_grad_impl;
  Guarded<T> gdout(dout), gdbias(dbias0);
  Guarded<float> partial(size_t(l.parts * OC));
  Guarded<unsigned> arrivals(std::vector<float>(l.grid.x, 0.f));
  emulated_cuda::launch(l.grid, l.block, 0, [&] {
    impl::bias_grad_kernel<W, T>(gdbias.data(), partial.data(), arrivals.data(), gdout.data(), N, OC, l.chunk);
  });
  EXPECT_TRUE(gdbias.guards_intact() && partial.guards_intact() && arrivals.guards_intact());
  EXPECT_EQ(arrivals.values(), std::vector<float>(l.grid.x, 0.f)) << "arrival counters not left at zero";
  return gdbias.values();
}

TYPED_TEST(EmulatedSimpleKernels, BiasGradient) {
  using T = TypeParam;
  namespace impl = bias_grad_impl;
  constexpr int V = kVec<T>;
  for (int64_t OC : {75, 80}) {
    for (int64_t N : {700, 20000}) {
      SCOPED_TRACE(testing::Message() << "OC=" << OC << " N=" << N);
      const auto dout = rounded<T>(randn(N * OC, 1.f, 50)), dbias0 = rounded<T>(randn(OC, 1.f, 51));
      std::vector<float> want(dbias0);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < OC; ++c) want[c] += dout[r * OC + c];
      const impl::LaunchPlan scalar = impl::launch_plan<1>(N, OC);
      EXPECT_EQ(scalar.parts, N == 700 ? 3 : impl::kMaxParts<1>);
      const auto got = bias_grad_sums<T, 1>(dout, dbias0, N, OC, scalar);
      EXPECT_LE(rel_error(got, want), tolerance<T>()) << "one column per lane";
      if (OC % V != 0) continue;
      const impl::LaunchPlan vec = impl::launch_plan<V>(N, OC);
      EXPECT_EQ(vec.parts, N == 700 ? 11 : impl::kMaxParts<V>);
      EXPECT_LE(rel_error(bias_grad_sums<T, V>(dout, dbias0, N, OC, vec), want), tolerance<T>()) << "vectors";
      // The scalar plan's parts with vector lanes (the grid's x shrinks by V).
      impl::LaunchPlan same = scalar;
      same.grid.x = unsigned(impl::column_groups<V>(OC));
      const auto got_vec = bias_grad_sums<T, V>(dout, dbias0, N, OC, same);
      EXPECT_EQ(got_vec, got) << "vectors, the scalar plan's parts";
    }
  }
}

// One unit of three tensors (decayed, not, decayed) updated on a range that
// starts and ends inside tensors, as a ZeRO shard does, for three steps with
// clipping's gradient scale. Master, m and v follow the CPU update to fp32
// rounding (the same arithmetic; the order of a * b + c may differ under
// FMA contraction on the GPU); the compute copy is the master rounded to T.
// G is the gradient type, T the compute copy's (void: fp32 mode, no copy).
template <typename G, typename T>
void check_adamw() {
  namespace impl = adamw_impl;
  SCOPED_TRACE(testing::Message() << "gradient " << (std::is_same_v<G, float> ? "fp32" : "bf16") << ", copy "
                                  << (std::is_void_v<T> ? "none" : std::is_same_v<T, float> ? "fp32" : "bf16"));
  UnitSpec unit;
  unit.tensors = {{"w1", {20, 15}, 0, 300, InitKind::kNormal, 0.02f, 300, true},
                  {"b1", {77}, 300, 77, InitKind::kZeros, 0.f, 77, false},
                  {"w2", {25, 20}, 377, 500, InitKind::kNormal, 0.02f, 500, true}};
  unit.numel = 877;
  const int64_t begin = 123, end = 800, n = end - begin;
  const AdamWHyper h{0.9f, 0.95f, 1e-8f, 0.1f};
  auto master = randn(n, 1.f, 10), m = std::vector<float>(n, 0.f), v = m;
  Guarded<float> gmaster(master), gm(m), gv(v);
  using Copy = std::conditional_t<std::is_void_v<T>, float, T>;
  Guarded<Copy> gparam(n);
  for (int64_t t = 1; t <= 3; ++t) {
    const auto g = rounded<G>(randn(n, 0.5f, 10 + uint64_t(t)));
    const AdamWStep s{1e-2f, t, 0.7f};
    adamw_update(unit, begin, end, master.data(), g.data(), m.data(), v.data(), h, s);
    Guarded<G> gg(g);
    int launches = 0;
    impl::for_each_update_launch(
        unit, begin, end, h, s, [&](int64_t o, int64_t k, const impl::AdamWArgs& a, const impl::Segments& seg) {
          ++launches;
          Copy* copy = std::is_void_v<T> ? nullptr : gparam.data() + o;
          const int w = impl::adamw_width(gmaster.data() + o, copy, gg.data() + o, gm.data() + o, gv.data() + o);
          EXPECT_EQ(w, impl::kAdamWVec) << "the test's arrays are aligned";
          emulated_cuda::launch(dim3(impl::blocks_for_update(k, w)), impl::kThreads, 0, [&] {
            impl::adamw_kernel<impl::kAdamWVec, G, Copy>(gmaster.data() + o, copy, gg.data() + o, gm.data() + o,
                                                         gv.data() + o, k, a, seg);
          });
        });
    EXPECT_EQ(launches, 1) << "one launch for three tensors";
  }
  EXPECT_LE(rel_error(gmaster.values(), master), 1e-6) << "master";
  EXPECT_LE(rel_error(gm.values(), m), 1e-6) << "m";
  EXPECT_LE(rel_error(gv.values(), v), 1e-6) << "v";
  if constexpr (!std::is_void_v<T>) EXPECT_EQ(gparam.values(), rounded<T>(gmaster.values())) << "compute copy";
  else EXPECT_EQ(gparam.values(), std::vector<float>(n, float(Copy(Guarded<Copy>::kSentinel)))) << "no copy written";
  EXPECT_TRUE(gmaster.guards_intact() && gm.guards_intact() && gv.guards_intact() && gparam.guards_intact());
}

// The instantiations adamw.cu compiles: fp32 mode (no copy), bf16 mode, and
// the two mixed ones.
TEST(EmulatedSimpleKernels, AdamW) {
  check_adamw<float, void>();
  check_adamw<bf16, bf16>();
  check_adamw<bf16, float>();
  check_adamw<float, bf16>();
}

// A unit of 40 small tensors, decay alternating in runs of one and two, so
// a shard of it spans more segments than one launch takes: the plan splits
// it, and each launch applies every element's own decay, with its planned
// grid and with one block (one thread's elements then cross every segment).
TEST(EmulatedSimpleKernels, AdamWManySegments) {
  namespace impl = adamw_impl;
  UnitSpec unit;
  int64_t at = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 3 + i % 7;
    unit.tensors.push_back({std::to_string(i), {n}, at, n, InitKind::kZeros, 0.f, n, i % 3 == 0});
    at += n;
  }
  unit.numel = at;
  const int64_t begin = 5, end = at - 4, n = end - begin;
  const AdamWHyper h{0.9f, 0.95f, 1e-8f, 0.5f};  // a strong decay: a wrong one shows
  const AdamWStep s{1e-1f, 3, 1.f};
  const auto g = randn(n, 0.5f, 30), master0 = randn(n, 1.f, 31);
  auto want = master0, wm = std::vector<float>(n, 0.f), wv = wm;
  adamw_update(unit, begin, end, want.data(), g.data(), wm.data(), wv.data(), h, s);
  for (const bool one_block : {false, true}) {
    auto master = master0, m = std::vector<float>(n, 0.f), v = m;
    int launches = 0, covered = 0;
    impl::for_each_update_launch(
        unit, begin, end, h, s, [&](int64_t o, int64_t k, const impl::AdamWArgs& a, const impl::Segments& seg) {
          ++launches;
          covered += int(k);
          EXPECT_EQ(seg.end[seg.count - 1], k) << "the last segment ends the launch";
          emulated_cuda::launch(dim3(one_block ? 1u : impl::blocks_for_update(k)), impl::kThreads, 0, [&] {
            impl::adamw_kernel<1, float, float>(master.data() + o, nullptr, g.data() + o, m.data() + o,
                                                v.data() + o, k, a, seg);
          });
        });
    EXPECT_GT(launches, 1) << "more segments than one launch takes";
    EXPECT_EQ(covered, n);
    EXPECT_LE(rel_error(master, want), 1e-6) << (one_block ? "one block" : "planned grid");
    EXPECT_LE(rel_error(v, wv), 1e-6);
  }
}

// The update's grid-stride loop and its two widths: one element per
// access and kAdamWVec per access (then the n % kAdamWVec left one at a
// time), each with its planned grid and with one block, give the same bits
// in master, m, v and the copy; the segments' ends fall inside groups of
// kAdamWVec, so a group's elements take different decays.
TEST(EmulatedSimpleKernels, AdamWGridStrideAndWidths) {
  namespace impl = adamw_impl;
  const int64_t n = 1003;
  ASSERT_NE(n % impl::kAdamWVec, 0);
  const impl::AdamWArgs a{0.9f, 0.95f, 1e-8f, 0.9f, 0.1f, 1.2f, 0.5f};  // a strong decay: a wrong one shows
  impl::Segments seg{};
  seg.end[0] = 301;
  seg.end[1] = 378;
  seg.end[2] = n;
  seg.decays = 0b101;
  seg.count = 3;
  const auto g = randn(n, 1.f, 20), p0 = randn(n, 1.f, 21);
  std::vector<std::vector<float>> results;
  for (int width : {1, impl::kAdamWVec}) {
    for (unsigned blocks : {impl::blocks_for_update(n, width), 1u}) {
      SCOPED_TRACE(testing::Message() << "width " << width << ", " << blocks << " blocks");
      Guarded<float> p(p0), m(std::vector<float>(n, 0.1f)), v(std::vector<float>(n, 0.2f)), gg(g);
      Guarded<bf16> copy(n);
      ASSERT_EQ(impl::adamw_width(p.data(), copy.data(), gg.data(), m.data(), v.data()), impl::kAdamWVec);
      // Any one array off its alignment takes the one-element kernel.
      EXPECT_EQ(impl::adamw_width(p.data() + 1, copy.data(), gg.data(), m.data(), v.data()), 1);
      EXPECT_EQ(impl::adamw_width(p.data(), copy.data() + 1, gg.data(), m.data(), v.data()), 1);
      EXPECT_EQ(impl::adamw_width(p.data(), copy.data(), gg.data() + 1, m.data(), v.data()), 1);
      EXPECT_EQ(impl::adamw_width(p.data(), copy.data(), gg.data(), m.data() + 1, v.data()), 1);
      EXPECT_EQ(impl::adamw_width(p.data(), copy.data(), gg.data(), m.data(), v.data() + 1), 1);
      EXPECT_EQ((impl::adamw_width<float, bf16>(p.data(), nullptr, gg.data(), m.data(), v.data())), impl::kAdamWVec);
      emulated_cuda::launch(dim3(blocks), impl::kThreads, 0, [&] {
        if (width == 1)
          impl::adamw_kernel<1, float, bf16>(p.data(), copy.data(), gg.data(), m.data(), v.data(), n, a, seg);
        else
          impl::adamw_kernel<impl::kAdamWVec, float, bf16>(p.data(), copy.data(), gg.data(), m.data(), v.data(), n,
                                                           a, seg);
      });
      results.push_back(p.values());
      results.push_back(m.values());
      results.push_back(v.values());
      results.push_back(copy.values());
      EXPECT_TRUE(p.guards_intact() && m.guards_intact() && v.guards_intact() && copy.guards_intact());
    }
  }
  ASSERT_EQ(results.size(), 16u);
  for (size_t r = 4; r < results.size(); ++r) EXPECT_EQ(results[r], results[r % 4]) << "result " << r;
}

// Casts round to nearest even exactly as the host's conversion does;
// accumulation is one fp32 addition rounded once. Both with their own grid
// and with a single block (the grid-stride loop).
template <typename To, typename From>
void check_convert_accumulate() {
  namespace impl = elementwise_impl;
  const int64_t n = 1000;
  const auto src = rounded<From>(randn(n, 3.f, 30)), acc0 = rounded<To>(randn(n, 1.f, 31));
  std::vector<float> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = acc0[i] + src[i];
  Guarded<From> gsrc(src);
  for (unsigned blocks : {impl::grid_for(n), 1u}) {
    SCOPED_TRACE(testing::Message() << blocks << " blocks");
    Guarded<To> dst(n), acc(acc0);
    emulated_cuda::launch(dim3(blocks), impl::kThreads, 0,
                          [&] { impl::convert_kernel<To, From>(dst.data(), gsrc.data(), n); });
    emulated_cuda::launch(dim3(blocks), impl::kThreads, 0,
                          [&] { impl::accumulate_kernel<To, From>(acc.data(), gsrc.data(), n); });
    EXPECT_EQ(dst.values(), rounded<To>(src)) << "convert";
    EXPECT_EQ(acc.values(), rounded<To>(sum)) << "accumulate";
    EXPECT_TRUE(dst.guards_intact() && acc.guards_intact());
  }
}

TEST(EmulatedSimpleKernels, ConvertAndAccumulate) {
  check_convert_accumulate<float, bf16>();
  check_convert_accumulate<bf16, float>();
  check_convert_accumulate<float, float>();
  check_convert_accumulate<bf16, bf16>();
}

// *out += the sum (of squares) in double over a list of arrays: the fixed
// grid's partials, then the last block adding them in a fixed order. The
// whole x (n = 200003 > kSumBlocks * kSumThreads, so threads take two
// elements, and the last block's are partial) from a 16-byte aligned start
// (vectors, then the n % kVec left one at a time), the same from one
// element in (one element per access), and a list of pieces of both kinds
// and an empty one. The sum is of the stored (T) values; double
// accumulation in another order than the host's differs by ~1e-16
// relative.
template <typename T, bool kSquare>
double device_sum(const std::vector<std::pair<const T*, int64_t>>& list, double start) {
  namespace impl = elementwise_impl;
  impl::Segments<T> segs{};
  for (auto [x, n] : list) {
    segs.x[segs.count] = x;
    segs.n[segs.count++] = n;
  }
  std::vector<double> scratch(size_t(impl::kSumBlocks) + 1, std::nan(""));
  unsigned* arrivals = reinterpret_cast<unsigned*>(&scratch.back());
  *arrivals = 0;
  double out = start;
  emulated_cuda::launch(dim3(impl::kSumBlocks), impl::kSumThreads, 0,
                        [&] { impl::sum_kernel<T, kSquare>(segs, scratch.data(), arrivals, &out); });
  EXPECT_EQ(*arrivals, 0u) << "the arrival counter is left zero for the next launch";
  return out;
}

TYPED_TEST(EmulatedSimpleKernels, SumSquaresAndValues) {
  using T = TypeParam;
  namespace impl = elementwise_impl;
  const int64_t threads = int64_t(impl::kSumBlocks) * impl::kSumThreads, n = 200003;
  ASSERT_GT(n, threads);
  ASSERT_NE(n % kVec<T>, 0);
  // Past n, up to big: 7 vectors for the first half of the threads, 6 for
  // the others (and 3 elements one at a time), so the loop that loads
  // kSumLoads vectors at a time runs once, and the one that loads one takes
  // the 3 or 2 left.
  static_assert(impl::kSumLoads == 4);
  const int64_t big = 6 * threads * kVec<T> + threads * kVec<T> / 2 + 3;
  const auto x = rounded<T>(randn(big, 1.f, 40));
  auto host_sum = [&](int64_t lo, int64_t hi, bool square) {
    double s = 0;
    for (int64_t i = lo; i < hi; ++i) s += square ? double(x[i]) * x[i] : double(x[i]);
    return s;
  };
  Guarded<T> gx(x);
  const T* p = gx.data();
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
  const double start = 1.5;
  struct Case {
    const char* what;
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [lo, hi) of x
  };
  const Case cases[] = {
      {"16-byte vectors", {{0, n}}},
      {"one element per access", {{1, n}}},
      {"a list: vectors, scalars, empty, short", {{0, 70001}, {70001, 150000}, {150000, 150000}, {150000, 150003},
                                                  {150003, n}}},
      {"several vectors per thread", {{0, big}}},
      {"several vectors per thread, then a list", {{0, big - n}, {big - n, big}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::pair<const T*, int64_t>> list;
    double squares = 0, values = 0;
    for (auto [lo, hi] : c.ranges) {
      list.emplace_back(p + lo, hi - lo);
      squares += host_sum(lo, hi, true);
      values += host_sum(lo, hi, false);
    }
    EXPECT_NEAR((device_sum<T, true>(list, start)), start + squares, 1e-12 * squares) << "sum of squares";
    if constexpr (std::is_same_v<T, float>) {
      EXPECT_NEAR((device_sum<float, false>(list, start)), start + values, 1e-12 * squares) << "sum of values";
    }
  }
  EXPECT_TRUE(gx.guards_intact());
}

// The launcher: 160 arrays (137 not empty) take three launches (64 + 64 +
// 9), each adding into *out; empty arrays are left out of the lists. Two
// passes give the same bits (the counter the last block resets).
TYPED_TEST(EmulatedSimpleKernels, SumSquaresLauncherChunks) {
  using T = TypeParam;
  const int64_t n = 20000;
  const auto x = rounded<T>(randn(n, 1.f, 41));
  Guarded<T> gx(x);
  std::vector<const T*> xs;
  std::vector<int64_t> ns;
  double want = 0;
  for (int64_t k = 0, lo = 0; k < 160; ++k) {
    const int64_t len = k % 7 == 0 ? 0 : 1 + (k * 53) % 250;
    xs.push_back(gx.data() + lo);
    ns.push_back(len);
    for (int64_t i = lo; i < lo + len; ++i) want += double(x[i]) * x[i];
    lo += len;
    ASSERT_LE(lo, n);
  }
  std::vector<double> scratch(size_t(sum_squares_scratch()), 0.0);
  double got[2] = {0.5, 0.5};
  for (double& g : got) {
    cuda::sum_squares(xs.data(), ns.data(), int(xs.size()), &g, scratch.data(), nullptr);
    cudaDeviceSynchronize();
  }
  EXPECT_NEAR(got[0], 0.5 + want, 1e-12 * want);
  EXPECT_EQ(got[0], got[1]);
}

// A launch configuration any GPU refuses (cudaErrorInvalidConfiguration)
// ends the process as a kernel fault would, naming the grid and block;
// one at the limits runs.
void no_kernel() {}
void launch_config(dim3 grid, dim3 block) {
  emulated_cuda::launch_kernel(reinterpret_cast<const void*>(&no_kernel), grid, block, 0, nullptr, [] {});
  cudaDeviceSynchronize();
}
TEST(EmulatedLaunch, RefusesConfigurationsEveryGpuRefuses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* refused = "invalid launch configuration";
  EXPECT_DEATH(launch_config(dim3(1), dim3(1025)), refused);
  EXPECT_DEATH(launch_config(dim3(1), dim3(32, 33)), refused);  // 1056 threads in all
  EXPECT_DEATH(launch_config(dim3(1), dim3(1, 1, 65)), refused);
  EXPECT_DEATH(launch_config(dim3(1, 65536), dim3(32)), refused);
  EXPECT_DEATH(launch_config(dim3(1, 1, 65536), dim3(32)), refused);
  EXPECT_DEATH(launch_config(dim3(0), dim3(32)), refused);
  launch_config(dim3(1), dim3(1024));
  launch_config(dim3(2, 3), dim3(32, 32));
}

// Every block starts with its dynamic shared memory all 0xFF, whatever an
// earlier block or launch (with more of it) wrote; a write past the launch's
// size ends the process naming the byte, wherever it falls (the guard reads
// 64 bytes at a time: a byte in the unaligned head, in a word, at the end).
TEST(EmulatedLaunch, SharedMemoryIsPoisonedPerBlockAndGuardedPastItsSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const size_t cap = emulated_cuda::kSmemCapacity;
  for (const size_t bytes : {cap, size_t(4096), size_t(100), size_t(0)}) {
    bool all_poison = true;
    emulated_cuda::launch(dim3(3), dim3(32), bytes, [&] {
      for (size_t i = threadIdx.x; i < bytes; i += 32) all_poison = all_poison && emulated_cuda::g_smem[i] == 0xFF;
      __syncthreads();
      for (size_t i = threadIdx.x; i < bytes; i += 32) emulated_cuda::g_smem[i] = 0;
    });
    EXPECT_TRUE(all_poison) << bytes << " bytes";
  }
  for (const size_t at : {size_t(100), size_t(130), size_t(4096 + 7), cap - 1}) {
    const auto write_past = [at] {
      emulated_cuda::launch(dim3(2), dim3(1), 100, [at] { emulated_cuda::g_smem[at] = 0; });
    };
    EXPECT_DEATH(write_past(), "shared memory written at byte " + std::to_string(at) + ", past the launch's 100");
  }
}

// Every block of a launch runs once, in an order other than 0..n-1 that
// changes from launch to launch (a GPU promises none; emulated_cuda.hpp).
TEST(EmulatedLaunch, RunsEachBlockOnceInAShuffledOrder) {
  const dim3 grid(16, 4);
  std::vector<std::vector<unsigned>> orders(2);
  for (auto& order : orders)
    emulated_cuda::launch(grid, dim3(1), 0, [&] { order.push_back(blockIdx.y * grid.x + blockIdx.x); });
  std::vector<unsigned> identity(grid.x * grid.y);
  std::iota(identity.begin(), identity.end(), 0u);
  for (const auto& order : orders) {
    EXPECT_NE(order, identity);
    std::vector<unsigned> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity);
  }
  EXPECT_NE(orders[0], orders[1]);
}

}  // namespace
}  // namespace gpt::cuda::detail
