// Writing Hugging Face safetensors checkpoints, deterministically and atomically.
//
// Output is byte-for-byte a function of the inputs: tensors sorted by name, data in the
// same order, header JSON with no whitespace and keys in a fixed order ("__metadata__"
// first, then each tensor as {"dtype","shape","data_offsets"}), padded with spaces to a
// multiple of 8 bytes as HF does. When the total exceeds `max_shard_bytes`, tensors are
// split greedily in name order into model-0000i-of-0000n.safetensors files and a
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}) is written.
// Every file is written to a temporary name and renamed into place only when all are
// complete, so a failure leaves no half-written output.
//
// Tensors may be given as borrowed bytes, owned bytes, or a producer callback that streams
// the bytes when the tensor is written, so that a quantizer can write a model larger than
// memory holding one tensor at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace mx {

// Receives the bytes of one tensor, in order, possibly in several pieces.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Write(const void* data, size_t n) = 0;
};

// Streams exactly the tensor's byte size into `out` (an error if it writes more or less).
// Called once per Write, in name order, on the writing thread.
using TensorProducer = std::function<Status(ByteSink& out)>;

class SafetensorsWriter {
 public:
  // Adds `key: value` to "__metadata__" (replacing an earlier value). Both must be UTF-8.
  Status SetMetadata(std::string key, std::string value);

  // Each Add validates its arguments: a non-empty UTF-8 name other than "__metadata__", not
  // added before; dims >= 0; the byte size matches dtype x shape.
  // Borrowed: `bytes` must stay valid until the last Write returns.
  Status Add(std::string name, DType dtype, std::vector<int64_t> shape,
             std::span<const uint8_t> bytes);
  Status AddOwned(std::string name, DType dtype, std::vector<int64_t> shape,
                  std::vector<uint8_t> bytes);
  // Lazy: `produce` runs while the tensor is written.
  Status AddLazy(std::string name, DType dtype, std::vector<int64_t> shape, TensorProducer produce);

  // Writes <dir>/<base>.safetensors when total_bytes() <= max_shard_bytes (0 = no limit),
  // else <dir>/<base>-0000i-of-0000n.safetensors plus <dir>/<base>.safetensors.index.json.
  // Creates `dir` if needed and replaces files of the same names; a stale index of the
  // same base is removed when a single file is written. A tensor larger than the limit
  // gets a shard of its own.
  Status Write(const std::string& dir, uint64_t max_shard_bytes = 0,
               std::string_view base = "model") const;
  // Writes every tensor into the single file `path`.
  Status WriteFile(const std::string& path) const;

  size_t num_tensors() const { return tensors_.size(); }
  // Sum of the tensors' byte sizes (the index's metadata.total_size).
  uint64_t total_bytes() const { return total_bytes_; }

  // The shard each tensor goes to for a given limit: lists of names, in write order.
  std::vector<std::vector<std::string>> PlanShards(uint64_t max_shard_bytes) const;

 private:
  struct Pending {
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes = 0;
    std::span<const uint8_t> borrowed;
    std::vector<uint8_t> owned;
    TensorProducer produce;
  };
  Status Validate(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                  uint64_t* nbytes) const;
  // Writes the named tensors into a temporary file beside `path`; returns its name.
  Result<std::string> WriteTemp(const std::string& path,
                                const std::vector<std::string>& names) const;

  std::map<std::string, Pending> tensors_;  // sorted by name: the write order
  std::map<std::string, std::string> metadata_;
  uint64_t total_bytes_ = 0;
};

// Header JSON for tensors (name, dtype, shape, nbytes) laid out in the given order,
// padded with spaces to a multiple of 8 bytes. Exposed for tests and tools.
struct SafetensorsHeaderItem {
  std::string_view name;
  DType dtype;
  const std::vector<int64_t>* shape;
  uint64_t nbytes;
};
std::string SerializeSafetensorsHeader(const std::vector<SafetensorsHeaderItem>& items,
                                       const std::map<std::string, std::string>& metadata);

}  // namespace mx
