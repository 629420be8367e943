// cuDNN's fused attention through its backend graph API (attention_cudnn.hpp).
#include "model/cuda/attention_cudnn.hpp"

#include "model/cuda/check.hpp"

#ifndef GPT_HAVE_CUDNN

namespace gpt::cuda {
namespace {
[[noreturn]] void not_built() {
  throw_error("cuDNN's attention is not in this build (cuDNN's headers were not found)");
}
}  // namespace
bool cudnn_attention_built() { return false; }
std::string cudnn_attention_unavailable() {
  return "this backend has no cuDNN attention (no cuDNN headers at build time, or the emulated backend)";
}
std::string cudnn_attention_unavailable(const AttentionShape&, bool) { return cudnn_attention_unavailable(); }
std::string cudnn_attention_library() { return ""; }
bool cudnn_attention_supported(const AttentionShape&) { return false; }
int64_t cudnn_attention_forward_workspace(const AttentionShape&) { not_built(); }
int64_t cudnn_attention_backward_workspace(const AttentionShape&) { not_built(); }
void cudnn_attention_forward(bf16*, float*, const bf16*, const AttentionShape&, void*, int64_t, cudaStream_t) {
  not_built();
}
void cudnn_attention_backward(bf16*, const bf16*, const bf16*, const bf16*, const float*, const AttentionShape&, void*,
                              int64_t, cudaStream_t) {
  not_built();
}
CudnnAttentionPlan cudnn_attention_plan(const AttentionShape&, bool, const std::string&) { not_built(); }
}  // namespace gpt::cuda

#else

#include <fmt/format.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "model/attention_ds.hpp"
#include "model/cuda/cudnn_api.hpp"

namespace gpt::cuda {
namespace {

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char last[512] = {};
  cudnn().get_last_error_string(last, sizeof last);
  throw_error(fmt::format("cuDNN attention: {}: {}{}{}", what, cudnn().get_error_string(status), *last ? ": " : "",
                          last));
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
    check(cudnn().create_descriptor(type, &d_), name_ + ": create");
  }
  ~Desc() {
    if (d_) cudnn().destroy_descriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  const cudnnBackendDescriptor_t* ptr() const { return &d_; }
  template <typename V>
  Desc& set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, const V* values, int64_t n = 1) {
    check(cudnn().set_attribute(d_, attr, type, n, values), fmt::format("{}: attribute {}", name_, int(attr)));
    return *this;
  }
  Desc& desc(cudnnBackendAttributeName_t attr, const Desc& other) {
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, other.ptr());
  }
  Desc& finalize() {
    check(cudnn().finalize(d_), name_ + ": finalize");
    return *this;
  }
  // Finalizes, returning the status instead of throwing.
  cudnnStatus_t try_finalize() { return cudnn().finalize(d_); }

 private:
  std::string name_;
  cudnnBackendDescriptor_t d_ = nullptr;
};
using DescPtr = std::unique_ptr<Desc>;

using Dims = std::vector<int64_t>;

