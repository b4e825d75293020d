// Added-token matching, after Hugging Face AddedVocabulary::find_matches.
#include "tokenizer/tokenizer_added_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace mx::tok {

Result<AddedVocab> AddedVocab::Create(std::vector<AddedToken> tokens) {
  AddedVocab v;
  v.tokens_ = std::move(tokens);
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const std::string& c = v.tokens_[i].content;
    if (c.empty()) continue;  // never matches
    v.by_first_byte_[static_cast<unsigned char>(c[0])].push_back(static_cast<int>(i));
  }
  for (auto& list : v.by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return v.tokens_[a].content.size() > v.tokens_[b].content.size();
    });
  }
  MX_ASSIGN_OR_RETURN(Regex rx, Regex::Compile(R"([\p{L}\p{N}_])"));
  v.word_char_ = std::make_shared<const Regex>(std::move(rx));
  return v;
}

bool AddedVocab::IsWordChar(std::string_view text, size_t pos, bool before) const {
  // The character just before `pos` (before=true) or at `pos`.
  size_t start = pos;
  if (before) {
    do {
      --start;
    } while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80);
  }
  size_t end = start;
  char32_t cp;
  DecodeUtf8(text, &end, &cp);
  if (cp < 0x80) return std::isalnum(static_cast<int>(cp)) || cp == '_';
  return word_char_->Search(text.substr(start, end - start));
}

void AddedVocab::Split(std::string_view text, bool normalized, bool allow_special,
                       FunctionRef<void(std::string_view)> on_text,
                       FunctionRef<void(int32_t)> on_token) const {
  size_t start_offset = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[i])];
    const AddedToken* best = nullptr;
    for (int idx : candidates) {
      const AddedToken& t = tokens_[idx];
      if (t.normalized != normalized || (t.special && !allow_special)) continue;
      if (text.compare(i, t.content.size(), t.content) == 0) {
        best = &t;  // candidates are longest first
        break;
      }
    }
    if (best == nullptr) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + best->content.size();
    i = stop;
    if (best->single_word) {
      if ((start > 0 && IsWordChar(text, start, true)) ||
          (stop < n && IsWordChar(text, stop, false))) {
        continue;
      }
    }
    if (best->lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t b = s;
        do {
          --b;
        } while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80);
        size_t e = b;
        char32_t cp;
        if (!DecodeUtf8(text, &e, &cp) || !IsUnicodeWhitespace(cp)) break;
        s = b;
      }
      start = std::max(s, start_offset);
    }
    if (best->rstrip) {
      while (stop < n) {
        size_t e = stop;
        char32_t cp;
        if (!DecodeUtf8(text, &e, &cp) || !IsUnicodeWhitespace(cp)) break;
        stop = e;
      }
      i = stop;
    }
    if (start_offset < start) on_text(text.substr(start_offset, start - start_offset));
    on_token(best->id);
    start_offset = stop;
  }
  if (start_offset < n) on_text(text.substr(start_offset));
}

}  // namespace mx::tok
