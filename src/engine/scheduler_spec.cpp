// Speculative decoding with the MTP layer (glm-moe-dsa.md §3.12), inside the scheduler's step:
//   verify: a decoding request's forward rows are [x, d_1..d_n] (its last token and its
//     drafts) with logits on every row; row i is sampled (penalties, masks, rejection sampling
//     against d_{i+1}), and the chain stops at the first token that differs from its draft, so
//     1..n+1 tokens are emitted. KV rows past the accepted ones are never read again (reads go
//     up to each query's own position) and the next forward overwrites them: that is rollback.
//   draft-extend: every row that became final in this forward (prefill chunks, accepted verify
//     rows) goes through the MTP layer as (target final hidden h_p, token x_{p+1}) at position
//     p, which writes the MTP layer's KV rows exactly as one prefill over the tokens would; the
//     last row of a decoding request predicts its first draft d_1.
//   draft: steps 2..n run the MTP layer on (previous step's hidden, previous draft) one position
//     further each, top-1, reusing the first step's indexer top-k when spec_share_topk.
// Drafts are greedy (proposed with probability 1), so rejection sampling accepts d with the
// target probability p(d) and otherwise draws from p without d: the output distribution is
// the target's. Greedy outputs are the same tokens as without speculation.
#include <algorithm>

#include "base/check.h"
#include "engine/scheduler.h"
#include "engine/scheduler_request.h"

