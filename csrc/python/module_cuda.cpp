// rl.kernels._C_cuda: the CUDA implementations, bound without torch. Kept in a
// module of its own so that the CPU module never needs the CUDA runtime.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include "binding_utils.h"
#include "rl_kernels/bucket.h"

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
  m.def("build_info", &build_info);
}
