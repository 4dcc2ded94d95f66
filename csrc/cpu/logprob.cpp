// CPU epilogues of the fused log-prob / entropy op (see rl_kernels/logprob.h).
// One pass over each row of the tile: the running max is updated first, so
// the sums are rescaled at most once per tile rather than per element.
#include "rl_kernels/logprob.h"

#include <cmath>
#include <limits>

namespace {

rl_status_t check(const void* logits, int64_t rows, int64_t cols, int64_t ld, const void* labels) {
  if (rows < 0 || cols < 0 || ld < cols) return RL_ERR_BAD_SIZE;
  if (rows > 0 && cols > 0 && (logits == nullptr || labels == nullptr)) return RL_ERR_NULL_POINTER;
  return RL_OK;
}

void forward_row(const float* z, int64_t cols, int64_t label, float scale, float& m, float& s,
                 float& sx, float& label_x) {
  float tile_max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < cols; ++j) tile_max = std::fmax(tile_max, z[j] * scale);
  const float new_max = std::fmax(m, tile_max);
  // Rescale what was accumulated under the old max (exp(-inf) = 0 on the first tile).
  const float rescale = std::isinf(m) ? 0.0f : std::exp(m - new_max);
  float tile_sum = 0.0f, tile_sx = 0.0f;
  for (int64_t j = 0; j < cols; ++j) {
    const float x = z[j] * scale;
    const float e = std::exp(x - new_max);
    tile_sum += e;
    tile_sx += e * x;
  }
  s = s * rescale + tile_sum;
  sx = sx * rescale + tile_sx;
  m = new_max;
  if (label >= 0 && label < cols) label_x = z[label] * scale;
}

}  // namespace

extern "C" rl_status_t rl_logprob_tile_forward(const float* logits, int64_t rows, int64_t cols,
                                               int64_t ld, const int64_t* labels,
                                               int64_t col_start, float scale, float* row_max,
                                               float* row_sum, float* row_sx, float* label_x,
                                               int num_threads) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK) return status;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(num_threads > 0 ? num_threads : 1) if (rows > 16)
#else
  (void)num_threads;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    forward_row(logits + r * ld, cols, labels[r] - col_start, scale, row_max[r], row_sum[r],
                row_sx[r], label_x[r]);
  }
  return RL_OK;
}

extern "C" rl_status_t rl_logprob_tile_backward(float* logits, int64_t rows, int64_t cols,
                                                int64_t ld, const int64_t* labels,
                                                int64_t col_start, float scale, const float* lse,
                                                const float* mean_x, const float* grad_logprob,
                                                const float* grad_entropy, int num_threads) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK) return status;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(num_threads > 0 ? num_threads : 1) if (rows > 16)
#else
  (void)num_threads;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    float* z = logits + r * ld;
    const int64_t label = labels[r] - col_start;
    const float g_lp = grad_logprob[r], g_h = grad_entropy[r];
    for (int64_t j = 0; j < cols; ++j) {
      const float x = z[j] * scale;
      const float p = std::exp(x - lse[r]);
      float grad = -g_lp * p - g_h * p * (x - mean_x[r]);
      if (j == label) grad += g_lp;
      z[j] = grad * scale;
    }
  }
  return RL_OK;
}
