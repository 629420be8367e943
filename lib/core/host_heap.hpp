// The host heap for large blocks that come and go every step.
//
// Eigen's matrix products allocate their packing blocks on each call and
// free them at its end. glibc serves a block above its mmap threshold with
// fresh pages from mmap and unmaps it on free, so the kernel zeroes every
// page again at its first touch in the next call; the threshold adapts
// upwards to freed blocks, but only up to 32 MiB. The LM head's product
// packs the whole tied embedding's slice (V x kc floats: 61 MiB for GPT-2's
// 50304 rows), so a gpt2-124m CPU step faulted in about 108k fresh pages
// (420 MiB zeroed), 2-6% of the step (README, Performance).
//
// keep_large_heap_blocks() raises the mmap threshold to 1 GiB and the trim
// threshold to 2 GiB: a freed block stays in the heap and the next call's
// block reuses its pages. Buffers kept for the whole run (parameters,
// activations) come from the heap instead of their own mappings, the same
// size; freed blocks are kept for reuse instead of going back to the
// system, so the process's resident memory stays at its high-water mark
// (the memory accounting counts our buffers, not the heap). Returns false
// where the C library refuses (another libc, or a glibc with a lower cap);
// the run is then as before.
#pragma once

namespace gpt {

bool keep_large_heap_blocks();

}  // namespace gpt