// The operations of one graph and the descriptors they refer to.
class Graph {
 public:
  const Desc& tensor(const char* name, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool virt,
                     int64_t uid = 0, bool by_value = false,
                     cudnnBackendTensorReordering_t reordering = CUDNN_TENSOR_REORDERING_NONE) {
    auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR, name);
    const int64_t id = uid ? uid : next_uid_++, align = 16;
    const bool is_virtual = virt, is_by_value = by_value;
    t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), int64_t(dims.size()))
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), int64_t(strides.size()))
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &id)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &is_by_value);
    if (reordering != CUDNN_TENSOR_REORDERING_NONE)
      t->set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &reordering);
    t->finalize();
    return keep(std::move(t));
  }
  // A scalar passed by value (the variant pack points at a host float).
  const Desc& scalar(const char* name, int64_t uid) {
    return tensor(name, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, uid, true);
  }
  // c = a b over the last two dimensions, fp32 accumulation.
  void matmul(const char* name, const Desc& a, const Desc& b, const Desc& c) {
    auto m = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name);
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    m->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32).finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
    op->desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, *m)
        .finalize();
    keep(std::move(m));
    ops_.push_back(std::move(op));
  }
  // y = mode(x[, b[, t]]); axis for GEN_INDEX.
  void pointwise(const char* name, cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc* t,
                 const Desc& y, cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    auto p = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
    p->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (axis >= 0) p->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    p->finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
    op->desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *p).desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op->desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op->desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op->desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize();
    keep(std::move(p));
    ops_.push_back(std::move(op));
  }
  // y = the sum or maximum of x over the dimensions where y has extent 1.
  void reduction(const char* name, cudnnReduceTensorOp_t op_type, const Desc& x, const Desc& y) {
    auto r = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name);
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    r->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &op_type)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32)
        .finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, name);
    op->desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *r)
        .finalize();
    keep(std::move(r));
    ops_.push_back(std::move(op));
  }
  // y: x's elements under y's dimensions and strides (a transpose here).
  void reshape(const char* name, const Desc& x, const Desc& y) {
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
    op->desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y).finalize();
    ops_.push_back(std::move(op));
  }
  // Finalizes the operation graph of the operations added so far.
  void finish(const char* name) {
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const DescPtr& op : ops_) raw.push_back(op->get());
    graph_ = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, name);
    graph_->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(), int64_t(raw.size()))
        .finalize();
  }
  // The operation graph (after finish). It refers to the operations and
  // tensors this object owns, so it lives as long as they do.
  const Desc& graph() const { return *graph_; }

 private:
  const Desc& keep(DescPtr d) {
    kept_.push_back(std::move(d));
    return *kept_.back();
  }
  std::vector<DescPtr> kept_, ops_;
  DescPtr graph_;
  int64_t next_uid_ = 1000;
};

// The tensors' unique ids: what the variant pack binds pointers to.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kDO, kDQ, kDK, kDV, kOne, kDQAccum };

