// libFuzzer target for the Jinja engine: the input is split at the first NUL byte into a
// template and a JSON context; both are parsed and the template rendered. Any crash,
// sanitizer report, hang or leak is a bug (errors must come back as Status).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  std::string source = input, context_text;
  if (size_t nul = input.find('\0'); nul != std::string::npos) {
    source = input.substr(0, nul);
    context_text = input.substr(nul + 1);
  }
  auto tmpl = mx::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return 0;
  nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (ctx.is_discarded() || !ctx.is_object()) {
    ctx = nlohmann::ordered_json::parse(
        R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "héllo"},
            {"role": "assistant", "content": "<think>t</think>a", "tool_calls": [{"function":
            {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "content": "r"}],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "add_generation_prompt": true, "bos_token": "<s>"})");
  }
  (void)tmpl->Render(ctx);
  return 0;
}
