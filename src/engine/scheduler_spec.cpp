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
// auto (SchedulerConfig::spec_auto): the SpecPolicy's SpecChooser picks the drafts of every
// decode step (SpecPolicy::Next, once the step's verifies are in) from the times measured here. A
// step without drafts skips the MTP layer; the decoding requests keep their rows' target hidden
// states (up to spec_max_lag) so that the draft-extend of a later step with drafts writes the MTP
// rows they missed first. Prefill chunks go through the MTP layer at once while some setting could
// pay with the acceptance measured (positions not seen lately taken as 1: SpecChooser::KeepMtp),
// else they skip it, the decoding requests drop their kept rows, and those requests never draft.
#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "engine/scheduler.h"
#include "engine/scheduler_request.h"

namespace mx {

void Scheduler::SpecForward(const ScheduledBatch& batch) {
  const Clock::time_point t0 = Clock::now();
  std::vector<bool> verify;  // decoding: the last token and its drafts, logits on every row
  bool all_decode = true;    // no prefill chunk: the times are those of decode steps
  int64_t rows = 0;
  for (auto [r, n] : batch) {
    verify.push_back(r->remaining() == 1);
    all_decode = all_decode && verify.back();
    rows += n;
  }
  StartMaskPrefetch(batch);  // a verify's masks: the states along its trimmed drafts
  auto out = runner_.ForwardRows(MakeBatch(batch), cache_.kv());
  prefetch_.Wait();
  const double forward_s = SecondsSince(t0);
  stats_.counters.forward_seconds += forward_s;
  if (!out.ok()) {
    ForwardFailed(out.status());
    for (auto [r, n] : batch) Finish(*r, FinishReason::kAbort, out.status());
    return;
  }
  ScheduledBatch extended;         // rows that became final, from row 0
  std::vector<int64_t> first_row;  // the sequence's first row in `out`
  int64_t li = 0;                  // logit row
  int64_t emitted = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto [r, n] = batch[i];
    std::span<float> logits(out->logits.data() + li * vocab_, (verify[i] ? n : 1) * vocab_);
    int64_t m = n;
    if (verify[i]) {
      m = Verify(*r, logits, n);
      emitted += m;
      li += n;
    } else {
      FinishChunk(*r, n, logits);
      li += 1;
    }
    extended.push_back({r, m});
    first_row.push_back(out->row_begin[i]);
  }
  MX_CHECK_EQ(li * vocab_, static_cast<int64_t>(out->logits.size()));
  const double mtp_s = Draft(extended, *out, first_row);
  if (all_decode) {
    spec_.ObserveDecodeStep(rows, forward_s, emitted, SecondsSince(t0) - forward_s - mtp_s);
  }
}

int32_t Scheduler::Verify(Request& r, std::span<float> logits, int64_t rows) {
  const std::vector<int32_t> drafts = std::move(r.drafts);
  r.drafts.clear();
  const auto n_drafts = static_cast<int64_t>(drafts.size());
  if (static_cast<int64_t>(stats_.spec.proposed_at.size()) < n_drafts) {
    stats_.spec.proposed_at.resize(n_drafts, 0);
    stats_.spec.accepted_at.resize(n_drafts, 0);
  }
  for (int64_t i = 0; i < n_drafts; ++i) ++stats_.spec.proposed_at[i];
  if (n_drafts > 0) ++stats_.spec.verify_steps;
  stats_.spec.drafts_proposed += n_drafts;
  int32_t final_rows = 0, compared = 0, accepted = 0;
  bool finished = false;
  for (int64_t i = 0; i < rows; ++i) {
    ++r.kv_len;  // row i's input token is now part of the sequence
    ++final_rows;
    const int32_t draft = i < n_drafts ? drafts[i] : -1;
    std::span<float> row = logits.subspan(i * vocab_, vocab_);
    const int32_t t = SampleNext(r, row, draft);
    compared += draft >= 0 ? 1 : 0;
    if (draft >= 0 && t == draft) {
      ++stats_.spec.accepted_at[i];
      ++stats_.spec.tokens_accepted;
      ++accepted;
    }
    if (AppendToken(r, t, row)) {  // finished (its pages are released)
      finished = true;
      break;
    }
    if (t != draft) break;
  }
  if (compared > 0) spec_.ObserveVerify(compared, accepted);
  if (!finished) Emit(r, /*final=*/false);
  return final_rows;
}

int64_t Scheduler::DraftLimit(Request& r, int64_t steps) {
  int64_t n = steps;
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
  return n;
}

