// Read-only memory mapping of a whole file, and anonymous page-aligned buffers. Both move-only;
// they unmap on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace mx {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. An empty file maps to size 0 with a non-null data() pointer.
  static Result<MappedFile> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Evicts the whole pages of [p, p + n) (inside this mapping) from the page cache
  // (posix_fadvise POSIX_FADV_DONTNEED), for bytes nothing will read again: the loader's copied
  // tensors, which would otherwise keep a second copy of the weights in memory until the kernel
  // reclaims it, competing with the KV cache and scratch while the model runs. Pages still
  // mapped (by this process or another) stay; a later read of the range goes to the disk. Best
  // effort: errors are ignored.
  void DropCache(const void* p, size_t n) const;

 private:
  void Reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  int fd_ = -1;  // kept open for DropCache
  std::string path_;
};

// Drops the whole pages of [data, data + n) inside a read-only file mapping from this process's
// resident set (madvise MADV_DONTNEED): the file and the page cache are untouched and a later
// read faults the pages back in. For streaming passes over a mapping larger than memory (the
// quantizer), so resident memory stays at the pages in use. Best effort: errors are ignored.
void ReleaseMappedPages(const void* data, size_t n);

// Anonymous zero-filled memory straight from mmap: the kernel supplies zero pages as they are
// first touched, so a large pool (the KV cache: gigabytes, mostly unused at start) costs neither
// a multi-second memset nor resident memory until it is written. `huge_pages` asks for
// transparent huge pages (madvise; the 2 MB pages spare the TLB on buffers streamed end to
// end, such as weights; ignored where the kernel does not offer them). Throws std::bad_alloc
// when the mapping fails, as a std::vector of the same size would.
class PageBuffer {
 public:
  PageBuffer() = default;
  explicit PageBuffer(size_t bytes, bool huge_pages = false);
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped (size_ rounded up; 0 for an empty buffer)
};

}  // namespace mx
