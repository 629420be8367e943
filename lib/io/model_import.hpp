// Starting a run from weights made elsewhere (--init-from FILE): an llm.c
// GPT-2 model file (.bin, version 3 fp32), a Hugging Face GPT-2's
// safetensors (the file, or a directory holding model.safetensors: F32 or
// BF16, with or without the "transformer." prefix, GPT-2's Conv1D weights
// [in, out]; n_head from a config.json beside it), an HDF5 file with
// parameters at the root under nanoGPT names (ckpt_tool export), or one of
// our checkpoints (its directory or its state.h5: the parameters only, their
// checksums verified). Each rank reads only the ranges it owns
// (UnitSlice::state[0]); optimizer moments are left at zero.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "model/layout.hpp"

namespace gpt {

// Collective over comm. Chooses the reader by content (llm.c magic, safetensors, a
// checkpoint or an HDF5 export) and returns what it read, for the log ("an llm.c
// model file", "the parameters of checkpoint step 2000, written by zero3 on 8 ranks").
// Throws DataError naming the file on a bad header or a model mismatch.
std::string import_params(const std::string& file, MPI_Comm comm, const ParamLayout& layout,
                          const std::vector<UnitSlice>& slices);

// ckpt_tool import: llm.c .bin -> HDF5 export format (serial).
void llmc_to_hdf5(const std::string& bin, const std::string& out);

}  // namespace gpt