struct Layout {
  int64_t B, NH, T, HS, C;
  explicit Layout(const AttentionShape& s) : B(s.B), NH(s.NH), T(s.T), HS(s.C / s.NH), C(s.C) {}
  // Head h of q, k or v (or of their gradients) in qkv[B, T, 3C]: [B, NH, T, HS].
  Dims head_dims() const { return {B, NH, T, HS}; }
  Dims qkv_strides() const { return {T * 3 * C, HS, 3 * C, 1}; }
  // The same heads transposed, [B, NH, HS, T] (K^T, V^T).
  Dims t_dims() const { return {B, NH, HS, T}; }
  Dims qkv_t_strides() const { return {T * 3 * C, HS, 1, 3 * C}; }
  Dims out_strides() const { return {T * C, HS, C, 1}; }  // out[B, T, C]
  Dims dense(const Dims& d) const { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
  Dims rows() const { return {B, NH, T, 1}; }  // lse and softmax_sum: [B, NH, T]
  Dims rows_strides() const { return {NH * T, T, 1, 1}; }
  Dims scores() const { return {B, NH, T, T}; }
  Dims scores_strides() const { return {NH * T * T, T * T, T, 1}; }
  Dims scores_t_strides() const { return {NH * T * T, T * T, 1, T}; }  // the scores transposed, in place
};

// S (virtual) masked causally: row >= column keeps it, the rest gets the lowest float.
const Desc& causal_mask(Graph& g, const Layout& l, const Desc& s) {
  const Dims sd = l.scores(), ss = l.scores_strides();
  const Desc& row = g.tensor("row", CUDNN_DATA_INT32, sd, ss, true);
  g.pointwise("gen_row", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_INT32, 2);
  const Desc& col = g.tensor("col", CUDNN_DATA_INT32, sd, ss, true);
  g.pointwise("gen_col", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_INT32, 3);
  const Desc& keep = g.tensor("row_ge_col", CUDNN_DATA_BOOLEAN, sd, ss, true);
  g.pointwise("row_ge_col", CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep, CUDNN_DATA_BOOLEAN);
  const Desc& low = g.scalar("lowest", kNegInf);
  const Desc& out = g.tensor("s_masked", CUDNN_DATA_FLOAT, sd, ss, true);
  g.pointwise("causal_select", CUDNN_POINTWISE_BINARY_SELECT, s, &low, &keep, out);
  return out;
}

Graph forward_graph(const Layout& l) {
  Graph g;
  const auto bf16_t = CUDNN_DATA_BFLOAT16, fp32 = CUDNN_DATA_FLOAT;
  const Dims sd = l.scores(), ss = l.scores_strides(), rd = l.rows(), rs = l.rows_strides();
  const Desc& q = g.tensor("q", bf16_t, l.head_dims(), l.qkv_strides(), false, kQ);
  const Desc& kt = g.tensor("k^T", bf16_t, l.t_dims(), l.qkv_t_strides(), false, kK);
  const Desc& v = g.tensor("v", bf16_t, l.head_dims(), l.qkv_strides(), false, kV);
  const Desc& o = g.tensor("out", bf16_t, l.head_dims(), l.out_strides(), false, kO);
  const Desc& stats = g.tensor("lse", fp32, rd, rs, false, kStats);
  const Desc& scale = g.scalar("scale", kScale);
  const Desc& s = g.tensor("s", fp32, sd, ss, true);
  g.matmul("q_kt", q, kt, s);
  const Desc& s_scaled = g.tensor("s_scaled", fp32, sd, ss, true);
  g.pointwise("scale", CUDNN_POINTWISE_MUL, s, &scale, nullptr, s_scaled);
  const Desc& masked = causal_mask(g, l, s_scaled);
  const Desc& max = g.tensor("max", fp32, rd, rs, true);
  g.reduction("max", CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const Desc& shifted = g.tensor("shifted", fp32, sd, ss, true);
  g.pointwise("sub_max", CUDNN_POINTWISE_SUB, masked, &max, nullptr, shifted);
  const Desc& e = g.tensor("exp", fp32, sd, ss, true);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
  const Desc& sum = g.tensor("sum", fp32, rd, rs, true);
  g.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const Desc& log_sum = g.tensor("log_sum", fp32, rd, rs, true);
  g.pointwise("log", CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log_sum);
  g.pointwise("lse", CUDNN_POINTWISE_ADD, max, &log_sum, nullptr, stats);
  const Desc& p = g.tensor("p", bf16_t, sd, ss, true);  // P V's left operand in the i/o type
  g.pointwise("div", CUDNN_POINTWISE_DIV, e, &sum, nullptr, p);
  g.matmul("p_v", p, v, o);
  g.finish("attention forward");
  return g;
}

Graph backward_graph(const Layout& l) {
  Graph g;
  const auto bf16_t = CUDNN_DATA_BFLOAT16, fp32 = CUDNN_DATA_FLOAT;
  const Dims hd = l.head_dims(), sd = l.scores(), ss = l.scores_strides(), rd = l.rows(), rs = l.rows_strides();
  const Desc& q = g.tensor("q", bf16_t, hd, l.qkv_strides(), false, kQ);
  const Desc& kt = g.tensor("k^T", bf16_t, l.t_dims(), l.qkv_t_strides(), false, kK);
  const Desc& vt = g.tensor("v^T", bf16_t, l.t_dims(), l.qkv_t_strides(), false, kV);
  const Desc& o = g.tensor("out", bf16_t, hd, l.out_strides(), false, kO);
  const Desc& dout = g.tensor("dout", bf16_t, hd, l.out_strides(), false, kDO);
  const Desc& stats = g.tensor("lse", fp32, rd, rs, false, kStats);
  const Desc& dq = g.tensor("dq", bf16_t, hd, l.qkv_strides(), false, kDQ);
  const Desc& dk = g.tensor("dk", bf16_t, hd, l.qkv_strides(), false, kDK);
  const Desc& dv = g.tensor("dv", bf16_t, hd, l.qkv_strides(), false, kDV);
  const Desc& scale = g.scalar("scale", kScale);
  const Desc& one = g.scalar("one", kOne);
  // dQ's fp32 accumulator, in the engine's own 16x16-tile order (as cuDNN's
  // frontend declares it): only the engine reads and writes it. In memory,
  // not virtual: that is what gets an H100 cuDNN's sm90 backward (virtual,
  // cuDNN 9.19 plans its sm80 kernel there; test_cudnn_attention).
  const Desc& dq_accum =
      g.tensor("dq_accum", fp32, hd, l.dense(hd), false, kDQAccum, false, CUDNN_TENSOR_REORDERING_F16x16);
  // softmax_sum = rowsum(dO * O) * 1 (our kernels' delta; the factor is
  // dropout's, which the fused engines' pattern has).
  const Desc& do_o = g.tensor("dout_out", fp32, hd, l.dense(hd), true);
  g.pointwise("dout_out", CUDNN_POINTWISE_MUL, dout, &o, nullptr, do_o);
  const Desc& rowsum = g.tensor("rowsum", fp32, rd, rs, true);
  g.reduction("rowsum", CUDNN_REDUCE_TENSOR_ADD, do_o, rowsum);
  const Desc& softmax_sum = g.tensor("softmax_sum", fp32, rd, rs, true);
  g.pointwise("softmax_sum", CUDNN_POINTWISE_MUL, rowsum, &one, nullptr, softmax_sum);
  // P = exp(mask(scale * Q K^T) - lse).
  const Desc& s = g.tensor("s", fp32, sd, ss, true);
  g.matmul("q_kt", q, kt, s);
  const Desc& s_scaled = g.tensor("s_scaled", fp32, sd, ss, true);
  g.pointwise("scale", CUDNN_POINTWISE_MUL, s, &scale, nullptr, s_scaled);
  const Desc& masked = causal_mask(g, l, s_scaled);
  const Desc& s_shifted = g.tensor("s_shifted", fp32, sd, ss, true);
  g.pointwise("sub_lse", CUDNN_POINTWISE_SUB, masked, &stats, nullptr, s_shifted);
  const Desc& p = g.tensor("p", fp32, sd, ss, true);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, s_shifted, nullptr, nullptr, p);
  // dV = P^T dO.
  const Desc& pt = g.tensor("p^T", bf16_t, sd, l.scores_t_strides(), true);
  g.reshape("p^T", p, pt);
  g.matmul("pt_dout", pt, dout, dv);
  // dS = scale * P * (dO V^T * 1 - softmax_sum) (the factor: dropout's mask).
  const Desc& dp = g.tensor("dp", fp32, sd, ss, true);
  g.matmul("dout_vt", dout, vt, dp);
  const Desc& dp_one = g.tensor("dp_one", fp32, sd, ss, true);
  g.pointwise("dp_one", CUDNN_POINTWISE_MUL, dp, &one, nullptr, dp_one);
  const Desc& dp_shifted = g.tensor("dp_shifted", fp32, sd, ss, true);
  g.pointwise("sub_softmax_sum", CUDNN_POINTWISE_SUB, dp_one, &softmax_sum, nullptr, dp_shifted);
  const Desc& dp_p = g.tensor("dp_p", fp32, sd, ss, true);
  g.pointwise("mul_p", CUDNN_POINTWISE_MUL, dp_shifted, &p, nullptr, dp_p);
  const Desc& ds = g.tensor("ds", fp32, sd, ss, true);
  g.pointwise("mul_scale", CUDNN_POINTWISE_MUL, dp_p, &scale, nullptr, ds);
  // dK = dS^T Q.
  const Desc& dst = g.tensor("ds^T", bf16_t, sd, l.scores_t_strides(), true);
  g.reshape("ds^T", ds, dst);
  g.matmul("dst_q", dst, q, dk);
  // dQ = dS K, through the fp32 accumulator.
  const Desc& k = g.tensor("k", bf16_t, hd, l.qkv_strides(), true);
  g.reshape("k", kt, k);
  g.matmul("ds_k", ds, k, dq_accum);
  g.pointwise("dq", CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
  g.finish("attention backward");
  return g;
}

// The engine configurations cuDNN's heuristics offer for `graph` on the
// device `devprop` describes, after its support checks.
std::vector<DescPtr> engine_configs(const Desc& graph, const Desc& devprop, const char* what) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, fmt::format("{} heuristics", what));
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode)
      .desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, devprop)
      .finalize();
  int64_t n = 0;
  check(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                              nullptr),
        fmt::format("{}: count of engine configurations", what));
  std::vector<DescPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < n; ++i) {
    configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what));
    raw.push_back(configs.back()->get());
  }
  int64_t got = 0;
  if (n > 0)
    check(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                raw.data()),
          fmt::format("{}: engine configurations", what));
  configs.resize(size_t(got));
  return configs;
}

