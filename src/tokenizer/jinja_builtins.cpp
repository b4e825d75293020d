// Filters, tests, methods and globals of the Jinja engine (jinja2 3.1 semantics, with the
// Hugging Face overrides: tojson = json.dumps, raise_exception, strftime_now).
#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "tokenizer/jinja_render.h"
#include "tokenizer/jinja_unicode.h"

namespace mx::jinja {
namespace {

// ---- argument binding ----

struct Param {
  const char* name;
  Value default_value;  // Undefined: required
  bool required = false;
};

// Binds positional and keyword arguments to `params` (in order) like a Python signature.
Result<std::vector<Value>> Bind(const char* fn, const CallArgs& args,
                                const std::vector<Param>& params) {
  if (args.pos.size() > params.size())
    return InvalidArgument("{}() takes at most {} argument(s) ({} given)", fn, params.size(),
                           args.pos.size());
  std::vector<Value> out(params.size());
  std::vector<bool> set(params.size(), false);
  for (size_t k = 0; k < args.pos.size(); ++k) {
    out[k] = args.pos[k];
    set[k] = true;
  }
  for (const auto& [key, v] : args.kw) {
    size_t k = 0;
    while (k < params.size() && key != params[k].name) ++k;
    if (k == params.size())
      return InvalidArgument("{}() got an unexpected keyword argument '{}'", fn, key);
    if (set[k]) return InvalidArgument("{}() got multiple values for argument '{}'", fn, key);
    out[k] = v;
    set[k] = true;
  }
  for (size_t k = 0; k < params.size(); ++k) {
    if (set[k]) continue;
    if (params[k].required)
      return InvalidArgument("{}() missing required argument '{}'", fn, params[k].name);
    out[k] = params[k].default_value;
  }
  return out;
}

Param Req(const char* name) { return Param{name, Value(), true}; }
Param Opt(const char* name, Value v) { return Param{name, std::move(v), false}; }

Result<int64_t> ToIndex(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.i();
  return InvalidArgument("{} must be an integer, not '{}'", what, v.TypeName());
}

const char* ObjectTypeRepr(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool object";
    case Kind::kInt:
      return "int object";
    case Kind::kFloat:
      return "float object";
    case Kind::kString:
      return "str object";
    case Kind::kList:
      return v.is_tuple() ? "tuple object" : "list object";
    case Kind::kDict:
      return v.is_namespace() ? "jinja2.utils.Namespace object" : "dict object";
    default:
      return "object";
  }
}

Value NoAttr(const Value& obj, const std::string& name) {
  if (obj.is_none()) return Value::Undefined(fmt::format("'None' has no attribute '{}'", name));
  return Value::Undefined(fmt::format("'{}' has no attribute '{}'", ObjectTypeRepr(obj), name));
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.TypeName()));
}

// ---- string helpers ----

std::vector<std::string> SplitWhitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t pos = 0;
  const size_t n = s.size();
  auto space_at = [&](size_t p, size_t* len) {
    size_t q = p;
    char32_t c = DecodeUtf8At(s, &q);
    *len = q - p;
    return IsPySpace(c);
  };
  size_t len = 0;
  while (pos < n) {
    while (pos < n && space_at(pos, &len)) pos += len;
    if (pos >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      // Remainder, with trailing whitespace stripped.
      std::string rest = s.substr(pos);
      out.push_back(PyStrip(rest, nullptr, false, true));
      return out;
    }
    size_t start = pos;
    while (pos < n && !space_at(pos, &len)) pos += len;
    out.push_back(s.substr(start, pos - start));
  }
  return out;
}

Result<Value> StrSplit(const std::string& s, const Value& sep, const Value& maxsplit_v,
                       bool from_right) {
  int64_t maxsplit = -1;
  if (!maxsplit_v.is_none() && !maxsplit_v.is_undefined()) {
    MX_ASSIGN_OR_RETURN(maxsplit, ToIndex(maxsplit_v, "maxsplit"));
  }
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    if (from_right && maxsplit >= 0)
      return Unimplemented("rsplit() without a separator and with maxsplit");
    for (auto& p : SplitWhitespace(s, maxsplit)) out.emplace_back(std::move(p));
    return Value::MakeList(std::move(out));
  }
  if (!sep.is_string()) return InvalidArgument("must be str or None, not {}", sep.TypeName());
  const std::string& d = sep.str();
  if (d.empty()) return InvalidArgument("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      size_t f = s.find(d, pos);
      if (f == std::string::npos) break;
      parts.push_back(s.substr(pos, f - pos));
      pos = f + d.size();
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) break;
      if (end < d.size()) break;
      size_t f = s.rfind(d, end - d.size());
      if (f == std::string::npos) break;
      rev.push_back(s.substr(f + d.size(), end - f - d.size()));
      end = f;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::MakeList(std::move(out));
}

std::string StrReplace(const std::string& s, const std::string& old, const std::string& rep,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `rep` between every character (and at both ends).
    std::vector<char32_t> cps = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < cps.size()) AppendUtf8(cps[k], &out);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += rep;
    pos = f + old.size();
    ++done;
  }
  out.append(s, pos);
  return out;
}

// Python slice index normalisation (PySlice_AdjustIndices).
struct SliceIdx {
  int64_t start, stop, step, count;
};

