#include "io/checkpoint_tools.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "model/cpu/layernorm.hpp"
#include "model/layout.hpp"

namespace gpt {
namespace fs = std::filesystem;
namespace {

std::string state_file(const std::string& dir) { return (fs::path(dir) / "state.h5").string(); }

// A path that is no checkpoint at all, or a directory of them, is named as such.
void require_checkpoint(const std::string& dir) {
  if (const std::string why = not_a_checkpoint(dir); !why.empty()) throw DataError(fmt::format("{}: {}", dir, why));
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

GPTConfig model_of(hid_t f) { return model_from_json(nlohmann::json::parse(h5::attr_string(f, "model"))); }

std::vector<float> read_all(hid_t f, const std::string& name, std::vector<int64_t>* shape = nullptr) {
  h5::Id d = h5::open_dataset(f, name);
  const auto s = h5::shape_of(d.get());
  std::vector<float> v(size_t(numel(s)));
  h5::read_range(d.get(), v.data(), 0, numel(s), false);
  if (shape) *shape = s;
  return v;
}

}  // namespace

namespace {

// A state file's root attributes (the optional ones where present) and
// whether its directory holds COMPLETE.
nlohmann::json checkpoint_attrs(hid_t f, const std::string& dir) {
  nlohmann::json attrs;
  for (const char* k : {"format", "strategy", "mesh", "model", "config"}) attrs[k] = h5::attr_string(f, k);
  for (const char* k : {"format_version", "step", "data_epoch", "data_offset", "world_size"})
    attrs[k] = h5::attr_int(f, k);
  for (const char* k : {"optimizer_updates", "skipped_in_a_row", "data_sequences"})
    if (h5::has_attr(f, k)) attrs[k] = h5::attr_int(f, k);
  if (h5::has_attr(f, "build")) attrs["build"] = h5::attr_string(f, "build");
  attrs["seed"] = h5::attr_uint(f, "seed");
  attrs["complete"] = fs::exists(fs::path(dir) / "COMPLETE");
  return attrs;
}

}  // namespace

nlohmann::json checkpoint_info(const std::string& dir) {
  require_checkpoint(dir);
  h5::Id f = h5::open_file(state_file(dir), MPI_COMM_NULL);
  const nlohmann::json attrs = checkpoint_attrs(f.get(), dir);
  nlohmann::json tensors = nlohmann::json::array();
  const ParamLayout layout(model_of(f.get()));
  for (const char* g : kStateGroups)
    for (const UnitSpec& u : layout.units())
      for (const TensorSpec& t : u.tensors) {
        h5::Id d = h5::open_dataset(f.get(), fmt::format("/{}/{}", g, t.name));
        const auto s = h5::shape_of(d.get());
        tensors.push_back({{"name", fmt::format("{}/{}", g, t.name)}, {"shape", s}, {"bytes", 4 * numel(s)}});
      }
  return {{"attrs", attrs}, {"tensors", tensors}};
}

namespace {

// A checkpoint directory's kind and step from its name: step_N, then
// damaged-step_N[.k] (set aside by --resume auto) and .partial-step_N; step
// -1 for any other name.
std::pair<std::string, int64_t> kind_of(const std::string& name, bool complete) {
  if (const int64_t step = checkpoint_step(name); step >= 0) return {complete ? "published" : "incomplete", step};
  if (name.rfind(".partial-", 0) == 0) return {"partial", checkpoint_step(name.substr(9))};
  if (name.rfind("damaged-", 0) == 0) return {"damaged", checkpoint_step(name.substr(8, name.find('.') - 8))};
  return {"", -1};
}

}  // namespace

nlohmann::json list_checkpoints(const std::string& dir, bool verify) {
  if (!fs::is_directory(dir)) throw DataError(fmt::format("{}: not a directory", dir));
  nlohmann::json entries = nlohmann::json::array();
  std::vector<std::tuple<int64_t, std::string, std::string>> found;  // step, name, kind
  for (const auto& d : fs::directory_iterator(dir)) {
    if (!d.is_directory()) continue;
    const auto [kind, step] = kind_of(d.path().filename().string(), fs::exists(d.path() / "COMPLETE"));
    if (step >= 0) found.emplace_back(step, d.path().filename().string(), kind);
  }
  std::sort(found.begin(), found.end());  // by step, then name
  nlohmann::json resume = nullptr;
  for (const auto& [step, name, kind] : found) {
    const fs::path p = fs::path(dir) / name;
    nlohmann::json e = {{"name", name}, {"kind", kind}, {"step", step}, {"bytes", checkpoint_bytes(p.string())}};
    std::ifstream marker(p / "COMPLETE");
    if (marker) {
      const auto m = nlohmann::json::parse(marker, nullptr, false);
      if (m.is_object())
        for (const char* k : {"strategy", "world_size", "mesh"})
          if (m.contains(k)) e[k] = m[k];
    }
    if (kind == "published") {
      if (verify) e["problems"] = verify_checkpoint(p.string());
      if (!verify || e["problems"].empty()) resume = name;
    }
    entries.push_back(std::move(e));
  }
  return {{"dir", dir}, {"entries", entries}, {"resume_auto", resume}};
}

std::vector<std::string> verify_checkpoint(const std::string& dir) {
  std::vector<std::string> problems;
  if (const std::string why = not_a_checkpoint(dir); !why.empty()) return {fmt::format("{}: {}", dir, why)};
  if (!fs::exists(fs::path(dir) / "COMPLETE")) problems.push_back(dir + ": no COMPLETE marker (partial checkpoint)");
  try {
    h5::Id f = h5::open_file(state_file(dir), MPI_COMM_NULL);
    const ParamLayout layout(model_of(f.get()));
    for (const char* g : kStateGroups)
      for (const UnitSpec& u : layout.units())
        for (const TensorSpec& t : u.tensors) {
          const std::string name = fmt::format("/{}/{}", g, t.name);
          try {
            std::vector<int64_t> shape;
            const auto v = read_all(f.get(), name, &shape);
            if (shape != stored_shape(t)) {
              problems.push_back(fmt::format("{}: {} has the wrong shape", state_file(dir), name));
              continue;
            }
            h5::Id d = h5::open_dataset(f.get(), name);
            if (tensor_checksum(v.data(), 0, int64_t(v.size())) != h5::attr_uint(d.get(), "checksum"))
              problems.push_back(fmt::format("{}: checksum mismatch in {}", state_file(dir), name));
          } catch (const h5::H5Error& e) {
            problems.push_back(h5::in_file(state_file(dir), e.what()));
          }
        }
  } catch (const std::exception& e) {
    problems.push_back(h5::in_file(state_file(dir), e.what()));
  }
  return problems;
}

nlohmann::json compare_checkpoints(const std::string& a, const std::string& b, double tolerance, double atol) {
  require_checkpoint(a);
  require_checkpoint(b);
  h5::Id fa = h5::open_file(state_file(a), MPI_COMM_NULL), fb = h5::open_file(state_file(b), MPI_COMM_NULL);
  nlohmann::json attrs_a = checkpoint_attrs(fa.get(), a), attrs_b = checkpoint_attrs(fb.get(), b);
  const std::string model_a = attrs_a["model"], model_b = attrs_b["model"];
  if (nlohmann::json::parse(model_a) != nlohmann::json::parse(model_b))
    throw DataError(fmt::format("{} and {} hold different models: {} against {}", a, b, model_a, model_b));
  attrs_a["path"] = a;
  attrs_b["path"] = b;
  nlohmann::json tensors = nlohmann::json::array(), worst = nullptr;
  int64_t differing_tensors = 0, above = 0;
  const ParamLayout layout(model_of(fa.get()));
  for (const char* g : kStateGroups)
    for (const UnitSpec& u : layout.units())
      for (const TensorSpec& t : u.tensors) {
        const std::string name = fmt::format("/{}/{}", g, t.name);
        const std::vector<float> x = read_all(fa.get(), name), y = read_all(fb.get(), name);
        if (x.size() != y.size())
          throw DataError(
              fmt::format("{}: {} holds {} elements in {} and {} in {}", name, t.name, x.size(), a, y.size(), b));
        int64_t differing = 0;
        double max_abs = 0, diff2 = 0, norm2 = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          norm2 += double(x[i]) * double(x[i]);
          if (std::bit_cast<uint32_t>(x[i]) == std::bit_cast<uint32_t>(y[i])) continue;  // equal bits: 0
          ++differing;
          const double d = std::abs(double(x[i]) - double(y[i]));
          if (!(d <= max_abs)) max_abs = d;  // a NaN stays
          diff2 += d * d;
        }
        // A differing NaN makes max_abs and rel NaN, which no tolerance takes;
        // the same bits are equal, NaN or not.
        const double rel = diff2 == 0 ? 0 : norm2 == 0 ? HUGE_VAL : std::sqrt(diff2 / norm2);
        const bool within = rel <= tolerance || max_abs <= atol;
        differing_tensors += differing > 0;
        above += !within;
        const std::string key = fmt::format("{}/{}", g, t.name);
        if (differing > 0 && (worst.is_null() || !(rel <= worst["rel"].get<double>())))
          worst = {{"name", key}, {"rel", rel}};
        tensors.push_back({{"name", key},
                           {"numel", int64_t(x.size())},
                           {"differing", differing},
                           {"max_abs", max_abs},
                           {"rel", rel},
                           {"within", within}});
      }
  return {{"a", attrs_a},
          {"b", attrs_b},
          {"tensors", tensors},
          {"differing_tensors", differing_tensors},
          {"above_tolerance", above},
          {"identical", differing_tensors == 0},
          {"within_tolerance", above == 0},
          {"tolerance", tolerance},
          {"atol", atol},
          {"worst", worst}};
}

void export_hdf5(const std::string& dir, const std::string& out) {
  require_checkpoint(dir);
  h5::Id f = h5::open_file(state_file(dir), MPI_COMM_NULL);
  const std::string model = h5::attr_string(f.get(), "model");
  const ParamLayout layout(model_of(f.get()));
  h5::Id o = h5::create_file(out, MPI_COMM_NULL);
  for (const UnitSpec& u : layout.units())
    for (const TensorSpec& t : u.tensors) {
      std::vector<int64_t> shape;
      const auto v = read_all(f.get(), "/params/" + t.name, &shape);
      h5::Id d = h5::create_dataset(o.get(), t.name, shape);
      h5::write_range(d.get(), v.data(), 0, int64_t(v.size()), false);
    }
  h5::set_attr(o.get(), "model", model);
  h5::set_attr(o.get(), "step", h5::attr_int(f.get(), "step"));
  o.close();
}

void export_llmc(const std::string& dir, const std::string& out) {
  require_checkpoint(dir);
  h5::Id f = h5::open_file(state_file(dir), MPI_COMM_NULL);
  const GPTConfig c = model_of(f.get());
  const int L = c.n_layer;
  std::FILE* o = std::fopen(out.c_str(), "wb");
  if (!o) throw DataError(fmt::format("{}: cannot create", out));
  int32_t header[256] = {};
  header[0] = 20240326;
  header[1] = 3;  // fp32 parameters, padded vocabulary
  header[2] = c.seq_len;
  header[3] = c.vocab_size;
  header[4] = L;
  header[5] = c.n_head;
  header[6] = c.n_embd;
  header[7] = c.padded_vocab();
  bool ok = std::fwrite(header, 4, 256, o) == 256;
  auto put = [&](const std::vector<float>& v) { ok = ok && std::fwrite(v.data(), 4, v.size(), o) == v.size(); };
  auto wte = read_all(f.get(), "/params/transformer.wte.weight");
  wte.resize(size_t(c.padded_vocab()) * c.n_embd, 0.f);  // llm.c stores the padded rows (zeros)
  put(wte);
  put(read_all(f.get(), "/params/transformer.wpe.weight"));
  for (const char* k :
       {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
        "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
    for (int l = 0; l < L; ++l) put(read_all(f.get(), fmt::format("/params/transformer.h.{}.{}", l, k)));
  put(read_all(f.get(), "/params/transformer.ln_f.weight"));
  put(read_all(f.get(), "/params/transformer.ln_f.bias"));
  ok = (std::fclose(o) == 0) && ok;
  if (!ok) throw DataError(fmt::format("{}: write failed", out));
}

}  // namespace gpt

namespace gpt {

// Safetensors (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, the JSON header (padded with spaces to a
// multiple of 8), then the tensors' bytes, row-major, at the header's
// data_offsets (relative to the end of the header).
std::string export_hf(const std::string& dir, const std::string& out, std::string vocab, std::string merges) {
  require_checkpoint(dir);
  h5::Id f = h5::open_file(state_file(dir), MPI_COMM_NULL);
  const GPTConfig c = model_of(f.get());
  const ParamLayout layout(c);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out))
    throw DataError(fmt::format("{}: cannot create the directory: {}", out, ec.message()));
  // nn.Linear stores [out, in]; GPT-2's Conv1D, [in, out].
  auto conv1d = [](const std::string& name) {
    for (const char* k : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
      if (name.size() > std::strlen(k) && name.compare(name.size() - std::strlen(k), std::string::npos, k) == 0)
        return true;
    return false;
  };
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::string> names;
  uint64_t offset = 0;
  for (const UnitSpec& u : layout.units())
    for (const TensorSpec& t : u.tensors) {
      h5::Id d = h5::open_dataset(f.get(), "/params/" + t.name);
      std::vector<int64_t> shape = h5::shape_of(d.get());
      if (conv1d(t.name)) std::swap(shape[0], shape[1]);
      const uint64_t bytes = 4 * uint64_t(numel(shape));
      header[t.name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
      names.push_back(t.name);
    }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const std::string file = (fs::path(out) / "model.safetensors").string();
  std::ofstream o(file, std::ios::binary);
  if (!o) throw DataError(fmt::format("{}: cannot create", file));
  const uint64_t n = json.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  o.write(reinterpret_cast<const char*>(len), 8);
  o.write(json.data(), std::streamsize(json.size()));
  for (const std::string& name : names) {
    std::vector<int64_t> shape;
    std::vector<float> v = read_all(f.get(), "/params/" + name, &shape);
    if (conv1d(name)) {
      const int64_t rows = shape[0], cols = shape[1];
      std::vector<float> t(v.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) t[size_t(k * rows + r)] = v[size_t(r * cols + k)];
      v.swap(t);
    }
    static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
    o.write(reinterpret_cast<const char*>(v.data()), std::streamsize(4 * v.size()));
  }
  o.close();
  if (!o) throw DataError(fmt::format("{}: write failed", file));
  nlohmann::ordered_json config = {{"architectures", {"GPT2LMHeadModel"}},
                                   {"model_type", "gpt2"},
                                   {"vocab_size", c.vocab_size},
                                   {"n_positions", c.seq_len},
                                   {"n_ctx", c.seq_len},
                                   {"n_embd", c.n_embd},
                                   {"n_layer", c.n_layer},
                                   {"n_head", c.n_head},
                                   {"n_inner", nullptr},
                                   {"activation_function", "gelu_new"},
                                   {"layer_norm_epsilon", cpu::kLayerNormEps},
                                   {"resid_pdrop", 0.0},
                                   {"embd_pdrop", 0.0},
                                   {"attn_pdrop", 0.0},
                                   {"initializer_range", 0.02},
                                   {"scale_attn_weights", true},
                                   {"tie_word_embeddings", true},
                                   {"use_cache", true},
                                   {"torch_dtype", "float32"}};
  if (c.vocab_size == 50257) {  // GPT-2's tokenizer: <|endoftext|> begins and ends documents
    config["bos_token_id"] = 50256;
    config["eos_token_id"] = 50256;
  }
  const std::string cfile = (fs::path(out) / "config.json").string();
  std::ofstream co(cfile);
  co << config.dump(2) << "\n";
  co.close();
  if (!co) throw DataError(fmt::format("{}: write failed", cfile));

  // The tokenizer: the run's, unless given.
  if (vocab.empty() && merges.empty()) {
    const auto run = nlohmann::json::parse(h5::attr_string(f.get(), "config"), nullptr, false);
    if (run.is_object() && run.value("tokenizer", "") == "gpt2") {
      vocab = run.value("vocab", "");
      merges = run.value("merges", "");
      if (!fs::exists(vocab) || !fs::exists(merges))
        return fmt::format(
            "model.safetensors, config.json; the run's GPT-2 tokenizer files ('{}', '{}') are not "
            "here: give --vocab and --merges to add them",
            vocab, merges);
    }
  }
  if (vocab.empty() && merges.empty()) return "model.safetensors, config.json (no tokenizer: the run's is byte-level)";
  if (vocab.empty() || merges.empty()) throw DataError("the GPT-2 tokenizer needs both --vocab and --merges");
  std::ifstream vf(vocab);
  if (!vf) throw DataError(fmt::format("{}: cannot open the vocabulary", vocab));
  const auto v = nlohmann::json::parse(vf, nullptr, false);
  if (!v.is_object()) throw DataError(fmt::format("{}: not a JSON object of tokens to ids (encoder.json)", vocab));
  if (int64_t(v.size()) != c.vocab_size)
    throw DataError(fmt::format("{}: {} tokens, but the model's vocabulary is {}", vocab, v.size(), c.vocab_size));
  if (!fs::exists(merges)) throw DataError(fmt::format("{}: no such merges file", merges));
  fs::copy_file(vocab, fs::path(out) / "vocab.json", fs::copy_options::overwrite_existing);
  fs::copy_file(merges, fs::path(out) / "merges.txt", fs::copy_options::overwrite_existing);
  const nlohmann::ordered_json tok = {{"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", c.seq_len},
                                      {"bos_token", "<|endoftext|>"},       {"eos_token", "<|endoftext|>"},
                                      {"unk_token", "<|endoftext|>"},       {"add_prefix_space", false}};
  std::ofstream tf(fs::path(out) / "tokenizer_config.json");
  tf << tok.dump(2) << "\n";
  tf.close();
  if (!tf) throw DataError(fmt::format("{}/tokenizer_config.json: write failed", out));
  return "model.safetensors, config.json, vocab.json, merges.txt, tokenizer_config.json";
}

}  // namespace gpt
