// Loading a served model's tokenizer and chat template.
#include "server/served_model.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "grammar/tool_call_grammar.h"
#include "grammar/vocab_tokenizer.h"
#include "server/reasoning_parser.h"

namespace mx::server {

ServedModel::ServedModel(std::string name_, std::string dir_, std::unique_ptr<Engine> engine_,
                         tok::Tokenizer tokenizer_)
    : name(std::move(name_)),
      dir(std::move(dir_)),
      engine(std::move(engine_)),
      tokenizer(std::move(tokenizer_)),
      created(std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()) {}

grammar::GrammarCache& ServedModel::grammars() {
  std::call_once(grammars_once_, [this] {
    std::vector<int32_t> eos = engine->eos_ids();
    if (eos.empty()) {
      if (auto id = tokenizer.TokenId(eos_token)) eos.push_back(*id);
    }
    const auto n = static_cast<int32_t>(engine->vocab_size());
    // Tool-call grammars let the tool-call tags' special tokens through; no other grammar does.
    auto tool_vocab =
        grammar::VocabFromTokenizer(tokenizer, eos, n,
                                    std::vector<std::string>(std::begin(grammar::kToolCallTags),
                                                             std::end(grammar::kToolCallTags)));
    grammars_ = std::make_unique<grammar::GrammarCache>(
        grammar::VocabFromTokenizer(tokenizer, std::move(eos), n), grammar_options,
        std::move(tool_vocab));
  });
  return *grammars_;
}

Result<std::string> ServedModel::RenderChat(const nlohmann::ordered_json& messages,
                                            const nlohmann::ordered_json& tools,
                                            const nlohmann::ordered_json& kwargs) const {
  ChatRequest cr;
  cr.messages = messages;
  cr.tools = tools;
  cr.kwargs = kwargs.is_object() ? kwargs : nlohmann::ordered_json::object();
  if (template_takes_clear_thinking && !cr.kwargs.contains("clear_thinking")) {
    cr.kwargs["clear_thinking"] = clear_thinking;
  }
  return chat_template->Render(std::move(cr));
}

Result<std::unique_ptr<ServedModel>> LoadServedModel(std::string name, const std::string& dir,
                                                     std::unique_ptr<Engine> engine,
                                                     const std::string& chat_template_file) {
  namespace fs = std::filesystem;
  MX_ASSIGN_OR_RETURN(tok::Tokenizer tokenizer,
                      tok::Tokenizer::FromFile((fs::path(dir) / "tokenizer.json").string()));
  auto m =
      std::make_unique<ServedModel>(std::move(name), dir, std::move(engine), std::move(tokenizer));
  if (fs::exists(fs::path(dir) / "tokenizer_config.json")) {
    MX_ASSIGN_OR_RETURN(TokenizerChatConfig tc, LoadTokenizerChatConfig(dir));
    m->eos_token = tc.eos_token;
  }
  MX_ASSIGN_OR_RETURN(m->chat_template, LoadChatFormat(dir, chat_template_file));
  if (m->chat_template) {
    // Does a one-message conversation with no kwargs leave `<think>` open?
    auto prompt = m->chat_template->RenderUser("1+1=");
    m->thinking_default = prompt.ok() && PromptOpensReasoning(*prompt);
    m->template_takes_clear_thinking =
        m->chat_template->tmpl.source().find("clear_thinking") != std::string::npos;
  }
  return m;
}

}  // namespace mx::server
