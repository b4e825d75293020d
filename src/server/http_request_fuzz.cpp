// libFuzzer target for what a hostile client controls: the request bytes (ParseHttpRequest:
// Beast's parser under the server's limits and head checks) and the JSON body (the nesting
// scan, the parser, and the chat / completions / generate / messages / responses validators), and
// the same bytes as model output through the GLM tool-call parser, cut in two or not. Any
// input must end in a request within the limits or a refusal with its status, never a crash, a hang
// or a recursion as deep as the input. Run through scripts/fuzz.sh (make fuzz).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/anthropic_request.h"
#include "server/http_server.h"
#include "server/request_parse.h"
#include "server/responses_request.h"
#include "server/tool_call_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mx::server::ApiKind;
  mx::server::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_headers = 32;
  limits.max_body_bytes = 4096;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto r = mx::server::ParseHttpRequest(bytes, limits);
  std::string body;
  if (r.status == 0) {
    if (r.request.body.size() > limits.max_body_bytes) std::abort();
    if (r.consumed > size) std::abort();
    body = r.request.body;
  } else if (r.status != -1 && r.status != 400 && r.status != 413 && r.status != 415 &&
             r.status != 431) {
    std::abort();
  } else {
    body = std::string(bytes);  // the bytes as a body of their own
  }
  mx::server::RequestLimits rl;
  rl.max_json_depth = 64;
  nlohmann::ordered_json j;
  if (auto e = mx::server::ParseBody(body, &j, rl.max_json_depth)) {
    if (e->http_status != 400) std::abort();
    return 0;
  }
  mx::server::ResponseStore store({});
  for (ApiKind k : {ApiKind::kChat, ApiKind::kCompletion, ApiKind::kGenerate, ApiKind::kMessages,
                    ApiKind::kResponses}) {
    mx::server::ParsedRequest p;
    mx::server::ResponsesContext ctx;
    std::optional<mx::server::ApiError> e;
    if (k == ApiKind::kChat) e = mx::server::ParseChatRequest(j, rl, &p);
    if (k == ApiKind::kCompletion) e = mx::server::ParseCompletionRequest(j, rl, &p);
    if (k == ApiKind::kGenerate) e = mx::server::ParseGenerateRequest(j, rl, &p);
    if (k == ApiKind::kMessages) e = mx::server::ParseMessagesRequest(j, rl, false, &p);
    if (k == ApiKind::kResponses) e = mx::server::ParseResponsesRequest(j, rl, store, &p, &ctx);
    if (e && (e->http_status < 400 || e->http_status >= 500)) std::abort();
    // The thinking budget under its names is in range, an effort one of the known ones.
    if (!e && (p.thinking_budget < -1 || p.thinking_budget > (1 << 30))) std::abort();
    if (!e && !p.reasoning_effort.empty() && p.reasoning_effort != "low" &&
        p.reasoning_effort != "medium" && p.reasoning_effort != "high" &&
        p.reasoning_effort != "xhigh") {
      std::abort();
    }
  }
  // The same bytes as model output (GLM tool-call markup is model-controlled text): the calls
  // and text do not depend on where the stream cuts it.
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"n":{"type":"integer"},"s":{"type":"string"}}}}}])");
  // Text and calls in order, then the failure counts (a count is reported with the push that
  // settled it, which depends on the cut; only the totals must agree).
  auto run = [&](size_t cut) {
    mx::server::ToolCallParser parser(tools);
    std::string out;
    int64_t unknown = 0, malformed = 0;
    auto add = [&](const mx::server::ToolCallParser::Out& o) {
      out += o.content;
      for (const auto& c : o.calls) out += "\x01" + c.name + "\x02" + c.arguments;
      unknown += o.unknown_tools;
      malformed += o.malformed;
    };
    add(parser.Push(bytes.substr(0, cut)));
    add(parser.Push(bytes.substr(cut)));
    add(parser.Finish());
    return out + "\x03" + std::to_string(unknown) + "," + std::to_string(malformed);
  };
  if (run(0) != run(size / 2)) std::abort();
  return 0;
}
