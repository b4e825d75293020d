// Recursive-descent parser transcribing jinja2/parser.py.
#include "tokenizer/jinja_parser.h"

#include <charconv>
#include <cstdlib>

#include "tokenizer/jinja_lexer.h"

namespace mx::jinja {
namespace {

const char* TokName(Tok t) {
  switch (t) {
    case Tok::kData:
      return "template data";
    case Tok::kVarBegin:
      return "begin of print statement";
    case Tok::kVarEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
      return "name";
    case Tok::kString:
      return "string";
    case Tok::kInt:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kOp:
      return "operator";
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

std::string Describe(const Token& t) {
  if (t.type == Tok::kName || t.type == Tok::kOp || t.type == Tok::kInt || t.type == Tok::kFloat)
    return "'" + t.text + "'";
  if (t.type == Tok::kString) return "string";
  return std::string("'") + TokName(t.type) + "'";
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view name) : t_(std::move(tokens)), name_(name) {}

  Result<Body> ParseAll() {
    MX_ASSIGN_OR_RETURN(Body body, Subparse({}));
    return body;
  }

 private:
  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) { ++p->depth_; }
    ~DepthGuard() { --p->depth_; }
  };

  const Token& Cur() const { return t_[i_]; }
  const Token& Look() const { return t_[i_ + 1 < t_.size() ? i_ + 1 : i_]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == Tok::kName && Cur().text == n; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }

  Status Fail(const Token& at, const std::string& message) const {
    return InvalidArgument("{}:{}:{}: {}", name_, at.line, at.col, message);
  }
  Status Fail(const std::string& message) const { return Fail(Cur(), message); }

  Status ExpectOp(const char* op) {
    if (SkipOp(op)) return Status::Ok();
    return Fail(fmt::format("expected token '{}', got {}", op, Describe(Cur())));
  }
  Status Expect(Tok type) {
    if (Cur().type == type) {
      Next();
      return Status::Ok();
    }
    return Fail(fmt::format("expected token '{}', got {}", TokName(type), Describe(Cur())));
  }
  Result<std::string> ExpectName() {
    if (Cur().type != Tok::kName)
      return Fail(fmt::format("expected token 'name', got {}", Describe(Cur())));
    std::string n = Cur().text;
    Next();
    return n;
  }
  Status CheckDepth() const {
    if (depth_ > kMaxParseDepth)
      return Fail(fmt::format("template nested too deeply (more than {} levels)", kMaxParseDepth));
    return Status::Ok();
  }

