// Pre-tokenizer parsing and application, following Hugging Face tokenizers'
// NormalizedString::split and Pattern::find_matches semantics.
#include "tokenizer/pretokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace mx::tok {

void ApplySplitBehavior(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans,
                        const std::vector<bool>& is_match, SplitBehavior behavior,
                        std::vector<std::string>* out) {
  // Build (start, end, remove) spans, then emit the non-empty kept ones.
  std::vector<std::pair<size_t, size_t>> merged;
  std::vector<bool> remove;
  const size_t n = spans.size();
  switch (behavior) {
    case SplitBehavior::kIsolated:
      merged = spans;
      remove.assign(n, false);
      break;
    case SplitBehavior::kRemoved:
      merged = spans;
      remove = is_match;
      break;
    case SplitBehavior::kContiguous: {
      bool prev = false;
      for (size_t i = 0; i < n; ++i) {
        if (is_match[i] == prev && !merged.empty()) {
          merged.back().second = spans[i].second;
        } else {
          merged.push_back(spans[i]);
        }
        prev = is_match[i];
      }
      remove.assign(merged.size(), false);
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev = false;
      for (size_t i = 0; i < n; ++i) {
        if (is_match[i] && !prev && !merged.empty()) {
          merged.back().second = spans[i].second;
        } else {
          merged.push_back(spans[i]);
        }
        prev = is_match[i];
      }
      remove.assign(merged.size(), false);
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev = false;
      for (size_t k = n; k-- > 0;) {
        if (is_match[k] && !prev && !merged.empty()) {
          merged.back().first = spans[k].first;
        } else {
          merged.push_back(spans[k]);
        }
        prev = is_match[k];
      }
      std::reverse(merged.begin(), merged.end());
      remove.assign(merged.size(), false);
      break;
    }
  }
  for (size_t i = 0; i < merged.size(); ++i) {
    if (remove[i] || merged[i].second == merged[i].first) continue;
    out->emplace_back(text.substr(merged[i].first, merged[i].second - merged[i].first));
  }
}

namespace {

Result<SplitBehavior> ParseBehavior(const std::string& name, const std::string& where) {
  std::string k;
  for (char c : name) {
    if (c != '_') k.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (k == "isolated") return SplitBehavior::kIsolated;
  if (k == "removed") return SplitBehavior::kRemoved;
  if (k == "mergedwithprevious") return SplitBehavior::kMergedWithPrevious;
  if (k == "mergedwithnext") return SplitBehavior::kMergedWithNext;
  if (k == "contiguous") return SplitBehavior::kContiguous;
  return Unimplemented(
      "{}: split behavior \"{}\" is not supported (Isolated, Removed, MergedWithPrevious, "
      "MergedWithNext, Contiguous)",
      where, name);
}

Result<bool> GetBool(const nlohmann::json& j, const char* key, bool dflt,
                     const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return DataLoss("{}.{}: expected a boolean", where, key);
  return it->get<bool>();
}

}  // namespace

Status PreTokenizer::Parse(const nlohmann::json& j, const std::string& where, PreTokenizer* out) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return DataLoss("{}: expected an object or null", where);
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return DataLoss("{}.type: expected a string", where);
  const std::string type = *t;
  Step step;
  if (type == "Sequence") {
    auto p = j.find("pretokenizers");
    if (p == j.end() || !p->is_array()) {
      return DataLoss("{}.pretokenizers: expected an array", where);
    }
    for (size_t i = 0; i < p->size(); ++i) {
      MX_RETURN_IF_ERROR(Parse((*p)[i], fmt::format("{}.pretokenizers[{}]", where, i), out));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    MX_ASSIGN_OR_RETURN(step.add_prefix_space, GetBool(j, "add_prefix_space", true, where));
    MX_ASSIGN_OR_RETURN(bool use_regex, GetBool(j, "use_regex", true, where));
    if (use_regex) {
      MX_ASSIGN_OR_RETURN(Regex rx, Regex::Compile(std::string(kGpt2Pattern)));
      step.regex = std::make_shared<const Regex>(std::move(rx));
    }
    if (out->alphabet_ == nullptr) out->alphabet_ = std::make_shared<const ByteLevelAlphabet>();
  } else if (type == "Split") {
    step.kind = Step::Kind::kSplit;
    auto p = j.find("pattern");
    if (p == j.end() || !p->is_object()) {
      return DataLoss("{}.pattern: expected {{\"Regex\": ...}} or {{\"String\": ...}}", where);
    }
    std::string pattern;
    if (auto r = p->find("Regex"); r != p->end() && r->is_string()) {
      pattern = r->get<std::string>();
    } else if (auto s = p->find("String"); s != p->end() && s->is_string()) {
      pattern = Regex::Escape(s->get<std::string>());
    } else {
      return DataLoss("{}.pattern: expected {{\"Regex\": string}} or {{\"String\": string}}",
                      where);
    }
    auto rx = Regex::Compile(pattern);
    if (!rx.ok()) return rx.status().WithContext(where + ".pattern");
    step.regex = std::make_shared<const Regex>(std::move(rx).value());
    auto b = j.find("behavior");
    if (b == j.end() || !b->is_string()) return DataLoss("{}.behavior: expected a string", where);
    MX_ASSIGN_OR_RETURN(step.behavior, ParseBehavior(*b, where + ".behavior"));
    MX_ASSIGN_OR_RETURN(step.invert, GetBool(j, "invert", false, where));
  } else if (type == "Digits") {
    step.kind = Step::Kind::kDigits;
    MX_ASSIGN_OR_RETURN(step.individual_digits, GetBool(j, "individual_digits", false, where));
  } else {
    return Unimplemented(
        "{}.type: pre-tokenizer \"{}\" is not supported (supported: ByteLevel, Split, Digits, "
        "Sequence)",
        where, type);
  }
  out->steps_.push_back(std::move(step));
  return Status::Ok();
}

Result<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& j, const std::string& where) {
  PreTokenizer p;
  MX_RETURN_IF_ERROR(Parse(j, where, &p));
  return p;
}

