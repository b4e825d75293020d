// Jinja builtins: filters, tests, Python str/list/dict methods and the globals of the
// Hugging Face chat-template environment (range, dict, namespace, raise_exception,
// strftime_now), each with the behaviour of jinja2 3.1 / Python 3.
#pragma once

#include <string>

#include "base/status.h"
#include "tokenizer/jinja_value.h"

namespace mx::jinja {

class Renderer;

// `obj.name`: Python attribute first (methods), then item; Undefined when missing.
Value GetAttr(const Value& obj, const std::string& name);
// `obj[key]`: item first, then attribute; Undefined when missing.
Value GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's clamping; None/Undefined parts are omitted.
Result<Value> SliceValue(const Value& obj, const Value& start, const Value& stop,
                         const Value& step);

// "No filter named 'x'." / "No test named 'x'." for unknown names.
Result<Value> ApplyFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& args);
Result<bool> ApplyTest(Renderer& r, const std::string& name, const Value& v, CallArgs& args);
bool HasFilter(const std::string& name);
bool HasTest(const std::string& name);

// A global function by name (range, dict, namespace, raise_exception, strftime_now), or
// Undefined.
Value BuiltinGlobal(const std::string& name);

}  // namespace mx::jinja
