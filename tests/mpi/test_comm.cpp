// Every collective of MpiCommunicator against a locally computed reference,
// on the world and on every 2-D mesh shape of the world size this binary is
// launched with (ctest runs it on 1, 2, 3, 4 and 8 ranks). Inputs are small
// integers, so fp32 and bf16 sums are exact and compared exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <numeric>

#include "comm/agree.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_wait.hpp"
#include "core/watchdog.hpp"
#include "core/error.hpp"
#include "core/shard.hpp"
#include "mpi_test_env.hpp"

namespace gpt {
namespace {

// Rank r's contribution at element i (of a buffer identified by `salt`).
float value(int r, int64_t i, int salt = 0) { return float((r * 7 + i * 3 + salt) % 17); }

uint16_t to_bf16(float f) {  // exact for the small integers used here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const std::vector<int64_t> kSizes = {1, 5, 1000, (1 << 18) + 3};  // none divides by 3 or 8

class Collectives : public ::testing::TestWithParam<bool> {  // param: async?
 protected:
  MpiCommunicator comm{MPI_COMM_WORLD};
  void run(WorkPtr w) {
    if (GetParam()) {
      w->wait();
      EXPECT_TRUE(w->is_completed());
    } else {
      w->wait();
    }
  }
};

TEST_P(Collectives, AllReduceSumAndAvgInAndOutOfPlace) {
  const int n = comm.size(), r = comm.rank();
  for (int64_t N : kSizes) {
    std::vector<float> in(N), out(N, -1.f), ref(N, 0.f);
    for (int64_t i = 0; i < N; ++i) {
      in[i] = value(r, i);
      for (int q = 0; q < n; ++q) ref[i] += value(q, i);
    }
    if (GetParam()) {
      run(comm.all_reduce_async(in.data(), out.data(), N, DType::kF32, ReduceOp::kSum));
    } else {
      comm.all_reduce(in.data(), out.data(), N, DType::kF32, ReduceOp::kSum);
    }
    EXPECT_EQ(out, ref) << "out of place, N=" << N;
    run(comm.all_reduce_async(in.data(), in.data(), N, DType::kF32, ReduceOp::kAvg));
    for (int64_t i = 0; i < N; ++i) ASSERT_NEAR(in[i], ref[i] / n, 1e-6 * ref[i]) << "avg in place, i=" << i;
  }
}

TEST_P(Collectives, ReduceScatterWithPaddingInAndOutOfPlace) {
  const int n = comm.size(), r = comm.rank();
  for (int64_t N : kSizes) {
    const ShardRange s = shard_range(N, n, r);
    std::vector<float> in(s.padded_numel, 0.f), out(s.shard_numel, -1.f);
    for (int64_t i = 0; i < N; ++i) in[i] = value(r, i);
    run(comm.reduce_scatter_async(in.data(), out.data(), s.shard_numel, DType::kF32, ReduceOp::kSum));
    for (int64_t i = s.begin; i < s.valid_end; ++i) {
      float ref = 0;
      for (int q = 0; q < n; ++q) ref += value(q, i);
      ASSERT_EQ(out[i - s.begin], ref) << "N=" << N << " i=" << i;
    }
    for (int64_t i = s.valid_end; i < s.end; ++i) ASSERT_EQ(out[i - s.begin], 0.f) << "padding stays zero";
    // In place: the result lands at this rank's offset of the input buffer.
    run(comm.reduce_scatter_async(in.data(), in.data() + s.begin, s.shard_numel, DType::kF32, ReduceOp::kSum));
    for (int64_t i = s.begin; i < s.valid_end; ++i) ASSERT_EQ(in[i], out[i - s.begin]) << "in place i=" << i;
  }
}

TEST_P(Collectives, AllGatherWithPaddingInAndOutOfPlace) {
  const int n = comm.size(), r = comm.rank();
  for (int64_t N : kSizes) {
    const ShardRange s = shard_range(N, n, r);
    std::vector<float> mine(s.shard_numel, 0.f), out(s.padded_numel, -1.f);
    for (int64_t i = s.begin; i < s.valid_end; ++i) mine[i - s.begin] = value(0, i, 5);
    run(comm.all_gather_async(mine.data(), out.data(), s.shard_numel, DType::kF32));
    for (int64_t i = 0; i < N; ++i) ASSERT_EQ(out[i], value(0, i, 5)) << "N=" << N << " i=" << i;
    std::vector<float> inplace(s.padded_numel, -1.f);
    std::copy(mine.begin(), mine.end(), inplace.begin() + s.begin);
    run(comm.all_gather_async(inplace.data() + s.begin, inplace.data(), s.shard_numel, DType::kF32));
    EXPECT_EQ(inplace, out);
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int n = comm.size(), r = comm.rank();
  for (int root = 0; root < n; ++root) {
    std::vector<float> buf(1001);
    for (int64_t i = 0; i < 1001; ++i) buf[i] = value(r, i, root);
    run(comm.broadcast_async(buf.data(), buf.size(), DType::kF32, root));
    for (int64_t i = 0; i < 1001; ++i) ASSERT_EQ(buf[i], value(root, i, root)) << "root " << root;
  }
  run(comm.barrier_async());
}

TEST_P(Collectives, Bf16ReductionsAndGather) {
  const int n = comm.size(), r = comm.rank();
  const int64_t N = 1003;
  const ShardRange s = shard_range(N, n, r);
  std::vector<uint16_t> in(s.padded_numel, 0), sum(s.padded_numel), rs(s.shard_numel), ag(s.padded_numel);
  for (int64_t i = 0; i < N; ++i) in[i] = to_bf16(value(r, i));
  run(comm.all_reduce_async(in.data(), sum.data(), s.padded_numel, DType::kBF16, ReduceOp::kSum));
  run(comm.reduce_scatter_async(in.data(), rs.data(), s.shard_numel, DType::kBF16, ReduceOp::kSum));
  run(comm.all_gather_async(rs.data(), ag.data(), s.shard_numel, DType::kBF16));
  for (int64_t i = 0; i < N; ++i) {
    float ref = 0;
    for (int q = 0; q < n; ++q) ref += value(q, i);
    ASSERT_EQ(from_bf16(sum[i]), ref) << i;
    ASSERT_EQ(from_bf16(ag[i]), ref) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Mpi, Collectives, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "async" : "blocking"; });

TEST(AsyncCollectives, OutstandingWorkCompletedOutOfIssueOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int n = comm.size(), r = comm.rank();
  constexpr int kOps = 6;
  const int64_t N = 50000;
  std::vector<std::vector<float>> bufs(kOps, std::vector<float>(N));
  std::vector<WorkPtr> work;
  for (int k = 0; k < kOps; ++k) {
    for (int64_t i = 0; i < N; ++i) bufs[k][i] = value(r, i, k);
    work.push_back(comm.all_reduce_async(bufs[k].data(), bufs[k].data(), N, DType::kF32, ReduceOp::kSum));
  }
  for (int k = kOps - 1; k >= 0; --k) work[k]->wait();  // reverse order
  for (int k = 0; k < kOps; ++k) {
    EXPECT_TRUE(work[k]->is_completed());
    for (int64_t i = 0; i < N; i += 997) {
      float ref = 0;
      for (int q = 0; q < n; ++q) ref += value(q, i, k);
      ASSERT_EQ(bufs[k][i], ref) << "op " << k << " i " << i;
    }
  }
}

TEST(CommStats, ByteCountersEqualTheRingFormulas) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int64_t n = comm.size();
  const int64_t N = 12345 * n;  // divisible, so the formulas are integers
  std::vector<float> a(N), b(N);
  comm.stats().reset();
  comm.all_reduce(a.data(), b.data(), N, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(comm.stats().totals().bytes, 2 * (n - 1) * N * 4 / n);
  comm.stats().reset();
  comm.reduce_scatter(a.data(), b.data(), N / n, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(comm.stats().totals().bytes, (n - 1) * N * 4 / n);
  comm.stats().reset();
  comm.all_gather(a.data(), b.data(), N / n, DType::kBF16);
  EXPECT_EQ(comm.stats().totals().bytes, (n - 1) * N * 2 / n);
  comm.stats().reset();
  comm.broadcast(a.data(), N, DType::kF32, 0);
  comm.barrier();
  const CommTotals t = comm.stats().totals();
  EXPECT_EQ(t.bytes, (n - 1) * N * 4 / n);
  EXPECT_EQ(t.calls, 2);
  EXPECT_GE(t.time_s, 0.0);
  EXPECT_GE(t.exposed_s, 0.0);
}

// Every R x S factorisation of the world size (on 4 ranks: 1x4, 2x2, 4x1;
// on 8: 1x8, 2x4, 4x2, 8x1): group membership, indices and sums.
TEST(Mesh, EveryShapeOfThisWorldSize) {
  const MpiEnv& env = test::env();
  const int W = env.size(), me = env.rank();
  for (int R = 1; R <= W; ++R) {
    if (W % R) continue;
    const int S = W / R;
    SCOPED_TRACE(::testing::Message() << "mesh " << R << "x" << S);
    DeviceMesh2D mesh(env, parse_mesh(fmt::format("{}x{}", R, S), W), CommBackend::kMpi);
    EXPECT_EQ(mesh.shape(), (MeshShape{R, S}));
    EXPECT_EQ(mesh.shard_group().size(), S);
    EXPECT_EQ(mesh.replicate_group().size(), R);
    EXPECT_EQ(mesh.world().size(), W);
    EXPECT_EQ(mesh.shard_index(), me % S);
    EXPECT_EQ(mesh.replica_index(), me / S);
    EXPECT_EQ(mesh.shard_group().rank(), me % S);
    EXPECT_EQ(mesh.replicate_group().rank(), me / S);
    // Sums over each group, async and issued on both groups before waiting.
    std::vector<float> x(1001, float(me)), s(1001), t(1001);
    auto ws = mesh.shard_group().all_reduce_async(x.data(), s.data(), x.size(), DType::kF32, ReduceOp::kSum);
    auto wt = mesh.replicate_group().all_reduce_async(x.data(), t.data(), x.size(), DType::kF32, ReduceOp::kSum);
    wt->wait();
    ws->wait();
    float want_s = 0, want_t = 0;
    for (int q = 0; q < W; ++q) {
      if (q / S == me / S) want_s += float(q);  // S consecutive ranks
      if (q % S == me % S) want_t += float(q);  // the same position in every group
    }
    EXPECT_EQ(s[1000], want_s);
    EXPECT_EQ(t[1000], want_t);
  }
}

TEST(Mesh, DefaultShapeIsNodesByRanksPerNode) {
  const MpiEnv& env = test::env();
  const MeshShape m = default_mesh(env);
  EXPECT_EQ(m.replicas * m.shard, env.size());
  if (env.uniform()) {
    EXPECT_EQ(m.replicas, env.num_nodes());
    EXPECT_EQ(m.shard, env.local_size());
  }
}

// How trainers count the ranks using one physical GPU (key: its UUID).
// The agreement helpers every rank decides a shared error with: the count
// and lowest rank of those where a condition holds, and that rank's string.
TEST(Agree, RanksWhereAndOneRanksString) {
  const int rank = test::env().rank(), size = test::env().size();
  const RanksWhere none = ranks_where(false, MPI_COMM_WORLD), all = ranks_where(true, MPI_COMM_WORLD);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.first, -1);
  EXPECT_EQ(all.count, size);
  EXPECT_EQ(all.first, 0);
  // The odd ranks (none on 1 rank); then the last rank alone.
  const RanksWhere odd = ranks_where(rank % 2 == 1, MPI_COMM_WORLD);
  EXPECT_EQ(odd.count, size / 2);
  EXPECT_EQ(odd.first, size > 1 ? 1 : -1);
  const RanksWhere last = ranks_where(rank == size - 1, MPI_COMM_WORLD);
  EXPECT_EQ(last.count, 1);
  EXPECT_EQ(last.first, size - 1);
  // Each rank's own string differs in length; root's arrives whole, the empty one too.
  for (int root = 0; root < size; ++root) {
    const std::string own = root == 0 && size > 1 ? std::string() : std::string(size_t(3 + rank * 5), char('a' + rank));
    const std::string want =
        root == 0 && size > 1 ? std::string() : std::string(size_t(3 + root * 5), char('a' + root));
    EXPECT_EQ(broadcast_string(own, root, MPI_COMM_WORLD), want) << "root " << root;
  }
}

TEST(NodeLayout, RanksOnTheNodeWithTheSameKey) {
  const MpiEnv& env = test::env();
  const NodeLayout node = node_layout(env.world());
  const int r = node.local_rank, n = node.local_size;
  EXPECT_EQ(ranks_on_node_with(env.world(), r % 2 ? "odd" : "even"), r % 2 ? n / 2 : (n + 1) / 2);
  EXPECT_EQ(ranks_on_node_with(env.world(), ""), n);
  EXPECT_EQ(ranks_on_node_with(env.world(), "gpu-" + std::to_string(r)), 1);
  // Only the first 64 characters count.
  EXPECT_EQ(ranks_on_node_with(env.world(), std::string(64, 'u') + std::to_string(r)), n);
}

TEST(Mesh, BadShapesAreClearErrors) {
  auto msg = [](const std::string& spec, int world) {
    try {
      parse_mesh(spec, world);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(msg("3x3", 4), "invalid mesh = '3x3': 3 x 3 = 9 ranks, but the world has 4");
  EXPECT_EQ(msg("2x", 4), "invalid mesh = '2x': expected RxS with positive integers, e.g. 2x4");
  EXPECT_EQ(msg("0x4", 4), "invalid mesh = '0x4': expected RxS with positive integers, e.g. 2x4");
  EXPECT_EQ(msg("ax2", 2), "invalid mesh = 'ax2': expected RxS with positive integers, e.g. 2x4");
  EXPECT_EQ(msg("2x2", 4), "");
  EXPECT_THROW(parse_comm_backend("gloo"), ConfigError);
}

TEST(Errors, MismatchedCountIsAnError) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<float> a(4);
  // More elements than MPI's int count can carry: refused before any rank sends.
  EXPECT_THROW(comm.all_reduce_async(a.data(), a.data(), size_t(1) << 33, DType::kF32, ReduceOp::kSum),
               InternalError);
  EXPECT_THROW(comm.broadcast_async(a.data(), 4, DType::kF32, comm.size()), InternalError);
}

}  // namespace
}  // namespace gpt

namespace gpt {
namespace {

// A rank that never joins (its host stuck) makes a bounded wait end in
// StuckError after the watchdog's timeout, on the communicator's work and
// on the trainer's own host collectives (comm/mpi_wait.hpp); without a
// watchdog they would block forever. Rank 0 waits; the last rank joins
// only after rank 0 has given up, so every collective completes and the
// test ends cleanly.
class StuckPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  }
  void TearDown() override { set_watchdog({}); }
  // Rank 0 runs wait() under a 1 s watchdog and expects StuckError naming
  // `what`; the last rank runs join() after rank 0 has given up.
  void expect_stuck(const std::function<void()>& wait, const std::function<void()>& join, const std::string& what) {
    const int late = size_ - 1;
    if (rank_ == 0) {
      set_watchdog({1.0, {}});
      const auto start = std::chrono::steady_clock::now();
      try {
        wait();
        ADD_FAILURE() << "the wait returned although rank " << late << " never joined";
      } catch (const StuckError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("waited 1 s for " + what), std::string::npos) << m;
        EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
      }
      set_watchdog({});
      MPI_Send(nullptr, 0, MPI_BYTE, late, 0, MPI_COMM_WORLD);  // rank 0 gave up: join now
    } else if (rank_ == late) {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      join();
    } else {
      wait();  // the other ranks join at once; their wait completes when the last rank joins
    }
  }
  int rank_ = 0, size_ = 1;
};

TEST_F(StuckPeer, CommunicatorWorkWaitEndsInStuckError) {
  MpiCommunicator comm{MPI_COMM_WORLD};
  float x = 1.f, y = 0.f;
  WorkPtr w;
  auto issue = [&] { w = comm.all_reduce_async(&x, &y, 1, DType::kF32, ReduceOp::kSum); };
  expect_stuck([&] { issue(), w->wait(); }, [&] { issue(), w->wait(); }, "an MPI collective (all_reduce)");
  if (rank_ == 0) w->wait();  // the late rank has joined: it completes now
  EXPECT_EQ(y, float(size_));
}

TEST_F(StuckPeer, HostAllreduceEndsInStuckError) {
  double x = 1.0;
  MPI_Request r = MPI_REQUEST_NULL;
  expect_stuck(
      [&] {
        GPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r));
        wait_request(&r, "the loss mean over ranks");
      },
      [&] { bounded_allreduce(&x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, "the loss mean over ranks"); },
      "the loss mean over ranks");
  if (rank_ == 0) wait_request(&r, "the loss mean over ranks");  // completes now the late rank has joined
  EXPECT_EQ(x, double(size_));
}

}  // namespace
}  // namespace gpt
