# mx_module(NAME DEPS <targets...>): a static library mx_<NAME> from src/<NAME>/*.cpp.
#   *_test.cpp      -> the unit-test executable <NAME>_tests (GoogleTest; ctest names "<NAME>.Suite.Test", label "unit")
#   *_fuzz.cpp      -> libFuzzer targets (MX_FUZZ only)
#   *_avx2.cpp      -> compiled with -mavx2 -mfma -mf16c
#   *_avx512.cpp    -> compiled with AVX-512 F/BW/VL/DQ/VNNI/BF16/VBMI flags
# Dependencies are explicit, so a module that includes a header of a module it does not
# depend on fails to link (layering is enforced by the build).
# Unity builds (the release and asan presets set CMAKE_UNITY_BUILD; batches of 8 files): a name
# a file keeps to itself (anonymous namespace, static) must be unique within its module, or be
# in a namespace of the file's own (the test files that reuse kTiny, Case, ... are in
# mx::<file>); CMake builds the per-ISA units alone (they have their own COMPILE_OPTIONS). Unity
# batches cut the repeated header parsing that dominates a cold build; batches of 8 keep enough
# units to run in parallel (one unit per module would serialise the build). The debug preset
# builds file by file, which also shows a file that forgot an #include.
# mx_test_flags(TARGET [PCH]): a GoogleTest executable's own sources at -O0 (with PCH: and the
# test PCH, for targets that link its libraries: fmt, spdlog, nlohmann json). The test bodies
# need no optimisation (the code under test is the library, -O3 in release, -O1 under the
# sanitizers), so they are built at -O0, which compiles them much faster without slowing the
# tests, whose time is spent in the libraries.
function(mx_test_flags TARGET)
  target_compile_options(${TARGET} PRIVATE -O0)
  if("PCH" IN_LIST ARGN)
    mx_use_pch(${TARGET} test)
  endif()
endfunction()

function(mx_module NAME)
  cmake_parse_arguments(MX "" "" "DEPS;TEST_DEPS" ${ARGN})
  file(GLOB all_srcs CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  set(lib_srcs "")
  set(test_srcs "")
  set(fuzz_srcs "")
  foreach(f ${all_srcs})
    if(f MATCHES "_test\\.cpp$")
      list(APPEND test_srcs ${f})
    elseif(f MATCHES "_fuzz\\.cpp$")
      list(APPEND fuzz_srcs ${f})
    else()
      list(APPEND lib_srcs ${f})
      if(f MATCHES "_avx2\\.cpp$")
        set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c"
                                    SKIP_PRECOMPILE_HEADERS ON)
      elseif(f MATCHES "_avx512\\.cpp$")
        set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
          "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx512vbmi"
          SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endif()
  endforeach()
  if(NOT lib_srcs)
    # A module with headers only (or not yet written).
    add_library(mx_${NAME} INTERFACE)
    target_include_directories(mx_${NAME} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(mx_${NAME} INTERFACE ${MX_DEPS})
  else()
    add_library(mx_${NAME} STATIC ${lib_srcs})
    target_include_directories(mx_${NAME} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(mx_${NAME} PUBLIC ${MX_DEPS})
    target_compile_definitions(mx_${NAME} PRIVATE MX_VERSION="${PROJECT_VERSION}")
    if(MX_ASAN AND NOT NAME IN_LIST MX_ASAN_OPTIMIZED_MODULES)
      # (CMakeLists.txt); without the precompiled header, built at -O1, which GCC would refuse.
      target_compile_options(mx_${NAME} PRIVATE -O0)
    else()
      mx_use_pch(mx_${NAME} lib)
    endif()
  endif()
  if(MX_BUILD_TESTS AND test_srcs)
    add_executable(${NAME}_tests ${test_srcs})
    target_link_libraries(${NAME}_tests PRIVATE mx_${NAME} ${MX_TEST_DEPS} GTest::gtest GTest::gtest_main)
    target_compile_definitions(${NAME}_tests PRIVATE
      MX_SHARED_DIR="${MX_SHARED_DIR}" MX_TEST_DATA_DIR="${MX_TEST_DATA_DIR}"
      MX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
    mx_test_flags(${NAME}_tests PCH)
    gtest_discover_tests(${NAME}_tests DISCOVERY_MODE PRE_TEST TEST_PREFIX "${NAME}." PROPERTIES LABELS unit
      DISCOVERY_TIMEOUT 60)
  endif()
  if(MX_FUZZ AND fuzz_srcs)
    foreach(f ${fuzz_srcs})
      get_filename_component(fname ${f} NAME_WE)
      add_executable(${fname} ${f})
      target_link_libraries(${fname} PRIVATE mx_${NAME})
      target_compile_options(${fname} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_link_options(${fname} PRIVATE -fsanitize=fuzzer,address,undefined)
    endforeach()
  endif()
endfunction()
