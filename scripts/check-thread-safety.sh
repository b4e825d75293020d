#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety, as errors) over every source file that takes
# an mx::MutexLock or declares GUARDED_BY state (base/mutex.h): a member read without its GUARDED_BY lock, or a REQUIRES function called
# without the lock, fails the check. Syntax only (no code generated), so it is cheap enough
# for `make test`; the build itself stays on the default compiler.
# Usage: scripts/check-thread-safety.sh [files...]   (default: every such file)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
CLANG=${CLANG:-clang++}
if ! command -v "$CLANG" >/dev/null; then
  echo "check-thread-safety: $CLANG not found (apt-get install clang)"
  exit 1
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git grep -lE 'MutexLock|GUARDED_BY' -- 'src/*.cpp' 'src/*.h' \
    ':!src/base/mutex.h' ':!src/base/thread_annotations.h')
fi
flags=(-std=c++20 -fsyntax-only -Isrc -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL
       -DSPDLOG_SHARED_LIB -DMX_VERSION='"check"' -Wthread-safety -Werror=thread-safety
       -Wno-unknown-warning-option)
status=0
for f in "${files[@]}"; do
  case "$f" in
    *.h) "$CLANG" "${flags[@]}" -x c++ "$f" || status=1 ;;
    *) "$CLANG" "${flags[@]}" "$f" || status=1 ;;
  esac
done
[ $status -eq 0 ] && echo "check-thread-safety: ${#files[@]} files clean"
exit $status
