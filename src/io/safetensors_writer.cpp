// SafetensorsWriter: header serialization, shard planning, temp-file + rename output.
#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/safetensors_json.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

std::string JsonString(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

// A buffered POSIX file. Close() must be called for the data to be durable.
class OutFile {
 public:
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return IoError("{}: cannot create: {}", path, std::strerror(errno));
    buf_.reserve(kBufBytes);
    return Status::Ok();
  }
  Status Write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + n > kBufBytes) {
      MX_RETURN_IF_ERROR(Flush());
      if (n >= kBufBytes) return WriteRaw(p, n);
    }
    buf_.insert(buf_.end(), p, p + n);
    return Status::Ok();
  }
  Status Close() {
    MX_RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return IoError("{}: fsync failed: {}", path_, std::strerror(errno));
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return IoError("{}: close failed: {}", path_, std::strerror(errno));
    return Status::Ok();
  }

 private:
  static constexpr size_t kBufBytes = 4 << 20;
  Status Flush() {
    MX_RETURN_IF_ERROR(WriteRaw(buf_.data(), buf_.size()));
    buf_.clear();
    return Status::Ok();
  }
  Status WriteRaw(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return IoError("{}: write failed: {}", path_, std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
};

// Forwards one tensor's bytes to the file and enforces its exact size.
class CountingSink : public ByteSink {
 public:
  CountingSink(OutFile& out, uint64_t expected) : out_(out), expected_(expected) {}
  Status Write(const void* data, size_t n) override {
    if (n > expected_ - written_) {
      return InvalidArgument("producer wrote more than its {} bytes", expected_);
    }
    written_ += n;
    return out_.Write(data, n);
  }
  Status Finish() const {
    if (written_ != expected_) {
      return InvalidArgument("producer wrote {} bytes, expected {}", written_, expected_);
    }
    return Status::Ok();
  }

 private:
  OutFile& out_;
  uint64_t expected_;
  uint64_t written_ = 0;
};

std::string TempNameFor(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / fmt::format(".{}.tmp-{}", p.filename().string(), ::getpid())).string();
}

void RemoveQuietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace

std::string SerializeSafetensorsHeader(const std::vector<SafetensorsHeaderItem>& items,
                                       const std::map<std::string, std::string>& metadata) {
  std::string s = "{";
  bool first = true;
  if (!metadata.empty()) {
    s += "\"__metadata__\":{";
    bool mfirst = true;
    for (const auto& [k, v] : metadata) {
      if (!mfirst) s += ',';
      mfirst = false;
      s += JsonString(k);
      s += ':';
      s += JsonString(v);
    }
    s += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& it : items) {
    if (!first) s += ',';
    first = false;
    s += JsonString(it.name);
    s += ":{\"dtype\":\"";
    s += DTypeName(it.dtype);
    s += "\",\"shape\":[";
    for (size_t i = 0; i < it.shape->size(); ++i) {
      if (i > 0) s += ',';
      s += std::to_string((*it.shape)[i]);
    }
    s += fmt::format("],\"data_offsets\":[{},{}]}}", offset, offset + it.nbytes);
    offset += it.nbytes;
  }
  s += '}';
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

Status SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
    return InvalidArgument("safetensors metadata '{}' is not valid UTF-8",
                           IsValidUtf8(key) ? key : std::string("<binary key>"));
  }
  metadata_[std::move(key)] = std::move(value);
  return Status::Ok();
}

Status SafetensorsWriter::Validate(const std::string& name, DType dtype,
                                   const std::vector<int64_t>& shape, uint64_t* nbytes) const {
  if (name.empty()) return InvalidArgument("safetensors tensor name is empty");
  if (!IsValidUtf8(name)) return InvalidArgument("safetensors tensor name is not valid UTF-8");
  if (name == "__metadata__") {
    return InvalidArgument("tensor name '__metadata__' is reserved by safetensors");
  }
  if (tensors_.count(name) != 0) return AlreadyExists("tensor '{}' added twice", name);
  if (shape.size() > kMaxSafetensorsRank) {
    return InvalidArgument("tensor '{}': rank {} exceeds {}", name, shape.size(),
                           kMaxSafetensorsRank);
  }
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor '{}': negative dim {}", name, d);
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return InvalidArgument("tensor '{}': byte size overflows", name);
    }
  }
  if (__builtin_add_overflow(total_bytes_, n, nbytes)) {
    return InvalidArgument("tensor '{}': total size overflows", name);
  }
  *nbytes = n;
  return Status::Ok();
}

Status SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape,
                              std::span<const uint8_t> bytes) {
  uint64_t nbytes = 0;
  MX_RETURN_IF_ERROR(Validate(name, dtype, shape, &nbytes));
  if (bytes.size() != nbytes) {
    return InvalidArgument("tensor '{}': {} bytes given, {} x {} dims needs {}", name, bytes.size(),
                           DTypeName(dtype), shape.size(), nbytes);
  }
  Pending p{dtype, std::move(shape), nbytes, bytes, {}, {}};
  tensors_.emplace(std::move(name), std::move(p));
  total_bytes_ += nbytes;
  return Status::Ok();
}

Status SafetensorsWriter::AddOwned(std::string name, DType dtype, std::vector<int64_t> shape,
                                   std::vector<uint8_t> bytes) {
  uint64_t nbytes = 0;
  MX_RETURN_IF_ERROR(Validate(name, dtype, shape, &nbytes));
  if (bytes.size() != nbytes) {
    return InvalidArgument("tensor '{}': {} bytes given, {} x {} dims needs {}", name, bytes.size(),
                           DTypeName(dtype), shape.size(), nbytes);
  }
  Pending p{dtype, std::move(shape), nbytes, {}, std::move(bytes), {}};
  p.borrowed = p.owned;  // note: vector storage is stable when the Pending is moved
  tensors_.emplace(std::move(name), std::move(p));
  total_bytes_ += nbytes;
  return Status::Ok();
}