namespace mx {

void Scheduler::SpecForward(const ScheduledBatch& batch) {
  std::vector<bool> verify;  // decoding: the last token and its drafts, logits on every row
  for (auto [r, n] : batch) verify.push_back(r->remaining() == 1);
  auto out = runner_.ForwardRows(MakeBatch(batch), cache_.kv());
  if (!out.ok()) {
    ForwardFailed(out.status());
    for (auto [r, n] : batch) Finish(*r, FinishReason::kAbort, out.status());
    return;
  }
  ScheduledBatch extended;         // rows that became final, from row 0
  std::vector<int64_t> first_row;  // the sequence's first row in `out`
  int64_t li = 0;                  // logit row
  for (size_t i = 0; i < batch.size(); ++i) {
    auto [r, n] = batch[i];
    std::span<float> logits(out->logits.data() + li * vocab_, (verify[i] ? n : 1) * vocab_);
    int64_t m = n;
    if (verify[i]) {
      m = Verify(*r, logits, n);
      li += n;
    } else {
      FinishChunk(*r, n, logits);
      li += 1;
    }
    extended.push_back({r, m});
    first_row.push_back(out->row_begin[i]);
  }
  MX_CHECK_EQ(li * vocab_, static_cast<int64_t>(out->logits.size()));
  Draft(extended, *out, first_row);
}

int32_t Scheduler::Verify(Request& r, std::span<float> logits, int64_t rows) {
  const std::vector<int32_t> drafts = std::move(r.drafts);
  r.drafts.clear();
  const auto n_drafts = static_cast<int64_t>(drafts.size());
  if (static_cast<int64_t>(stats_.spec_proposed_at.size()) < n_drafts) {
    stats_.spec_proposed_at.resize(n_drafts, 0);
    stats_.spec_accepted_at.resize(n_drafts, 0);
  }
  for (int64_t i = 0; i < n_drafts; ++i) ++stats_.spec_proposed_at[i];
  ++stats_.spec_verify_steps;
  stats_.spec_drafts_proposed += n_drafts;
  int32_t final_rows = 0;
  for (int64_t i = 0; i < rows; ++i) {
    ++r.kv_len;  // row i's input token is now part of the sequence
    ++final_rows;
    const int32_t draft = i < n_drafts ? drafts[i] : -1;
    std::span<float> row = logits.subspan(i * vocab_, vocab_);
    const int32_t t = SampleNext(r, row, draft);
    if (draft >= 0 && t == draft) {
      ++stats_.spec_accepted_at[i];
      ++stats_.spec_tokens_accepted;
    }
    if (AppendToken(r, t, row)) return final_rows;  // finished (its pages are released)
    if (t != draft) break;
  }
  Emit(r, /*final=*/false);
  return final_rows;
}

void Scheduler::Draft(const ScheduledBatch& extended, const ForwardOutput& fwd,
                      const std::vector<int64_t>& first_row) {
  const int64_t D = runner_.config().hidden_size;
  // Draft-extend over the rows that became final, as (h_p, x_{p+1}) at position p.
  MtpBatch mb;
  std::vector<Request*> reqs;
  for (size_t k = 0; k < extended.size(); ++k) {
    auto [r, m] = extended[k];
    if (r->done) continue;
    const int64_t start = r->kv_len - m;
    MX_CHECK_GE(static_cast<int64_t>(r->tokens.size()), r->kv_len + 1);
    MtpSequenceInput s;
    s.seq = r->seq();
    s.start_pos = start;
    s.tokens.assign(r->tokens.begin() + start + 1, r->tokens.begin() + r->kv_len + 1);
    s.hidden.assign(fwd.final_hidden.begin() + first_row[k] * D,
                    fwd.final_hidden.begin() + (first_row[k] + m) * D);
    mb.seqs.push_back(std::move(s));
    reqs.push_back(r);
  }
  if (mb.seqs.empty()) return;
  auto ext = runner_.ForwardMtp(mb, cache_.kv());
  if (!ext.ok()) {
    ForwardFailed(ext.status());
    for (Request* r : reqs) Finish(*r, FinishReason::kAbort, ext.status());
    return;
  }
  // The first draft of every decoding request, and how many it may have.
  struct Chain {
    Request* r;
    int64_t n;                  // drafts wanted
    std::vector<float> hidden;  // [D] the last step's output
    std::vector<int32_t> topk;  // [K] the first step's selection (shared), or empty (then
                                // for every chain: ForwardMtp takes all or none)
  };
  std::vector<Chain> chains;
  const int64_t K = runner_.config().index_topk;
  for (size_t k = 0; k < reqs.size(); ++k) {
    Request& r = *reqs[k];
    if (r.remaining() != 1) continue;  // mid-prefill
    int64_t n = cfg_.spec_steps;
    n = std::min<int64_t>(n, r.req.max_tokens - r.n_output() - 1);
    n = std::min<int64_t>(n, cfg_.context_window - static_cast<int64_t>(r.tokens.size()));
    // The next verify needs rows kv_len..kv_len+n: their pages, or whatever the pages already
    // held allow.
    if (n > 0) {
      if (cache_.CanGrow(r.seq(), r.kv_len + 1 + n)) {
        cache_.Grow(r.seq(), r.kv_len + 1 + n);
      } else {
        n = cache_.Fit(r.seq(), r.kv_len + 1, n, /*extra_pages=*/0);
      }
    }
    if (n <= 0) continue;
    const int64_t last = ext->row_begin[k + 1] - 1;
    const std::span<const float> row(ext->logits.data() + last * vocab_, vocab_);
    r.drafts.push_back(Argmax(row));
    Chain c{&r, n, {}, {}};
    c.hidden.assign(ext->hidden.begin() + last * D, ext->hidden.begin() + (last + 1) * D);
    if (cfg_.spec_share_topk && !ext->topk.empty()) {
      c.topk.assign(ext->topk.begin() + last * K, ext->topk.begin() + (last + 1) * K);
    }
    chains.push_back(std::move(c));
  }
  // Steps 2..n: one row per chain, one position further each.
  for (int64_t j = 2; j <= cfg_.spec_steps; ++j) {
    MtpBatch step;
    std::vector<Chain*> live;
    for (Chain& c : chains) {
      if (c.n < j || c.r->done) continue;
      MtpSequenceInput s;
      s.seq = c.r->seq();
      s.start_pos = c.r->kv_len + j - 2;
      s.tokens = {c.r->drafts.back()};
      s.hidden = c.hidden;
      s.topk = c.topk;
      step.seqs.push_back(std::move(s));
      live.push_back(&c);
    }
    if (step.seqs.empty()) break;
    auto o = runner_.ForwardMtp(step, cache_.kv());
    if (!o.ok()) {
      ForwardFailed(o.status());
      for (Chain* c : live) Finish(*c->r, FinishReason::kAbort, o.status());
      return;
    }
    for (size_t k = 0; k < live.size(); ++k) {
      const std::span<const float> row(o->logits.data() + k * vocab_, vocab_);
      live[k]->r->drafts.push_back(Argmax(row));
      live[k]->hidden.assign(o->hidden.begin() + k * D, o->hidden.begin() + (k + 1) * D);
    }
  }
  // Drafts the output constraint refuses are cut before verify spends rows on them.
  for (Chain& c : chains) {
    if (c.r->constraint) c.r->constraint->TrimDrafts(&c.r->drafts);
  }
}

}  // namespace mx
