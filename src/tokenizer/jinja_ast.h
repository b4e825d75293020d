// The syntax tree of a parsed Jinja template (see jinja_parser.h for the grammar, which is
// jinja2.parser's).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace mx::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,   // value
    kName,      // name
    kGetattr,   // args[0].name
    kGetitem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null parts absent)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is name(args[1..], kwargs)
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kNot,       // not args[0]
    kBinary,    // args[0] op args[1]: + - * / // % ** ~
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
    kList,      // [args...]
    kTuple,     // (args...)
    kDict,      // {args[0]: args[1], ...}
  };
  Kind kind;
  int line = 0;
  int col = 0;
  Value value;                   // kLiteral
  std::string name;              // kName, kGetattr, kFilter, kTest, kBinary operator
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind : uint8_t {
    kData,      // text
    kOutput,    // {{ expr }}
    kIf,        // conds[i] -> bodies[i]; else_body
    kFor,       // for targets in expr [if cond] body else else_body
    kSet,       // targets = expr; or namespace attribute: targets[0].attr = expr
    kSetBlock,  // {% set targets[0] %}body{% endset %}
    kMacro,     // macro name(params) body
    kBreak,
    kContinue,
    kFilterBlock,  // {% filter %}: expr is a filter chain applied to kName "__body__"
    kWith,         // {% with targets[i] = values[i] %} body
  };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;                  // kData; kMacro name; kSet namespace attribute
  ExprPtr expr;                      // kOutput, kFor iterable, kSet value, kFilterBlock
  ExprPtr cond;                      // kFor filter
  std::vector<std::string> targets;  // kFor / kSet / kSetBlock / kWith names
  bool target_is_tuple = false;      // `for k, v in ...` / `set a, b = ...`
  std::vector<ExprPtr> conds;        // kIf
  std::vector<Body> bodies;          // kIf
  std::vector<ExprPtr> values;       // kWith
  Body body;
  Body else_body;
  std::vector<MacroParam> params;  // kMacro
};

struct Template {
  std::string name;
  Body body;
};

}  // namespace mx::jinja
