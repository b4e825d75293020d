// CachedPages: which pages of a file are in the page cache, for the tests of what a load leaves
// there (MappedFile::DropCache, the weight loader).
#pragma once

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/mmap.h"

namespace mx {

// One flag per page of `path` (mincore over a mapping of our own: it reports the cache for a
// file this process may write), or empty when the file system keeps no separate cache to drop
// (tmpfs: its pages are the file) or the file cannot be mapped.
inline std::vector<bool> CachedPages(const std::string& path) {
  struct statfs fs {};
  if (statfs(path.c_str(), &fs) != 0 || fs.f_type == TMPFS_MAGIC) return {};
  auto m = MappedFile::Open(path);
  if (!m.ok() || m->size() == 0) return {};
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((m->size() + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(m->data()), m->size(), vec.data()) != 0) return {};
  std::vector<bool> cached(vec.size());
  for (size_t i = 0; i < vec.size(); ++i) cached[i] = (vec[i] & 1) != 0;
  return cached;
}

}  // namespace mx
