// libFuzzer target for what a hostile client controls: the request bytes (ParseHttpRequest:
// Beast's parser under the server's limits and head checks) and the JSON body (the nesting
// scan, the parser, and the chat / completions / generate / messages / responses validators). Any
// input must end in a request within the limits or a refusal with its status, never a crash, a hang
// or a recursion as deep as the input. Run through scripts/fuzz.sh (make fuzz).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/anthropic_request.h"
#include "server/http_server.h"
#include "server/request_parse.h"
#include "server/responses_request.h"

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
  }
  return 0;
}
