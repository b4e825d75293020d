// mxserve: one binary, verbs like its peers (serve, generate, quantize, inspect, bench, ...).
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "cli/bench_offline.h"
#include "cli/verb.h"

namespace mx::cli {

std::vector<VerbEntry>& Verbs() {
  static std::vector<VerbEntry> verbs;
  return verbs;
}

bool RegisterVerb(std::string name, int order, VerbSetup setup) {
  Verbs().push_back({std::move(name), order, std::move(setup)});
  return true;
}

GlobalOptions& Globals() {
  static GlobalOptions options;
  return options;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "mxserve: error: %s\n", message.c_str());
  return 1;
}

}  // namespace mx::cli

int main(int argc, char** argv) {
  using namespace mx::cli;
  CLI::App app{"mxserve: an inference server for GLM-5-class sparse-attention MoE models"};
  app.set_version_flag("--version", std::string("mxserve ") + MX_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the verb too
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  app.add_option("--threads", Globals().threads, "worker threads (default: one per core)")
      ->check(CLI::NonNegativeNumber);

  auto& verbs = Verbs();
  std::sort(verbs.begin(), verbs.end(),
            [](const VerbEntry& a, const VerbEntry& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, VerbRun>> runs;
  for (auto& v : verbs) {
    VerbRun run = v.setup(app);
    runs.emplace_back(app.get_subcommand(v.name), std::move(run));
  }

  // As app.parse(argc, argv) would: the program name from argv[0], then the arguments (in
  // reverse order, as CLI11 takes a vector).
  app.name(argv[0]);
  std::vector<std::string> args = RewriteLlamaBenchFlags({argv + 1, argv + argc});
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (auto st = mx::SetLogLevel(log_level); !st.ok()) return Fail(st.message());
  for (auto& [sub, run] : runs) {
    if (sub != nullptr && sub->parsed()) return run();
  }
  return Fail("no verb given; see mxserve --help");
}
