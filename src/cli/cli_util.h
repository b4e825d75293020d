// Helpers shared by the verbs that run the model: token-id lists, the offline KV store, the
// command line. (Loading the model and choosing its kernels: engine/model_factory.h.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "io/model_config.h"
#include "kernels/kernels.h"
#include "model/kv_store.h"

namespace mx::cli {

// A flag's value that does not parse: ends the command line's parse with exit code 1 and a
// message naming the flag and `why` (for an option function's callback).
[[noreturn]] void ThrowFlagError(const std::string& flag, const Status& why);

// `flag` parsed by `parse` (string -> Result<T>) into *out as it is read; a value that does not
// parse ends the command line's parse naming the flag (ThrowFlagError).
template <typename T, typename Parse>
CLI::Option* AddParsedOption(CLI::App* sub, const std::string& flag, T* out, Parse parse,
                             const std::string& help) {
  return sub->add_option_function<std::string>(
      flag,
      [flag, out, parse](const std::string& v) {
        auto r = parse(v);
        if (!r.ok()) ThrowFlagError(flag, r.status());
        *out = *r;
      },
      help);
}

// --kernels and --gemm-activations on a verb, parsed into the enums as they are read (an
// unknown value is an error naming it). The help shows *activations as the default.
void AddKernelFlags(CLI::App* sub, std::optional<KernelLevel>* kernels,
                    GemmActivations* activations);

// "5,17,200" -> ids; each must lie in [0, vocab). `flag` names the option in errors.
Result<std::vector<int32_t>> ParseIdList(const std::string& text, int64_t vocab,
                                         const std::string& flag);

// A KV store for one offline sequence (id 0) of up to `max_positions` tokens, with rows kept
// as --kv-cache-dtype says: auto|f32 (exact, the default offline), bf16, fp8_e4m3, fp8_e4m3fnuz
// (per-layer scale 1.0).
Result<std::unique_ptr<KvStore>> MakeOfflineKvStore(const ModelConfig& config,
                                                    const std::string& kv_cache_dtype,
                                                    int64_t max_positions);

// The command as typed (argv[0] reduced to its file name), from /proc/self/cmdline, for
// reports that record how they were made.
std::string CommandLine();

}  // namespace mx::cli
