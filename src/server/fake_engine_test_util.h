// A scripted Engine for the server's tests: each request emits `script` (token ids) one token
// per chunk every `step`, stopping at max_tokens (length) or at an id in `eos` (stop). A
// repeated prompt reports all but its last token as cached. Submit fails with
// ResourceExhausted once `max_active` streams are unfinished, and with Shared::health once a
// test has set it (the engine failed). Under a structured-output constraint each token is the
// script's when the grammar allows it, else EOS when allowed, else one drawn at random (the
// request's seed) from what the grammar allows: what a model with arbitrary logits would
// write under the mask. The grammar applies after constraint_after_token when one is given
// (again after each one with constraint_repeats, until complete). Like the real engine it
// sends each token's text, decoded once per request with `tokenizer` (engine/output_text.h;
// without one every token's text is empty); it matches no stop strings.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/output_text.h"
#include "grammar/token_mask.h"

namespace mx::server::testing {

class FakeEngine : public Engine {
 public:
  struct Shared {
    std::mutex mu;
    std::set<std::vector<int32_t>> seen_prompts;
    int64_t active = 0;
    int64_t aborted = 0;
    int64_t finished = 0;
    int64_t generated = 0;
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;
    std::vector<GenerationRequest> submitted;
    Status health;  // non-ok: the engine has failed (Health, and Submit refuses with it)
  };

  FakeEngine(std::vector<int32_t> script, std::vector<int32_t> eos,
             std::chrono::milliseconds step = std::chrono::milliseconds(2),
             int64_t max_active = 100000, int64_t context = 4096,
             std::shared_ptr<const tok::Tokenizer> tokenizer = nullptr)
      : script_(std::move(script)),
        eos_(std::move(eos)),
        step_(step),
        max_active_(max_active),
        context_(context),
        shared_(std::make_shared<Shared>()),
        tokenizer_(std::move(tokenizer)) {}

