// JSON Schema -> grammar: one rule per $ref target (so recursion works), the JSON building
// blocks (whitespace, strings, numbers, any value) made once per grammar.
#include "grammar/json_schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "base/json_depth.h"
#include "grammar/regex_compiler.h"
#include "grammar/utf8_ranges.h"

namespace mx::grammar {

namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMaxIntBound = 1'000'000'000'000'000;  // |bounds| written digit by digit
// Integer parts have at most 16 digits and exponents 2, so every number the grammar writes is
// a finite double and an integer fits int64 (JSON parsers refuse or round larger ones).
constexpr int32_t kMaxDigits = 16;

// Formats as regexes over the string's content.
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date",
     R"([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8])))"},
    {"time",
     R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"date-time",
     R"([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"email",
     R"([a-zA-Z0-9_%+-]+(\.[a-zA-Z0-9_%+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+)"},
};

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description",      "$schema",        "$id",       "$comment", "default",
    "examples", "deprecated",       "readOnly",       "writeOnly", "$defs",    "definitions",
    "$anchor",  "contentMediaType", "contentEncoding"};
const std::set<std::string, std::less<>> kKeywords = {"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "items",
                                                      "minItems",
                                                      "maxItems",
                                                      "enum",
                                                      "const",
                                                      "pattern",
                                                      "format",
                                                      "minLength",
                                                      "maxLength",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum",
                                                      "anyOf",
                                                      "oneOf",
                                                      "allOf",
                                                      "$ref"};

