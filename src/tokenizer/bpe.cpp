// BPE model: parsing (vocab, merges in "a b" and ["a", "b"] forms) and the heap merge loop.
#include "tokenizer/bpe.h"

#include <atomic>
#include <mutex>
#include <queue>

#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace mx::tok {

struct BpeModel::Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  std::atomic<uint64_t> heap_pops{0};
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

uint64_t BpeModel::heap_pops() const { return cache_->heap_pops.load(); }

namespace {

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

Result<bool> BoolOrFalse(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) return DataLoss("{}.{}: expected a boolean", where, key);
  return it->get<bool>();
}

}  // namespace

Result<BpeModel> BpeModel::FromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return DataLoss("{}: expected an object", where);
  if (auto t = j.find("type"); t != j.end()) {
    if (!t->is_string()) return DataLoss("{}.type: expected a string", where);
    if (*t != "BPE") {
      return Unimplemented("{}.type: model \"{}\" is not supported (supported: BPE)", where,
                           t->get<std::string>());
    }
  } else if (!j.contains("merges")) {
    return DataLoss("{}.type: missing (and no \"merges\" to infer BPE from)", where);
  }
  BpeModel m;
  // Options that change encoding and that mxserve does not implement are errors.
  if (auto d = j.find("dropout"); d != j.end() && !d->is_null()) {
    if (!d->is_number()) return DataLoss("{}.dropout: expected a number or null", where);
    if (d->get<double>() != 0.0) {
      return Unimplemented("{}.dropout: BPE dropout {} is not supported", where, d->dump());
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
      if (!it->is_string()) return DataLoss("{}.{}: expected a string or null", where, key);
      if (!it->get<std::string>().empty()) {
        return Unimplemented("{}.{}: \"{}\" is not supported", where, key, it->get<std::string>());
      }
    }
  }
  MX_ASSIGN_OR_RETURN(m.fuse_unk_, BoolOrFalse(j, "fuse_unk", where));
  MX_ASSIGN_OR_RETURN(m.byte_fallback_, BoolOrFalse(j, "byte_fallback", where));
  MX_ASSIGN_OR_RETURN(m.ignore_merges_, BoolOrFalse(j, "ignore_merges", where));

  auto v = j.find("vocab");
  if (v == j.end() || !v->is_object()) return DataLoss("{}.vocab: expected an object", where);
  m.vocab_.reserve(v->size());
  int64_t max_id = -1;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return DataLoss("{}.vocab[\"{}\"]: expected an integer id", where, it.key());
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 30)) {
      return DataLoss("{}.vocab[\"{}\"]: id {} out of range [0, 2^30)", where, it.key(), id);
    }
    m.vocab_.emplace(it.key(), static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  m.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [tok, id] : m.vocab_) {
    if (!m.id_to_token_[id].empty()) {
      return DataLoss("{}.vocab: id {} is used by both \"{}\" and \"{}\"", where, id,
                      m.id_to_token_[id], tok);
    }
    m.id_to_token_[id] = tok;
  }
  m.small_char_id_.assign(1024, -1);
  for (const auto& [tok, id] : m.vocab_) {
    size_t pos = 0;
    char32_t cp;
    if (!tok.empty() && DecodeUtf8(tok, &pos, &cp) && pos == tok.size() && cp < 1024) {
      m.small_char_id_[cp] = id;
    }
  }

  if (auto u = j.find("unk_token"); u != j.end() && !u->is_null()) {
    if (!u->is_string()) return DataLoss("{}.unk_token: expected a string or null", where);
    auto id = m.TokenId(u->get<std::string>());
    if (!id) {
      return DataLoss("{}.unk_token: \"{}\" is not in the vocabulary", where,
                      u->get<std::string>());
    }
    m.unk_id_ = *id;
  }

  auto mg = j.find("merges");
  if (mg == j.end() || !mg->is_array()) return DataLoss("{}.merges: expected an array", where);
  m.merges_.reserve(mg->size());
  std::string joined;
  for (size_t r = 0; r < mg->size(); ++r) {
    const auto& e = (*mg)[r];
    std::string_view a, b;
    std::string s;
    if (e.is_string()) {
      s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return DataLoss("{}.merges[{}]: \"{}\" is not two tokens separated by one space", where, r,
                        s);
      }
      a = std::string_view(s).substr(0, sp);
      b = std::string_view(s).substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get_ref<const std::string&>();
      b = e[1].get_ref<const std::string&>();
    } else {
      return DataLoss("{}.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", where, r);
    }
    auto ia = m.TokenId(a), ib = m.TokenId(b);
    joined.assign(a);
    joined.append(b);
    auto inew = m.TokenId(joined);
    if (!ia || !ib || !inew) {
      return DataLoss("{}.merges[{}]: token \"{}\" is not in the vocabulary", where, r,
                      !ia   ? std::string(a)
                      : !ib ? std::string(b)
                            : joined);
    }
    // note: a repeated pair keeps its later rank, as in Hugging Face's HashMap insert.
    m.merges_[PairKey(*ia, *ib)] = MergeInfo{static_cast<int32_t>(r), *inew};
  }
  return m;
}

std::optional<int32_t> BpeModel::TokenId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

int32_t BpeModel::CharId(std::string_view ch) const {
  size_t pos = 0;
  char32_t cp;
  if (DecodeUtf8(ch, &pos, &cp) && cp < 1024) return small_char_id_[cp];
  auto it = vocab_.find(ch);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  // Initial symbols: one per character.
  size_t i = 0;
  while (i < word.size()) {
    const size_t start = i;
    char32_t cp;
    DecodeUtf8(word, &i, &cp);
    const std::string_view ch = word.substr(start, i - start);
    int32_t id = CharId(ch);
    if (id < 0) {
      bool handled = false;
      if (byte_fallback_) {
        std::vector<int32_t> bytes;
        for (unsigned char b : ch) {
          auto bid = TokenId(fmt::format("<0x{:02X}>", b));
          if (!bid) break;
          bytes.push_back(*bid);
        }
        if (bytes.size() == ch.size()) {
          for (int32_t b : bytes) sym.push_back({b, 0, 0, true});
          handled = true;
        }
      }
      if (!handled && unk_id_) {
        if (!(fuse_unk_ && !sym.empty() && sym.back().id == *unk_id_)) {
          sym.push_back({*unk_id_, 0, 0, true});
        }
      }
      continue;
    }
    sym.push_back({id, 0, 0, true});
  }
  const auto n = static_cast<int32_t>(sym.size());
  for (int32_t k = 0; k < n; ++k) {
    sym[k].prev = k - 1;
    sym[k].next = k + 1 < n ? k + 1 : -1;
  }
  // Heap of candidate merges, lowest rank first, then leftmost.
  struct Cand {
    int32_t rank;
    int32_t pos;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    auto it = merges_.find(PairKey(sym[left].id, sym[sym[left].next].id));
    if (it != merges_.end()) heap.push({it->second.rank, left});
  };
  for (int32_t k = 0; k + 1 < n; ++k) push(k);
  uint64_t pops = 0;
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    ++pops;
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;  // stale entry
    left.id = it->second.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  cache_->heap_pops.fetch_add(pops, std::memory_order_relaxed);
  for (int32_t k = 0; k >= 0 && k < n; k = sym[k].next) ids->push_back(sym[k].id);
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = TokenId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->map.find(word); it != cache_->map.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  MergeWord(word, ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->map.size() >= kCacheCapacity) cache_->map.clear();
    cache_->map.emplace(std::string(word), std::vector<int32_t>(ids->begin() + first, ids->end()));
  }
}

}  // namespace mx::tok
