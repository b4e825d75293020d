// The JSON Schema corpus of the grammar tests: hand-written schemas covering every supported
// keyword, and a seeded generator of random schemas over the same subset.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx::grammar::testing {

inline std::vector<std::string> HandWrittenSchemas() {
  return {
      R"({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]})",
      R"({"type":"string"})",
      R"({"type":"integer"})",
      R"({"type":"number"})",
      R"({"type":"boolean"})",
      R"({"type":"null"})",
      R"({})",
      R"(true)",
      R"({"type":["string","null"]})",
      R"({"enum":["red","green","blue",1,null,{"a":[1,2]}]})",
      R"({"type":"string","enum":["a","b",3]})",
      R"({"const":{"k":"v","n":[true,false]}})",
      R"({"type":"string","minLength":2,"maxLength":5})",
      R"({"type":"string","maxLength":0})",
      R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}$"})",
      R"({"type":"string","pattern":"a\"b\\\\c[\\n\\t]"})",
      R"({"type":"string","format":"date"})",
      R"({"type":"string","format":"date-time"})",
      R"({"type":"string","format":"time"})",
      R"({"type":"string","format":"uuid"})",
      R"({"type":"string","format":"email"})",
      R"({"type":"integer","minimum":0})",
      R"({"type":"integer","minimum":-7,"maximum":1234})",
      R"({"type":"integer","minimum":15,"maximum":15})",
      R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":99})",
      R"({"type":"integer","maximum":-20})",
      R"({"type":"integer","minimum":100000,"maximum":100999})",
      R"({"type":"number","minimum":-2.5,"maximum":3.75})",
      R"({"type":"number","exclusiveMinimum":0,"maximum":1})",
      R"({"type":"number","minimum":10})",
      R"({"type":"number","maximum":-0.5})",
      R"({"type":"array","items":{"type":"integer"}})",
      R"({"type":"array","items":{"type":"string"},"minItems":2,"maxItems":3})",
      R"({"type":"array","maxItems":0})",
      R"({"type":"array","minItems":1})",
      R"({"type":"object"})",
      R"({"type":"object","additionalProperties":false})",
      R"({"type":"object","additionalProperties":{"type":"integer"}})",
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}}})",
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}},"required":["c"],"additionalProperties":false})",
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3}},"required":["name","age"]})",
      R"({"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":5,"maximum":9}]})",
      R"({"oneOf":[{"type":"boolean"},{"type":"null"},{"type":"array","maxItems":1,"items":{"type":"number"}}]})",
      R"({"allOf":[{"type":"integer","maximum":3,"minimum":-3}]})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"})",
      R"({"definitions":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"x":{"$ref":"#/definitions/pos"},"y":{"$ref":"#/definitions/pos"}},"required":["x","y"]})",
      R"({"type":"object","properties":{"list":{"$ref":"#"}},"title":"self"})",
      R"({"type":"object","properties":{"é ü\"\\":{"type":"string","pattern":"[é€]+"}},"required":["é ü\"\\"]})",
      R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},"kind":{"enum":["a","b"]},"score":{"type":"number","minimum":0,"maximum":1}},"required":["when","id","kind","score"],"description":"an event"})",
      R"({"type":"array","items":{"type":"object","properties":{"q":{"type":"string","maxLength":4},"a":{"type":"integer"}},"required":["q","a"]},"minItems":1,"maxItems":2})",
  };
}

// A random schema of the supported subset (depth-bounded; containers and strings kept small
// so that random walks through them end).
class SchemaGenerator {
 public:
  explicit SchemaGenerator(uint64_t seed) : rng_(seed) {}

  nlohmann::ordered_json Next() {
    nlohmann::ordered_json s = Gen(0);
    if (Coin(0.15)) {  // a recursive definition
      nlohmann::ordered_json node = {
          {"type", "object"},
          {"properties",
           {{"v", Gen(2)},
            {"next", {{"anyOf", {{{"type", "null"}}, {{"$ref", "#/$defs/node"}}}}}}}},
          {"required", {"v", "next"}}};
      s = {{"$defs", {{"node", node}}}, {"$ref", "#/$defs/node"}};
    }
    return s;
  }

