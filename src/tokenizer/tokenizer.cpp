// tokenizer.json loading and the encode/decode pipelines.
#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace mx::tok {

struct Tokenizer::Impl {
  std::optional<BpeModel> model;
  std::optional<Normalizer> normalizer;
  std::optional<PreTokenizer> pre_tokenizer;
  std::optional<AddedVocab> added;
  bool decoder_byte_level = false;
  // Per id: text (vocab string / added content), decoded bytes, flags.
  std::vector<std::string> text;
  std::vector<std::string> bytes;
  std::vector<uint8_t> flags;  // kDefined | kSpecial
  std::unordered_map<std::string, int32_t> added_by_content;
  static constexpr uint8_t kDefined = 1, kSpecial = 2;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

Result<bool> FlagOr(const nlohmann::json& j, const char* key, bool dflt, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return DataLoss("{}.{}: expected a boolean", where, key);
  return it->get<bool>();
}

Status ParseDecoder(const nlohmann::json& j, bool* byte_level) {
  *byte_level = false;
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return DataLoss("decoder: expected an object or null");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return DataLoss("decoder.type: expected a string");
  if (*t == "ByteLevel") {
    *byte_level = true;
    return Status::Ok();
  }
  return Unimplemented("decoder.type: decoder \"{}\" is not supported (supported: ByteLevel)",
                       t->get<std::string>());
}

// The post-processor only matters for add_special_tokens=True, which Encode does not do; the
// known types are accepted so that ordinary files load, unknown ones are refused.
Status CheckPostProcessor(const nlohmann::json& j) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return DataLoss("post_processor: expected an object or null");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return DataLoss("post_processor.type: expected a string");
  const std::string type = *t;
  if (type == "ByteLevel" || type == "TemplateProcessing" || type == "Sequence") {
    return Status::Ok();
  }
  return Unimplemented(
      "post_processor.type: \"{}\" is not supported (supported: ByteLevel, TemplateProcessing, "
      "Sequence)",
      type);
}

}  // namespace

Result<Tokenizer> Tokenizer::FromJson(std::string_view json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss("not valid JSON");
  if (!j.is_object()) return DataLoss("top level: expected a JSON object");
  Tokenizer tok;
  Impl& im = *tok.impl_;

  auto model = j.find("model");
  if (model == j.end()) return DataLoss("model: missing");
  MX_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::FromJson(*model, "model"));
  im.model.emplace(std::move(bpe));

  static const nlohmann::json kNull;
  auto get = [&](const char* key) -> const nlohmann::json& {
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  MX_ASSIGN_OR_RETURN(Normalizer norm, Normalizer::FromJson(get("normalizer"), "normalizer"));
  im.normalizer.emplace(std::move(norm));
  MX_ASSIGN_OR_RETURN(PreTokenizer pre,
                      PreTokenizer::FromJson(get("pre_tokenizer"), "pre_tokenizer"));
  im.pre_tokenizer.emplace(std::move(pre));
  MX_RETURN_IF_ERROR(ParseDecoder(get("decoder"), &im.decoder_byte_level));
  MX_RETURN_IF_ERROR(CheckPostProcessor(get("post_processor")));

  // Added tokens.
  std::vector<AddedToken> added;
  const nlohmann::json& at = get("added_tokens");
  if (!at.is_null() && !at.is_array()) return DataLoss("added_tokens: expected an array");
  for (size_t i = 0; i < at.size(); ++i) {
    const auto& e = at[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    if (!e.is_object()) return DataLoss("{}: expected an object", where);
    AddedToken t;
    auto id = e.find("id");
    if (id == e.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() >= (int64_t{1} << 30)) {
      return DataLoss("{}.id: expected an integer in [0, 2^30)", where);
    }
    t.id = id->get<int32_t>();
    auto content = e.find("content");
    if (content == e.end() || !content->is_string()) {
      return DataLoss("{}.content: expected a string", where);
    }
    t.content = content->get<std::string>();
    if (!IsValidUtf8(t.content)) return DataLoss("{}.content: not valid UTF-8", where);
    MX_ASSIGN_OR_RETURN(t.special, FlagOr(e, "special", false, where));
    MX_ASSIGN_OR_RETURN(t.lstrip, FlagOr(e, "lstrip", false, where));
    MX_ASSIGN_OR_RETURN(t.rstrip, FlagOr(e, "rstrip", false, where));
    MX_ASSIGN_OR_RETURN(t.single_word, FlagOr(e, "single_word", false, where));
    MX_ASSIGN_OR_RETURN(t.normalized, FlagOr(e, "normalized", !t.special, where));
    added.push_back(std::move(t));
  }

  // Per-id tables.
  const auto& vocab = im.model->id_to_token();
  size_t n = vocab.size();
  for (const auto& t : added) n = std::max(n, static_cast<size_t>(t.id) + 1);
  im.text.assign(n, std::string());
  im.bytes.assign(n, std::string());
  im.flags.assign(n, 0);
  ByteLevelAlphabet alphabet;
  auto decoded = [&](const std::string& s) {
    if (!im.decoder_byte_level) return s;
    std::string b;
    if (alphabet.Decode(s, &b)) return b;
    return s;  // a character outside the alphabet: the token's own UTF-8 (as HF does)
  };
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    im.text[id] = vocab[id];
    im.bytes[id] = decoded(vocab[id]);
    im.flags[id] = Impl::kDefined;
  }
  for (const auto& t : added) {
    im.text[t.id] = t.content;
    im.bytes[t.id] = decoded(t.content);
    im.flags[t.id] = Impl::kDefined | (t.special ? Impl::kSpecial : 0);
    im.added_by_content[t.content] = t.id;
  }
  MX_ASSIGN_OR_RETURN(AddedVocab av, AddedVocab::Create(std::move(added)));
  im.added.emplace(std::move(av));
  return tok;
}

