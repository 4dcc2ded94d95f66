// rl.kernels._C: the CPU implementations, bound without torch.
#include <pybind11/pybind11.h>

#include "binding_utils.h"
#include "rl_kernels/bucket.h"
#include "rl_kernels/logprob.h"
#include "rl_kernels/partition.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace py = pybind11;
using rl_kernels::python::as_pointer;
using rl_kernels::python::check;

namespace {

void bucket_pack(std::uintptr_t segments, int64_t num_segments, std::uintptr_t bucket,
                 int32_t bucket_dtype, int64_t bucket_numel, int num_threads) {
  py::gil_scoped_release release;
  check(rl_bucket_pack_cpu(as_pointer<const rl_segment_t>(segments), num_segments,
                           as_pointer<void>(bucket), bucket_dtype, bucket_numel, num_threads),
        "bucket_pack");
}

void bucket_unpack(std::uintptr_t segments, int64_t num_segments, std::uintptr_t bucket,
                   int32_t bucket_dtype, int64_t bucket_numel, int num_threads) {
  py::gil_scoped_release release;
  check(rl_bucket_unpack_cpu(as_pointer<const rl_segment_t>(segments), num_segments,
                             as_pointer<const void>(bucket), bucket_dtype, bucket_numel,
                             num_threads),
        "bucket_unpack");
}

void logprob_tile_forward(std::uintptr_t logits, int64_t rows, int64_t cols, int64_t ld,
                          std::uintptr_t labels, int64_t col_start, float scale,
                          std::uintptr_t row_max, std::uintptr_t row_sum, std::uintptr_t row_sx,
                          std::uintptr_t label_x, int num_threads) {
  py::gil_scoped_release release;
  check(rl_logprob_tile_forward(as_pointer<const float>(logits), rows, cols, ld,
                                as_pointer<const int64_t>(labels), col_start, scale,
                                as_pointer<float>(row_max), as_pointer<float>(row_sum),
                                as_pointer<float>(row_sx), as_pointer<float>(label_x), num_threads),
        "logprob_tile_forward");
}

void logprob_tile_backward(std::uintptr_t logits, int64_t rows, int64_t cols, int64_t ld,
                           std::uintptr_t labels, int64_t col_start, float scale,
                           std::uintptr_t lse, std::uintptr_t mean_x, std::uintptr_t grad_logprob,
                           std::uintptr_t grad_entropy, int num_threads) {
  py::gil_scoped_release release;
  check(rl_logprob_tile_backward(as_pointer<float>(logits), rows, cols, ld,
                                 as_pointer<const int64_t>(labels), col_start, scale,
                                 as_pointer<const float>(lse), as_pointer<const float>(mean_x),
                                 as_pointer<const float>(grad_logprob),
                                 as_pointer<const float>(grad_entropy), num_threads),
        "logprob_tile_backward");
}

void partition_kk(std::uintptr_t workloads, int64_t n, int64_t k, bool equal_size,
                  std::uintptr_t part_of_item) {
  py::gil_scoped_release release;
  check(rl_partition_kk(as_pointer<const double>(workloads), n, k, equal_size ? 1 : 0,
                        as_pointer<int64_t>(part_of_item)),
        "partition_kk");
}

int64_t partition_capped(std::uintptr_t lengths, std::uintptr_t workloads, int64_t n,
                         int64_t max_tokens, int64_t min_parts, std::uintptr_t part_of_item) {
  int64_t num_parts = 0;
  py::gil_scoped_release release;
  check(rl_partition_capped(as_pointer<const int64_t>(lengths), as_pointer<const double>(workloads),
                            n, max_tokens, min_parts, as_pointer<int64_t>(part_of_item),
                            &num_parts),
        "partition_capped");
  return num_parts;
}

py::dict build_info() {
  py::dict info;
#ifdef _OPENMP
  info["openmp"] = _OPENMP;
#else
  info["openmp"] = py::none();
#endif
  info["compiler"] = __VERSION__;
  info["segment_bytes"] = sizeof(rl_segment_t);
  return info;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "rl-kernels CPU implementations (framework-free; pointers as ints)";
  m.def("bucket_pack", &bucket_pack, py::arg("segments"), py::arg("num_segments"),
        py::arg("bucket"), py::arg("bucket_dtype"), py::arg("bucket_numel"),
        py::arg("num_threads") = 0);
  m.def("bucket_unpack", &bucket_unpack, py::arg("segments"), py::arg("num_segments"),
        py::arg("bucket"), py::arg("bucket_dtype"), py::arg("bucket_numel"),
        py::arg("num_threads") = 0);
  m.def("logprob_tile_forward", &logprob_tile_forward);
  m.def("logprob_tile_backward", &logprob_tile_backward);
  m.def("partition_kk", &partition_kk, py::arg("workloads"), py::arg("n"), py::arg("k"),
        py::arg("equal_size"), py::arg("part_of_item"));
  m.def("partition_capped", &partition_capped, py::arg("lengths"), py::arg("workloads"),
        py::arg("n"), py::arg("max_tokens"), py::arg("min_parts"), py::arg("part_of_item"));
  m.def("build_info", &build_info);
}
