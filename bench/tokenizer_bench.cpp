// Encode throughput of the byte-level BPE tokenizer on English text, in bytes per second of
// one core (Google Benchmark reports it as bytes_per_second). Text: Debian base-files'
// /usr/share/common-licenses/GPL-3 (35 KB), repeated; tokenizer: the GLM-style test tokenizer
// (tests/tokenizer/glm_style.tokenizer.json) unless MX_BENCH_TOKENIZER names another
// tokenizer.json (e.g. the bundled model's).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const mx::tok::Tokenizer* GetTokenizer() {
  static const mx::tok::Tokenizer* tok = [] {
    const char* env = std::getenv("MX_BENCH_TOKENIZER");
    std::string path =
        env ? env : std::string(MX_SOURCE_DIR) + "/tests/tokenizer/glm_style.tokenizer.json";
    auto t = mx::tok::Tokenizer::FromFile(path);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::exit(1);
    }
    return new mx::tok::Tokenizer(std::move(*t));
  }();
  return tok;
}

void BM_EncodeEnglish(benchmark::State& state) {
  const auto* tok = GetTokenizer();
  std::string text = ReadFile("/usr/share/common-licenses/GPL-3");
  if (text.empty()) {
    state.SkipWithError("GPL-3 text not found");
    return;
  }
  std::string big;
  while (big.size() < static_cast<size_t>(state.range(0))) big += text;
  big.resize(state.range(0));
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(big);
    tokens += ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * big.size());
  state.counters["bytes_per_token"] =
      static_cast<double>(big.size()) * state.iterations() / static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeEnglish)->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
