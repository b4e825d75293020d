// Checkpoint: index json parsing and multi-file tensor lookup.
#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/safetensors_json.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
constexpr size_t kMaxIndexBytes = 1ull << 30;

Result<std::string> ReadSmallFile(const std::string& path) {
  MX_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  if (map.size() > kMaxIndexBytes) {
    return DataLoss("{}: {} bytes is too large for an index file", path, map.size());
  }
  return std::string(reinterpret_cast<const char*>(map.data()), map.size());
}

bool IsPlainFileName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

Result<CheckpointIndex> ParseCheckpointIndex(std::string_view text, std::string_view file_name) {
  MX_ASSIGN_OR_RETURN(nlohmann::json root, ParseStrictJson(text, file_name));
  if (!root.is_object()) {
    return DataLoss("{}: must be a JSON object, got {}", file_name, root.type_name());
  }
  CheckpointIndex idx;
  auto md = root.find("metadata");
  if (md != root.end() && md->is_object()) {
    auto ts = md->find("total_size");
    if (ts != md->end() && ts->is_number_unsigned()) {
      idx.total_size = static_cast<int64_t>(std::min<uint64_t>(
          ts->get<uint64_t>(), static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
    }
  }
  auto wm = root.find("weight_map");
  if (wm == root.end()) return DataLoss("{}: missing 'weight_map'", file_name);
  if (!wm->is_object()) {
    return DataLoss("{}: 'weight_map' must be an object, got {}", file_name, wm->type_name());
  }
  std::set<std::string> shards;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      return DataLoss("{}: tensor '{}': weight_map value must be a file name string, got {}",
                      file_name, name, file.type_name());
    }
    const auto& f = file.get_ref<const std::string&>();
    if (!IsPlainFileName(f)) {
      return DataLoss("{}: tensor '{}': shard '{}' is not a file name in the same directory",
                      file_name, name, f);
    }
    shards.insert(f);
    idx.weight_map.emplace(name, f);
  }
  idx.shards.assign(shards.begin(), shards.end());
  return idx;
}

Status Checkpoint::AddFile(std::unique_ptr<SafetensorsFile> f) {
  for (const auto& t : f->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted) {
      return DataLoss("{}: tensor '{}' also appears in {}", f->path(), t.name, *it->second->file);
    }
    total_bytes_ += t.nbytes;
  }
  files_.push_back(std::move(f));
  return Status::Ok();
}

Result<Checkpoint> Checkpoint::Open(const std::string& dir) {
  std::error_code ec;
  Checkpoint ck;
  if (fs::is_regular_file(dir, ec)) {
    MX_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(dir));
    MX_RETURN_IF_ERROR(ck.AddFile(std::move(f)));
    return ck;
  }
  if (!fs::is_directory(dir, ec)) return NotFound("{}: no such checkpoint directory", dir);
  const fs::path d(dir);

  const std::string index_path = (d / kIndexName).string();
  if (fs::exists(index_path, ec)) {
    MX_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path));
    MX_ASSIGN_OR_RETURN(CheckpointIndex idx, ParseCheckpointIndex(text, index_path));
    ck.has_index_ = true;
    for (const auto& shard : idx.shards) {
      auto f = SafetensorsFile::Open((d / shard).string());
      if (!f.ok())
        return f.status().WithContext(fmt::format("{} names shard {}", index_path, shard));
      for (const auto& t : (*f)->tensors()) {
        auto it = idx.weight_map.find(t.name);
        if (it == idx.weight_map.end()) {
          return DataLoss("{}: tensor '{}' is not in the index {}", (*f)->path(), t.name,
                          index_path);
        }
        if (it->second != shard) {
          return DataLoss("{}: tensor '{}' is in {} but the index {} maps it to {}", (*f)->path(),
                          t.name, shard, index_path, it->second);
        }
      }
      MX_RETURN_IF_ERROR(ck.AddFile(std::move(f).value()));
    }
    // Every indexed tensor must now be present (in the shard it maps to, checked above).
    for (const auto& [name, shard] : idx.weight_map) {
      if (ck.by_name_.find(name) == ck.by_name_.end()) {
        return DataLoss("{}: tensor '{}' is missing from shard {} named by the index", index_path,
                        name, (d / shard).string());
      }
    }
    return ck;
  }

  const std::string single = (d / kSingleName).string();
  if (fs::exists(single, ec)) {
    MX_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single));
    MX_RETURN_IF_ERROR(ck.AddFile(std::move(f)));
    return ck;
  }

  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(d, ec)) {
    if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) {
      paths.push_back(e.path().string());
    }
  }
  if (ec) return IoError("{}: cannot list directory: {}", dir, ec.message());
  if (paths.empty()) {
    return NotFound("{}: no {}, {} or *.safetensors files", dir, kIndexName, kSingleName);
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    MX_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(p));
    MX_RETURN_IF_ERROR(ck.AddFile(std::move(f)));
  }
  return ck;
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const TensorView*> Checkpoint::tensors() const {
  std::vector<const TensorView*> out;
  out.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) out.push_back(t);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

}  // namespace mx