Result<SliceIdx> AdjustSlice(int64_t len, const Value& start_v, const Value& stop_v,
                             const Value& step_v) {
  auto given = [](const Value& v) { return !v.is_none() && !v.is_undefined(); };
  int64_t step = 1;
  if (given(step_v)) {
    MX_ASSIGN_OR_RETURN(step, ToIndex(step_v, "slice step"));
    if (step == 0) return InvalidArgument("slice step cannot be zero");
  }
  int64_t start, stop;
  if (given(start_v)) {
    MX_ASSIGN_OR_RETURN(start, ToIndex(start_v, "slice indices"));
    if (start < 0) {
      start += len;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) {
      start = step < 0 ? len - 1 : len;
    }
  } else {
    start = step < 0 ? len - 1 : 0;
  }
  if (given(stop_v)) {
    MX_ASSIGN_OR_RETURN(stop, ToIndex(stop_v, "slice indices"));
    if (stop < 0) {
      stop += len;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
      stop = step < 0 ? len - 1 : len;
    }
  } else {
    stop = step < 0 ? -1 : len;
  }
  int64_t count = 0;
  if (step < 0) {
    if (stop < start) count = (start - stop - 1) / (-step) + 1;
  } else if (start < stop) {
    count = (stop - start - 1) / step + 1;
  }
  return SliceIdx{start, stop, step, count};
}

// ---- methods ----

bool IsStrMethod(const std::string& n) {
  static const char* const kNames[] = {
      "split",    "rsplit",     "strip",        "lstrip",       "rstrip",       "startswith",
      "endswith", "replace",    "upper",        "lower",        "title",        "capitalize",
      "find",     "rfind",      "count",        "join",         "isdigit",      "isalpha",
      "isspace",  "isalnum",    "isupper",      "islower",      "splitlines",   "casefold",
      "index",    "rindex",     "removeprefix", "removesuffix", "swapcase",     "zfill",
      "center",   "ljust",      "rjust",        "partition",    "rpartition",   "format",
      "encode",   "expandtabs", "isnumeric",    "isdecimal",    "isidentifier", "isprintable",
      "istitle",  "isascii",    "translate",    "maketrans",    "format_map"};
  for (const char* k : kNames)
    if (n == k) return true;
  return false;
}

Result<Value> StrMethod(const std::string& s, const std::string& name, CallArgs& args) {
  if (name == "split" || name == "rsplit") {
    MX_ASSIGN_OR_RETURN(
        auto a, Bind(name.c_str(), args, {Opt("sep", Value::None()), Opt("maxsplit", Value(-1))}));
    return StrSplit(s, a[0], a[1], name == "rsplit");
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {Opt("chars", Value::None())}));
    if (!a[0].is_none() && !a[0].is_string())
      return InvalidArgument("{} arg must be None or str", name);
    const std::string* chars = a[0].is_string() ? &a[0].str() : nullptr;
    return Value(PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {Req("prefix")}));
    std::vector<std::string> cands;
    if (a[0].is_string()) {
      cands.push_back(a[0].str());
    } else if (a[0].is_tuple()) {
      for (const Value& v : a[0].list()) {
        if (!v.is_string())
          return InvalidArgument("tuple for {} must only contain str, not {}", name, v.TypeName());
        cands.push_back(v.str());
      }
    } else {
      return InvalidArgument("{} first arg must be str or a tuple of str, not {}", name,
                             a[0].TypeName());
    }
    for (const std::string& c : cands) {
      if (c.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, c.size(), c) == 0
                               : s.compare(s.size() - c.size(), c.size(), c) == 0)
        return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    MX_ASSIGN_OR_RETURN(auto a,
                        Bind("replace", args, {Req("old"), Req("new"), Opt("count", Value(-1))}));
    if (!a[0].is_string() || !a[1].is_string())
      return InvalidArgument("replace() arguments must be str");
    MX_ASSIGN_OR_RETURN(int64_t count, ToIndex(a[2], "count"));
    return Value(StrReplace(s, a[0].str(), a[1].str(), count));
  }
  if (name == "upper") return Value(PyUpper(s));
  if (name == "lower" || name == "casefold") return Value(PyLower(s));
  if (name == "title") return Value(PyTitle(s));
  if (name == "capitalize") return Value(PyCapitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {Req("sub")}));
    if (!a[0].is_string()) return InvalidArgument("must be str, not {}", a[0].TypeName());
    const std::string& sub = a[0].str();
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(Utf8Length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    size_t f = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (f == std::string::npos) {
      if (name == "index" || name == "rindex") return InvalidArgument("substring not found");
      return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(Utf8Length(std::string_view(s).substr(0, f))));
  }
  if (name == "join") {
    MX_ASSIGN_OR_RETURN(auto a, Bind("join", args, {Req("iterable")}));
    MX_ASSIGN_OR_RETURN(List items, Iterate(a[0]));
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (!items[k].is_string())
        return InvalidArgument("sequence item {}: expected str instance, {} found", k,
                               items[k].TypeName());
      if (k) out += s;
      out += items[k].str();
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {Req("affix")}));
    if (!a[0].is_string()) return InvalidArgument("must be str, not {}", a[0].TypeName());
    const std::string& x = a[0].str();
    if (name == "removeprefix")
      return Value(s.compare(0, x.size(), x) == 0 && x.size() <= s.size() ? s.substr(x.size()) : s);
    return Value(x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0
                     ? s.substr(0, s.size() - x.size())
                     : s);
  }
  if (name == "splitlines") {
    List out;
    std::vector<char32_t> cps = DecodeUtf8(s);
    std::u32string cur;
    bool pending = false;
    for (size_t k = 0; k < cps.size(); ++k) {
      char32_t c = cps[k];
      bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                 c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
      if (brk) {
        out.emplace_back(EncodeUtf8(cur));
        cur.clear();
        if (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') ++k;
        pending = false;
      } else {
        cur.push_back(c);
        pending = true;
      }
    }
    if (pending) out.emplace_back(EncodeUtf8(cur));
    return Value::MakeList(std::move(out));
  }
  if (name.rfind("is", 0) == 0 && name != "isidentifier" && name != "isprintable" &&
      name != "istitle") {
    std::vector<char32_t> cps = DecodeUtf8(s);
    if (cps.empty()) return Value(name == "isascii");
    bool any_cased = false;
    for (char32_t c : cps) {
      bool digit = c >= '0' && c <= '9';
      bool alpha = IsCased(c) || (c >= 0x4E00 && c <= 0x9FFF);
      if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
        if (!digit) return Value(false);
      } else if (name == "isalpha") {
        if (!alpha) return Value(false);
      } else if (name == "isalnum") {
        if (!alpha && !digit) return Value(false);
      } else if (name == "isspace") {
        if (!IsPySpace(c)) return Value(false);
      } else if (name == "isascii") {
        if (c >= 0x80) return Value(false);
      } else if (name == "isupper") {
        if (ToUpperCp(c) != c) return Value(false);
        any_cased |= IsCased(c);
      } else if (name == "islower") {
        if (ToLowerCp(c) != c) return Value(false);
        any_cased |= IsCased(c);
      }
    }
    if (name == "isupper" || name == "islower") return Value(any_cased);
    return Value(true);
  }
  return Unimplemented("str.{}() is not supported", name);
}

