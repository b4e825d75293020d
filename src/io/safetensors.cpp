// Safetensors header validation and the mmap-backed SafetensorsFile.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "io/safetensors_json.h"

namespace mx {
namespace {

using json = nlohmann::json;

// "<file>: tensor '<name>': <what>"
template <typename... Args>
Status TensorError(std::string_view file, std::string_view name, fmt::format_string<Args...> f,
                   Args&&... args) {
  return DataLoss("{}: tensor '{}': {}", file, name, fmt::format(f, std::forward<Args>(args)...));
}

const char* JsonTypeName(const json& j) {
  if (j.is_number_unsigned() || j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "non-integer number";
  return j.type_name();
}

// A non-negative JSON integer; `what` names the field for the error.
Result<uint64_t> NonNegativeInt(const json& j, std::string_view file, std::string_view name,
                                std::string_view what) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    return TensorError(file, name, "{} is negative ({})", what, j.get<int64_t>());
  }
  return TensorError(file, name, "{} must be a non-negative integer, got {} {}", what,
                     JsonTypeName(j), j.dump());
}

Result<SafetensorsEntry> ParseEntry(const std::string& name, const json& j, uint64_t data_size,
                                    std::string_view file) {
  if (!IsValidUtf8(name)) return DataLoss("{}: a tensor name is not valid UTF-8", file);
  if (!j.is_object()) {
    return TensorError(file, name, "entry must be an object, got {}", JsonTypeName(j));
  }
  SafetensorsEntry e;
  e.name = name;

  auto dt = j.find("dtype");
  if (dt == j.end()) return TensorError(file, name, "missing 'dtype'");
  if (!dt->is_string()) {
    return TensorError(file, name, "'dtype' must be a string, got {}", JsonTypeName(*dt));
  }
  auto parsed = ParseDType(dt->get_ref<const std::string&>());
  if (!parsed.ok()) return TensorError(file, name, "{}", parsed.status().message());
  e.dtype = *parsed;

  auto sh = j.find("shape");
  if (sh == j.end()) return TensorError(file, name, "missing 'shape'");
  if (!sh->is_array()) {
    return TensorError(file, name, "'shape' must be an array, got {}", JsonTypeName(*sh));
  }
  if (sh->size() > kMaxSafetensorsRank) {
    return TensorError(file, name, "rank {} exceeds {}", sh->size(), kMaxSafetensorsRank);
  }
  uint64_t numel = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    MX_ASSIGN_OR_RETURN(uint64_t d,
                        NonNegativeInt((*sh)[i], file, name, fmt::format("shape[{}]", i)));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, d, &numel)) {
      return TensorError(file, name, "shape {} overflows the element count", sh->dump());
    }
    e.shape.push_back(static_cast<int64_t>(d));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(DTypeSize(e.dtype)), &nbytes)) {
    return TensorError(file, name, "shape {} overflows the byte size", sh->dump());
  }

  auto off = j.find("data_offsets");
  if (off == j.end()) return TensorError(file, name, "missing 'data_offsets'");
  if (!off->is_array() || off->size() != 2) {
    return TensorError(file, name, "'data_offsets' must be an array [begin, end], got {}",
                       off->is_array() ? fmt::format("{} elements", off->size())
                                       : std::string(JsonTypeName(*off)));
  }
  MX_ASSIGN_OR_RETURN(e.begin, NonNegativeInt((*off)[0], file, name, "data_offsets[0]"));
  MX_ASSIGN_OR_RETURN(e.end, NonNegativeInt((*off)[1], file, name, "data_offsets[1]"));
  if (e.begin > e.end) {
    return TensorError(file, name, "data_offsets begin {} > end {}", e.begin, e.end);
  }
  if (e.end > data_size) {
    return TensorError(file, name,
                       "data_offsets [{}, {}] end beyond the data section of {} bytes "
                       "(file truncated?)",
                       e.begin, e.end, data_size);
  }
  if (e.end - e.begin != nbytes) {
    return TensorError(file, name,
                       "data_offsets [{}, {}] span {} bytes but {} x shape {} needs {} bytes",
                       e.begin, e.end, e.end - e.begin, DTypeName(e.dtype), sh->dump(), nbytes);
  }
  return e;
}

}  // namespace

