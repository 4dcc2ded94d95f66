// rl.kernels._C_cuda: the CUDA implementations, bound without torch. Kept in a
// module of its own so that the CPU module never needs the CUDA runtime.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include "binding_utils.h"
#include "rl_kernels/bucket.h"
#include "rl_kernels/logprob.h"

namespace py = pybind11;
using rl_kernels::python::as_pointer;
using rl_kernels::python::check;

namespace {

void bucket_pack(std::uintptr_t segments_device, int64_t num_segments, int64_t max_numel,
                 std::uintptr_t bucket, int32_t bucket_dtype, std::uintptr_t stream) {
  check(rl_bucket_pack_cuda(as_pointer<const rl_segment_t>(segments_device), num_segments,
                            max_numel, as_pointer<void>(bucket), bucket_dtype,
                            as_pointer<CUstream_st>(stream)),
        "bucket_pack (cuda)");
}

void bucket_unpack(std::uintptr_t segments_device, int64_t num_segments, int64_t max_numel,
                   std::uintptr_t bucket, int32_t bucket_dtype, std::uintptr_t stream) {
  check(rl_bucket_unpack_cuda(as_pointer<const rl_segment_t>(segments_device), num_segments,
                              max_numel, as_pointer<const void>(bucket), bucket_dtype,
                              as_pointer<CUstream_st>(stream)),
        "bucket_unpack (cuda)");
}

void logprob_tile_forward(std::uintptr_t logits, int64_t rows, int64_t cols, int64_t ld,
                          std::uintptr_t labels, int64_t col_start, float scale,
                          std::uintptr_t row_max, std::uintptr_t row_sum, std::uintptr_t row_sx,
                          std::uintptr_t label_x, std::uintptr_t stream) {
  check(rl_logprob_tile_forward_cuda(as_pointer<const float>(logits), rows, cols, ld,
                                     as_pointer<const int64_t>(labels), col_start, scale,
                                     as_pointer<float>(row_max), as_pointer<float>(row_sum),
                                     as_pointer<float>(row_sx), as_pointer<float>(label_x),
                                     as_pointer<CUstream_st>(stream)),
        "logprob_tile_forward (cuda)");
}

void logprob_tile_backward(std::uintptr_t logits, int64_t rows, int64_t cols, int64_t ld,
                           std::uintptr_t labels, int64_t col_start, float scale,
                           std::uintptr_t lse, std::uintptr_t mean_x, std::uintptr_t grad_logprob,
                           std::uintptr_t grad_entropy, std::uintptr_t grad, int32_t grad_dtype,
                           int64_t ld_grad, std::uintptr_t stream) {
  check(rl_logprob_tile_backward_cuda(
            as_pointer<const float>(logits), rows, cols, ld, as_pointer<const int64_t>(labels),
            col_start, scale, as_pointer<const float>(lse), as_pointer<const float>(mean_x),
            as_pointer<const float>(grad_logprob), as_pointer<const float>(grad_entropy),
            as_pointer<void>(grad), grad_dtype, ld_grad, as_pointer<CUstream_st>(stream)),
        "logprob_tile_backward (cuda)");
}

py::dict build_info() {
  py::dict info;
  info["cuda_runtime"] = CUDART_VERSION;
  info["architectures"] = RL_KERNELS_CUDA_ARCHITECTURES;
  return info;
}

}  // namespace

PYBIND11_MODULE(_C_cuda, m) {
  m.doc() = "rl-kernels CUDA implementations (framework-free; pointers and streams as ints)";
  m.def("bucket_pack", &bucket_pack, py::arg("segments_device"), py::arg("num_segments"),
        py::arg("max_numel"), py::arg("bucket"), py::arg("bucket_dtype"), py::arg("stream"));
  m.def("bucket_unpack", &bucket_unpack, py::arg("segments_device"), py::arg("num_segments"),
        py::arg("max_numel"), py::arg("bucket"), py::arg("bucket_dtype"), py::arg("stream"));
  m.def("logprob_tile_forward", &logprob_tile_forward, py::arg("logits"), py::arg("rows"),
        py::arg("cols"), py::arg("ld"), py::arg("labels"), py::arg("col_start"), py::arg("scale"),
        py::arg("row_max"), py::arg("row_sum"), py::arg("row_sx"), py::arg("label_x"),
        py::arg("stream"));
  m.def("logprob_tile_backward", &logprob_tile_backward, py::arg("logits"), py::arg("rows"),
        py::arg("cols"), py::arg("ld"), py::arg("labels"), py::arg("col_start"), py::arg("scale"),
        py::arg("lse"), py::arg("mean_x"), py::arg("grad_logprob"), py::arg("grad_entropy"),
        py::arg("grad"), py::arg("grad_dtype"), py::arg("ld_grad"), py::arg("stream"));
  m.def("build_info", &build_info);
}
