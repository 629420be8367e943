#include "io/model_import.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/plural.hpp"
#include "core/stall_guard.hpp"
#include "io/h5.hpp"

namespace gpt {
namespace {

constexpr int32_t kLlmcMagic = 20240326;

// A read-only mapping of a whole file.
struct Mapped {
  const char* p = nullptr;
  size_t n = 0;
  explicit Mapped(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st{};
    ::fstat(fd, &st);
    n = size_t(st.st_size);
    void* m = n ? ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (m == MAP_FAILED) throw DataError(fmt::format("{}: cannot map", path));
    p = static_cast<const char*>(m);
  }
  ~Mapped() {
    if (p) ::munmap(const_cast<char*>(p), n);
  }
};

// Element offset of each tensor in llm.c's parameter area: wte (padded),
// wpe, then every block tensor kind stacked over the layers, then ln_f.
std::vector<std::vector<int64_t>> llmc_offsets(const ParamLayout& L) {
  const int nl = L.config().n_layer;
  std::vector<std::vector<int64_t>> off(L.num_units());
  int64_t at = 0;
  for (const TensorSpec& t : L.unit(L.embedding_unit()).tensors) {
    off[L.embedding_unit()].push_back(at);
    at += t.numel;  // wte with its padded rows, as llm.c stores it
  }
  const auto& kinds = L.unit(L.block_unit(0)).tensors;
  for (int l = 0; l < nl; ++l) off[L.block_unit(l)].resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k)
    for (int l = 0; l < nl; ++l) {
      off[L.block_unit(l)][k] = at;
      at += kinds[k].numel;
    }
  for (const TensorSpec& t : L.unit(L.final_unit()).tensors) {
    off[L.final_unit()].push_back(at);
    at += t.numel;
  }
  return off;
}

void check_model(const std::string& file, const GPTConfig& want, const GPTConfig& got) {
  auto cmp = [&](const char* k, int a, int b) {
    if (a != b) throw DataError(fmt::format("{}: model mismatch: {} = {} in the file, {} in this run", file, k, a, b));
  };
  cmp("n_layer", got.n_layer, want.n_layer);
  cmp("n_head", got.n_head, want.n_head);
  cmp("n_embd", got.n_embd, want.n_embd);
  cmp("n_ctx", got.seq_len, want.seq_len);
  cmp("vocab_size", got.vocab_size, want.vocab_size);
}

GPTConfig llmc_header(const std::string& file, const Mapped& m, const ParamLayout& layout) {
  if (m.n < 1024) throw DataError(fmt::format("{}: truncated llm.c model file", file));
  const auto* h = reinterpret_cast<const int32_t*>(m.p);
  if (h[1] != 3) throw DataError(fmt::format("{}: llm.c model version {} (only 3, fp32, is read)", file, h[1]));
  const GPTConfig got{h[4], h[5], h[6], h[2], h[3]};
  check_model(file, layout.config(), got);
  if (h[7] != layout.config().padded_vocab())
    throw DataError(fmt::format("{}: padded vocabulary {} (expected {})", file, h[7], layout.config().padded_vocab()));
  if (int64_t(m.n) != 1024 + 4 * layout.total_numel())
    throw DataError(fmt::format("{}: {} bytes, expected {} for this model", file, m.n, 1024 + 4 * layout.total_numel()));
  return got;
}

bool is_llmc(const std::string& file) {
  int32_t magic = 0;
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw DataError(fmt::format("{}: cannot open: {}", file, std::strerror(errno)));
  const bool ok = std::fread(&magic, 4, 1, f) == 1;
  std::fclose(f);
  return ok && magic == kLlmcMagic;
}

// Safetensors (a Hugging Face GPT2LMHeadModel's model.safetensors, or
// ckpt_tool export --format hf): an 8-byte little-endian header length, a
// JSON header, then the tensors' bytes.
struct SafeTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets after the header
  size_t shard = 0;             // which file of a sharded model holds it
};

