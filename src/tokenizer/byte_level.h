// GPT-2's byte-level alphabet (bytes_to_unicode): every byte maps to one printable code point,
// so any byte string becomes a string of vocabulary characters and back without loss.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx::tok {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // The code point that stands for byte b (e.g. ' ' -> U+0120 'Ġ').
  char32_t CharOf(uint8_t b) const { return char_of_[b]; }
  // The UTF-8 of CharOf(b) (1 or 2 bytes).
  std::string_view Utf8Of(uint8_t b) const {
    return std::string_view(utf8_[b].data(), utf8_len_[b]);
  }
  // The byte that code point c stands for, or -1 if c is not in the alphabet.
  int ByteOf(char32_t c) const { return c < 512 ? byte_of_[c] : -1; }

  // Maps every byte of `raw` to its alphabet character, appending UTF-8 to *out.
  void Encode(std::string_view raw, std::string* out) const;
  // Maps alphabet characters back to bytes. Returns false (leaving *out unspecified past its
  // original size) if `text` has a character outside the alphabet.
  bool Decode(std::string_view text, std::string* out) const;

 private:
  std::array<char32_t, 256> char_of_{};
  std::array<std::array<char, 2>, 256> utf8_{};
  std::array<uint8_t, 256> utf8_len_{};
  std::array<int16_t, 512> byte_of_{};
};

}  // namespace mx::tok
