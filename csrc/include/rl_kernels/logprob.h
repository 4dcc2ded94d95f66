// Epilogues of the fused log-prob / entropy op. The caller computes a float32
// tile of logits z = hidden @ weight[cols]^T (rows x cols, row stride `ld`);
// these functions turn it into per-row softmax statistics (forward) or into
// the gradient w.r.t. z (backward) without ever holding a full [T, V] row set.
// Softmax is over x = z * scale (scale = 1 / temperature).
#pragma once

#include "rl_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// Online update of running row statistics with one tile whose first column is
// vocabulary id `col_start`:
//   row_max  m   = max_j x_j
//   row_sum  s   = sum_j exp(x_j - m)
//   row_sx   sx  = sum_j exp(x_j - m) * x_j
//   label_x      = x_label when the label falls in this tile (else untouched)
// Start with m = -inf, s = sx = 0.
rl_status_t rl_logprob_tile_forward(const float* logits, int64_t rows, int64_t cols, int64_t ld,
                                    const int64_t* labels, int64_t col_start, float scale,
                                    float* row_max, float* row_sum, float* row_sx,
                                    float* label_x, int num_threads);

// Overwrite the tile with d loss / d z, given lse = log sum exp x, mean_x =
// sum_j p_j x_j and the upstream gradients of logprob and entropy per row:
//   d/dx_j = g_lp (1[j = label] - p_j) - g_H p_j (x_j - mean_x),  d/dz = d/dx * scale.
rl_status_t rl_logprob_tile_backward(float* logits, int64_t rows, int64_t cols, int64_t ld,
                                     const int64_t* labels, int64_t col_start, float scale,
                                     const float* lse, const float* mean_x,
                                     const float* grad_logprob, const float* grad_entropy,
                                     int num_threads);

#ifdef __cplusplus
}
#endif
