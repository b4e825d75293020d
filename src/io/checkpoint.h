// A Hugging Face checkpoint's tensors across one or more safetensors files.
//
// Open(dir) accepts, in this order of preference:
//   1. <dir>/model.safetensors.index.json: weight_map name -> shard file. Each shard is
//      opened once; every tensor the index names must exist in that shard, and a tensor
//      found in a shard that the index does not map to that shard is an error.
//   2. <dir>/model.safetensors alone.
//   3. every <dir>/*.safetensors (no index); a name in two files is an error.
// A path to a single .safetensors file is accepted as well.
// All files stay mapped for the Checkpoint's lifetime; TensorViews point into them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"

namespace mx {

// The parsed model.safetensors.index.json.
struct CheckpointIndex {
  std::unordered_map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shards;                          // distinct files, sorted
  int64_t total_size = -1;                                  // metadata.total_size, -1 if absent
};

// Parses index JSON text (pure; `file_name` only appears in errors). Rejects duplicate
// keys, a missing or non-object weight_map, non-string file names, and file names that are
// not plain names in the same directory (no '/', no "..").
Result<CheckpointIndex> ParseCheckpointIndex(std::string_view text, std::string_view file_name);

// Thread-safety: immutable after Open; safe to share between threads.
class Checkpoint {
 public:
  static Result<Checkpoint> Open(const std::string& dir);

  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;

  // nullptr when absent.
  const TensorView* Find(std::string_view name) const;
  // Every tensor, sorted by name.
  std::vector<const TensorView*> tensors() const;
  // Sum of every tensor's byte size.
  size_t total_bytes() const { return total_bytes_; }
  int num_files() const { return static_cast<int>(files_.size()); }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // True when opened through an index json.
  bool has_index() const { return has_index_; }

 private:
  Checkpoint() = default;
  Status AddFile(std::unique_ptr<SafetensorsFile> f);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string_view, const TensorView*> by_name_;  // keys point into files_
  size_t total_bytes_ = 0;
  bool has_index_ = false;
};

}  // namespace mx