bool PreTokenizer::has_byte_level() const {
  return std::any_of(steps_.begin(), steps_.end(),
                     [](const Step& s) { return s.kind == Step::Kind::kByteLevel; });
}

void PreTokenizer::Run(size_t k, std::string_view piece,
                       FunctionRef<void(std::string_view)> emit) const {
  if (piece.empty()) return;
  if (k == steps_.size()) {
    emit(piece);
    return;
  }
  const Step& step = steps_[k];
  auto next = [&](std::string_view p) { Run(k + 1, p, emit); };
  // Emits gaps and (unless drop_matches) matches of `rx` in `text`: Isolated / Removed.
  auto split_isolated = [&](const Regex& rx, std::string_view text, bool drop_matches, auto&& out) {
    size_t prev = 0;
    rx.FindAll(text, [&](size_t s, size_t e) {
      if (prev != s) out(text.substr(prev, s - prev));
      if (!drop_matches) out(text.substr(s, e - s));
      prev = e;
    });
    if (prev != text.size()) out(text.substr(prev));
  };
  switch (step.kind) {
    case Step::Kind::kSplit: {
      if (step.behavior == SplitBehavior::kIsolated ||
          (step.behavior == SplitBehavior::kRemoved && !step.invert)) {
        split_isolated(*step.regex, piece, step.behavior == SplitBehavior::kRemoved, next);
        return;
      }
      // HF Pattern::find_matches: matches and the gaps between them, in order.
      std::vector<std::pair<size_t, size_t>> spans;
      std::vector<bool> is_match;
      auto add_span = [&](size_t s, size_t e, bool m) {
        spans.emplace_back(s, e);
        is_match.push_back(m);
      };
      size_t prev = 0;
      step.regex->FindAll(piece, [&](size_t s, size_t e) {
        if (prev != s) add_span(prev, s, step.invert);
        add_span(s, e, !step.invert);
        prev = e;
      });
      if (prev != piece.size()) add_span(prev, piece.size(), step.invert);
      std::vector<std::string> parts;
      ApplySplitBehavior(piece, spans, is_match, step.behavior, &parts);
      for (const std::string& p : parts) next(p);
      return;
    }
    case Step::Kind::kDigits: {
      const auto digit = [&](size_t i) { return piece[i] >= '0' && piece[i] <= '9'; };
      if (step.individual_digits) {
        size_t prev = 0;
        for (size_t i = 0; i < piece.size(); ++i) {
          if (digit(i)) {
            if (prev != i) next(piece.substr(prev, i - prev));
            next(piece.substr(i, 1));
            prev = i + 1;
          }
        }
        if (prev != piece.size()) next(piece.substr(prev));
        return;
      }
      // Contiguous: runs of digits and runs of non-digits.
      size_t start = 0;
      for (size_t i = 1; i <= piece.size(); ++i) {
        if (i == piece.size() || digit(i) != digit(i - 1)) {
          next(piece.substr(start, i - start));
          start = i;
        }
      }
      return;
    }
    case Step::Kind::kByteLevel: {
      std::string prefixed;
      std::string_view text = piece;
      if (step.add_prefix_space && piece[0] != ' ') {
        prefixed.reserve(piece.size() + 1);
        prefixed.push_back(' ');
        prefixed.append(piece);
        text = prefixed;
      }
      std::string mapped;
      auto map_next = [&](std::string_view sub) {
        mapped.clear();
        alphabet_->Encode(sub, &mapped);
        next(mapped);
      };
      if (step.regex != nullptr) {
        split_isolated(*step.regex, text, false, map_next);
      } else {
        map_next(text);
      }
      return;
    }
  }
}

void PreTokenizer::Apply(std::string_view segment, FunctionRef<void(std::string_view)> emit) const {
  Run(0, segment, emit);
}

void PreTokenizer::Apply(std::string_view segment, std::vector<std::string>* pieces) const {
  Run(0, segment, [&](std::string_view p) { pieces->emplace_back(p); });
}

}  // namespace mx::tok
