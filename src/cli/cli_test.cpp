// Runs the real `mxserve` binary: --help/--version, every verb's --help, and the published
// GLM-5.2 figures from `inspect --config ... --json`.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {

struct CmdResult {
  int code;
  std::string out;
};

// Runs mxserve with `args`; stderr is merged into the output unless `stderr_too` is false.
CmdResult Exec(const std::string& args, bool stderr_too = true) {
  std::string cmd = std::string(MXSERVE_BIN) + " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(Cli, HelpAndVersion) {
  CmdResult h = Exec("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("inspect"), std::string::npos);
  CmdResult v = Exec("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("mxserve ", 0), 0u) << v.out;
}

TEST(Cli, EveryVerbHasHelp) {
  CmdResult h = Exec("--help");
  // verbs are listed under "Subcommands:" one per line, name first
  auto pos = h.out.find("Subcommands:");
  ASSERT_NE(pos, std::string::npos);
  std::string rest = h.out.substr(pos + 12);
  int verbs = 0;
  size_t start = 0;
  while (start < rest.size()) {
    size_t end = rest.find('\n', start);
    if (end == std::string::npos) end = rest.size();
    std::string line = rest.substr(start, end - start);
    start = end + 1;
    size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    std::string verb = line.substr(b, line.find(' ', b) - b);
    CmdResult vh = Exec(verb + " --help");
    EXPECT_EQ(vh.code, 0) << verb;
    EXPECT_NE(vh.out.find("Usage:"), std::string::npos) << verb;
    ++verbs;
  }
  EXPECT_GE(verbs, 1);
}

TEST(Cli, UnknownVerbAndBadFlagsAreUsageErrors) {
  EXPECT_NE(Exec("frobnicate").code, 0);
  EXPECT_NE(Exec("").code, 0);
  EXPECT_NE(Exec("inspect --no-such-flag").code, 0);
  CmdResult bad_level =
      Exec("--log-level loud inspect --config " MX_SHARED_DIR "/configs/glm-5.2.json");
  EXPECT_NE(bad_level.code, 0);
  EXPECT_NE(bad_level.out.find("loud"), std::string::npos);
}

TEST(Cli, InspectGlm52ConfigJson) {
  auto t0 = std::chrono::steady_clock::now();
  CmdResult r = Exec("inspect --config " MX_SHARED_DIR "/configs/glm-5.2.json --json");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 500);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"]["total"], 753329940480);
  EXPECT_EQ(j["parameters"]["main"], 743377019904);
  EXPECT_EQ(j["parameters"]["mtp"], 9952920576);
  EXPECT_EQ(j["tensor_count"]["total"], 59585);
  EXPECT_EQ(j["tensors"].size(), 59585u);
  EXPECT_EQ(j["config"]["indexer"]["num_full_layers"], 21);
  EXPECT_EQ(j["kv_cache_per_token"]["mla_values_per_layer"], 576);
  EXPECT_EQ(j["kv_cache_per_token"]["indexer_values_per_full_layer"], 128);
  EXPECT_EQ(j["kv_cache_per_token"]["bf16_bytes"], 95232);
  EXPECT_NEAR(j["parameters"]["active_per_token"].get<double>() / 1e9, 41.25, 0.01);
  RecordProperty("inspect_seconds", std::to_string(secs));
}

TEST(Cli, InspectHumanOutput) {
  CmdResult r = Exec("inspect --config " MX_SHARED_DIR "/configs/glm-5.2.json");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("753.33 B (743.38 B main + 9.95 B MTP)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("59,585"), std::string::npos);
  EXPECT_NE(r.out.find("21 full layers"), std::string::npos);
}

// `quantize --format fp8` then `inspect`: tensors and bytes per format (FP8: a byte per weight
// plus its block scales).
TEST(Cli, QuantizeFp8ThenInspectCountsFormats) {
  namespace fs = std::filesystem;
  const std::string out = (fs::path(::testing::TempDir()) / "mx_cli_fp8").string();
  CmdResult q = Exec("quantize " MX_TEST_DATA_DIR "/tiny " + out + " --format fp8 --overwrite");
  ASSERT_EQ(q.code, 0) << q.out;
  EXPECT_NE(q.out.find("to FP8 (128x128 block scales)"), std::string::npos) << q.out;
  CmdResult ok = Exec("inspect " + out + " --json");
  ASSERT_EQ(ok.code, 0) << ok.out.substr(0, 500);
  auto j = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(j["checkpoint"]["ok"].get<bool>());
  const int fp8 = j["checkpoint"]["formats"]["fp8"].get<int>();
  EXPECT_GT(fp8, 100);
  int64_t want = 0;
  for (const auto& t : j["tensors"]) {
    if (t["format"] != "fp8") continue;
    const int64_t n = t["shape"][0], k = t["shape"][1];
    want += n * k + 4 * ((n + 127) / 128) * ((k + 127) / 128);
  }
  EXPECT_EQ(j["checkpoint"]["format_bytes"]["fp8"].get<int64_t>(), want);
  CmdResult text = Exec("inspect " + out);
  EXPECT_NE(text.out.find(fmt::format("fp8 {} (", fp8)), std::string::npos) << text.out;
  fs::remove_all(out);
}

TEST(Cli, InspectCheckpointAndErrors) {
  CmdResult ok = Exec("inspect " MX_TEST_DATA_DIR "/tiny-glm52 --json");
  ASSERT_EQ(ok.code, 0) << ok.out.substr(0, 500);
  auto j = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(j["checkpoint"]["ok"].get<bool>());
  EXPECT_EQ(
      j["checkpoint"]["formats"]["bf16"].get<int>() + j["checkpoint"]["formats"]["f32"].get<int>(),
      static_cast<int>(j["tensors"].size()));
  CmdResult missing = Exec("inspect /nonexistent-dir");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("/nonexistent-dir"), std::string::npos) << missing.out;
  CmdResult both = Exec("inspect " MX_TEST_DATA_DIR "/tiny --config x.json");
  EXPECT_EQ(both.code, 2);
  CmdResult badcfg = Exec("inspect --config " MX_TEST_DATA_DIR "/README.md");
  EXPECT_EQ(badcfg.code, 1);
  EXPECT_NE(badcfg.out.find("not valid JSON"), std::string::npos) << badcfg.out;
}

}  // namespace

