// Verb registry for the `mxserve` binary. Each verb lives in its own file and registers a
// set-up function with MX_REGISTER_VERB; main.cpp builds the CLI11 app from the registry.
// The set-up function adds a subcommand to `app` and returns the function to run when the
// subcommand is chosen (exit code: 0 ok, 1 runtime failure, 2 usage error).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mx::cli {

using VerbRun = std::function<int()>;
using VerbSetup = std::function<VerbRun(CLI::App& app)>;

struct VerbEntry {
  std::string name;
  int order;  // position in --help
  VerbSetup setup;
};

// REQUIRES: called only during static initialization (by MX_REGISTER_VERB).
bool RegisterVerb(std::string name, int order, VerbSetup setup);
std::vector<VerbEntry>& Verbs();

// Options every verb shares, filled by main() before a verb runs.
struct GlobalOptions {
  int threads = 0;  // --threads; 0 = one per core
};
GlobalOptions& Globals();

// Prints a Status-style error for a verb and returns the exit code 1.
int Fail(const std::string& message);

}  // namespace mx::cli

// The set-up function must add a subcommand named exactly `name` ("chat-template").
#define MX_REGISTER_VERB(ident, name, order, setup) \
  static const bool mx_verb_registered_##ident = ::mx::cli::RegisterVerb(name, order, setup)
