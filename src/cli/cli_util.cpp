// Shared verb helpers.
#include "cli/cli_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include <fmt/format.h>

#include "kv/paged_kv_store.h"

namespace mx::cli {

void ThrowFlagError(const std::string& flag, const Status& why) {
  const std::string& m = why.message();
  throw CLI::ParseError(m.starts_with(flag) ? m : flag + ": " + m, 1);
}

void AddKernelFlags(CLI::App* sub, std::optional<KernelLevel>* kernels,
                    GemmActivations* activations) {
  AddParsedOption(sub, "--kernels", kernels, ParseKernelLevel,
                  "force a kernel level: ref|avx2|avx512 (default: this CPU's best)");
  AddParsedOption(
      sub, "--gemm-activations", activations, ParseGemmActivations,
      fmt::format("how bf16-weight GEMMs take activations: bf16 (rounded, one bf16 dot per "
                  "product, as llama.cpp/vLLM/sglang) or fp32 (exact, ~3x slower prefill); "
                  "default {}",
                  GemmActivationsName(*activations)));
}

Result<std::vector<int32_t>> ParseIdList(const std::string& text, int64_t vocab,
                                         const std::string& flag) {
  std::vector<int32_t> ids;
  if (text.empty()) return InvalidArgument("{}: no ids given", flag);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string tok = text.substr(pos, end - pos);
    while (!tok.empty() && tok.front() == ' ') tok.erase(tok.begin());
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\r')) tok.pop_back();
    char* e = nullptr;
    long long v = std::strtoll(tok.c_str(), &e, 10);
    if (tok.empty() || *e != '\0') return InvalidArgument("{}: '{}' is not a token id", flag, tok);
    if (v < 0 || v >= vocab) {
      return InvalidArgument("{}: id {} is outside the vocabulary [0, {})", flag, v, vocab);
    }
    ids.push_back(static_cast<int32_t>(v));
    pos = end + 1;
  }
  return ids;
}

Result<std::unique_ptr<KvStore>> MakeOfflineKvStore(const ModelConfig& config,
                                                    const std::string& kv_cache_dtype,
                                                    int64_t max_positions) {
  KvCacheDtype dtype = KvCacheDtype::kF32;
  if (kv_cache_dtype != "auto") {
    auto d = ParseKvCacheDtype(kv_cache_dtype);
    if (!d.ok()) return d.status().WithContext("--kv-cache-dtype");
    dtype = *d;
  }
  constexpr int64_t kPage = 64;
  const int64_t n_pages = std::max<int64_t>(1, (max_positions + kPage - 1) / kPage);
  auto store = std::make_unique<PagedKvStore>(config, kPage, n_pages, dtype);
  std::vector<int32_t>& table = store->PageTable(0);
  table.resize(n_pages);
  std::iota(table.begin(), table.end(), 0);
  return std::unique_ptr<KvStore>(std::move(store));
}

std::string CommandLine() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  bool first = true;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(start, end - start);
    if (first) arg = std::filesystem::path(arg).filename().string();
    out += (first ? "" : " ") + arg;
    first = false;
    start = end + 1;
  }
  return out;
}

}  // namespace mx::cli