bool IsDictMethod(const std::string& n) {
  return n == "get" || n == "items" || n == "keys" || n == "values" || n == "copy";
}
bool IsDictMutator(const std::string& n) {
  return n == "update" || n == "pop" || n == "popitem" || n == "setdefault" || n == "clear" ||
         n == "fromkeys";
}
bool IsListMethod(const std::string& n) { return n == "count" || n == "index" || n == "copy"; }
bool IsListMutator(const std::string& n) {
  return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
         n == "reverse" || n == "sort" || n == "clear";
}

Result<Value> DictMethod(const Value& d, const std::string& name, CallArgs& args) {
  if (name == "get") {
    MX_ASSIGN_OR_RETURN(auto a, Bind("get", args, {Req("key"), Opt("default", Value::None())}));
    const Value* v = d.dict().Find(a[0]);
    return v ? *v : a[1];
  }
  MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {}));
  if (name == "copy") return Value::MakeDict(d.dict());
  List out;
  for (const auto& [k, v] : d.dict().items) {
    if (name == "items") {
      out.push_back(Value::MakeList({k, v}, true));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  return Value::MakeList(std::move(out));
}

Result<Value> ListMethod(const Value& l, const std::string& name, CallArgs& args) {
  if (name == "copy") return Value::MakeList(l.list(), l.is_tuple());
  MX_ASSIGN_OR_RETURN(auto a, Bind(name.c_str(), args, {Req("value")}));
  int64_t n = 0;
  for (size_t k = 0; k < l.list().size(); ++k) {
    if (PyEquals(l.list()[k], a[0])) {
      if (name == "index") return Value(static_cast<int64_t>(k));
      ++n;
    }
  }
  if (name == "index") return InvalidArgument("{} is not in list", PyRepr(a[0]));
  return Value(n);
}

Value BindMethod(const Value& self, const std::string& name) {
  return Value::MakeCallable(name, [self, name](Renderer&, CallArgs& args) -> Result<Value> {
    if (self.is_string()) return StrMethod(self.str(), name, args);
    if (self.is_dict()) return DictMethod(self, name, args);
    return ListMethod(self, name, args);
  });
}

// ---- filters ----

using FilterFn = Result<Value> (*)(Renderer&, const Value&, CallArgs&);

Value SoftStr(const Value& v) { return v.is_string() ? v : Value(PyStr(v)); }

Result<Value> FAbs(Renderer&, const Value& v, CallArgs& args) {
  if (v.is_float()) return Value(std::fabs(v.f()));
  if (v.is_int() || v.is_bool()) {
    if (v.i() == INT64_MIN) return InvalidArgument("integer overflow");
    return Value(v.i() < 0 ? -v.i() : v.i());
  }
  return InvalidArgument("bad operand type for abs(): '{}'", v.TypeName());
}

Result<Value> FAttr(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("attr", args, {Req("name")}));
  if (!a[0].is_string()) return InvalidArgument("attribute name must be a string");
  if (v.is_undefined()) return v;
  if (v.is_namespace()) return GetAttr(v, a[0].str());
  if (v.is_dict()) {  // getattr() only: no item fallback
    if (IsDictMethod(a[0].str())) return BindMethod(v, a[0].str());
    return NoAttr(v, a[0].str());
  }
  return GetAttr(v, a[0].str());
}

Result<Value> FCapitalize(Renderer&, const Value& v, CallArgs&) {
  return Value(PyCapitalize(PyStr(v)));
}

Result<Value> FLength(Renderer&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case Kind::kString:
      return Value(static_cast<int64_t>(Utf8Length(v.str())));
    case Kind::kList:
      return Value(static_cast<int64_t>(v.list().size()));
    case Kind::kDict:
      if (v.is_namespace()) break;
      return Value(static_cast<int64_t>(v.dict().items.size()));
    case Kind::kUndefined:
      return Value(int64_t{0});
    default:
      break;
  }
  return InvalidArgument("object of type '{}' has no len()", v.TypeName());
}

Result<Value> FDefault(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(
      auto a,
      Bind("default", args, {Opt("default_value", Value("")), Opt("boolean", Value(false))}));
  if (v.is_undefined() || (a[1].Truthy() && !v.Truthy())) return a[0];
  return v;
}

Result<Value> FTrim(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("trim", args, {Opt("chars", Value::None())}));
  const std::string* chars = a[0].is_string() ? &a[0].str() : nullptr;
  return Value(PyStrip(PyStr(v), chars, true, true));
}

