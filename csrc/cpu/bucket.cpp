// CPU bucket pack/unpack: a cast-copy per segment, parallel over fixed-size
// chunks so that one huge tensor and many tiny ones both keep every core busy.
#include "rl_kernels/bucket.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "float_convert.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace rl_kernels {
namespace {

constexpr int64_t kChunk = 1 << 16;  // elements per parallel work item

// Typed element access: uint16_t storage tagged by format, so each (src, dst)
// pair compiles to its own branch-free loop the compiler can vectorise.
struct F32 {
  using Storage = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
struct F16 {
  using Storage = uint16_t;
  static float load(uint16_t v) { return fp16_to_float(v); }
  static uint16_t store(float v) { return float_to_fp16(v); }
};
struct BF16 {
  using Storage = uint16_t;
  static float load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16(v); }
};

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RL_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RL_VECTOR_CLONES
#endif

template <typename Src, typename Dst>
RL_VECTOR_CLONES void convert_loop(const void* src, void* dst, int64_t count) {
  const auto* in = static_cast<const typename Src::Storage*>(src);
  auto* out = static_cast<typename Dst::Storage*>(dst);
  for (int64_t i = 0; i < count; ++i) out[i] = Dst::store(Src::load(in[i]));
}

template <typename Src>
void convert_from(const void* src, int32_t dst_dtype, void* dst, int64_t count) {
  switch (dst_dtype) {
    case RL_FLOAT32: convert_loop<Src, F32>(src, dst, count); break;
    case RL_FLOAT16: convert_loop<Src, F16>(src, dst, count); break;
    default: convert_loop<Src, BF16>(src, dst, count); break;
  }
}

// Copies `count` elements; same dtype is a plain memcpy (bit-exact, NaN payloads kept).
void cast_copy(const void* src, int32_t src_dtype, int64_t src_start, void* dst,
               int32_t dst_dtype, int64_t dst_start, int64_t count) {
  const char* src_at = static_cast<const char*>(src) + src_start * rl_dtype_size(src_dtype);
  char* dst_at = static_cast<char*>(dst) + dst_start * rl_dtype_size(dst_dtype);
  if (src_dtype == dst_dtype) {
    std::memcpy(dst_at, src_at, count * rl_dtype_size(src_dtype));
    return;
  }
  switch (src_dtype) {
    case RL_FLOAT32: convert_from<F32>(src_at, dst_dtype, dst_at, count); break;
    case RL_FLOAT16: convert_from<F16>(src_at, dst_dtype, dst_at, count); break;
    default: convert_from<BF16>(src_at, dst_dtype, dst_at, count); break;
  }
}

struct WorkItem {
  int64_t segment;
  int64_t start;
  int64_t count;
};

rl_status_t validate(const rl_segment_t* segments, int64_t n, const void* bucket,
                     int32_t bucket_dtype, int64_t bucket_numel) {
  if (n < 0 || bucket_numel < 0) return RL_ERR_BAD_SIZE;
  if (rl_dtype_size(bucket_dtype) == 0) return RL_ERR_BAD_DTYPE;
  if (n > 0 && segments == nullptr) return RL_ERR_NULL_POINTER;
  for (int64_t s = 0; s < n; ++s) {
    const rl_segment_t& seg = segments[s];
    if (rl_dtype_size(seg.dtype) == 0) return RL_ERR_BAD_DTYPE;
    if (seg.numel < 0 || seg.offset < 0) return RL_ERR_BAD_SIZE;
    if (seg.offset > bucket_numel || seg.numel > bucket_numel - seg.offset) {
      return RL_ERR_OUT_OF_BOUNDS;
    }
    if (seg.numel > 0 && (seg.data == nullptr || bucket == nullptr)) return RL_ERR_NULL_POINTER;
  }
  return RL_OK;
}

std::vector<WorkItem> split_into_chunks(const rl_segment_t* segments, int64_t n) {
  std::vector<WorkItem> items;
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t start = 0; start < segments[s].numel; start += kChunk) {
      items.push_back({s, start, std::min(kChunk, segments[s].numel - start)});
    }
  }
  return items;
}

template <bool kPack>
rl_status_t run(const rl_segment_t* segments, int64_t n, void* bucket, int32_t bucket_dtype,
                int64_t bucket_numel, int num_threads) {
  const rl_status_t status = validate(segments, n, bucket, bucket_dtype, bucket_numel);
  if (status != RL_OK) return status;
  const std::vector<WorkItem> items = split_into_chunks(segments, n);
  const int64_t num_items = static_cast<int64_t>(items.size());
#ifdef _OPENMP
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (num_items > 1)
#else
  (void)num_threads;
#endif
  for (int64_t k = 0; k < num_items; ++k) {
    const WorkItem& item = items[k];
    const rl_segment_t& seg = segments[item.segment];
    if (kPack) {
      cast_copy(seg.data, seg.dtype, item.start, bucket, bucket_dtype, seg.offset + item.start,
                item.count);
    } else {
      cast_copy(bucket, bucket_dtype, seg.offset + item.start, seg.data, seg.dtype, item.start,
                item.count);
    }
  }
  return RL_OK;
}

}  // namespace
}  // namespace rl_kernels

extern "C" rl_status_t rl_bucket_pack_cpu(const rl_segment_t* segments, int64_t num_segments,
                                          void* bucket, int32_t bucket_dtype,
                                          int64_t bucket_numel, int num_threads) {
  return rl_kernels::run<true>(segments, num_segments, bucket, bucket_dtype, bucket_numel,
                               num_threads);
}

extern "C" rl_status_t rl_bucket_unpack_cpu(const rl_segment_t* segments, int64_t num_segments,
                                            const void* bucket, int32_t bucket_dtype,
                                            int64_t bucket_numel, int num_threads) {
  // Unpacking only reads the bucket; the shared worker takes a mutable pointer.
  return rl_kernels::run<false>(segments, num_segments, const_cast<void*>(bucket), bucket_dtype,
                                bucket_numel, num_threads);
}
