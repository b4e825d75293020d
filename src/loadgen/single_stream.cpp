#include "loadgen/single_stream.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "loadgen/stats.h"

namespace mx::loadgen {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadCorpus(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("{}: corpus directory not found", dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
    text += "\n\n";
  }
  if (text.size() < 1000) return NotFound("{}: too little text for prompts", dir);
  return text;
}

}  // namespace

Result<std::vector<BenchPrompt>> MakeNaturalPrompts(const SingleStreamSpec& spec,
                                                    const tok::Tokenizer& tokenizer) {
  if (spec.input_len < 32) return InvalidArgument("--input-len must be >= 32");
  if (spec.runs < 1) return InvalidArgument("--runs must be >= 1");
  MX_ASSIGN_OR_RETURN(std::string corpus, ReadCorpus(spec.corpus_dir));
  std::vector<int32_t> ids = tokenizer.Encode(corpus, /*allow_special=*/false);
  // Long prompts wrap around the corpus.
  while (ids.size() < static_cast<size_t>(spec.input_len) * 2) {
    std::vector<int32_t> copy = ids;
    ids.insert(ids.end(), copy.begin(), copy.end());
  }
  std::vector<BenchPrompt> prompts;
  const size_t span = ids.size() - static_cast<size_t>(spec.input_len);
  for (int r = 0; r < spec.runs; ++r) {
    const std::string header = fmt::format(
        "Request {:016x}-{}. Read the following licence texts, then write a long, detailed "
        "commentary on them, section by section.\n\n",
        spec.seed * 1000003 + static_cast<uint64_t>(r), r);
    const size_t start = (static_cast<size_t>(r) * 7919 * 13 + spec.seed * 104729) % span;
    int body = spec.input_len - static_cast<int>(tokenizer.Encode(header, false).size());
    BenchPrompt p;
    for (int attempt = 0; attempt < 6 && body > 0; ++attempt) {
      p.text = header + tokenizer.Decode(std::span<const int32_t>(ids.data() + start,
                                                                  static_cast<size_t>(body)));
      p.ids = tokenizer.Encode(p.text, false);
      const int diff = spec.input_len - static_cast<int>(p.ids.size());
      if (diff == 0) break;
      body += diff;
    }
    p.prompt_len = static_cast<int>(p.ids.size());
    p.output_len = spec.output_len;
    prompts.push_back(std::move(p));
  }
  return prompts;
}

SingleStreamResult RunSingleStream(ClientOptions o, const std::vector<BenchPrompt>& prompts,
                                   const tok::Tokenizer& tokenizer) {
  o.keep_text = true;
  o.max_concurrency = 0;
  o.tokenizer = &tokenizer;
  SingleStreamResult res;
  std::vector<double> ttft, e2e, sp_server, sp_tok;
  for (const BenchPrompt& p : prompts) {
    RunOutput out = RunRequests(o, {&p}, {0.0});
    SingleStreamRun run;
    run.record = std::move(out.records[0]);
    const RequestRecord& r = run.record;
    if (!r.success) {
      res.failed++;
      res.runs.push_back(std::move(run));
      continue;
    }
    run.tokenizer_tokens = r.output_len_retokenized;
    run.server_tokens = r.output_len;
    run.first_chunk_tokens = static_cast<int>(tokenizer.Encode(r.first_chunk_text, false).size());
    const double after_first = r.latency_s - r.ttft_s;
    if (after_first > 0) {
      run.speed_server = (run.server_tokens - run.first_chunk_tokens) / after_first;
      run.speed_tokenizer = (run.tokenizer_tokens - run.first_chunk_tokens) / after_first;
    }
    ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.latency_s);
    sp_server.push_back(run.speed_server);
    sp_tok.push_back(run.speed_tokenizer);
    res.runs.push_back(std::move(run));
  }
  res.median_ttft_ms = Percentile(ttft, 50);
  res.median_e2e_s = Percentile(e2e, 50);
  res.median_speed_server = Percentile(sp_server, 50);
  res.median_speed_tokenizer = Percentile(sp_tok, 50);
  return res;
}

nlohmann::json SingleStreamJson(const SingleStreamSpec& spec, const SingleStreamResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const SingleStreamRun& x : r.runs) {
    runs.push_back({{"success", x.record.success},
                    {"error", x.record.success ? "" : x.record.error_kind + ": " + x.record.error},
                    {"prompt_tokens", x.record.prompt_len},
                    {"ttft_ms", x.record.ttft_s * 1e3},
                    {"e2e_latency_s", x.record.latency_s},
                    {"output_tokens_server", x.server_tokens},
                    {"output_tokens_tokenizer", x.tokenizer_tokens},
                    {"first_chunk_tokens", x.first_chunk_tokens},
                    {"output_speed_server_tok_s", x.speed_server},
                    {"output_speed_tokenizer_tok_s", x.speed_tokenizer}});
  }
  return {{"benchmark", "single-stream"},
          {"input_len", spec.input_len},
          {"output_len", spec.output_len},
          {"num_runs", spec.runs},
          {"failed", r.failed},
          {"median_ttft_ms", r.median_ttft_ms},
          {"median_e2e_latency_s", r.median_e2e_s},
          {"median_output_speed_server_tok_s", r.median_speed_server},
          {"median_output_speed_tokenizer_tok_s", r.median_speed_tokenizer},
          {"runs", runs}};
}

std::string SingleStreamTable(const SingleStreamResult& r) {
  std::string s = fmt::format("{:>4} {:>8} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "run", "prompt",
                              "TTFT ms", "E2E s", "out(srv)", "tok/s(srv)", "tok/s(tok)");
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const SingleStreamRun& x = r.runs[i];
    if (!x.record.success) {
      s += fmt::format("{:>4} failed: {}: {}\n", i, x.record.error_kind, x.record.error);
      continue;
    }
    s += fmt::format("{:>4} {:>8} {:>10.1f} {:>10.2f} {:>10} {:>12.1f} {:>12.1f}\n", i,
                     x.record.prompt_len, x.record.ttft_s * 1e3, x.record.latency_s,
                     x.server_tokens, x.speed_server, x.speed_tokenizer);
  }
  s += fmt::format(
      "median: TTFT {:.1f} ms, output speed {:.1f} tok/s (server count), {:.1f} tok/s (model "
      "tokenizer count), E2E {:.2f} s; {} failed\n",
      r.median_ttft_ms, r.median_speed_server, r.median_speed_tokenizer, r.median_e2e_s, r.failed);
  return s;
}

}  // namespace mx::loadgen
