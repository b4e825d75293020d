#include "loadgen/sessions.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "loadgen/html_chart.h"
#include "loadgen/prompts.h"
#include "loadgen/report.h"

namespace mx::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Words of a coding agent's vocabulary, for text without a tokenizer (one unit each).
constexpr const char* kWords[] = {
    "src",    "int",    "return", "const",  "auto",   "void",    "file",   "line",
    "error",  "test",   "build",  "value",  "index",  "buffer",  "string", "vector",
    "config", "server", "token",  "cache",  "model",  "thread",  "status", "result",
    "update", "import", "class",  "struct", "module", "path",    "size",   "check",
    "read",   "write",  "parse",  "format", "fix",    "warning", "kernel", "request",
};

// Synthetic text and its length in the client's units.
class TextSource {
 public:
  explicit TextSource(const tok::Tokenizer* t) : tok_(t) {
    if (t != nullptr) ids_ = CleanWordIds(*t);
  }
  bool tokenizer_units() const { return tok_ != nullptr && !ids_.empty(); }

  std::string Words(int n, std::mt19937_64& rng) const {
    if (tokenizer_units()) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      std::uniform_int_distribution<size_t> pick(0, ids_.size() - 1);
      for (int32_t& id : ids) id = ids_[pick(rng)];
      return tok_->Decode(ids);
    }
    std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
    std::string s;
    for (int i = 0; i < n; ++i) {
      if (i > 0) s += ' ';
      s += kWords[pick(rng)];
    }
    return s;
  }

  int64_t Count(const std::string& text) const {
    if (tokenizer_units()) return static_cast<int64_t>(tok_->Encode(text, false).size());
    int64_t n = 0;
    bool in_word = false;
    for (char c : text) {
      const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
      if (!space && !in_word) ++n;
      in_word = !space;
    }
    return n;
  }

 private:
  const tok::Tokenizer* tok_;
  std::vector<int32_t> ids_;
};

json AssistantBlocks(Endpoint api, const Message& m) {
  if (api == Endpoint::kMessages) {
    json blocks = json::array();
    if (!m.reasoning.empty()) {
      blocks.push_back({{"type", "thinking"}, {"thinking", m.reasoning}, {"signature", ""}});
    }
    if (!m.text.empty()) blocks.push_back({{"type", "text"}, {"text", m.text}});
    if (blocks.empty()) return "";
    return blocks;
  }
  return nullptr;
}

int Draw(int len, double ratio, std::mt19937_64& rng) {
  const int lo = std::max(1, static_cast<int>(std::floor(len * ratio)));
  if (lo >= len) return len;
  return std::uniform_int_distribution<int>(lo, len)(rng);
}

}  // namespace

Status ValidateSpec(const SessionSpec& s) {
  auto range = [](const char* flag, int v, int lo, int hi) -> Status {
    if (v < lo || v > hi) return InvalidArgument("{} {}: expected {} to {}", flag, v, lo, hi);
    return Status::Ok();
  };
  MX_RETURN_IF_ERROR(range("--sessions", s.sessions, 1, kMaxSessions));
  MX_RETURN_IF_ERROR(range("--turns", s.turns, 1, kMaxTurns));
  MX_RETURN_IF_ERROR(range("--system-len", s.system_len, 0, kMaxMessageLen));
  MX_RETURN_IF_ERROR(range("--first-user-len", s.first_user_len, 1, kMaxMessageLen));
  MX_RETURN_IF_ERROR(range("--tool-result-len", s.tool_result_len, 1, kMaxMessageLen));
  MX_RETURN_IF_ERROR(range("--output-len", s.output_len, 1, kMaxMessageLen));
  if (!(s.range_ratio > 0 && s.range_ratio <= 1)) {
    return InvalidArgument("--range-ratio {}: expected a value in (0, 1]", s.range_ratio);
  }
  if (!(s.think_time_s >= 0 && s.think_time_s <= 3600)) {
    return InvalidArgument("--think-time-ms {}: expected 0 to 3600000", s.think_time_s * 1e3);
  }
  return Status::Ok();
}

