// The value model of the Jinja engine: Python's data types as chat templates see them
// (None, bool, int, float, str, list, tuple, dict, jinja2's Undefined and Namespace, and
// callables), with Python-faithful str()/repr(), equality, ordering and json.dumps.
//
// Lists and dicts are shared by reference like Python objects (a namespace assigned in a
// loop is visible outside it). Dicts keep insertion order. Strings are UTF-8; operations
// that Python defines on code points (len, slicing, indexing) decode on demand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace mx::jinja {

class Value;
class Renderer;
using List = std::vector<Value>;

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list or tuple
  kDict,  // dict or jinja2 Namespace
  kCallable,
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// A function value: a macro, a builtin global or a bound method. `fn` gets the renderer so
// that macros can render their bodies.
struct Callable {
  std::string name;
  std::function<Result<Value>(Renderer&, CallArgs&)> fn;
};

struct Dict;

class Value {
 public:
  Value() = default;                               // Undefined
  Value(bool b) : kind_(Kind::kBool), b_(b) {}     // NOLINT(google-explicit-constructor)
  Value(int v) : kind_(Kind::kInt), i_(v) {}       // NOLINT(google-explicit-constructor)
  Value(int64_t v) : kind_(Kind::kInt), i_(v) {}   // NOLINT(google-explicit-constructor)
  Value(double v) : kind_(Kind::kFloat), f_(v) {}  // NOLINT(google-explicit-constructor)
  Value(std::string s);                            // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)

  // An Undefined that explains itself when used: "'x' is undefined".
  static Value Undefined(std::string hint);
  static Value None();
  static Value MakeList(List items, bool tuple = false);
  static Value MakeDict();
  static Value MakeDict(Dict d);
  static Value MakeNamespace();
  static Value MakeCallable(std::string name,
                            std::function<Result<Value>(Renderer&, CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const;
  bool is_mapping() const { return is_dict() && !is_namespace(); }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool b() const { return b_; }
  int64_t i() const { return is_bool() ? (b_ ? 1 : 0) : i_; }
  double f() const { return is_float() ? f_ : static_cast<double>(i()); }
  const std::string& str() const;  // string contents, or an Undefined's hint
  List& list() const;
  Dict& dict() const;
  const Callable& callable() const;

  bool Truthy() const;
  // Python's type name ("str", "NoneType", "list", ...).
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  bool flag_ = false;          // tuple (list) / namespace (dict)
  std::shared_ptr<void> ptr_;  // std::string, List, Dict or Callable by kind
};

// An insertion-ordered dict. Keys are Values (strings almost always).
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(Value key, Value value);
};

// Python semantics.
bool PyEquals(const Value& a, const Value& b);
// a < b; a TypeError for unorderable types.
Result<bool> PyLess(const Value& a, const Value& b);
std::string PyStr(const Value& v);   // str(v); Undefined -> ""
std::string PyRepr(const Value& v);  // repr(v)
void AppendFloatRepr(double d, std::string* out);
void AppendStringRepr(std::string_view s, std::string* out);

struct JsonDumpOptions {
  bool ensure_ascii = false;          // transformers' tojson default
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
// json.dumps(v, ...) exactly as Python writes it.
Result<std::string> PyJsonDumps(const Value& v, const JsonDumpOptions& options);
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);

Value FromJson(const nlohmann::ordered_json& j);
Value FromJson(const nlohmann::json& j);

}  // namespace mx::jinja
