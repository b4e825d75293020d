// The web page at `/`: a dependency-free status panel and chat playground (the files in
// src/server/webui/), compiled into the binary at build time by webui/embed.cmake: no file is
// read at run time and nothing is fetched from elsewhere. The page is a plain client of the
// server: it polls GET /get_server_info and streams POST /v1/chat/completions. With --api-key
// the page itself is public (it holds no data) and asks for the key, which it keeps only in
// its own memory; every route it calls still needs the key.
#pragma once

#include <string_view>
#include <vector>

namespace mx::server {

struct WebAsset {
  std::string_view path;  // "/", "/webui/app.js", ...
  std::string_view content_type;
  std::string_view body;
};

// Every asset, "/" first. Defined in the generated webui_assets.cpp.
const std::vector<WebAsset>& WebUiAssets();

// The asset served at `path`, or nullptr.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace mx::server