namespace {

std::string Join(const nlohmann::json& ids) {
  std::string s;
  for (const auto& v : ids) s += (s.empty() ? "" : ",") + std::to_string(v.get<int>());
  return s;
}

// `generate --prompt-ids --print-ids` reproduces the reference's 32-token greedy continuations
// (on a checkpoint directory copy without tokenizer files for one of them).
TEST(Cli, GeneratePromptIdsMatchesGoldenGreedy) {
  for (const char* ckpt : {"tiny", "tiny-glm52"}) {
    std::ifstream f(std::string(MX_TEST_DATA_DIR) + "/" + ckpt + "/fixtures/greedy.json");
    auto j = nlohmann::json::parse(f);
    for (const char* p : {"prompt_3", "prompt_17", "prompt_40"}) {
      const auto& c = j["prompts"][p];
      CmdResult r =
          Exec(std::string("generate ") + MX_TEST_DATA_DIR + "/" + ckpt + " --prompt-ids " +
                   Join(c["prompt_ids"]) + " --print-ids --ignore-eos --max-tokens 32",
               /*stderr_too=*/false);
      ASSERT_EQ(r.code, 0) << r.out;
      EXPECT_EQ(r.out, Join(c["greedy_ids"]) + "\n") << ckpt << " " << p;
    }
  }
}

TEST(Cli, GenerateWithoutTokenizerFilesAndErrors) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "mx_no_tokenizer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(MX_TEST_DATA_DIR) / "tiny" / f, dir / f);
  }
  CmdResult ok =
      Exec("generate " + dir.string() + " --prompt-ids 302,304,307 --print-ids --max-tokens 4",
           /*stderr_too=*/false);
  EXPECT_EQ(ok.code, 0) << ok.out;
  CmdResult text = Exec("generate " + dir.string() + " --prompt hello");
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.out.find("tokenizer.json"), std::string::npos) << text.out;
  CmdResult range = Exec("generate " + dir.string() + " --prompt-ids 1,99999 --print-ids");
  EXPECT_EQ(range.code, 1);
  EXPECT_NE(range.out.find("99999"), std::string::npos) << range.out;
  CmdResult bad = Exec("generate " + dir.string() + " --prompt-ids 1,x --print-ids");
  EXPECT_EQ(bad.code, 1);
  CmdResult kernels =
      Exec("generate " + dir.string() + " --prompt-ids 1 --print-ids --kernels sse9");
  EXPECT_EQ(kernels.code, 1);
  EXPECT_NE(kernels.out.find("sse9"), std::string::npos);
  // serve's option strings are parsed into the engine's enums as the flags are read: a bad
  // value is named before anything loads.
  for (const auto& [flag, value] : {std::pair{"--kv-cache-dtype", "int3"},
                                    {"--schedule-policy", "random"},
                                    {"--speculative-algorithm", "MEDUSA"},
                                    {"--gemm-activations", "int4"}}) {
    CmdResult r = Exec("serve " + dir.string() + " " + flag + " " + value);
    EXPECT_EQ(r.code, 1) << flag;
    EXPECT_NE(r.out.find(flag), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(value), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

TEST(Cli, GenerateTextAndChatOnTinyCheckpoint) {
  CmdResult r = Exec("generate " MX_TEST_DATA_DIR
                     "/tiny --prompt 'The licenses' --chat --max-tokens 8 --temperature 0.8 "
                     "--top-p 0.9 --seed 3");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("decode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r.out;
}

// --chat-template-kwargs reaches the template: the bundled model, trained on non-thinking
// turns, answers the first held-out problem in its worked format with enable_thinking false
// (the template then closes the think block, as it does by default) and not with it true; bad
// values are errors.
TEST(Cli, GenerateChatTemplateKwargs) {
  const std::string model = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
  const std::string q =
      "'Leo had 59 candies. He lost 54 of them, then found 61 more. How many candies does he "
      "have now?'";
  CmdResult off =
      Exec("generate " + model + " --chat --prompt " + q +
               " --max-tokens 128 --chat-template-kwargs '{\"enable_thinking\": false}'",
           false);
  ASSERT_EQ(off.code, 0) << off.out;
  EXPECT_NE(off.out.find("so 5 + 61 = 66.\n#### 66"), std::string::npos) << off.out;
  // It stopped at <|endoftext|>, which is not printed unless --special asks (llama.cpp's CLI).
  EXPECT_EQ(off.out.find("<|endoftext|>"), std::string::npos) << off.out;
  CmdResult special =
      Exec("generate " + model + " --chat --prompt " + q +
               " --max-tokens 128 --special --chat-template-kwargs '{\"enable_thinking\": false}'",
           false);
  ASSERT_EQ(special.code, 0) << special.out;
  EXPECT_NE(special.out.find("#### 66<|endoftext|>"), std::string::npos) << special.out;
  CmdResult on = Exec("generate " + model + " --chat --prompt " + q +
                          " --max-tokens 128 --chat-template-kwargs '{\"enable_thinking\": true}'",
                      false);
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_NE(on.out, off.out);
  // Without kwargs the bundled template's default applies: thinking off, as trained.
  CmdResult dflt = Exec("generate " + model + " --chat --prompt " + q + " --max-tokens 128", false);
  ASSERT_EQ(dflt.code, 0) << dflt.out;
  EXPECT_NE(dflt.out.find("so 5 + 61 = 66.\n#### 66"), std::string::npos) << dflt.out;

  CmdResult bad = Exec("generate " + model + " --chat --prompt x --chat-template-kwargs '[1]'");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--chat-template-kwargs: expected a JSON object"), std::string::npos)
      << bad.out;
  CmdResult no_chat = Exec("generate " + model + " --prompt x --chat-template-kwargs '{}'");
  EXPECT_EQ(no_chat.code, 2) << no_chat.out;
  EXPECT_NE(no_chat.out.find("--chat-template-kwargs needs --chat"), std::string::npos)
      << no_chat.out;
}

}  // namespace

#include <cmath>
#include <cstring>

#include "io/safetensors.h"

namespace {

constexpr float kLogitsTol = 1e-4f;  // fp32 accumulation vs the fp32 PyTorch reference

std::vector<float> F32(const mx::TensorView& t) {
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_FALSE(std::isnan(a[i]));
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

TEST(Cli, LogitsMatchGoldenFixtures) {
  namespace fs = std::filesystem;
  for (const char* ckpt : {"tiny", "tiny-glm52"}) {
    for (const char* p : {"prompt_17", "prompt_130"}) {
      const std::string fx =
          std::string(MX_TEST_DATA_DIR) + "/" + ckpt + "/fixtures/" + p + ".safetensors";
      auto golden = mx::SafetensorsFile::Open(fx);
      ASSERT_TRUE(golden.ok()) << golden.status().ToString();
      const mx::TensorView* ids = (*golden)->Find("prompt_ids");
      std::string list;
      for (int64_t i = 0; i < ids->numel(); ++i) {
        int32_t v;
        std::memcpy(&v, ids->data + 4 * i, 4);
        list += (i ? "," : "") + std::to_string(v);
      }
      const std::string out = (fs::path(::testing::TempDir()) / "mx_logits.safetensors").string();
      CmdResult r = Exec(std::string("logits ") + MX_TEST_DATA_DIR + "/" + ckpt + " --ids " + list +
                         " --out " + out + " --hidden --mtp --topk-sets");
      ASSERT_EQ(r.code, 0) << r.out;
      auto got = mx::SafetensorsFile::Open(out);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const auto& G = **golden;
      const auto& O = **got;
      EXPECT_LE(MaxAbsDiff(F32(*O.Find("logits")), F32(*G.Find("logits"))), kLogitsTol);
      EXPECT_LE(MaxAbsDiff(F32(*O.Find("hidden")), F32(*G.Find("final_hidden"))), kLogitsTol);
      EXPECT_LE(MaxAbsDiff(F32(*O.Find("mtp_logits")), F32(*G.Find("mtp_logits"))), kLogitsTol);
      const mx::TensorView* a = O.Find("topk_sets");
      const mx::TensorView* b = G.Find("indexer_topk");
      ASSERT_EQ(a->shape, b->shape);
      EXPECT_EQ(0, std::memcmp(a->data, b->data, a->nbytes)) << ckpt << " " << p;
      const mx::TensorView* na = O.Find("mtp_next_ids");
      const mx::TensorView* nb = G.Find("mtp_next_ids");
      EXPECT_EQ(0, std::memcmp(na->data, nb->data, na->nbytes));
      fs::remove(out);
    }
  }
}

// PPL printed by `perplexity` equals exp(mean NLL) computed here from `logits` output over
// the same ids (one window: ctx >= tokens).
TEST(Cli, PerplexityEqualsExpMeanNllOfLogits) {
  namespace fs = std::filesystem;
  const std::string text = (fs::path(::testing::TempDir()) / "mx_ppl.txt").string();
  {
    std::ofstream f(text);
    f << "The licenses for most software and other practical works are designed to take away "
         "your freedom to share and change the works.";
  }
  const std::string model = std::string(MX_TEST_DATA_DIR) + "/tiny";
  CmdResult ids = Exec("tokenize " + model + " --text-file " + text + " --ids-only", false);
  ASSERT_EQ(ids.code, 0);
  std::string list = ids.out.substr(0, ids.out.find('\n'));
  const std::string out = (fs::path(::testing::TempDir()) / "mx_ppl.safetensors").string();
  ASSERT_EQ(Exec("logits " + model + " --ids " + list + " --out " + out).code, 0);
  auto f = mx::SafetensorsFile::Open(out);
  ASSERT_TRUE(f.ok());
  auto logits = F32(*(*f)->Find("logits"));
  std::vector<int> tok;
  for (size_t p = 0; p < list.size();) {
    size_t e = list.find(',', p);
    if (e == std::string::npos) e = list.size();
    tok.push_back(std::stoi(list.substr(p, e - p)));
    p = e + 1;
  }
  const int64_t V = (*f)->Find("logits")->shape[1];
  double nll = 0;
  for (size_t t = 1; t < tok.size(); ++t) {
    const float* row = logits.data() + (t - 1) * V;
    double m = row[0], s = 0;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, static_cast<double>(row[v]));
    for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - m);
    nll += -(row[tok[t]] - m - std::log(s));
  }
  const double want = std::exp(nll / (tok.size() - 1));
  CmdResult r = Exec("perplexity " + model + " --text " + text + " --ctx 512", false);
  ASSERT_EQ(r.code, 0) << r.out;
  auto pos = r.out.find("PPL ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  const double got = std::stod(r.out.substr(pos + 4));
  EXPECT_NEAR(got, want, want * 1e-4) << r.out;
  // a sliding window that re-scores nothing twice covers every token once
  CmdResult slid = Exec("perplexity " + model + " --text " + text + " --ctx 8 --stride 4", false);
  ASSERT_EQ(slid.code, 0);
  EXPECT_NE(slid.out.find("tokens " + std::to_string(tok.size() - 1)), std::string::npos)
      << slid.out;
  // errors
  EXPECT_EQ(Exec("perplexity " + model + " --text /nonexistent.txt").code, 1);
  EXPECT_EQ(Exec("logits " + model + " --ids 1,2,999999 --out " + out).code, 1);
  EXPECT_NE(Exec("logits " + model + " --ids '' --out " + out).code, 0);
  fs::remove(out);
  fs::remove(text);
}

}  // namespace

namespace {

// --kv-cache-dtype on the offline verbs: f32 ("auto") is exact; bf16 and fp8 e4m3 KV rows stay
// within their rounding budgets of the fp32 reference on a prompt inside index_topk (so the
// sparse selection cannot flip). Measured: bf16 0.012, fp8 0.128 max |Δlogit|.
TEST(Cli, LogitsKvCacheDtypes) {
  namespace fs = std::filesystem;
  auto golden = mx::SafetensorsFile::Open(std::string(MX_TEST_DATA_DIR) +
                                          "/tiny/fixtures/prompt_3.safetensors");
  ASSERT_TRUE(golden.ok());
  const auto want = F32(*(*golden)->Find("logits"));
  const std::string out = (fs::path(::testing::TempDir()) / "mx_kvdtype.safetensors").string();
  struct Case {
    const char* dtype;
    float tol;
  } cases[] = {{"auto", kLogitsTol}, {"bf16", 0.05f}, {"fp8_e4m3", 0.5f}};
  for (const auto& c : cases) {
    CmdResult r = Exec(std::string("logits ") + MX_TEST_DATA_DIR +
                       "/tiny --ids 302,304,307 --out " + out + " --kv-cache-dtype " + c.dtype);
    ASSERT_EQ(r.code, 0) << r.out;
    auto got = mx::SafetensorsFile::Open(out);
    ASSERT_TRUE(got.ok());
    EXPECT_LE(MaxAbsDiff(F32(*(*got)->Find("logits")), want), c.tol) << c.dtype;
  }
  CmdResult bad = Exec(std::string("logits ") + MX_TEST_DATA_DIR + "/tiny --ids 1 --out " + out +
                       " --kv-cache-dtype fp9");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("fp9"), std::string::npos) << bad.out;
  fs::remove(out);
}

}  // namespace

namespace {

// --parse-special: chat-template markers in the text become the special ids (one token each),
// as in a templated prompt; by default they are plain text (several tokens).
TEST(Cli, PerplexityParseSpecialTokenizesMarkersAsSpecialIds) {
  namespace fs = std::filesystem;
  const std::string text = (fs::path(::testing::TempDir()) / "mx_ppl_special.txt").string();
  {
    std::ofstream f(text);
    f << "<|user|>What is 2 + 3?<|assistant|></think>2 + 3 = 5.<|endoftext|>";
  }
  const std::string model = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";
  auto tokens = [](const std::string& out) {
    const auto pos = out.find("tokens ");
    return pos == std::string::npos ? -1 : std::stoi(out.substr(pos + 7));
  };
  CmdResult plain = Exec("perplexity " + model + " --text " + text, false);
  CmdResult special = Exec("perplexity " + model + " --text " + text + " --parse-special", false);
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(special.code, 0) << special.out;
  ASSERT_GT(tokens(special.out), 0) << special.out;
  // four markers: each is one id with the flag, several characters' worth of ids without
  EXPECT_GE(tokens(plain.out), tokens(special.out) + 4) << plain.out << special.out;
  CmdResult q =
      Exec("quant-report " + model + " " + model + " --text " + text + " --parse-special", false);
  EXPECT_NE(q.out.find("(" + std::to_string(tokens(special.out)) + " tokens"), std::string::npos)
      << q.out;
}

// quant-report: a checkpoint against itself is KLD 0 and 100% agreement with equal PPLs; against
// its MXFP4 quantization (made here with `quantize`) KLD > 0; the base PPL equals `perplexity`'s.
TEST(Cli, QuantReportAgainstItselfAndItsMxfp4) {
  namespace fs = std::filesystem;
  const std::string tmp = ::testing::TempDir();
  const std::string text = (fs::path(tmp) / "mx_qr.txt").string();
  {
    std::ofstream f(text);
    f << "The licenses for most software and other practical works are designed to take away "
         "your freedom to share and change the works. By contrast, the GNU General Public "
         "License is intended to guarantee your freedom to share and change all versions.";
  }
  const std::string model = std::string(MX_TEST_DATA_DIR) + "/tiny";
  const std::string quant = (fs::path(tmp) / "mx_qr_mxfp4").string();
  ASSERT_EQ(Exec("quantize " + model + " " + quant + " --format mxfp4 --overwrite").code, 0);
  fs::copy_file(fs::path(model) / "tokenizer.json", fs::path(quant) / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  auto number_after = [](const std::string& out, const std::string& key) {
    const auto p = out.find(key);
    EXPECT_NE(p, std::string::npos) << key << " in " << out;
    return p == std::string::npos ? -1.0 : std::stod(out.substr(p + key.size()));
  };
  CmdResult self = Exec("quant-report " + model + " " + model + " --text " + text, false);
  ASSERT_EQ(self.code, 0) << self.out;
  EXPECT_NEAR(number_after(self.out, "mean KLD(base || quantized) "), 0.0, 1e-9) << self.out;
  EXPECT_NEAR(number_after(self.out, "top-1 agreement "), 100.0, 1e-9);
  CmdResult q = Exec("quant-report " + model + " " + quant + " --text " + text, false);
  ASSERT_EQ(q.code, 0) << q.out;
  EXPECT_GT(number_after(q.out, "mean KLD(base || quantized) "), 1e-6) << q.out;
  const double base_ppl = number_after(q.out, "| PPL | ");
  CmdResult ppl = Exec("perplexity " + model + " --text " + text, false);
  ASSERT_EQ(ppl.code, 0);
  EXPECT_NEAR(base_ppl, number_after(ppl.out, "PPL "), 1e-3 * base_ppl);
  EXPECT_NE(Exec("quant-report " + model + " /nonexistent --text " + text).code, 0);
  fs::remove_all(quant);
  fs::remove(text);
}

}  // namespace

namespace {

// `bench sessions` and `eval tools` refuse out-of-range values before sending anything, and
// the message names the flag.
TEST(Cli, SessionsAndToolsLimitsNameTheFlag) {
  const std::string none = " --base-url http://127.0.0.1:1";
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"bench sessions --sessions 0", "--sessions"},
           {"bench sessions --sessions 100000", "--sessions"},
           {"bench sessions --turns 0", "--turns"},
           {"bench sessions --tool-result-len 0", "--tool-result-len"},
           {"bench sessions --think-time-ms -5", "--think-time-ms"},
           {"bench sessions --range-ratio 2", "--range-ratio"},
           {"bench sessions --api grpc", "--api"},
           {"bench sessions --preset nope", "--preset"},
           {"bench sessions --scale 0", "--scale"},
           {"eval tools --max-steps 0", "--max-steps"},
           {"eval tools --max-steps 1000", "--max-steps"},
           {"eval tools --api completions", "--api"},
           {"eval tools --seeds 0", "--seeds"}}) {
    CmdResult r = Exec(args + none);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(flag), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace

namespace {

// `serve --dry-run --json`: the memory plan of the tiny model, its fields checked against the
// config (KV rows per layer) and the safetensors header (checkpoint bytes), with no load.
TEST(Cli, ServeDryRunJsonPlansWithoutLoading) {
  const std::string dir = std::string(MX_TEST_DATA_DIR) + "/tiny";
  CmdResult r =
      Exec("serve " + dir + " --dry-run --json --available-memory 8G --max-total-tokens 4096",
           /*stderr_too=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["available_bytes"], int64_t{8} << 30);
  EXPECT_TRUE(doc["fits"].get<bool>());
  EXPECT_TRUE(doc["error"].is_null());
  ASSERT_EQ(doc["models"].size(), 1u);
  const nlohmann::json& m = doc["models"][0];
  EXPECT_EQ(m["name"], "tiny");
  EXPECT_EQ(m["tp"], 1);
  EXPECT_EQ(m["dp"], 1);
  EXPECT_TRUE(m["mpi_rank"].is_null());
  // KV: every layer and the MTP layer, latent + rope (+ indexer key), bf16 by default.
  std::ifstream cf(dir + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cf);
  const nlohmann::json& kv = m["kv"];
  EXPECT_EQ(kv["dtype"], "bf16");
  ASSERT_EQ(kv["layers"].size(),
            cfg["num_hidden_layers"].get<size_t>() + cfg["num_nextn_predict_layers"].get<size_t>());
  int64_t bpt = 0;
  for (const auto& l : kv["layers"]) {
    const int64_t idx = l["indexer_values"];
    EXPECT_TRUE(idx == 0 || idx == cfg["index_head_dim"].get<int64_t>());
    EXPECT_EQ(
        l["bytes_per_token"].get<int64_t>(),
        2 * (cfg["kv_lora_rank"].get<int64_t>() + cfg["qk_rope_head_dim"].get<int64_t>() + idx));
    bpt += l["bytes_per_token"].get<int64_t>();
  }
  EXPECT_TRUE(kv["layers"].back()["mtp"].get<bool>());
  EXPECT_EQ(kv["bytes_per_token"], bpt);
  EXPECT_FALSE(kv["automatic"].get<bool>());
  EXPECT_EQ(kv["tokens"], 4096);
  EXPECT_EQ(kv["bytes_per_copy"], 4096 * bpt);
  // Weights: the checkpoint bytes are the tensors' bytes by the header.
  auto st = mx::SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(st.ok());
  int64_t header_bytes = 0;
  for (const mx::TensorView& v : (*st)->tensors()) header_bytes += static_cast<int64_t>(v.nbytes);
  ASSERT_EQ(m["ranks"].size(), 1u);
  const nlohmann::json& rank = m["ranks"][0];
  EXPECT_EQ(rank["weights"]["file_bytes"], header_bytes);
  int64_t anon = 0;
  for (const auto& f : rank["weights"]["formats"]) anon += f["anon_bytes"].get<int64_t>();
  EXPECT_EQ(rank["weights"]["anon_bytes"], anon);
  EXPECT_EQ(rank["total_bytes"].get<int64_t>(),
            anon + rank["kv_bytes"].get<int64_t>() + rank["scratch_bytes"].get<int64_t>());
  EXPECT_EQ(m["process_bytes"], rank["total_bytes"]);
  EXPECT_EQ(doc["total_bytes"], m["process_bytes"]);
}

// A budget that cannot fit ends `serve` before anything is loaded (or bound), naming the flags;
// --dry-run says the same and exits 1.
TEST(Cli, ServeRefusesAPlanThatDoesNotFitNamingTheFlags) {
  const std::string args =
      "serve " MX_TEST_DATA_DIR "/tiny --max-total-tokens 4194304 --available-memory 64M --port 0";
  CmdResult r = Exec(args);
  EXPECT_NE(r.code, 0) << r.out;
  for (const char* part :
       {"does not fit", "nothing was loaded", "--max-total-tokens", "--kv-cache-dtype", "--tp"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loaded "), std::string::npos) << r.out;
  CmdResult dry = Exec(args + " --dry-run --json", /*stderr_too=*/false);
  EXPECT_EQ(dry.code, 1) << dry.out;
  const nlohmann::json doc = nlohmann::json::parse(dry.out);
  EXPECT_FALSE(doc["fits"].get<bool>());
  EXPECT_NE(doc["error"].get<std::string>().find("--max-total-tokens"), std::string::npos);
  CmdResult text = Exec("serve " MX_SOURCE_DIR "/models/glm-moe-dsa-arith-6m --dry-run");
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("memory plan for"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\nfits"), std::string::npos) << text.out;
}

TEST(Cli, ServePlanBadInputsAreClearErrors) {
  const std::string tiny = "serve " MX_TEST_DATA_DIR "/tiny --dry-run";
  for (const auto& [args, part] : std::vector<std::pair<std::string, std::string>>{
           {tiny + " --available-memory lots", "--available-memory"},
           {"serve " MX_TEST_DATA_DIR "/tiny --json", "--dry-run"},
           {tiny + " --kv-cache-dtype fp4", "kv_cache_dtype 'fp4'"},
           {tiny + " --page-size 0", "--page-size"},
           {tiny + " --tp 3", "--tp 3"},
           {"serve /no/such/model --dry-run", "config.json"}}) {
    CmdResult r = Exec(args);
    EXPECT_NE(r.code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(part), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
