// Statement execution and expression evaluation for the Jinja engine.
#include "tokenizer/jinja_render.h"

#include <cmath>
#include <limits>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_unicode.h"

namespace mx::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

namespace {

std::shared_ptr<Scope> Child(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

Status UndefinedError(const Value& v) {
  return InvalidArgument("{}", v.str().empty() ? "value is undefined" : v.str());
}

bool MulOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Result<Value> Repeat(const Value& seq, int64_t n, const RenderLimits& limits) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    int64_t total = 0;
    if (MulOverflow(static_cast<int64_t>(seq.str().size()), n, &total) ||
        static_cast<size_t>(total) > limits.max_string_bytes)
      return ResourceExhausted("string repetition exceeds the {} byte limit",
                               limits.max_string_bytes);
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  int64_t total = 0;
  if (MulOverflow(static_cast<int64_t>(seq.list().size()), n, &total) || total > 10'000'000)
    return ResourceExhausted("list repetition too large");
  List out;
  out.reserve(total);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::MakeList(std::move(out), seq.is_tuple());
}

Status Unsupported(const std::string& op, const Value& a, const Value& b) {
  return InvalidArgument("unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(),
                         b.TypeName());
}

double PyFloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  if (m == 0) m = std::copysign(0.0, b);
  return m;
}

}  // namespace

Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b,
                       const RenderLimits& limits) {
  if (op == "~") {
    std::string s = PyStr(a);
    s += PyStr(b);
    if (s.size() > limits.max_string_bytes)
      return ResourceExhausted("string exceeds the {} byte limit", limits.max_string_bytes);
    return Value(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.i(), b.i(), &r)) return InvalidArgument("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.f() + b.f());
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > limits.max_string_bytes)
        return ResourceExhausted("string exceeds the {} byte limit", limits.max_string_bytes);
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      if (a.list().size() + b.list().size() > 10'000'000)
        return ResourceExhausted("list too large");
      List out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(out), a.is_tuple());
    }
    if (a.is_string() || a.is_list())
      return InvalidArgument("can only concatenate {} (not \"{}\") to {}", a.TypeName(),
                             b.TypeName(), a.TypeName());
    return Unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.i(), b.i(), &r)) return InvalidArgument("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.f() - b.f());
    return Unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (MulOverflow(a.i(), b.i(), &r)) return InvalidArgument("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.f() * b.f());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
      return Repeat(a, b.i(), limits);
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
      return Repeat(b, a.i(), limits);
    if (a.is_string() || b.is_string() || a.is_list() || b.is_list())
      return InvalidArgument("can't multiply sequence by non-int of type '{}'",
                             (a.is_string() || a.is_list()) ? b.TypeName() : a.TypeName());
    return Unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) return Unsupported("/", a, b);
    if (b.f() == 0) return InvalidArgument("division by zero");
    return Value(a.f() / b.f());
  }
  if (op == "//") {
    if (!nums) return Unsupported("//", a, b);
    if (ints) {
      if (b.i() == 0) return InvalidArgument("integer division or modulo by zero");
      if (a.i() == std::numeric_limits<int64_t>::min() && b.i() == -1)
        return InvalidArgument("integer overflow");
      int64_t q = a.i() / b.i();
      if ((a.i() % b.i() != 0) && ((a.i() < 0) != (b.i() < 0))) --q;
      return Value(q);
    }
    if (b.f() == 0) return InvalidArgument("float floor division by zero");
    return Value(std::floor(a.f() / b.f()));
  }
  if (op == "%") {
    if (a.is_string())
      return Unimplemented("printf-style string formatting ('%') is not supported");
    if (!nums) return Unsupported("%", a, b);
    if (ints) {
      if (b.i() == 0) return InvalidArgument("integer division or modulo by zero");
      if (b.i() == -1) return Value(int64_t{0});
      int64_t m = a.i() % b.i();
      if (m != 0 && ((m < 0) != (b.i() < 0))) m += b.i();
      return Value(m);
    }
    if (b.f() == 0) return InvalidArgument("float modulo");
    return Value(PyFloorMod(a.f(), b.f()));
  }
  if (op == "**") {
    if (!nums) return Unsupported("** or pow()", a, b);
    if (ints && b.i() >= 0) {
      int64_t base = a.i(), e = b.i(), r = 1;
      while (e > 0) {
        if (e & 1) {
          if (MulOverflow(r, base, &r)) return InvalidArgument("integer overflow");
        }
        e >>= 1;
        if (e > 0 && MulOverflow(base, base, &base)) return InvalidArgument("integer overflow");
      }
      return Value(r);
    }
    if (a.f() == 0 && b.f() < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.f(), b.f()));
  }
  return Internal("unknown operator {}", op);
}

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string())
        return InvalidArgument("'in <string>' requires string as left operand, not {}",
                               item.TypeName());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.list())
        if (PyEquals(v, item)) return true;
      return false;
    case Kind::kDict:
      if (container.is_namespace())
        return InvalidArgument("argument of type 'Namespace' is not iterable");
      return container.dict().Find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    default:
      return InvalidArgument("argument of type '{}' is not iterable", container.TypeName());
  }
}

