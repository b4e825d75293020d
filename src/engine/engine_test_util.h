// Helpers for the engine tests: draining a stream, and FakeRunner, a cheap model stand-in whose
// next token is a hash of the whole sequence so far, carried through the KV rows (each row
// stores [hash, position]); it checks on every call that the rows it reads back are the ones
// written for that sequence and position, so a wrong page table or a wrongly shared page
// changes outputs or fails the check. FailingRunner wraps it to fail forwards on cue.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/wait_test_util.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "io/model_config.h"

namespace mx {

struct StreamResult {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  std::string text;  // the engine's text: every chunk's pieces, then the last one's tail
  GenerationChunk last;
  bool timed_out = false;
};

inline StreamResult Drain(RequestStream& s,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  StreamResult r;
  while (true) {
    auto c = s.Next(timeout);
    if (!c) {
      r.timed_out = true;
      return r;
    }
    r.tokens.insert(r.tokens.end(), c->tokens.begin(), c->tokens.end());
    r.logprobs.insert(r.logprobs.end(), c->logprobs.begin(), c->logprobs.end());
    r.top.insert(r.top.end(), c->top.begin(), c->top.end());
    for (const std::string& piece : c->text) r.text += piece;
    r.text += c->text_tail;
    if (c->finish != FinishReason::kNone) {
      r.last = std::move(*c);
      return r;
    }
  }
}

// Greedy, max_tokens tokens exactly (EOS ignored).
inline GenerationRequest Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

inline uint32_t FakeHash(uint32_t h, int32_t token) {
  h ^= static_cast<uint32_t>(token) + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h & 0xFFFFFu;  // exact in fp32
}

// The tokens FakeRunner generates for a prompt (greedy): the reference for its outputs.
inline std::vector<int32_t> FakeGreedy(const std::vector<int32_t>& prompt, int n, int64_t vocab) {
  uint32_t h = 0;
  for (int32_t t : prompt) h = FakeHash(h, t);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t t = static_cast<int32_t>(h % vocab);
    out.push_back(t);
    h = FakeHash(h, t);
  }
  return out;
}

class FakeRunner final : public ModelRunner {
 public:
  explicit FakeRunner(ModelConfig c) : c_(std::move(c)) {}
  const ModelConfig& config() const override { return c_; }

  Result<std::vector<float>> Forward(const ForwardBatch& batch, KvStore& kv) override {
    const int64_t V = c_.vocab_size, W = c_.mla_cache_values();
    std::vector<float> logits(batch.seqs.size() * V, 0.0f);
    std::vector<float> row(W, 0.0f);
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
      const SequenceInput& in = batch.seqs[s];
      MX_RETURN_IF_ERROR(kv.Reserve(in.seq, in.start_pos + static_cast<int64_t>(in.tokens.size())));
      uint32_t h = 0;
      if (in.start_pos > 0) {
        kv.ReadMlaRow(in.seq, 0, in.start_pos - 1, row.data());
        if (row[1] != static_cast<float>(in.start_pos - 1)) {
          ++bad_rows;
          return Internal("seq {}: row {} holds position {}", in.seq, in.start_pos - 1, row[1]);
        }
        h = static_cast<uint32_t>(row[0]);
        const int64_t t = static_cast<int64_t>(h % static_cast<uint32_t>(in.start_pos));
        kv.ReadMlaRow(in.seq, 0, t, row.data());
        if (row[1] != static_cast<float>(t)) {
          ++bad_rows;
          return Internal("seq {}: row {} holds position {}", in.seq, t, row[1]);
        }
      }
      for (size_t i = 0; i < in.tokens.size(); ++i) {
        h = FakeHash(h, in.tokens[i]);
        row[0] = static_cast<float>(h);
        row[1] = static_cast<float>(in.start_pos + static_cast<int64_t>(i));
        kv.WriteMlaRow(in.seq, 0, in.start_pos + static_cast<int64_t>(i), row.data());
      }
      logits[s * V + h % V] = 10.0f;
    }
    ++calls;
    return logits;
  }

  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> bad_rows{0};

 private:
  ModelConfig c_;
};

// FakeRunner whose forwards number fail_at, fail_at + 1, ... fail with `error` (n_failures of
// them; -1: every one from fail_at on) and otherwise run the fake model. Forward 0 waits until
// Open(), so a test can queue requests behind the first batch.
class FailingRunner final : public ModelRunner {
 public:
  FailingRunner(ModelConfig c, int64_t fail_at, Status error, int64_t n_failures = -1)
      : inner_(std::move(c)), fail_at_(fail_at), n_failures_(n_failures), error_(error) {}
  const ModelConfig& config() const override { return inner_.config(); }

  Result<std::vector<float>> Forward(const ForwardBatch& batch, KvStore& kv) override {
    const int64_t k = forwards++;
    if (k == 0) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return open_; });
    }
    if (k >= fail_at_ && (n_failures_ < 0 || k < fail_at_ + n_failures_)) {
      ++failed;
      return error_;
    }
    return inner_.Forward(batch, kv);
  }
  void Open() {
    {
      std::lock_guard<std::mutex> l(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

  std::atomic<int64_t> forwards{0};
  std::atomic<int64_t> failed{0};

 private:
  FakeRunner inner_;
  int64_t fail_at_;
  int64_t n_failures_;
  Status error_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

inline ModelConfig TinyTestConfig() {
  auto c = LoadModelConfig(std::string(MX_TEST_DATA_DIR) + "/tiny/config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

}  // namespace mx