// Resolves "a.b.0" style attribute paths as jinja2's make_attrgetter does.
Value AttrPath(const Value& item, const std::string& path) {
  Value cur = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (cur.is_undefined()) return cur;
    cur = numeric ? GetItem(cur, Value(static_cast<int64_t>(std::stoll(part.substr(0, 18)))))
                  : GetItem(cur, Value(part));
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

Result<Value> FJoin(Renderer& r, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("join", args, {Opt("d", Value("")), Opt("attribute", Value::None())}));
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::string sep = PyStr(a[0]);
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    const Value& item = a[1].is_none() ? items[k] : AttrPath(items[k], PyStr(a[1]));
    out += PyStr(item);
    MX_RETURN_IF_ERROR(r.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

Result<Value> FUpper(Renderer&, const Value& v, CallArgs&) { return Value(PyUpper(PyStr(v))); }
Result<Value> FLower(Renderer&, const Value& v, CallArgs&) { return Value(PyLower(PyStr(v))); }

Result<Value> FItems(Renderer&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::MakeList({});
  if (!v.is_mapping()) return InvalidArgument("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, val] : v.dict().items) out.push_back(Value::MakeList({k, val}, true));
  return Value::MakeList(std::move(out));
}

Result<Value> FString(Renderer&, const Value& v, CallArgs&) { return SoftStr(v); }

Result<Value> FList(Renderer&, const Value& v, CallArgs&) {
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  return Value::MakeList(std::move(items));
}

Result<Value> FFirst(Renderer&, const Value& v, CallArgs&) {
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> FLast(Renderer&, const Value& v, CallArgs&) {
  if (v.is_dict()) return InvalidArgument("'dict' object is not reversible");
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> FSafe(Renderer&, const Value& v, CallArgs&) { return SoftStr(v); }

// Parses a Python int literal (optional sign, underscores between digits, base prefix
// when base is 0 or matches).
bool ParsePyInt(std::string s, int64_t base, int64_t* out) {
  s = PyStrip(s, nullptr, true, true);
  bool neg = false;
  size_t p = 0;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) neg = s[p++] == '-';
  auto lower = [](char c) { return static_cast<char>(c | 0x20); };
  if (p + 1 < s.size() && s[p] == '0') {
    char b = lower(s[p + 1]);
    int64_t pb = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      p += 2;
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || p >= s.size()) return false;
  __int128 v = 0;
  bool prev_digit = false;
  for (; p < s.size(); ++p) {
    char c = s[p];
    if (c == '_' && prev_digit && p + 1 < s.size() && s[p + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d = (c >= '0' && c <= '9')                 ? c - '0'
            : (lower(c) >= 'a' && lower(c) <= 'z') ? lower(c) - 'a' + 10
                                                   : 99;
    if (d >= base) return false;
    v = v * base + d;
    if (v > static_cast<__int128>(INT64_MAX) + 1) return false;
    prev_digit = true;
  }
  if (!prev_digit) return false;
  if (neg) v = -v;
  if (v > INT64_MAX) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool ParsePyFloat(const std::string& raw, double* out) {
  std::string s = PyStrip(raw, nullptr, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && isdigit(s[k - 1]) && isdigit(s[k + 1]))
      continue;
    clean.push_back(s[k]);
  }
  if (clean.empty()) return false;
  std::string low = PyLower(clean);
  std::string body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    *out = low[0] == '-' ? -v : v;
    return true;
  }
  for (char c : body)
    if (!(isdigit(c) || c == '.' || c == 'e' || c == '+' || c == '-')) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return false;
  *out = v;
  return true;
}

Result<Value> FInt(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("int", args, {Opt("default", Value(0)), Opt("base", Value(10))}));
  if (v.is_int() || v.is_bool()) return Value(v.i());
  if (v.is_float()) {
    if (!std::isfinite(v.f()) || std::fabs(v.f()) >= 9.2e18) return a[0];
    return Value(static_cast<int64_t>(v.f()));
  }
  if (v.is_string()) {
    int64_t base = a[1].is_int() ? a[1].i() : 10;
    int64_t out;
    if (ParsePyInt(v.str(), base, &out)) return Value(out);
    double d;
    if (ParsePyFloat(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<int64_t>(d));
  }
  return a[0];
}

Result<Value> FFloat(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("float", args, {Opt("default", Value(0.0))}));
  if (v.is_number()) return Value(v.f());
  if (v.is_string()) {
    double d;
    if (ParsePyFloat(v.str(), &d)) return Value(d);
  }
  return a[0];
}

Result<Value> FTitle(Renderer&, const Value& v, CallArgs&) {
  // jinja2's do_title: split at runs of [-\s({\[<], capitalise each word's first char.
  std::vector<char32_t> cps = DecodeUtf8(PyStr(v));
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    bool sep = c == '-' || IsPySpace(c) || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      AppendUtf8(c, &out);
      word_start = true;
    } else if (word_start) {
      if (c == 0xDF) {
        out += "SS";
      } else {
        AppendUtf8(ToUpperCp(c), &out);
      }
      word_start = false;
    } else {
      AppendUtf8(ToLowerCp(c), &out);
    }
  }
  return Value(std::move(out));
}

Result<Value> FReplace(Renderer& r, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("replace", args, {Req("old"), Req("new"), Opt("count", Value::None())}));
  int64_t count = -1;
  if (!a[2].is_none()) {
    MX_ASSIGN_OR_RETURN(count, ToIndex(a[2], "count"));
  }
  std::string out = StrReplace(PyStr(v), PyStr(a[0]), PyStr(a[1]), count);
  MX_RETURN_IF_ERROR(r.CheckSize(out.size()));
  return Value(std::move(out));
}

Result<Value> FToJson(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("tojson", args,
                           {Opt("ensure_ascii", Value(false)), Opt("indent", Value::None()),
                            Opt("separators", Value::None()), Opt("sort_keys", Value(false))}));
  JsonDumpOptions o;
  o.ensure_ascii = a[0].Truthy();
  if (a[1].is_int() || a[1].is_bool()) {
    o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(a[1].i(), 0, 1024)), ' ');
  } else if (a[1].is_string()) {
    o.indent = a[1].str();
  } else if (!a[1].is_none()) {
    return InvalidArgument("tojson: indent must be an int or a string");
  }
  if (a[2].is_list()) {
    const List& l = a[2].list();
    if (l.size() != 2 || !l[0].is_string() || !l[1].is_string())
      return InvalidArgument("tojson: separators must be a pair of strings");
    o.separators = std::make_pair(l[0].str(), l[1].str());
  } else if (!a[2].is_none()) {
    return InvalidArgument("tojson: separators must be a pair of strings");
  }
  o.sort_keys = a[3].Truthy();
  MX_ASSIGN_OR_RETURN(std::string s, PyJsonDumps(v, o));
  return Value(std::move(s));
}

