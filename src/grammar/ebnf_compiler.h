// EBNF grammars in the GBNF form llama.cpp and sglang (XGrammar's `ebnf`) accept:
//   root ::= "{" ws pair ("," ws pair)* "}"      # comments run to the end of the line
//   pair ::= [a-z]+ ":" ws ("yes" | "no")
//   ws   ::= [ \t\n]*
// Rules are `name ::= body` (a body runs until the next `name ::=`); a body has alternatives
// `|`, sequences of "literals" (escapes \n \t \r \\ \" \xHH \uHHHH), [classes] (as in
// regexes), rule names, (groups) and the postfix operators * + ? {m} {m,} {m,n}. The rule
// named `root` is the start. Undefined names, left recursion and anything else are errors
// naming the line.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace mx::grammar {

Result<Grammar> EbnfGrammar(std::string_view text, const GrammarLimits& limits = {});

}  // namespace mx::grammar