std::string SessionRequestBody(Endpoint api, const std::string& model, const std::string& system,
                               const std::vector<Message>& conversation, int max_tokens,
                               bool ignore_eos) {
  json j;
  j["model"] = model;
  json list = json::array();
  if (api == Endpoint::kChat && !system.empty()) {
    list.push_back({{"role", "system"}, {"content", system}});
  }
  for (const Message& m : conversation) {
    if (m.role != "assistant") {
      list.push_back({{"role", "user"}, {"content", m.text}});
    } else if (api == Endpoint::kChat) {
      json a = {{"role", "assistant"}, {"content", m.text}};
      if (!m.reasoning.empty()) a["reasoning_content"] = m.reasoning;
      list.push_back(a);
    } else if (api == Endpoint::kMessages) {
      list.push_back({{"role", "assistant"}, {"content", AssistantBlocks(api, m)}});
    } else {
      if (!m.reasoning.empty()) {
        list.push_back(
            {{"type", "reasoning"},
             {"summary", json::array()},
             {"content", json::array({{{"type", "reasoning_text"}, {"text", m.reasoning}}})}});
      }
      list.push_back({{"type", "message"},
                      {"role", "assistant"},
                      {"content", json::array({{{"type", "output_text"}, {"text", m.text}}})}});
    }
  }
  if (api == Endpoint::kChat) {
    j["messages"] = list;
    j["max_tokens"] = max_tokens;
    j["max_completion_tokens"] = max_tokens;
    j["stream_options"] = {{"include_usage", true}};
    if (ignore_eos) j["ignore_eos"] = true;
  } else if (api == Endpoint::kMessages) {
    if (!system.empty()) j["system"] = system;
    j["messages"] = list;
    j["max_tokens"] = max_tokens;
  } else {
    if (!system.empty()) j["instructions"] = system;
    j["input"] = list;
    j["max_output_tokens"] = max_tokens;
    j["store"] = false;
  }
  j["temperature"] = 0.0;
  j["stream"] = true;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<SessionsRun> RunSessions(const SessionsConfig& c) {
  MX_RETURN_IF_ERROR(ValidateSpec(c.spec));
  if (c.client.endpoint != Endpoint::kChat && c.client.endpoint != Endpoint::kMessages &&
      c.client.endpoint != Endpoint::kResponses) {
    return InvalidArgument("bench sessions: the API must be chat, messages or responses");
  }
  const SessionSpec& s = c.spec;
  const TextSource text(c.tokenizer);
  ClientOptions client = c.client;
  client.keep_text = true;
  client.max_concurrency = 0;
  client.progress = nullptr;
  client.ignore_eos = false;  // the body says it

  std::mt19937_64 sys_rng(s.seed * 0x9E3779B97F4A7C15ull + 17);
  const std::string system = text.Words(s.system_len, sys_rng);
  const int64_t system_units = text.Count(system);

  SessionsRun run;
  run.tokenizer_units = text.tokenizer_units();
  if (s.warm_system) {
    BenchPrompt warm;
    warm.body = SessionRequestBody(client.endpoint, client.model, system, {{"user", "hello", ""}},
                                   1, false);
    RunOutput w = RunRequests(client, {&warm}, {0.0});
    if (!w.records[0].success && w.records[0].error_kind != "no_output") {
      return Status(StatusCode::kUnavailable,
                    fmt::format("bench sessions: the warm-up request failed ({}: {})",
                                w.records[0].error_kind, w.records[0].error));
    }
  }

  run.sessions.resize(static_cast<size_t>(s.sessions));
  std::vector<std::vector<TurnRecord>> per_session(static_cast<size_t>(s.sessions));
  std::mutex mu;
  int turns_done = 0, sessions_done = 0, failed = 0;
  const int turns_total = s.sessions * s.turns;
  const Clock::time_point t0 = Clock::now();
  auto now_s = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  auto session = [&](int si) {
    std::mt19937_64 rng(s.seed * 1000003ull + static_cast<uint64_t>(si) * 7919ull + 1);
    SessionRecord& sr = run.sessions[static_cast<size_t>(si)];
    std::vector<Message> conv;
    conv.push_back({"user", text.Words(s.first_user_len, rng), ""});
    int64_t units = system_units + text.Count(conv.back().text);
    int64_t reused = s.warm_system ? system_units : 0;
    for (int t = 0; t < s.turns; ++t) {
      if (t > 0) {
        if (s.think_time_s > 0) {
          std::this_thread::sleep_for(std::chrono::duration<double>(s.think_time_s));
        }
        conv.push_back({"user", text.Words(Draw(s.tool_result_len, s.range_ratio, rng), rng), ""});
        units += text.Count(conv.back().text);
      }
      BenchPrompt p;
      p.body = SessionRequestBody(client.endpoint, client.model, system, conv, s.output_len,
                                  s.ignore_eos && client.endpoint == Endpoint::kChat);
      p.prompt_len = static_cast<int>(units);
      const double sent_s = now_s();
      if (t == 0) sr.start_s = sent_s;
      RunOutput out = RunRequests(client, {&p}, {0.0});
      TurnRecord tr;
      tr.session = si;
      tr.turn = t;
      tr.rec = std::move(out.records[0]);
      tr.rec.arrival_s = sent_s;
      tr.rec.start_s += sent_s;
      if (s.accept_empty_replies && !tr.rec.success && tr.rec.error_kind == "no_output") {
        tr.empty_reply = true;
        tr.rec.success = true;
        tr.rec.error_kind.clear();
        tr.rec.error.clear();
        tr.rec.ttft_s = tr.rec.latency_s;  // the first the user saw of it was its end
      }
      tr.prompt_units = units;
      tr.reused_units = reused;
      const bool ok = tr.rec.success;
      Message reply{"assistant", tr.rec.generated_content, tr.rec.generated_reasoning};
      tr.reply_units = text.Count(reply.reasoning) + text.Count(reply.text);
      sr.end_s = tr.rec.end_s();
      if (!ok) {
        sr.error = tr.rec.error_kind + ": " + tr.rec.error;
      } else {
        sr.turns_done = t + 1;
      }
      const int64_t reply_units = tr.reply_units;
      per_session[static_cast<size_t>(si)].push_back(std::move(tr));
      {
        std::lock_guard<std::mutex> l(mu);
        ++turns_done;
        if (!ok) ++failed;
        if (!ok || t + 1 == s.turns) ++sessions_done;
        if (c.progress) c.progress(turns_done, turns_total, sessions_done, failed, now_s());
      }
      if (!ok) return;
      // The next turn repeats everything this one sent and received.
      reused = units + reply_units;
      units += reply_units;
      conv.push_back(std::move(reply));
    }
    sr.completed = true;
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(s.sessions));
  for (int si = 0; si < s.sessions; ++si) threads.emplace_back(session, si);
  for (std::thread& th : threads) th.join();
  for (auto& v : per_session) {
    for (TurnRecord& tr : v) run.turns.push_back(std::move(tr));
  }
  for (const SessionRecord& sr : run.sessions) run.duration_s = std::max(run.duration_s, sr.end_s);
  return run;
}

namespace {

TurnStats Stats(const SessionsRun& run, int turn) {
  TurnStats st;
  st.turn = turn;
  std::vector<RequestRecord> recs;
  double first = 1e300, last = 0, e2e = 0, content_ttft = 0;
  int64_t out = 0;
  int content_turns = 0;
  for (const TurnRecord& tr : run.turns) {
    if (turn >= 0 && tr.turn != turn) continue;
    recs.push_back(tr.rec);
    first = std::min(first, tr.rec.start_s);
    last = std::max(last, tr.rec.end_s());
    if (!tr.rec.success) continue;
    st.prompt_units += tr.prompt_units;
    st.reused_units += tr.reused_units;
    out += tr.rec.output_len;
    e2e += tr.rec.latency_s;
    if (tr.empty_reply) {
      ++st.empty_replies;
    } else {
      ++content_turns;
      content_ttft += tr.rec.ttft_s;
    }
  }
  const double span = turn < 0 ? run.duration_s : (recs.empty() ? 0 : last - first);
  st.metrics = ComputeMetrics(recs, span);
  if (st.prompt_units > 0) {
    st.expected_hit_pct =
        100.0 * static_cast<double>(st.reused_units) / static_cast<double>(st.prompt_units);
  }
  if (e2e > 0) st.stream_output_tok_s = static_cast<double>(out) / e2e;
  if (content_turns > 0) st.mean_ttft_with_content_ms = 1e3 * content_ttft / content_turns;
  return st;
}

std::string ApiName(const SessionsReport& r) { return r.api.empty() ? "chat" : r.api; }

json TurnJson(const TurnStats& t) {
  const BenchMetrics& m = t.metrics;
  json j = {{"requests", m.num_prompts},
            {"completed", m.completed},
            {"failed", m.failed},
            {"duration", m.duration_s},
            {"total_input_tokens", m.total_input_tokens},
            {"total_output_tokens", m.total_output_tokens},
            {"mean_ttft_ms", m.ttft_ms.mean},
            {"median_ttft_ms", m.ttft_ms.median},
            {"p95_ttft_ms", m.ttft_ms.p95},
            {"mean_itl_ms", m.itl_ms.mean},
            {"median_itl_ms", m.itl_ms.median},
            {"p99_itl_ms", m.itl_ms.p99},
            {"median_e2e_latency_ms", m.e2e_latency_ms.median},
            {"output_throughput", m.output_throughput},
            {"stream_output_tok_s", t.stream_output_tok_s},
            {"prompt_units", t.prompt_units},
            {"reused_units", t.reused_units},
            {"expected_cache_hit_pct", t.expected_hit_pct},
            {"empty_replies", t.empty_replies},
            {"mean_ttft_with_content_ms", t.mean_ttft_with_content_ms}};
  if (t.turn >= 0) j["turn"] = t.turn + 1;
  if (m.cache_reported) {
    j["cache_report"] = {{"total_prompt_tokens", m.total_prompt_tokens},
                         {"total_cached_tokens", m.total_cached_tokens},
                         {"cache_hit_rate_pct", m.cache_hit_rate_pct}};
  }
  return j;
}

std::vector<std::string> TurnCells(const std::string& label, const TurnStats& t) {
  const BenchMetrics& m = t.metrics;
  return {
      label,
      fmt::format("{}/{}", m.completed, m.num_prompts),
      fmt::format("{:.0f}",
                  m.completed > 0 ? static_cast<double>(m.total_input_tokens) / m.completed : 0.0),
      fmt::format("{:.1f}", m.ttft_ms.median),
      fmt::format("{:.1f}", m.ttft_ms.p95),
      fmt::format("{:.2f}", m.itl_ms.median),
      fmt::format("{:.2f}", m.itl_ms.p99),
      m.cache_reported ? fmt::format("{:.1f}", m.cache_hit_rate_pct) : "-",
      fmt::format("{:.1f}", t.expected_hit_pct),
      fmt::format("{:.1f}", t.stream_output_tok_s)};
}

std::vector<std::vector<std::string>> TurnRows(const SessionsReport& r) {
  std::vector<std::vector<std::string>> rows = {
      {"turn", "ok", "mean prompt tok", "TTFT p50 (ms)", "TTFT p95 (ms)", "ITL p50 (ms)",
       "ITL p99 (ms)", "cache hit % (usage)", "expected hit %", "stream out tok/s"}};
  for (const TurnStats& t : r.per_turn) rows.push_back(TurnCells(std::to_string(t.turn + 1), t));
  rows.push_back(TurnCells("all", r.overall));
  return rows;
}

}  // namespace

SessionsReport SummarizeSessions(const SessionsRun& run) {
  SessionsReport r;
  r.tokenizer_units = run.tokenizer_units;
  int turns = 0;
  for (const TurnRecord& tr : run.turns) turns = std::max(turns, tr.turn + 1);
  for (int t = 0; t < turns; ++t) r.per_turn.push_back(Stats(run, t));
  r.overall = Stats(run, -1);
  std::vector<double> completion;
  for (const SessionRecord& s : run.sessions) {
    if (s.completed) {
      ++r.completed_sessions;
      completion.push_back(s.end_s - s.start_s);
    } else {
      ++r.failed_sessions;
    }
  }
  r.errors_by_kind = r.overall.metrics.errors_by_kind;
  r.completion_s = Summarize(completion);
  return r;
}

json SessionsJson(const SessionsReport& r) {
  const SessionSpec& s = r.spec;
  json j;
  j["date"] = RunDate();
  j["title"] = r.title;
  j["command"] = r.command;
  j["api"] = ApiName(r);
  j["base_url"] = r.base_url;
  j["model_id"] = r.model;
  j["sessions"] = s.sessions;
  j["turns"] = s.turns;
  j["system_len"] = s.system_len;
  j["first_user_len"] = s.first_user_len;
  j["tool_result_len"] = s.tool_result_len;
  j["range_ratio"] = s.range_ratio;
  j["output_len"] = s.output_len;
  j["think_time_ms"] = s.think_time_s * 1e3;
  j["ignore_eos"] = s.ignore_eos;
  j["accept_empty_replies"] = s.accept_empty_replies;
  j["seed"] = s.seed;
  j["units"] = r.tokenizer_units ? "tokens" : "words";
  j["completed_sessions"] = r.completed_sessions;
  j["failed_sessions"] = r.failed_sessions;
  j["errors_by_kind"] = r.errors_by_kind;
  j["mean_session_completion_s"] = r.completion_s.mean;
  j["median_session_completion_s"] = r.completion_s.median;
  j["p95_session_completion_s"] = r.completion_s.p95;
  j["overall"] = TurnJson(r.overall);
  json turns = json::array();
  for (const TurnStats& t : r.per_turn) turns.push_back(TurnJson(t));
  j["per_turn"] = turns;
  j["mean_turn_ttft_ms"] = r.overall.metrics.ttft_ms.mean;
  j["empty_replies"] = r.overall.empty_replies;
  j["mean_turn_ttft_ms_with_content"] = r.overall.mean_ttft_with_content_ms;
  return j;
}

std::string SessionsTable(const SessionsReport& r) {
  std::string s = AlignedColumns(TurnRows(r));
  const BenchMetrics& m = r.overall.metrics;
  s += fmt::format(
      "sessions: {} completed, {} failed; completion mean {:.2f} s, p50 {:.2f} s, p95 {:.2f} s\n"
      "turns: {} ok of {}; mean TTFT {:.1f} ms; output {:.1f} tok/s in all, {:.1f} tok/s per "
      "stream; duration {:.2f} s\n",
      r.completed_sessions, r.failed_sessions, r.completion_s.mean, r.completion_s.median,
      r.completion_s.p95, m.completed, m.num_prompts, m.ttft_ms.mean, m.output_throughput,
      r.overall.stream_output_tok_s, m.duration_s);
  if (r.overall.empty_replies > 0) {
    s += fmt::format(
        "  empty replies: {} (completed, sent back empty, TTFT = E2E); mean TTFT of the turns "
        "with content {:.1f} ms\n",
        r.overall.empty_replies, r.overall.mean_ttft_with_content_ms);
  }
  for (const auto& [kind, n] : r.errors_by_kind)
    s += fmt::format("  failed turns {}: {}\n", kind, n);
  s += fmt::format("expected hit % counts {} of the message texts (no template tokens)\n",
                   r.tokenizer_units ? "tokenizer tokens" : "whitespace words");
  return s;
}

std::string SessionsHtml(const SessionsReport& r) {
  std::vector<double> x, p50, p95, hit, expected, prompt;
  bool cache = false;
  for (const TurnStats& t : r.per_turn) {
    const BenchMetrics& m = t.metrics;
    x.push_back(t.turn + 1);
    p50.push_back(m.ttft_ms.median);
    p95.push_back(m.ttft_ms.p95);
    hit.push_back(m.cache_hit_rate_pct);
    cache = cache || m.cache_reported;
    expected.push_back(t.expected_hit_pct);
    prompt.push_back(m.completed > 0 ? static_cast<double>(m.total_input_tokens) / m.completed : 0);
  }
  std::string h = HtmlHead(r.title);
  h += "<h2>" + Escape(r.title) + "</h2>\n";
  if (!r.command.empty()) h += "<p><code>" + Escape(r.command) + "</code></p>\n";
  h += fmt::format(
      "<p><b>{} of {} sessions completed</b> ({} turns each, {} API): session completion mean "
      "{:.2f} s, p95 {:.2f} s; mean per-turn TTFT {:.1f} ms; {:.1f} output tok/s per stream.</p>\n",
      r.completed_sessions, r.completed_sessions + r.failed_sessions, r.spec.turns,
      Escape(ApiName(r)), r.completion_s.mean, r.completion_s.p95, r.overall.metrics.ttft_ms.mean,
      r.overall.stream_output_tok_s);
  if (r.overall.empty_replies > 0) {
    h += fmt::format(
        "<p>{} turns got an empty reply (completed, sent back empty, TTFT = E2E); mean TTFT of "
        "the turns with content {:.1f} ms.</p>\n",
        r.overall.empty_replies, r.overall.mean_ttft_with_content_ms);
  }
  h += "<div class='charts'>\n";
  h += LineChart("TTFT per turn", "turn", "TTFT (ms)", x,
                 {{"TTFT p50", "#1f77b4", p50, false}, {"TTFT p95", "#9467bd", p95, true}}, 0, "",
                 -1, "");
  std::vector<Series> hits = {{"expected (from the prompts)", "#2a2", expected, true}};
  if (cache) hits.insert(hits.begin(), Series{"server usage", "#ff7f0e", hit, false});
  h += LineChart("Prefix-cache hits per turn", "turn", "% of the prompt", x, hits, 0, "", -1, "");
  h += LineChart("Prompt per turn", "turn", "mean prompt tokens (usage)", x,
                 {{"prompt tokens", "#1f77b4", prompt, false}}, 0, "", -1, "");
  h += "</div>\n";
  h += HtmlTable(TurnRows(r), -1);
  h += "</body></html>\n";
  return h;
}

}  // namespace mx::loadgen
