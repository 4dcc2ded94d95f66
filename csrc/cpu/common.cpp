#include "rl_kernels/common.h"

extern "C" const char* rl_status_string(rl_status_t status) {
  switch (status) {
    case RL_OK: return "ok";
    case RL_ERR_BAD_DTYPE: return "unsupported dtype (expected float32, float16 or bfloat16)";
    case RL_ERR_OUT_OF_BOUNDS: return "a segment lies outside the bucket";
    case RL_ERR_NULL_POINTER: return "null pointer";
    case RL_ERR_BAD_SIZE: return "negative size or offset";
    case RL_ERR_CUDA: return "CUDA launch failed";
  }
  return "unknown status";
}

extern "C" int rl_dtype_size(int32_t dtype) {
  switch (dtype) {
    case RL_FLOAT32: return 4;
    case RL_FLOAT16: return 2;
    case RL_BFLOAT16: return 2;
    default: return 0;
  }
}
