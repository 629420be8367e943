#include <initializer_list>
#include <string>
#include <type_traits>

#include "model/cuda/attention.hpp"
#include "model/cuda/attention_tc.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/dtype.cuh"

namespace gpt::cuda {
namespace {

constexpr int kTile = 32;        // rows per tile = lanes per warp
constexpr int kFwdWarps = 4;     // forward: query tiles per block, sharing each key/value tile

// Forward. Block: kFwdWarps warps, 32 query rows each (lane = query row), of
// one (b, h). Key/value tiles of 32 rows are loaded to shared memory by the
// whole block; each lane runs the online softmax over the keys <= its row.
template <typename T, int HS>
__global__ void __launch_bounds__(32 * kFwdWarps)
    attention_forward_kernel(T* out, float* lse, const T* qkv, int Tn, int C, int NH, float scale) {
  __shared__ float ks[kTile][HS];
  __shared__ float vs[kTile][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int block_q0 = blockIdx.x * kTile * kFwdWarps;
  const int i = block_q0 + warp * kTile + lane;  // this lane's query row
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;

  float q[HS], o[HS];
  const bool active = i < Tn;
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
    o[d] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int last_row = min(Tn - 1, block_q0 + kTile * kFwdWarps - 1);
  for (int j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * HS; e += blockDim.x) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncthreads();
    if (!active) continue;
    const int jmax = min(kTile, i - j0 + 1);  // keys j0 .. min(i, j0+31)
    for (int r = 0; r < jmax; ++r) {
      float s = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) s += q[d] * ks[r][d];
      if (s > m) {
        const float corr = expf(m - s);  // 0 on the first key (m = -inf)
        l = l * corr + 1.f;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] = o[d] * corr + vs[r][d];
        m = s;
      } else {
        const float p = expf(s - m);
        l += p;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] += p * vs[r][d];
      }
    }
  }
  if (!active) return;
  const float inv = 1.f / l;
  T* dst = out + (int64_t(b) * Tn + i) * C + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) dst[d] = store<T>(o[d] * inv);
  lse[int64_t(bh) * Tn + i] = m + logf(l);
}

// delta[b, h, i] = sum_d dout[i, d] * out[i, d] (the softmax backward's
// row term), one thread per (b, h, i).
template <typename T, int HS>
__global__ void attention_delta_kernel(float* delta, const T* dout, const T* out, int Tn, int C, int NH, int64_t n) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int64_t i = idx % Tn, bh = idx / Tn, b = bh / NH, h = bh % NH;
  const int64_t off = (b * Tn + i) * C + h * HS;
  float s = 0.f;
  for (int d = 0; d < HS; ++d) s += f32(dout[off + d]) * f32(out[off + d]);
  delta[idx] = s;
}

// dk, dv. Block: one warp, 32 key rows of one (b, h) (lane = key row).
// Query tiles from the key tile's start to the end of the sequence.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                           const float* delta, int Tn, int C, int NH, float scale) {
  __shared__ float kown[kTile][HS + 1];  // this lane's k and v rows (padded: lanes read different rows)
  __shared__ float vown[kTile][HS + 1];
  __shared__ float qs[kTile][HS];  // query tile (broadcast reads)
  __shared__ float dos[kTile][HS];
  __shared__ float lse_s[kTile], delta_s[kTile];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int j0 = blockIdx.x * kTile, j = j0 + lane;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = j < Tn;
  for (int d = 0; d < HS; ++d) {
    kown[lane][d] = active ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
    vown[lane][d] = active ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
  }
  float dk[HS], dv[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dk[d] = dv[d] = 0.f;
  for (int i0 = j0; i0 < Tn; i0 += kTile) {
    __syncwarp();
    for (int e = lane; e < kTile * HS; e += 32) {
      const int r = e / HS, d = e % HS, i = i0 + r;
      qs[r][d] = i < Tn ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
      dos[r][d] = i < Tn ? f32(dbase[int64_t(i) * C + d]) : 0.f;
    }
    if (i0 + lane < Tn) {
      lse_s[lane] = lse[int64_t(bh) * Tn + i0 + lane];
      delta_s[lane] = delta[int64_t(bh) * Tn + i0 + lane];
    }
    __syncwarp();
    if (!active) continue;
    const int rmax = min(kTile, Tn - i0);
    for (int r = 0; r < rmax; ++r) {
      if (i0 + r < j) continue;  // causal: query i sees key j only if j <= i
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += qs[r][d] * kown[lane][d];
        dp += dos[r][d] * vown[lane][d];
      }
      const float p = expf(s - lse_s[r]);
      const float ds = p * (dp - delta_s[r]);
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        dv[d] += p * dos[r][d];
        dk[d] += ds * qs[r][d];  // qs already carries the 1/sqrt(hs) scale
      }
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + j) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    dst[C + d] = store<T>(dk[d]);
    dst[2 * C + d] = store<T>(dv[d]);
  }
}