Result<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
      return v.list();
    case Kind::kDict: {
      if (v.is_namespace()) return InvalidArgument("'Namespace' object is not iterable");
      List keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      List chars;
      size_t pos = 0;
      const std::string& s = v.str();
      while (pos < s.size()) {
        size_t start = pos;
        DecodeUtf8At(s, &pos);
        chars.emplace_back(s.substr(start, pos - start));
      }
      return chars;
    }
    case Kind::kUndefined:
      return List{};
    default:
      return InvalidArgument("'{}' object is not iterable", v.TypeName());
  }
}

Renderer::Renderer(const Template& tmpl, const Dict& globals, const RenderLimits& limits)
    : tmpl_(tmpl), limits_(limits), root_(std::make_shared<Scope>()) {
  for (const auto& [k, v] : globals.items)
    if (k.is_string()) root_->Set(k.str(), v);
}

Renderer::~Renderer() {
  // Namespaces are the only mutable containers, so the only way to build a reference
  // cycle; clear them so that every value is freed.
  for (Value& ns : namespaces_) ns.dict().items.clear();
  if (root_) root_->vars.clear();
}

Value Renderer::MakeNamespace() {
  Value ns = Value::MakeNamespace();
  namespaces_.push_back(ns);
  return ns;
}

Status Renderer::Located(const Status& s, int line, int col) {
  if (s.ok() || error_located_) return s;
  error_located_ = true;
  return Status(s.code(), fmt::format("{}:{}:{}: {}", tmpl_.name, line, col, s.message()));
}

Status Renderer::Step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    return ResourceExhausted("template exceeded {} evaluation steps", limits_.max_steps);
  return Status::Ok();
}

Status Renderer::CheckSize(size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    return ResourceExhausted("template output exceeds the {} byte limit", limits_.max_string_bytes);
  return Status::Ok();
}

Status Renderer::Append(std::string* out, std::string_view text) const {
  MX_RETURN_IF_ERROR(CheckSize(out->size() + text.size()));
  out->append(text);
  return Status::Ok();
}

Result<std::string> Renderer::Run() {
  std::string out;
  auto flow = Exec(tmpl_.body, root_, &out);
  if (!flow.ok()) return flow.status();
  return out;
}

Value Renderer::Lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const {
  if (const Value* v = scope->Find(name)) return *v;
  Value g = BuiltinGlobal(name);
  if (!g.is_undefined()) return g;
  return Value::Undefined(fmt::format("'{}' is undefined", name));
}

