// MappedFile on POSIX mmap.
#include "base/mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

namespace mx {
namespace {
const uint8_t kEmpty[1] = {0};
}  // namespace

void ReleaseMappedPages(const void* data, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + n) / page * page;
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::Reset() {
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = false;
  fd_ = -1;
}

void MappedFile::DropCache(const void* p, size_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  if (fd_ < 0 || b < data_ || b >= data_ + size_) return;
  const auto off = static_cast<size_t>(b - data_);
  (void)posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(std::min(n, size_ - off)),
                      POSIX_FADV_DONTNEED);
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound("{}: no such file", path);
    return IoError("{}: cannot open: {}", path, std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("{}: not a regular file", path);
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ == 0) {
    f.data_ = kEmpty;
    ::close(fd);
    return f;
  }
  void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  if (p == MAP_FAILED) {
    ::close(fd);
    return IoError("{}: mmap failed: {}", path, std::strerror(err));
  }
  f.data_ = static_cast<const uint8_t*>(p);
  f.mapped_ = true;
  f.fd_ = fd;
  return f;
}

PageBuffer::PageBuffer(size_t bytes, bool huge_pages) : size_(bytes) {
  if (bytes == 0) return;
  // Huge pages need 2 MB alignment: map 2 MB more and use the aligned part.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t want = (bytes + page - 1) / page * page;
  const size_t len = huge_pages ? want + kHuge : want;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<uint8_t*>(p);
  if (huge_pages) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(base);
    const size_t lead = ((a + kHuge - 1) / kHuge * kHuge) - a;
    if (lead > 0) munmap(base, lead);
    munmap(base + lead + want, kHuge - lead);  // lead < kHuge: the tail is never empty
    base += lead;
    madvise(base, want, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KB
  }
  data_ = base;
  mapped_ = want;
}

PageBuffer::~PageBuffer() {
  if (mapped_ > 0) munmap(data_, mapped_);
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept { *this = std::move(other); }

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    if (mapped_ > 0) munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace mx
