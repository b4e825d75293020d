// The speculative-steps chooser (see spec_chooser.h).
#include "engine/spec_chooser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/check.h"

namespace mx {

namespace {
constexpr int64_t kExactRows = 16;      // row counts up to this have their own bucket
constexpr double kBucketRatio = 1.125;  // beyond: geometric buckets this wide
}  // namespace

SpecChooser::SpecChooser(SpecChooserOptions o)
    : o_(o),
      pos_(std::max(o.max_steps, 1)),
      last_run_(std::max(o.max_steps, 1) + 1, -1),
      interval_(o.reprobe_interval) {
  MX_CHECK_GE(o_.max_steps, 1);
  MX_CHECK_GE(o_.reprobe_interval, 1);
  MX_CHECK_GE(o_.max_reprobe_interval, o_.reprobe_interval);
  MX_CHECK_GE(o_.probe_steps, 1);
}

int64_t SpecChooser::Bucket(int64_t rows) {
  if (rows <= kExactRows) return std::max<int64_t>(rows, 1);
  const auto k = static_cast<int64_t>(
      std::floor(std::log(static_cast<double>(rows) / kExactRows) / std::log(kBucketRatio)));
  return std::max<int64_t>(
      kExactRows + 1, std::llround(kExactRows * std::pow(kBucketRatio, static_cast<double>(k))));
}

void SpecChooser::Add(std::map<int64_t, Avg>& table, int64_t rows, double seconds) const {
  if (rows < 1 || !std::isfinite(seconds) || seconds < 0) return;
  Avg& a = table[Bucket(rows)];
  ++a.n;
  // The first time of a row count is often a cold one (buffers touched for the first time): the
  // second replaces it, then a running mean.
  const double w = a.n <= 2 ? 1.0 : std::max(1.0 / static_cast<double>(a.n - 1), o_.cost_weight);
  a.value += w * (seconds - a.value);
}

void SpecChooser::ObserveTarget(int64_t rows, double seconds) { Add(target_, rows, seconds); }
void SpecChooser::ObserveMtp(int64_t rows, double seconds) { Add(mtp_, rows, seconds); }

void SpecChooser::ObserveOverhead(int64_t tokens, double seconds) {
  if (tokens < 1 || !std::isfinite(seconds) || seconds < 0) return;
  ++overhead_.n;
  const double w = overhead_.n <= 2
                       ? 1.0  // the first is replaced, as in Add
                       : std::max(1.0 / static_cast<double>(overhead_.n - 1), o_.cost_weight);
  overhead_.value += w * (seconds / static_cast<double>(tokens) - overhead_.value);
}

bool SpecChooser::Stale(const Position& p) const {
  return p.last_seen < 0 || step_ - p.last_seen > interval_;
}

void SpecChooser::ObserveVerify(int32_t proposed, int32_t accepted) {
  MX_CHECK_GE(accepted, 0);
  MX_CHECK_LE(accepted, proposed);
  const int32_t seen = std::min({proposed, accepted + 1, o_.max_steps});
  for (int32_t i = 1; i <= seen; ++i) {
    Position& p = pos_[i - 1];
    if (Stale(p)) p.n = 0;  // a fresh average: the old rate may no longer hold
    ++p.n;
    const double w = std::max(1.0 / static_cast<double>(p.n), o_.accept_weight);
    p.a += w * ((i <= accepted ? 1.0 : 0.0) - p.a);
    p.last_seen = step_;
  }
  verified_ = verified_ || seen > 0;
}

double SpecChooser::accept(int32_t i) const {
  if (i < 1 || i > o_.max_steps) return 0;
  const Position& p = pos_[i - 1];
  return p.last_seen < 0 ? 0 : p.a;
}

double SpecChooser::AcceptLength(int32_t steps, Acceptance mode) const {
  double e = 1, prod = 1;
  for (int32_t i = 1; i <= steps; ++i) {
    const Position& p = pos_[i - 1];
    double a = p.last_seen < 0 ? 0.0 : p.a;
    if (mode == Acceptance::kUnseenAsOne && p.last_seen < 0) a = 1;
    if (mode == Acceptance::kStaleAsOne && Stale(p)) a = 1;
    if (mode == Acceptance::kAllAsOne) a = 1;
    prod *= a;
    e += prod;
  }
  return e;
}

double SpecChooser::Cost(const std::map<int64_t, Avg>& table, double rows, bool optimistic,
                         bool* known) {
  const int64_t b = Bucket(std::max<int64_t>(1, std::llround(rows)));
  const auto at = table.find(b);
  if (at != table.end()) {
    // More rows never cost less: a larger row count's time bounds this one's, so an outlier
    // (a cold step, a spell the host preempted) cannot make a setting look worse than a longer
    // one. Such an estimate is not trusted: optimistically the bucket counts as unmeasured, so
    // the setting is probed again.
    const double own = at->second.value;
    double cap = own;
    for (auto it = std::next(at); it != table.end(); ++it) cap = std::min(cap, it->second.value);
    if (cap == own || !optimistic) {
      *known = true;
      return cap;
    }
  }
  *known = false;
  const auto hi = table.upper_bound(b);
  const auto below = table.lower_bound(b);  // lo: the nearest measured smaller bucket
  const auto lo = below == table.begin() ? table.end() : std::prev(below);
  if (optimistic) {
    if (lo == table.end()) return 0.0;
    // The nearest smaller bucket plus the extra rows at the cost per row between it and the
    // measured bucket below it (none when it is the smallest).
    double slope = 0;
    if (lo != table.begin()) {
      const auto below_lo = std::prev(lo);
      slope = std::max(0.0, (lo->second.value - below_lo->second.value) /
                                static_cast<double>(lo->first - below_lo->first));
    }
    return lo->second.value + slope * static_cast<double>(b - lo->first);
  }
  if (lo != table.end() && hi != table.end()) {
    const double t =
        (static_cast<double>(b - lo->first)) / static_cast<double>(hi->first - lo->first);
    return lo->second.value + t * (hi->second.value - lo->second.value);
  }
  if (lo != table.end()) {
    return lo->second.value * static_cast<double>(b) / static_cast<double>(lo->first);
  }
  return hi != table.end() ? hi->second.value : 0.0;
}

double SpecChooser::Rate(int32_t steps, int64_t batch, bool optimistic, Acceptance acceptance,
                         bool* measured) const {
  const auto B = static_cast<double>(batch);
  const double e = AcceptLength(steps, acceptance);
  bool k1 = true, k2 = true, k3 = true;
  double t = overhead_.value * B * e;
  if (steps == 0) {
    t += Cost(target_, B, optimistic, &k1);
  } else {
    t += Cost(target_, B * (steps + 1), optimistic, &k1);
    t += Cost(mtp_, B * e, optimistic, &k2);
    if (steps > 1) t += (steps - 1) * Cost(mtp_, B, optimistic, &k3);
  }
  *measured = k1 && k2 && k3;
  return t > 0 ? B * e / t : 0.0;
}

double SpecChooser::Predict(int32_t steps, int64_t batch) const {
  if (steps < 0 || steps > o_.max_steps || batch < 1) return 0;
  bool measured = false;
  const double r = Rate(steps, batch, /*optimistic=*/false, Acceptance::kEstimate, &measured);
  return measured ? r : 0.0;
}

bool SpecChooser::CanPay(int64_t batch) const { return Pays(batch, Acceptance::kAllAsOne); }

bool SpecChooser::KeepMtp(int64_t batch) const { return Pays(batch, Acceptance::kStaleAsOne); }

bool SpecChooser::Pays(int64_t batch, Acceptance acceptance) const {
  bool measured = false;
  const double off = Rate(0, batch, /*optimistic=*/false, Acceptance::kEstimate, &measured);
  if (!measured) return true;
  for (int32_t s = 1; s <= o_.max_steps; ++s) {
    if (Rate(s, batch, /*optimistic=*/true, acceptance, &measured) > off) return true;
    // Not even this chain can pay; a longer one is probed only once this one was measured,
    // which it never will be.
    if (!measured) return false;
  }
  return false;
}

int32_t SpecChooser::Choose(int64_t batch) {
  MX_CHECK_GE(batch, 1);
  ++step_;
  Decision d;
  bool off_measured = false;
  d.off_tokens_per_s = Rate(0, batch, false, Acceptance::kEstimate, &off_measured);
  if (probe_left_ > 0) {
    // A probe step with drafts counts once they were verified: while no running request can
    // draft (their MTP layers fell behind while drafts could not pay), the probe waits for one
    // that can (a request admitted since), for at most the re-probe interval. A probe of off
    // verifies nothing and counts every step.
    if (verified_ || probing_ == 0 || ++probe_waited_ > interval_) --probe_left_;
    d.steps = probing_;
    d.probe = true;
    d.reprobe = reprobing_;
  } else if (off_measured) {
    const bool reprobe_ended = reprobing_;
    reprobing_ = false;
    // The best measured setting, then whether another one deserves a probe.
    double best_rate = d.off_tokens_per_s;
    for (int32_t s = 1; s <= o_.max_steps; ++s) {
      bool m = false;
      const double r = Rate(s, batch, false, Acceptance::kEstimate, &m);
      if (m && r > best_rate) {
        best_rate = r;
        d.steps = s;
      }
    }
    // The fewest drafts first, and a chain only once the chain one shorter was measured at this
    // batch size: a probe of S drafts measures the acceptance of positions 1..S and the costs
    // of S + 1 rows, which often shows that no longer chain can win, while a longer chain's
    // optimistic rate rests on more unmeasured costs and unseen positions (a probe costs most
    // where acceptance is poor, and longer chains cost more).
    if (reprobe_ended) {
      // A re-probe that did not make its setting the best found nothing new: the next one
      // comes later; one that won returns the interval to its start.
      interval_ = d.steps == probing_ ? o_.reprobe_interval
                                      : std::min(2 * interval_, o_.max_reprobe_interval);
    }
    int32_t probe = -1;
    bool reprobe = false;
    bool shorter_measured = true;  // setting s - 1's costs were all measured
    for (int32_t s = 0; s <= o_.max_steps && probe < 0 && shorter_measured; ++s) {
      // Never measured here (optimistic costs, positions never seen taken as accepted), or a
      // neighbour of the best not run for reprobe_interval steps (stale positions taken as
      // accepted too: a shift in acceptance moves the best one setting at a time).
      bool m = false, m_again = false;
      const double opt = Rate(s, batch, /*optimistic=*/true, Acceptance::kUnseenAsOne, &m);
      const double opt_again =
          Rate(s, batch, /*optimistic=*/true, Acceptance::kStaleAsOne, &m_again);
      shorter_measured = m || s == 0;  // off's cost was measured (off_measured)
      if (s == d.steps) continue;
      const double bar = o_.probe_margin * best_rate;
      const bool first = (!m || last_run_[s] < 0) && opt > bar;
      const bool again =
          std::abs(s - d.steps) == 1 && step_ - last_run_[s] >= interval_ && opt_again > bar;
      if (first || again) {
        probe = s;
        reprobe = !first;
      }
    }
    if (probe >= 0) {
      d.steps = probing_ = probe;
      probe_left_ = o_.probe_steps - 1;
      probe_waited_ = 0;
      reprobing_ = reprobe;
      d.probe = true;
      d.reprobe = reprobe;
    }
  }  // else: off, until a decode step at this batch size was measured
  last_run_[d.steps] = step_;
  verified_ = false;
  bool m = false;
  d.tokens_per_s = Rate(d.steps, batch, false, Acceptance::kEstimate, &m);
  d.accept_length = AcceptLength(d.steps, Acceptance::kEstimate);
  last_ = d;
  return d.steps;
}

}  // namespace mx
