#!/usr/bin/env bash
# Mutation check (docs/testing.md): breaks each named spot on purpose, builds, runs the tests
# that should catch it, records which fail, and reverts. Not part of `make test`: it rebuilds
# the test executables the row's regex runs (each ctest prefix `NAME.` is one module's
# `NAME_tests`, cmake/mx_module.cmake) once per mutation, and after the last row rebuilds them
# without it. Usage: scripts/mutation-check.sh [N ...] (default: all).
set -u
cd "$(git rev-parse --show-toplevel)"
if ! git diff --quiet; then echo "mutation-check: the tree has changes; commit or stash them" >&2; exit 2; fi
# N | file | perl substitution | ctest regex
MUTATIONS=(
  '1|src/kernels/kernels_ref.cpp|s/\*a = x0 \* cos\[j\] - x1 \* sin\[j\];/*a = x0 * cos[j] + x1 * sin[j];/|^(kernels|model)\.'
  '2|src/kernels/attention_ref.cpp|s/  int64_t o = 0;\n  for \(int64_t t = 0; t < n; \+\+t\) \{\n    const uint32_t key = SortKey\(scores\[t\]\);\n    if \(key > prefix \x7c\x7c \(key == prefix && need-- > 0\)\)/  int64_t o = 0, ties = 0;\n  for (int64_t t = 0; t < n; ++t) ties += SortKey(scores[t]) == prefix;\n  for (int64_t t = 0; t < n; ++t) {\n    const uint32_t key = SortKey(scores[t]);\n    if (key > prefix \x7c\x7c (key == prefix \&\& ties-- <= need))/|^(kernels|model)\.'
  '3|src/model/moe.cpp|s/b\[e\] = s\[e\] \+ w\.e_score_correction_bias\[e\];/b[e] = s[e];/|^model\.'
  '4|src/kv/radix_cache.cpp|s/r\.tokens = pos;/r.tokens = pos > 0 ? pos + 1 : 0;/|^(kv|engine)\.'
  '5|src/kv/paged_kv_store.cpp|s/float v = x\[i\] \* inv;/float v = x[i] * scale;/|^kv\.'
  '6|src/quant/mxfp4.cpp|s/c\[2 \* i\] = p\[i\] & 0xf;/c[2 * i] = p[i] >> 4;/; s/c\[2 \* i \+ 1\] = p\[i\] >> 4;/c[2 * i + 1] = p[i] \& 0xf;/|^(quant|model|io)\.'
  '7|src/server/choice_output.cpp|s/held_\.resize\(held_\.size\(\) - std::min\(held_\.size\(\), trim\)\);/(void)trim;/|^server\.'
  '8|src/engine/logits_processor.cpp|s/logits\[t\] -= req\.frequency_penalty/logits[t] += req.frequency_penalty/|^(engine|server)\.'
  '9|src/model/model.cpp|s/if \(shard\.whole\(\)\) return Status::Ok\(\);/return Status::Ok();/|^(model|parallel|engine)\.'
  '10|src/server/generation.cpp|s/return tail \+ kSseDone;/return tail;/|^server\.'
  '11|src/engine/output_text.cpp|s/tail_\.size\(\) - found\)/tail_.size() - found - 1)/|^(engine|server)\.'
)
want=" $* "
built=""
for m in "${MUTATIONS[@]}"; do
  IFS='|' read -r n file expr regex <<<"$m"
  [[ $# -gt 0 && "$want" != *" $n "* ]] && continue
  # ^(a|b)\. -> a_tests b_tests
  targets=$(sed -E 's/^\^\(?([a-z_|]+)\)?\\\.$/\1/; s/\|/_tests /g; s/$/_tests/' <<<"$regex")
  built="$built $targets"
  perl -0pi -e "$expr" "$file"
  if git diff --quiet -- "$file"; then echo "[$n] the substitution did not apply to $file" >&2; exit 3; fi
  # shellcheck disable=SC2086  # one word per target
  if ! nice -n 19 cmake --build --preset release -j2 --target $targets >/tmp/mutation-$n.build 2>&1; then
    echo "[$n] caught at build time (see /tmp/mutation-$n.build)"
  else
    nice -n 19 ctest --preset release -R "$regex" -j2 >/tmp/mutation-$n.ctest 2>&1
    failed=$(grep -cE '^\s+[0-9]+ - ' /tmp/mutation-$n.ctest)
    echo "[$n] $file: $failed tests failed (regex $regex)"
    grep -E '^\s+[0-9]+ - ' /tmp/mutation-$n.ctest | sed 's/^/    /'
    [[ $failed -eq 0 ]] && echo "[$n] NOT CAUGHT"
  fi
  git checkout -- "$file"
done
git diff --quiet && echo "tree clean"
# The last row's binaries still hold its mutation: rebuild them from the clean tree.
# shellcheck disable=SC2086
[[ -n "$built" ]] && nice -n 19 cmake --build --preset release -j2 --target $built >/dev/null &&
  echo "rebuilt without the mutations:$built"
