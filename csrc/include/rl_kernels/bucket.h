// Bucket pack/unpack for weight resharding: many tensors <-> one flat buffer.
//
// A bucket is a flat array of one dtype. Each segment names one tensor
// (`data`, `numel` elements of `dtype`) and where it lives in the bucket
// (`offset`, in bucket elements). Packing casts every segment into the bucket;
// unpacking casts the bucket slices back into the segments' own memory.
// Offsets may be arbitrary (misaligned) but segments must lie inside the bucket.
#pragma once

#include "rl_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// 32 bytes, laid out as four int64 so that Python can build a table of
// segments as an int64 tensor of shape [n, 4] and pass its pointer.
typedef struct rl_segment {
  void* data;      // the tensor's memory (read by pack, written by unpack)
  int64_t numel;   // number of elements
  int64_t offset;  // first element inside the bucket
  int32_t dtype;   // rl_dtype_t of `data`
  int32_t reserved;
} rl_segment_t;

// CPU. `num_threads` <= 0 lets OpenMP decide.
rl_status_t rl_bucket_pack_cpu(const rl_segment_t* segments, int64_t num_segments,
                               void* bucket, int32_t bucket_dtype, int64_t bucket_numel,
                               int num_threads);
rl_status_t rl_bucket_unpack_cpu(const rl_segment_t* segments, int64_t num_segments,
                                 const void* bucket, int32_t bucket_dtype,
                                 int64_t bucket_numel, int num_threads);

// CUDA. `segments_device` is the segment table in device memory (the caller
// checked it against the bucket on the host); `max_numel` is the largest
// segment, used to size the grid. Asynchronous on `stream`.
typedef struct CUstream_st* rl_cuda_stream_t;  // same type as cudaStream_t
rl_status_t rl_bucket_pack_cuda(const rl_segment_t* segments_device, int64_t num_segments,
                                int64_t max_numel, void* bucket, int32_t bucket_dtype,
                                rl_cuda_stream_t stream);
rl_status_t rl_bucket_unpack_cuda(const rl_segment_t* segments_device, int64_t num_segments,
                                  int64_t max_numel, const void* bucket, int32_t bucket_dtype,
                                  rl_cuda_stream_t stream);

#ifdef __cplusplus
}
#endif
