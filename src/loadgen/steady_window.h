// Whether a server kept up with an open-loop rate, judged on the middle of one run (the steady
// window): its backlog must not grow and its TTFT must not climb. Both tests are built so that
// a server that keeps up passes whatever its E2E time is relative to the window, and so that
// the arrival noise of a short window (a dozen requests) does not fail it; the reasoning is in
// steady_window.cpp and docs/benchmarks.md ("Sustained and the knee").
#pragma once

#include <vector>

#include "loadgen/metrics.h"

namespace mx::loadgen {

// Thresholds of the two tests; the defaults are what `bench sweep` uses.
struct SteadyCriteria {
  double lo_frac = 0.1;  // the window: requests whose arrival index is in [lo_frac, hi_frac)
  double hi_frac = 0.9;
  // Backlog: fails when it grew by more than backlog_z standard deviations of its noise AND
  // by more than backlog_floor of the requests that arrived (a practical size: a queue that
  // settles after starting empty stays below it on long windows).
  double backlog_z = 2.5;
  double backlog_floor = 0.05;
  // TTFT trend: fails when the median TTFT of the window's last third exceeds its first
  // third's by more than ttft_growth x the time between them (a FIFO queue grows by that
  // share of the elapsed time at an offered rate ttft_growth above capacity) AND the last
  // third's TTFTs are larger with a one-sided Mann-Whitney z above ttft_z.
  double ttft_growth = 0.1;
  double ttft_z = 2.0;
};

struct SteadyWindow {
  int requests = 0;
  double offered_rate = 0;  // (requests - 1) / span of their arrival times
  double success_rate = 0;  // of the window's requests

  // Backlog. The requests that arrived in (a0, a0 + span] are compared with the successful
  // completions (of any request) in the same span shifted by shift_s = the median of the
  // window's E2E times from scheduled arrival; a0 is the window's first arrival and the
  // span ends where the shifted span would pass the run's last arrival (so a backlog drained
  // after the arrivals stop is not counted) or at the window's last arrival.
  bool backlog_judged = false;  // false: the median E2E leaves no span before the last arrival
  double shift_s = 0;
  double span_s = 0;
  int arrived = 0;         // arrivals in the span
  int completed = 0;       // successful completions in the shifted span
  int arrived_only = 0;    // of `arrived`, not among `completed` (late, early or failed)
  int completed_only = 0;  // of `completed`, arrived outside the span
  int backlog_growth = 0;  // arrived - completed = arrived_only - completed_only
  double backlog_tolerance = 0;
  bool backlog_growing = false;
  double achieved_rate = 0;  // completed / span_s

  // TTFT trend between the window's first and last thirds (by arrival).
  double ttft_first_third_ms = 0;  // medians
  double ttft_last_third_ms = 0;
  double ttft_thirds_apart_s = 0;  // between the thirds' median arrival times
  double ttft_trend_z = 0;         // one-sided Mann-Whitney z, last third above first
  bool ttft_rising = false;
};

SteadyWindow AnalyzeSteadyWindow(const std::vector<RequestRecord>& records,
                                 const SteadyCriteria& criteria = {});

}  // namespace mx::loadgen