void check_version() {
  const size_t v = cudnn().get_version();
  if (v < 90800)
    throw_error(fmt::format("cuDNN attention needs cuDNN 9.8 or newer; {} is {}.{}.{}", cudnn().path, v / 10000,
                            v / 100 % 100, v % 100));
}

std::string unsupported_shape(const AttentionShape& s) {
  return fmt::format("head size {} (C = {}, {} heads) is not supported: a multiple of 8 up to 128",
                     s.NH > 0 ? s.C / s.NH : 0, s.C, s.NH);
}

void check_shape(const AttentionShape& s) {
  if (!cudnn_attention_supported(s)) throw_error("cuDNN attention: " + unsupported_shape(s));
}

// One direction's execution plan at one shape on one device, with what it
// refers to (the graph and the engine configuration, kept alive with it),
// the softmax scale its variant packs point at, and the variant packs made
// for the sets of buffers it has run on.
struct Plan {
  Graph graph;
  DescPtr config, plan;
  float scale = 0;
  int64_t engine_workspace = 0;
  static constexpr size_t kPointers = 16;  // the backward's 13 tensors and the workspace
  using Key = std::array<const void*, kPointers>;
  std::vector<std::pair<Key, DescPtr>> packs;
};

struct PerDevice {
  cudnnHandle_t handle = nullptr;
  DescPtr devprop;
  // (B, T, C, NH, backward); a std::map, so a plan's address (and its scale's) stays put.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, Plan> plans;
};