  Result<std::unique_ptr<RequestStream>> Submit(GenerationRequest request) override {
    if (request.prompt.empty()) return InvalidArgument("empty prompt");
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!shared_->health.ok()) return shared_->health;
    if (shared_->active >= max_active_) return ResourceExhausted("queue full");
    ++shared_->active;
    int32_t cached = 0;
    if (shared_->seen_prompts.count(request.prompt)) {
      cached = static_cast<int32_t>(request.prompt.size()) - 1;
    }
    shared_->seen_prompts.insert(request.prompt);
    shared_->prompt_tokens += static_cast<int64_t>(request.prompt.size());
    shared_->cached_tokens += cached;
    shared_->submitted.push_back(request);
    const RequestId id = next_id_++;
    auto s = std::make_unique<Stream>(this, id, std::move(request), cached);
    streams_[id] = s.get();
    return std::unique_ptr<RequestStream>(std::move(s));
  }
  void Abort(RequestId id) override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second->counted) return;
    // Like the real engine: the request leaves the batch within a step, read or not.
    it->second->abort.store(true);
    it->second->counted = true;
    --shared_->active;
    ++shared_->aborted;
  }
  EngineStats Stats() const override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    EngineStats s;
    s.gauges.running = shared_->active;
    s.counters.prompt_tokens_total = shared_->prompt_tokens;
    s.counters.generation_tokens_total = shared_->generated;
    s.counters.cached_prompt_tokens_total = shared_->cached_tokens;
    s.counters.radix_hit_tokens = shared_->cached_tokens;
    s.counters.requests_aborted = shared_->aborted;
    s.counters.requests_finished = shared_->finished;
    s.gauges.kv_pages_total = 100;
    // As a speculative engine reports them: 10 verify steps, 2 draft positions.
    s.spec.verify_steps = 10;
    s.spec.drafts_proposed = 20;
    s.spec.tokens_accepted = 12;
    s.spec.proposed_at = {10, 10};
    s.spec.accepted_at = {8, 4};
    s.spec.accept_length_mean = 2.2;
    // ... under --speculative-num-steps auto: 3 drafts chosen, after 7 steps off and 5 with 3.
    s.spec.automatic = true;
    s.spec.steps_chosen = 3;
    s.spec.estimate_tokens_per_s = 150;
    s.spec.estimate_off_tokens_per_s = 100;
    s.spec.estimate_accept_length = 2.5;
    s.spec.steps_histogram = {7, 0, 0, 5};
    s.counters.forward_seconds = 1.5;
    s.spec.mtp_seconds = 0.25;
    s.spec.mtp_rows = 40;
    return s;
  }
  void FlushCache() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->seen_prompts.clear();
  }
  void Shutdown(std::chrono::milliseconds) override {}
  Status Health() const override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->health;
  }
  int64_t context_window() const override { return context_; }
  int64_t vocab_size() const override { return 2048; }

  std::shared_ptr<Shared> shared() const { return shared_; }

 private:
  struct Stream : RequestStream {
    Stream(FakeEngine* e, RequestId id, GenerationRequest r, int32_t cached)
        : engine(e), rid(id), req(std::move(r)), cached(cached), rng(req.sampling.seed) {
      next = std::chrono::steady_clock::now() + e->step_;
      if (req.constraint) matcher.emplace(req.constraint);
      constrained = req.constraint_after_token < 0;
      if (e->tokenizer_) text.emplace(*e->tokenizer_, std::vector<std::string>());
    }
    int32_t Constrained(int32_t want) {
      matcher->FillMask(&mask);
      int32_t tok = -1;
      if (want >= 0 && want < matcher->vocab().size() && mask.Test(want)) tok = want;
      for (int32_t e : matcher->vocab().eos_ids()) {
        if (tok < 0 && mask.Test(e)) tok = e;
      }
      if (tok < 0) {
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < matcher->vocab().size(); ++t) {
          if (mask.Test(t)) allowed.push_back(t);
        }
        if (allowed.empty()) return want;  // a dead end: the test sees the broken output
        tok = allowed[rng() % allowed.size()];
      }
      matcher->AcceptToken(tok);
      return tok;
    }
    ~Stream() override {
      std::lock_guard<std::mutex> lock(engine->shared_->mu);
      engine->streams_.erase(rid);
      if (!counted) --engine->shared_->active;
    }
    RequestId id() const override { return rid; }
    std::optional<GenerationChunk> Next(std::chrono::milliseconds timeout) override {
      if (ended) return last;
      auto now = std::chrono::steady_clock::now();
      if (!abort.load() && now < next) {
        std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(next - now, timeout));
        if (std::chrono::steady_clock::now() < next && !abort.load()) return std::nullopt;
      }
      next += engine->step_;
      GenerationChunk c;
      if (abort.load()) {
        c.finish = FinishReason::kAbort;
      } else {
        int32_t tok = engine->script_[pos % engine->script_.size()];
        if (matcher && constrained) {
          tok = Constrained(tok);
          if (req.constraint_repeats && matcher->Complete()) {  // free until the next start
            matcher.emplace(req.constraint);
            constrained = false;
          }
        } else if (matcher && tok == req.constraint_after_token) {
          constrained = true;
        }
        ++pos;
        c.tokens.push_back(tok);
        if (req.top_logprobs >= 0) {
          c.logprobs.push_back({tok, -0.5f});
          std::vector<TokenLogprob> top;
          for (int i = 0; i < req.top_logprobs; ++i) top.push_back({tok + i, -0.5f - i});
          c.top.push_back(top);
        }
        const bool is_eos =
            std::find(engine->eos_.begin(), engine->eos_.end(), tok) != engine->eos_.end();
        if (is_eos && !req.ignore_eos) {
          c.finish = FinishReason::kStop;
          c.matched_stop_token = tok;
          c.text.emplace_back();  // the stop token is not shown
        } else {
          c.text.push_back(text ? text->Push(tok).text : std::string());
          if (static_cast<int32_t>(pos) >= req.max_tokens) c.finish = FinishReason::kLength;
        }
      }
      if (c.finish != FinishReason::kNone && text) c.text_tail = text->Finish();
      std::lock_guard<std::mutex> lock(engine->shared_->mu);
      engine->shared_->generated += static_cast<int64_t>(c.tokens.size());
      if (c.finish != FinishReason::kNone) {
        c.prompt_tokens = static_cast<int32_t>(req.prompt.size());
        c.completion_tokens = static_cast<int32_t>(pos);
        c.cached_tokens = cached;
        ended = true;
        last = c;
        last->tokens.clear();
        last->text.clear();
        if (!counted) {
          counted = true;
          --engine->shared_->active;
          ++engine->shared_->finished;
        }
      }
      return c;
    }

    FakeEngine* engine;
    RequestId rid;
    GenerationRequest req;
    int32_t cached;
    size_t pos = 0;
    std::atomic<bool> abort{false};
    bool ended = false;
    bool counted = false;  // left `active` (guarded by shared_->mu)
    std::optional<GenerationChunk> last;
    std::chrono::steady_clock::time_point next;
    std::mt19937_64 rng;
    std::optional<grammar::TokenMatcher> matcher;
    std::optional<OutputText> text;
    bool constrained = true;  // the grammar applies to the next token
    grammar::TokenBitmask mask;
  };

  std::vector<int32_t> script_;
  std::vector<int32_t> eos_;
  std::chrono::milliseconds step_;
  int64_t max_active_;
  int64_t context_;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<const tok::Tokenizer> tokenizer_;
  std::map<RequestId, Stream*> streams_;
  RequestId next_id_ = 1;
};

}  // namespace mx::server::testing
