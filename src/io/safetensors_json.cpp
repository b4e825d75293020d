// A SAX handler over nlohmann's parser that builds a DOM while rejecting duplicate keys and
// bounding depth and array length (see safetensors_json.h).
#include "io/safetensors_json.h"

#include <new>
#include <string>
#include <vector>

namespace mx {
namespace {

using json = nlohmann::json;

class StrictDomBuilder {
 public:
  explicit StrictDomBuilder(const StrictJsonLimits& limits) : limits_(limits) {}

  bool null() { return Put(json(nullptr)); }
  bool boolean(bool v) { return Put(json(v)); }
  bool number_integer(json::number_integer_t v) { return Put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return Put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t& /*raw*/) { return Put(json(v)); }
  bool string(json::string_t& v) { return Put(json(std::move(v))); }
  bool binary(json::binary_t& /*v*/) { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t /*n*/) {
    if (!Enter()) return false;
    json* p = Add(json::object());
    if (p == nullptr) return false;
    stack_.push_back(p);
    counts_.push_back(0);
    return true;
  }
  bool key(json::string_t& k) {
    json* obj = stack_.back();
    if (obj->contains(k)) return Fail("duplicate key '" + k + "'");
    pending_key_ = &(*obj)[k];  // inserts a null placeholder, replaced by Put
    return true;
  }
  bool end_object() { return Leave(); }
  bool start_array(std::size_t /*n*/) {
    if (!Enter()) return false;
    json* p = Add(json::array());
    if (p == nullptr) return false;
    stack_.push_back(p);
    counts_.push_back(0);
    return true;
  }
  bool end_array() { return Leave(); }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    // ex.what() looks like "[json.exception.parse_error.101] parse error at line 1, column
    // 5: syntax error while parsing value - unexpected end of input; ..."; keep the tail.
    std::string msg = ex.what();
    auto pos = msg.find(": ");
    if (pos != std::string::npos && msg.compare(0, 15, "[json.exception") == 0) {
      msg = msg.substr(pos + 2);
    }
    error_ = "invalid JSON at byte " + std::to_string(position) + ": " + msg;
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return false;
  }
  bool Enter() {
    if (stack_.size() + 1 > limits_.max_depth) {
      return Fail("nesting deeper than " + std::to_string(limits_.max_depth));
    }
    return true;
  }
  bool Leave() {
    stack_.pop_back();
    counts_.pop_back();
    return true;
  }
  // Places `v` at the current position; returns where it was stored (nullptr on error).
  json* Add(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      if (++counts_.back() > limits_.max_array_len) {
        Fail("array longer than " + std::to_string(limits_.max_array_len) + " elements");
        return nullptr;
      }
      top->push_back(std::move(v));
      return &top->back();
    }
    json* slot = pending_key_;
    pending_key_ = nullptr;
    *slot = std::move(v);
    return slot;
  }
  bool Put(json v) { return Add(std::move(v)) != nullptr; }

  StrictJsonLimits limits_;
  json root_;
  std::vector<json*> stack_;
  std::vector<size_t> counts_;
  json* pending_key_ = nullptr;
  std::string error_;
};

// note: pointers into json arrays (`&top->back()`) are only used until the next push into
// the same array, which happens after the nested value is closed and popped from stack_.

}  // namespace

Result<nlohmann::json> ParseStrictJson(std::string_view text, std::string_view what,
                                       const StrictJsonLimits& limits) {
  StrictDomBuilder builder(limits);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                         /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("{}: out of memory parsing JSON", what);
  } catch (const std::exception& e) {
    return DataLoss("{}: invalid JSON: {}", what, e.what());
  }
  if (!ok) {
    std::string err = builder.error().empty() ? "invalid JSON" : builder.error();
    return DataLoss("{}: {}", what, err);
  }
  return std::move(builder.root());
}

size_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace mx
