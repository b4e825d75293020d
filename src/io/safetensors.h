// Reading Hugging Face safetensors files: an 8-byte little-endian header length N, N bytes of
// JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {}}),
// then the data section; offsets are relative to the start of the data section.
//
// ParseSafetensorsHeader is pure (bytes in, Status or header out) and validates everything
// against the total file size, so that every TensorView handed out points inside the file.
// SafetensorsFile mmaps a file and exposes zero-copy views. Malformed input never crashes:
// it returns DataLoss naming the file and, where there is one, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/mmap.h"
#include "base/status.h"

namespace mx {

// The largest header accepted (the Rust reference implementation uses the same cap).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// The largest tensor rank accepted.
inline constexpr size_t kMaxSafetensorsRank = 64;

// One entry of a parsed header. Offsets are relative to the data section.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                    // N, the JSON length (including any padding)
  uint64_t data_start = 0;                      // 8 + N: file offset of the data section
  std::vector<SafetensorsEntry> tensors;        // sorted by begin offset, then name
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent
};

// Parses and validates the header of a safetensors file whose full contents are
// data[0, size). `file_name` only appears in error messages.
// Checks: size >= 8; N <= kMaxSafetensorsHeaderBytes; 8 + N <= size; header is UTF-8 JSON
// with no duplicate keys and is an object; each entry is an object with a known string
// `dtype`, an integer array `shape` (dims >= 0, product and byte size do not overflow), and
// `data_offsets` [begin, end] with begin <= end <= size - 8 - N and end - begin equal to
// numel * dtype size; no two non-empty tensors overlap; `__metadata__`, when present, maps
// strings to strings. Unknown fields in an entry are ignored.
// note: unlike the Rust reference, gaps between tensors and bytes after the last one are
// accepted (they cannot make a view escape the file); the writer never produces them.
Result<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                 std::string_view file_name);

// A zero-copy view of one tensor inside a mapped file. Valid while its SafetensorsFile (or
// the Checkpoint owning it) lives.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // not necessarily aligned to the element size
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the file holding it
  const MappedFile* map = nullptr;    // the file mapping data lies in (SafetensorsFile::Open)

  int64_t numel() const;
};

// Drops the whole pages of bytes [offset, offset + n) of `v` (clamped to the tensor) from this
// process's resident set when `v` lies in a file mapping; a later read maps them back in, so
// the view stays valid. Nothing for a view of caller-owned bytes (FromBuffer). The loader calls
// it once it has copied a tensor (or part of one), so the mapping does not keep a second copy
// of the weights resident.
void ReleaseTensorPages(const TensorView& v, size_t offset = 0, size_t n = SIZE_MAX);

// An open, validated safetensors file. Thread-safety: immutable after Open; safe to share.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Views over an in-memory image (e.g. a test buffer); `bytes` must outlive the object.
  static Result<std::unique_ptr<SafetensorsFile>> FromBuffer(const uint8_t* bytes, size_t size,
                                                             std::string name);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In file order (by data offset).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t file_size() const { return size_; }
  // File offset of the data section (8 + header length).
  uint64_t data_start() const { return data_start_; }

 private:
  SafetensorsFile() = default;
  Status Init(const uint8_t* bytes, size_t size);

  std::string path_;
  MappedFile map_;
  size_t size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string_view, size_t> by_name_;  // keys point into tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace mx
