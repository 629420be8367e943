// A host implementation of the part of cuBLASLt the CUDA backend calls
// (model/cuda/matmul.cpp), for tests without a GPU: link host_cublaslt.cpp
// instead of libcublasLt. It computes what the cuBLASLt documentation
// specifies, on host memory, and refuses what the documentation forbids:
//  - column-major D[m, n] = alpha op(A) op(B) + beta C, with m and n from D's
//    layout and k from op(A); op(A), op(B), C and D must agree in shape,
//    every leading dimension must cover its rows, A, B, C and D share one
//    data type (fp32 or bf16), the compute type is 32F, the scale type fp32;
//  - epilogues DEFAULT, BIAS (a bias of D's rows broadcast over columns),
//    GELU_AUX(_BIAS) (D = GELU(x), x itself stored to the aux matrix) and
//    DGELU (D = x * GELU'(aux)), GELU being the tanh approximation (or
//    another formula: Hooks::gelu, Hooks::dgelu); the aux leading
//    dimension must be divisible by 8 and at least D's rows; BGRADB (D as
//    without an epilogue, and the bias vector, of D's type, overwritten
//    with op(B) summed over k: one element per column of D);
//  - attribute sizes checked against the types the header documents.
// Accumulation is in double and rounded once to D's type, so a test can
// tell rounding from indexing.
#pragma once

namespace host_cublaslt {

// What the GELU epilogues evaluate: GPT-2's tanh form (the default), or
// another formula a library could use, to test the Matmul's check of them.
enum class GeluFormula { kTanh, kErf, kSigmoid };

int default_algorithms();  // GPT_HOST_CUBLASLT_ALGORITHMS, else 1

struct Hooks {
  GeluFormula gelu = GeluFormula::kTanh;   // GELU_AUX(_BIAS)
  GeluFormula dgelu = GeluFormula::kTanh;  // DGELU
  bool refuse_gelu_heuristic = false;  // the heuristic finds no algorithm for GELU epilogues
  bool refuse_gelu_matmul = false;     // the heuristic finds one, cublasLtMatmul says NOT_SUPPORTED
  // BGRADB as a library could get it wrong, to test the Matmul's check of it: adding to the bias vector
  // instead of overwriting it, or summing A's rows instead of op(B)'s columns; or no algorithm for it.
  // refuse_bgradb_matmul: the heuristic finds one, cublasLtMatmul says INVALID_VALUE.
  bool bgradb_adds = false, bgradb_sums_a = false, refuse_bgradb_heuristic = false, refuse_bgradb_matmul = false;
  // The heuristic returns up to this many algorithms (all compute the same):
  // GPT_HOST_CUBLASLT_ALGORITHMS at start-up, else 1.
  int algorithms = default_algorithms();
  int refuse_algorithm = -1;  // cublasLtMatmul says NOT_SUPPORTED for the heuristic's result of this index
  long heuristic_calls = 0;
  long matmul_calls = 0;
};
Hooks& hooks();

}  // namespace host_cublaslt
