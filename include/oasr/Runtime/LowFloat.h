//===- LowFloat.h - bf16 and f16 elements in the runtime --------*- C++ -*-===//
//
// Conversions between f32 and the 16-bit float types, bit-exact on every
// host (round to nearest, ties to even), shared by the gradient wire, the
// Cast kernel and the CPU backend's widening of kernels without a 16-bit
// path. Plain C++, so the CUDA backend's host code can use them too.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_LOWFLOAT_H
#define OASR_RUNTIME_LOWFLOAT_H

#include "oasr/Runtime/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace oasr::rt {

/// Round to nearest, ties to even; NaN stays a (quiet) NaN, values beyond
/// the type's range become infinities (f16: |x| >= 65520). bf16's are
/// inline and branch-free, so kernel loops over bf16 vectorize.
inline uint16_t floatToBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even
  // (and carries into the exponent, up to infinity, where it must).
  uint16_t rounded = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  uint16_t quietNaN = uint16_t((u >> 16) | 0x40u); // sign kept
  return (u & 0x7fffffffu) > 0x7f800000u ? quietNaN : rounded;
}
uint16_t floatToF16(float x);
/// Exact.
inline float bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
float f16ToFloat(uint16_t h);

/// dst[i] = float(src[i]) for `n` elements of `type` (BF16 or F16).
void widenToF32(DType type, const void *src, float *dst, size_t n);
/// dst[i] = round(src[i]) in `type` (BF16 or F16).
void narrowFromF32(DType type, const float *src, void *dst, size_t n);

} // namespace oasr::rt

#endif // OASR_RUNTIME_LOWFLOAT_H
