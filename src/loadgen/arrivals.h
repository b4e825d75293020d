// Open-loop arrival schedules as vLLM bench serve draws them: inter-arrival gaps from
// Gamma(shape = burstiness, scale = 1 / (rate * burstiness)) (burstiness 1 = Poisson, < 1
// burstier, > 1 smoother, inf = constant 1/rate), accumulated, then rescaled so that the last
// arrival is exactly at n / rate. The client dispatches against these absolute times, so a
// slow dispatch never drifts the schedule.
#pragma once

#include <cstdint>
#include <vector>

namespace mx::loadgen {

// Arrival offsets in seconds from the benchmark start, non-decreasing. rate <= 0 or infinite
// means every request at t = 0.
std::vector<double> ArrivalTimes(int n, double rate, double burstiness, uint64_t seed);

}  // namespace mx::loadgen
