// A small JSON Schema validator for the tests, written from the specification and sharing
// nothing with the grammar compiler: the grammar's outputs are checked against it. It follows
// JSON Schema's own meaning where the compiler is stricter (additionalProperties defaults to
// true, `pattern` is a search, oneOf needs exactly one match), so a grammar that lets through
// anything the schema forbids fails here. Formats are checked by hand (calendar included).
#pragma once

#include <cmath>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace mx::grammar::testing {

using Json = nlohmann::ordered_json;

class SchemaValidator {
 public:
  explicit SchemaValidator(const Json& root) : root_(root) {}

  // "" when valid, else the first reason it is not.
  std::string Check(const Json& v) const { return Check(v, root_, 0); }

 private:
  static bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
  static bool Digits(const std::string& s, size_t at, size_t n) {
    if (at + n > s.size()) return false;
    for (size_t k = 0; k < n; ++k) {
      if (s[at + k] < '0' || s[at + k] > '9') return false;
    }
    return true;
  }
  static int Num(const std::string& s, size_t at, size_t n) { return std::stoi(s.substr(at, n)); }
  static bool Date(const std::string& s) {
    if (s.size() != 10 || !Digits(s, 0, 4) || s[4] != '-' || !Digits(s, 5, 2) || s[7] != '-' ||
        !Digits(s, 8, 2)) {
      return false;
    }
    const int y = Num(s, 0, 4), m = Num(s, 5, 2), d = Num(s, 8, 2);
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1) return false;
    return d <= kDays[m - 1] + (m == 2 && IsLeap(y) ? 1 : 0);
  }
  static bool Time(const std::string& s) {
    if (s.size() < 9 || !Digits(s, 0, 2) || s[2] != ':' || !Digits(s, 3, 2) || s[5] != ':' ||
        !Digits(s, 6, 2)) {
      return false;
    }
    if (Num(s, 0, 2) > 23 || Num(s, 3, 2) > 59 || Num(s, 6, 2) > 60) return false;
    size_t i = 8;
    if (s[i] == '.') {
      size_t j = i + 1;
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      if (j == i + 1) return false;
      i = j;
    }
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) return i + 1 == s.size();
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      return s.size() == i + 6 && Digits(s, i + 1, 2) && s[i + 3] == ':' && Digits(s, i + 4, 2) &&
             Num(s, i + 1, 2) <= 23 && Num(s, i + 4, 2) <= 59;
    }
    return false;
  }
  static bool Format(const std::string& f, const std::string& s) {
    if (f == "date") return Date(s);
    if (f == "time") return Time(s);
    if (f == "date-time") {
      return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && Date(s.substr(0, 10)) &&
             Time(s.substr(11));
    }
    if (f == "uuid") {
      if (s.size() != 36) return false;
      for (size_t i = 0; i < 36; ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (s[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
      }
      return true;
    }
    if (f == "email") {
      const size_t at = s.find('@');
      return at != std::string::npos && at > 0 && at + 1 < s.size() &&
             s.find('@', at + 1) == std::string::npos && s.find('.', at) != std::string::npos &&
             s.back() != '.';
    }
    return true;  // unknown formats are annotations
  }
  static size_t CodePoints(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  static bool TypeIs(const Json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") {
      return v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    }
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  std::string Check(const Json& v, const Json& s, int depth) const {
    if (depth > 200) return "too deep";
    if (s.is_boolean()) return s.get<bool>() ? "" : "false schema";
    if (s.contains("$ref")) {
      const std::string r = s["$ref"].get<std::string>();
      return Check(v, root_.at(Json::json_pointer(r.substr(1))), depth + 1);
    }
    if (s.contains("type")) {
      const Json& t = s["type"];
      bool ok = false;
      if (t.is_string()) ok = TypeIs(v, t.get<std::string>());
      for (const Json& x : t.is_array() ? t : Json::array())
        ok = ok || TypeIs(v, x.get<std::string>());
      if (!ok) return "type " + t.dump() + " vs " + v.dump();
    }
    if (s.contains("const") && !(v == s["const"])) return "const";
    if (s.contains("enum")) {
      bool ok = false;
      for (const Json& e : s["enum"]) ok = ok || e == v;
      if (!ok) return "enum";
    }
    for (const char* k : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(k)) continue;
      int n = 0;
      for (const Json& sub : s[k]) n += Check(v, sub, depth + 1).empty();
      const std::string_view kk = k;
      if (kk == "anyOf" && n == 0) return "anyOf";
      if (kk == "oneOf" && n != 1) return "oneOf matched " + std::to_string(n);
      if (kk == "allOf" && n != static_cast<int>(s[k].size())) return "allOf";
    }
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      if (s.contains("minLength") && CodePoints(str) < s["minLength"].get<size_t>())
        return "minLength";
      if (s.contains("maxLength") && CodePoints(str) > s["maxLength"].get<size_t>())
        return "maxLength";
      if (s.contains("pattern") &&
          !std::regex_search(str,
                             std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript))) {
        return "pattern";
      }
      if (s.contains("format") && !Format(s["format"].get<std::string>(), str)) return "format";
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return "minimum";
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return "maximum";
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
        return "exclusiveMinimum";
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
        return "exclusiveMaximum";
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "minItems";
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "maxItems";
      if (s.contains("items")) {
        for (const Json& x : v) {
          std::string e = Check(x, s["items"], depth + 1);
          if (!e.empty()) return "items: " + e;
        }
      }
    }
    if (v.is_object()) {
      const Json none = Json::object();
      const Json& props = s.contains("properties") ? s["properties"] : none;
      for (const Json& r : s.contains("required") ? s["required"] : Json::array()) {
        if (!v.contains(r.get<std::string>())) return "required " + r.get<std::string>();
      }
      for (const auto& [k, x] : v.items()) {
        if (props.contains(k)) {
          std::string e = Check(x, props[k], depth + 1);
          if (!e.empty()) return k + ": " + e;
        } else if (s.contains("additionalProperties")) {
          std::string e = Check(x, s["additionalProperties"], depth + 1);
          if (!e.empty()) return "additional " + k + ": " + e;
        }
      }
    }
    return "";
  }

  const Json& root_;
};

}  // namespace mx::grammar::testing
