// A fixed generation for the ApiOutput tests: reasoning in two deltas (the second with text),
// then a tool call that ends it, pushed through an output as one stream.
#pragma once

#include <string>

#include "server/api_output.h"

namespace mx::server {

struct FixedGeneration {
  ChoiceDelta total;
  GenerationResult result;
  std::string sse;  // every event the stream sent, StreamStart to StreamEnd
};

// Deltas: {reasoning "think"}, {reasoning " more", content "Hi"}, {tool call call_abc add
// {"a":1}, finish tool_calls}; 20 prompt tokens (16 cached), 7 generated.
inline FixedGeneration RunFixedGeneration(ApiOutput& out) {
  FixedGeneration g;
  ChoiceDelta a;
  a.reasoning = "think";
  ChoiceDelta b;
  b.reasoning = " more";
  b.content = "Hi";
  ChoiceDelta c;
  c.tool_calls.push_back({0, "call_abc", "add", R"({"a":1})"});
  c.finish_reason = "tool_calls";
  g.sse = out.StreamStart();
  for (const ChoiceDelta* d : {&a, &b, &c}) {
    g.sse += out.Delta(*d);
    g.total.Append(*d);
  }
  g.result.prompt_tokens = 20;
  g.result.cached_tokens = 16;
  g.result.completion_tokens = 7;
  g.result.total = &g.total;
  out.Finish(g.result);
  g.sse += out.StreamEnd(g.result);
  return g;
}

}  // namespace mx::server
