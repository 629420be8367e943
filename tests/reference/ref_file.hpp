// The reference-file format shared by write_reference_input (C++), the
// PyTorch script make_golden.py and the golden test:
//   8 bytes "GPTREF01" | uint64 little-endian header length | JSON header |
//   raw little-endian arrays at the byte offsets the header gives.
// Header: {"meta": {...}, "arrays": {name: {"dtype": "f32"|"i32", "shape": [...], "offset": n}}}
// (offsets count from the first byte after the header).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt::ref {

struct Array {
  std::string dtype;  // "f32" or "i32"
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;
};

struct RefFile {
  nlohmann::json meta;
  std::map<std::string, Array> arrays;
};

RefFile read_ref(const std::string& path);
void write_ref(const std::string& path, const RefFile& r);

}  // namespace gpt::ref