Result<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open tokenizer file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("{}: read failed", path);
  auto r = FromJson(ss.str());
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool allow_special) const {
  const Impl& im = *impl_;
  std::string sanitized;
  if (!IsValidUtf8(text)) {
    sanitized = SanitizeUtf8(text);
    text = sanitized;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  auto encode_piece = [&](std::string_view piece) { im.model->EncodeWord(piece, &ids); };
  auto encode_normalized = [&](std::string_view seg) {
    im.pre_tokenizer->Apply(seg, encode_piece);
  };
  auto push_id = [&](int32_t id) { ids.push_back(id); };
  im.added->Split(
      text, /*normalized=*/false, allow_special,
      [&](std::string_view raw) {
        if (im.normalizer->is_identity()) {
          im.added->Split(raw, /*normalized=*/true, allow_special, encode_normalized, push_id);
        } else {
          const std::string norm = im.normalizer->Apply(raw);
          im.added->Split(norm, /*normalized=*/true, allow_special, encode_normalized, push_id);
        }
      },
      push_id);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& im = *impl_;
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (!IsDefined(id)) continue;
    if (skip_special && (im.flags[id] & Impl::kSpecial)) continue;
    if (!im.decoder_byte_level && !first) out.push_back(' ');
    out.append(im.bytes[id]);
    first = false;
  }
  if (IsValidUtf8(out)) return out;
  return SanitizeUtf8(out);
}

Status Tokenizer::CheckIds(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!IsDefined(ids[i])) {
      return InvalidArgument("token id {} (at index {}) is not in the vocabulary (size {})", ids[i],
                             i, vocab_size());
    }
  }
  return Status::Ok();
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->flags.size()); }

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token));
      it != impl_->added_by_content.end()) {
    return it->second;
  }
  return impl_->model->TokenId(token);
}

bool Tokenizer::IsDefined(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->flags.size() &&
         (impl_->flags[id] & Impl::kDefined);
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  return IsDefined(id) ? std::string_view(impl_->text[id]) : std::string_view();
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  return IsDefined(id) ? std::string_view(impl_->bytes[id]) : std::string_view();
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return IsDefined(id) && (impl_->flags[id] & Impl::kSpecial);
}

bool Tokenizer::decoder_joins_with_space() const { return !impl_->decoder_byte_level; }

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added->tokens(); }

uint64_t Tokenizer::bpe_heap_pops() const { return impl_->model->heap_pops(); }

}  // namespace mx::tok
