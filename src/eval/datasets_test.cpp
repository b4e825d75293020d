// The JSONL loaders on the real data (GSM8K in ../shared, the bundled held-out set) and on
// malformed files, whose errors must name the file and line; and the choice shuffle.
#include "eval/datasets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace mx::eval {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            (name + "-" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  std::ofstream(path) << text;
  return path;
}

TEST(Datasets, Gsm8kSplits) {
  auto test = LoadQaJsonl(MX_SHARED_DIR "/datasets/gsm8k/test.jsonl");
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ(test->size(), 1319u);
  EXPECT_EQ(test->front().gold, "18");  // Janet's ducks
  auto train = LoadQaJsonl(MX_SHARED_DIR "/datasets/gsm8k/train.jsonl");
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->size(), 7473u);
  EXPECT_EQ(train->front().gold, "72");
  EXPECT_NE(train->front().answer.find("<<48/2=24>>"), std::string::npos);
  // Records without a key are named by file:line.
  EXPECT_NE(train->front().id.find("train.jsonl:1"), std::string::npos);
}

TEST(Datasets, BundledHeldOut) {
  auto h = LoadQaJsonl(MX_TEST_DATA_DIR "/arith/heldout.jsonl");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 500u);
  EXPECT_EQ(h->front().id, "lose_find:59,54,61");
  EXPECT_EQ(h->front().gold, "66");
  std::set<std::string> ids;
  for (const QaExample& e : *h) ids.insert(e.id);
  EXPECT_EQ(ids.size(), 500u);
}

struct BadCase {
  std::string text, expect;
};

// Each case's file must fail to load with an error naming the file and holding `expect`.
template <typename Loader>
void ExpectErrors(const std::vector<BadCase>& cases, const std::string& name, Loader load) {
  for (size_t k = 0; k < cases.size(); ++k) {
    const std::string path = WriteTemp(name + "-" + std::to_string(k), cases[k].text);
    auto r = load(path);
    EXPECT_FALSE(r.ok()) << cases[k].text;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(cases[k].expect), std::string::npos)
        << r.status().message();
    std::filesystem::remove(path);
  }
}

TEST(Datasets, MalformedQaLinesNameFileAndLine) {
  const std::string good = R"({"question": "q", "answer": "#### 1"})";
  const std::vector<BadCase> cases = {
      {good + "\n{not json\n", ":2: not valid JSON"},
      {good + "\n\n[1, 2]\n", ":3: expected a JSON object"},
      {R"({"answer": "#### 1"})", ":1: missing \"question\""},
      {R"({"question": 5, "answer": "#### 1"})", ":1: \"question\" must be a string"},
      {R"({"question": "q", "answer": ""})", ":1: \"answer\" is empty"},
      {R"({"question": "q", "answer": "no number here"})", ":1: \"answer\" holds no number"},
      {"\n  \n", "no records"},
  };
  ExpectErrors(cases, "bad-qa", LoadQaJsonl);
  auto missing = LoadQaJsonl("/nonexistent/eval.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/eval.jsonl"), std::string::npos);
}

TEST(Datasets, McqFormat) {
  const std::string path = WriteTemp(
      "mcq-ok", R"({"question": "2+2?", "choices": ["3", "4", "5"], "answer": "B", "id": "q1"}
{"question": "Sky?", "choices": ["blue", "green"], "answer": "A"}
)");
  auto r = LoadMcqJsonl(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].id, "q1");
  EXPECT_EQ((*r)[0].answer, 1);
  EXPECT_EQ((*r)[0].choices.size(), 3u);
  EXPECT_EQ((*r)[1].answer, 0);
  EXPECT_NE((*r)[1].id.find(":2"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Datasets, MalformedMcqLinesNameFileAndLine) {
  const std::vector<BadCase> cases = {
      {R"({"question": "q", "choices": "ab", "answer": "A"})", ":1: \"choices\" must be an array"},
      {R"({"question": "q", "choices": ["a"], "answer": "A"})", "has 1 entries, expected 2 to 26"},
      {R"({"question": "q", "choices": ["a", 3], "answer": "A"})", "choices[1] must be"},
      {R"({"question": "q", "choices": ["a", "b"], "answer": "C"})",
       ":1: \"answer\" is \"C\", expected one letter A..B"},
      {R"({"question": "q", "choices": ["a", "b"], "answer": "a"})", "expected one letter"},
      {R"({"question": "q", "choices": ["a", "b"]})", ":1: missing \"answer\""},
  };
  ExpectErrors(cases, "bad-mcq", LoadMcqJsonl);
}

TEST(Datasets, ShuffleIsAReproduciblePermutationThatVaries) {
  std::set<std::vector<int>> seen;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    for (int i = 0; i < 8; ++i) {
      std::vector<int> p = ShuffledChoices(4, seed, i);
      EXPECT_EQ(p, ShuffledChoices(4, seed, i));
      std::vector<int> sorted = p;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3}));
      seen.insert(p);
    }
  }
  // 64 draws from 24 permutations: a working shuffle hits most of them.
  EXPECT_GE(seen.size(), 15u);
  // The correct answer lands in every position across seeds.
  std::set<int> positions;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    std::vector<int> p = ShuffledChoices(4, seed, 0);
    positions.insert(static_cast<int>(std::find(p.begin(), p.end(), 0) - p.begin()));
  }
  EXPECT_EQ(positions.size(), 4u);
}

}  // namespace
}  // namespace mx::eval
