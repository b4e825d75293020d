// tokenizer_config.json parsing.
#include "tokenizer/tokenizer_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mx::tok {
namespace {

Result<std::optional<std::string>> TokenString(const nlohmann::json& j, const char* key,
                                               const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return std::optional<std::string>(c->get<std::string>());
  }
  return DataLoss("{}: {}: expected a string, an object with \"content\", or null", path, key);
}

Result<std::optional<bool>> OptBool(const nlohmann::json& j, const char* key,
                                    const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return DataLoss("{}: {}: expected a boolean", path, key);
  return std::optional<bool>(it->get<bool>());
}

Result<std::optional<std::string>> ReadIfExists(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::optional<std::string>(ss.str());
}

}  // namespace

Result<TokenizerConfig> TokenizerConfig::FromJson(std::string_view json_text,
                                                  const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss("{}: not valid JSON", path);
  if (!j.is_object()) return DataLoss("{}: expected a JSON object", path);
  TokenizerConfig c;
  c.path = path;
  c.raw_json = std::string(json_text);
  MX_ASSIGN_OR_RETURN(c.bos_token, TokenString(j, "bos_token", path));
  MX_ASSIGN_OR_RETURN(c.eos_token, TokenString(j, "eos_token", path));
  MX_ASSIGN_OR_RETURN(c.pad_token, TokenString(j, "pad_token", path));
  MX_ASSIGN_OR_RETURN(c.unk_token, TokenString(j, "unk_token", path));
  MX_ASSIGN_OR_RETURN(c.add_bos_token, OptBool(j, "add_bos_token", path));
  MX_ASSIGN_OR_RETURN(c.add_eos_token, OptBool(j, "add_eos_token", path));
  if (auto t = j.find("chat_template"); t != j.end() && !t->is_null()) {
    if (t->is_string()) {
      c.chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      for (size_t i = 0; i < t->size(); ++i) {
        const auto& e = (*t)[i];
        auto name = e.find("name");
        auto tmpl = e.find("template");
        if (!e.is_object() || name == e.end() || !name->is_string() || tmpl == e.end() ||
            !tmpl->is_string()) {
          return DataLoss(
              "{}: chat_template[{}]: expected {{\"name\": string, \"template\": "
              "string}}",
              path, i);
        }
        c.named_chat_templates[*name] = tmpl->get<std::string>();
      }
      if (auto d = c.named_chat_templates.find("default"); d != c.named_chat_templates.end()) {
        c.chat_template = d->second;
      }
    } else {
      return DataLoss("{}: chat_template: expected a string or a list of named templates", path);
    }
    if (c.chat_template) c.chat_template_source = path;
  }
  return c;
}

Result<TokenizerConfig> TokenizerConfig::Load(const std::string& model_dir) {
  const std::string cfg_path = model_dir + "/tokenizer_config.json";
  TokenizerConfig c;
  MX_ASSIGN_OR_RETURN(auto text, ReadIfExists(cfg_path));
  if (text) {
    MX_ASSIGN_OR_RETURN(c, FromJson(*text, cfg_path));
  }
  if (!c.chat_template) {
    const std::string jinja_path = model_dir + "/chat_template.jinja";
    MX_ASSIGN_OR_RETURN(auto jinja, ReadIfExists(jinja_path));
    if (jinja) {
      c.chat_template = std::move(*jinja);
      c.chat_template_source = jinja_path;
    }
  }
  return c;
}

}  // namespace mx::tok