std::string Digits(int64_t v) { return std::to_string(v); }

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, const JsonOptions& opt)
      : b_(b), root_(root), opt_(opt) {}

  Elem Compile(const Json& s, int depth, const std::string& path) {
    if (!st_.ok()) return Nothing();
    if (depth > b_.limits().max_depth) {
      return Fail(ResourceExhausted("schema at '{}': nested deeper than {} (limit)", path,
                                    b_.limits().max_depth));
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return Fail(InvalidArgument("schema at '{}' is false: nothing matches it", path));
    }
    if (!s.is_object()) {
      return Fail(InvalidArgument("schema at '{}' must be an object or a boolean", path));
    }
    std::vector<std::string> unknown;
    for (const auto& [k, v] : s.items()) {
      if (!kKeywords.contains(k) && !kAnnotations.contains(k)) unknown.push_back("'" + k + "'");
    }
    if (!unknown.empty()) {
      return Fail(Unimplemented("schema at '{}': unsupported keyword{} {}", path,
                                unknown.size() > 1 ? "s" : "", fmt::join(unknown, ", ")));
    }
    if (s.contains("$ref")) {
      if (Constrains(s, "$ref")) return Combined(path, "$ref");
      return RefTo(s["$ref"], path);
    }
    if (s.contains("const")) {
      if (!OfDeclaredType(s, s["const"])) {
        return Fail(InvalidArgument("schema at '{}': const does not have the schema's type", path));
      }
      return Literal(s["const"]);
    }
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) {
        return Fail(InvalidArgument("schema at '{}': enum must be a non-empty array", path));
      }
      std::vector<Seq> alts;
      for (const Json& v : e) {
        if (OfDeclaredType(s, v)) alts.push_back({Literal(v)});
      }
      if (alts.empty()) {
        return Fail(InvalidArgument("schema at '{}': no enum value has the schema's type", path));
      }
      return b_.Alt(std::move(alts), "enum");
    }
    for (const char* k : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(k)) continue;
      if (Constrains(s, k)) return Combined(path, k);
      const Json& list = s[k];
      if (!list.is_array() || list.empty()) {
        return Fail(InvalidArgument("schema at '{}': {} must be a non-empty array", path, k));
      }
      if (std::string_view(k) == "allOf") {
        if (list.size() != 1) {
          return Fail(Unimplemented("schema at '{}': allOf with more than one schema", path));
        }
        return Compile(list[0], depth + 1, path + "/allOf/0");
      }
      std::vector<Seq> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts.push_back({Compile(list[i], depth + 1, fmt::format("{}/{}/{}", path, k, i))});
      }
      return b_.Alt(std::move(alts), "any_of");
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return Fail(InvalidArgument("schema at '{}': bad type", path));
          types.push_back(x.get<std::string>());
        }
      } else {
        return Fail(InvalidArgument("schema at '{}': type must be a string or a list", path));
      }
    } else {
      types.push_back(InferType(s));
    }
    std::vector<Seq> alts;
    for (const std::string& t : types) alts.push_back({OfType(s, t, depth, path)});
    if (alts.size() == 1) return alts[0][0];
    return b_.Alt(std::move(alts), "types");
  }

  Elem AnyObject() {
    if (!any_object_) {
      const Elem value = AnyValue();
      any_object_ = ObjectOfValues(value);
    }
    return *any_object_;
  }

  const Status& status() const { return st_.ok() ? b_.status() : st_; }

 private:
  Elem Nothing() { return b_.Alt({{}}); }
  Elem Fail(Status s) {
    if (st_.ok()) st_ = std::move(s);
    return Nothing();
  }
  // Other keywords beside a combinator: refused rather than half-applied.
  static bool Constrains(const Json& s, std::string_view keep) {
    for (const auto& [k, v] : s.items()) {
      if (k != keep && kKeywords.contains(k)) return true;
    }
    return false;
  }
  Elem Combined(const std::string& path, std::string_view k) {
    return Fail(Unimplemented("schema at '{}': {} together with other keywords", path, k));
  }

  // Whether value v has one of the types s declares (true when s declares none).
  static bool OfDeclaredType(const Json& s, const Json& v) {
    if (!s.contains("type")) return true;
    auto is = [&](const Json& t) {
      if (!t.is_string()) return false;
      const std::string& n = t.get_ref<const std::string&>();
      return (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
             (n == "integer" && v.is_number_integer()) || (n == "boolean" && v.is_boolean()) ||
             (n == "null" && v.is_null()) || (n == "object" && v.is_object()) ||
             (n == "array" && v.is_array());
    };
    const Json& t = s["type"];
    if (t.is_array()) return std::any_of(t.begin(), t.end(), is);
    return is(t);
  }

  static std::string InferType(const Json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (s.contains(k)) return "object";
    }
    for (const char* k : {"items", "minItems", "maxItems"}) {
      if (s.contains(k)) return "array";
    }
    for (const char* k : {"pattern", "format", "minLength", "maxLength"}) {
      if (s.contains(k)) return "string";
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return "number";
    }
    return "any";
  }

  Elem OfType(const Json& s, const std::string& t, int depth, const std::string& path) {
    if (t == "string") return String(s, path);
    if (t == "integer" || t == "number") return Number(s, t == "integer", path);
    if (t == "boolean") return b_.Alt({b_.Literal("true"), b_.Literal("false")}, "boolean");
    if (t == "null") return b_.Alt({b_.Literal("null")}, "null");
    if (t == "object") return Object(s, depth, path);
    if (t == "array") return Array(s, depth, path);
    if (t == "any") return AnyValue();
    return Fail(InvalidArgument("schema at '{}': unknown type '{}'", path, t));
  }

  Elem RefTo(const Json& ref, const std::string& path) {
    if (!ref.is_string())
      return Fail(InvalidArgument("schema at '{}': $ref must be a string", path));
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return b_.Ref(it->second);
    if (r.empty() || r[0] != '#') {
      return Fail(Unimplemented("schema at '{}': $ref '{}' is not in this document", path, r));
    }
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      return Fail(InvalidArgument("schema at '{}': $ref '{}' points at nothing", path, r));
    }
    const uint32_t rule = b_.NewRule("ref");
    refs_[r] = rule;
    const Elem body = Compile(*target, 0, r);
    b_.AddAlt(rule, {body});
    return b_.Ref(rule);
  }

  Elem Literal(const Json& v) {
    return b_.Alt({b_.Literal(v.dump(-1, ' ', false, Json::error_handler_t::replace))}, "const");
  }

  Elem Ws() {
    if (!ws_) {
      ByteClass c;
      for (char x : {' ', '\t', '\n', '\r'}) c.Add(static_cast<uint8_t>(x));
      ws_ = b_.Repeat({b_.Class(c)}, 0, opt_.max_whitespace, "ws");
    }
    return *ws_;
  }
  Seq Punct(char c) { return {Ws(), b_.Byte(static_cast<uint8_t>(c)), Ws()}; }

  // One character of a JSON string's content, raw or escaped (no lone surrogates).
  Elem JsonChar() {
    if (!jchar_) {
      const Elem raw =
          opt_.escape_lt
              ? CodepointSet(b_, {{0x20, '"' - 1},
                                  {'"' + 1, '<' - 1},
                                  {'<' + 1, '\\' - 1},
                                  {'\\' + 1, kMaxCodepoint}})
              : CodepointSet(b_, {{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, kMaxCodepoint}});
      Seq esc = {b_.Byte('\\')};
      ByteClass simple;
      for (char x : std::string_view("\"\\/bfnrt")) simple.Add(static_cast<uint8_t>(x));
      ByteClass hex, hex_not_d, d, hex07;
      for (char x : std::string_view("0123456789abcdefABCDEF")) hex.Add(static_cast<uint8_t>(x));
      hex_not_d = hex;
      hex_not_d.bits[1] &= ~((uint64_t{1} << ('d' - 64)) | (uint64_t{1} << ('D' - 64)));
      d.Add('d');
      d.Add('D');
      hex07.AddRange('0', '7');
      const Elem h = b_.Class(hex);
      const Elem u =
          b_.Alt({{b_.Class(hex_not_d), h, h, h}, {b_.Class(d), b_.Class(hex07), h, h}}, "hex4");
      esc.push_back(b_.Alt({{b_.Class(simple)}, {b_.Byte('u'), u}}, "escape"));
      jchar_ = b_.Alt({{raw}, esc}, "jchar");
    }
    return *jchar_;
  }

  Elem String(const Json& s, const std::string& path) {
    const Elem q = b_.Byte('"');
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    std::optional<std::string> pattern;
    if (s.contains("format")) {
      if (!s["format"].is_string())
        return Fail(InvalidArgument("schema at '{}': bad format", path));
      auto it = kFormats.find(s["format"].get<std::string>());
      if (it == kFormats.end()) {
        return Fail(Unimplemented("schema at '{}': format '{}' is not supported", path,
                                  s["format"].get<std::string>()));
      }
      pattern = it->second;
      if (s.contains("pattern")) {
        return Fail(Unimplemented("schema at '{}': format together with pattern", path));
      }
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string())
        return Fail(InvalidArgument("schema at '{}': bad pattern", path));
      pattern = s["pattern"].get<std::string>();
    }
    if (pattern) {
      if (has_len) {
        return Fail(
            Unimplemented("schema at '{}': pattern or format with minLength/maxLength", path));
      }
      Seq seq = {q};
      const Status rs = CompileRegex(b_, *pattern, {.json_string = true}, &seq);
      if (!rs.ok()) return Fail(rs.WithContext(fmt::format("schema at '{}'", path)));
      seq.push_back(q);
      return b_.Alt({std::move(seq)}, "pattern");
    }
    int32_t lo = 0, hi = -1;
    if (!Count(s, "minLength", &lo, path) || !Count(s, "maxLength", &hi, path)) return Nothing();
    if (hi >= 0 && hi < lo) {
      return Fail(InvalidArgument("schema at '{}': maxLength < minLength", path));
    }
    if (lo == 0 && hi < 0) {
      if (!any_string_) any_string_ = b_.Alt({{q, b_.Star({JsonChar()}, "chars"), q}}, "string");
      return *any_string_;
    }
    return b_.Alt({{q, b_.Repeat({JsonChar()}, lo, hi, "chars"), q}}, "string");
  }

  bool Count(const Json& s, const char* k, int32_t* out, const std::string& path) {
    if (!s.contains(k)) return true;
    const Json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      Fail(InvalidArgument("schema at '{}': {} must be a non-negative integer", path, k));
      return false;
    }
    if (v.get<int64_t>() > b_.limits().max_repeat) {
      Fail(ResourceExhausted("schema at '{}': {} {} is over the limit {}", path, k,
                             v.get<int64_t>(), b_.limits().max_repeat));
      return false;
    }
    *out = static_cast<int32_t>(v.get<int64_t>());
    return true;
  }

  // Digit strings of equal length n, from lo to hi inclusive.
  void SameLen(const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>* out) {
    const size_t n = lo.size();
    if (n == 0) return out->push_back(std::move(prefix));
    auto digits = [&](char a, char z) {
      ByteClass c;
      c.AddRange(static_cast<uint8_t>(a), static_cast<uint8_t>(z));
      return b_.Class(c);
    };
    const std::string tail0(n - 1, '0'), tail9(n - 1, '9');
    if (lo[0] == hi[0]) {
      prefix.push_back(digits(lo[0], lo[0]));
      return SameLen(lo.substr(1), hi.substr(1), std::move(prefix), out);
    }
    if (lo.substr(1) == tail0 && hi.substr(1) == tail9) {
      prefix.push_back(digits(lo[0], hi[0]));
      for (size_t k = 1; k < n; ++k) prefix.push_back(digits('0', '9'));
      return out->push_back(std::move(prefix));
    }
    Seq p1 = prefix;
    p1.push_back(digits(lo[0], lo[0]));
    SameLen(lo.substr(1), tail9, std::move(p1), out);
    if (lo[0] + 1 <= hi[0] - 1) {
      Seq p2 = prefix;
      p2.push_back(digits(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)));
      for (size_t k = 1; k < n; ++k) p2.push_back(digits('0', '9'));
      out->push_back(std::move(p2));
    }
    Seq p3 = std::move(prefix);
    p3.push_back(digits(hi[0], hi[0]));
    SameLen(tail0, hi.substr(1), std::move(p3), out);
  }

  // Non-negative integers in [a, b] (b absent: unbounded), no leading zeros; appended to out
  // after `prefix`.
  void NonNegRange(int64_t a, std::optional<int64_t> b, const Seq& prefix, std::vector<Seq>* out) {
    if (b && *b < a) return;
    const size_t la = Digits(a).size();
    const size_t lb = b ? Digits(*b).size() : la;
    int64_t pow = 1;
    for (size_t k = 1; k < la; ++k) pow *= 10;  // 10^(la-1)
    for (size_t len = la; len <= lb; ++len, pow *= 10) {
      const int64_t lo = len == la ? a : pow;
      const int64_t hi = (b && len == lb) ? *b : pow * 10 - 1;
      SameLen(Digits(lo), Digits(hi), prefix, out);
    }
    if (!b && static_cast<int32_t>(la) < kMaxDigits) {  // more digits than a has: anything
      ByteClass nz, dg;
      nz.AddRange('1', '9');
      dg.AddRange('0', '9');
      Seq s = prefix;
      s.push_back(b_.Class(nz));
      s.push_back(b_.Repeat({b_.Class(dg)}, static_cast<int32_t>(la), kMaxDigits - 1, "digits"));
      out->push_back(std::move(s));
    }
  }

  // Integers in [lo, hi] (either may be absent), each followed by `suffix`.
  void IntRange(std::optional<int64_t> lo, std::optional<int64_t> hi, const Seq& suffix,
                std::vector<Seq>* out) {
    std::vector<Seq> alts;
    const Seq minus = {b_.Byte('-')};
    if (!lo || *lo < 0) {  // negatives: -[max(1, -hi), -lo]
      const int64_t a = hi && *hi < 0 ? -*hi : 1;
      NonNegRange(a, lo ? std::optional<int64_t>(-*lo) : std::nullopt, minus, &alts);
    }
    if (!hi || *hi >= 0) NonNegRange(lo ? std::max<int64_t>(*lo, 0) : 0, hi, {}, &alts);
    for (Seq& a : alts) {
      a.insert(a.end(), suffix.begin(), suffix.end());
      out->push_back(std::move(a));
    }
  }

  bool Bound(const Json& s, const char* k, std::optional<double>* v, const std::string& path) {
    if (!s.contains(k)) return true;
    if (!s[k].is_number()) {
      Fail(InvalidArgument("schema at '{}': {} must be a number", path, k));
      return false;
    }
    *v = s[k].get<double>();
    if (!std::isfinite(**v) || std::fabs(**v) > static_cast<double>(kMaxIntBound)) {
      Fail(Unimplemented("schema at '{}': {} beyond +-1e15 is not supported", path, k));
      return false;
    }
    return true;
  }

  Elem Number(const Json& s, bool integer, const std::string& path) {
    std::optional<double> mn, mx, xmn, xmx;
    if (!Bound(s, "minimum", &mn, path) || !Bound(s, "maximum", &mx, path) ||
        !Bound(s, "exclusiveMinimum", &xmn, path) || !Bound(s, "exclusiveMaximum", &xmx, path)) {
      return Nothing();
    }
    // The integer bounds: the least and greatest integers in range.
    std::optional<int64_t> lo, hi;
    if (mn) lo = static_cast<int64_t>(std::ceil(*mn));
    if (xmn) {
      const auto l = static_cast<int64_t>(std::floor(*xmn)) + 1;
      lo = lo ? std::max(*lo, l) : l;
    }
    if (mx) hi = static_cast<int64_t>(std::floor(*mx));
    if (xmx) {
      const auto h = static_cast<int64_t>(std::ceil(*xmx)) - 1;
      hi = hi ? std::min(*hi, h) : h;
    }
    if (lo && hi && *lo > *hi) {
      return Fail(InvalidArgument("schema at '{}': no {} is within the bounds", path,
                                  integer ? "integer" : "number"));
    }
    ByteClass dg;
    dg.AddRange('0', '9');
    const Seq frac = {b_.Byte('.'), b_.Repeat({b_.Class(dg)}, 1, -1, "frac")};
    std::vector<Seq> alts;
    if (!lo && !hi) {
      IntRange(lo, hi, {}, &alts);
      if (!integer) {
        ByteClass e, sign;
        e.Add('e');
        e.Add('E');
        sign.Add('+');
        sign.Add('-');
        const Elem exp = b_.Alt({{},
                                 {b_.Class(e), b_.Repeat({b_.Class(sign)}, 0, 1, "sign"),
                                  b_.Repeat({b_.Class(dg)}, 1, 2, "exp")}},
                                "exponent");
        const Elem fopt = b_.Alt({{}, frac}, "frac_opt");
        const Elem ip = b_.Alt(std::move(alts), "int");
        return b_.Alt({{ip, fopt, exp}}, "number");
      }
      return b_.Alt(std::move(alts), "integer");
    }
    IntRange(lo, hi, {}, &alts);
    if (!integer) {
      // I.f for I >= 0 is in [I, I + 1): I in [max(lo, 0), hi - 1]; -J.f is in (-J - 1, -J]:
      // J in [max(-hi, 0), -lo - 1].
      const int64_t ilo = lo ? std::max<int64_t>(*lo, 0) : 0;
      std::vector<Seq> fr;
      if (!hi || *hi - 1 >= ilo) {
        NonNegRange(ilo, hi ? std::optional<int64_t>(*hi - 1) : std::nullopt, {}, &fr);
      }
      const int64_t jlo = hi ? std::max<int64_t>(-*hi, 0) : 0;
      if (!lo || -*lo - 1 >= jlo) {
        NonNegRange(jlo, lo ? std::optional<int64_t>(-*lo - 1) : std::nullopt, {b_.Byte('-')}, &fr);
      }
      for (Seq& f : fr) {
        f.insert(f.end(), frac.begin(), frac.end());
        alts.push_back(std::move(f));
      }
    }
    return b_.Alt(std::move(alts), integer ? "integer" : "number");
  }

  Elem ObjectOfValues(Elem value) {
    const Elem key = String(Json::object(), "");
    Seq member = {key};
    const Seq colon = Punct(':');
    member.insert(member.end(), colon.begin(), colon.end());
    member.push_back(value);
    const Elem list = b_.SeparatedList(member, Punct(','), 1, -1, "members");
    return b_.Alt(
        {{b_.Byte('{'), Ws(), b_.Byte('}')}, {b_.Byte('{'), Ws(), list, Ws(), b_.Byte('}')}},
        "object");
  }

  Elem Object(const Json& s, int depth, const std::string& path) {
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) {
      return Fail(InvalidArgument("schema at '{}': properties must be an object", path));
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) {
        return Fail(InvalidArgument("schema at '{}': required must be an array", path));
      }
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Fail(InvalidArgument("schema at '{}': bad required", path));
        if (!props.contains(r.get<std::string>())) {
          return Fail(Unimplemented("schema at '{}': required property '{}' is not in properties",
                                    path, r.get<std::string>()));
        }
        required.insert(r.get<std::string>());
      }
    }
    const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (props.empty()) {
      if (extra == nullptr || (extra->is_boolean() && extra->get<bool>())) return AnyObject();
      if (extra->is_boolean()) return b_.Alt({{b_.Byte('{'), Ws(), b_.Byte('}')}}, "empty_object");
      return ObjectOfValues(Compile(*extra, depth + 1, path + "/additionalProperties"));
    }
    if (extra != nullptr && !(extra->is_boolean() && !extra->get<bool>())) {
      return Fail(Unimplemented(
          "schema at '{}': additionalProperties other than false beside properties", path));
    }
    struct Prop {
      Seq kv;
      bool required;
    };
    std::vector<Prop> list;
    for (const auto& [name, sub] : props.items()) {
      Seq kv = b_.Literal(Json(name).dump(-1, ' ', false, Json::error_handler_t::replace));
      const Seq colon = Punct(':');
      kv.insert(kv.end(), colon.begin(), colon.end());
      kv.push_back(Compile(sub, depth + 1, path + "/properties/" + name));
      list.push_back({std::move(kv), required.contains(name)});
    }
    const size_t n = list.size();
    // rest[i]: what may follow once a property was written, from property i on.
    std::vector<uint32_t> rest(n + 1);
    rest[n] = b_.NewRule("rest");
    b_.AddAlt(rest[n], {});
    for (size_t i = n; i-- > 0;) {
      rest[i] = b_.NewRule("rest");
      Seq with = Punct(',');
      with.insert(with.end(), list[i].kv.begin(), list[i].kv.end());
      with.push_back(b_.Ref(rest[i + 1]));
      b_.AddAlt(rest[i], std::move(with));
      if (!list[i].required) b_.AddAlt(rest[i], {b_.Ref(rest[i + 1])});
    }
    // first[i]: the first property written is i or a later one (at least one is written).
    std::vector<uint32_t> first(n);
    bool any_required_after = false;
    for (size_t i = n; i-- > 0;) {
      first[i] = b_.NewRule("first");
      Seq with = list[i].kv;
      with.push_back(b_.Ref(rest[i + 1]));
      b_.AddAlt(first[i], std::move(with));
      if (!list[i].required && i + 1 < n) b_.AddAlt(first[i], {b_.Ref(first[i + 1])});
      any_required_after = any_required_after || list[i].required;
    }
    std::vector<Seq> alts = {{b_.Byte('{'), Ws(), b_.Ref(first[0]), Ws(), b_.Byte('}')}};
    if (!any_required_after) alts.push_back({b_.Byte('{'), Ws(), b_.Byte('}')});
    return b_.Alt(std::move(alts), "object");
  }

  Elem Array(const Json& s, int depth, const std::string& path) {
    const Elem item =
        s.contains("items") ? Compile(s["items"], depth + 1, path + "/items") : AnyValue();
    int32_t lo = 0, hi = -1;
    if (!Count(s, "minItems", &lo, path) || !Count(s, "maxItems", &hi, path)) return Nothing();
    if (hi >= 0 && hi < lo)
      return Fail(InvalidArgument("schema at '{}': maxItems < minItems", path));
    std::vector<Seq> alts;
    if (lo == 0) alts.push_back({b_.Byte('['), Ws(), b_.Byte(']')});
    if (hi != 0) {
      const Elem list = b_.SeparatedList({item}, Punct(','), std::max(lo, 1), hi, "items");
      alts.push_back({b_.Byte('['), Ws(), list, Ws(), b_.Byte(']')});
    }
    return b_.Alt(std::move(alts), "array");
  }

  Elem AnyValue() {
    if (!any_value_) {
      const uint32_t r = b_.NewRule("value");
      any_value_ = b_.Ref(r);
      const Elem obj = ObjectOfValues(*any_value_);
      const Elem list = b_.SeparatedList({*any_value_}, Punct(','), 1, -1, "values");
      const Elem arr = b_.Alt(
          {{b_.Byte('['), Ws(), b_.Byte(']')}, {b_.Byte('['), Ws(), list, Ws(), b_.Byte(']')}},
          "array");
      b_.AddAlt(r, {obj});
      b_.AddAlt(r, {arr});
      b_.AddAlt(r, {String(Json::object(), "")});
      b_.AddAlt(r, {Number(Json::object(), false, "")});
      for (const char* lit : {"true", "false", "null"}) b_.AddAlt(r, b_.Literal(lit));
    }
    return *any_value_;
  }

  GrammarBuilder& b_;
  const Json& root_;
  JsonOptions opt_;
  Status st_;
  std::map<std::string, uint32_t> refs_;
  std::optional<Elem> ws_, jchar_, any_string_, any_value_, any_object_;
};

