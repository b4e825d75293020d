// `mxserve chat-template (MODEL_DIR | --template FILE.jinja) --messages FILE.json
//  [--tools FILE.json] [--kwargs JSON] [--no-generation-prompt]`: prints the prompt a chat
// request becomes, byte for byte (no newline added), as transformers' apply_chat_template
// would render it.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/verb.h"
#include "tokenizer/chat_template.h"

namespace mx::cli {
namespace {

struct ChatTemplateArgs {
  std::string model_dir;
  std::string template_file;
  std::string messages_file;
  std::string tools_file;
  std::string kwargs;
  std::string bos_token;
  std::string eos_token;
  bool no_generation_prompt = false;
};

Result<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<nlohmann::ordered_json> ReadJson(const std::string& path) {
  MX_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgument("{}: not valid JSON: {}", path, e.what());
  }
}

int Run(const ChatTemplateArgs& a) {
  if (a.model_dir.empty() == a.template_file.empty())
    return Fail("chat-template: give either MODEL_DIR or --template FILE.jinja");
  auto format = LoadChatFormat(a.model_dir, a.template_file);
  if (!format.ok()) return Fail(format.status().message());
  if (!format->has_value()) return Fail(a.model_dir + ": no chat template");
  ChatFormat& f = **format;
  if (!a.bos_token.empty()) f.bos_token = a.bos_token;
  if (!a.eos_token.empty()) f.eos_token = a.eos_token;
  ChatRequest req;
  auto messages = ReadJson(a.messages_file);
  if (!messages.ok()) return Fail(messages.status().message());
  if (messages->is_object()) {  // a request body: {"messages": [...], "tools": [...], ...}
    if (!messages->contains("messages"))
      return Fail(a.messages_file + ": expected a list of messages or an object with 'messages'");
    if (messages->contains("tools")) req.tools = (*messages)["tools"];
    if (messages->contains("chat_template_kwargs"))
      req.kwargs = (*messages)["chat_template_kwargs"];
    req.messages = (*messages)["messages"];
  } else {
    req.messages = std::move(*messages);
  }
  if (!req.messages.is_array()) return Fail(a.messages_file + ": 'messages' must be a JSON list");
  if (!a.tools_file.empty()) {
    auto tools = ReadJson(a.tools_file);
    if (!tools.ok()) return Fail(tools.status().message());
    req.tools = std::move(*tools);
  }
  if (!a.kwargs.empty()) {
    nlohmann::ordered_json kw = nlohmann::ordered_json::parse(a.kwargs, nullptr, false);
    if (kw.is_discarded() || !kw.is_object())
      return Fail("--kwargs: expected a JSON object, e.g. '{\"enable_thinking\": false}'");
    for (auto it = kw.begin(); it != kw.end(); ++it) req.kwargs[it.key()] = it.value();
  }
  req.add_generation_prompt = !a.no_generation_prompt;

  auto out = f.Render(std::move(req));
  if (!out.ok()) return Fail(out.status().message());
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

VerbRun SetupChatTemplate(CLI::App& app) {
  auto args = std::make_shared<ChatTemplateArgs>();
  auto* sub = app.add_subcommand("chat-template", "Render a conversation with a chat template");
  sub->add_option("model_dir", args->model_dir,
                  "checkpoint directory (reads tokenizer_config.json's chat_template)");
  sub->add_option("--template", args->template_file, "a .jinja template file instead");
  sub->add_option("--messages", args->messages_file,
                  "JSON list of messages (or a request object with 'messages')")
      ->required();
  sub->add_option("--tools", args->tools_file, "JSON list of tool schemas");
  sub->add_option("--kwargs", args->kwargs,
                  "extra template variables as a JSON object (chat_template_kwargs)");
  sub->add_option("--bos-token", args->bos_token, "override bos_token");
  sub->add_option("--eos-token", args->eos_token, "override eos_token");
  sub->add_flag("--no-generation-prompt", args->no_generation_prompt,
                "add_generation_prompt=false");
  return [args]() -> int { return Run(*args); };
}

MX_REGISTER_VERB(chat_template, "chat-template", 75, SetupChatTemplate);

}  // namespace
}  // namespace mx::cli