// select / reject / selectattr / rejectattr.
Result<Value> SelectImpl(Renderer& r, const Value& v, CallArgs& args, bool attr, bool want) {
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  size_t k = 0;
  std::string attribute;
  if (attr) {
    if (args.pos.empty()) return InvalidArgument("Missing parameter for attribute name");
    attribute = PyStr(args.pos[0]);
    k = 1;
  }
  std::string test;
  CallArgs test_args;
  if (k < args.pos.size()) {
    test = PyStr(args.pos[k]);
    test_args.pos.assign(args.pos.begin() + k + 1, args.pos.end());
    test_args.kw = args.kw;
    if (!HasTest(test)) return InvalidArgument("No test named '{}'.", test);
  }
  List out;
  for (const Value& item : items) {
    Value x = attr ? AttrPath(item, attribute) : item;
    bool ok;
    if (test.empty()) {
      ok = x.Truthy();
    } else {
      CallArgs ta = test_args;
      MX_ASSIGN_OR_RETURN(ok, ApplyTest(r, test, x, ta));
    }
    if (ok == want) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> FSelect(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, false, true);
}
Result<Value> FReject(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, false, false);
}
Result<Value> FSelectAttr(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, true, true);
}
Result<Value> FRejectAttr(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, true, false);
}

Result<Value> FMap(Renderer& r, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  List out;
  if (args.pos.empty()) {
    std::string attribute;
    Value def;
    bool has_attr = false;
    for (const auto& [k, val] : args.kw) {
      if (k == "attribute") {
        attribute = PyStr(val);
        has_attr = true;
      } else if (k == "default") {
        def = val;
      } else {
        return InvalidArgument("map() got an unexpected keyword argument '{}'", k);
      }
    }
    if (!has_attr) return InvalidArgument("map requires a filter argument");
    for (const Value& item : items) {
      Value x = AttrPath(item, attribute);
      out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
    }
    return Value::MakeList(std::move(out));
  }
  std::string filter = PyStr(args.pos[0]);
  if (!HasFilter(filter)) return InvalidArgument("No filter named '{}'.", filter);
  CallArgs fa;
  fa.pos.assign(args.pos.begin() + 1, args.pos.end());
  fa.kw = args.kw;
  for (const Value& item : items) {
    CallArgs a = fa;
    MX_ASSIGN_OR_RETURN(Value x, ApplyFilter(r, filter, item, a));
    out.push_back(std::move(x));
  }
  return Value::MakeList(std::move(out));
}

Value SortKey(const Value& item, const std::string& attribute, bool case_sensitive) {
  Value x = attribute.empty() ? item : AttrPath(item, attribute);
  if (!case_sensitive && x.is_string()) return Value(PyLower(x.str()));
  return x;
}

Status SortValues(List* items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> idx(items->size());
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = k;
  Status err;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    if (!err.ok()) return false;
    Result<bool> lt = reverse ? PyLess(keys[b], keys[a]) : PyLess(keys[a], keys[b]);
    if (!lt.ok()) {
      err = lt.status();
      return false;
    }
    return *lt;
  });
  MX_RETURN_IF_ERROR(err);
  List out;
  out.reserve(items->size());
  for (size_t k : idx) out.push_back((*items)[k]);
  *items = std::move(out);
  return Status::Ok();
}

Result<Value> FSort(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("sort", args,
                           {Opt("reverse", Value(false)), Opt("case_sensitive", Value(false)),
                            Opt("attribute", Value::None())}));
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::string attribute = a[2].is_none() ? "" : PyStr(a[2]);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(SortKey(item, attribute, a[1].Truthy()));
  MX_RETURN_IF_ERROR(SortValues(&items, keys, a[0].Truthy()));
  return Value::MakeList(std::move(items));
}

Result<Value> FDictSort(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("dictsort", args,
                                   {Opt("case_sensitive", Value(false)), Opt("by", Value("key")),
                                    Opt("reverse", Value(false))}));
  if (!v.is_mapping()) return InvalidArgument("dictsort: expected a mapping");
  List items;
  std::vector<Value> keys;
  const bool by_value = PyStr(a[1]) == "value";
  for (const auto& [k, val] : v.dict().items) {
    items.push_back(Value::MakeList({k, val}, true));
    keys.push_back(SortKey(by_value ? val : k, "", a[0].Truthy()));
  }
  MX_RETURN_IF_ERROR(SortValues(&items, keys, a[2].Truthy()));
  return Value::MakeList(std::move(items));
}

Result<Value> FUnique(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(
      auto a,
      Bind("unique", args, {Opt("case_sensitive", Value(false)), Opt("attribute", Value::None())}));
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::string attribute = a[1].is_none() ? "" : PyStr(a[1]);
  List out;
  std::vector<Value> seen;
  for (const Value& item : items) {
    Value key = SortKey(item, attribute, a[0].Truthy());
    bool dup = false;
    for (const Value& s : seen)
      if (PyEquals(s, key)) dup = true;
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> MinMax(const Value& v, CallArgs& args, bool want_max) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind(want_max ? "max" : "min", args,
                           {Opt("case_sensitive", Value(false)), Opt("attribute", Value::None())}));
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  std::string attribute = a[1].is_none() ? "" : PyStr(a[1]);
  size_t best = 0;
  Value best_key = SortKey(items[0], attribute, a[0].Truthy());
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = SortKey(items[k], attribute, a[0].Truthy());
    MX_ASSIGN_OR_RETURN(bool better, want_max ? PyLess(best_key, key) : PyLess(key, best_key));
    if (better) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}

