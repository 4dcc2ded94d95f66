// Scalar conversions between float32 and the 16-bit float formats, rounding to
// nearest-even exactly as torch's `.to()` does, so packed buckets are
// bit-identical to the torch reference.
#pragma once

#include <cstdint>
#include <cstring>

namespace rl_kernels {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // canonical quiet NaN, as torch
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    // Subnormal: shift the leading one into the implicit position.
    int shifts = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shifts;
    }
    mantissa &= 0x3FFu;
    exponent = static_cast<uint32_t>(127 - 15 + 1 - shifts);
    return bits_float(sign | (exponent << 23) | (mantissa << 13));
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round-to-nearest-even of `value >> shift` (shift >= 1).
inline uint32_t shift_round_even(uint32_t value, int shift) {
  const uint32_t quotient = value >> shift;
  const uint32_t remainder = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return quotient + ((remainder > half || (remainder == half && (quotient & 1u))) ? 1u : 0u);
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;    // NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // rounds to infinity (>= 65520)
  if (magnitude >= 0x38800000u) {                        // normal half
    return sign | static_cast<uint16_t>(shift_round_even(magnitude - 0x38000000u, 13));
  }
  const int exponent = static_cast<int>(magnitude >> 23);
  if (exponent < 102) return sign;  // below half the smallest subnormal: rounds to zero
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<uint16_t>(shift_round_even(mantissa, 126 - exponent));
}

}  // namespace rl_kernels
