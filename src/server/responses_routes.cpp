// The stored responses of the Responses API: GET /v1/responses/{id},
// GET /v1/responses/{id}/input_items (limit, order, after) and DELETE /v1/responses/{id}. An id
// that is not stored (never, store: false, evicted or deleted) is a 404 naming it.
#include <charconv>

#include <fmt/format.h>

#include "server/responses_request.h"
#include "server/server_impl.h"

namespace mx::server {
namespace {

using Json = nlohmann::ordered_json;

// The value of `name` in the target's query string ("" when absent). No percent-decoding: the
// values read here (numbers, asc / desc, ids) have no reserved characters.
std::string QueryParam(const std::string& target, const std::string& name) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == name)
      return eq == std::string::npos ? "" : std::string(kv.substr(eq + 1));
    if (amp == std::string::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return "";
}

// input_items: a page of the items, newest first unless order=asc, after the item `after`.
std::optional<ApiError> ItemsPage(const Json& items, const std::string& target, Json* out) {
  int limit = 20;
  if (std::string l = QueryParam(target, "limit"); !l.empty()) {
    auto [end, ec] = std::from_chars(l.data(), l.data() + l.size(), limit);
    if (ec != std::errc() || end != l.data() + l.size() || limit < 1 || limit > 100) {
      return BadRequest("limit",
                        fmt::format("'limit' must be an integer in [1, 100], got '{}'", l));
    }
  }
  const std::string order = QueryParam(target, "order");
  if (!order.empty() && order != "asc" && order != "desc") {
    return BadRequest("order", fmt::format("'order' must be asc or desc, got '{}'", order));
  }
  std::vector<const Json*> seq;
  for (const Json& it : items) seq.push_back(&it);
  if (order != "asc") std::reverse(seq.begin(), seq.end());
  size_t start = 0;
  if (std::string after = QueryParam(target, "after"); !after.empty()) {
    while (start < seq.size() && (*seq[start])["id"] != after) ++start;
    if (start == seq.size()) {
      return BadRequest("after", fmt::format("no input item '{}' in this response", after));
    }
    ++start;
  }
  Json data = Json::array();
  for (size_t i = start; i < seq.size() && data.size() < static_cast<size_t>(limit); ++i) {
    data.push_back(*seq[i]);
  }
  const bool more = start + data.size() < seq.size();
  *out = Json{{"object", "list"},
              {"data", data},
              {"first_id", data.empty() ? Json() : data.front()["id"]},
              {"last_id", data.empty() ? Json() : data.back()["id"]},
              {"has_more", more}};
  return std::nullopt;
}

}  // namespace

void Server::Impl::HandleStoredResponse(HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  std::string id = req.path.substr(std::string_view("/v1/responses/").size());
  bool items = false;
  if (id.ends_with("/input_items")) {
    id.resize(id.size() - std::string_view("/input_items").size());
    items = true;
  }
  if (id.empty() || id.find('/') != std::string::npos || (items && req.method != "GET")) {
    return SendError(
        ex, NotFoundError("", fmt::format("no route {} {}", req.method, req.path), "not_found"));
  }
  if (req.method == "DELETE") {
    if (!responses.Delete(id)) return SendError(ex, ResponseNotFound(id));
    return SendJson(ex, Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  }
  auto stored = responses.Get(id);
  if (stored == nullptr) return SendError(ex, ResponseNotFound(id));
  if (!items) return SendJson(ex, stored->response);
  Json page;
  if (auto e = ItemsPage(stored->input_items, req.target, &page)) return SendError(ex, *e);
  SendJson(ex, page);
}

}  // namespace mx::server