// Process-wide: a handle, a device description and the plans per device.
// Never destroyed: cuDNN's handles must not outlive the CUDA context, and
// static destruction order cannot promise that.
std::mutex g_mutex;
std::map<int, PerDevice>& devices() {
  static auto* d = new std::map<int, PerDevice>();
  return *d;
}

PerDevice& this_device() {
  int dev = 0;
  GPT_CUDA_OK(cudaGetDevice(&dev));
  PerDevice& d = devices()[dev];
  if (!d.handle) {
    check_version();
    check(cudnn().create(&d.handle), "cudnnCreate");
    d.devprop = std::make_unique<Desc>(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
    d.devprop->set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, &d.handle).finalize();
  }
  return d;
}

// The first of `configs` (cuDNN's heuristics' order) whose execution plan
// finalizes for the device `devprop` describes, as plan_for and the
// deviceless check (cudnn_attention_plan) both choose it. `handle`: the
// handle it will run with, or null for a plan built without a device.
struct Finalized {
  DescPtr plan;                                 // null when none finalized
  size_t index = 0;                             // which of `configs`
  int64_t workspace = 0;                        // the engine's, in bytes
  std::string why = "no engine configuration";  // when none finalized: the last one's reason
};
Finalized first_plan(const std::vector<DescPtr>& configs, const Desc& devprop, cudnnHandle_t* handle,
                     const char* what) {
  Finalized out;
  for (size_t i = 0; i < configs.size(); ++i) {
    auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what);
    plan->desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i])
        .desc(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, devprop);
    // And the handle it will run with: deprecated since the device properties
    // (cuDNN 9.8), but what the frontend and other bindings set when a device
    // is at hand, so the most trodden path.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    if (handle) plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle);
