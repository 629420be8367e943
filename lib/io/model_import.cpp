#include "io/model_import.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
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

}  // namespace

void import_params(const std::string& file, MPI_Comm comm, const ParamLayout& layout,
                   const std::vector<UnitSlice>& slices) {
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
    return;
  }
  // Neither an llm.c file nor HDF5: say what was expected (HDF5's own error
  // would only say that it could not open the file).
  if (!h5::is_hdf5(file))  // is_llmc has opened it
    throw DataError(fmt::format("{}: neither an llm.c model file (magic {}) nor an HDF5 export (ckpt_tool export)",
                                file, kLlmcMagic));
  try {
    h5::Id f = h5::open_file(file, comm);
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
    throw DataError(fmt::format("{}: {}", file, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: no readable 'model' attribute: {}", file, e.what()));
  }
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
