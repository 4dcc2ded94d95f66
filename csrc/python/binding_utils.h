// Helpers shared by the pybind11 modules: pointers travel as Python ints.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "rl_kernels/common.h"

namespace rl_kernels::python {

template <typename T>
T* as_pointer(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

inline void check(rl_status_t status, const char* op) {
  if (status != RL_OK) {
    throw std::runtime_error(std::string(op) + ": " + rl_status_string(status));
  }
}

}  // namespace rl_kernels::python
