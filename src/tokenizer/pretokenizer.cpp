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

void PreTokenizer::ApplyStep(const Step& step, std::vector<std::string>* in,
                             std::vector<std::string>* out) const {
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<bool> is_match;
  // Fills spans/is_match from the regex matches of `text` (HF Pattern::find_matches).
  auto regex_spans = [&](const Regex& rx, std::string_view text, bool invert) {
    spans.clear();
    is_match.clear();
    size_t prev = 0;
    rx.FindAll(text, [&](size_t s, size_t e) {
      if (prev != s) {
        spans.emplace_back(prev, s);
        is_match.push_back(invert);
      }
      spans.emplace_back(s, e);
      is_match.push_back(!invert);
      prev = e;
    });
    if (prev != text.size()) {
      spans.emplace_back(prev, text.size());
      is_match.push_back(invert);
    }
  };
  for (std::string& piece : *in) {
    switch (step.kind) {
      case Step::Kind::kSplit:
        regex_spans(*step.regex, piece, step.invert);
        ApplySplitBehavior(piece, spans, is_match, step.behavior, out);
        break;
      case Step::Kind::kDigits: {
        spans.clear();
        is_match.clear();
        size_t prev = 0;
        for (size_t i = 0; i < piece.size(); ++i) {
          if (piece[i] >= '0' && piece[i] <= '9') {
            if (prev != i) {
              spans.emplace_back(prev, i);
              is_match.push_back(false);
            }
            spans.emplace_back(i, i + 1);
            is_match.push_back(true);
            prev = i + 1;
          }
        }
        if (prev != piece.size()) {
          spans.emplace_back(prev, piece.size());
          is_match.push_back(false);
        }
        ApplySplitBehavior(
            piece, spans, is_match,
            step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, out);
        break;
      }
      case Step::Kind::kByteLevel: {
        if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(0, " ");
        const size_t first = out->size();
        if (step.regex != nullptr) {
          regex_spans(*step.regex, piece, false);
          ApplySplitBehavior(piece, spans, is_match, SplitBehavior::kIsolated, out);
        } else if (!piece.empty()) {
          out->push_back(std::move(piece));
        }
        std::string mapped;
        for (size_t i = first; i < out->size(); ++i) {
          mapped.clear();
          alphabet_->Encode((*out)[i], &mapped);
          (*out)[i].swap(mapped);
        }
        break;
      }
    }
  }
}

void PreTokenizer::Apply(std::string_view segment, std::vector<std::string>* pieces) const {
  if (steps_.empty()) {
    pieces->emplace_back(segment);
    return;
  }
  std::vector<std::string> cur{std::string(segment)}, next;
  for (const Step& step : steps_) {
    next.clear();
    ApplyStep(step, &cur, &next);
    cur.swap(next);
  }
  for (std::string& p : cur) pieces->push_back(std::move(p));
}

}  // namespace mx::tok
