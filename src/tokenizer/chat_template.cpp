// ChatTemplate: the Jinja engine bound to Hugging Face's chat-template conventions.
#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/jinja.h"

namespace mx {

Result<ChatTemplate> ChatTemplate::Parse(std::string source, std::string name) {
  MX_ASSIGN_OR_RETURN(auto tmpl, jinja::Parse(source, name));
  ChatTemplate t;
  t.tmpl_ = std::move(tmpl);
  t.source_ = std::move(source);
  return t;
}

namespace {

template <typename J>
Result<std::string> RenderImpl(const jinja::Template& tmpl, const J& context) {
  if (!context.is_object())
    return InvalidArgument("chat template context must be a JSON object, got {}",
                           context.type_name());
  jinja::Value v = jinja::FromJson(context);
  return jinja::Render(tmpl, v.dict());
}

}  // namespace

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  return RenderImpl(*tmpl_, context);
}

Result<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  return RenderImpl(*tmpl_, context);
}

nlohmann::ordered_json MakeChatContext(const ChatRequest& request) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (!request.bos_token.empty()) ctx["bos_token"] = request.bos_token;
  if (!request.eos_token.empty()) ctx["eos_token"] = request.eos_token;
  if (request.kwargs.is_object())
    for (auto it = request.kwargs.begin(); it != request.kwargs.end(); ++it)
      ctx[it.key()] = it.value();
  ctx["messages"] = request.messages;
  ctx["tools"] = request.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = request.add_generation_prompt;
  return ctx;
}

namespace {

Result<std::string> TokenString(const nlohmann::ordered_json& cfg, const char* field,
                                const std::string& path) {
  if (!cfg.contains(field) || cfg[field].is_null()) return std::string();
  const auto& v = cfg[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return InvalidArgument("{}: field '{}' must be a string or an object with 'content'", path,
                         field);
}

}  // namespace

Result<TokenizerChatConfig> LoadTokenizerChatConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer_config.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(ss.str(), nullptr, false);
  if (cfg.is_discarded()) return DataLoss("{}: not valid JSON", path);
  if (!cfg.is_object()) return DataLoss("{}: expected a JSON object", path);
  TokenizerChatConfig out;
  if (!cfg.contains("chat_template")) return NotFound("{}: no 'chat_template' field", path);
  const auto& ct = cfg["chat_template"];
  if (ct.is_string()) {
    out.chat_template = ct.get<std::string>();
  } else if (ct.is_array()) {
    bool found = false;
    for (const auto& e : ct) {
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string()) {
        out.chat_template = e["template"].get<std::string>();
        found = true;
        break;
      }
    }
    if (!found) return NotFound("{}: 'chat_template' lists no template named \"default\"", path);
  } else {
    return InvalidArgument("{}: 'chat_template' must be a string or a list of {{name, template}}",
                           path);
  }
  MX_ASSIGN_OR_RETURN(out.bos_token, TokenString(cfg, "bos_token", path));
  MX_ASSIGN_OR_RETURN(out.eos_token, TokenString(cfg, "eos_token", path));
  return out;
}

Result<std::string> ChatFormat::Render(ChatRequest request) const {
  request.bos_token = bos_token;
  request.eos_token = eos_token;
  return tmpl.Render(MakeChatContext(request));
}

Result<std::string> ChatFormat::RenderUser(const std::string& content,
                                           nlohmann::ordered_json kwargs) const {
  ChatRequest r;
  r.messages.push_back({{"role", "user"}, {"content", content}});
  r.kwargs = std::move(kwargs);
  return Render(std::move(r));
}

Result<std::optional<ChatFormat>> LoadChatFormat(const std::string& model_dir,
                                                 const std::string& template_file) {
  ChatFormat f;
  std::string source, name;
  if (!model_dir.empty() && std::filesystem::exists(model_dir + "/tokenizer_config.json")) {
    MX_ASSIGN_OR_RETURN(TokenizerChatConfig tc, LoadTokenizerChatConfig(model_dir));
    f.bos_token = tc.bos_token;
    f.eos_token = tc.eos_token;
    source = std::move(tc.chat_template);
    name = model_dir + "/tokenizer_config.json:chat_template";
  }
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) return IoError("{}: cannot open the chat template", template_file);
    std::ostringstream text;
    text << in.rdbuf();
    source = text.str();
    name = template_file;
  }
  if (source.empty()) return std::optional<ChatFormat>();
  MX_ASSIGN_OR_RETURN(f.tmpl, ChatTemplate::Parse(std::move(source), std::move(name)));
  return std::optional<ChatFormat>(std::move(f));
}

}  // namespace mx
