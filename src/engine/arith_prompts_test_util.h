// Chat-formatted held-out arithmetic problems (tests/data/arith) for the bundled model, and
// their answers: prompts for the engine tests that run the real model.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx {

const std::string kBundledModelDir = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";

// Chat-formatted held-out arithmetic problems for the bundled model (its own template).
inline std::vector<std::vector<int32_t>> ArithPrompts(int n,
                                                      std::vector<std::string>* answers = nullptr) {
  auto format = LoadChatFormat(kBundledModelDir);
  EXPECT_TRUE(format.ok() && format->has_value()) << format.status().ToString();
  auto tok = tok::Tokenizer::FromFile(kBundledModelDir + "/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  std::ifstream f(std::string(MX_TEST_DATA_DIR) + "/arith/heldout.jsonl");
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (static_cast<int>(out.size()) < n && std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    auto text =
        (*format)->RenderUser(j["question"].get<std::string>(), {{"enable_thinking", false}});
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    out.push_back(tok->Encode(*text));
    if (answers != nullptr) {  // the number after "####"
      const std::string a = j["answer"].get<std::string>();
      answers->push_back(a.substr(a.rfind("####") + 5));
    }
  }
  EXPECT_EQ(static_cast<int>(out.size()), n);
  return out;
}

}  // namespace mx
