// Offline operations on a published checkpoint (single process, serial
// HDF5): inspection, verification and export for other tools.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt {

// Metadata and the tensor list: {"attrs": {...}, "tensors": [{"name", "shape", "bytes"}...]}.
nlohmann::json checkpoint_info(const std::string& dir);

// What a --ckpt-dir holds, oldest step first: each entry {"name", "kind",
// "step", "bytes", and where its COMPLETE marker says them "strategy",
// "world_size", "mesh" (no HDF5 read)}, kind one of "published"
// (step_N with COMPLETE), "incomplete" (step_N without), "damaged" (set
// aside by --resume auto), "partial" (a write that did not finish); with
// `verify`, each published one also gets "problems" (verify_checkpoint's).
// Other files are left out. "resume_auto": the entry --resume auto would
// start from (the newest published; with verify, the newest without
// problems), null if none. Throws DataError if dir is not a directory.
nlohmann::json list_checkpoints(const std::string& dir, bool verify);

// Every problem found, one line each (empty: the checkpoint is sound):
// missing COMPLETE, unreadable file, missing or mis-shaped tensors for the
// model it declares, checksum mismatches.
std::vector<std::string> verify_checkpoint(const std::string& dir);

// Two checkpoints of the same model (any strategies and world sizes: the
// state is stored as full tensors), tensor by tensor over the parameters
// and both AdamW moments: {"a", "b" (each: its path and checkpoint_info's
// attrs), "tensors": [{"name", "numel", "differing" (elements not bit for
// bit equal), "max_abs" (largest |a - b|), "rel" (||a - b|| / ||a||,
// 2-norms; 0 where both are 0, inf where only a is), "within" (rel <=
// tolerance, or max_abs <= atol: for tensors near zero, whose relative
// difference is large however small the absolute one)}...],
// "differing_tensors", "above_tolerance" (how many are not within),
// "identical" (none differs), "within_tolerance" (none is above),
// "tolerance", "atol", "worst" ({"name", "rel"} of the differing tensor of
// the largest rel, null if none differs)}. Throws DataError naming both
// when the models differ.
nlohmann::json compare_checkpoints(const std::string& a, const std::string& b, double tolerance, double atol = 0);

// One HDF5 file with the parameters as full tensors under nanoGPT names at
// the root (h5py: f["transformer.wte.weight"]), plus the "model" attribute.
void export_hdf5(const std::string& dir, const std::string& out);

// llm.c's GPT-2 model file: 256 int32 header (magic 20240326, version 3 =
// fp32, max T, vocab, layers, heads, channels, padded vocab), then every
// parameter in llm.c's order (wte padded to the padded vocabulary with zero
// rows, wpe, then each block tensor stacked over layers, then ln_f).
void export_llmc(const std::string& dir, const std::string& out);

// A Hugging Face transformers model directory: out/model.safetensors (fp32,
// GPT2LMHeadModel's names: nanoGPT's, with the four Conv1D weights
// attn.c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj transposed to [in, out];
// no lm_head.weight: tied to wte) and out/config.json (model_type gpt2,
// GPT-2's tanh GELU "gelu_new", LayerNorm eps 1e-5, no dropout). Then
// GPT2LMHeadModel.from_pretrained(out) loads it. Creates out if needed.
// With a GPT-2 tokenizer (vocab: encoder.json / vocab.json, merges:
// vocab.bpe / merges.txt; by default the run's --vocab and --merges when it
// used --tokenizer gpt2) the directory also holds vocab.json, merges.txt
// and tokenizer_config.json, so AutoTokenizer.from_pretrained(out) and
// pipeline("text-generation", out) work; a vocabulary whose size is not the
// model's is refused. Returns what it wrote, for the log.
std::string export_hf(const std::string& dir, const std::string& out, std::string vocab = "", std::string merges = "");

}  // namespace gpt