#pragma GCC diagnostic pop
    const cudnnStatus_t status = plan->try_finalize();
    if (status != CUDNN_STATUS_SUCCESS) {
      char last[512] = {};
      cudnn().get_last_error_string(last, sizeof last);
      out.why = fmt::format("{}: {}", cudnn().get_error_string(status), last);
      continue;
    }
    check(cudnn().get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, nullptr,
                                &out.workspace),
          fmt::format("{}: workspace size", what));
    out.plan = std::move(plan);
    out.index = i;
    return out;
  }
  return out;
}

// The plan for one direction at shape s on device d (built on first use).
Plan& plan_for(PerDevice& d, const AttentionShape& s, bool backward) {
  check_shape(s);
  Plan& p = d.plans[{s.B, s.T, s.C, s.NH, backward}];
  if (p.plan) return p;
  const char* what = backward ? "attention backward" : "attention forward";
  const Layout l(s);
  p.graph = backward ? backward_graph(l) : forward_graph(l);
  p.scale = 1.f / std::sqrt(float(l.HS));
  std::vector<DescPtr> configs = engine_configs(p.graph.graph(), *d.devprop, what);
  Finalized f = first_plan(configs, *d.devprop, &d.handle, what);
  if (f.plan) {
    p.plan = std::move(f.plan);
    p.config = std::move(configs[f.index]);
    p.engine_workspace = f.workspace;
    return p;
  }
  d.plans.erase({s.B, s.T, s.C, s.NH, backward});
  throw_error(fmt::format("cuDNN attention: no engine runs the {} graph at B={} T={} C={} heads={} ({} offered; the "
                          "last: {})",
                          backward ? "backward" : "forward", s.B, s.T, s.C, s.NH, configs.size(), f.why));
}

int64_t backward_data_bytes(const AttentionShape& s) {
  return attention_cudnn_backward_data_bytes(s.B, s.T, s.C);
}

// Runs `p` with the tensors `uids` bound to `ptrs` (a variant pack made once
// per set of pointers; a call with a known set allocates nothing).
void execute(PerDevice& dev, Plan& p, std::initializer_list<int64_t> uids, std::initializer_list<void*> ptrs,
             void* workspace, cudaStream_t stream) {
  Plan::Key key{};
  size_t i = 0;
  for (void* ptr : ptrs) key[i++] = ptr;
  key[Plan::kPointers - 1] = workspace;
  const Desc* pack = nullptr;
  for (const auto& [k, d] : p.packs)
    if (k == key) pack = d.get();
  if (!pack) {
    auto d = std::make_unique<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    d->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.begin(), int64_t(uids.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.begin(), int64_t(ptrs.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace)
        .finalize();
    pack = d.get();
    p.packs.emplace_back(key, std::move(d));
  }
  check(cudnn().set_stream(dev.handle, stream), "cudnnSetStream");
  check(cudnn().execute(dev.handle, p.plan->get(), pack->get()), "execute");
}

void check_workspace(const char* what, int64_t have, int64_t need, const void* ptr) {
  if (have < need || reinterpret_cast<uintptr_t>(ptr) % kAttentionCudnnAlign != 0)
    throw_error(fmt::format("cuDNN attention {}: a workspace of {} bytes at {}, {} bytes 256-byte aligned needed",
                            what, have, ptr, need));
}

// The by-value scalars: the variant packs point at these.
const float kLowest = -FLT_MAX, kOneValue = 1.f;

}  // namespace

bool cudnn_attention_built() { return true; }