Result<Value> FMin(Renderer&, const Value& v, CallArgs& a) { return MinMax(v, a, false); }
Result<Value> FMax(Renderer&, const Value& v, CallArgs& a) { return MinMax(v, a, true); }

Result<Value> FSum(Renderer& r, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a,
                      Bind("sum", args, {Opt("attribute", Value::None()), Opt("start", Value(0))}));
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  Value total = a[1];
  std::string attribute = a[0].is_none() ? "" : PyStr(a[0]);
  for (const Value& item : items) {
    MX_ASSIGN_OR_RETURN(
        total,
        BinaryOp("+", total, attribute.empty() ? item : AttrPath(item, attribute), r.limits()));
  }
  return total;
}

Result<Value> FReverse(Renderer&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::vector<char32_t> cps = DecodeUtf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(EncodeUtf8(std::u32string_view(cps.data(), cps.size())));
  }
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Result<Value> FRound(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(
      auto a, Bind("round", args, {Opt("precision", Value(0)), Opt("method", Value("common"))}));
  if (!v.is_number()) return InvalidArgument("round: expected a number, got '{}'", v.TypeName());
  MX_ASSIGN_OR_RETURN(int64_t prec, ToIndex(a[0], "precision"));
  prec = std::clamp<int64_t>(prec, -300, 300);
  const std::string method = PyStr(a[1]);
  if (method != "common" && method != "ceil" && method != "floor")
    return InvalidArgument("method must be common, ceil or floor");
  if (method == "common") {
    // Python's round(): exact, ties to even; int stays int.
    if (!v.is_float() && prec >= 0) return Value(v.i());
    if (prec >= 0 && std::isfinite(v.f())) {
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(prec), v.f());
      return Value(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(-prec));
    double r = std::nearbyint(v.f() / scale) * scale;
    if (!v.is_float()) return Value(static_cast<int64_t>(r));
    return Value(r);
  }
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.f() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Result<Value> FWordCount(Renderer&, const Value& v, CallArgs&) {
  return Value(static_cast<int64_t>(SplitWhitespace(PyStr(v), -1).size()));
}

Result<Value> FEscape(Renderer&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : PyStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Result<Value> FIndent(Renderer& r, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("indent", args,
                                   {Opt("width", Value(4)), Opt("first", Value(false)),
                                    Opt("blank", Value(false))}));
  std::string ind = a[0].is_string() ? a[0].str()
                                     : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                       a[0].is_number() ? a[0].i() : 4, 0, 1024)),
                                                   ' ');
  CallArgs none;
  MX_ASSIGN_OR_RETURN(Value lines_v, StrMethod(PyStr(v) + "\n", "splitlines", none));
  const List& lines = lines_v.list();
  std::string out;
  if (a[2].Truthy()) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) out += "\n" + ind;
      out += lines[k].str();
    }
  } else {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) {
        out += "\n";
        if (!lines[k].str().empty()) out += ind;
      }
      out += lines[k].str();
      MX_RETURN_IF_ERROR(r.CheckSize(out.size()));
    }
  }
  if (a[1].Truthy()) out = ind + out;
  return Value(std::move(out));
}

Result<Value> FCenter(Renderer&, const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("center", args, {Opt("width", Value(80))}));
  std::string s = PyStr(v);
  int64_t len = static_cast<int64_t>(Utf8Length(s));
  int64_t w = std::min<int64_t>(a[0].is_number() ? a[0].i() : 80, 1 << 20);
  if (w <= len) return Value(s);
  int64_t marg = w - len;
  int64_t left = marg / 2 + (marg & w & 1);
  return Value(std::string(left, ' ') + s + std::string(marg - left, ' '));
}

const std::unordered_map<std::string, FilterFn>& Filters() {
  static const auto* table = new std::unordered_map<std::string, FilterFn>{
      {"abs", FAbs},
      {"attr", FAttr},
      {"capitalize", FCapitalize},
      {"center", FCenter},
      {"count", FLength},
      {"d", FDefault},
      {"default", FDefault},
      {"dictsort", FDictSort},
      {"e", FEscape},
      {"escape", FEscape},
      {"first", FFirst},
      {"float", FFloat},
      {"indent", FIndent},
      {"int", FInt},
      {"items", FItems},
      {"join", FJoin},
      {"last", FLast},
      {"length", FLength},
      {"list", FList},
      {"lower", FLower},
      {"map", FMap},
      {"max", FMax},
      {"min", FMin},
      {"reject", FReject},
      {"rejectattr", FRejectAttr},
      {"replace", FReplace},
      {"reverse", FReverse},
      {"round", FRound},
      {"safe", FSafe},
      {"select", FSelect},
      {"selectattr", FSelectAttr},
      {"sort", FSort},
      {"string", FString},
      {"sum", FSum},
      {"title", FTitle},
      {"tojson", FToJson},
      {"trim", FTrim},
      {"unique", FUnique},
      {"upper", FUpper},
      {"wordcount", FWordCount},
  };
  return *table;
}

// ---- tests ----

using TestFn = Result<bool> (*)(const Value&, CallArgs&);

Result<bool> TDefined(const Value& v, CallArgs&) { return !v.is_undefined(); }
Result<bool> TUndefined(const Value& v, CallArgs&) { return v.is_undefined(); }
Result<bool> TNone(const Value& v, CallArgs&) { return v.is_none(); }
Result<bool> TBoolean(const Value& v, CallArgs&) { return v.is_bool(); }
Result<bool> TTrue(const Value& v, CallArgs&) { return v.is_bool() && v.b(); }
Result<bool> TFalse(const Value& v, CallArgs&) { return v.is_bool() && !v.b(); }
Result<bool> TInteger(const Value& v, CallArgs&) { return v.is_int(); }
Result<bool> TFloat(const Value& v, CallArgs&) { return v.is_float(); }
Result<bool> TNumber(const Value& v, CallArgs&) { return v.is_number(); }
Result<bool> TString(const Value& v, CallArgs&) { return v.is_string(); }
Result<bool> TMapping(const Value& v, CallArgs&) { return v.is_mapping(); }
Result<bool> TIterable(const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined();
}
Result<bool> TSequence(const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_mapping();
}
Result<bool> TCallable(const Value& v, CallArgs&) { return v.is_callable(); }
Result<bool> TEscaped(const Value&, CallArgs&) { return false; }

