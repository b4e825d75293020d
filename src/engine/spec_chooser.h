// `--speculative-num-steps auto`: picks, for every decode step, how many MTP draft tokens each
// decoding request gets (0 = speculation off) so that the expected tokens per second of the
// current batch is highest. Pure logic: the scheduler feeds it the measured times of the
// forwards it ran and the outcome of every verify; it never reads a clock itself.
//
// Model. With B decoding requests and S drafts each, a step emits B·E(S) tokens, where
//   E(S) = 1 + Σ_{j=1..S} Π_{i≤j} a_i
// and a_i is the probability that draft i is accepted given drafts 1..i-1 were (a draft chain's
// i-th token does not depend on S, so one estimate per position serves every S). It costs
//   T(0) = F(B) + c·B
//   T(S) = F(B·(S+1)) + M(B·E(S)) + (S−1)·M(B) + c·B·E(S)
// F(r): a target forward over r rows (verify or decode), M(r): an MTP pass over r rows (the
// draft-extend over the accepted rows gives the first draft, S−1 single-row passes the rest),
// c: the step's time outside those forwards per emitted token (sampling, scheduling).
// F and M are running averages per row count (exact up to 16 rows, then buckets ~12% wide; the
// first observation of each is replaced by the second, as it is often a cold one), capped by
// the estimate of any larger row count (more rows never cost less).
//
// Exploring. A setting is worth trying when its optimistic rate — unmeasured row counts (and
// those whose estimate exceeds a larger row count's: a cold step or a slow spell) at the cost
// of the nearest measured smaller one plus the extra rows at the cost per row below it,
// never-seen acceptance taken as 1 — beats the best estimate by `probe_margin`. Such a setting
// is probed for `probe_steps` steps: at once when some of its costs were never measured at this
// batch size, else when it is a neighbour of the best (one draft more or fewer), has not run for
// the re-probe interval, and beats it with stale acceptance taken as 1 too; of several, the one
// with the fewest drafts first, and a chain only once the chain one shorter was measured at this
// batch size (its probe is the cheapest, and what it measures may rule the longer chains out).
// A probe's step counts only once its drafts were verified (none may have been made: the running
// requests' MTP layers may have fallen behind while drafts could not pay, see KeepMtp). A
// setting that cannot beat "off" even if every draft were accepted is never tried again (CanPay);
// on a host where verifying k rows costs k decode steps, `auto` thereby settles on off after one
// probe of one draft. An acceptance position not observed for the re-probe interval is stale:
// its next observations start a fresh average (weight 1/n, then the floor `accept_weight`), so a
// probe after an acceptance shift measures the new rate instead of blending it into the old one.
// The re-probe interval starts at `reprobe_interval` and doubles, up to `max_reprobe_interval`,
// every time a re-probe ends without its setting becoming the best (drafts that never pay cost a
// probe of probe_steps ever more rarely, and the MTP layer is kept up for a catch-up ever more
// rarely); it returns to `reprobe_interval` when a re-probe wins. A re-probe lets one request
// draft (the costs are known; it re-measures acceptance); a first probe lets every request draft.
//
// The scheduler's side (scheduler_spec.cpp). While off, the MTP layer is skipped; each request
// keeps up to `spec_max_lag` (256) rows of target hidden states so that drafting can resume (its
// MTP rows are then written in one pass), and one that fell further behind decodes without
// drafts until it ends. While drafts were just measured to fail (KeepMtp false), prompts skip
// the MTP layer and running requests keep no rows; a re-probe then waits, keeping the MTP layer
// up, for a request that can draft.
//
// Thread-safety: none (the engine loop thread owns it).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace mx {

struct SpecChooserOptions {
  int32_t max_steps = 5;           // settings 0..max_steps; REQUIRES: >= 1
  int64_t reprobe_interval = 512;  // decode steps; REQUIRES: >= 1
  // The interval's ceiling while re-probes keep finding nothing; REQUIRES: >= reprobe_interval.
  int64_t max_reprobe_interval = 4096;
  int32_t probe_steps = 8;      // consecutive steps a probe runs; REQUIRES: >= 1
  double cost_weight = 0.2;     // running-average weight of a new cost observation
  double accept_weight = 0.02;  // floor of the weight of a new acceptance observation
  // A probe must be able to beat the best estimate by this factor (the estimates are running
  // averages of a noisy host's times: without a margin, noise alone triggers probes).
  double probe_margin = 1.05;
};

class SpecChooser {
 public:
  explicit SpecChooser(SpecChooserOptions o);

