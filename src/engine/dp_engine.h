// Data parallelism (`--dp M`): M replicas of one model, each its own Engine (engine loop, KV
// pool, radix cache, threads), behind a single Engine that the server holds like any other.
// Submit picks a replica with the DP router (parallel/dp_router.h: round_robin, least_load,
// cache_aware); the returned stream carries the group's own request id, and Abort of that id
// reaches the replica that owns the request. Stats() sums the replicas (counters, gauges,
// speculative decoding) and lists each replica's load in EngineStats::dp_replicas.
//
// A replica whose queue is full (ResourceExhausted) is skipped for the next least loaded one;
// the request is refused only when every replica is full. A replica that has failed
// (Engine::Health not ok: its model runner broke) is out of rotation for good: no request is
// sent to it, and its entry in dp_replicas says healthy = false. The group's Health() is ok
// while one replica is; with none left, Submit and Health return Unavailable naming each
// replica's failure.
//
// Thread-safety: like Engine, every method may be called from any thread.
#pragma once

#include <memory>
#include <vector>

#include "engine/engine.h"
#include "parallel/dp_router.h"

namespace mx {

// Wraps `replicas` (REQUIRES: non-empty, all serving the same model).
std::unique_ptr<Engine> MakeDpEngine(std::vector<std::unique_ptr<Engine>> replicas,
                                     DpRouterOptions router);

// Loads `options.model_dir` `dp_size` times with `options.threads` (0 = one per core) split
// between the replicas and the KV budget split too: with max_total_tokens 0 each replica gets
// mem_fraction / dp_size of free memory (so --dp does not grow the KV total); an explicit
// max_total_tokens is per replica. dp_size 1 is a plain CreateEngine.
// Errors: InvalidArgument (dp_size < 1), ResourceExhausted (dp_size copies of the weights plus
// their KV pools exceed the available memory), and the replicas' own load errors; all name
// --dp.
Result<std::unique_ptr<Engine>> CreateDpEngine(const EngineOptions& options, int dp_size,
                                               DpRouterOptions router);

}  // namespace mx