Status SafetensorsWriter::AddLazy(std::string name, DType dtype, std::vector<int64_t> shape,
                                  TensorProducer produce) {
  if (!produce) return InvalidArgument("tensor '{}': empty producer", name);
  uint64_t nbytes = 0;
  MX_RETURN_IF_ERROR(Validate(name, dtype, shape, &nbytes));
  Pending p{dtype, std::move(shape), nbytes, {}, {}, std::move(produce)};
  tensors_.emplace(std::move(name), std::move(p));
  total_bytes_ += nbytes;
  return Status::Ok();
}

std::vector<std::vector<std::string>> SafetensorsWriter::PlanShards(
    uint64_t max_shard_bytes) const {
  std::vector<std::vector<std::string>> shards(1);
  uint64_t cur = 0;
  for (const auto& [name, t] : tensors_) {
    if (max_shard_bytes != 0 && !shards.back().empty() && cur + t.nbytes > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(name);
    cur += t.nbytes;
  }
  return shards;
}

Result<std::string> SafetensorsWriter::WriteTemp(const std::string& path,
                                                 const std::vector<std::string>& names) const {
  std::vector<SafetensorsHeaderItem> items;
  items.reserve(names.size());
  for (const auto& n : names) {
    const Pending& t = tensors_.at(n);
    items.push_back({n, t.dtype, &t.shape, t.nbytes});
  }
  std::string header = SerializeSafetensorsHeader(items, metadata_);
  if (header.size() > kMaxSafetensorsHeaderBytes) {
    return InvalidArgument("{}: header of {} bytes exceeds the {}-byte safetensors limit", path,
                           header.size(), kMaxSafetensorsHeaderBytes);
  }
  std::string tmp = TempNameFor(path);
  OutFile out;
  Status st = [&]() -> Status {
    MX_RETURN_IF_ERROR(out.Open(tmp));
    uint8_t len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    MX_RETURN_IF_ERROR(out.Write(len, 8));
    MX_RETURN_IF_ERROR(out.Write(header.data(), header.size()));
    for (const auto& name : names) {
      const Pending& t = tensors_.at(name);
      if (t.produce) {
        CountingSink sink(out, t.nbytes);
        Status ps = t.produce(sink);
        if (ps.ok()) ps = sink.Finish();
        if (!ps.ok()) return ps.WithContext(fmt::format("{}: tensor '{}'", path, name));
      } else if (t.nbytes > 0) {
        MX_RETURN_IF_ERROR(out.Write(t.borrowed.data(), t.borrowed.size()));
      }
    }
    return out.Close();
  }();
  if (!st.ok()) {
    RemoveQuietly(tmp);
    return st;
  }
  return tmp;
}

Status SafetensorsWriter::WriteFile(const std::string& path) const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors_) names.push_back(name);
  MX_ASSIGN_OR_RETURN(std::string tmp, WriteTemp(path, names));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    RemoveQuietly(tmp);
    return IoError("{}: cannot rename {} into place: {}", path, tmp, ec.message());
  }
  return Status::Ok();
}

Status SafetensorsWriter::Write(const std::string& dir, uint64_t max_shard_bytes,
                                std::string_view base) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("{}: cannot create directory: {}", dir, ec.message());
  const fs::path d(dir);
  const std::string index_path = (d / fmt::format("{}.safetensors.index.json", base)).string();

  auto shards = PlanShards(max_shard_bytes);
  if (shards.size() == 1) {
    MX_RETURN_IF_ERROR(WriteFile((d / fmt::format("{}.safetensors", base)).string()));
    RemoveQuietly(index_path);  // a stale index would shadow the new file
    return Status::Ok();
  }

  // Write every shard and the index to temporary names, then rename them all.
  std::vector<std::pair<std::string, std::string>> done;  // (tmp, final)
  auto cleanup = [&] {
    for (const auto& [tmp, final_path] : done) RemoveQuietly(tmp);
  };
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string fname = fmt::format("{}-{:05d}-of-{:05d}.safetensors", base, i + 1, shards.size());
    std::string path = (d / fname).string();
    auto tmp = WriteTemp(path, shards[i]);
    if (!tmp.ok()) {
      cleanup();
      return tmp.status();
    }
    done.emplace_back(*tmp, path);
    for (const auto& n : shards[i]) weight_map[n] = fname;
  }
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}},
                          {"weight_map", std::move(weight_map)}};
  std::string index_text = index.dump(2) + "\n";
  {
    std::string tmp = TempNameFor(index_path);
    OutFile out;
    Status st = out.Open(tmp);
    if (st.ok()) st = out.Write(index_text.data(), index_text.size());
    if (st.ok()) st = out.Close();
    done.emplace_back(tmp, index_path);
    if (!st.ok()) {
      cleanup();
      return st;
    }
  }
  for (size_t i = 0; i < done.size(); ++i) {
    fs::rename(done[i].first, done[i].second, ec);
    if (ec) {
      for (size_t j = i; j < done.size(); ++j) RemoveQuietly(done[j].first);
      return IoError("{}: cannot rename {} into place: {}", done[i].second, done[i].first,
                     ec.message());
    }
  }
  return Status::Ok();
}

}  // namespace mx