// dq. Block: one warp, 32 query rows of one (b, h) (lane = query row).
// Key tiles from 0 to the query tile's end.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                          const float* delta, int Tn, int C, int NH, float scale) {
  __shared__ float qown[kTile][HS + 1];
  __shared__ float doown[kTile][HS + 1];
  __shared__ float ks[kTile][HS];
  __shared__ float vs[kTile][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int i0 = blockIdx.x * kTile, i = i0 + lane;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = i < Tn;
  for (int d = 0; d < HS; ++d) {
    qown[lane][d] = active ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
    doown[lane][d] = active ? f32(dbase[int64_t(i) * C + d]) : 0.f;
  }
  const float my_lse = active ? lse[int64_t(bh) * Tn + i] : 0.f;
  const float my_delta = active ? delta[int64_t(bh) * Tn + i] : 0.f;
  float dq[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dq[d] = 0.f;
  const int last = min(Tn - 1, i0 + kTile - 1);
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncwarp();
    for (int e = lane; e < kTile * HS; e += 32) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncwarp();
    if (!active) continue;
    const int rmax = min(kTile, i - j0 + 1);
    for (int r = 0; r < rmax; ++r) {
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += qown[lane][d] * ks[r][d];
        dp += doown[lane][d] * vs[r][d];
      }
      const float ds = expf(s - my_lse) * (dp - my_delta);
#pragma unroll
      for (int d = 0; d < HS; ++d) dq[d] += ds * ks[r][d];
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + i) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int d = 0; d < HS; ++d) dst[d] = store<T>(dq[d] * scale);
}

template <typename T, int HS>
void forward_hs(T* out, float* lse, const T* qkv, const AttentionShape& s, cudaStream_t stream) {
  const int rows_per_block = kTile * kFwdWarps;
  dim3 grid(unsigned((s.T + rows_per_block - 1) / rows_per_block), unsigned(s.B * s.NH));
  attention_forward_kernel<T, HS><<<grid, 32 * kFwdWarps, 0, stream>>>(out, lse, qkv, int(s.T), int(s.C),
                                                                        int(s.NH), 1.f / sqrtf(float(HS)));
  GPT_CUDA_LAUNCHED();
}

template <typename T, int HS>
void delta_hs(float* delta, const T* dout, const T* out, const AttentionShape& s, cudaStream_t stream) {
  const int64_t rows = s.B * s.NH * s.T;
  attention_delta_kernel<T, HS><<<blocks_for(rows, 256), 256, 0, stream>>>(delta, dout, out, int(s.T), int(s.C),
                                                                           int(s.NH), rows);
  GPT_CUDA_LAUNCHED();
}

template <typename T, int HS>
void backward_hs(T* dqkv, const float* delta, const T* dout, const T* qkv, const float* lse, const AttentionShape& s,
                 cudaStream_t stream) {
  dim3 grid(unsigned((s.T + kTile - 1) / kTile), unsigned(s.B * s.NH));
  const float scale = 1.f / sqrtf(float(HS));
  attention_dkv_kernel<T, HS><<<grid, 32, 0, stream>>>(dqkv, dout, qkv, lse, delta, int(s.T), int(s.C), int(s.NH),
                                                      scale);
  GPT_CUDA_LAUNCHED();
  attention_dq_kernel<T, HS><<<grid, 32, 0, stream>>>(dqkv, dout, qkv, lse, delta, int(s.T), int(s.C), int(s.NH),
                                                     scale);
  GPT_CUDA_LAUNCHED();
}

void require_head_size(const AttentionShape& s) {
  if (!attention_supported(s.C / s.NH))
    throw_error("attention head size " + std::to_string(s.C / s.NH) + " is not supported on cuda (32 or 64)");
}

// Whether to run the tensor-core kernels on these buffers.
template <typename T>
bool use_tensor_cores(AttentionKernel kernel, const AttentionShape& s, std::initializer_list<const void*> ptrs) {
  if (kernel == AttentionKernel::kSimt) return false;
  bool ok = false;
  if constexpr (std::is_same_v<T, bf16>) ok = detail::attention_tensor_core_ok(s, ptrs.begin(), int(ptrs.size()));
  if (kernel == AttentionKernel::kTensorCore && !ok)
    throw_error("tensor-core attention needs bf16, C a multiple of 8, 16-byte aligned buffers and compute "
                "capability >= 8.0");
  return ok;
}

}  // namespace

bool attention_supported(int64_t hs) { return hs == 32 || hs == 64; }

template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, const AttentionShape& s, cudaStream_t stream,
                       AttentionKernel kernel) {
  require_head_size(s);
  if (use_tensor_cores<T>(kernel, s, {out, qkv})) {
    if constexpr (std::is_same_v<T, bf16>) detail::attention_forward_tc(out, lse, qkv, s, stream);
    return;
  }
  if (s.C / s.NH == 32) return forward_hs<T, 32>(out, lse, qkv, s, stream);
  forward_hs<T, 64>(out, lse, qkv, s, stream);
}

template <typename T>
void attention_backward(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse,
                        const AttentionShape& s, cudaStream_t stream, AttentionKernel kernel) {
  require_head_size(s);
  const bool hs32 = s.C / s.NH == 32;
  float* delta = scratch;
  if (hs32)
    delta_hs<T, 32>(delta, dout, out, s, stream);
  else
    delta_hs<T, 64>(delta, dout, out, s, stream);
  if (use_tensor_cores<T>(kernel, s, {dqkv, dout, qkv})) {
    if constexpr (std::is_same_v<T, bf16>) detail::attention_backward_tc(dqkv, delta, dout, qkv, lse, s, stream);
    return;
  }
  if (hs32) return backward_hs<T, 32>(dqkv, delta, dout, qkv, lse, s, stream);
  backward_hs<T, 64>(dqkv, delta, dout, qkv, lse, s, stream);
}

template void attention_forward<float>(float*, float*, const float*, const AttentionShape&, cudaStream_t,
                                       AttentionKernel);
template void attention_forward<bf16>(bf16*, float*, const bf16*, const AttentionShape&, cudaStream_t,
                                      AttentionKernel);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*, const float*,
                                        const AttentionShape&, cudaStream_t, AttentionKernel);
template void attention_backward<bf16>(bf16*, float*, const bf16*, const bf16*, const bf16*, const float*,
                                       const AttentionShape&, cudaStream_t, AttentionKernel);

}  // namespace gpt::cuda