// The header, or an empty map when `m` is no safetensors file.
std::map<std::string, SafeTensor> safetensors_header(const Mapped& m, size_t* data_start) {
  std::map<std::string, SafeTensor> out;
  if (m.n < 10) return out;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(m.p[i]);
  if (n < 2 || n > m.n - 8 || m.p[8] != '{') return out;
  const auto h = nlohmann::json::parse(m.p + 8, m.p + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) return out;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    SafeTensor t;
    t.dtype = v.value("dtype", "");
    t.shape = v.value("shape", std::vector<int64_t>{});
    const auto off = v.value("data_offsets", std::vector<uint64_t>{});
    if (off.size() == 2) t.begin = off[0], t.end = off[1];
    // GPT2LMHeadModel's names carry "transformer."; GPT2Model's (the hub's files) do not.
    out[name.rfind("transformer.", 0) == 0 || name == "lm_head.weight" ? name : "transformer." + name] = t;
  }
  *data_start = 8 + n;
  return out;
}

// GPT-2's Conv1D stores these as [in, out]; nn.Linear (nanoGPT, here) as [out, in].
bool is_conv1d(const std::string& name) {
  for (const char* k : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const size_t n = std::strlen(k);
    if (name.size() > n && name.compare(name.size() - n, n, k) == 0) return true;
  }
  return false;
}

bool is_safetensors(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  char head[9] = {};
  return f.read(head, 9) && head[8] == '{';
}

// The files of a sharded model, from its model.safetensors.index.json
// (save_pretrained's layout): the distinct files of its weight_map.
std::vector<std::string> shards_of_index(const std::string& index) {
  std::ifstream f(index);
  const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    throw DataError(fmt::format("{}: not a safetensors index (a JSON object with a weight_map)", index));
  std::vector<std::string> files;
  for (const auto& [name, v] : j["weight_map"].items()) {
    if (!v.is_string()) throw DataError(fmt::format("{}: weight_map[\"{}\"] is not a file name", index, name));
    const std::string file = (std::filesystem::path(index).parent_path() / v.get<std::string>()).string();
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  }
  return files;
}

