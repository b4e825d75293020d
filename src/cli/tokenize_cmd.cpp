// `mxserve tokenize MODEL_DIR --text "..." | --text-file PATH | --decode 1,2,3`: encodes text
// with the checkpoint's tokenizer.json and prints one "id<TAB>piece" line per token (pieces
// shown as decoded text, escaped), or decodes comma-separated ids. MODEL_DIR may also be the
// tokenizer.json itself. Encoding reports its own throughput on stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/verb.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace mx::cli {
namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string text;
  std::string text_file;
  std::string decode;
  bool no_special = false;
  bool skip_special = false;
  bool ids_only = false;
  bool json = false;
};

std::string TokenizerPath(const std::string& model) {
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) return model + "/tokenizer.json";
  return model;
}

// Piece bytes as a quoted, escaped string; bytes that are not valid UTF-8 on their own (part
// of a character split across tokens) are shown as \xNN.
std::string Escape(std::string_view s) {
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    char32_t cp;
    if (tok::DecodeUtf8(s, &i, &cp)) {
      const std::string q = nlohmann::json(std::string(s.substr(start, i - start))).dump();
      out += q.substr(1, q.size() - 2);
    } else {
      for (size_t k = start; k < i; ++k) {
        out += fmt::format("\\x{:02X}", static_cast<unsigned char>(s[k]));
      }
    }
  }
  return out + "\"";
}

Result<std::vector<int32_t>> ParseIds(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  size_t index = 0;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    const std::string t = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(t, &used);
    } catch (...) {
      used = 0;
    }
    if (t.empty() || used != t.size() || v < INT32_MIN || v > INT32_MAX) {
      return InvalidArgument("--decode: item {} \"{}\" is not an integer token id", index, t);
    }
    ids.push_back(static_cast<int32_t>(v));
    ++index;
  }
  if (ids.empty()) return InvalidArgument("--decode: expected comma-separated ids like 1,2,3");
  return ids;
}

int Run(const TokenizeArgs& a) {
  const int modes = !a.text.empty() + !a.text_file.empty() + !a.decode.empty();
  if (modes != 1) {
    std::fprintf(stderr, "tokenize: give exactly one of --text, --text-file, --decode\n");
    return 2;
  }
  const std::string path = TokenizerPath(a.model_dir);
  if (!std::filesystem::exists(path)) {
    return Fail(
        fmt::format("tokenize: {}: no such file (expected MODEL_DIR/tokenizer.json)", path));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto tok = tok::Tokenizer::FromFile(path);
  if (!tok.ok()) return Fail("tokenize: " + tok.status().ToString());
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  if (!a.decode.empty()) {
    auto ids = ParseIds(a.decode);
    if (!ids.ok()) return Fail("tokenize: " + ids.status().message());
    if (Status st = tok->CheckIds(*ids); !st.ok()) return Fail("tokenize: " + st.message());
    const std::string text = tok->Decode(*ids, a.skip_special);
    if (a.json) {
      std::printf("%s\n", nlohmann::json{{"ids", *ids}, {"text", text}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  }

  std::string text = a.text;
  if (!a.text_file.empty()) {
    std::ifstream in(a.text_file, std::ios::binary);
    if (!in) return Fail(fmt::format("tokenize: {}: cannot open --text-file", a.text_file));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(text, !a.no_special);
  const double enc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(std::string(tok->TokenBytes(id)));
    std::printf("%s\n", nlohmann::json{{"ids", ids}, {"pieces", pieces}}
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else if (a.ids_only) {
    std::printf("%s\n", fmt::format("{}", fmt::join(ids, ",")).c_str());
  } else {
    for (int32_t id : ids) {
      std::printf("%d\t%s%s\n", id, Escape(tok->TokenBytes(id)).c_str(),
                  tok->IsSpecial(id) ? "\t(special)" : "");
    }
  }
  std::fprintf(stderr,
               "tokenize: %zu bytes -> %zu tokens (%.2f bytes/token) in %.2f ms, %.2f MB/s; "
               "tokenizer loaded in %.1f ms (vocab %d)\n",
               text.size(), ids.size(), ids.empty() ? 0.0 : double(text.size()) / ids.size(),
               enc_s * 1e3, enc_s > 0 ? text.size() / enc_s / 1e6 : 0.0, load_ms,
               tok->vocab_size());
  return 0;
}

VerbRun SetupTokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand("tokenize", "Encode text to token ids, or decode ids to text");
  sub->add_option("model_dir", args->model_dir, "checkpoint directory (or a tokenizer.json)")
      ->required();
  sub->add_option("--text", args->text, "text to encode");
  sub->add_option("--text-file", args->text_file, "encode the contents of this file");
  sub->add_option("--decode", args->decode, "comma-separated ids to decode, e.g. 1,2,3");
  sub->add_flag("--no-special", args->no_special, "encode special-token strings as plain text");
  sub->add_flag("--skip-special", args->skip_special, "drop special tokens when decoding");
  sub->add_flag("--ids-only", args->ids_only, "print only the comma-separated ids");
  sub->add_flag("--json", args->json, "machine-readable output");
  return [args]() -> int { return Run(*args); };
}

MX_REGISTER_VERB(tokenize, "tokenize", 80, SetupTokenize);

}  // namespace
}  // namespace mx::cli
