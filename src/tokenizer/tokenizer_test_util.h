// Helpers shared by the tokenizer unit tests: reading files under the source tree.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace mx::tok::testing {

inline std::string TokenizerTestDir() { return std::string(MX_SOURCE_DIR) + "/tests/tokenizer"; }

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace mx::tok::testing