// The safetensors files `path` names, else none: a file, a directory
// holding model.safetensors, or (a directory holding) a sharded model's
// model.safetensors.index.json.
std::vector<std::string> safetensors_files(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string suffix = ".index.json";
  if (!fs::is_directory(path)) {
    if (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
      return shards_of_index(path);
    if (is_safetensors(path)) return {path};
    return {};
  }
  const std::string single = (fs::path(path) / "model.safetensors").string();
  const std::string index = (fs::path(path) / "model.safetensors.index.json").string();
  if (fs::exists(single)) {
    if (is_safetensors(single)) return {single};
    return {};
  }
  if (fs::exists(index)) return shards_of_index(index);
  return {};
}

// `path`: what the user named (for errors about the model as a whole);
// `files`: its safetensors files, one or a sharded model's.
void import_safetensors(const std::string& path, const std::vector<std::string>& files, const ParamLayout& layout,
                        const std::vector<UnitSlice>& slices) {
  std::vector<std::unique_ptr<Mapped>> maps;
  std::vector<size_t> data_starts;
  std::map<std::string, SafeTensor> tensors;
  for (size_t i = 0; i < files.size(); ++i) {
    maps.push_back(std::make_unique<Mapped>(files[i]));
    size_t data = 0;
    auto header = safetensors_header(*maps.back(), &data);
    if (header.empty()) throw DataError(fmt::format("{}: not a readable safetensors file", files[i]));
    data_starts.push_back(data);
    for (auto& [name, t] : header) {
      t.shard = i;
      if (const auto [it, fresh] = tensors.emplace(name, t); !fresh)
        throw DataError(fmt::format("{}: {} is in {} too", files[i], name, files[it->second.shard]));
    }
  }
  const std::string model = files.size() == 1 ? files[0] : path;  // errors about the whole model name this
  const GPTConfig& c = layout.config();
  auto find = [&](const std::string& name) -> const SafeTensor& {
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw DataError(fmt::format("{}: no tensor {}", model, name));
    return it->second;
  };
  // The shape a model of this run's config has; n_head is in no tensor's
  // shape: a config.json beside the file says it.
  const SafeTensor& wte = find("transformer.wte.weight");
  const SafeTensor& wpe = find("transformer.wpe.weight");
  int layers = 0;
  while (tensors.count(fmt::format("transformer.h.{}.ln_1.weight", layers))) ++layers;
  GPTConfig got = c;
  if (wte.shape.size() == 2 && wpe.shape.size() == 2)
    got = {layers, c.n_head, int(wte.shape[1]), int(wpe.shape[0]), int(wte.shape[0])};
  const auto config_json = std::filesystem::path(files[0]).parent_path() / "config.json";
  if (std::ifstream cj(config_json); cj) {
    const auto j = nlohmann::json::parse(cj, nullptr, false);
    if (j.is_object() && j.contains("n_head") && j["n_head"].is_number_integer()) got.n_head = j["n_head"].get<int>();
  }
  check_model(model, c, got);
  for (size_t u = 0; u < layout.num_units(); ++u) {
    const UnitSlice& s = slices[u];
    for (const TensorSpec& t : layout.unit(u).tensors) {
      const SafeTensor& st = find(t.name);
      const std::string& file = files[st.shard];
      const Mapped& m = *maps[st.shard];
      const size_t data = data_starts[st.shard];
      std::vector<int64_t> want = stored_shape(t);
      const bool conv1d = is_conv1d(t.name);
      if (conv1d) std::swap(want[0], want[1]);
      if (st.shape != want)
        throw DataError(fmt::format("{}: {} has shape [{}], expected [{}]{}", file, t.name, fmt::join(st.shape, ", "),
                                    fmt::join(want, ", "), conv1d ? " (GPT-2's Conv1D: [in, out])" : ""));
      const bool f16 = st.dtype == "F16";
      const size_t esize = st.dtype == "F32" ? 4 : (st.dtype == "BF16" || f16) ? 2 : 0;
      if (esize == 0)
        throw DataError(fmt::format("{}: {} is {}: only F32, BF16 and F16 are read", file, t.name, st.dtype));
      if (st.end - st.begin != esize * uint64_t(t.init_numel) || data + st.end > m.n)
        throw DataError(fmt::format("{}: {}: its data_offsets [{}, {}) do not hold its shape in the file's {} bytes",
                                    file, t.name, st.begin, st.end, m.n));
      const char* base = m.p + data + st.begin;
      auto element = [&](int64_t i) -> float {  // the file's element i, in row-major order of its shape
        if (esize == 4) {
          float v;
          std::memcpy(&v, base + 4 * i, 4);
          return v;
        }
        uint16_t b;
        std::memcpy(&b, base + 2 * i, 2);
        return f16 ? f16_to_f32(b) : bf16_to_f32(b);
      };
      // This rank's range of the tensor, in our [out, in] order.
      const int64_t lo = std::max(s.begin, t.offset), hi = std::min(s.end, t.offset + t.init_numel);
      const int64_t cols = want.size() == 2 ? want[0] : 1;  // conv1d: our row length (in) = the file's rows
      for (int64_t e = lo; e < hi; ++e) {
        const int64_t i = e - t.offset;
        const int64_t src = conv1d ? (i % cols) * want[1] + i / cols : i;
        s.state[0][e - s.begin] = element(src);
      }
      note_progress(t.name);  // the caller's StallGuard (core/stall_guard.hpp)
    }
  }
}

}  // namespace

