#include "model/forward_batch.h"

namespace mx {

int64_t ForwardBatch::num_rows() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

}  // namespace mx
