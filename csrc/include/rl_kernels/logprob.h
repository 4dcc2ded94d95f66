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

// CUDA versions, asynchronous on `stream`. All pointers are device memory. The
// forward has the CPU contract. The backward writes d loss / d z into `grad`
// (row stride `ld_grad`, element type `grad_dtype`: fp32, or the GEMM's 16-bit
// type so the two input-gradient GEMMs read it without a cast); `grad` may be
// `logits` itself when `grad_dtype` is RL_FLOAT32 and `ld_grad` equals `ld`.
typedef struct CUstream_st* rl_cuda_stream_t;  // as in bucket.h (an identical typedef is legal)
rl_status_t rl_logprob_tile_forward_cuda(const float* logits, int64_t rows, int64_t cols,
                                         int64_t ld, const int64_t* labels, int64_t col_start,
                                         float scale, float* row_max, float* row_sum,
                                         float* row_sx, float* label_x, rl_cuda_stream_t stream);
rl_status_t rl_logprob_tile_backward_cuda(const float* logits, int64_t rows, int64_t cols,
                                          int64_t ld, const int64_t* labels, int64_t col_start,
                                          float scale, const float* lse, const float* mean_x,
                                          const float* grad_logprob, const float* grad_entropy,
                                          void* grad, int32_t grad_dtype, int64_t ld_grad,
                                          rl_cuda_stream_t stream);

#ifdef __cplusplus
}
#endif