std::string import_params(const std::string& file, MPI_Comm comm, const ParamLayout& layout,
                          const std::vector<UnitSlice>& slices) {
  namespace fs = std::filesystem;
  // One of our checkpoints: its parameters, checksummed; its moments, step and
  // data position are not taken (a new run from its weights; --resume continues it).
  auto from_checkpoint = [&](const std::string& dir) {
    const CheckpointMeta meta = load_checkpoint(dir, comm, layout, slices, CheckpointPart::kParams);
    return fmt::format("the parameters of checkpoint step {}, written by {} on {}", meta.step, meta.strategy,
                       count_of(meta.world_size, "rank"));
  };
  if (fs::is_directory(file)) {
    // The --ckpt-dir rather than one of its checkpoints (not_a_checkpoint names the newest), or a checkpoint.
    if (const std::string why = not_a_checkpoint(file); !why.empty()) throw DataError(fmt::format("{}: {}", file, why));
    if (fs::exists(fs::path(file) / "state.h5")) return from_checkpoint(file);
  }
  if (is_llmc(file)) {
    Mapped m(file);
    llmc_header(file, m, layout);
    const auto* params = reinterpret_cast<const float*>(m.p + 1024);
    const auto off = llmc_offsets(layout);
    for (size_t u = 0; u < layout.num_units(); ++u) {
      const UnitSlice& s = slices[u];
      const auto& ts = layout.unit(u).tensors;
      for (size_t k = 0; k < ts.size(); ++k) {
        const int64_t lo = std::max(s.begin, ts[k].offset), hi = std::min(s.end, ts[k].offset + ts[k].numel);
        if (lo < hi) std::memcpy(s.state[0] + (lo - s.begin), params + off[u][k] + (lo - ts[k].offset), 4 * (hi - lo));
      }
    }
    return "an llm.c model file";
  }
  if (const auto st = safetensors_files(file); !st.empty()) {
    import_safetensors(file, st, layout, slices);
    return st.size() == 1 ? "a safetensors file" : fmt::format("a safetensors model in {} files", st.size());
  }
  // None of the three: say what was expected (HDF5's own error would only
  // say that it could not open the file).
  if (!h5::is_hdf5(file))  // is_llmc has opened it
    throw DataError(fmt::format("{}: neither an llm.c model file (magic {}), a safetensors file (a Hugging Face "
                                "GPT-2), a checkpoint nor an HDF5 export (ckpt_tool export)",
                                file, kLlmcMagic));
  try {
    h5::Id f = h5::open_file(file, comm);
    if (h5::has_attr(f.get(), "format") && h5::attr_string(f.get(), "format") == kCheckpointFormat) {
      f.close();  // a checkpoint's state.h5: read as its directory (which has to be complete)
      return from_checkpoint(fs::path(file).parent_path().string());
    }
    check_model(file, layout.config(), model_from_json(nlohmann::json::parse(h5::attr_string(f.get(), "model"))));
    for (size_t u = 0; u < layout.num_units(); ++u) {
      const UnitSlice& s = slices[u];
      for (const TensorSpec& t : layout.unit(u).tensors) {
        const int64_t lo = std::max(s.begin, t.offset), hi = std::min(s.end, t.offset + t.init_numel);
        h5::Id d = h5::open_dataset(f.get(), t.name);
        const int64_t a = std::max<int64_t>(lo - t.offset, 0), b = std::max(hi - t.offset, a);
        h5::read_range(d.get(), s.state[0] + std::max<int64_t>(lo - s.begin, 0), a, b, true);
        note_progress(t.name);  // the caller's StallGuard (core/stall_guard.hpp)
      }
    }
  } catch (const h5::H5Error& e) {
    throw DataError(h5::in_file(file, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: no readable 'model' attribute: {}", file, e.what()));
  }
  return "an HDF5 export";
}

void llmc_to_hdf5(const std::string& bin, const std::string& out) {
  if (!is_llmc(bin)) throw DataError(fmt::format("{}: not an llm.c model file (bad magic)", bin));
  Mapped m(bin);
  const auto* h = reinterpret_cast<const int32_t*>(m.p);
  const ParamLayout layout(GPTConfig{h[4], h[5], h[6], h[2], h[3]});
  llmc_header(bin, m, layout);
  const auto* params = reinterpret_cast<const float*>(m.p + 1024);
  const auto off = llmc_offsets(layout);
  h5::Id o = h5::create_file(out, MPI_COMM_NULL);
  for (size_t u = 0; u < layout.num_units(); ++u) {
    const auto& ts = layout.unit(u).tensors;
    for (size_t k = 0; k < ts.size(); ++k) {
      h5::Id d = h5::create_dataset(o.get(), ts[k].name, stored_shape(ts[k]));
      h5::write_range(d.get(), params + off[u][k], 0, ts[k].init_numel, false);
    }
  }
  h5::set_attr(o.get(), "model", model_json(layout.config()).dump());
  o.close();
}

}  // namespace gpt