Result<Grammar> Finish(GrammarBuilder& b, const SchemaCompiler& c, Elem top) {
  MX_RETURN_IF_ERROR(c.status());
  const uint32_t root = b.NewRule("root");
  b.AddAlt(root, {top});
  return b.Finish(root);
}

}  // namespace

const std::string* JsonStringFormatRegex(std::string_view format) {
  auto it = kFormats.find(format);
  return it == kFormats.end() ? nullptr : &it->second;
}

Status CompileJsonSchema(GrammarBuilder& b, const nlohmann::ordered_json& schema,
                         const JsonOptions& opt, Elem* out, const nlohmann::ordered_json* root) {
  SchemaCompiler c(b, root != nullptr ? *root : schema, opt);
  *out = c.Compile(schema, 0, "#");
  return c.status();
}

Result<Grammar> JsonSchemaGrammar(std::string_view schema_text, const JsonOptions& opt,
                                  const GrammarLimits& limits) {
  if (static_cast<int64_t>(schema_text.size()) > limits.max_source_bytes) {
    return ResourceExhausted("the schema is {} bytes, over the limit {}", schema_text.size(),
                             limits.max_source_bytes);
  }
  if (JsonNestingDepth(schema_text, 2 * limits.max_depth) > 2 * limits.max_depth) {
    return ResourceExhausted("the schema nests JSON deeper than {} levels (limit)",
                             2 * limits.max_depth);
  }
  const Json schema = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument("the schema is not valid JSON");
  GrammarBuilder b(limits);
  SchemaCompiler c(b, schema, opt);
  const Elem top = c.Compile(schema, 0, "#");
  return Finish(b, c, top);
}

Result<Grammar> JsonObjectGrammar(const JsonOptions& opt, const GrammarLimits& limits) {
  const Json none = Json::object();
  GrammarBuilder b(limits);
  SchemaCompiler c(b, none, opt);
  const Elem top = c.AnyObject();
  return Finish(b, c, top);
}

}  // namespace mx::grammar
