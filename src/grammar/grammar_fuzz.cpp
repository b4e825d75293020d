// libFuzzer target for the constraint compilers and the matcher: any text, compiled as a JSON
// schema, a regex, an EBNF grammar and a tool-call spec under small limits, must give a Status or a
// grammar; a grammar is then driven by the rest of the input as bytes, with rollbacks. Run through
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/constraint.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mx::grammar;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\0');
  const std::string_view text = all.substr(0, cut);
  const std::string_view drive = cut == std::string_view::npos ? "" : all.substr(cut + 1);
  GrammarLimits lim;
  lim.max_elements = 20000;
  lim.max_rules = 5000;
  lim.max_repeat = 200;
  lim.max_depth = 32;
  for (ConstraintKind k : {ConstraintKind::kJsonSchema, ConstraintKind::kRegex,
                           ConstraintKind::kEbnf, ConstraintKind::kToolCall}) {
    auto g = CompileConstraint({k, std::string(text), {}}, {}, lim);
    if (!g.ok()) continue;
    Matcher m(std::make_shared<const Grammar>(std::move(g).value()));
    for (size_t i = 0; i < drive.size(); ++i) {
      if (drive[i] == '\x7f' && m.history() > 0) {
        m.Rollback(1);
      } else {
        (void)m.AcceptBytes(drive.substr(i, 1));
      }
    }
  }
  return 0;
}
