// Public entry points of the Jinja engine.
#include "tokenizer/jinja.h"

#include "tokenizer/jinja_parser.h"

namespace mx::jinja {

Result<std::shared_ptr<const Template>> Parse(std::string_view source, std::string_view name) {
  MX_ASSIGN_OR_RETURN(std::unique_ptr<Template> t, ParseTemplate(source, name));
  return std::shared_ptr<const Template>(std::move(t));
}

Result<std::string> Render(const Template& tmpl, const Dict& globals, const RenderLimits& limits) {
  Renderer r(tmpl, globals, limits);
  return r.Run();
}

}  // namespace mx::jinja
