#!/usr/bin/env bash
# clang-tidy (the committed .clang-tidy) over the C++ source files a change touches: those that
# differ from the merge base with $MX_TIDY_BASE (default: main, or HEAD~1 where there is no
# main branch), committed or not. With file arguments: those files. A finding fails the check.
# Each file is parsed alone (the build's unity batches are not used), with the build's
# include path and definitions.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
TIDY=${CLANG_TIDY:-clang-tidy}
if ! command -v "$TIDY" >/dev/null; then
  echo "check-tidy: $TIDY not found (apt-get install clang-tidy)"
  exit 1
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  base=${MX_TIDY_BASE:-main}
  git rev-parse -q --verify "$base" >/dev/null || base=HEAD~1
  mb=$(git merge-base HEAD "$base")
  mapfile -t files < <({ git diff --name-only --diff-filter=d "$mb" -- 'src/*.cpp' 'tests/*.cpp' \
    'bench/*.cpp' 'tools/*.cpp'; git ls-files --others --exclude-standard -- 'src/*.cpp'; } |
    sort -u | grep -v '_fuzz\.cpp$' || true)
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "check-tidy: no changed C++ source files"
  exit 0
fi
flags=(-std=c++20 -Isrc -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB
       -DMX_VERSION='"check"' -DMX_TEST_DATA_DIR='"tests/data"' -DMX_SHARED_DIR='"../shared"'
       -DMX_SOURCE_DIR='"."' -DMXSERVE_BIN='"mxserve"' -DMX_MAKE_CHECKPOINT_BIN='"make_checkpoint"' -Wno-unknown-warning-option)
status=0
for f in "${files[@]}"; do
  extra=()
  case "$f" in
    *_avx512.cpp) extra=(-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq
                         -mavx512vnni -mavx512bf16 -mavx512vbmi) ;;
    *_avx2.cpp) extra=(-mavx2 -mfma -mf16c) ;;
  esac
  "$TIDY" --quiet "$f" -- "${flags[@]}" "${extra[@]}" 2>/dev/null || status=1
done
[ $status -eq 0 ] && echo "check-tidy: ${#files[@]} files clean"
exit $status
