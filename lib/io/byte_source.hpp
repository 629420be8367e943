// The bytes of an input file, decompressed when it is gzip or zstd (as web
// corpora ship JSON lines: C4 and Dolma *.json.gz, the Pile *.jsonl.zst).
// The kind is told by the file's first bytes, not its name; a name that says
// .gz or .zst over bytes that are not is an error (a damaged or mislabelled
// file would otherwise be tokenised as text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gpt {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes of the (decompressed) content into dst; 0 only at its end.
  // Throws DataError naming the file when it cannot be read or its
  // compressed stream is damaged or truncated.
  virtual size_t read(char* dst, size_t n) = 0;
  // Bytes of the file itself consumed so far: for a compressed file, its
  // compressed bytes (which the validation split is measured in).
  virtual uint64_t consumed() const = 0;
  // Whether consumed() counts exactly the bytes read() returned.
  virtual bool plain() const = 0;
};

// Opens `path`: plain, gzip (1f 8b) or zstd (28 b5 2f fd). Throws DataError
// naming the file if it cannot be opened, for a compression this build
// lacks (zlib or libzstd missing at build time), or for a name ending in .gz
// or .zst over a file that does not start with that format's magic.
std::unique_ptr<ByteSource> open_byte_source(const std::string& path);

}  // namespace gpt
