#include "ref_file.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace gpt::ref {

RefFile read_ref(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  uint64_t hlen = 0;
  f.read(magic, 8);
  f.read(reinterpret_cast<char*>(&hlen), 8);
  if (!f || std::memcmp(magic, "GPTREF01", 8) != 0) throw std::runtime_error(path + ": not a GPTREF01 file");
  std::string header(hlen, '\0');
  f.read(header.data(), static_cast<std::streamsize>(hlen));
  const auto h = nlohmann::json::parse(header);
  const std::streamoff base = 16 + static_cast<std::streamoff>(hlen);
  RefFile r;
  r.meta = h.at("meta");
  for (auto& [name, a] : h.at("arrays").items()) {
    Array arr;
    arr.dtype = a.at("dtype");
    arr.shape = a.at("shape").get<std::vector<int64_t>>();
    int64_t n = 1;
    for (auto d : arr.shape) n *= d;
    f.seekg(base + a.at("offset").get<std::streamoff>());
    if (arr.dtype == "f32") {
      arr.f32.resize(n);
      f.read(reinterpret_cast<char*>(arr.f32.data()), n * 4);
    } else {
      arr.i32.resize(n);
      f.read(reinterpret_cast<char*>(arr.i32.data()), n * 4);
    }
    if (!f) throw std::runtime_error(path + ": truncated array " + name);
    r.arrays.emplace(name, std::move(arr));
  }
  return r;
}

void write_ref(const std::string& path, const RefFile& r) {
  nlohmann::json arrays = nlohmann::json::object();
  int64_t off = 0;
  for (auto& [name, a] : r.arrays) {
    arrays[name] = {{"dtype", a.dtype}, {"shape", a.shape}, {"offset", off}};
    off += 4 * static_cast<int64_t>(a.dtype == "f32" ? a.f32.size() : a.i32.size());
  }
  const std::string header = nlohmann::json{{"meta", r.meta}, {"arrays", arrays}}.dump();
  std::ofstream f(path, std::ios::binary);
  const uint64_t hlen = header.size();
  f.write("GPTREF01", 8);
  f.write(reinterpret_cast<const char*>(&hlen), 8);
  f.write(header.data(), static_cast<std::streamsize>(hlen));
  for (auto& [name, a] : r.arrays) {
    if (a.dtype == "f32") {
      f.write(reinterpret_cast<const char*>(a.f32.data()), static_cast<std::streamsize>(4 * a.f32.size()));
    } else {
      f.write(reinterpret_cast<const char*>(a.i32.data()), static_cast<std::streamsize>(4 * a.i32.size()));
    }
  }
  if (!f) throw std::runtime_error(path + ": write failed");
}

}  // namespace gpt::ref