  // A target forward over `rows` rows of decoding requests (no prefill chunk) took `seconds`.
  void ObserveTarget(int64_t rows, double seconds);
  // One MTP pass over `rows` rows took `seconds`.
  void ObserveMtp(int64_t rows, double seconds);
  // A decode step spent `seconds` outside its forwards and emitted `tokens` tokens.
  void ObserveOverhead(int64_t tokens, double seconds);
  // One request's verify: `proposed` drafts, the first `accepted` of them accepted.
  // REQUIRES: 0 <= accepted <= proposed.
  void ObserveVerify(int32_t proposed, int32_t accepted);

  // The setting for the next decode step of `batch` (>= 1) decoding requests; advances the
  // step count that staleness and re-probing are measured in.
  int32_t Choose(int64_t batch);

  // Expected tokens per second of `steps` at `batch`, from the current estimates (0 when a
  // cost it needs was never measured).
  double Predict(int32_t steps, int64_t batch) const;
  // Whether some setting > 0 could still beat off at `batch`: with every draft accepted and
  // unmeasured costs at their optimistic value, among the settings the probes can still reach
  // (up to the first unmeasured one); true before off was measured there.
  bool CanPay(int64_t batch) const;
  // Whether the MTP layer is worth keeping up (prefill chunks through it, skipped rows kept for
  // a catch-up) at `batch`: as CanPay, but with the acceptance measured, positions never seen or
  // stale (not observed for the re-probe interval) taken as 1. Drafts that were just measured
  // to fail make it false until they are stale, so a model whose drafts are never accepted
  // stops paying for the MTP layer between re-probes.
  bool KeepMtp(int64_t batch) const;
  // Acceptance estimate of draft position i (1-based; 0 when never observed).
  double accept(int32_t i) const;
  // The current re-probe interval (decode steps): reprobe_interval, doubled per fruitless
  // re-probe up to max_reprobe_interval.
  int64_t reprobe_interval() const { return interval_; }

  struct Decision {
    int32_t steps = 0;
    bool probe = false;  // an exploration step, not the best estimate
    // A periodic re-probe (of a setting whose costs are known): it re-measures acceptance, so
    // the scheduler lets only one request draft in it.
    bool reprobe = false;
    double tokens_per_s = 0;  // Predict(steps, batch)
    double off_tokens_per_s = 0;
    double accept_length = 1;  // E(steps)
  };
  const Decision& last() const { return last_; }
  const SpecChooserOptions& options() const { return o_; }

 private:
  struct Avg {
    double value = 0;
    int64_t n = 0;
  };
  struct Position {
    double a = 1;            // estimate
    int64_t n = 0;           // observations since it was last fresh
    int64_t last_seen = -1;  // step of the last observation
  };
  static int64_t Bucket(int64_t rows);
  void Add(std::map<int64_t, Avg>& table, int64_t rows, double seconds) const;
  // Cost of `rows` from `table` (capped by larger measured buckets); `optimistic`: a capped or
  // unmeasured bucket costs what the nearest measured smaller one does plus its extra rows at
  // the per-row cost between that one and the measured one below it (nothing when none is
  // smaller), else an unmeasured bucket is interpolated linearly (or
  // extrapolated proportionally) from the measured ones. *known: whether the bucket was
  // measured.
  static double Cost(const std::map<int64_t, Avg>& table, double rows, bool optimistic,
                     bool* known);
  bool Stale(const Position& p) const;
  // Which acceptance estimates an expected accept length takes as 1 (else the estimate, 0 for a
  // position never seen).
  enum class Acceptance { kEstimate, kUnseenAsOne, kStaleAsOne, kAllAsOne };
  double AcceptLength(int32_t steps, Acceptance mode) const;
  // tokens/s; *measured: every cost it used was measured.
  double Rate(int32_t steps, int64_t batch, bool optimistic, Acceptance acceptance,
              bool* measured) const;
  // Some setting > 0 beats off at `batch` with optimistic costs and `acceptance`.
  bool Pays(int64_t batch, Acceptance acceptance) const;

  SpecChooserOptions o_;
  std::map<int64_t, Avg> target_, mtp_;  // bucket -> seconds
  Avg overhead_;                         // seconds per emitted token
  std::vector<Position> pos_;            // [max_steps]
  std::vector<int64_t> last_run_;        // [max_steps + 1] step a setting last ran, -1 never
  int64_t step_ = 0;
  int32_t probing_ = 0;  // the setting being probed
  int32_t probe_left_ = 0;
  int64_t probe_waited_ = 0;  // probe steps without a verify so far
  bool reprobing_ = false;    // the probe is a periodic re-probe (not a first measurement)
  bool verified_ = false;     // a verify was observed since the last Choose
  int64_t interval_ = 0;      // the current re-probe interval
  Decision last_;
};

}  // namespace mx
