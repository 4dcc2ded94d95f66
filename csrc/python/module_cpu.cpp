// rl.kernels._C: the CPU implementations, bound without torch.
#include <pybind11/pybind11.h>

#include "binding_utils.h"
#include "rl_kernels/bucket.h"

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
  m.def("build_info", &build_info);
}