  ExprPtr NewExpr(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  StmtPtr NewStmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // ---- statements ----

  // Parses until a block whose first name is one of `end_tokens`; leaves the cursor on that
  // name. With no end tokens, parses to the end of the template.
  Result<Body> Subparse(const std::vector<const char*>& end_tokens) {
    DepthGuard g(this);
    MX_RETURN_IF_ERROR(CheckDepth());
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == Tok::kEof) {
        if (!end_tokens.empty()) return FailEof(end_tokens);
        return body;
      }
      if (tok.type == Tok::kData) {
        auto s = NewStmt(Stmt::Kind::kData, tok);
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
        continue;
      }
      if (tok.type == Tok::kVarBegin) {
        auto s = NewStmt(Stmt::Kind::kOutput, tok);
        Next();
        MX_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, {}, false));
        MX_RETURN_IF_ERROR(Expect(Tok::kVarEnd));
        body.push_back(std::move(s));
        continue;
      }
      if (tok.type == Tok::kBlockBegin) {
        Next();
        for (const char* e : end_tokens)
          if (IsName(e)) return body;
        MX_ASSIGN_OR_RETURN(StmtPtr s, ParseStatement(end_tokens));
        if (s) body.push_back(std::move(s));
        MX_RETURN_IF_ERROR(Expect(Tok::kBlockEnd));
        continue;
      }
      return Fail(fmt::format("unexpected {}", Describe(tok)));
    }
  }

  static std::string JoinTags(const std::vector<const char*>& tags) {
    std::string s;
    for (size_t k = 0; k < tags.size(); ++k) {
      if (k) s += k + 1 == tags.size() ? " or " : ", ";
      s += "'" + std::string(tags[k]) + "'";
    }
    return s;
  }

  Status FailEof(const std::vector<const char*>& end_tokens) const {
    std::string msg = "Unexpected end of template. Jinja was looking for the following tags: " +
                      JoinTags(end_tokens) + ".";
    if (!open_blocks_.empty())
      msg += fmt::format(" The innermost block that needs to be closed is '{}' (line {}).",
                         open_blocks_.back().first, open_blocks_.back().second);
    return Fail(msg);
  }

  struct BlockScope {
    Parser* p;
    BlockScope(Parser* parser, std::string tag, int line) : p(parser) {
      p->open_blocks_.emplace_back(std::move(tag), line);
    }
    ~BlockScope() { p->open_blocks_.pop_back(); }
  };

  // After the opening tag's arguments: expect its `%}` and parse the body.
  Result<Body> ParseStatements(const std::vector<const char*>& end_tokens, bool drop_needle) {
    SkipOp(":");
    MX_RETURN_IF_ERROR(Expect(Tok::kBlockEnd));
    MX_ASSIGN_OR_RETURN(Body body, Subparse(end_tokens));
    if (drop_needle) Next();
    return body;
  }

  Result<StmtPtr> ParseStatement(const std::vector<const char*>& end_tokens) {
    const Token& tok = Cur();
    if (tok.type != Tok::kName) return Fail("tag name expected");
    const std::string& n = tok.text;
    if (n == "for") return ParseFor();
    if (n == "if") return ParseIf();
    if (n == "set") return ParseSet();
    if (n == "macro") return ParseMacro();
    if (n == "filter") return ParseFilterBlock();
    if (n == "with") return ParseWith();
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) return Fail(fmt::format("'{}' outside loop", n));
      auto s = NewStmt(n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, tok);
      Next();
      return s;
    }
    if (n == "call" || n == "block" || n == "extends" || n == "include" || n == "import" ||
        n == "from" || n == "autoescape" || n == "do")
      return Fail(fmt::format("tag '{}' is not supported by mxserve's chat template engine", n));
    std::string msg = fmt::format("Encountered unknown tag '{}'.", n);
    if (!end_tokens.empty())
      msg += " Jinja was looking for the following tags: " + JoinTags(end_tokens) + ".";
    return Fail(msg);
  }

  // Assignment target: a name, or names separated by commas (optionally parenthesized).
  Status ParseAssignTarget(Stmt* s, const char* extra_end) {
    bool paren = SkipOp("(");
    while (true) {
      if (Cur().type != Tok::kName || IsName("true") || IsName("false") || IsName("none") ||
          IsName("True") || IsName("False") || IsName("None"))
        return Fail(fmt::format("can't assign to {}", Describe(Cur())));
      s->targets.push_back(Cur().text);
      Next();
      if (!IsOp(",")) break;
      s->target_is_tuple = true;
      Next();
      if ((paren && IsOp(")")) || (extra_end && IsName(extra_end)) || IsOp("=")) break;
    }
    if (paren) MX_RETURN_IF_ERROR(ExpectOp(")"));
    return Status::Ok();
  }

  Result<StmtPtr> ParseFor() {
    auto s = NewStmt(Stmt::Kind::kFor, Cur());
    BlockScope bs(this, "for", Cur().line);
    Next();
    MX_RETURN_IF_ERROR(ParseAssignTarget(s.get(), "in"));
    if (!SkipName("in")) return Fail(fmt::format("expected token 'in', got {}", Describe(Cur())));
    MX_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, false, "recursive", false));
    if (SkipName("if")) {
      MX_ASSIGN_OR_RETURN(s->cond, ParseExpression(true));
    }
    if (IsName("recursive")) return Fail("recursive loops are not supported");
    ++loop_depth_;
    auto body = ParseStatements({"endfor", "else"}, false);
    --loop_depth_;
    if (!body.ok()) return body.status();
    s->body = std::move(*body);
    bool is_else = IsName("else");
    Next();
    if (is_else) {
      MX_ASSIGN_OR_RETURN(s->else_body, ParseStatements({"endfor"}, true));
    }
    return s;
  }

  Result<StmtPtr> ParseIf() {
    auto s = NewStmt(Stmt::Kind::kIf, Cur());
    BlockScope bs(this, "if", Cur().line);
    Next();
    while (true) {
      MX_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, false, nullptr, false));
      s->conds.push_back(std::move(cond));
      MX_ASSIGN_OR_RETURN(Body body, ParseStatements({"elif", "else", "endif"}, false));
      s->bodies.push_back(std::move(body));
      std::string which = Cur().text;
      Next();
      if (which == "elif") continue;
      if (which == "else") {
        MX_ASSIGN_OR_RETURN(s->else_body, ParseStatements({"endif"}, true));
      }
      break;
    }
    return s;
  }

  Result<StmtPtr> ParseSet() {
    const Token& at = Cur();
    Next();
    if (Cur().type == Tok::kName && Look().type == Tok::kOp && Look().text == ".") {
      auto s = NewStmt(Stmt::Kind::kSet, at);
      s->targets.push_back(Cur().text);
      Next();
      Next();
      MX_ASSIGN_OR_RETURN(s->text, ExpectName());
      MX_RETURN_IF_ERROR(ExpectOp("="));
      MX_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, nullptr, false));
      return s;
    }
    auto s = NewStmt(Stmt::Kind::kSet, at);
    MX_RETURN_IF_ERROR(ParseAssignTarget(s.get(), nullptr));
    if (SkipOp("=")) {
      MX_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, nullptr, false));
      return s;
    }
    if (s->target_is_tuple) return Fail("a block set needs a single name");
    s->kind = Stmt::Kind::kSetBlock;
    if (IsOp("|")) {
      auto body_ref = NewExpr(Expr::Kind::kName, Cur());
      body_ref->name = "__body__";
      MX_ASSIGN_OR_RETURN(s->expr, ParseFilter(std::move(body_ref), false));
    }
    BlockScope bs(this, "set", at.line);
    MX_ASSIGN_OR_RETURN(s->body, ParseStatements({"endset"}, true));
    return s;
  }

  Result<StmtPtr> ParseMacro() {
    auto s = NewStmt(Stmt::Kind::kMacro, Cur());
    BlockScope bs(this, "macro", Cur().line);
    Next();
    MX_ASSIGN_OR_RETURN(s->text, ExpectName());
    MX_RETURN_IF_ERROR(ExpectOp("("));
    bool seen_default = false;
    while (!IsOp(")")) {
      if (!s->params.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      MacroParam p;
      MX_ASSIGN_OR_RETURN(p.name, ExpectName());
      if (SkipOp("=")) {
        MX_ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
        seen_default = true;
      } else if (seen_default) {
        return Fail("non-default argument follows default argument");
      }
      s->params.push_back(std::move(p));
    }
    MX_RETURN_IF_ERROR(ExpectOp(")"));
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    auto body = ParseStatements({"endmacro"}, true);
    loop_depth_ = saved_loop_depth;
    if (!body.ok()) return body.status();
    s->body = std::move(*body);
    return s;
  }

  Result<StmtPtr> ParseFilterBlock() {
    auto s = NewStmt(Stmt::Kind::kFilterBlock, Cur());
    BlockScope bs(this, "filter", Cur().line);
    Next();
    auto body_ref = NewExpr(Expr::Kind::kName, Cur());
    body_ref->name = "__body__";
    MX_ASSIGN_OR_RETURN(s->expr, ParseFilter(std::move(body_ref), true));
    MX_ASSIGN_OR_RETURN(s->body, ParseStatements({"endfilter"}, true));
    return s;
  }

  Result<StmtPtr> ParseWith() {
    auto s = NewStmt(Stmt::Kind::kWith, Cur());
    BlockScope bs(this, "with", Cur().line);
    Next();
    while (Cur().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      MX_ASSIGN_OR_RETURN(std::string target, ExpectName());
      s->targets.push_back(std::move(target));
      MX_RETURN_IF_ERROR(ExpectOp("="));
      MX_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      s->values.push_back(std::move(v));
    }
    MX_ASSIGN_OR_RETURN(s->body, ParseStatements({"endwith"}, true));
    return s;
  }

  // ---- expressions ----

  bool IsTupleEnd(const char* extra_end) const {
    if (Cur().type == Tok::kVarEnd || Cur().type == Tok::kBlockEnd || IsOp(")")) return true;
    return extra_end && IsName(extra_end);
  }

  Result<ExprPtr> ParseTuple(bool simplified, bool with_condexpr, const char* extra_end,
                             bool explicit_parentheses) {
    const Token& at = Cur();
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra_end)) break;
      if (simplified) {
        MX_ASSIGN_OR_RETURN(ExprPtr e, ParsePrimary());
        args.push_back(std::move(e));
      } else {
        MX_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
        args.push_back(std::move(e));
      }
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses)
        return Fail(fmt::format("Expected an expression, got {}", Describe(Cur())));
    }
    auto t = NewExpr(Expr::Kind::kTuple, at);
    t->args = std::move(args);
    return t;
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard g(this);
    MX_RETURN_IF_ERROR(CheckDepth());
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  Result<ExprPtr> ParseCondExpr() {
    const Token& at = Cur();
    MX_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
    while (SkipName("if")) {
      MX_ASSIGN_OR_RETURN(ExprPtr expr2, ParseOr());
      ExprPtr expr3;
      if (SkipName("else")) {
        MX_ASSIGN_OR_RETURN(expr3, ParseCondExpr());
      }
      auto c = NewExpr(Expr::Kind::kCondExpr, at);
      c->args.push_back(std::move(expr2));
      c->args.push_back(std::move(expr1));
      c->args.push_back(std::move(expr3));
      expr1 = std::move(c);
    }
    return expr1;
  }

  Result<ExprPtr> ParseOr() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const Token& at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      auto e = NewExpr(Expr::Kind::kOr, at);
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const Token& at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      auto e = NewExpr(Expr::Kind::kAnd, at);
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard g(this);
      MX_RETURN_IF_ERROR(CheckDepth());
      auto e = NewExpr(Expr::Kind::kNot, Cur());
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr x, ParseNot());
      e->args.push_back(std::move(x));
      return e;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    const Token& at = Cur();
    MX_ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Look().type == Tok::kName && Look().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = NewExpr(Expr::Kind::kCompare, at);
        cmp->args.push_back(std::move(expr));
      }
      MX_ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(rhs));
    }
    if (cmp) return cmp;
    return expr;
  }

  ExprPtr Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
    auto e = NewExpr(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  Result<ExprPtr> ParseMath1() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      Token at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(at, at.text, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      Token at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      left = Binary(at, "~", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseMath2() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      Token at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(at, at.text, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    MX_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      Token at = Cur();
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary(at, "**", std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard g(this);
    MX_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = NewExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur());
      Next();
      MX_ASSIGN_OR_RETURN(ExprPtr x, ParseUnary(false));
      node->args.push_back(std::move(x));
    } else {
      MX_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    MX_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      MX_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    DepthGuard g(this);
    MX_RETURN_IF_ERROR(CheckDepth());
    const Token& tok = Cur();
    switch (tok.type) {
      case Tok::kName: {
        auto e = NewExpr(Expr::Kind::kLiteral, tok);
        if (tok.text == "true" || tok.text == "True") {
          e->value = Value(true);
        } else if (tok.text == "false" || tok.text == "False") {
          e->value = Value(false);
        } else if (tok.text == "none" || tok.text == "None") {
          e->value = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = tok.text;
        }
        Next();
        return e;
      }
      case Tok::kString: {
        auto e = NewExpr(Expr::Kind::kLiteral, tok);
        std::string s;
        while (Cur().type == Tok::kString) {
          s += Cur().text;
          Next();
        }
        e->value = Value(std::move(s));
        return e;
      }
      case Tok::kInt: {
        auto e = NewExpr(Expr::Kind::kLiteral, tok);
        int64_t v = 0;
        std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        e->value = Value(v);
        Next();
        return e;
      }
      case Tok::kFloat: {
        auto e = NewExpr(Expr::Kind::kLiteral, tok);
        e->value = Value(std::strtod(tok.text.c_str(), nullptr));
        Next();
        return e;
      }
      case Tok::kOp:
        if (tok.text == "(") {
          Next();
          MX_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(false, true, nullptr, true));
          MX_RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (tok.text == "[") return ParseList();
        if (tok.text == "{") return ParseDict();
        break;
      default:
        break;
    }
    return Fail(fmt::format("unexpected {}", Describe(tok)));
  }

  Result<ExprPtr> ParseList() {
    auto e = NewExpr(Expr::Kind::kList, Cur());
    MX_RETURN_IF_ERROR(ExpectOp("["));
    while (!IsOp("]")) {
      if (!e->args.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      MX_ASSIGN_OR_RETURN(ExprPtr x, ParseExpression(true));
      e->args.push_back(std::move(x));
    }
    MX_RETURN_IF_ERROR(ExpectOp("]"));
    return e;
  }

  Result<ExprPtr> ParseDict() {
    auto e = NewExpr(Expr::Kind::kDict, Cur());
    MX_RETURN_IF_ERROR(ExpectOp("{"));
    while (!IsOp("}")) {
      if (!e->args.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      MX_ASSIGN_OR_RETURN(ExprPtr k, ParseExpression(true));
      MX_RETURN_IF_ERROR(ExpectOp(":"));
      MX_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      e->args.push_back(std::move(k));
      e->args.push_back(std::move(v));
    }
    MX_RETURN_IF_ERROR(ExpectOp("}"));
    return e;
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        MX_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        MX_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        MX_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
      } else if (IsName("is")) {
        MX_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        MX_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
    Token tok = Cur();
    Next();
    if (tok.text == ".") {
      const Token& attr = Cur();
      if (attr.type == Tok::kName) {
        auto e = NewExpr(Expr::Kind::kGetattr, tok);
        e->line = node->line;
        e->col = node->col;
        e->name = attr.text;
        e->args.push_back(std::move(node));
        Next();
        return e;
      }
      if (attr.type != Tok::kInt) return Fail(attr, "expected name or number");
      auto e = NewExpr(Expr::Kind::kGetitem, tok);
      auto key = NewExpr(Expr::Kind::kLiteral, attr);
      int64_t v = 0;
      std::from_chars(attr.text.data(), attr.text.data() + attr.text.size(), v);
      key->value = Value(v);
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(key));
      Next();
      return e;
    }
    // '['
    std::vector<ExprPtr> args;
    while (!IsOp("]")) {
      if (!args.empty()) MX_RETURN_IF_ERROR(ExpectOp(","));
      MX_ASSIGN_OR_RETURN(ExprPtr a, ParseSubscribed());
      args.push_back(std::move(a));
    }
    MX_RETURN_IF_ERROR(ExpectOp("]"));
    if (args.size() == 1 && args[0]->kind == Expr::Kind::kSlice) {
      args[0]->args[0] = std::move(node);
      return std::move(args[0]);
    }
    auto e = NewExpr(Expr::Kind::kGetitem, tok);
    e->args.push_back(std::move(node));
    if (args.size() == 1) {
      e->args.push_back(std::move(args[0]));
    } else {
      auto t = NewExpr(Expr::Kind::kTuple, tok);
      for (auto& a : args) {
        if (a->kind == Expr::Kind::kSlice)
          return Fail(tok, "multi-dimensional slices are not supported");
        t->args.push_back(std::move(a));
      }
      e->args.push_back(std::move(t));
    }
    return e;
  }

  // One subscript: an expression or a slice `[start]:[stop][:[step]]` (as kSlice with a
  // null object slot).
  Result<ExprPtr> ParseSubscribed() {
    const Token& at = Cur();
    std::vector<ExprPtr> parts;
    if (IsOp(":")) {
      Next();
      parts.push_back(nullptr);
    } else {
      MX_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      if (!IsOp(":")) return e;
      Next();
      parts.push_back(std::move(e));
    }
    if (IsOp(":")) {
      parts.push_back(nullptr);
    } else if (!IsOp("]") && !IsOp(",")) {
      MX_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      parts.push_back(std::move(e));
    } else {
      parts.push_back(nullptr);
    }
    if (IsOp(":")) {
      Next();
      if (!IsOp("]") && !IsOp(",")) {
        MX_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
        parts.push_back(std::move(e));
      } else {
        parts.push_back(nullptr);
      }
    } else {
      parts.push_back(nullptr);
    }
    auto s = NewExpr(Expr::Kind::kSlice, at);
    s->args.push_back(nullptr);  // the object, filled in by ParseSubscript
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // (args, kwargs) into e->args (after any already there) and e->kwargs.
  Status ParseCallArgs(Expr* e) {
    const Token at = Cur();
    MX_RETURN_IF_ERROR(ExpectOp("("));
    bool require_comma = false;
    while (!IsOp(")")) {
      if (require_comma) {
        MX_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      if (IsOp("*") || IsOp("**")) return Fail("*args and **kwargs in calls are not supported");
      if (Cur().type == Tok::kName && Look().type == Tok::kOp && Look().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        MX_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e->kwargs.empty()) return Fail(at, "invalid syntax for function call expression");
        MX_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e->args.push_back(std::move(v));
      }
      require_comma = true;
    }
    return ExpectOp(")");
  }

  Result<ExprPtr> ParseCall(ExprPtr node) {
    auto e = NewExpr(Expr::Kind::kCall, Cur());
    e->line = node->line;
    e->col = node->col;
    e->args.push_back(std::move(node));
    MX_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    return e;
  }

  Result<ExprPtr> ParseFilter(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      auto e = NewExpr(Expr::Kind::kFilter, Cur());
      MX_ASSIGN_OR_RETURN(e->name, ExpectName());
      while (IsOp(".")) {
        Next();
        MX_ASSIGN_OR_RETURN(std::string part, ExpectName());
        e->name += "." + part;
      }
      e->args.push_back(std::move(node));
      if (IsOp("(")) MX_RETURN_IF_ERROR(ParseCallArgs(e.get()));
      node = std::move(e);
    }
    return node;
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    const Token at = Cur();
    Next();  // 'is'
    const bool negated = SkipName("not");
    auto e = NewExpr(Expr::Kind::kTest, at);
    MX_ASSIGN_OR_RETURN(e->name, ExpectName());
    while (IsOp(".")) {
      Next();
      MX_ASSIGN_OR_RETURN(std::string part, ExpectName());
      e->name += "." + part;
    }
    e->args.push_back(std::move(node));
    if (IsOp("(")) {
      MX_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                Cur().type == Tok::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail("You cannot chain multiple tests with is");
      MX_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      MX_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->args.push_back(std::move(arg));
    }
    if (!negated) return e;
    auto n = NewExpr(Expr::Kind::kNot, at);
    n->args.push_back(std::move(e));
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  std::string name_;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::pair<std::string, int>> open_blocks_;
};

}  // namespace

Result<std::unique_ptr<Template>> ParseTemplate(std::string_view source, std::string_view name) {
  MX_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source, name));
  Parser parser(std::move(tokens), name);
  MX_ASSIGN_OR_RETURN(Body body, parser.ParseAll());
  auto t = std::make_unique<Template>();
  t->name = std::string(name);
  t->body = std::move(body);
  return t;
}

}  // namespace mx::jinja
