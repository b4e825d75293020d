// The Jinja interpreter: walks a parsed Template (jinja_ast.h) against a dict of globals
// and produces the output string, with jinja2's runtime semantics (scoping of for/macro
// bodies, namespaces, Undefined, loop variables). Internal to the engine; the public entry
// point is jinja.h.
//
// Every failure is a Status ("NAME:LINE:COL: message"); nothing a template does can crash
// or hang the process: steps, output size, string size and recursion depth are bounded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace mx::jinja {

struct RenderLimits {
  int64_t max_steps = 5'000'000;        // expression evaluations + statements
  size_t max_string_bytes = 64u << 20;  // any single string, including the output
  int max_depth = 400;                  // nested evaluation (macros recurse through it)
  int64_t max_range = 100'000;          // jinja2.sandbox.MAX_RANGE
};

struct Scope;

class Renderer {
 public:
  Renderer(const Template& tmpl, const Dict& globals, const RenderLimits& limits);
  ~Renderer();

  Result<std::string> Run();

  // Used by builtins (jinja_builtins.cpp).
  Result<Value> Call(const Value& callee, CallArgs& args);
  Status CheckSize(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }
  Value MakeNamespace();  // tracked, so reference cycles are broken after the render
  // Counts `n` units of work against limits().max_steps.
  Status Step(int64_t n = 1);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string* out);
  Result<Flow> ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string* out);
  Status ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string* out);
  Result<Value> Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Result<Value> EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Status EvalCallArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope,
                      CallArgs* args);
  Result<Value> CallMacro(const Stmt& macro, const std::shared_ptr<Scope>& def_scope,
                          CallArgs& args);
  Value Lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const;
  Status Assign(const Stmt& s, const Value& v, Scope& scope);
  Status Located(const Status& s, int line, int col);
  Status Append(std::string* out, std::string_view text) const;

  const Template& tmpl_;
  RenderLimits limits_;
  std::shared_ptr<Scope> root_;
  int64_t steps_ = 0;
  int depth_ = 0;
  bool error_located_ = false;
  std::vector<Value> namespaces_;
};

// Binary operators with Python semantics ("+", "-", "*", "/", "//", "%", "**", "~").
Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b,
                       const RenderLimits& limits);
// `item in container`.
Result<bool> Contains(const Value& container, const Value& item);
// Iteration as Python's iter(): list items, dict keys, string characters; Undefined is empty.
Result<List> Iterate(const Value& v);

}  // namespace mx::jinja
