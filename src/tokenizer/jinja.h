// mxserve's Jinja engine: the subset of jinja2 that chat templates use, rendering exactly
// as Hugging Face transformers does (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson = json.dumps, raise_exception). Most callers want
// ChatTemplate (chat_template.h); this is the generic layer beneath it.
//
// Thread safety: a parsed Template is immutable; any number of threads may render it at
// once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_render.h"
#include "tokenizer/jinja_value.h"

namespace mx::jinja {

// Parse errors read "NAME:LINE:COL: message".
Result<std::shared_ptr<const Template>> Parse(std::string_view source,
                                              std::string_view name = "template");

// Renders with `globals` as the template's variables. Errors (raise_exception, undefined
// calls, type errors, exceeded limits) read "NAME:LINE:COL: message"; none crash.
Result<std::string> Render(const Template& tmpl, const Dict& globals,
                           const RenderLimits& limits = {});

}  // namespace mx::jinja