Result<Renderer::Flow> Renderer::Exec(const Body& body, const std::shared_ptr<Scope>& scope,
                                      std::string* out) {
  for (const StmtPtr& s : body) {
    MX_ASSIGN_OR_RETURN(Flow f, ExecStmt(*s, scope, out));
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Status Renderer::Assign(const Stmt& s, const Value& v, Scope& scope) {
  if (!s.target_is_tuple) {
    scope.Set(s.targets[0], v);
    return Status::Ok();
  }
  MX_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (v.is_dict() || v.is_undefined())
    return InvalidArgument("cannot unpack a {} into {} names", v.TypeName(), s.targets.size());
  if (items.size() > s.targets.size())
    return InvalidArgument("too many values to unpack (expected {})", s.targets.size());
  if (items.size() < s.targets.size())
    return InvalidArgument("not enough values to unpack (expected {}, got {})", s.targets.size(),
                           items.size());
  for (size_t k = 0; k < items.size(); ++k) scope.Set(s.targets[k], items[k]);
  return Status::Ok();
}

Result<Renderer::Flow> Renderer::ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope,
                                          std::string* out) {
  MX_RETURN_IF_ERROR(Located(Step(), s.line, s.col));
  if (++depth_ > limits_.max_depth) {
    --depth_;
    return Located(ResourceExhausted("template recursion deeper than {}", limits_.max_depth),
                   s.line, s.col);
  }
  struct Leave {
    int* d;
    ~Leave() { --*d; }
  } leave{&depth_};

  switch (s.kind) {
    case Stmt::Kind::kData:
      MX_RETURN_IF_ERROR(Located(Append(out, s.text), s.line, s.col));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      if (v.is_string()) {
        MX_RETURN_IF_ERROR(Located(Append(out, v.str()), s.line, s.col));
      } else {
        MX_RETURN_IF_ERROR(Located(Append(out, PyStr(v)), s.line, s.col));
      }
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t k = 0; k < s.conds.size(); ++k) {
        MX_ASSIGN_OR_RETURN(Value c, Eval(*s.conds[k], scope));
        if (c.Truthy()) return Exec(s.bodies[k], scope, out);
      }
      return Exec(s.else_body, scope, out);
    case Stmt::Kind::kFor:
      MX_RETURN_IF_ERROR(ExecFor(s, scope, out));
      return Flow::kNormal;
    case Stmt::Kind::kSet: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      if (!s.text.empty()) {  // namespace attribute
        Value ns = Lookup(s.targets[0], scope);
        if (!ns.is_namespace())
          return Located(InvalidArgument("cannot assign attribute on non-namespace object"), s.line,
                         s.col);
        ns.dict().Set(Value(s.text), std::move(v));
        return Flow::kNormal;
      }
      MX_RETURN_IF_ERROR(Located(Assign(s, v, *scope), s.line, s.col));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock:
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      auto inner = Child(scope);
      MX_ASSIGN_OR_RETURN(Flow f, Exec(s.body, inner, &body));
      (void)f;
      Value v(std::move(body));
      if (s.expr) {
        auto fs = Child(scope);
        fs->Set("__body__", v);
        MX_ASSIGN_OR_RETURN(v, Eval(*s.expr, fs));
      }
      if (s.kind == Stmt::Kind::kSetBlock) {
        scope->Set(s.targets[0], std::move(v));
      } else {
        MX_RETURN_IF_ERROR(Located(Append(out, PyStr(v)), s.line, s.col));
      }
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro: {
      const Stmt* macro = &s;
      std::weak_ptr<Scope> def_scope = scope;
      std::weak_ptr<Scope> root = root_;
      scope->Set(s.text,
                 Value::MakeCallable(s.text, [macro, def_scope, root](Renderer& r, CallArgs& args) {
                   std::shared_ptr<Scope> sc = def_scope.lock();
                   if (!sc) sc = root.lock();
                   if (!sc) return Result<Value>(Internal("macro called after render"));
                   return r.CallMacro(*macro, sc, args);
                 }));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kWith: {
      auto inner = Child(scope);
      for (size_t k = 0; k < s.targets.size(); ++k) {
        MX_ASSIGN_OR_RETURN(Value v, Eval(*s.values[k], scope));
        inner->Set(s.targets[k], std::move(v));
      }
      MX_ASSIGN_OR_RETURN(Flow f, Exec(s.body, inner, out));
      return f;
    }
  }
  return Flow::kNormal;
}

Status Renderer::ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string* out) {
  MX_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr, scope));
  auto iter = Iterate(seq);
  if (!iter.ok()) return Located(iter.status(), s.expr->line, s.expr->col);
  List items = std::move(*iter);
  if (s.cond) {
    List kept;
    for (const Value& item : items) {
      auto fs = Child(scope);
      MX_RETURN_IF_ERROR(Located(Assign(s, item, *fs), s.line, s.col));
      MX_ASSIGN_OR_RETURN(Value c, Eval(*s.cond, fs));
      if (c.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto inner = Child(scope);
    MX_ASSIGN_OR_RETURN(Flow f, Exec(s.else_body, inner, out));
    (void)f;
    return Status::Ok();
  }
  const int64_t n = static_cast<int64_t>(items.size());
  static const Value kKeys[] = {"index",  "index0", "revindex", "revindex0", "first",    "last",
                                "length", "depth",  "depth0",   "previtem",  "nextitem", "cycle"};
  auto index0 = std::make_shared<int64_t>(0);
  const Value cycle =
      Value::MakeCallable("cycle", [index0](Renderer&, CallArgs& a) -> Result<Value> {
        if (a.pos.empty()) return InvalidArgument("no items for cycling given");
        return a.pos[static_cast<size_t>(*index0) % a.pos.size()];
      });
  for (int64_t k = 0; k < n; ++k) {
    MX_RETURN_IF_ERROR(Located(Step(), s.line, s.col));
    *index0 = k;
    auto inner = Child(scope);
    MX_RETURN_IF_ERROR(Located(Assign(s, items[k], *inner), s.line, s.col));
    Dict loop;
    loop.items.reserve(12);
    const Value vals[] = {Value(k + 1),
                          Value(k),
                          Value(n - k),
                          Value(n - k - 1),
                          Value(k == 0),
                          Value(k == n - 1),
                          Value(n),
                          Value(int64_t{1}),
                          Value(int64_t{0}),
                          k > 0 ? items[k - 1] : Value::Undefined("there is no previous item"),
                          k + 1 < n ? items[k + 1] : Value::Undefined("there is no next item"),
                          cycle};
    for (int i = 0; i < 12; ++i) loop.items.emplace_back(kKeys[i], vals[i]);
    inner->Set("loop", Value::MakeDict(std::move(loop)));
    MX_ASSIGN_OR_RETURN(Flow f, Exec(s.body, inner, out));
    if (f == Flow::kBreak) break;
  }
  return Status::Ok();
}

Result<Value> Renderer::CallMacro(const Stmt& macro, const std::shared_ptr<Scope>& def_scope,
                                  CallArgs& args) {
  const size_t n_params = macro.params.size();
  if (args.pos.size() > n_params)
    return InvalidArgument("macro '{}' takes not more than {} argument(s)", macro.text, n_params);
  auto scope = Child(def_scope);
  std::vector<bool> bound(n_params, false);
  for (size_t k = 0; k < args.pos.size(); ++k) {
    scope->Set(macro.params[k].name, args.pos[k]);
    bound[k] = true;
  }
  for (auto& [key, value] : args.kw) {
    size_t k = 0;
    while (k < n_params && macro.params[k].name != key) ++k;
    if (k == n_params)
      return InvalidArgument("macro '{}' takes no keyword argument '{}'", macro.text, key);
    if (bound[k])
      return InvalidArgument("macro '{}' got multiple values for argument '{}'", macro.text, key);
    scope->Set(key, value);
    bound[k] = true;
  }
  for (size_t k = 0; k < n_params; ++k) {
    if (bound[k]) continue;
    const MacroParam& p = macro.params[k];
    if (p.default_value) {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*p.default_value, scope));
      scope->Set(p.name, std::move(v));
    } else {
      scope->Set(p.name, Value::Undefined(fmt::format("parameter '{}' was not provided", p.name)));
    }
  }
  scope->Set("varargs", Value::MakeList({}));
  scope->Set("kwargs", Value::MakeDict());
  std::string out;
  MX_ASSIGN_OR_RETURN(Flow f, Exec(macro.body, scope, &out));
  (void)f;
  return Value(std::move(out));
}