Result<Value> OneArg(const char* name, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind(name, args, {Req("other")}));
  return a[0];
}

Result<bool> TEq(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("eq", args));
  return PyEquals(v, o);
}
Result<bool> TNe(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("ne", args));
  return !PyEquals(v, o);
}
Result<bool> TLt(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("lt", args));
  return PyLess(v, o);
}
Result<bool> TGt(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("gt", args));
  return PyLess(o, v);
}
Result<bool> TLe(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("le", args));
  MX_ASSIGN_OR_RETURN(bool gt, PyLess(o, v));
  return !gt;
}
Result<bool> TGe(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("ge", args));
  MX_ASSIGN_OR_RETURN(bool lt, PyLess(v, o));
  return !lt;
}
Result<bool> TIn(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("in", args));
  return Contains(o, v);
}
Result<bool> TSameAs(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("sameas", args));
  if (v.kind() != o.kind()) return false;
  if (v.is_list() || v.is_dict()) return &v.list() == &o.list();
  return PyEquals(v, o) && (v.is_none() || v.is_bool() || v.is_undefined());
}
Result<bool> TOdd(const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) return InvalidArgument("odd: expected an integer");
  return (v.i() % 2) != 0;
}
Result<bool> TEven(const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) return InvalidArgument("even: expected an integer");
  return (v.i() % 2) == 0;
}
Result<bool> TDivisibleBy(const Value& v, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value o, OneArg("divisibleby", args));
  if (!v.is_number() || !o.is_number()) return InvalidArgument("divisibleby: expected numbers");
  if (o.f() == 0) return InvalidArgument("integer division or modulo by zero");
  if (v.is_float() || o.is_float()) return std::fmod(v.f(), o.f()) == 0;
  return v.i() % o.i() == 0;
}
Result<bool> TLowerT(const Value& v, CallArgs&) {
  if (!v.is_string()) return false;
  return PyLower(v.str()) == v.str() && PyUpper(v.str()) != v.str();
}
Result<bool> TUpperT(const Value& v, CallArgs&) {
  if (!v.is_string()) return false;
  return PyUpper(v.str()) == v.str() && PyLower(v.str()) != v.str();
}
Result<bool> TFilter(const Value& v, CallArgs&) { return v.is_string() && HasFilter(v.str()); }
Result<bool> TTest(const Value& v, CallArgs&) { return v.is_string() && HasTest(v.str()); }

const std::unordered_map<std::string, TestFn>& Tests() {
  static const auto* table = new std::unordered_map<std::string, TestFn>{
      {"boolean", TBoolean},
      {"callable", TCallable},
      {"defined", TDefined},
      {"divisibleby", TDivisibleBy},
      {"eq", TEq},
      {"equalto", TEq},
      {"==", TEq},
      {"escaped", TEscaped},
      {"even", TEven},
      {"false", TFalse},
      {"filter", TFilter},
      {"float", TFloat},
      {"ge", TGe},
      {">=", TGe},
      {"gt", TGt},
      {">", TGt},
      {"greaterthan", TGt},
      {"in", TIn},
      {"integer", TInteger},
      {"iterable", TIterable},
      {"le", TLe},
      {"<=", TLe},
      {"lower", TLowerT},
      {"lt", TLt},
      {"<", TLt},
      {"lessthan", TLt},
      {"mapping", TMapping},
      {"ne", TNe},
      {"!=", TNe},
      {"none", TNone},
      {"number", TNumber},
      {"odd", TOdd},
      {"sameas", TSameAs},
      {"sequence", TSequence},
      {"string", TString},
      {"test", TTest},
      {"true", TTrue},
      {"undefined", TUndefined},
      {"upper", TUpperT},
  };
  return *table;
}

// ---- globals ----

Result<Value> GRange(Renderer& r, CallArgs& args) {
  if (!args.kw.empty()) return InvalidArgument("range() takes no keyword arguments");
  if (args.pos.empty() || args.pos.size() > 3)
    return InvalidArgument("range expected 1 to 3 arguments, got {}", args.pos.size());
  int64_t v[3] = {0, 0, 1};
  for (size_t k = 0; k < args.pos.size(); ++k) {
    MX_ASSIGN_OR_RETURN(v[k], ToIndex(args.pos[k], "range() argument"));
  }
  int64_t start = 0, stop = 0, step = 1;
  if (args.pos.size() == 1) {
    stop = v[0];
  } else {
    start = v[0];
    stop = v[1];
    step = args.pos.size() == 3 ? v[2] : 1;
  }
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && start < stop) count = ((__int128)stop - start - 1) / step + 1;
  if (step < 0 && start > stop) count = ((__int128)start - stop - 1) / (-(__int128)step) + 1;
  if (count > r.limits().max_range)
    return InvalidArgument("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                           r.limits().max_range);
  MX_RETURN_IF_ERROR(r.Step(static_cast<int64_t>(count)));
  List out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.push_back(Value(start + k * step));
  return Value::MakeList(std::move(out));
}

Result<Value> GDict(Renderer&, CallArgs& args) {
  Dict d;
  if (args.pos.size() > 1) return InvalidArgument("dict expected at most 1 argument");
  if (!args.pos.empty()) {
    const Value& src = args.pos[0];
    if (src.is_mapping()) {
      d = src.dict();
    } else {
      MX_ASSIGN_OR_RETURN(List items, Iterate(src));
      for (const Value& item : items) {
        if (!item.is_list() || item.list().size() != 2)
          return InvalidArgument("dictionary update sequence element has wrong length");
        d.Set(item.list()[0], item.list()[1]);
      }
    }
  }
  for (auto& [k, v] : args.kw) d.Set(Value(k), v);
  return Value::MakeDict(std::move(d));
}

