// libFuzzer target (fuzz preset only): the first input byte picks a mode.
//   0: the rest is a tokenizer.json; loading must return a Status or a tokenizer that then
//      encodes and decodes a fixed text without crashing.
//   1: the rest is text for a small fixed tokenizer; decode(encode(x)) must equal NFC of the
//      U+FFFD-sanitized x, and streaming decode must equal whole decode.
//   2: the rest is a sequence of little-endian 16-bit ids to decode, whole and streamed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

constexpr std::string_view kFixed = R"({
  "added_tokens": [{"id": 300, "content": "<|user|>", "special": true, "normalized": false},
                   {"id": 301, "content": "<mask>", "special": true, "lstrip": true,
                    "rstrip": true, "normalized": false},
                   {"id": 302, "content": "hi", "single_word": true, "normalized": true}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "Digits", "individual_digits": true},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {}, "merges": []}
})";

// kFixed with the 256 byte-level characters as ids 0..255 and a few merges.
const mx::tok::Tokenizer& Fixed() {
  static const mx::tok::Tokenizer* tok = [] {
    std::string json(kFixed);
    std::string vocab;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? b : 256 + n++;
      std::string u;
      mx::tok::AppendUtf8(&u, c);
      if (u == "\"" || u == "\\") u = "\\" + u;
      vocab += (b ? "," : "") + std::string("\"") + u + "\":" + std::to_string(b);
    }
    vocab += R"(,"th":256,"the":257,"\u0120t":258,"\u0120th":259,"\u0120the":260)";
    const std::string merges = R"(["t h", "th e", "\u0120 t", "\u0120t h", "\u0120th e"])";
    json.replace(json.find("\"vocab\": {}"), 11, "\"vocab\": {" + vocab + "}");
    json.replace(json.find("\"merges\": []"), 12, "\"merges\": " + merges);
    auto r = mx::tok::Tokenizer::FromJson(json);
    if (!r.ok()) {
      std::fprintf(stderr, "fixed tokenizer: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return new mx::tok::Tokenizer(std::move(r).value());
  }();
  return *tok;
}

std::string Stream(const mx::tok::Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  mx::tok::StreamingDetokenizer d(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string c = d.Push(id);
    if (!mx::tok::IsValidUtf8(c)) std::abort();
    out += c;
  }
  return out + d.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto tok = mx::tok::Tokenizer::FromJson(rest);
      if (tok.ok()) {
        auto ids = tok->Encode("Hello world 123 <|user|> caf\xC3\xA9 \xF0\x9F\x98\x80");
        (void)tok->Decode(ids, true);
      }
      break;
    }
    case 1: {
      const auto& tok = Fixed();
      const auto ids = tok.Encode(rest, /*allow_special=*/false);
      // Special tokens are plain text here, so the only change is NFC of the sanitized text.
      if (tok.Decode(ids) != mx::tok::NfcNormalize(mx::tok::SanitizeUtf8(rest))) std::abort();
      const auto ids2 = tok.Encode(rest, /*allow_special=*/true);
      if (Stream(tok, ids2, false) != tok.Decode(ids2)) std::abort();
      break;
    }
    case 2: {
      const auto& tok = Fixed();
      std::vector<int32_t> ids;
      for (size_t i = 0; i + 1 < rest.size(); i += 2) {
        ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(rest[i]) |
                                           (static_cast<uint8_t>(rest[i + 1]) << 8)) %
                      400);
      }
      for (bool skip : {false, true}) {
        if (Stream(tok, ids, skip) != tok.Decode(ids, skip)) std::abort();
      }
      break;
    }
  }
  return 0;
}