 private:
  bool Coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string Name() {
    static const char* kNames[] = {"id", "name", "value", "items", "ok",
                                   "x",  "y",    "déjà",  "a b",   "q\"t"};
    return kNames[Int(0, 9)];
  }

  nlohmann::ordered_json Gen(int depth) {
    const int kind = depth >= 3 ? Int(0, 5) : Int(0, 9);
    nlohmann::ordered_json s;
    switch (kind) {
      case 0: {
        s = {{"type", "string"}};
        const int f = Int(0, 6);
        if (f == 1) s["maxLength"] = Int(0, 6);
        if (f == 2) s["minLength"] = Int(1, 3), s["maxLength"] = Int(3, 8);
        if (f == 3)
          s["format"] =
              std::vector<std::string>{"date", "date-time", "uuid", "email", "time"}[Int(0, 4)];
        if (f == 4)
          s["pattern"] = std::vector<std::string>{"^[a-f0-9]{4}$", "x+y?", "(ab|cd){1,3}",
                                                  "[^\"\\\\]{2}", "\\w\\s\\d"}[Int(0, 4)];
        if (f == 5) s["enum"] = {"alpha", "beta", "gamma\n"};
        if (f == 6) s["maxLength"] = 4;
        return s;
      }
      case 1: {
        s = {{"type", "integer"}};
        if (Coin(0.5)) s["minimum"] = Int(-50, 50);
        if (Coin(0.5))
          s["maximum"] =
              s.contains("minimum") ? s["minimum"].get<int>() + Int(0, 500) : Int(-50, 5000);
        if (Coin(0.2)) s["exclusiveMinimum"] = Int(-60, -51);
        return s;
      }
      case 2: {
        s = {{"type", "number"}};
        if (Coin(0.5)) s["minimum"] = Int(-100, 100) / 4.0;
        if (Coin(0.5))
          s["maximum"] =
              (s.contains("minimum") ? s["minimum"].get<double>() : 0.0) + Int(1, 400) / 4.0;
        return s;
      }
      case 3:
        return {{"type", Coin(0.5) ? "boolean" : "null"}};
      case 4: {
        s = {{"enum", {1, "two", nullptr, false, 3.5}}};
        if (Coin(0.3)) s = {{"const", {{"k", Int(0, 9)}}}};
        return s;
      }
      case 5:
        return {{"type", nlohmann::ordered_json::array({"integer", "null"})}};
      case 6:
      case 7: {
        s = {{"type", "object"}};
        nlohmann::ordered_json props = nlohmann::ordered_json::object();
        std::vector<std::string> req;
        const int n = Int(0, 4);
        for (int i = 0; i < n; ++i) {
          const std::string k = Name();
          if (props.contains(k)) continue;
          props[k] = Gen(depth + 1);
          if (Coin(0.5)) req.push_back(k);
        }
        if (!props.empty()) s["properties"] = props;
        if (!req.empty()) s["required"] = req;
        if (props.empty() && Coin(0.5)) s["additionalProperties"] = Gen(depth + 1);
        if (!props.empty() && Coin(0.3)) s["additionalProperties"] = false;
        return s;
      }
      case 8: {
        s = {{"type", "array"}, {"items", Gen(depth + 1)}};
        if (Coin(0.5)) s["minItems"] = Int(0, 2);
        s["maxItems"] = s.value("minItems", 0) + Int(0, 3);
        return s;
      }
      default: {
        // Branches of different types, so that oneOf's "exactly one" holds.
        nlohmann::ordered_json a = {{"type", "string"}, {"maxLength", 3}};
        nlohmann::ordered_json b = Gen(depth + 1);
        if (b.contains("type") && b["type"] == "string") b = {{"type", "boolean"}};
        if (b.contains("enum") || b.contains("const") || !b.contains("type"))
          b = {{"type", "null"}};
        if (b["type"].is_array()) b = {{"type", "integer"}};
        return {{Coin(0.5) ? "anyOf" : "oneOf", {a, b}}};
      }
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace mx::grammar::testing
