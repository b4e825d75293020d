// Normalizer parsing and application.
#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace mx::tok {
namespace {

Status Parse(const nlohmann::json& j, const std::string& where,
             std::vector<Normalizer::Kind>* steps) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return DataLoss("{}: expected an object or null", where);
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return DataLoss("{}.type: expected a string", where);
  const std::string type = *t;
  if (type == "NFC") {
    steps->push_back(Normalizer::Kind::kNfc);
    return Status::Ok();
  }
  if (type == "Sequence") {
    auto n = j.find("normalizers");
    if (n == j.end() || !n->is_array()) {
      return DataLoss("{}.normalizers: expected an array", where);
    }
    for (size_t i = 0; i < n->size(); ++i) {
      MX_RETURN_IF_ERROR(Parse((*n)[i], fmt::format("{}.normalizers[{}]", where, i), steps));
    }
    return Status::Ok();
  }
  return Unimplemented("{}.type: normalizer \"{}\" is not supported (supported: NFC, Sequence)",
                       where, type);
}

}  // namespace

Result<Normalizer> Normalizer::FromJson(const nlohmann::json& j, const std::string& where) {
  Normalizer n;
  MX_RETURN_IF_ERROR(Parse(j, where, &n.steps_));
  return n;
}

std::string Normalizer::Apply(std::string_view s) const {
  std::string out(s);
  for (Kind k : steps_) {
    switch (k) {
      case Kind::kNfc:
        if (!IsNfcQuickYes(out)) out = NfcNormalize(out);
        break;
    }
  }
  return out;
}

}  // namespace mx::tok
