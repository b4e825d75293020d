// Python-faithful behaviour of Jinja values: str(), repr(), ==, <, json.dumps.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_unicode.h"

namespace mx::jinja {

namespace {
constexpr int kMaxReprDepth = 128;
}  // namespace

Value::Value(std::string s) : kind_(Kind::kString) {
  ptr_ = std::make_shared<std::string>(std::move(s));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::MakeList(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.flag_ = tuple;
  v.ptr_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::MakeDict() { return MakeDict(Dict{}); }

Value Value::MakeDict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::MakeNamespace() {
  Value v = MakeDict();
  v.flag_ = true;
  return v;
}

Value Value::MakeCallable(std::string name, std::function<Result<Value>(Renderer&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ptr_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

bool Value::is_tuple() const { return kind_ == Kind::kList && flag_; }
bool Value::is_namespace() const { return kind_ == Kind::kDict && flag_; }

const std::string& Value::str() const {
  static const std::string kEmpty;
  if ((kind_ == Kind::kString || kind_ == Kind::kUndefined) && ptr_)
    return *static_cast<const std::string*>(ptr_.get());
  return kEmpty;
}

List& Value::list() const { return *static_cast<List*>(ptr_.get()); }
Dict& Value::dict() const { return *static_cast<Dict*>(ptr_.get()); }
const Callable& Value::callable() const { return *static_cast<const Callable*>(ptr_.get()); }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !list().empty();
    case Kind::kDict:
      return is_namespace() || !dict().items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return is_namespace() ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (PyEquals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (PyEquals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.f() == b.f();
    return a.i() == b.i();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.list();
      const List& y = b.list();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!PyEquals(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (&x == &y) return true;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.Find(k);
        if (!o || !PyEquals(v, *o)) return false;
      }
      return true;
    }
    case Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

Result<bool> PyLess(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.f() < b.f();
    return a.i() < b.i();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (PyEquals(x[i], y[i])) continue;
      return PyLess(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument("'<' not supported between instances of '{}' and '{}'", a.TypeName(),
                         b.TypeName());
}

void AppendFloatRepr(double d, std::string* out) {
  if (std::isnan(d)) {
    out->append("nan");
    return;
  }
  if (std::isinf(d)) {
    out->append(d < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);  // [-]d[.ddd]e(+|-)XX
  bool neg = false;
  if (!sci.empty() && sci[0] == '-') {
    neg = true;
    sci.remove_prefix(1);
  }
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits.push_back(c);
  int exp = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exp);
  if (neg) out->push_back('-');
  const int decpt = exp + 1;
  if (decpt <= -4 || decpt > 16) {
    out->push_back(digits[0]);
    if (digits.size() > 1) {
      out->push_back('.');
      out->append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out->append(eb);
  } else if (decpt <= 0) {
    out->append("0.");
    out->append(static_cast<size_t>(-decpt), '0');
    out->append(digits);
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out->append(digits);
    out->append(decpt - digits.size(), '0');
    out->append(".0");
  } else {
    out->append(digits, 0, decpt);
    out->push_back('.');
    out->append(digits, decpt);
  }
}

void AppendStringRepr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  size_t pos = 0;
  char buf[16];
  while (pos < s.size()) {
    char32_t c = DecodeUtf8At(s, &pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (IsPyPrintable(c)) {
      AppendUtf8(c, out);
    } else if (c < 0x100) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out->append(buf);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out->append(buf);
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out->append(buf);
    }
  }
  out->push_back(quote);
}

namespace {

void AppendRepr(const Value& v, int depth, std::string* out);

void AppendStr(const Value& v, int depth, std::string* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kString:
      out->append(v.str());
      return;
    default:
      AppendRepr(v, depth, out);
  }
}

void AppendRepr(const Value& v, int depth, std::string* out) {
  if (depth > kMaxReprDepth) {
    out->append("...");
    return;
  }
  switch (v.kind()) {
    case Kind::kUndefined:
      out->append("Undefined");
      return;
    case Kind::kNone:
      out->append("None");
      return;
    case Kind::kBool:
      out->append(v.b() ? "True" : "False");
      return;
    case Kind::kInt:
      out->append(std::to_string(v.i()));
      return;
    case Kind::kFloat:
      AppendFloatRepr(v.f(), out);
      return;
    case Kind::kString:
      AppendStringRepr(v.str(), out);
      return;
    case Kind::kList: {
      const List& l = v.list();
      out->push_back(v.is_tuple() ? '(' : '[');
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out->append(", ");
        AppendRepr(l[i], depth + 1, out);
      }
      if (v.is_tuple() && l.size() == 1) out->push_back(',');
      out->push_back(v.is_tuple() ? ')' : ']');
      return;
    }
    case Kind::kDict: {
      if (v.is_namespace()) out->append("<Namespace ");
      out->push_back('{');
      bool first = true;
      for (const auto& [k, val] : v.dict().items) {
        if (!first) out->append(", ");
        first = false;
        AppendRepr(k, depth + 1, out);
        out->append(": ");
        AppendRepr(val, depth + 1, out);
      }
      out->push_back('}');
      if (v.is_namespace()) out->push_back('>');
      return;
    }
    case Kind::kCallable:
      out->append("<function " + v.callable().name + ">");
      return;
  }
}

}  // namespace

std::string PyStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendStr(v, 0, &out);
  return out;
}

std::string PyRepr(const Value& v) {
  std::string out;
  AppendRepr(v, 0, &out);
  return out;
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  char buf[16];
  size_t pos = 0;
  while (pos < s.size()) {
    const unsigned char byte = static_cast<unsigned char>(s[pos]);
    if (byte >= 0x20 && byte < 0x7F && byte != '"' && byte != '\\') {
      out->push_back(static_cast<char>(byte));
      ++pos;
      continue;
    }
    if (byte >= 0x80 && !ensure_ascii) {
      // Copy the code point as it is (invalid bytes become U+FFFD).
      AppendUtf8(DecodeUtf8At(s, &pos), out);
      continue;
    }
    char32_t c = DecodeUtf8At(s, &pos);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c == 0x7F && !ensure_ascii) {
          out->push_back(static_cast<char>(c));
        } else if (c < 0x10000) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out->append(buf);
        } else {
          const char32_t v = c - 0x10000;
          std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                        static_cast<unsigned>(0xD800 + (v >> 10)),
                        static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          out->append(buf);
        }
    }
  }
  out->push_back('"');
}

namespace {

struct JsonWriter {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string* out;

