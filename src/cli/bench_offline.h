// `mxserve bench offline`: llama-bench for mxserve (bench_offline.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli/verb.h"

namespace mx::cli {

// Adds `offline` under the `bench` verb; returns what runs it once parsed.
VerbRun SetupBenchOffline(CLI::App& bench);

// llama-bench's two-letter short flag `-gp P,G` as CLI11 can parse it (`--gp`), for the
// arguments after `bench offline`; everything else is returned unchanged.
std::vector<std::string> RewriteLlamaBenchFlags(std::vector<std::string> args);

}  // namespace mx::cli
