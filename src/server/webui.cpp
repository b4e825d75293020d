// Lookup of the embedded web page's files (the table itself is generated; see webui.h).
#include "server/webui.h"

namespace mx::server {

const WebAsset* FindWebAsset(std::string_view path) {
  for (const WebAsset& a : WebUiAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace mx::server
