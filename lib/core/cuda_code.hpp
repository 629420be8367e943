// Which of a CUDA build's code a GPU runs, by CUDA's compatibility rules:
// a cubin for sm_XY runs on compute capability X.Z for Z >= Y (the same
// major version); PTX for compute_XY on any capability at or above X.Y,
// compiled by the driver as the kernels first load (kept in its cache
// after). Plain C++ (no CUDA), so the rule is tested without a GPU.
#pragma once

#include <sstream>
#include <string>

namespace gpt::cuda {

// `archs` as the build records CMAKE_CUDA_ARCHITECTURES ("80 90 100";
// "90-real" is a cubin alone, "90-virtual" PTX alone, "90" both). For a GPU
// of compute capability major.minor: "" where one of the cubins runs on
// it, else the architecture whose PTX its driver compiles for it (the
// newest at or below it, "100"), else "" as well (nothing runs: the start-up
// check's error, device_query.hpp device_unusable_reason).
inline std::string driver_compiled_ptx(const std::string& archs, int major, int minor) {
  const int device = major * 10 + minor;
  std::istringstream in(archs);
  std::string a;
  int newest_ptx = -1;
  while (in >> a) {
    const bool real_only = a.size() > 5 && a.compare(a.size() - 5, 5, "-real") == 0;
    const bool virtual_only = a.size() > 8 && a.compare(a.size() - 8, 8, "-virtual") == 0;
    const std::string digits = a.substr(0, a.find('-'));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return "";  // 90a, all: unknown
    const int arch = std::stoi(digits);
    if (!virtual_only && arch / 10 == major && arch <= device) return "";
    if (!real_only && arch <= device && arch > newest_ptx) newest_ptx = arch;
  }
  return newest_ptx < 0 ? "" : std::to_string(newest_ptx);
}

}  // namespace gpt::cuda
