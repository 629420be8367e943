// Kernels of the tensor-core causal attention (FlashAttention-2 structure on
// mma.sync bf16 products with fp32 accumulation); attention_tc.cu launches
// them. A header so that the kernel code also compiles as host C++ against
// tests/unit/emulated_cuda.hpp, which runs it thread by thread on the CPU,
// register fragments included (test_attention_emulated): indexing,
// masking, tiling, fragment layout and synchronisation are tested without a
// GPU.
//
// Tiles are 64 rows; a block has 4 warps and each warp owns 16 rows of the
// block's tile for the whole kernel. Scores, probabilities and all
// accumulators live in registers (mma_bf16.cuh's fragments): a warp computes
// its 16 x 64 score block into C fragments, applies the mask and softmax
// there (a row's values are spread over the 4 lanes of a quad, so row
// reductions take two shuffles), packs them to bf16 A fragments in place and
// multiplies on. Shared memory holds only the streamed bf16 tiles, which
// every warp reads; block-wide barriers guard just those.
//
// The streamed tiles are double-buffered: the next tile's copies (cp.async)
// are issued before the current tile's products, so loads overlap compute.
// At head size 128 the backward kernels also come single-buffered (kBufs =
// 1: a tile's copies are issued once the previous tile is done with its
// buffer, then waited for), for GPUs whose blocks cannot have the
// double-buffered ones' 103 KiB (8.6, 8.9, 12.0: 99 KiB).
//
// Forward: online softmax, O in fp32 registers, only the log-sum-exp saved.
// Backward: dK/dV (one block per key tile, query tiles streamed) and dQ (one
// block per query tile, key tiles streamed) are separate kernels, so no
// output has two writers and the result is deterministic; the dK/dV kernel
// can also store the score gradients dS so that dQ is one product over them
// (dq_from_ds_kernel) instead of recomputing S and dP. Fully masked
// 16-column score blocks and 16-row product blocks of the diagonal tile are
// skipped. Grids start with the heaviest (most tiles) blocks.
//
// The loops are kept lean because, with 4 warps of 16 rows, a tile's
// products are a few hundred instructions per warp and everything else
// competes with them for issue slots: only the diagonal tile is masked
// (Diagonal / OffDiagonal below), exponentials are base 2 with the scale
// folded into one FFMA, tile copies are unrolled from one base address and
// probabilities are packed two per cvt. Per off-diagonal tile (sm_90 PTX of
// the HS = 64 loops; bench/kernel_loop_ptx.py counts them) that took dK/dV
// from 2001 to 643 instructions around its 128 mma.sync, dQ from 1692 to
// 517 around 96 and the forward from 1439 to 481 around 64.
//
// The pieces: attention_tc_tiles.cuh (tile geometry and shared memory,
// the tile loads, a warp's products, quad reductions, the diagonal tile's
// split), attention_tc_forward.cuh (the forward kernels) and
// attention_tc_backward.cuh (the dK/dV, dQ and dQ-from-dS kernels).
#pragma once

#include "model/cuda/attention_tc_backward.cuh"
#include "model/cuda/attention_tc_forward.cuh"
#include "model/cuda/attention_tc_tiles.cuh"