std::string cudnn_attention_unavailable() {
  try {
    check_version();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string cudnn_attention_unavailable(const AttentionShape& s, bool backward) {
  std::string why = cudnn_attention_unavailable();
  if (!why.empty()) return why;
  if (!cudnn_attention_supported(s)) return unsupported_shape(s);
  try {
    cudnn_attention_forward_workspace(s);
    if (backward) cudnn_attention_backward_workspace(s);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string cudnn_attention_library() {
  if (!cudnn_attention_unavailable().empty()) return "";
  const size_t v = cudnn().get_version();
  return fmt::format("cuDNN {}.{}.{} ({})", v / 10000, v / 100 % 100, v % 100, cudnn().path);
}

bool cudnn_attention_supported(const AttentionShape& s) {
  if (s.NH <= 0 || s.C % s.NH != 0) return false;
  const int64_t hs = s.C / s.NH;
  return hs % 8 == 0 && hs <= 128 && s.C % 8 == 0;
}

int64_t cudnn_attention_forward_workspace(const AttentionShape& s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return attention_cudnn_aligned(plan_for(this_device(), s, false).engine_workspace);
}

int64_t cudnn_attention_backward_workspace(const AttentionShape& s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return attention_cudnn_aligned(plan_for(this_device(), s, true).engine_workspace) + backward_data_bytes(s);
}

void cudnn_attention_forward(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, void* workspace,
                             int64_t workspace_bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  PerDevice& d = this_device();
  Plan& p = plan_for(d, s, false);
  check_workspace("forward", workspace_bytes, attention_cudnn_aligned(p.engine_workspace), workspace);
  auto* x = const_cast<bf16*>(qkv);
  execute(d, p, {kQ, kK, kV, kO, kStats, kScale, kNegInf},
          {x, x + s.C, x + 2 * s.C, out, lse, &p.scale, const_cast<float*>(&kLowest)}, workspace, stream);
}

void cudnn_attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                              const AttentionShape& s, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  PerDevice& d = this_device();
  Plan& p = plan_for(d, s, true);
  const int64_t engine = attention_cudnn_aligned(p.engine_workspace);
  check_workspace("backward", workspace_bytes, engine + backward_data_bytes(s), workspace);
  char* accum = static_cast<char*>(workspace) + engine;
  // The engine adds each key tile's share of dQ into the fp32 accumulator
  // (atomics) and converts it into dQ at the end: it must start at zero, on
  // every call (as cuDNN's frontend and Transformer Engine zero it).
  GPT_CUDA_OK(cudaMemsetAsync(accum, 0, size_t(backward_data_bytes(s)), stream));
  auto* x = const_cast<bf16*>(qkv);
  execute(d, p, {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kNegInf, kOne, kDQAccum},
          {x, x + s.C, x + 2 * s.C, const_cast<bf16*>(out), const_cast<bf16*>(dout), const_cast<float*>(lse), dqkv,
           dqkv + s.C, dqkv + 2 * s.C, &p.scale, const_cast<float*>(&kLowest), const_cast<float*>(&kOneValue), accum},
          workspace, stream);
}

CudnnAttentionPlan cudnn_attention_plan(const AttentionShape& s, bool backward, const std::string& device_json) {
  check_shape(s);
  check_version();
  const char* what = backward ? "attention backward" : "attention forward";
  Desc devprop(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
  devprop.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, device_json.data(),
              int64_t(device_json.size()))
      .finalize();
  const Layout l(s);
  const Graph graph = backward ? backward_graph(l) : forward_graph(l);
  const std::vector<DescPtr> configs = engine_configs(graph.graph(), devprop, what);
  const Finalized f = first_plan(configs, devprop, nullptr, what);
  CudnnAttentionPlan out;
  out.configs = int64_t(configs.size());
  out.chosen = f.plan ? int64_t(f.index) : -1;
  out.engine_workspace = f.workspace;
  out.why = f.plan ? "" : f.why;
  return out;
}

}  // namespace gpt::cuda

#endif  // GPT_HAVE_CUDNN
