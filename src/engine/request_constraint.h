// A request's structured-output constraint inside the engine: masks each row of logits to the
// tokens its grammar allows and advances with each emitted token. With a start token (GLM's
// </think> when reasoning is on), everything up to and including it is left free and the
// grammar applies to the answer after it.
//
// Overlap with the forward: the mask used to sample step t depends only on the tokens emitted
// before t, which are all accepted before step t's forward starts (that forward's input is the
// token of step t-1). So, when the forward's pool leaves a core idle
// (SchedulerConfig::overlap_masks), Prefetch computes it while the forward runs
// (MaskPrefetcher, one thread beside the pool) and Mask only applies it; otherwise Mask
// computes it at sampling.
//
// Speculative drafts: TrimDrafts cuts a proposed chain at its first token the grammar refuses
// (nothing after it can be accepted), before the verify forward spends rows on them; verify
// then samples row by row under Mask, advancing after each accepted token, so a draft the
// grammar forbids has probability 0 and the chain stops there too. The verify rows' masks are
// those of the states after each prefix of the kept chain, all known before the verify forward,
// so Prefetch computes them all (walking the chain and rolling back); each Accept of the
// chain's next token moves on to the following one, any other token drops them.
//
// Thread-safety: owned by the scheduler's request (the engine loop thread); Prefetch may run
// on the MaskPrefetcher's thread while the loop thread leaves the request alone (between
// MaskPrefetcher::Start and Wait).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "grammar/token_mask.h"

namespace mx {

class RequestConstraint {
 public:
  // repeats: the grammar is one span of the output that may recur (GLM's tool call after its
  // <tool_call>, under tool_choice auto): it applies after each start token, and once complete
  // (no byte can follow) the output is free again until the next start token; it never ends the
  // request. REQUIRES: start_after_token >= 0 when repeats.
  RequestConstraint(std::shared_ptr<const grammar::CompiledGrammar> g, int32_t start_after_token,
                    bool repeats = false);

  // Computes the mask of the current state for the next Mask, and those of the states along the
  // chain TrimDrafts kept (no-op before the start token).
  void Prefetch();
  // Sets every logit the grammar forbids to -inf (nothing before the start token). Should
  // nothing be left (min_tokens masked the EOS that alone completes the grammar), the
  // grammar's EOS ids are let through: ending valid beats a token past the grammar.
  void Mask(std::span<float> logits);
  // Advances by an emitted token; false when it breaks the grammar (a token drawn under Mask
  // never does).
  bool Accept(int32_t token);
  // Cuts *drafts (proposed to follow the tokens accepted so far) at the first one the grammar
  // refuses, and keeps what is left as the chain Prefetch walks; the state is unchanged.
  void TrimDrafts(std::vector<int32_t>* drafts);
  // The grammar took its EOS: the output is complete and the request must stop.
  bool Terminated() const { return matcher_->Terminated(); }
  bool active() const { return active_; }

 private:
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;
  std::optional<grammar::TokenMatcher> matcher_;  // always set (emplaced again on a repeat)
  int32_t start_after_;
  bool repeats_;
  bool active_;
  // masks_[cur_] is the current state's mask when cur_ < ready_ (Prefetch ran since the last
  // Accept that left the chain); masks_[cur_ + i] that of the state after chain_[cur_..cur_+i).
  std::vector<int32_t> chain_;
  std::vector<grammar::TokenBitmask> masks_;  // capacity kept across steps
  size_t cur_ = 0;
  size_t ready_ = 0;
};

// Runs Prefetch for a batch's constraints on its own thread (started on first use) while the
// caller runs the forward. Start, then Wait before touching those requests again.
class MaskPrefetcher {
 public:
  MaskPrefetcher() = default;
  ~MaskPrefetcher();
  MaskPrefetcher(const MaskPrefetcher&) = delete;
  MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;

  void Start(std::vector<RequestConstraint*> batch);
  void Wait();

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RequestConstraint*> work_;
  bool busy_ = false;  // work_ handed over and not finished
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mx