Result<Value> GNamespace(Renderer& r, CallArgs& args) {
  Value ns = r.MakeNamespace();
  if (args.pos.size() > 1)
    return InvalidArgument("namespace expected at most 1 positional argument");
  if (!args.pos.empty()) {
    if (!args.pos[0].is_mapping()) return InvalidArgument("namespace() argument must be a dict");
    for (const auto& [k, v] : args.pos[0].dict().items) ns.dict().Set(k, v);
  }
  for (auto& [k, v] : args.kw) ns.dict().Set(Value(k), v);
  return ns;
}

Result<Value> GRaise(Renderer&, CallArgs& args) {
  std::string msg = args.pos.empty() ? std::string("raise_exception called") : PyStr(args.pos[0]);
  return InvalidArgument("{}", msg);
}

Result<Value> GStrftimeNow(Renderer&, CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, Bind("strftime_now", args, {Req("format")}));
  if (!a[0].is_string()) return InvalidArgument("strftime_now: format must be a string");
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof(buf), a[0].str().c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kDict:
      if (obj.is_namespace()) {
        if (const Value* v = obj.dict().Find(std::string_view(name))) return *v;
        return NoAttr(obj, name);
      }
      if (IsDictMethod(name)) return BindMethod(obj, name);
      if (IsDictMutator(name)) return Unsafe(obj, name);
      if (const Value* v = obj.dict().Find(std::string_view(name))) return *v;
      return NoAttr(obj, name);
    case Kind::kString:
      if (IsStrMethod(name)) return BindMethod(obj, name);
      return NoAttr(obj, name);
    case Kind::kList:
      if (IsListMethod(name)) return BindMethod(obj, name);
      if (IsListMutator(name) && !obj.is_tuple()) return Unsafe(obj, name);
      return NoAttr(obj, name);
    default:
      return NoAttr(obj, name);
  }
}

Value GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kDict:
      if (!obj.is_namespace()) {
        if (const Value* v = obj.dict().Find(key)) return *v;
      }
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined(
          fmt::format("'{}' has no element {}", ObjectTypeRepr(obj), PyRepr(key)));
    case Kind::kList:
    case Kind::kString: {
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.i();
        if (obj.is_list()) {
          const int64_t n = static_cast<int64_t>(obj.list().size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.list()[i];
        } else {
          const std::string& s = obj.str();
          if (IsAscii(s)) {
            const int64_t n = static_cast<int64_t>(s.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return Value(std::string(1, s[i]));
          } else {
            std::vector<char32_t> cps = DecodeUtf8(s);
            const int64_t n = static_cast<int64_t>(cps.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return Value(EncodeUtf8(std::u32string_view(&cps[i], 1)));
          }
        }
        return Value::Undefined(
            fmt::format("'{}' has no element {}", ObjectTypeRepr(obj), key.i()));
      }
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined(
          fmt::format("'{}' has no element {}", ObjectTypeRepr(obj), PyRepr(key)));
    }
    default:
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined(
          fmt::format("'{}' has no element {}", ObjectTypeRepr(obj), PyRepr(key)));
  }
}

Result<Value> SliceValue(const Value& obj, const Value& start, const Value& stop,
                         const Value& step) {
  if (obj.is_list()) {
    const List& l = obj.list();
    MX_ASSIGN_OR_RETURN(SliceIdx s, AdjustSlice(static_cast<int64_t>(l.size()), start, stop, step));
    List out;
    out.reserve(s.count);
    for (int64_t k = 0, i = s.start; k < s.count; ++k, i += s.step) out.push_back(l[i]);
    return Value::MakeList(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::string& str = obj.str();
    if (IsAscii(str)) {
      MX_ASSIGN_OR_RETURN(SliceIdx s,
                          AdjustSlice(static_cast<int64_t>(str.size()), start, stop, step));
      std::string out;
      out.reserve(s.count);
      for (int64_t k = 0, i = s.start; k < s.count; ++k, i += s.step) out.push_back(str[i]);
      return Value(std::move(out));
    }
    std::vector<char32_t> cps = DecodeUtf8(str);
    MX_ASSIGN_OR_RETURN(SliceIdx s,
                        AdjustSlice(static_cast<int64_t>(cps.size()), start, stop, step));
    std::string out;
    for (int64_t k = 0, i = s.start; k < s.count; ++k, i += s.step) AppendUtf8(cps[i], &out);
    return Value(std::move(out));
  }
  return Value::Undefined(fmt::format("'{}' object is not subscriptable", obj.TypeName()));
}

Result<Value> ApplyFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end()) return InvalidArgument("No filter named '{}'.", name);
  return it->second(r, v, args);
}

Result<bool> ApplyTest(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  auto it = Tests().find(name);
  if (it == Tests().end()) return InvalidArgument("No test named '{}'.", name);
  return it->second(v, args);
}

bool HasFilter(const std::string& name) { return Filters().count(name) > 0; }
bool HasTest(const std::string& name) { return Tests().count(name) > 0; }

Value BuiltinGlobal(const std::string& name) {
  using Fn = Result<Value> (*)(Renderer&, CallArgs&);
  static const std::pair<const char*, Fn> kGlobals[] = {
      {"range", GRange},
      {"dict", GDict},
      {"namespace", GNamespace},
      {"raise_exception", GRaise},
      {"strftime_now", GStrftimeNow},
  };
  for (const auto& [n, fn] : kGlobals)
    if (name == n) return Value::MakeCallable(n, fn);
  return Value();
}

}  // namespace mx::jinja
