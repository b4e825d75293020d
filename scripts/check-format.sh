#!/usr/bin/env bash
# Checks C++ formatting against the committed .clang-format. Checks every tracked C++ file
# (a superset of "changed files", so a fresh clone in CI checks what a submission changed).
# --fix rewrites the files instead.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cc' '*.hpp' '*.cu' | grep -v '^third_party/' || true)
[ ${#files[@]} -eq 0 ] && exit 0
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/mx-format.log; then
  echo "check-format: these files need clang-format (run 'make format'):"
  grep -oE '^[^:]+\.(cpp|h|cc|hpp|cu)' /tmp/mx-format.log | sort -u | sed 's/^/  /'
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
