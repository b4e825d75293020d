# Precompiled headers: the third-party headers that most translation units include (nlohmann
# json, fmt, spdlog, GoogleTest, CLI11 and the standard containers) cost 1-3 s of parsing per
# unit, 30-40% of a cold build. Each flavour of compile flags gets one precompiled header,
# built once by a host target and reused (REUSE_FROM) by every target of that flavour:
#   mx_pch_lib   the mx_* static libraries (-fPIC)
#   mx_pch_test  the GoogleTest executables (-fPIE, -O0 like their bodies)
# mxserve (CLI11) and the bench programs keep their own or none. The per-ISA units
# (*_avx2.cpp, *_avx512.cpp) are compiled without: their -m flags would invalidate it.
# -DMX_PCH=OFF builds without, which also shows a unit that forgot an #include.
option(MX_PCH "Precompiled headers for the common third-party headers" ON)

set(MX_PCH_COMMON
  <algorithm> <cstdint> <cstring> <functional> <map> <memory> <mutex> <optional> <set>
  <string> <string_view> <unordered_map> <utility> <vector>
  <fmt/format.h> <spdlog/spdlog.h> <nlohmann/json.hpp>)

if(MX_PCH)
  add_library(mx_pch_lib OBJECT ${CMAKE_SOURCE_DIR}/cmake/pch/host.cpp)
  target_link_libraries(mx_pch_lib PRIVATE spdlog::spdlog fmt::fmt nlohmann_json::nlohmann_json)
  target_compile_definitions(mx_pch_lib PRIVATE MX_VERSION="${PROJECT_VERSION}")
  target_precompile_headers(mx_pch_lib PRIVATE ${MX_PCH_COMMON})
  if(MX_BUILD_TESTS)
    add_executable(mx_pch_test ${CMAKE_SOURCE_DIR}/cmake/pch/host.cpp)
    target_link_libraries(mx_pch_test PRIVATE spdlog::spdlog fmt::fmt
                          nlohmann_json::nlohmann_json GTest::gtest GTest::gtest_main)
    target_compile_options(mx_pch_test PRIVATE -O0)
    target_precompile_headers(mx_pch_test PRIVATE ${MX_PCH_COMMON} <gtest/gtest.h>)
  endif()
endif()

# mx_use_pch(TARGET lib|test): TARGET reuses the flavour's precompiled header.
function(mx_use_pch TARGET FLAVOUR)
  if(MX_PCH)
    target_precompile_headers(${TARGET} REUSE_FROM mx_pch_${FLAVOUR})
  endif()
endfunction()
