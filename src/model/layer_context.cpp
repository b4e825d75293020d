#include "model/layer_context.h"

#include <cmath>

namespace mx {

void FillRopeTables(LayerContext& ctx) {
  const int64_t d = ctx.c.qk_rope_head_dim, half = d / 2;
  const double theta = ctx.c.rope.rope_theta;
  ctx.rope_cos.resize(ctx.rows() * half);
  ctx.rope_sin.resize(ctx.rows() * half);
  for (int64_t r = 0; r < ctx.rows(); ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(j) / d);
      const double phi = static_cast<double>(ctx.pos[r]) * inv_freq;
      ctx.rope_cos[r * half + j] = static_cast<float>(std::cos(phi));
      ctx.rope_sin[r * half + j] = static_cast<float>(std::sin(phi));
    }
  }
}

}  // namespace mx
