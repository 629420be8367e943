// Selective recomputation (`--recompute`): which of a block's activations
// are not kept for backward but recomputed there from what is kept.
//
//   none     every block keeps its 15 N·C saved tensors (N = B·T rows);
//   gelu     the GELU outputs (4 N·C per block) are not kept: forward writes
//            them to one buffer shared by all blocks, backward recomputes
//            them from the kept pre-activation (llm.c's default, `-r 1`);
//   gelu-ln  also the two LayerNorm outputs (2 N·C per block), recomputed
//            from the kept block input / residual and statistics (`-r 2`).
//
// Per block that is 15 → 11 → 9 N·C saved (−27%, −40%), plus one shared
// 4 N·C (and N·C) buffer; the cost is one elementwise GELU (and two
// LayerNorm forwards) per block in backward, no matrix product. The
// gradients are those of `none` bit for bit: the recomputation runs the
// same kernels on the same inputs. `--activation-checkpointing`, which
// recomputes whole blocks, makes it moot (its one set of block activations
// is the shared buffer), so there it is ignored.
#pragma once

#include <string>

namespace gpt {

enum class Recompute { kNone, kGelu, kGeluLn };

Recompute parse_recompute(const std::string& name);  // ConfigError naming the value
const char* to_string(Recompute r);

inline bool recomputes_gelu(Recompute r) { return r != Recompute::kNone; }
inline bool recomputes_ln(Recompute r) { return r == Recompute::kGeluLn; }

}  // namespace gpt
