// CUDA bucket pack/unpack: one launch for all segments of a bucket.
// blockIdx.y picks the segment, blocks along x stride over its elements, so a
// bucket of hundreds of tensors costs one launch instead of hundreds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "rl_kernels/bucket.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxSegmentsPerLaunch = 65535;  // gridDim.y limit
constexpr int kMaxBlocksX = 4096;

__device__ __forceinline__ float load_as_float(const void* base, int32_t dtype, int64_t i) {
  switch (dtype) {
    case RL_FLOAT32: return static_cast<const float*>(base)[i];
    case RL_FLOAT16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
}

__device__ __forceinline__ void store_float(void* base, int32_t dtype, int64_t i, float v) {
  switch (dtype) {
    case RL_FLOAT32: static_cast<float*>(base)[i] = v; break;
    case RL_FLOAT16: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
  }
}

// Same-dtype copies move raw 16/32-bit words so NaN payloads survive.
__device__ __forceinline__ void copy_element(const void* src, int32_t src_dtype, int64_t si,
                                             void* dst, int32_t dst_dtype, int64_t di) {
  if (src_dtype == dst_dtype) {
    if (src_dtype == RL_FLOAT32) {
      static_cast<uint32_t*>(dst)[di] = static_cast<const uint32_t*>(src)[si];
    } else {
      static_cast<uint16_t*>(dst)[di] = static_cast<const uint16_t*>(src)[si];
    }
  } else {
    store_float(dst, dst_dtype, di, load_as_float(src, src_dtype, si));
  }
}

template <bool kPack>
__global__ void bucket_kernel(const rl_segment_t* __restrict__ segments, void* bucket,
                              int32_t bucket_dtype) {
  const rl_segment_t seg = segments[blockIdx.y];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < seg.numel;
       i += stride) {
    if (kPack) {
      copy_element(seg.data, seg.dtype, i, bucket, bucket_dtype, seg.offset + i);
    } else {
      copy_element(bucket, bucket_dtype, seg.offset + i, seg.data, seg.dtype, i);
    }
  }
}

template <bool kPack>
rl_status_t launch(const rl_segment_t* segments, int64_t n, int64_t max_numel, void* bucket,
                   int32_t bucket_dtype, cudaStream_t stream) {
  if (n < 0 || max_numel < 0) return RL_ERR_BAD_SIZE;
  if (rl_dtype_size(bucket_dtype) == 0) return RL_ERR_BAD_DTYPE;
  if (n == 0 || max_numel == 0) return RL_OK;
  if (segments == nullptr || bucket == nullptr) return RL_ERR_NULL_POINTER;
  const int64_t blocks_needed = (max_numel + kThreads - 1) / kThreads;
  const unsigned blocks_x = static_cast<unsigned>(std::min<int64_t>(blocks_needed, kMaxBlocksX));
  for (int64_t first = 0; first < n; first += kMaxSegmentsPerLaunch) {
    const unsigned count = static_cast<unsigned>(std::min<int64_t>(n - first, kMaxSegmentsPerLaunch));
    bucket_kernel<kPack><<<dim3(blocks_x, count), kThreads, 0, stream>>>(segments + first, bucket,
                                                                          bucket_dtype);
  }
  return cudaGetLastError() == cudaSuccess ? RL_OK : RL_ERR_CUDA;
}

}  // namespace

extern "C" rl_status_t rl_bucket_pack_cuda(const rl_segment_t* segments_device,
                                           int64_t num_segments, int64_t max_numel, void* bucket,
                                           int32_t bucket_dtype, rl_cuda_stream_t stream) {
  return launch<true>(segments_device, num_segments, max_numel, bucket, bucket_dtype,
                      reinterpret_cast<cudaStream_t>(stream));
}

extern "C" rl_status_t rl_bucket_unpack_cuda(const rl_segment_t* segments_device,
                                             int64_t num_segments, int64_t max_numel,
                                             const void* bucket, int32_t bucket_dtype,
                                             rl_cuda_stream_t stream) {
  return launch<false>(segments_device, num_segments, max_numel, const_cast<void*>(bucket),
                       bucket_dtype, reinterpret_cast<cudaStream_t>(stream));
}
