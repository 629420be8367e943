// Offline operations on a published checkpoint (single process, serial
// HDF5): inspection, verification and export for other tools.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt {

// Metadata and the tensor list: {"attrs": {...}, "tensors": [{"name", "shape", "bytes"}...]}.
nlohmann::json checkpoint_info(const std::string& dir);

// Every problem found, one line each (empty: the checkpoint is sound):
// missing COMPLETE, unreadable file, missing or mis-shaped tensors for the
// model it declares, checksum mismatches.
std::vector<std::string> verify_checkpoint(const std::string& dir);

// One HDF5 file with the parameters as full tensors under nanoGPT names at
// the root (h5py: f["transformer.wte.weight"]), plus the "model" attribute.
void export_hdf5(const std::string& dir, const std::string& out);

// llm.c's GPT-2 model file: 256 int32 header (magic 20240326, version 3 =
// fp32, max T, vocab, layers, heads, channels, padded vocab), then every
// parameter in llm.c's order (wte padded to the padded vocabulary with zero
// rows, wpe, then each block tensor stacked over layers, then ln_f).
void export_llmc(const std::string& dir, const std::string& out);

}  // namespace gpt
