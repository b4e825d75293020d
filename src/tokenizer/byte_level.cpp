// GPT-2 bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes map
// in order to U+0100.. so that no vocabulary character is whitespace or a control.
#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace mx::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    char_of_[b] = c;
    byte_of_[c] = static_cast<int16_t>(b);
    std::string u;
    AppendUtf8(&u, c);
    utf8_len_[b] = static_cast<uint8_t>(u.size());
    for (size_t k = 0; k < u.size(); ++k) utf8_[b][k] = u[k];
  }
}

void ByteLevelAlphabet::Encode(std::string_view raw, std::string* out) const {
  out->reserve(out->size() + raw.size() * 2);
  for (unsigned char b : raw) out->append(Utf8Of(b));
}

bool ByteLevelAlphabet::Decode(std::string_view text, std::string* out) const {
  size_t i = 0;
  while (i < text.size()) {
    char32_t c;
    if (!DecodeUtf8(text, &i, &c)) return false;
    const int b = ByteOf(c);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace mx::tok