Result<Value> Renderer::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_callable())
    return InvalidArgument("'{}' object is not callable", callee.TypeName());
  return callee.callable().fn(*this, args);
}

Status Renderer::EvalCallArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope,
                              CallArgs* args) {
  for (size_t k = first; k < e.args.size(); ++k) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k], scope));
    args->pos.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.kwargs) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args->kw.emplace_back(key, std::move(v));
  }
  return Status::Ok();
}

Result<Value> Renderer::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  MX_RETURN_IF_ERROR(Located(Step(), e.line, e.col));
  if (++depth_ > limits_.max_depth) {
    --depth_;
    return Located(ResourceExhausted("template recursion deeper than {}", limits_.max_depth),
                   e.line, e.col);
  }
  Result<Value> r = EvalInner(e, scope);
  --depth_;
  if (!r.ok()) return Located(r.status(), e.line, e.col);
  return r;
}

Result<Value> Renderer::EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return Lookup(e.name, scope);
    case Expr::Kind::kGetattr: {
      MX_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      return GetAttr(obj, e.name);
    }
    case Expr::Kind::kGetitem: {
      MX_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      MX_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      MX_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      Value parts[3];
      for (int k = 0; k < 3; ++k) {
        if (e.args[k + 1]) {
          MX_ASSIGN_OR_RETURN(parts[k], Eval(*e.args[k + 1], scope));
        } else {
          parts[k] = Value::None();
        }
      }
      return SliceValue(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: {
      MX_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0], scope));
      CallArgs args;
      MX_RETURN_IF_ERROR(EvalCallArgs(e, 1, scope, &args));
      return Call(callee, args);
    }
    case Expr::Kind::kFilter: {
      if (!HasFilter(e.name)) return InvalidArgument("No filter named '{}'.", e.name);
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      CallArgs args;
      MX_RETURN_IF_ERROR(EvalCallArgs(e, 1, scope, &args));
      return ApplyFilter(*this, e.name, v, args);
    }
    case Expr::Kind::kTest: {
      if (!HasTest(e.name)) return InvalidArgument("No test named '{}'.", e.name);
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      CallArgs args;
      MX_RETURN_IF_ERROR(EvalCallArgs(e, 1, scope, &args));
      MX_ASSIGN_OR_RETURN(bool b, ApplyTest(*this, e.name, v, args));
      return Value(b);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      if (v.is_undefined()) return UndefinedError(v);
      if (!v.is_number())
        return InvalidArgument("bad operand type for unary {}: '{}'",
                               e.kind == Expr::Kind::kNeg ? "-" : "+", v.TypeName());
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value(v.i()) : v;
      if (v.is_float()) return Value(-v.f());
      if (v.i() == std::numeric_limits<int64_t>::min()) return InvalidArgument("integer overflow");
      return Value(-v.i());
    }
    case Expr::Kind::kNot: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      return Value(!v.Truthy());
    }
    case Expr::Kind::kAnd: {
      MX_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
      if (!a.Truthy()) return a;
      return Eval(*e.args[1], scope);
    }
    case Expr::Kind::kOr: {
      MX_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
      if (a.Truthy()) return a;
      return Eval(*e.args[1], scope);
    }
    case Expr::Kind::kBinary: {
      MX_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
      MX_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], scope));
      return BinaryOp(e.name, a, b, limits_);
    }
    case Expr::Kind::kCompare: {
      MX_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], scope));
      for (size_t k = 0; k < e.ops.size(); ++k) {
        MX_ASSIGN_OR_RETURN(Value right, Eval(*e.args[k + 1], scope));
        const std::string& op = e.ops[k];
        bool r = false;
        if (op == "==") {
          r = PyEquals(left, right);
        } else if (op == "!=") {
          r = !PyEquals(left, right);
        } else if (op == "in" || op == "notin") {
          MX_ASSIGN_OR_RETURN(r, Contains(right, left));
          if (op == "notin") r = !r;
        } else {
          if (left.is_undefined()) return UndefinedError(left);
          if (right.is_undefined()) return UndefinedError(right);
          if (op == "<") {
            MX_ASSIGN_OR_RETURN(r, PyLess(left, right));
          } else if (op == ">") {
            MX_ASSIGN_OR_RETURN(r, PyLess(right, left));
          } else if (op == "<=") {
            MX_ASSIGN_OR_RETURN(bool gt, PyLess(right, left));
            r = !gt && (PyEquals(left, right) || PyLess(left, right).value());
          } else {  // >=
            MX_ASSIGN_OR_RETURN(bool lt, PyLess(left, right));
            r = !lt && (PyEquals(left, right) || PyLess(right, left).value());
          }
        }
        if (!r) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::kCondExpr: {
      MX_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0], scope));
      if (c.Truthy()) return Eval(*e.args[1], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value::Undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was "
          "defined.",
          e.line));
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) {
        MX_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        MX_ASSIGN_OR_RETURN(Value key, Eval(*e.args[k], scope));
        MX_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1], scope));
        if (key.is_list() && !key.is_tuple()) return InvalidArgument("unhashable type: 'list'");
        if (key.is_dict()) return InvalidArgument("unhashable type: 'dict'");
        d.Set(std::move(key), std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
  }
  return Internal("unknown expression kind");
}

}  // namespace mx::jinja
