// Exclude-list matching (see exclude.h).
#include "quant/exclude.h"

#include <fnmatch.h>

#include <fmt/format.h>

namespace mx::quant {

Result<ExcludeRule> ExcludeRule::Parse(const std::string& entry) {
  ExcludeRule r;
  r.text_ = entry;
  if (entry.empty()) return InvalidArgument("empty exclude entry");
  if (entry.rfind("re:", 0) == 0) {
    r.kind_ = Kind::kRegex;
    auto re = Regex::Compile(entry.substr(3));
    if (!re.ok()) {
      return InvalidArgument("exclude entry '{}': bad regex: {}", entry, re.status().message());
    }
    r.re_ = std::make_shared<const Regex>(std::move(re).value());
  } else if (entry.find_first_of("*?[") != std::string::npos) {
    r.kind_ = Kind::kGlob;
  }
  return r;
}

bool ExcludeRule::MatchesName(const std::string& name) const {
  switch (kind_) {
    case Kind::kExact:
      return name == text_;
    case Kind::kGlob:
      return fnmatch(text_.c_str(), name.c_str(), 0) == 0;
    case Kind::kRegex:
      return re_->MatchPrefix(name);
  }
  return false;
}

Result<ExcludeList> ExcludeList::Parse(const std::vector<std::string>& entries) {
  ExcludeList l;
  for (const auto& e : entries) {
    auto r = ExcludeRule::Parse(e);
    if (!r.ok()) return r.status();
    l.rules_.push_back(std::move(r).value());
  }
  return l;
}

namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "a.b.c" → {"a.b", "a"}.
std::vector<std::string> Ancestors(const std::string& name) {
  std::vector<std::string> out;
  for (size_t pos = name.rfind('.'); pos != std::string::npos && pos > 0;
       pos = name.rfind('.', pos - 1)) {
    out.push_back(name.substr(0, pos));
  }
  return out;
}

void AddFused(const std::string& name, std::vector<std::string>& out) {
  const size_t dot = name.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot + 1);
  const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
  if (leaf == "gate_proj" || leaf == "up_proj") out.push_back(parent + "gate_up_proj");
  if (leaf == "q_proj" || leaf == "k_proj" || leaf == "v_proj") out.push_back(parent + "qkv_proj");
}

}  // namespace

std::vector<std::string> ModuleAliases(const std::string& module, int64_t mtp_layer) {
  std::vector<std::string> names{module};
  if (mtp_layer >= 0) {
    const std::string p = fmt::format("model.layers.{}.", mtp_layer);
    if (StartsWith(module, p)) {
      const std::string rest = module.substr(p.size());
      const bool glue = StartsWith(rest, "enorm") || StartsWith(rest, "hnorm") ||
                        StartsWith(rest, "eh_proj") || StartsWith(rest, "shared_head");
      names.push_back((glue ? "model." : "model.decoder.") + rest);
    }
  }
  const size_t n = names.size();
  for (size_t i = 0; i < n; ++i) AddFused(names[i], names);
  names.push_back(module + ".weight");
  return names;
}

const ExcludeRule* ExcludeList::FirstMatch(const std::string& module, int64_t mtp_layer) const {
  if (rules_.empty()) return nullptr;
  const std::vector<std::string> aliases = ModuleAliases(module, mtp_layer);
  for (const ExcludeRule& r : rules_) {
    for (const std::string& a : aliases) {
      if (r.MatchesName(a)) return &r;
      if (r.is_exact()) {
        for (const std::string& up : Ancestors(a)) {
          if (r.MatchesName(up)) return &r;
        }
      }
    }
  }
  return nullptr;
}

bool ExcludeList::Matches(const std::string& module, int64_t mtp_layer) const {
  return FirstMatch(module, mtp_layer) != nullptr;
}

}  // namespace mx::quant
