// CUDA epilogues of the fused log-prob / entropy op (see rl_kernels/logprob.h).
// One block per row of the float32 logits tile. The forward reads each logit
// once: every thread keeps an online (max, sum, sum x) over a strided slice of
// the row and the block merges the partial triples, so the epilogue costs one
// pass over the tile. The backward is elementwise and writes the gradient in
// the dtype the following GEMMs read, which saves a separate cast pass.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "rl_kernels/logprob.h"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct Stats {
  float max;  // max x over the columns seen (-inf: none yet)
  float sum;  // sum exp(x - max)
  float sx;   // sum exp(x - max) * x
};

// Statistics of two disjoint column sets, combined. expf(-inf) = 0 makes an
// empty side vanish; only "both empty" needs a guard (inf - inf is NaN).
__device__ __forceinline__ Stats merge(Stats a, Stats b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return a;
  const float fa = expf(a.max - m);
  const float fb = expf(b.max - m);
  return {m, a.sum * fa + b.sum * fb, a.sx * fa + b.sx * fb};
}

__device__ __forceinline__ Stats warp_merge(Stats s) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Stats other{__shfl_xor_sync(0xffffffffu, s.max, offset),
                      __shfl_xor_sync(0xffffffffu, s.sum, offset),
                      __shfl_xor_sync(0xffffffffu, s.sx, offset)};
    s = merge(s, other);
  }
  return s;
}

// The merged statistics of the whole block, valid in thread 0.
__device__ Stats block_merge(Stats s) {
  __shared__ Stats partial[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  s = warp_merge(s);
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kWarps ? partial[lane] : Stats{-INFINITY, 0.0f, 0.0f};
    s = warp_merge(s);
  }
  return s;
}

__global__ void forward_kernel(const float* __restrict__ logits, int64_t cols, int64_t ld,
                               const int64_t* __restrict__ labels, int64_t col_start, float scale,
                               float* row_max, float* row_sum, float* row_sx, float* label_x) {
  const int64_t r = blockIdx.x;
  const float* z = logits + r * ld;
  Stats s{-INFINITY, 0.0f, 0.0f};
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float x = z[j] * scale;
    if (x > s.max) {  // a new maximum: rescale what was summed under the old one
      const float rescale = expf(s.max - x);
      s = {x, s.sum * rescale + 1.0f, s.sx * rescale + x};
    } else {
      const float e = expf(x - s.max);
      s.sum += e;
      s.sx += e * x;
    }
  }
  s = block_merge(s);
  if (threadIdx.x == 0) {
    const Stats total = merge({row_max[r], row_sum[r], row_sx[r]}, s);
    row_max[r] = total.max;
    row_sum[r] = total.sum;
    row_sx[r] = total.sx;
    const int64_t label = labels[r] - col_start;
    if (label >= 0 && label < cols) label_x[r] = z[label] * scale;
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// No __restrict__: `grad` may be `logits` (in place); each element is read
// and then written by the same thread.
template <typename T>
__global__ void backward_kernel(const float* logits, int64_t cols, int64_t ld,
                                const int64_t* labels, int64_t col_start, float scale,
                                const float* lse, const float* mean_x, const float* grad_logprob,
                                const float* grad_entropy, T* grad, int64_t ld_grad) {
  const int64_t r = blockIdx.x;
  const float* z = logits + r * ld;
  T* out = grad + r * ld_grad;
  const float row_lse = lse[r], mean = mean_x[r];
  const float g_lp = grad_logprob[r], g_h = grad_entropy[r];
  const int64_t label = labels[r] - col_start;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float x = z[j] * scale;
    const float p = expf(x - row_lse);
    float g = -g_lp * p - g_h * p * (x - mean);
    if (j == label) g += g_lp;
    out[j] = from_float<T>(g * scale);
  }
}

rl_status_t check(const void* logits, int64_t rows, int64_t cols, int64_t ld, const void* labels) {
  if (rows < 0 || cols < 0 || ld < cols) return RL_ERR_BAD_SIZE;
  if (rows > 2147483647) return RL_ERR_BAD_SIZE;  // one block per row: gridDim.x limit
  if (rows > 0 && cols > 0 && (logits == nullptr || labels == nullptr)) return RL_ERR_NULL_POINTER;
  return RL_OK;
}

rl_status_t launched() { return cudaGetLastError() == cudaSuccess ? RL_OK : RL_ERR_CUDA; }

}  // namespace

extern "C" rl_status_t rl_logprob_tile_forward_cuda(const float* logits, int64_t rows,
                                                    int64_t cols, int64_t ld,
                                                    const int64_t* labels, int64_t col_start,
                                                    float scale, float* row_max, float* row_sum,
                                                    float* row_sx, float* label_x,
                                                    rl_cuda_stream_t stream) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK || rows == 0 || cols == 0) return status;
  if (row_max == nullptr || row_sum == nullptr || row_sx == nullptr || label_x == nullptr) {
    return RL_ERR_NULL_POINTER;
  }
  forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0,
                   reinterpret_cast<cudaStream_t>(stream)>>>(
      logits, cols, ld, labels, col_start, scale, row_max, row_sum, row_sx, label_x);
  return launched();
}

extern "C" rl_status_t rl_logprob_tile_backward_cuda(
    const float* logits, int64_t rows, int64_t cols, int64_t ld, const int64_t* labels,
    int64_t col_start, float scale, const float* lse, const float* mean_x,
    const float* grad_logprob, const float* grad_entropy, void* grad, int32_t grad_dtype,
    int64_t ld_grad, rl_cuda_stream_t stream) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK) return status;
  if (rl_dtype_size(grad_dtype) == 0) return RL_ERR_BAD_DTYPE;
  if (ld_grad < cols) return RL_ERR_BAD_SIZE;
  if (rows == 0 || cols == 0) return RL_OK;
  if (grad == nullptr || lse == nullptr || mean_x == nullptr || grad_logprob == nullptr ||
      grad_entropy == nullptr) {
    return RL_ERR_NULL_POINTER;
  }
  const dim3 grid(static_cast<unsigned>(rows));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  switch (grad_dtype) {
    case RL_FLOAT32:
      backward_kernel<float><<<grid, kThreads, 0, s>>>(logits, cols, ld, labels, col_start, scale,
                                                       lse, mean_x, grad_logprob, grad_entropy,
                                                       static_cast<float*>(grad), ld_grad);
      break;
    case RL_FLOAT16:
      backward_kernel<__half><<<grid, kThreads, 0, s>>>(logits, cols, ld, labels, col_start,
                                                        scale, lse, mean_x, grad_logprob,
                                                        grad_entropy, static_cast<__half*>(grad),
                                                        ld_grad);
      break;
    default:
      backward_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(
          logits, cols, ld, labels, col_start, scale, lse, mean_x, grad_logprob, grad_entropy,
          static_cast<__nv_bfloat16*>(grad), ld_grad);
      break;
  }
  return launched();
}
