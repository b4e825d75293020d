// One `bench serve` run: synthesize prompts, optionally warm (W throw-away requests on a prompt
// outside every prefix group, then one max_tokens=1 request per prefix group so the measured
// hit rate is exactly the shared fraction), send the measured requests on an open-loop
// schedule, and compute the metrics.
#pragma once

#include <limits>

#include "loadgen/arrivals.h"
#include "loadgen/client.h"
#include "loadgen/metrics.h"
#include "loadgen/prompts.h"

namespace mx::loadgen {

struct ServeConfig {
  ClientOptions client;
  PromptSpec prompts;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int warmup_requests = 0;
  bool warm_prefixes = false;
};

struct ServeResult {
  PromptSet prompts;
  RunOutput run;
  BenchMetrics metrics;
  int warmup_failures = 0;
};

// Unavailable when every warmup request failed (the server is not there); otherwise the
// measured run's failures are in the metrics.
Result<ServeResult> RunServeBenchmark(const ServeConfig& config);

}  // namespace mx::loadgen