double Scheduler::Draft(const ScheduledBatch& extended, const ForwardOutput& fwd,
                        const std::vector<int64_t>& first_row) {
  const int64_t D = runner_.config().hidden_size;
  // The drafts of the next decode step, and whether the MTP layer's rows are kept up.
  int64_t decoding = 0;
  for (auto [r, m] : extended) decoding += !r->done && r->remaining() == 1 ? 1 : 0;
  const SpecPolicy::Drafts next = spec_.Next(decoding);
  const int32_t steps = next.steps;
  const bool keep = next.keep_mtp;
  int64_t drafters = next.drafters;  // decoding requests that may still draft
  // The next decode step, under the drafts it will verify (none where no request drafted).
  auto count_step = [&](bool drafted) {
    if (decoding > 0) ++stats_.spec.steps_histogram[drafted ? steps : 0];
  };
  // Draft-extend over the rows that became final (and those a request's MTP layer missed while
  // it ran without drafts), as (h_p, x_{p+1}) at position p.
  MtpBatch mb;
  mb.last_logits = true;
  std::vector<Request*> reqs;
  for (size_t k = 0; k < extended.size(); ++k) {
    auto [r, m] = extended[k];
    if (r->done) continue;
    const int64_t start = r->kv_len - m;
    MX_CHECK_GE(static_cast<int64_t>(r->tokens.size()), r->kv_len + 1);
    const std::span<const float> rows(fwd.final_hidden.data() + first_row[k] * D, m * D);
    if (static_cast<int64_t>(r->mtp_hidden.size()) != (start - r->mtp_len) * D) {
      r->mtp_hidden.clear();  // it missed rows it cannot catch up on: it drafts no more
      continue;
    }
    const bool decode = r->remaining() == 1;
    if (decode ? steps == 0 || drafters == 0 : !keep) {
      if (keep && r->kv_len - r->mtp_len <= cfg_.spec_max_lag) {
        r->mtp_hidden.insert(r->mtp_hidden.end(), rows.begin(), rows.end());
      } else {
        r->mtp_hidden.clear();
      }
      continue;
    }
    drafters -= decode ? 1 : 0;
    MtpSequenceInput s;
    s.seq = r->seq();
    s.start_pos = r->mtp_len;
    s.tokens.assign(r->tokens.begin() + r->mtp_len + 1, r->tokens.begin() + r->kv_len + 1);
    s.hidden = std::move(r->mtp_hidden);
    r->mtp_hidden.clear();
    s.hidden.insert(s.hidden.end(), rows.begin(), rows.end());
    mb.seqs.push_back(std::move(s));
    reqs.push_back(r);
  }
  if (mb.seqs.empty()) {
    count_step(false);
    return 0;
  }
  Clock::time_point t0 = Clock::now();
  auto ext = runner_.ForwardMtp(mb, cache_.kv());
  double mtp_s = SecondsSince(t0);
  if (!ext.ok()) {
    ForwardFailed(ext.status());
    for (Request* r : reqs) Finish(*r, FinishReason::kAbort, ext.status());
    return mtp_s;
  }
  stats_.spec.mtp_seconds += mtp_s;
  stats_.spec.mtp_rows += ext->row_begin.back();
  spec_.ObserveMtp(ext->row_begin.back(), mtp_s);
  for (Request* r : reqs) {
    cache_.MarkMtpRows(*r, r->mtp_len, r->kv_len);
    r->mtp_len = r->kv_len;
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
    const int64_t n = DraftLimit(r, steps);
    if (n <= 0) continue;
    const int64_t last = ext->row_begin[k + 1] - 1;
    const std::span<const float> row(ext->logits.data() + k * vocab_, vocab_);  // last_logits
    r.drafts.push_back(Argmax(row));
    Chain c{&r, n, {}, {}};
    c.hidden.assign(ext->hidden.begin() + last * D, ext->hidden.begin() + (last + 1) * D);
    if (cfg_.spec_share_topk && !ext->topk.empty()) {
      c.topk.assign(ext->topk.begin() + last * K, ext->topk.begin() + (last + 1) * K);
    }
    chains.push_back(std::move(c));
  }
  count_step(!chains.empty());
  // Steps 2..n: one row per chain, one position further each.
  for (int64_t j = 2; j <= steps; ++j) {
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
    t0 = Clock::now();
    auto o = runner_.ForwardMtp(step, cache_.kv());
    const double pass_s = SecondsSince(t0);
    mtp_s += pass_s;
    stats_.spec.mtp_seconds += pass_s;
    stats_.spec.mtp_rows += std::ssize(live);
    if (!o.ok()) {
      ForwardFailed(o.status());
      for (Chain* c : live) Finish(*c->r, FinishReason::kAbort, o.status());
      return mtp_s;
    }
    spec_.ObserveMtp(static_cast<int64_t>(live.size()), pass_s);
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
  return mtp_s;
}

}  // namespace mx
