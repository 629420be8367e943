// Byte counts as users write and read them.
#pragma once

#include <cstdint>
#include <string>

namespace gpt {

// "4096", "64K", "128M", "80G", "1T" and "80GiB"/"512MiB" are binary
// multiples; "80GB"/"512MB" are decimal. Throws ConfigError naming `what`
// and the text when it is not a non-negative size.
int64_t parse_bytes(const std::string& text, const std::string& what = "size");
// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace gpt