  Status Newline(int level) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*opt.indent);
    return Status::Ok();
  }

  Result<std::string> KeyString(const Value& k) {
    switch (k.kind()) {
      case Kind::kString:
        return k.str();
      case Kind::kBool:
        return std::string(k.b() ? "true" : "false");
      case Kind::kNone:
        return std::string("null");
      case Kind::kInt:
        return std::to_string(k.i());
      case Kind::kFloat: {
        std::string s;
        if (std::isnan(k.f())) return std::string("NaN");
        if (std::isinf(k.f())) return std::string(k.f() < 0 ? "-Infinity" : "Infinity");
        AppendFloatRepr(k.f(), &s);
        return s;
      }
      default:
        return InvalidArgument("keys must be str, int, float, bool or None, not {}", k.TypeName());
    }
  }

  Status Write(const Value& v, int level) {
    if (level > kMaxReprDepth) return InvalidArgument("tojson: nesting too deep (circular?)");
    switch (v.kind()) {
      case Kind::kNone:
        out->append("null");
        return Status::Ok();
      case Kind::kBool:
        out->append(v.b() ? "true" : "false");
        return Status::Ok();
      case Kind::kInt:
        out->append(std::to_string(v.i()));
        return Status::Ok();
      case Kind::kFloat:
        if (std::isnan(v.f())) {
          out->append("NaN");
        } else if (std::isinf(v.f())) {
          out->append(v.f() < 0 ? "-Infinity" : "Infinity");
        } else {
          AppendFloatRepr(v.f(), out);
        }
        return Status::Ok();
      case Kind::kString:
        AppendJsonString(v.str(), opt.ensure_ascii, out);
        return Status::Ok();
      case Kind::kList: {
        const List& l = v.list();
        if (l.empty()) {
          out->append("[]");
          return Status::Ok();
        }
        out->push_back('[');
        for (size_t i = 0; i < l.size(); ++i) {
          if (i) out->append(item_sep);
          if (opt.indent) MX_RETURN_IF_ERROR(Newline(level + 1));
          MX_RETURN_IF_ERROR(Write(l[i], level + 1));
        }
        if (opt.indent) MX_RETURN_IF_ERROR(Newline(level));
        out->push_back(']');
        return Status::Ok();
      }
      case Kind::kDict: {
        if (v.is_namespace())
          return InvalidArgument("Object of type Namespace is not JSON serializable");
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.dict().items) items.push_back(&kv);
        if (items.empty()) {
          out->append("{}");
          return Status::Ok();
        }
        if (opt.sort_keys) {
          Status err;
          std::stable_sort(items.begin(), items.end(), [&](auto* a, auto* b) {
            Result<bool> lt = PyLess(a->first, b->first);
            if (!lt.ok()) {
              err = lt.status();
              return false;
            }
            return *lt;
          });
          MX_RETURN_IF_ERROR(err);
        }
        out->push_back('{');
        bool first = true;
        for (const auto* kv : items) {
          if (!first) out->append(item_sep);
          first = false;
          if (opt.indent) MX_RETURN_IF_ERROR(Newline(level + 1));
          MX_ASSIGN_OR_RETURN(std::string key, KeyString(kv->first));
          AppendJsonString(key, opt.ensure_ascii, out);
          out->append(key_sep);
          MX_RETURN_IF_ERROR(Write(kv->second, level + 1));
        }
        if (opt.indent) MX_RETURN_IF_ERROR(Newline(level));
        out->push_back('}');
        return Status::Ok();
      }
      default:
        return InvalidArgument("Object of type {} is not JSON serializable", v.TypeName());
    }
  }
};

template <typename J>
Value FromJsonImpl(const J& j, int depth) {
  if (depth > 512) return Value::None();
  switch (j.type()) {
    case J::value_t::null:
      return Value::None();
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e, depth + 1));
      return Value::MakeList(std::move(items));
    }
    case J::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(Value(it.key()), FromJsonImpl(it.value(), depth + 1));
      return Value::MakeDict(std::move(d));
    }
    default:
      return Value::None();
  }
}

}  // namespace

Result<std::string> PyJsonDumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter w{options, ", ", ": ", &out};
  if (options.indent) w.item_sep = ",";
  if (options.separators) {
    w.item_sep = options.separators->first;
    w.key_sep = options.separators->second;
  }
  MX_RETURN_IF_ERROR(w.Write(v, 0));
  return out;
}

Value FromJson(const nlohmann::ordered_json& j) { return FromJsonImpl(j, 0); }
Value FromJson(const nlohmann::json& j) { return FromJsonImpl(j, 0); }

}  // namespace mx::jinja
