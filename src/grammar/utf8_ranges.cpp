// Code point ranges -> UTF-8 byte-class sequences.
#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <string>

namespace mx::grammar {

namespace {

int Utf8Len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// [lo, hi] of one encoded length, split until every byte position is a plain range.
void Split(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  const int n = Utf8Len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out->push_back(std::move(seq));
}

}  // namespace

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

CodepointRanges Normalize(CodepointRanges r) {
  CodepointRanges cut;
  for (auto [lo, hi] : r) {
    if (lo > hi) std::swap(lo, hi);
    hi = std::min(hi, kMaxCodepoint);
    if (lo > hi) continue;
    if (lo < 0xD800 && hi >= 0xD800) {  // surrogates are not scalar values
      if (hi > 0xDFFF) cut.push_back({0xE000, hi});
      hi = 0xD7FF;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi <= 0xDFFF) continue;
      lo = 0xE000;
    }
    cut.push_back({lo, hi});
  }
  std::sort(cut.begin(), cut.end());
  CodepointRanges out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

CodepointRanges Complement(const CodepointRanges& r) {
  const CodepointRanges n = Normalize(r);
  CodepointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : n) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return Normalize(out);
}

Elem CodepointSet(GrammarBuilder& b, const CodepointRanges& r) {
  const CodepointRanges n = Normalize(r);
  if (n.empty()) {
    b.Fail(InvalidArgument("a character class matches no character"));
    return b.Alt({{}});
  }
  ByteClass ascii;
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [lo, hi] : n) {
    if (lo < 0x80) {
      ascii.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min<uint32_t>(hi, 0x7F)));
      if (hi < 0x80) continue;
      lo = 0x80;
    }
    // Split at the encoded-length boundaries, then at continuation-byte wraps.
    for (uint32_t edge : {0x7FFu, 0xFFFFu}) {
      if (lo <= edge && hi > edge) {
        Split(lo, edge, &seqs);
        lo = edge + 1;
      }
    }
    Split(lo, hi, &seqs);
  }
  std::vector<Seq> alts;
  if (!ascii.Empty()) alts.push_back({b.Class(ascii)});
  for (const auto& s : seqs) {
    Seq q;
    for (auto [lo, hi] : s) {
      ByteClass c;
      c.AddRange(lo, hi);
      q.push_back(b.Class(c));
    }
    alts.push_back(std::move(q));
  }
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return b.Alt(std::move(alts), "char");
}

}  // namespace mx::grammar