Result<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                 std::string_view file_name) {
  if (size < 8) {
    return DataLoss("{}: truncated: {} bytes, shorter than the 8-byte header length", file_name,
                    size);
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxSafetensorsHeaderBytes) {
    return DataLoss("{}: header length {} exceeds the limit of {} bytes", file_name, n,
                    kMaxSafetensorsHeaderBytes);
  }
  if (n > size - 8) {
    return DataLoss("{}: header length {} runs beyond the end of the file ({} bytes; truncated?)",
                    file_name, n, size);
  }
  std::string_view text(reinterpret_cast<const char*>(data + 8), n);
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    // Show the printable ASCII before the bad byte: usually the start of the tensor name.
    size_t from = bad;
    while (from > 0 && bad - from < 48 && text[from - 1] >= 0x20 && text[from - 1] < 0x7f &&
           text[from - 1] != '"') {
      --from;
    }
    return DataLoss("{}: header is not valid UTF-8 at byte {} (after \"{}\")", file_name, bad,
                    text.substr(from, bad - from));
  }

  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;

  // Depth 3 suffices (root, entry, shape); unknown fields in an entry may nest a little.
  StrictJsonLimits limits{.max_depth = 8, .max_array_len = 1 << 20};
  MX_ASSIGN_OR_RETURN(json root,
                      ParseStrictJson(text, fmt::format("{}: header", file_name), limits));
  if (!root.is_object()) {
    return DataLoss("{}: header must be a JSON object, got {}", file_name, root.type_name());
  }
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return DataLoss("{}: '__metadata__' must be an object of strings, got {}", file_name,
                        value.type_name());
      }
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return DataLoss("{}: '__metadata__' value '{}' must be a string, got {}", file_name, mk,
                          JsonTypeName(mv));
        }
        h.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    MX_ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(key, value, data_size, file_name));
    h.tensors.push_back(std::move(e));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Overlap: sorted by begin, a non-empty tensor must start at or after the furthest end
  // seen so far among non-empty tensors.
  const SafetensorsEntry* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin == t.end) continue;
    if (prev != nullptr && t.begin < prev->end) {
      return TensorError(file_name, t.name, "data_offsets [{}, {}] overlap tensor '{}' at [{}, {}]",
                         t.begin, t.end, prev->name, prev->begin, prev->end);
    }
    if (prev == nullptr || t.end > prev->end) prev = &t;
  }
  return h;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  MX_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = std::move(map);
  MX_RETURN_IF_ERROR(f->Init(f->map_.data(), f->map_.size()));
  for (TensorView& v : f->tensors_) v.map = &f->map_;
  return f;
}

void ReleaseTensorPages(const TensorView& v, size_t offset, size_t n) {
  if (v.map == nullptr || offset >= v.nbytes) return;
  ReleaseMappedPages(v.data + offset, std::min(n, v.nbytes - offset));
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(const uint8_t* bytes,
                                                                     size_t size,
                                                                     std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  MX_RETURN_IF_ERROR(f->Init(bytes, size));
  return f;
}

Status SafetensorsFile::Init(const uint8_t* bytes, size_t size) {
  MX_ASSIGN_OR_RETURN(SafetensorsHeader h, ParseSafetensorsHeader(bytes, size, path_));
  size_ = size;
  data_start_ = h.data_start;
  metadata_ = std::move(h.metadata);
  tensors_.reserve(h.tensors.size());
  for (auto& e : h.tensors) {
    TensorView v;
    v.name = std::move(e.name);
    v.dtype = e.dtype;
    v.shape = std::move(e.shape);
    v.data = bytes + h.data_start + e.begin;
    v.nbytes = static_cast<size_t>(e.end - e.begin);
    v.file = &path_;
    tensors_.push_back(std::move(v));
  }
  by_name_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
  return Status::Ok();
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace mx
