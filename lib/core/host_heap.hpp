// The host heap for large blocks that come and go every step.
//
// Eigen's matrix products allocate their packing blocks on each call and
// free them at its end. glibc serves a block above its mmap threshold with
// fresh pages from mmap and unmaps it on free, so the kernel zeroes every
// page again at its first touch in the next call; the threshold adapts
// upwards to freed blocks, but only up to 32 MiB. The LM head's product
// packs the whole tied embedding's slice (V x kc floats: 61 MiB for GPT-2's
// 50304 rows), so on a gpt2-124m CPU step it faulted in 110k fresh pages
// (430 MiB zeroed) per step, about 5% of the step (README, Performance).
//
// keep_large_heap_blocks() raises the mmap threshold to 1 GiB and the trim
// threshold to 2 GiB: a freed block stays in the heap and the next call's
// block reuses its pages. Large buffers kept for the whole run (parameters,
// activations) are unaffected in size; what the heap keeps beyond the
// run's live blocks is at most its largest transient block. Returns false
// where the C library refuses (another libc, or a glibc with a lower cap);
// the run is then as before.
#pragma once

namespace gpt {

bool keep_large_heap_blocks();

}  // namespace gpt
