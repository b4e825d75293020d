#include "eval/datasets.h"

#include <fstream>
#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "eval/extract.h"

namespace mx::eval {
namespace {

using json = nlohmann::json;

// Calls parse(object, where) for every non-blank line; `where` is "file:line".
Status ForEachJsonLine(const std::string& path,
                       const std::function<Status(const json&, const std::string&)>& parse) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open", path);
  std::string line;
  int lineno = 0;
  int records = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return InvalidArgument("{}: not valid JSON", where);
    if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", where);
    MX_RETURN_IF_ERROR(parse(j, where));
    ++records;
  }
  if (f.bad()) return IoError("{}: read failed", path);
  if (records == 0) return InvalidArgument("{}: no records", path);
  return Status::Ok();
}

Result<std::string> NonEmptyString(const json& j, const char* field, const std::string& where) {
  if (!j.contains(field)) return InvalidArgument("{}: missing \"{}\"", where, field);
  const json& v = j[field];
  if (!v.is_string()) return InvalidArgument("{}: \"{}\" must be a string", where, field);
  std::string s = v.get<std::string>();
  if (s.empty()) return InvalidArgument("{}: \"{}\" is empty", where, field);
  return s;
}

// The optional id field (a string or an integer), else "file:line".
std::string IdOf(const json& j, const char* field, const std::string& where) {
  if (j.contains(field)) {
    if (j[field].is_string()) return j[field].get<std::string>();
    if (j[field].is_number_integer()) return std::to_string(j[field].get<int64_t>());
  }
  return where;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Result<std::vector<QaExample>> LoadQaJsonl(const std::string& path) {
  std::vector<QaExample> out;
  Status st = ForEachJsonLine(path, [&](const json& j, const std::string& where) -> Status {
    QaExample e;
    MX_ASSIGN_OR_RETURN(e.question, NonEmptyString(j, "question", where));
    MX_ASSIGN_OR_RETURN(e.answer, NonEmptyString(j, "answer", where));
    e.gold = NormalizeNumber(ExtractNumber(e.answer));
    if (e.gold.empty()) return InvalidArgument("{}: \"answer\" holds no number", where);
    e.id = IdOf(j, "key", where);
    out.push_back(std::move(e));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<McqExample>> LoadMcqJsonl(const std::string& path) {
  std::vector<McqExample> out;
  Status st = ForEachJsonLine(path, [&](const json& j, const std::string& where) -> Status {
    McqExample e;
    MX_ASSIGN_OR_RETURN(e.question, NonEmptyString(j, "question", where));
    if (!j.contains("choices") || !j["choices"].is_array()) {
      return InvalidArgument("{}: \"choices\" must be an array of strings", where);
    }
    const json& choices = j["choices"];
    if (choices.size() < 2 || choices.size() > 26) {
      return InvalidArgument("{}: \"choices\" has {} entries, expected 2 to 26", where,
                             choices.size());
    }
    for (size_t k = 0; k < choices.size(); ++k) {
      if (!choices[k].is_string() || choices[k].get<std::string>().empty()) {
        return InvalidArgument("{}: choices[{}] must be a non-empty string", where, k);
      }
      e.choices.push_back(choices[k].get<std::string>());
    }
    MX_ASSIGN_OR_RETURN(std::string letter, NonEmptyString(j, "answer", where));
    const int n = static_cast<int>(e.choices.size());
    if (letter.size() != 1 || letter[0] < 'A' || letter[0] >= 'A' + n) {
      return InvalidArgument("{}: \"answer\" is \"{}\", expected one letter A..{}", where, letter,
                             static_cast<char>('A' + n - 1));
    }
    e.answer = letter[0] - 'A';
    e.id = IdOf(j, "id", where);
    out.push_back(std::move(e));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

std::vector<int> ShuffledChoices(int n, uint64_t seed, int example_index) {
  std::vector<int> order(n);
  for (int k = 0; k < n; ++k) order[k] = k;
  uint64_t state = seed * 0x100000001B3ull ^ static_cast<uint64_t>(example_index);
  SplitMix64(state);
  for (int k = n - 1; k > 0; --k) {
    const int r = static_cast<int>(SplitMix64(state) % static_cast<uint64_t>(k + 1));
    std::swap(order[k], order[r]);
  }
  return order;
}

}  // namespace mx::eval
