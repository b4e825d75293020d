// Response JSON builders.
#include "server/openai_format.h"

#include "server/api_error.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

std::string SseEvent(const Json& j) { return "data: " + Dump(j) + "\n\n"; }

std::string NamedSseEvent(const std::string& name, const Json& data) {
  return "event: " + name + "\ndata: " + Dump(data) + "\n\n";
}

Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
               int64_t reasoning_tokens) {
  Json u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  u["prompt_tokens_details"] = Json{{"cached_tokens", cached_tokens}};
  u["completion_tokens_details"] = Json{{"reasoning_tokens", reasoning_tokens}};
  return u;
}

namespace {

std::string TokenString(const tok::Tokenizer& t, int32_t id) {
  const int32_t ids[1] = {id};
  return t.Decode(ids);
}

Json Bytes(const tok::Tokenizer& t, int32_t id) {
  Json b = Json::array();
  for (unsigned char c : t.TokenBytes(id)) b.push_back(static_cast<int>(c));
  return b;
}

Json Logprob(float lp) { return std::isfinite(lp) ? Json(lp) : Json(-9999.0); }

}  // namespace

Json ChatLogprobs(const tok::Tokenizer& tokenizer, const std::vector<LogprobEntry>& entries) {
  Json content = Json::array();
  for (const auto& e : entries) {
    Json item;
    item["token"] = TokenString(tokenizer, e.token);
    item["logprob"] = Logprob(e.logprob);
    item["bytes"] = Bytes(tokenizer, e.token);
    Json top = Json::array();
    for (const auto& t : e.top) {
      top.push_back(Json{{"token", TokenString(tokenizer, t.token)},
                         {"logprob", Logprob(t.logprob)},
                         {"bytes", Bytes(tokenizer, t.token)}});
    }
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return Json{{"content", std::move(content)}};
}

Json CompletionLogprobs(const tok::Tokenizer& tokenizer, const std::vector<LogprobEntry>& entries,
                        int64_t* offset) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offs = Json::array();
  for (const auto& e : entries) {
    std::string s = TokenString(tokenizer, e.token);
    tokens.push_back(s);
    lps.push_back(Logprob(e.logprob));
    Json top = Json::object();
    for (const auto& t : e.top) top[TokenString(tokenizer, t.token)] = Logprob(t.logprob);
    tops.push_back(e.top.empty() ? Json() : std::move(top));
    offs.push_back(*offset);
    *offset += static_cast<int64_t>(s.size());
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offs)}};
}

Json ToolCallsJson(const std::vector<ToolCallDelta>& calls, bool streaming) {
  Json out = Json::array();
  for (const auto& c : calls) {
    Json j;
    if (streaming) j["index"] = c.index;
    j["id"] = c.id;
    j["type"] = "function";
    j["function"] = Json{{"name", c.name}, {"arguments", c.arguments}};
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace mx::server
