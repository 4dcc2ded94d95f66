// Framework-free C API shared by every op of the compiled core.
// No torch headers: callers pass plain pointers, sizes and (for CUDA) a stream.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element types the ops accept. The numbering is part of the ABI with the
// Python bindings (rl/kernels/_dtypes.py): never renumber, only append.
typedef enum rl_dtype {
  RL_FLOAT32 = 0,
  RL_FLOAT16 = 1,
  RL_BFLOAT16 = 2,
} rl_dtype_t;

// Status codes returned by every entry point; 0 is success.
typedef enum rl_status {
  RL_OK = 0,
  RL_ERR_BAD_DTYPE = 1,
  RL_ERR_OUT_OF_BOUNDS = 2,
  RL_ERR_NULL_POINTER = 3,
  RL_ERR_BAD_SIZE = 4,
  RL_ERR_CUDA = 5,
} rl_status_t;

// Human-readable text for a status code (static storage, never NULL).
const char* rl_status_string(rl_status_t status);

// Bytes per element of `dtype`, or 0 when the dtype is unknown.
int rl_dtype_size(int32_t dtype);

#ifdef __cplusplus
}
#endif
