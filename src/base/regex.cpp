// PCRE2 wrapper. note: Hugging Face tokenizers uses Oniguruma; for the patterns used by
// tokenizer.json files (\p{L}, \p{N}, \s, look-ahead, (?i:...)) PCRE2 with UCP agrees, except
// that PCRE2's \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "base/regex.h"

#include <pcre2.h>

#include "base/log.h"

namespace mx {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Result<Regex> Regex::Compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return InvalidArgument("regex /{}/ does not compile: {} at offset {}", pattern,
                           reinterpret_cast<const char*>(buf), err_off);
  }
  Regex r;
  r.impl_ = std::make_unique<Impl>();
  r.impl_->code = code;
  r.impl_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  r.pattern_ = pattern;
  return r;
}

std::string Regex::Escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

namespace {

// Match data and (when needed) a larger JIT stack for one FindAll call.
struct MatchScratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  explicit MatchScratch(const pcre2_code* code) {
    md = pcre2_match_data_create_from_pattern(code, nullptr);
  }
  ~MatchScratch() {
    if (js != nullptr) pcre2_jit_stack_free(js);
    if (mc != nullptr) pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
  void GrowStack() {
    if (mc == nullptr) mc = pcre2_match_context_create(nullptr);
    if (js == nullptr) {
      js = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(mc, nullptr, js);
    }
  }
};

size_t Utf8Len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

}  // namespace

bool Regex::FindAll(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const {
  MatchScratch s(impl_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mc);
    if ((rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT ||
         rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) &&
        s.js == nullptr) {
      s.GrowStack();
      rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mc);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return true;
    if (rc < 0) {
      MX_LOG_WARN("regex /{}/ gave up at byte {} (PCRE2 error {})", pattern_, pos, rc);
      return false;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    const size_t start = ov[0], end = ov[1];
    if (end > start) {
      on_match(start, end);
      pos = end;
    } else {
      if (start >= text.size()) return true;
      pos = start + Utf8Len(static_cast<unsigned char>(text[start]));
    }
  }
  return true;
}

bool Regex::Search(std::string_view text) const {
  MatchScratch s(impl_->code);
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             PCRE2_NO_UTF_CHECK, s.md, nullptr);
  return rc >= 0;
}

bool Regex::FullMatch(std::string_view text, std::vector<std::string_view>* groups) const {
  MatchScratch s(impl_->code);
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED, s.md, nullptr);
  if (rc < 0) return false;
  if (groups != nullptr) {
    uint32_t n = 0;
    pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &n);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    groups->assign(n, std::string_view());
    for (uint32_t i = 1; i <= n && static_cast<int>(i) < rc; ++i) {
      if (ov[2 * i] != PCRE2_UNSET)
        groups->at(i - 1) = text.substr(ov[2 * i], ov[2 * i + 1] - ov[2 * i]);
    }
  }
  return true;
}

bool Regex::MatchPrefix(std::string_view text) const {
  MatchScratch s(impl_->code);
  return pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                     PCRE2_ANCHORED, s.md, nullptr) >= 0;
}

}  // namespace mx
