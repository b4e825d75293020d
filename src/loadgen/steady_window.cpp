#include "loadgen/steady_window.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <unordered_set>

#include "loadgen/stats.h"

namespace mx::loadgen {
namespace {

double MedianOf(std::vector<double> v) { return Percentile(std::move(v), 50); }

// One-sided Mann-Whitney z that `later` is larger than `earlier` (ties count half; normal
// approximation, no tie correction). 0 when either side is empty.
double MannWhitneyZ(const std::vector<double>& earlier, const std::vector<double>& later) {
  if (earlier.empty() || later.empty()) return 0;
  double u = 0;
  for (double x : earlier) {
    for (double y : later) u += y > x ? 1.0 : y == x ? 0.5 : 0.0;
  }
  const double n1 = static_cast<double>(earlier.size()), n2 = static_cast<double>(later.size());
  return (u - n1 * n2 / 2) / std::sqrt(n1 * n2 * (n1 + n2 + 1) / 12);
}

// The backlog test. A server that keeps up completes each request a random E2E time D after it
// arrives, with D's distribution the same all through the window. Count the arrivals in
// (a0, a0 + L] and the completions in (a0 + d, a0 + d + L] for a fixed shift d (the median D):
// a request is in both counts unless it sits near an edge and its D differs from d. Near the
// left edge a request just before a0 with D > d is counted only as a completion, one just
// after a0 with D < d only as an arrival; near the right edge the other way round. In
// expectation the two kinds are equally many (lambda * E|D - d| each, for any d), so
// `arrived - completed` is zero on average whatever D is relative to the window, which is
// what the old count of unshifted completions got wrong (it lost about D / span of them).
// Its noise: given the n requests counted by one side only, each is equally likely to be of
// either kind, so the growth is 2 Binomial(n, 1/2) - n, standard deviation sqrt(n) (a sign
// test). The Poisson noise of the arrivals does not enter, since both counts are drawn from
// the same arrivals: a dozen requests at a light load give n of 0 to 2, and a growth can pass
// 2.5 sqrt(n) only once n >= 7. An overloaded server adds (lambda - mu) L requests that
// arrived and did not complete in time.
// z is 2.5 rather than 2 because neighbours' E2E times are correlated (they share a queue),
// so the one-sided requests come in clusters and sqrt(n) understates the spread near
// capacity. The shifted span stops at the run's last arrival: after it a backlog can drain
// all at once, which must not read as keeping up.
void JudgeBacklog(const std::vector<RequestRecord>& records,
                  const std::vector<const RequestRecord*>& win, const SteadyCriteria& c,
                  SteadyWindow& w) {
  std::vector<double> e2e;
  for (const RequestRecord* r : win) {
    if (r->success) e2e.push_back(r->end_s() - r->arrival_s);
  }
  if (e2e.empty()) return;
  double last_arrival = 0;
  for (const RequestRecord& r : records) last_arrival = std::max(last_arrival, r.arrival_s);
  const double a0 = win.front()->arrival_s, a1 = win.back()->arrival_s;
  w.shift_s = MedianOf(std::move(e2e));
  w.span_s = std::min(a1, last_arrival - w.shift_s) - a0;
  if (!(w.span_s > 0)) return;
  w.backlog_judged = true;
  const double c0 = a0 + w.shift_s, c1 = c0 + w.span_s;
  std::unordered_set<const RequestRecord*> arrived;
  for (const RequestRecord& r : records) {
    if (r.arrival_s > a0 && r.arrival_s <= a0 + w.span_s) arrived.insert(&r);
  }
  for (const RequestRecord& r : records) {
    if (!r.success || r.end_s() <= c0 || r.end_s() > c1) continue;
    w.completed++;
    w.completed_only += arrived.count(&r) == 0 ? 1 : 0;
  }
  w.arrived = static_cast<int>(arrived.size());
  w.arrived_only = w.arrived - (w.completed - w.completed_only);
  w.backlog_growth = w.arrived - w.completed;
  w.backlog_tolerance = std::max(c.backlog_z * std::sqrt(w.arrived_only + w.completed_only),
                                 c.backlog_floor * w.arrived);
  w.backlog_growing = w.backlog_growth > w.backlog_tolerance;
  w.achieved_rate = w.completed / w.span_s;
}

// The TTFT trend: a queue that grows (the offered rate over capacity by a fraction g) makes
// each request wait g seconds longer per second of arrivals, which shows in TTFT when the
// server queues before prefill. Two conditions, both needed: the rise between the thirds'
// medians is more than ttft_growth (10%) of the time between them (a practical size, the same
// at any scale: at load 0.9 a queue that starts empty and settles climbs by 5-8% of the window
// at most in the slot-server tests, a 1.2x overload by about 20%),
// and the last third's TTFTs are larger than the first third's by a one-sided Mann-Whitney
// test (thirds of 3 or 4 requests differ by chance; with 3 against 3, z cannot exceed 1.96,
// so a dozen requests never fail on the trend alone).
void JudgeTtftTrend(const std::vector<const RequestRecord*>& win, const SteadyCriteria& c,
                    SteadyWindow& w) {
  const size_t third = win.size() / 3;
  if (third < 1) return;
  std::vector<double> first, last, first_at, last_at;
  for (size_t i = 0; i < third; ++i) {
    const RequestRecord* f = win[i];
    const RequestRecord* l = win[win.size() - third + i];
    first_at.push_back(f->arrival_s);
    last_at.push_back(l->arrival_s);
    if (f->success) first.push_back(f->ttft_s * 1e3);
    if (l->success) last.push_back(l->ttft_s * 1e3);
  }
  w.ttft_first_third_ms = MedianOf(first);
  w.ttft_last_third_ms = MedianOf(last);
  w.ttft_thirds_apart_s = MedianOf(last_at) - MedianOf(first_at);
  w.ttft_trend_z = MannWhitneyZ(first, last);
  const double rise_s = (w.ttft_last_third_ms - w.ttft_first_third_ms) / 1e3;
  w.ttft_rising = rise_s > c.ttft_growth * w.ttft_thirds_apart_s && w.ttft_trend_z > c.ttft_z;
}

}  // namespace

SteadyWindow AnalyzeSteadyWindow(const std::vector<RequestRecord>& records,
                                 const SteadyCriteria& criteria) {
  SteadyWindow w;
  std::vector<const RequestRecord*> by_arrival;
  for (const RequestRecord& r : records) by_arrival.push_back(&r);
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [](auto* a, auto* b) { return a->arrival_s < b->arrival_s; });
  const size_t n = by_arrival.size();
  size_t lo = static_cast<size_t>(std::floor(criteria.lo_frac * static_cast<double>(n)));
  size_t hi = static_cast<size_t>(std::ceil(criteria.hi_frac * static_cast<double>(n)));
  hi = std::min(hi, n);
  if (hi < lo + 2) {  // too few requests for a window: use them all
    lo = 0;
    hi = n;
  }
  if (hi < 2) return w;
  const std::vector<const RequestRecord*> win(by_arrival.begin() + static_cast<std::ptrdiff_t>(lo),
                                              by_arrival.begin() + static_cast<std::ptrdiff_t>(hi));
  w.requests = static_cast<int>(win.size());
  const double a0 = win.front()->arrival_s, a1 = win.back()->arrival_s;
  w.offered_rate = a1 > a0 ? static_cast<double>(win.size() - 1) / (a1 - a0) : 0;
  int ok = 0;
  for (const RequestRecord* r : win) ok += r->success ? 1 : 0;
  w.success_rate = static_cast<double>(ok) / static_cast<double>(win.size());
  JudgeBacklog(records, win, criteria, w);
  JudgeTtftTrend(win, criteria, w);
  return w;
}

}  // namespace mx::loadgen
